"""Gateway end to end against fake workers, for what a real worker cannot
produce: bad input refused before anything goes upstream, a stream broken
mid-way on `both` replicas, ejection after 503s, unreadiness, tracing, bad
flags. Real workers: test_gateway_worker.py."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

from conftest import free_port
from gwutil import completion, counters, metric, procs, sse_texts  # noqa: F401


def test_bad_requests_get_4xx_json(procs):
    w = procs.worker("1")
    gw = procs.gateway([w])
    cases = [
        ("/v1/completions", b"{not json", 400, "not valid JSON"),
        ("/v1/completions", b'{"prompt": "x"}', 400, "model"),
        ("/v1/completions", b'{"model": "tiny"}', 400, "prompt"),
        ("/v1/completions", b'{"model": "tiny", "prompt": "x", "stream": "yes"}', 400, "stream"),
        ("/v1/completions", b'{"model": "tiny", "prompt": "x", "max_tokens": -1}', 400,
         "max_tokens"),
        ("/v1/chat/completions", b'{"model": "tiny", "messages": []}', 400, "messages"),
        ("/v1/completions", b'{"model": "nope", "prompt": "x"}', 404, "no such model"),
        ("/v1/completions", b'{"model": "tiny:9", "prompt": "x"}', 404, "no such model"),
    ]
    for path, body, code, words in cases:
        r = requests.post(gw.url + path, data=body, headers={"Content-Type": "application/json"})
        assert r.status_code == code, (body, r.text)
        assert words in r.json()["error"]["message"], r.text
    r = requests.post(gw.url + "/v2/models/tiny/infer", json={"inputs": 3})
    assert r.status_code == 400 and "inputs" in r.json()["error"]
    r = requests.get(gw.url + "/v2/models/tiny/infer")
    assert r.status_code == 405
    r = requests.post(gw.url + "/v1/completions", data=b"x" * (5 << 20))
    assert r.status_code == 413
    assert counters(w)["completions"] == 0


def test_stream_broken_midway_continues_elsewhere(procs):
    bad = procs.worker("1", "both", "tiny", "--die-after-chunks", "3")
    good = procs.worker("1")
    gw = procs.gateway([bad, good])
    for _ in range(14):  # the picker may choose either first
        r = completion(gw, stream=True, max_tokens=10, timeout=10)
        texts, done, _ = sse_texts(r)
        assert "".join(texts) == "".join("t%d " % i for i in range(10))
        assert done
        if bad.proc.poll() is not None:
            break
    assert bad.proc.poll() is not None, "the dying replica was never picked"
    got = counters(good)
    assert got["completions"] >= 1


def test_failing_replica_is_ejected(procs):
    bad = procs.worker("1", "both", "tiny", "--fail-rate", "1", "--fail-status", "503")
    good = procs.worker("1")
    gw = procs.gateway([bad, good], "--max-retries", "2")
    for _ in range(40):
        assert completion(gw, max_tokens=1).status_code == 200
    assert metric(gw, "starcloud_gateway_ejections_total") == 1
    assert metric(gw, "starcloud_gateway_replica_up", replica="127.0.0.1:%d" % bad.port) == 0
    before = counters(bad)["completions"]
    for _ in range(20):
        assert completion(gw, max_tokens=1).status_code == 200
    assert counters(bad)["completions"] == before  # no traffic while ejected


def test_request_and_attempt_timeouts(procs):
    """--timeout ends a request with 504 on time, request after request (one
    gateway-wide deadline timer); --attempt-timeout moves a stuck attempt to
    another replica (the connection's lazily armed timer)."""
    slow = procs.worker("1", "both", "tiny", "--latency-ms", "3000")
    gw = procs.gateway([slow], "--timeout", "500ms")
    for _ in range(2):
        t0 = time.time()
        r = completion(gw, max_tokens=1)
        took = time.time() - t0
        assert r.status_code == 504, r.text
        assert r.json()["error"]["code"] == "timeout"
        assert 0.45 <= took < 2.5, took
    good = procs.worker("1")
    gw2 = procs.gateway([slow, good], "--attempt-timeout", "300ms", "--timeout", "10s")
    for _ in range(6):
        t0 = time.time()
        r = completion(gw2, max_tokens=1)
        assert r.status_code == 200, r.text
        assert time.time() - t0 < 2.5


def test_unready_replica_gets_no_traffic(procs):
    down = procs.worker("1", "both", "tiny", "--unready")
    up = procs.worker("1")
    gw = procs.gateway([down, up])
    time.sleep(1.0)  # a probe round
    for _ in range(10):
        r = completion(gw, max_tokens=1)
        assert r.headers["x-starcloud-replica"] == "127.0.0.1:%d" % up.port


class Collector(BaseHTTPRequestHandler):
    spans = []

    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers["Content-Length"])
        doc = json.loads(self.rfile.read(n))
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                Collector.spans.extend(ss["spans"])
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


