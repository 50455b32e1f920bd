"""Gateway end to end: response shapes, bad input, failover, streaming resume,
balancing, load shedding, ejection and tracing, against fake workers."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

from conftest import free_port
from gwutil import completion, counters, metric, procs, sse_texts  # noqa: F401


def test_openai_and_kserve_shapes(procs):
    w = procs.worker("1")
    gw = procs.gateway([w])
    r = completion(gw)
    assert r.status_code == 200
    assert r.headers["x-starcloud-replica"] == "127.0.0.1:%d" % w.port
    assert r.headers["x-starcloud-version"] == "1"
    j = r.json()
    assert j["object"] == "text_completion" and j["model"] == "tiny"
    assert j["choices"][0]["text"].startswith("t0 ") and j["choices"][0]["finish_reason"]
    assert j["usage"]["completion_tokens"] == 8
    r = requests.post(gw.url + "/v1/chat/completions", json={
        "model": "tiny:1", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
    assert r.status_code == 200 and r.headers["x-starcloud-version"] == "1"
    j = r.json()
    assert j["object"] == "chat.completion"
    assert j["choices"][0]["message"] == {"role": "assistant", "content": "t0 t1 t2 "}
    m = requests.get(gw.url + "/v1/models").json()
    assert m["object"] == "list" and m["data"][0]["id"] == "tiny"
    assert m["data"][0]["object"] == "model" and m["data"][0]["versions"] == ["1"]
    inp = {"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "data": [1.0, 2.5]}]}
    for path in ("/v2/models/tiny/infer", "/v2/models/tiny/versions/1/infer"):
        r = requests.post(gw.url + path, json=inp)
        assert r.status_code == 200, r.text
        j = r.json()
        assert j["model_name"] == "tiny" and j["model_version"] == "1" and "id" in j
        assert j["outputs"] == [{"name": "output0", "shape": [2], "datatype": "FP32",
                                 "data": [2.0, 5.0]}]
    assert requests.get(gw.url + "/v2/health/live").status_code == 200
    assert requests.get(gw.url + "/v2/health/ready").status_code == 200
    assert requests.get(gw.url + "/v2/models/tiny/ready").status_code == 200
    assert requests.get(gw.url + "/v2/models/nope/ready").status_code == 400
    r = completion(gw, stream=True)
    assert r.headers["content-type"].startswith("text/event-stream")
    texts, done, _ = sse_texts(r)
    assert texts == ["t%d " % i for i in range(8)] and done
    assert metric(gw, "sc_gateway_requests_total", model="tiny", code="200") >= 5


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


def test_kill_replica_under_load_no_failures(procs):
    ws = [procs.worker("1") for _ in range(3)]
    gw = procs.gateway(ws)
    stop = time.time() + 4
    results = []

    def load():
        s = requests.Session()
        while time.time() < stop:
            r = s.post(gw.url + "/v1/completions",
                       json={"model": "tiny", "prompt": "x", "max_tokens": 2}, timeout=10)
            results.append(r.status_code)

    ts = [threading.Thread(target=load) for _ in range(6)]
    for t in ts:
        t.start()
    time.sleep(1.5)
    ws[0].proc.kill()
    for t in ts:
        t.join()
    assert len(results) > 100
    assert all(c == 200 for c in results), [c for c in results if c != 200][:5]
    assert metric(gw, "sc_gateway_retries_total") >= 1


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


def test_slow_replica_gets_fewer_requests(procs):
    slow = procs.worker("1", "both", "tiny", "--latency-ms", "150")
    fast = procs.worker("1")
    gw = procs.gateway([slow, fast])
    stop = time.time() + 3

    def load():
        s = requests.Session()
        while time.time() < stop:
            s.post(gw.url + "/v1/completions", json={"model": "tiny", "prompt": "x",
                                                     "max_tokens": 1}, timeout=10)

    ts = [threading.Thread(target=load) for _ in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    ns, nf = counters(slow)["completions"], counters(fast)["completions"]
    assert nf > 3 * ns, (ns, nf)


def test_load_shedding_429(procs):
    w = procs.worker("1", "both", "tiny", "--latency-ms", "600")
    gw = procs.gateway([w], "--max-inflight", "2")
    codes = []

    def one():
        codes.append(completion(gw, max_tokens=1).status_code)

    ts = [threading.Thread(target=one) for _ in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert codes.count(200) == 2 and codes.count(429) == 4, codes
    r = None
    for _ in range(3):
        r = requests.post(gw.url + "/v1/completions", json={"model": "tiny", "prompt": "x"})
    assert metric(gw, "sc_gateway_shed_total") == 4


def test_failing_replica_is_ejected(procs):
    bad = procs.worker("1", "both", "tiny", "--fail-rate", "1", "--fail-status", "503")
    good = procs.worker("1")
    gw = procs.gateway([bad, good], "--max-retries", "2")
    for _ in range(40):
        assert completion(gw, max_tokens=1).status_code == 200
    assert metric(gw, "sc_gateway_ejections_total") == 1
    assert metric(gw, "sc_gateway_replica_up", replica="127.0.0.1:%d" % bad.port) == 0
    before = counters(bad)["completions"]
    for _ in range(20):
        assert completion(gw, max_tokens=1).status_code == 200
    assert counters(bad)["completions"] == before  # no traffic while ejected


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
        deadline = time.time() + 5
        while time.time() < deadline and len([s for s in Collector.spans
                                              if s["traceId"] == tid]) < 2:
            time.sleep(0.1)
        mine = {s["name"]: s for s in Collector.spans if s["traceId"] == tid}
        assert mine["gateway request"]["parentSpanId"] == "00f067aa0ba902b7"
        assert mine["attempt"]["parentSpanId"] == mine["gateway request"]["spanId"]
        assert mine["gateway request"]["kind"] == 2
        assert int(mine["attempt"]["endTimeUnixNano"]) >= int(mine["attempt"]["startTimeUnixNano"])
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
                 ["--rollout", "model=m,stable=1,canary=2,steps=50/10"], ["--bogus", "1"]):
        p = subprocess.run([BIN, "gateway"] + args, capture_output=True, text=True, timeout=5)
        assert p.returncode == 2, (args, p.stderr)
        assert "gateway:" in p.stderr
