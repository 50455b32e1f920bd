"""Clients that walk away from a stream (stop reading and close, RST,
half-close) must never take the gateway or the worker down: every daemon
ignores SIGPIPE, and a failed write closes that one connection."""
import json
import socket
import struct

import requests

import os
import subprocess

import pytest

from test_worker import BIN, Worker
from test_worker_gateway import gateway


@pytest.fixture(scope="module")
def slow_ckpt(tmp_path_factory):
    """A model large enough that a 400-token answer takes a while to stream,
    so the client is gone while the daemon is still writing."""
    path = tmp_path_factory.mktemp("ckpt") / "slow.bin"
    subprocess.run([BIN, "worker", "--gen-checkpoint", str(path), "--dim", "256", "--layers", "6",
                    "--heads", "8", "--kv-heads", "4", "--vocab", "512", "--seq-len", "512",
                    "--seed", "7"], capture_output=True, check=True)
    return path


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


def test_aborted_streams_leave_worker_and_gateway_up(slow_ckpt, tmp_path):
    w = Worker(slow_ckpt, "--max-tokens", "400", tmp=tmp_path)
    proc, url, log = gateway([(w, "both")], tmp_path)
    try:
        run_aborts(w.url, 150)
        run_aborts(url, 300)
        assert proc.poll() is None, "gateway died"
        assert w.proc.poll() is None, "worker died"
        r = requests.post(url + "/v1/completions", timeout=30,
                          json={"model": "tiny", "prompt": "still there", "max_tokens": 4})
        assert r.status_code == 200
    finally:
        proc.kill()
        proc.wait()
        w.stop()
