"""The real gateway in front of real workers: a disaggregated completion
(prefill worker, two decode workers, one of which breaks its stream after
4 tokens) gives the same tokens and text as one `both` worker, and the
prefill happened once per request."""
import json
import os
import signal
import subprocess
import time

import pytest
import requests

from test_worker import BIN, free_port, spawn, sse_events  # noqa: F401 (fixtures)


def gateway(workers, tmp):
    port = free_port()
    args = [BIN, "gateway", "--listen", "127.0.0.1:%d" % port, "--probe-interval", "500ms"]
    for w, role in workers:
        args += ["--backend", "model=tiny,version=1,url=%s,role=%s" % (w.url, role)]
    log = open(os.path.join(str(tmp), "gateway.log"), "w")
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
    url = "http://127.0.0.1:%d" % port
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            r = requests.post(url + "/v1/completions", timeout=2,
                              json={"model": "tiny", "prompt": "warm", "max_tokens": 1})
            if r.status_code == 200:
                return p, url, log
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    p.kill()
    raise RuntimeError("gateway not ready")


def pd_gateway(spawn, tmp):
    """A `both` worker for reference, and a gateway over a prefill worker and
    two decode workers, one of which breaks its stream after 4 tokens."""
    if subprocess.run([BIN, "gateway", "--help"], capture_output=True).returncode != 0:
        pytest.skip("no gateway in this build")
    ref_w = spawn()
    p = spawn("--role", "prefill")
    bad = spawn("--role", "decode", "--fail-decode-after-tokens", "4")
    good = spawn("--role", "decode")
    proc, url, log = gateway([(p, "prefill"), (bad, "decode"), (good, "decode")], tmp)
    return ref_w, p, bad, good, proc, url, log


def test_gateway_disaggregated_equals_both(spawn, tmp_path):
    ref_w, p, bad, good, proc, url, log = pd_gateway(spawn, tmp_path)
    try:
        prompts = ["Once upon a time", "The fox", "abc def"]
        for prompt in prompts:
            ref = ref_w.post("/v1/completions", {"prompt": prompt, "max_tokens": 12}).json()
            ref = ref["choices"][0]
            for _ in range(2):  # the gateway may pick either decode worker first
                r = requests.post(url + "/v1/completions", timeout=10, stream=False,
                                  json={"model": "tiny", "prompt": prompt, "max_tokens": 12,
                                        "stream": True})
                assert r.status_code == 200
                chunks, done = sse_events(r)
                assert done
                ids = [i for ch in chunks for i in ch["choices"][0].get("token_ids", [])]
                text = "".join(ch["choices"][0]["text"] for ch in chunks)
                assert ids == ref["token_ids"] and text == ref["text"]
            r = requests.post(url + "/v1/completions", timeout=10,
                              json={"model": "tiny", "prompt": prompt, "max_tokens": 12})
            assert r.status_code == 200
            assert r.json()["choices"][0]["token_ids"] == ref["token_ids"]
        # One prefill per request (plus the warm-up), none on the decode side.
        assert p.counters()["prefills"] == 1 + 3 * len(prompts)
        assert good.counters()["prefills"] == 0 and bad.counters()["prefills"] == 0
        assert bad.counters()["faults_injected"] >= 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=5)
        log.close()


def test_gateway_disaggregated_sampling_and_stop(spawn, tmp_path):
    """top_p reaches the prefill worker (it draws the first token) and the
    decode workers; stop reaches the decode workers, also across a broken
    stream resumed on the other one. Same answer as one `both` worker."""
    from test_worker import stop_at
    ref_w, p, bad, good, proc, url, log = pd_gateway(spawn, tmp_path)
    try:
        sampling = {"temperature": 1.0, "top_p": 0.8, "seed": 3}
        body = dict(sampling, prompt="Once upon a time", max_tokens=40)
        full = ref_w.post("/v1/completions", body).json()["choices"][0]
        s, k = stop_at(full["text"])
        ref = ref_w.post("/v1/completions", dict(body, stop=s)).json()["choices"][0]
        assert ref["text"] == full["text"][:k] and ref["finish_reason"] == "stop"
        for stream in (True, True, False):  # either decode worker may go first
            r = requests.post(url + "/v1/completions", timeout=10,
                              json=dict(body, model="tiny", stop=s, stream=stream))
            assert r.status_code == 200, r.text
            if stream:
                chunks, done = sse_events(r)
                assert done and chunks[-1]["choices"][0]["finish_reason"] == "stop"
                ids = [i for ch in chunks for i in ch["choices"][0].get("token_ids", [])]
                text = "".join(ch["choices"][0]["text"] for ch in chunks)
            else:
                c = r.json()["choices"][0]
                ids, text = c["token_ids"], c["text"]
            assert ids == ref["token_ids"] and text == ref["text"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=5)
        log.close()
