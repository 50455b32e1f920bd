"""TLS between peers that are not the control plane (docs/SECURITY.md, TLS):
a decode worker pulls KV blocks from an https:// prefill worker only when it
trusts the prefill worker's certificate (--ca), and OTLP exports from the
worker and the gateway verify the collector the same way. The certificates
come from the openssl command (tls_util.py), not from Starcloud's own CA."""
import subprocess
import time

import pytest
import requests

from conftest import BIN
from gwutil import procs  # noqa: F401  (fixture)
from test_worker import spawn  # noqa: F401 (fixture)
from tls_util import Collector, issue, make_ca


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = make_ca(d, "ca")
    other = make_ca(d, "other-ca")
    return {"ca": ca[0], "other": other[0], "server": issue(d, ca, "server"),
            "stranger": issue(d, other, "stranger")}


def test_kv_pull_over_tls_needs_the_prefill_workers_ca(spawn, pki):
    p = spawn("--role", "prefill", cert=pki["server"], verify=pki["ca"])
    both = spawn("--role", "both")
    trusting = spawn("--role", "decode", "--ca", pki["ca"])
    system_cas = spawn("--role", "decode")
    wrong_ca = spawn("--role", "decode", "--ca", pki["other"])
    ref = both.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 16}).json()

    def prefill():
        r = p.post("/v1/prefill", {"prompt": "Once upon a time"})
        assert r.status_code == 200, r.text
        return r.json()
    pre = prefill()
    # A TLS worker names its blocks with https://.
    assert pre["kv_url"] == p.url + "/v1/kv/" + pre["kv_handle"]
    assert pre["kv_url"].startswith("https://127.0.0.1:")
    r = trusting.post("/v1/decode", {"kv_url": pre["kv_url"], "first_token": pre["first_token"],
                                     "max_tokens": 16})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["token_ids"] == ref["choices"][0]["token_ids"]
    assert trusting.get("/debug/counters").json()["kv_pulls"] == 1
    # A decode worker that does not trust the certificate refuses the block.
    for w in (system_cas, wrong_ca):
        pre = prefill()
        r = w.post("/v1/decode", {"kv_url": pre["kv_url"], "first_token": pre["first_token"],
                                  "max_tokens": 4})
        assert r.status_code == 502, r.text
        assert r.json()["error"]["param"] == "kv_url"
        c = w.get("/debug/counters").json()
        assert c["kv_pulls"] == 0 and c["kv_pull_failures"] == 1
    # Another scheme is refused, naming the field.
    r = trusting.post("/v1/decode", {"kv_url": "ftp://127.0.0.1/v1/kv/x", "first_token": 1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "kv_url"


def test_worker_ca_must_be_readable(ckpt, tmp_path):
    out = subprocess.run([BIN, "worker", "--checkpoint", str(ckpt), "--listen", "127.0.0.1:0",
                          "--ca", str(tmp_path / "missing.pem")],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode != 0 and "--ca" in out.stderr, out.stderr


def wait_until(fn, what, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if fn():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def test_worker_otlp_export_verifies_the_collector(spawn, pki):
    col = Collector(pki["server"])
    try:
        ok = spawn("--otlp", col.url, "--ca", pki["ca"], "--id", "w-trusting")
        ok.post("/v1/completions", {"prompt": "x", "max_tokens": 1})
        wait_until(lambda: col.spans, "a span from the worker with --ca")
        n = len(col.spans)
        bad = spawn("--otlp", col.url, "--id", "w-untrusting")  # the system's CAs
        bad.post("/v1/completions", {"prompt": "x", "max_tokens": 1})
        wait_until(lambda: col.refused, "the untrusting worker to refuse the collector")
        names = {a["value"].get("stringValue") for s in col.spans[n:]
                 for a in s.get("attributes", []) if a["key"] == "starcloud.replica"}
        assert "w-untrusting" not in names
    finally:
        col.close()


def test_gateway_otlp_export_verifies_the_collector(procs, pki):  # noqa: F811
    col = Collector(pki["server"])
    try:
        w = procs.worker("1")
        gw = procs.gateway([w], "--otlp", col.url, "--ca", pki["ca"])
        r = requests.post(gw.url + "/v1/completions",
                          json={"model": "tiny", "prompt": "x", "max_tokens": 1}, timeout=10)
        assert r.status_code == 200
        # (the fake worker exports nothing: every span is the gateway's)
        wait_until(lambda: col.spans, "the gateway's span over TLS")
        assert not col.refused
        # A collector whose certificate is from another CA is refused.
        col2 = Collector(pki["stranger"])
        try:
            gw2 = procs.gateway([w], "--otlp", col2.url, "--ca", pki["ca"])
            requests.post(gw2.url + "/v1/completions",
                          json={"model": "tiny", "prompt": "x", "max_tokens": 1}, timeout=10)
            wait_until(lambda: col2.refused, "the gateway to refuse a stranger's certificate")
            assert not col2.spans
        finally:
            col2.close()
    finally:
        col.close()
