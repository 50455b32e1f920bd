"""The gateway in front of an OpenAI-compatible server that is not a
Starcloud worker (vLLM, llama.cpp's server): tests/e2e/fake_openai.py plays
it. Requests pass through with the backend's own model name, readiness is
its /health, KServe and prefill/decode are not offered for it, and a stream
it breaks cannot be resumed exactly (no token ids): the client gets an error
event, never a stream stitched from two different answers."""
import json
import subprocess

import requests

from conftest import BIN
from gwutil import procs, sse_texts  # noqa: F401


def backend(o, model="fake"):
    return "model=%s,version=1,url=%s,kind=openai,upstream-model=%s" % (model, o.url, o.name)


def seen(o):
    return requests.get(o.url + "/debug/requests", timeout=2).json()


def test_requests_pass_through_with_the_backend_model_name(procs):
    o = procs.openai_backend("org/fake-1b")
    gw = procs.gateway([], "--backend", backend(o))
    r = requests.post(gw.url + "/v1/completions", timeout=10,
                      json={"model": "fake", "prompt": "hi", "max_tokens": 3})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] == "w0 w1 w2 "
    assert r.headers["x-starcloud-replica"] == o.url[len("http://"):]
    r = requests.post(gw.url + "/v1/chat/completions", timeout=10, stream=True,
                      json={"model": "fake:1", "messages": [{"role": "user", "content": "x"}],
                            "max_tokens": 4, "stream": True})
    texts, done, _ = sse_texts(r)
    assert "".join(texts) == "w0 w1 w2 w3 " and done
    r = requests.post(gw.url + "/v1/embeddings", timeout=10,
                      json={"model": "fake", "input": ["a", "b"]})
    assert r.status_code == 200 and len(r.json()["data"]) == 2
    bodies = [s["body"] for s in seen(o)]
    assert [b["model"] for b in bodies] == ["org/fake-1b"] * 3
    assert bodies[1]["messages"] == [{"role": "user", "content": "x"}]
    assert all("generated_ids" not in b for b in bodies)
    m = requests.get(gw.url + "/v1/models/fake", timeout=2)
    assert m.status_code == 200 and m.json()["id"] == "fake"


def test_kserve_is_not_offered_and_health_is_the_backends(procs):
    o = procs.openai_backend()
    gw = procs.gateway([], "--backend", backend(o))
    r = requests.post(gw.url + "/v2/models/fake/infer", timeout=5, json={"inputs": []})
    assert r.status_code == 404 and isinstance(r.json()["error"], str)
    assert seen(o) == []
    sick = procs.openai_backend("org/fake-1b", "--unready")
    gw2 = procs.gateway([], "--backend", backend(sick))
    import time
    deadline = time.time() + 30
    while time.time() < deadline:
        r = requests.post(gw2.url + "/v1/completions", timeout=5,
                          json={"model": "fake", "prompt": "x", "max_tokens": 1})
        if r.status_code == 503:
            break
        time.sleep(0.2)
    assert r.status_code == 503 and r.json()["error"]["code"] == "no_replica"
    assert "x-starcloud-replica" not in r.headers


def test_a_broken_stream_is_not_stitched(procs):
    bad = procs.openai_backend("org/fake-1b", "--die-after-chunks", "3")
    good = procs.openai_backend("org/fake-1b")
    gw = procs.gateway([], "--backend", backend(bad), "--backend", backend(good))
    broke = False
    for _ in range(12):
        r = requests.post(gw.url + "/v1/completions", timeout=10, stream=True,
                          json={"model": "fake", "prompt": "x", "max_tokens": 6,
                                "stream": True})
        events = [line[6:] for line in r.iter_lines() if line.startswith(b"data: ")]
        if any(b"error" in e for e in events):
            texts = [json.loads(e)["choices"][0]["text"] for e in events[:-1]]
            assert texts == ["w0 ", "w1 ", "w2 "]
            assert json.loads(events[-1])["error"]["code"] == "upstream_error"
            broke = True
            break
    assert broke, "the dying backend was never picked"
    assert all("generated_ids" not in s["body"] for s in seen(good))


def test_bad_openai_backend_flags(procs):
    o = "url=http://127.0.0.1:1,model=m,version=1"
    for spec, needle in ((o + ",kind=openai,role=prefill", "role"),
                         (o + ",upstream-model=x", "upstream-model"),
                         (o + ",kind=vllm", "kind"),
                         (o + ",kind=openai,health=nopath", "health")):
        p = subprocess.run([BIN, "gateway", "--backend", spec], capture_output=True, text=True,
                           timeout=10)
        assert p.returncode == 2 and needle in p.stderr, (spec, p.stderr)
