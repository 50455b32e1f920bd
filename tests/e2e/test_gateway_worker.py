"""Gateway end to end against real `starcloud worker` processes (a tiny
generated checkpoint): response shapes field by field, a replica killed
under load, a decode worker killed mid-stream, a bad canary rolled back, a
slow replica, load shedding. The worker is deterministic (greedy sampling,
float32 in a fixed order), so an answer through the gateway can be compared
with the same request sent to a worker directly. Faults a real worker cannot
make (unreadiness, empty answers, 503s) stay in test_gateway.py with fake
workers."""
import json
import signal
import subprocess
import threading
import time
from http.server import ThreadingHTTPServer

import pytest
import requests

from conftest import BIN, free_port
from gwutil import metric, procs, sse_texts, wait_http  # noqa: F401
from test_gateway import Collector


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ckpt") / "tiny.bin")
    subprocess.run([BIN, "worker", "--gen-checkpoint", path], check=True, capture_output=True,
                   timeout=30)
    return path


def worker(procs, ckpt, version="1", role="both", *extra):
    port = free_port()
    p = subprocess.Popen([BIN, "worker", "--checkpoint", ckpt, "--listen", "127.0.0.1:%d" % port,
                          "--model", "tiny", "--version", version, "--role", role] + list(extra),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.procs.append(p)
    url = "http://127.0.0.1:%d" % port
    wait_http(url + "/v2/health/live")
    w = type("W", (), {})()
    w.url, w.proc, w.port, w.version, w.role, w.model = url, p, port, version, role, "tiny"
    return w


def counters(w):
    return requests.get(w.url + "/debug/counters", timeout=2).json()


def strip_volatile(j):
    """Drops what differs between two answers to the same request."""
    j = dict(j)
    for k in ("id", "created"):
        j.pop(k, None)
    return j


def load(gw, seconds, threads, body, path="/v1/completions"):
    codes, lock, stop = [], threading.Lock(), time.time() + seconds

    def run():
        s = requests.Session()
        while time.time() < stop:
            try:
                c = s.post(gw.url + path, json=body, timeout=10).status_code
            except requests.RequestException:
                c = 0
            with lock:
                codes.append(c)

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    return ts, codes


def test_shapes_match_the_worker_field_by_field(procs, ckpt):
    w = worker(procs, ckpt)
    gw = procs.gateway([w])
    body = {"model": "tiny", "prompt": "Once upon", "max_tokens": 6}
    direct = requests.post(w.url + "/v1/completions", json=body).json()
    r = requests.post(gw.url + "/v1/completions", json=body)
    assert r.status_code == 200
    assert r.headers["x-starcloud-replica"] == "127.0.0.1:%d" % w.port
    assert r.headers["x-starcloud-version"] == "1" and r.headers["traceparent"].startswith("00-")
    j = r.json()
    assert strip_volatile(j) == strip_volatile(direct)
    assert j["object"] == "text_completion" and j["model"] == "tiny"
    c = j["choices"][0]
    assert set(c) == {"index", "text", "logprobs", "finish_reason", "token_ids"}
    assert c["finish_reason"] == "length" and len(c["token_ids"]) == 6
    assert j["usage"]["completion_tokens"] == 6
    assert j["usage"]["total_tokens"] == j["usage"]["prompt_tokens"] + 6
    # name:version is removed before the body goes upstream.
    r = requests.post(gw.url + "/v1/completions", json=dict(body, model="tiny:1"))
    assert strip_volatile(r.json()) == strip_volatile(direct)
    # Chat.
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    d = requests.post(w.url + "/v1/chat/completions", json=chat).json()
    j = requests.post(gw.url + "/v1/chat/completions", json=chat).json()
    assert strip_volatile(j) == strip_volatile(d) and j["object"] == "chat.completion"
    assert j["choices"][0]["message"]["role"] == "assistant"
    # A stream: the same text, chunk by chunk, ending with [DONE].
    r = requests.post(gw.url + "/v1/completions", json=dict(body, stream=True), stream=True)
    assert r.headers["Content-Type"].startswith("text/event-stream")
    texts, done, events = sse_texts(r)
    assert done and "".join(texts) == direct["choices"][0]["text"]
    first = json.loads(events[0])
    assert first["object"] == "text_completion" and first["choices"][0]["finish_reason"] is None
    # KServe v2.
    inp = {"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1],
                       "data": ["Once upon"]}], "parameters": {"max_tokens": 5}}
    d = requests.post(w.url + "/v2/models/tiny/infer", json=inp).json()
    for path in ("/v2/models/tiny/infer", "/v2/models/tiny/versions/1/infer"):
        r = requests.post(gw.url + path, json=inp)
        assert r.status_code == 200, r.text
        j = r.json()
        assert {k: v for k, v in j.items() if k != "id"} == {k: v for k, v in d.items() if k != "id"}
        assert j["model_name"] == "tiny" and j["model_version"] == "1"
        assert [o["name"] for o in j["outputs"]] == ["text_output", "output_ids"]
    meta = requests.get(gw.url + "/v2/models/tiny").json()
    assert meta == requests.get(w.url + "/v2/models/tiny").json()
    assert meta["platform"] == "starcloud_llama2c"
    assert requests.get(gw.url + "/v2/models/tiny/ready").status_code == 200
    # The worker's own 400 passes through (a prompt longer than the context).
    r = requests.post(gw.url + "/v1/completions",
                      json={"model": "tiny", "prompt": "x" * 5000, "max_tokens": 1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt"


def post_ready(gw, path, body):
    """Posts until the gateway has a ready replica (its first probe may not
    have run yet on a loaded machine)."""
    deadline = time.time() + 30
    while True:
        r = requests.post(gw.url + path, json=body, timeout=30)
        if r.status_code != 503 or time.time() > deadline:
            return r
        time.sleep(0.2)


UNSUPPORTED = [
    ({"tool_choice": "auto"}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"parallel_tool_calls": True}, "parallel_tool_calls"),
    ({"top_k": 3}, "top_k"),
]


@pytest.mark.parametrize("split", [False, True], ids=["both", "prefill-decode"])
def test_unsupported_fields_refused_through_the_gateway(procs, ckpt, split):
    """A field no replica honours is refused by name (OpenAI's error), never
    dropped: with replicas of role both the worker's 400 passes through; split
    into prefill and decode, the prefill sees the client's whole request and
    refuses it before any work. At their neutral values the answer is the
    plain one."""
    ws = [worker(procs, ckpt, "1", "prefill"), worker(procs, ckpt, "1", "decode")] if split \
        else [worker(procs, ckpt)]
    gw = procs.gateway(ws)
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    plain = post_ready(gw, "/v1/chat/completions", chat)
    assert plain.status_code == 200, plain.text
    before = [counters(w)["prefills"] for w in ws]
    for extra, param in UNSUPPORTED:
        for stream in (False, True):
            r = requests.post(gw.url + "/v1/chat/completions",
                              json=dict(chat, stream=stream, **extra), timeout=30)
            assert r.status_code == 400, (extra, r.text)
            err = r.json()["error"]
            assert err["param"] == param and err["type"] == "invalid_request_error", err
            assert param in err["message"]
    assert [counters(w)["prefills"] for w in ws] == before
    r = requests.post(gw.url + "/v1/chat/completions", timeout=30,
                      json=dict(chat, tools=[], tool_choice="none", user="u",
                                response_format={"type": "text"}))
    assert r.status_code == 200, r.text
    assert r.json()["choices"] == plain.json()["choices"]


def test_kill_replica_under_load_no_failures(procs, ckpt):
    ws = [worker(procs, ckpt) for _ in range(3)]
    gw = procs.gateway(ws)
    ts, codes = load(gw, 3, 6, {"model": "tiny", "prompt": "x", "max_tokens": 2})
    time.sleep(1)
    ws[0].proc.send_signal(signal.SIGKILL)
    for t in ts:
        t.join()
    assert len(codes) > 50
    assert all(c == 200 for c in codes), [c for c in codes if c != 200]
    assert counters(ws[1])["model_requests"] > 0 and counters(ws[2])["model_requests"] > 0


def test_decode_killed_midstream_retried_without_second_prefill(procs, ckpt):
    port = free_port()
    col = ThreadingHTTPServer(("127.0.0.1", port), Collector)
    threading.Thread(target=col.serve_forever, daemon=True).start()
    try:
        ref = worker(procs, ckpt)
        pf = worker(procs, ckpt, "1", "prefill")
        bad = worker(procs, ckpt, "1", "decode", "--fail-decode-after-tokens", "3")
        good = worker(procs, ckpt, "1", "decode")
        gw = procs.gateway([pf, bad, good], "--otlp", "http://127.0.0.1:%d" % port)
        body = {"model": "tiny", "prompt": "Once upon a time", "max_tokens": 10}
        want = requests.post(ref.url + "/v1/completions", json=body).json()["choices"][0]["text"]
        tid = "5bf92f3577b34da6a3ce929d0e0e4736"
        # Until the broken decoder has been hit first (P2C draws at random).
        n = 0
        for _ in range(10):
            n += 1
            r = requests.post(gw.url + "/v1/completions", json=dict(body, stream=True),
                              stream=True, timeout=20,
                              headers={"traceparent": "00-%s-00f067aa0ba902b7-01" % tid})
            texts, done, _ = sse_texts(r)
            assert done and "".join(texts) == want  # one unbroken, identical stream
            if counters(bad)["decode_requests"] > 0:
                break
        cb, cg, cp = counters(bad), counters(good), counters(pf)
        assert cb["decode_requests"] >= 1 and cg["decode_requests"] >= 1
        assert cb["prefills"] == 0 and cg["prefills"] == 0
        # One prefill per request: the retried decode reused the KV handle.
        assert cp["prefills"] == n
        deadline = time.time() + 30
        while time.time() < deadline:
            mine = [s for s in Collector.spans if s["traceId"] == tid]
            if len([s for s in mine if role(s) == "decode"]) >= 2:
                break
            time.sleep(0.1)
        roles = [role(s) for s in mine if s["kind"] == 3]  # the gateway's attempts
        servers = [s for s in mine if s["kind"] == 2 and  # the gateway's own, not workers'
                   any(a["key"] == "starcloud.attempts" for a in s["attributes"])]
        assert roles.count("decode") >= 2 and roles.count("prefill") == len(servers)
    finally:
        col.shutdown()


def role(span):
    """starcloud.role of a gateway attempt's span, None for other spans."""
    for a in span.get("attributes", []):
        if a["key"] == "starcloud.role":
            return a["value"]["stringValue"]
    return None


def test_bad_canary_rolled_back(procs, ckpt):
    v1 = [worker(procs, ckpt, "1") for _ in range(2)]
    v2 = worker(procs, ckpt, "2", "both", "--fail-rate", "0.2")
    gw = procs.gateway(v1 + [v2], rollout="model=tiny,stable=1,canary=2,steps=10/50/100,"
                                          "window=1s,max-error-rate=0.05")
    ts, codes = load(gw, 5, 4, {"model": "tiny", "prompt": "x", "max_tokens": 1})
    for t in ts:
        t.join()
    st = requests.get(gw.url + "/admin/rollouts/tiny").json()
    assert st["state"] == "rolled_back" and st["weight"] == 0, st
    failed = sum(1 for c in codes if c != 200)
    assert len(codes) > 100 and failed / len(codes) < 0.05, (failed, len(codes))
    assert metric(gw, "starcloud_gateway_rollbacks_total", model="tiny") == 1
    before = counters(v2)["model_requests"]
    for _ in range(10):
        r = requests.post(gw.url + "/v1/completions", json={"model": "tiny", "prompt": "x",
                                                            "max_tokens": 1})
        assert r.headers["x-starcloud-version"] == "1"
    assert counters(v2)["model_requests"] == before


def test_slow_replica_gets_fewer_requests(procs, ckpt):
    fast = worker(procs, ckpt)
    slow = worker(procs, ckpt, "1", "both", "--latency-ms", "150")
    gw = procs.gateway([fast, slow])
    ts, codes = load(gw, 3, 6, {"model": "tiny", "prompt": "x", "max_tokens": 1})
    for t in ts:
        t.join()
    assert all(c == 200 for c in codes)
    nf, ns = counters(fast)["model_requests"], counters(slow)["model_requests"]
    assert nf > 3 * ns, (nf, ns)


def test_load_shedding_429(procs, ckpt):
    w = worker(procs, ckpt, "1", "both", "--latency-ms", "400")
    gw = procs.gateway([w], "--max-inflight", "2")
    res, lock = [], threading.Lock()

    def one():
        r = requests.post(gw.url + "/v1/completions",
                          json={"model": "tiny", "prompt": "x", "max_tokens": 1}, timeout=10)
        with lock:
            res.append((r.status_code, r.headers.get("Retry-After"), r.text))

    ts = [threading.Thread(target=one) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    codes = [c for c, _, _ in res]
    assert codes.count(200) >= 2 and codes.count(429) >= 1, codes
    for c, ra, text in res:
        if c == 429:
            err = json.loads(text)["error"]
            assert ra == "1" and err["type"] == "rate_limit_error" and err["code"] == "overloaded"
    assert metric(gw, "starcloud_gateway_shed_requests_total", model="tiny") >= 1
