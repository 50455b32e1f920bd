"""Continuous batching of `starcloud worker`: aggregate tokens/s at 1, 8 and
32 concurrent streams, and how long a short request takes while a long one
is generating; each with batching (the default) and with --max-batch 1 (one
sequence at a time: what the worker did before batching).

Usage: worker_batch.py BIN CHECKPOINT [TOKENS] [CONCURRENCY,...]
Prints one line per measurement (docs/BENCHMARKS.md keeps the figures)."""
import json
import socket
import subprocess
import sys
import threading
import time

import requests

BIN, CKPT = sys.argv[1], sys.argv[2]
TOKENS = int(sys.argv[3]) if len(sys.argv) > 3 else 64
LEVELS = [int(x) for x in sys.argv[4].split(",")] if len(sys.argv) > 4 else [1, 8, 32]


def start(*extra):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = subprocess.Popen([BIN, "worker", "--checkpoint", CKPT, "--listen", "127.0.0.1:%d" % port,
                          "--max-tokens", "400", "--max-queue", "4096"] + list(extra),
                         stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    url = "http://127.0.0.1:%d" % port
    for _ in range(200):
        try:
            requests.get(url + "/healthz", timeout=0.5)
            return p, url
        except requests.RequestException:
            time.sleep(0.05)
    raise RuntimeError("worker did not start")


def stream(url, prompt, n, out):
    body = {"prompt": prompt, "max_tokens": n, "stream": True, "temperature": 0.8, "seed": 7}
    got = 0
    with requests.post(url + "/v1/completions", json=body, stream=True, timeout=600) as r:
        for line in r.iter_lines():
            if line.startswith(b"data: {"):
                got += len(json.loads(line[6:])["choices"][0]["token_ids"])
    out.append(got)


def throughput(url, c):
    out, threads = [], []
    t0 = time.time()
    for i in range(c):
        th = threading.Thread(target=stream, args=(url, "Once upon a time %d" % i, TOKENS, out))
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    return sum(out) / (time.time() - t0), sum(out)


def short_behind_long(url):
    """A 5-token request sent 0.3 s after a 200-token one started."""
    long = threading.Thread(target=stream, args=(url, "a long story", 200, []))
    long.start()
    time.sleep(0.3)
    t0 = time.time()
    requests.post(url + "/v1/completions", json={"prompt": "hi", "max_tokens": 5}, timeout=600)
    took = time.time() - t0
    long.join()
    return took


for label, extra in (("batched (--max-batch 32)", []), ("one at a time (--max-batch 1)",
                                                        ["--max-batch", "1"])):
    p, url = start(*extra)
    try:
        requests.post(url + "/v1/completions", json={"prompt": "warm", "max_tokens": 4})
        for c in LEVELS:
            tps, n = throughput(url, c)
            print("%s: %2d streams x %d tokens: %.0f tokens/s (%d tokens)" %
                  (label, c, TOKENS, tps, n), flush=True)
        print("%s: 5-token request behind a 200-token one: %.2f s" %
              (label, short_behind_long(url)), flush=True)
    finally:
        p.terminate()
        p.wait()
