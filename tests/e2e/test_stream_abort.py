"""Clients that walk away from a stream must never take the gateway or the
worker down, nor make them grow: every daemon ignores SIGPIPE, a failed
write closes that one connection, and the worker cancels what nobody reads.
600 streams are left every way a client leaves them: the TCP ways (stop
reading and close, RST, half-close) and the official OpenAI SDK's (leaving
the iteration, an AbortSignal, the SDK's timeout), against the worker and
through the gateway; both stay up, their memory stays flat, and nothing is
left generating."""
import json
import shutil
import socket
import struct
import time

import requests

from nodeutil import run_node
from test_worker import Worker
from test_worker_gateway import gateway


def abort_stream(host, port, path, body, how):
    s = socket.create_connection((host, port), timeout=10)
    data = json.dumps(body).encode()
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(data), data))
    s.recv(200)  # the head and perhaps a first chunk: the stream is under way
    if how == "rst":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    elif how == "half":
        s.shutdown(socket.SHUT_RDWR)
    s.close()


def run_aborts(url, n):
    host, port = url.split("//")[1].split(":")
    body = {"model": "tiny", "prompt": "the quick brown fox", "max_tokens": 400, "stream": True}
    for i in range(n):
        abort_stream(host, int(port), "/v1/completions", body, ("rst", "half", "close")[i % 3])


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def sdk_aborts(url, n):
    if not shutil.which("node"):
        return 0  # run_node would skip the whole test; the TCP aborts still count
    got = run_node("sdk_aborts.mjs", url, "tiny", n)
    assert got == {"break": n // 3, "abort": n // 3, "timeout": n // 3}, got
    return n


def settled(w):
    deadline = time.time() + 20
    while time.time() < deadline:
        c = w.counters()
        if c["sequences_running"] == 0 and c["sequences_waiting"] == 0:
            return c
        time.sleep(0.1)
    raise AssertionError("the worker keeps generating for nobody: %s" % w.counters())


def test_aborted_streams_leave_worker_and_gateway_up(slow_ckpt, tmp_path):
    w = Worker(slow_ckpt, "--max-tokens", "400", tmp=tmp_path)
    proc, url, log = gateway([(w, "both")], tmp_path)
    try:
        # Warm up every path once, so the memory measured is the steady one.
        run_aborts(w.url, 30)
        run_aborts(url, 30)
        sdk_aborts(w.url, 15)
        sdk_aborts(url, 15)
        settled(w)
        rss0 = (rss_kib(proc.pid), rss_kib(w.proc.pid))
        total = 0
        run_aborts(w.url, 150)
        run_aborts(url, 300)
        total += 450 + sdk_aborts(w.url, 60) + sdk_aborts(url, 90)
        assert total >= 450
        assert proc.poll() is None, "gateway died"
        assert w.proc.poll() is None, "worker died"
        c = settled(w)
        assert c["kv_cache_bytes"] == 0
        # The worker noticed (nearly) every one: a client that left before
        # anything was generated, or after the last token, is not counted.
        assert c["cancelled"] >= 0.8 * (total + 120), c
        rss1 = (rss_kib(proc.pid), rss_kib(w.proc.pid))
        # Flat: what 600 aborted streams left behind, beyond the warm-up.
        assert rss1[0] - rss0[0] < 4096, ("gateway RSS KiB", rss0[0], rss1[0])
        assert rss1[1] - rss0[1] < 8192, ("worker RSS KiB", rss0[1], rss1[1])
        r = requests.post(url + "/v1/completions", timeout=30,
                          json={"model": "tiny", "prompt": "still there", "max_tokens": 4})
        assert r.status_code == 200
        print("aborts %d, cancelled %d, RSS KiB gateway %d -> %d, worker %d -> %d" %
              (total, c["cancelled"], rss0[0], rss1[0], rss0[1], rss1[1]))
    finally:
        proc.kill()
        proc.wait()
        w.stop()
