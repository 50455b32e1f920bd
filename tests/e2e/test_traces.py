"""Traces by OpenTelemetry's HTTP semantic conventions on the gateway and the
worker (src/net/otel.c): span names "METHOD route" (KServe model names
templated), the conventions' attribute names alike on both sides, server
spans Error only for 5xx and client spans for 4xx too, Unset otherwise, and
no span for health checks and readiness probes."""
import json
import os
import shutil
import subprocess
import threading
import time

import pytest
import requests

from conftest import BIN, CKPT_MICRO, free_port, gen_checkpoint, stop_process
from nodeutil import NODE_DIR


class Collector:
    """An OTLP/HTTP receiver that decodes with the OpenTelemetry project's
    own protocol definitions (tests/e2e/node/otlp_receiver.mjs, on
    @opentelemetry/otlp-transformer's compiled opentelemetry-proto) and
    refuses, with 400, what a collector would not take: unknown fields,
    wrong types, enums as names, ids of the wrong length."""
    spans = []    # (resource attributes, span) as decoded
    refused = []  # why each refused request was refused

    def __init__(self, log):
        node = shutil.which("node")
        if not node:
            pytest.skip("node is not installed (scripts/deps.sh installs nodejs and npm)")
        if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "@opentelemetry",
                                          "otlp-transformer")):
            pytest.fail("@opentelemetry/otlp-transformer is missing: run `make node-deps` "
                        "(npm ci in tests/e2e/node)")
        Collector.spans, Collector.refused = [], []
        self.proc = subprocess.Popen([node, os.path.join(NODE_DIR, "otlp_receiver.mjs")],
                                     cwd=NODE_DIR, stdout=subprocess.PIPE, stderr=log,
                                     text=True)
        first = json.loads(self.proc.stdout.readline() or "{}")
        assert "port" in first, "the OTLP receiver did not start (see procs.log)"
        self.url = "http://127.0.0.1:%d" % first["port"]
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.proc.stdout:
            doc = json.loads(line)
            if "refused" in doc:
                Collector.refused.append(doc["refused"])
                continue
            for rs in doc["ok"].get("resourceSpans", []):
                res = {a["key"]: a["value"]["stringValue"]
                       for a in rs.get("resource", {}).get("attributes", [])}
                for ss in rs.get("scopeSpans", []):
                    for sp in ss.get("spans", []):
                        sp.setdefault("status", {})
                        Collector.spans.append((res, sp))

    def stop(self):
        stop_process(self.proc)


def attrs(span):
    out = {}
    for a in span["attributes"]:
        v = a["value"]
        out[a["key"]] = int(v["intValue"]) if "intValue" in v else v["stringValue"]
    return out


@pytest.fixture
def stack(tmp_path):
    logs = open(tmp_path / "procs.log", "w")
    col = Collector(logs)
    otlp = col.url
    ckpt = tmp_path / "tiny.bin"
    gen_checkpoint(ckpt, **CKPT_MICRO)
    wport, gport = free_port(), free_port()
    w = subprocess.Popen([BIN, "worker", "--checkpoint", str(ckpt), "--model", "tiny",
                          "--listen", "127.0.0.1:%d" % wport, "--otlp", otlp, "--id", "w1"],
                         stdout=logs, stderr=logs)
    g = subprocess.Popen([BIN, "gateway", "--listen", "127.0.0.1:%d" % gport, "--otlp", otlp,
                          "--probe-interval", "200ms", "--backend",
                          "model=tiny,version=1,url=http://127.0.0.1:%d" % wport],
                         stdout=logs, stderr=logs)
    gw = "http://127.0.0.1:%d" % gport
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if requests.post(gw + "/v1/completions", json={"model": "tiny", "prompt": "a",
                                                           "max_tokens": 1}, timeout=2).ok:
                break
        except requests.RequestException:
            pass
        time.sleep(0.1)
    yield gw, "http://127.0.0.1:%d" % wport
    stop_process(g)
    stop_process(w)
    col.stop()
    logs.close()
    # Every export was OTLP the protocol's own definitions take.
    assert not Collector.refused, Collector.refused


def trace(tid, n, timeout=8):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = [(r, s) for r, s in Collector.spans if s["traceId"] == tid]
        if len(got) >= n:
            return got
        time.sleep(0.1)
    raise AssertionError("trace %s: %d spans, wanted %d" % (tid, len(got), n))


