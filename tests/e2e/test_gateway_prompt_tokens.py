"""Prompt tokens of requests in their prefill phase (the prefill autoscaler's
signal, docs/GATEWAY.md "Prompt tokens"), through a real gateway and real
`starcloud worker` processes: text is estimated at 4 bytes a token until a
prefill replica has counted prompts of the model (the reference worker's
"n_tokens"), then from those counts; token ids count one each; a
Deployment's spec.promptBytesPerToken sets the estimate, and a bad value is
refused naming the field. Read from the gateway's
starcloud_gateway_prefill_prompt_tokens gauge while a prefill waits at its
worker (--latency-ms, or a worker that answers nothing)."""
import threading
import time

import requests

from agent_util import setup_queue
from conftest import free_port, manifest
from gwutil import metric, procs  # noqa: F401
from test_autoscale_pd import role_template
from test_gateway_pd_retry import hung_prefill
from test_gateway_worker import ckpt, worker  # noqa: F401


def gauge(gw):
    return metric(gw, "starcloud_gateway_prefill_prompt_tokens", model="tiny")


def in_background(gw, prompt, out):
    def run():
        try:
            r = requests.post(gw.url + "/v1/completions", timeout=120,
                              json={"model": "tiny", "prompt": prompt, "max_tokens": 1})
            out.append(r.status_code)
        except requests.RequestException as e:
            out.append(repr(e))
    t = threading.Thread(target=run)
    t.start()
    return t


def seen_while_waiting(gw, prompt, seconds=60):
    """The gauge's value while a request for prompt waits in prefill (the
    first non-zero reading), and the request's status."""
    out, seen = [], []
    t = in_background(gw, prompt, out)
    deadline = time.time() + seconds
    while time.time() < deadline and not seen and not out:
        v = gauge(gw)
        if v:
            seen.append(v)
        time.sleep(0.05)
    t.join()
    return (seen[0] if seen else None), out[0]


def test_estimate_then_the_workers_own_count(procs, ckpt):
    # Each prefill waits 5 s at the worker: long enough to read the gauge.
    pre = worker(procs, ckpt, "1", "prefill", "--latency-ms", "5000")
    dec = worker(procs, ckpt, "1", "decode")
    gw = procs.gateway([pre, dec], "--attempt-timeout", "60s", "--timeout", "120s")
    text = "p" * 200  # the tiny model's context is 256 tokens
    # Nothing counted yet: 200 bytes at 4 bytes a token.
    assert seen_while_waiting(gw, text) == (50, 200)
    # The worker counted 201 (a byte a token, plus BOS): its count wins.
    assert seen_while_waiting(gw, text) == (201, 200)
    assert seen_while_waiting(gw, "q" * 240) == (241, 200)
    # Token ids are counted, not estimated.
    assert seen_while_waiting(gw, list(range(1, 38))) == (37, 200)
    assert gauge(gw) == 0


def test_deployment_sets_bytes_per_token_and_bad_values_are_refused(server, admin, procs, ckpt):
    s = admin
    setup_queue(s)
    port = free_port()

    def deployment(name, bpt):
        spec = {"queue": "q", "model": "tiny", "version": "1",
                "disaggregation": {"prefill": {"replicas": 0,
                                               "template": role_template(port, "prefill", 0)},
                                   "decode": {"replicas": 0,
                                              "template": role_template(port, "decode", 0)}}}
        if bpt is not None:
            spec["promptBytesPerToken"] = bpt
        return manifest("Deployment", name, spec)

    for bad in (0, 0.1, 65, "4", True):
        r = s.post(s.base + "/deployments", json=deployment("bad", bad))
        assert r.status_code == 400 and "spec.promptBytesPerToken" in r.text, (bad, r.text)
    assert s.get(s.base + "/deployments/bad").status_code == 404
    r = s.post(s.base + "/deployments", json=deployment("tiny", 2))
    assert r.status_code == 201, r.text
    # A prefill worker that answers nothing: no count is ever learnt, so
    # what the gateway reports is the Deployment's estimate alone.
    pre = hung_prefill(procs, ckpt)
    dec = worker(procs, ckpt, "1", "decode")
    gw = procs.gateway([pre, dec], "--server", server.url, "--token", server.token,
                       "--probe-interval", "0", "--attempt-timeout", "4s")
    stop, out = threading.Event(), []

    def traffic():
        while not stop.is_set():
            in_background(gw, "p" * 200, out).join()
            time.sleep(0.2)  # a shed request comes back at once
    t = threading.Thread(target=traffic)
    t.start()
    try:
        # 200 bytes at 2 bytes a token once the gateway has read the
        # Deployment (50, the default, before).
        deadline, seen = time.time() + 60, set()
        while time.time() < deadline and 100 not in seen:
            seen.add(gauge(gw))
            time.sleep(0.05)
        assert 100 in seen, seen
        assert seen <= {0, 50, 100}, seen
    finally:
        stop.set()
        t.join()
