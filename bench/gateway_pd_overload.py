"""A prefill pool driven past its capacity through the gateway: what the
clients get (docs/GATEWAY.md, "Prefill retries, admission and cancellation").

One real prefill worker made slow on purpose (--max-batch 1
--max-batch-tokens 4: a 200-byte prompt is 51 forward steps, one sequence at
a time) and one decode worker behind `starcloud gateway --attempt-timeout 1s
--timeout 10s`. The pool's capacity is measured first (8 clients in a closed
loop for 5 s), then requests arrive open loop (evenly spaced) at FACTOR x that
rate for SECONDS, each answered or given up on its own thread. For each
gateway binary given: answers by status and error code, how long the
answered and the refused took (p50 / p99), and the goodput (200s per second).

Usage: gateway_pd_overload.py CHECKPOINT BIN [BIN...] [--factor 2] [--seconds 20]"""
import argparse
import json
import socket
import subprocess
import threading
import time

import requests


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(args, health):
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            requests.get(health, timeout=0.5)
            return p
        except requests.RequestException:
            time.sleep(0.05)
    p.kill()
    raise RuntimeError("no answer from " + health)


BODY = {"model": "tiny", "prompt": "p" * 200, "max_tokens": 1}


def one(url, out, lock):
    t0 = time.time()
    try:
        r = requests.post(url + "/v1/completions", json=BODY, timeout=30)
        code = None
        if r.status_code != 200:
            try:
                code = r.json()["error"].get("code")
            except (ValueError, KeyError, AttributeError):
                code = "?"
        row = (r.status_code, code, time.time() - t0)
    except requests.RequestException as e:
        row = (0, type(e).__name__, time.time() - t0)
    with lock:
        out.append(row)


def capacity(url, seconds=5, clients=8):
    n, lock, stop = [0], threading.Lock(), time.time() + seconds

    def loop():
        s = requests.Session()
        while time.time() < stop:
            if s.post(url + "/v1/completions", json=BODY, timeout=30).status_code == 200:
                with lock:
                    n[0] += 1
    ts = [threading.Thread(target=loop) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return n[0] / seconds


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def run(binary, ckpt, factor, seconds):
    procs = []
    try:
        pp, dp, gp = free_port(), free_port(), free_port()
        procs.append(start([binary, "worker", "--checkpoint", ckpt, "--listen",
                            "127.0.0.1:%d" % pp, "--model", "tiny", "--role", "prefill",
                            "--max-batch", "1", "--max-batch-tokens", "4"],
                           "http://127.0.0.1:%d/v2/health/live" % pp))
        procs.append(start([binary, "worker", "--checkpoint", ckpt, "--listen",
                            "127.0.0.1:%d" % dp, "--model", "tiny", "--role", "decode"],
                           "http://127.0.0.1:%d/v2/health/live" % dp))
        url = "http://127.0.0.1:%d" % gp
        procs.append(start([binary, "gateway", "--listen", "127.0.0.1:%d" % gp,
                            "--backend", "model=tiny,version=1,url=http://127.0.0.1:%d,"
                            "role=prefill" % pp,
                            "--backend", "model=tiny,version=1,url=http://127.0.0.1:%d,"
                            "role=decode" % dp,
                            "--attempt-timeout", "1s", "--timeout", "10s"], url + "/healthz"))
        cap = capacity(url)
        rate = cap * factor
        out, lock, threads = [], threading.Lock(), []
        t0 = time.time()
        i = 0
        while True:
            at = t0 + i / rate
            if at > t0 + seconds:
                break
            time.sleep(max(0, at - time.time()))
            t = threading.Thread(target=one, args=(url, out, lock))
            t.start()
            threads.append(t)
            i += 1
        for t in threads:
            t.join()
        by = {}
        for st, code, _ in out:
            by["%d%s" % (st, " " + code if code else "")] = by.get(
                "%d%s" % (st, " " + code if code else ""), 0) + 1
        ok = [d for st, _, d in out if st == 200]
        bad = [d for st, _, d in out if st != 200]
        return {"binary": binary, "capacity_per_s": round(cap, 1), "offered_per_s": round(rate, 1),
                "sent": len(out), "answers": by,
                "ok_p50_s": round(pct(ok, 0.5), 3), "ok_p99_s": round(pct(ok, 0.99), 3),
                "refused_p50_s": round(pct(bad, 0.5), 3), "refused_p99_s": round(pct(bad, 0.99), 3),
                "goodput_per_s": round(len(ok) / seconds, 1)}
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--factor", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=20.0)
    a = ap.parse_args()
    for b in a.binaries:
        print(json.dumps(run(b, a.checkpoint, a.factor, a.seconds)), flush=True)


if __name__ == "__main__":
    main()