def test_names_attributes_and_status(stack):
    gw, wurl = stack
    tid = "0af7651916cd43dd8448eb211c80319c"
    r = requests.post(gw + "/v1/chat/completions", timeout=20,
                      headers={"traceparent": "00-%s-b7ad6b7169203331-01" % tid,
                               "User-Agent": "trace-test/1"},
                      json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                            "max_tokens": 2})
    assert r.status_code == 200, r.text
    got = trace(tid, 3)
    by = {(res["service.name"], s["kind"]): s for res, s in got}
    gsrv, gcli = by[("starcloud-gateway", 2)], by[("starcloud-gateway", 3)]
    wsrv = by[("starcloud-worker", 2)]
    # names: METHOD route, the same on both sides
    assert gsrv["name"] == gcli["name"] == wsrv["name"] == "POST /v1/chat/completions"
    # one tree: gateway server -> gateway client attempt -> worker server
    assert gsrv["parentSpanId"] == "b7ad6b7169203331"
    assert gcli["parentSpanId"] == gsrv["spanId"] and wsrv["parentSpanId"] == gcli["spanId"]
    ga, ca, wa = attrs(gsrv), attrs(gcli), attrs(wsrv)
    for a in (ga, wa):  # the conventions' server attributes, alike on both sides
        assert a["http.request.method"] == "POST" and a["http.route"] == "/v1/chat/completions"
        assert a["url.path"] == "/v1/chat/completions" and a["url.scheme"] == "http"
        assert a["http.response.status_code"] == 200 and a["network.protocol.version"] == "1.1"
        assert a["gen_ai.request.model"] == "tiny" and "server.port" in a
        assert "error.type" not in a
    assert ga["user_agent.original"] == "trace-test/1"
    assert ca["http.request.method"] == "POST" and ca["server.address"] == "127.0.0.1"
    assert ca["url.full"] == wurl + "/v1/chat/completions"
    assert ca["http.response.status_code"] == 200 and ca["starcloud.replica"]
    # old private names are gone
    for a in (ga, ca, wa):
        assert not {"http.status_code", "model", "version", "retries"} & set(a)
    for s in (gsrv, gcli, wsrv):
        assert s["status"] == {}, s["status"]  # Unset, never Ok
    resource = next(res for res, s in got if res["service.name"] == "starcloud-gateway")
    assert resource["service.version"] and resource["service.instance.id"]


def test_errors_per_the_spec(stack):
    gw, wurl = stack
    # a 4xx at the gateway (unknown model): the server span stays Unset
    tid = "1af7651916cd43dd8448eb211c80319c"
    r = requests.post(gw + "/v1/completions", json={"model": "nope", "prompt": "a"},
                      headers={"traceparent": "00-%s-b7ad6b7169203331-01" % tid})
    assert r.status_code == 404
    srv = [s for res, s in trace(tid, 1) if s["kind"] == 2][0]
    assert srv["status"] == {} and attrs(srv)["http.response.status_code"] == 404
    # a 4xx from the worker: its server span Unset, the gateway's client span Error
    tid = "2af7651916cd43dd8448eb211c80319c"
    r = requests.post(gw + "/v1/completions", json={"model": "tiny", "prompt": "x" * 400,
                                                     "max_tokens": 2},  # past seq_len
                      headers={"traceparent": "00-%s-b7ad6b7169203331-01" % tid})
    assert 400 <= r.status_code < 500, r.text
    got = trace(tid, 3)
    by = {(res["service.name"], s["kind"]): s for res, s in got}
    assert by[("starcloud-worker", 2)]["status"] == {}
    assert by[("starcloud-gateway", 2)]["status"] == {}
    cli = by[("starcloud-gateway", 3)]
    assert cli["status"]["code"] == 2 and attrs(cli)["error.type"] == str(r.status_code)
    # a 5xx: Error on the server span, with error.type
    tid = "3af7651916cd43dd8448eb211c80319c"
    requests.post(wurl + "/debug/fail-next", timeout=5)  # may not exist: the worker's 404
    r = requests.post(wurl + "/v2/models/tiny/versions/9/infer", json={"inputs": []},
                      headers={"traceparent": "00-%s-b7ad6b7169203331-01" % tid})
    wsrv = [s for res, s in trace(tid, 1)][0]
    # KServe paths carry the model's name: templated, so names stay few
    assert wsrv["name"] == "POST /v2/models/{model}/versions/{version}/infer", wsrv["name"]
    if r.status_code >= 500:
        assert wsrv["status"]["code"] == 2 and attrs(wsrv)["error.type"] == str(r.status_code)
    else:
        assert wsrv["status"] == {}


def test_no_spans_for_probes(stack):
    gw, wurl = stack
    for url in (gw + "/healthz", gw + "/metrics", wurl + "/v2/health/ready",
                wurl + "/v2/health/live", wurl + "/metrics"):
        requests.get(url, timeout=5)
    time.sleep(2.5)  # the gateway probes the worker every 200 ms meanwhile
    names = [s["name"] for res, s in Collector.spans]
    probes = [n for n in names if "health" in n or "metrics" in n or "healthz" in n]
    assert not probes, probes
