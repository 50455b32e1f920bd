"""Helpers for the gateway tests: fake workers and a real `starcloud gateway`,
each a process on a free loopback port, stopped by the fixture."""
import json
import os
import signal
import subprocess
import time

import pytest
import requests

from conftest import BIN, free_port

HERE = os.path.dirname(os.path.abspath(__file__))


def wait_http(url, timeout=10, ok=(200, 503)):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if requests.get(url, timeout=0.5).status_code in ok:
                return
        except requests.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("no answer from " + url)


class Procs:
    def __init__(self, tmp):
        self.tmp = str(tmp)
        self.procs = []

    def worker(self, version="1", role="both", model="tiny", *extra):
        port = free_port()
        args = ["/usr/bin/python3", os.path.join(HERE, "fakeworker.py"), "--port", str(port), "--role", role,
                "--version", version, "--model", model] + list(extra)
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        url = "http://127.0.0.1:%d" % port
        wait_http(url + "/v2/health/live")
        w = type("W", (), {})()
        w.url, w.proc, w.port, w.version, w.role, w.model = url, p, port, version, role, model
        return w

    def openai_backend(self, name="org/fake-1b", *extra):
        """tests/e2e/fake_openai.py: an OpenAI-compatible server (vLLM's
        role) that knows its model as name."""
        port = free_port()
        args = ["/usr/bin/python3", os.path.join(HERE, "fake_openai.py"), "--port", str(port),
                "--name", name] + list(extra)
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        url = "http://127.0.0.1:%d" % port
        wait_http(url + "/health")
        w = type("O", (), {})()
        w.url, w.proc, w.port, w.name = url, p, port, name
        return w

    def gateway(self, workers, *extra, rollout=None):
        port = free_port()
        args = [BIN, "gateway", "--listen", "127.0.0.1:%d" % port, "--probe-interval", "500ms"]
        for w in workers:
            args += ["--backend", "model=%s,version=%s,url=%s,role=%s" % (w.model, w.version,
                                                                         w.url, w.role)]
        if rollout:
            args += ["--rollout", rollout]
        args += list(extra)
        log = open(os.path.join(self.tmp, "gateway-%d.log" % port), "w")
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
        self.procs.append(p)
        url = "http://127.0.0.1:%d" % port
        wait_http(url + "/healthz")
        g = type("G", (), {})()
        g.url, g.proc, g.log = url, p, log.name
        return g

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def procs(tmp_path):
    ps = Procs(tmp_path)
    yield ps
    ps.stop()


def completion(gw, model="tiny", stream=False, max_tokens=8, prompt="hello ", **kw):
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": stream}
    return requests.post(gw.url + "/v1/completions", json=body, stream=stream,
                         timeout=kw.get("timeout", 10))


def sse_texts(resp):
    """Reads a whole SSE answer; returns (texts, saw_done, raw events)."""
    texts, done, events = [], False, []
    for line in resp.iter_lines():
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        events.append(data)
        if data == b"[DONE]":
            done = True
            continue
        obj = json.loads(data)
        assert "error" not in obj, obj
        c = obj["choices"][0]
        texts.append(c.get("text") or c.get("delta", {}).get("content", ""))
    return texts, done, events


def counters(w):
    return requests.get(w.url + "/debug/counters", timeout=2).json()


def metric(gw, name, **labels):
    """Sum of the samples of metric name whose labels include labels."""
    total = 0.0
    for line in requests.get(gw.url + "/metrics", timeout=2).text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all('%s="%s"' % kv in line for kv in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total