def test_traceparent_propagated_and_spans_exported(procs):
    port = free_port()
    col = ThreadingHTTPServer(("127.0.0.1", port), Collector)
    threading.Thread(target=col.serve_forever, daemon=True).start()
    try:
        w = procs.worker("1")
        gw = procs.gateway([w], "--otlp", "http://127.0.0.1:%d" % port)
        tid = "4bf92f3577b34da6a3ce929d0e0e4736"
        r = requests.post(gw.url + "/v1/completions",
                          json={"model": "tiny", "prompt": "x", "max_tokens": 1},
                          headers={"traceparent": "00-%s-00f067aa0ba902b7-01" % tid})
        assert r.status_code == 200 and r.headers["traceparent"].startswith("00-" + tid)
        seen = counters(w)["traceparents"]
        assert any(t.startswith("00-" + tid + "-") for t in seen)
        deadline = time.time() + 30
        while time.time() < deadline and len([s for s in Collector.spans
                                              if s["traceId"] == tid]) < 2:
            time.sleep(0.1)
        mine = {s["kind"]: s for s in Collector.spans if s["traceId"] == tid}
        server, attempt = mine[2], mine[3]  # OTLP kinds: SERVER, CLIENT
        assert server["name"] == attempt["name"] == "POST /v1/completions"
        assert server["parentSpanId"] == "00f067aa0ba902b7"
        assert attempt["parentSpanId"] == server["spanId"]
        assert int(attempt["endTimeUnixNano"]) >= int(attempt["startTimeUnixNano"])
        # A malformed traceparent is ignored: a new trace starts.
        r = requests.post(gw.url + "/v1/completions",
                          json={"model": "tiny", "prompt": "x", "max_tokens": 1},
                          headers={"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"})
        assert not r.headers["traceparent"].startswith("00-" + "0" * 32)
    finally:
        col.shutdown()


def test_bad_flags_exit_2(procs):
    import subprocess
    from conftest import BIN
    for args in (["--backend", "model=m,version=1"], ["--backend", "model=m,version=1,url=ftp://x"],
                 ["--rollout", "model=m,stable=1,canary=1"], ["--timeout", "soon"],
                 ["--rollout", "model=m,stable=1,canary=2,steps=50/10"], ["--bogus", "1"],
                 # NaN, fractions where whole numbers are meant, trailing junk (issue 21):
                 # a NaN threshold would mean a canary that never rolls back.
                 ["--timeout", "nan"], ["--max-retries", "nan"], ["--max-error-rate", "nan"],
                 ["--max-inflight", "2.7"], ["--max-retries", "1x"], ["--retry-budget", "inf"],
                 ["--max-body", "65536.5"], ["--listen", "127.0.0.1:80x"],
                 ["--rollout", "model=m,stable=1,canary=2,max-error-rate=nan"],
                 ["--rollout", "model=m,stable=1,canary=2,window=nan"],
                 ["--backend", "model=m,version=1,url=http://127.0.0.1:1,weight=nan"],
                 ["--rollout", "model=m,stable=1,canary=2,min-requests=0"],
                 ["--rollout", "model=m,stable=1,canary=2,min-requests=2.5"],
                 ["--attempt-timeout", "0"], ["--idle-timeout", "nan"]):
        p = subprocess.run([BIN, "gateway"] + args, capture_output=True, text=True, timeout=5)
        assert p.returncode == 2, (args, p.stderr)
        assert "gateway:" in p.stderr and args[0] in p.stderr, (args, p.stderr)


class BigAnswer(BaseHTTPRequestHandler):
    """A KServe backend with a 300 KB answer; /cut/ sends half and closes."""
    protocol_version = "HTTP/1.1"
    body = json.dumps({"model_name": "big", "outputs": [{"name": "o", "datatype": "BYTES",
                                                         "shape": [1], "data": ["x" * 300000]}]}).encode()

    def log_message(self, *a):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        if "/versions/2/" in self.path:
            self.wfile.write(self.body[:100000])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(self.body)


def test_big_answer_streamed_through_and_a_cut_one_cut(procs):
    port = free_port()
    srv = ThreadingHTTPServer(("127.0.0.1", port), BigAnswer)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = "http://127.0.0.1:%d" % port
        w = type("W", (), {"model": "big", "url": url, "role": "both"})
        w1, w2 = w(), w()
        w1.version, w2.version = "1", "2"
        gw = procs.gateway([w1, w2])
        inp = {"inputs": [{"name": "x", "shape": [1], "datatype": "BYTES", "data": ["a"]}]}
        r = requests.post(gw.url + "/v2/models/big/versions/1/infer", json=inp, timeout=10)
        assert r.status_code == 200 and r.content == BigAnswer.body
        assert r.headers["x-starcloud-version"] == "1"
        # Cut after the first bytes went out: the client must see a broken
        # answer, never a complete-looking one.
        try:
            r = requests.post(gw.url + "/v2/models/big/versions/2/infer", json=inp, timeout=10)
            assert len(r.content) < len(BigAnswer.body)
            raise AssertionError("a cut answer looked complete")
        except requests.exceptions.ChunkedEncodingError:
            pass
        except requests.exceptions.ConnectionError:
            pass
    finally:
        srv.shutdown()
