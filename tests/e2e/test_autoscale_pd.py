"""Autoscaling of a prefill/decode disaggregated Deployment end to end
(docs/AUTOSCALING.md, "Disaggregated Deployments"): real agents run real
`starcloud worker --role prefill|decode` replicas, a real gateway sends each
completion through a prefill replica and then a decode replica and reports
each role's load (prompt tokens waiting for or in prefill; decode streams in
flight) once a second; the server scales each role on its own target and
limits. Under load both roles grow; idle, each goes back to its minimum after
its own window, never below it, while a light stream of requests keeps being
answered (a released replica's requests are retried or resumed elsewhere)."""
import json
import os
import threading
import time

import requests

from agent_util import setup_queue, wait_for
from conftest import BIN, manifest, pod_program
from gwutil import Procs
from test_autoscale_serving import cluster, events_of
from test_serving import dep, free_port, ready_endpoints


def role_template(port, role, latency_ms):
    cmd = [pod_program(BIN), "worker", "--listen", "127.0.0.1:$(STARCLOUD_PORT)",
           "--model", "tiny", "--version", "1", "--role", role,
           "--latency-ms", str(latency_ms)]
    return {"command": cmd, "port": port, "resources": {"cpu": "100m", "memory": "64Mi"},
            "probes": {"readiness": {"http": {"path": "/v2/health/ready", "port": port},
                                     "periodSeconds": 1}}}


def pd_deployment(name, port, prefill_as, decode_as):
    return manifest("Deployment", name, {
        "queue": "q", "model": "tiny", "version": "1",
        "template": role_template(port, "decode", 400),
        "disaggregation": {
            "prefill": {"autoscaling": prefill_as,
                        "template": role_template(port, "prefill", 300)},
            "decode": {"autoscaling": decode_as,
                       "template": role_template(port, "decode", 400)}}})


def role_scaling(s, name, role):
    return dep(s, name).get("status", {}).get("autoscaling", {}).get(role, {})


def ready_roles(s, name, prefill, decode):
    def check():
        eps = [e for e in dep(s, name).get("status", {}).get("endpoints", []) if e["ready"]]
        roles = sorted(e["role"] for e in eps)
        return eps if roles == ["decode"] * decode + ["prefill"] * prefill else None
    return check


def streamed(sess, url, prompt, max_tokens):
    """One streamed completion: (status, whether its last chunk said finish)."""
    r = sess.post(url + "/v1/completions", stream=True, timeout=30,
                  json={"model": "tiny", "prompt": prompt, "max_tokens": max_tokens,
                        "stream": True})
    finished = False
    if r.status_code != 200:
        return r.status_code, r.text[:300]
    for line in r.iter_lines():
        if line.startswith(b"data: {"):
            c = json.loads(line[6:])["choices"][0]
            finished = finished or bool(c.get("finish_reason"))
    return r.status_code, finished


def test_prefill_and_decode_scale_on_their_own_signals(server, admin, tmp_path):
    s, port = admin, free_port()
    setup_queue(s)
    agents = cluster(server, tmp_path)
    procs = Procs(tmp_path)
    stop, light_stop = threading.Event(), threading.Event()
    try:
        # Prefill: 100 prompt tokens per replica (a 200-byte prompt is 201
        # tokens for the byte-level tokenizer); decode: 2 streams each.
        d = pd_deployment("pd", port,
                          {"minReplicas": 1, "maxReplicas": 3,
                           "target": {"promptTokensPerReplica": 100},
                           "scaleDownStabilization": "3s"},
                          {"minReplicas": 1, "maxReplicas": 3,
                           "target": {"inflightPerReplica": 2},
                           "scaleDownStabilization": "3s"})
        r = s.post(s.base + "/deployments", json=d)
        assert r.status_code == 201, r.text
        wait_for(ready_roles(s, "pd", 1, 1), timeout=60, what="1 prefill + 1 decode")
        gw = procs.gateway([], "--server", server.url, "--token", server.token,
                           "--prefill-failure", "retry")
        # Idle: the gateway reports zeros, each role stays at its minimum.
        wait_for(lambda: role_scaling(s, "pd", "decode").get("replicas") == 1 and
                 role_scaling(s, "pd", "prefill").get("replicas") == 1, timeout=30,
                 what="both roles at their minimum")
        time.sleep(2)
        assert role_scaling(s, "pd", "prefill")["replicas"] == 1
        assert role_scaling(s, "pd", "decode")["replicas"] == 1

        answered = []

        def traffic():
            sess = requests.Session()
            while not stop.is_set():
                try:
                    answered.append(streamed(sess, gw.url, "p" * 200, 8))
                except requests.RequestException as e:
                    answered.append((repr(e), False))
                    time.sleep(0.05)
        ts = [threading.Thread(target=traffic) for _ in range(8)]
        for t in ts:
            t.start()
        # About 2-3 requests in prefill (300 ms each) and 4-5 in decode
        # (400 ms each): both roles want their maximum, each on its signal.
        pf = wait_for(lambda: (lambda a: a if a.get("replicas") == 3 else None)(
            role_scaling(s, "pd", "prefill")), timeout=60, what="3 prefill replicas wanted")
        assert pf["signal"]["promptTokens"] > 200, pf
        dc = wait_for(lambda: (lambda a: a if a.get("replicas") == 3 else None)(
            role_scaling(s, "pd", "decode")), timeout=60, what="3 decode replicas wanted")
        assert dc["signal"]["inflight"] > 4, dc
        ups = [e["message"] for e in events_of(s, "pd", "ScaledUp")]
        assert any(m.startswith("prefill replicas 1 -> ") for m in ups), ups
        assert any(m.startswith("decode replicas 1 -> ") for m in ups), ups
        wait_for(ready_roles(s, "pd", 3, 3), timeout=90, what="3 prefill + 3 decode ready")
        n_before = len(answered)
        wait_for(lambda: len(answered) > n_before + 20, timeout=60, what="traffic")
        stop.set()
        for t in ts:
            t.join()
        ok = [a for a in answered if a == (200, True)]
        assert len(ok) > 0.95 * len(answered), [a for a in answered if a != (200, True)][:5]

        # Light traffic (1 stream at a time, 1 prompt token per replica's
        # target at most) while both roles shrink: every stream completes.
        light = []

        def trickle():
            sess = requests.Session()
            while not light_stop.is_set():
                try:
                    light.append(streamed(sess, gw.url, "hi", 4))
                except requests.RequestException as e:
                    light.append((repr(e), False))
                time.sleep(0.2)
        lt = threading.Thread(target=trickle)
        lt.start()
        t0 = time.time()
        wait_for(lambda: role_scaling(s, "pd", "prefill").get("replicas") == 1 and
                 role_scaling(s, "pd", "decode").get("replicas") == 1, timeout=60,
                 what="both roles back to 1")
        assert time.time() - t0 >= 2.5  # not before the 3 s window
        wait_for(ready_roles(s, "pd", 1, 1), timeout=60, what="1 prefill + 1 decode left")
        # Never below the minimum, while the trickle goes on.
        time.sleep(4)
        assert role_scaling(s, "pd", "prefill")["replicas"] == 1
        assert role_scaling(s, "pd", "decode")["replicas"] == 1
        light_stop.set()
        lt.join()
        assert light and all(a == (200, True) for a in light), \
            [a for a in light if a != (200, True)]
        downs = [e["message"] for e in events_of(s, "pd", "ScaledDown")]
        # (The burst's tail may take a role down in two steps.)
        for role in ("prefill", "decode"):
            assert any(m.startswith(role + " replicas ") and " -> 1: at most 1 wanted over "
                       "the last 3 s" in m for m in downs), downs
        # The whole-Deployment keys are not written for a disaggregated one.
        assert "replicas" not in dep(s, "pd")["status"]["autoscaling"]
        m = admin.get(server.url + "/metrics").text
        assert 'starcloud_deployment_scale_decisions_total{direction="down"}' in m
    finally:
        stop.set()
        light_stop.set()
        procs.stop()
        for a in agents:
            a.stop()


def test_bad_role_reports_and_specs_are_refused(server, admin):
    s, port = admin, free_port()
    setup_queue(s)
    d = pd_deployment("pd", port,
                      {"maxReplicas": 2, "target": {"promptTokensPerReplica": 64}},
                      {"maxReplicas": 2, "target": {"tokensPerSecondPerReplica": 50}})
    r = s.post(s.base + "/deployments", json=d)
    assert r.status_code == 201, r.text
    url = s.base + "/deployments/pd/autoscale/report"
    good = {"gateway": "g1", "inflight": 3, "queued": 0, "busy": 1, "requests": 5,
            "ttftP95": 0.2, "roles": {"prefill": {"inflight": 1, "busy": 1, "promptTokens": 90},
                                      "decode": {"inflight": 2, "busy": 1,
                                                 "tokensPerSecond": 120.5}}}
    roles = good["roles"]
    cases = [({**good, "roles": []}, "roles"),
             ({**good, "roles": {**roles, "both": {}}}, "roles.both"),
             ({**good, "roles": {**roles, "decode": 3}}, "roles.decode"),
             ({**good, "roles": {**roles, "prefill": {"promptTokens": -1}}},
              "roles.prefill.promptTokens"),
             ({**good, "roles": {**roles, "prefill": {"inflight": "x"}}},
              "roles.prefill.inflight"),
             ({**good, "roles": {**roles, "decode": {"tokensPerSecond": -3}}},
              "roles.decode.tokensPerSecond"),
             ({**good, "roles": {**roles, "decode": {"promptTokens": 3}}},
              "roles.decode.promptTokens"),
             ({**good, "roles": {**roles, "prefill": {"tokensPerSecond": 3}}},
              "roles.prefill.tokensPerSecond"),
             ({**good, "roles": {**roles, "decode": {"busy": 10 ** 12}}}, "roles.decode.busy")]
    for body, field in cases:
        r = s.post(url, json=body)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"]["field"] == field, (body, r.text)
    r = s.post(url, json=good)
    assert r.status_code == 200, r.text
    assert r.json()["roles"] == {"prefill": {"replicas": 1}, "decode": {"replicas": 1}}
    # Specs: refused at apply, naming the field.
    bad = [({"maxReplicas": 2, "target": {"tokensPerSecondPerReplica": 5}}, None,
            "disaggregation.prefill.autoscaling.target.tokensPerSecondPerReplica"),
           (None, {"maxReplicas": 2, "target": {"ttftP95": "1s"}},
            "disaggregation.decode.autoscaling.target.ttftP95"),
           ({"minReplicas": 0, "maxReplicas": 2, "target": {"inflightPerReplica": 1}}, None,
            "disaggregation.prefill.autoscaling.minReplicas"),
           (None, {"minReplicas": 3, "maxReplicas": 2, "target": {"inflightPerReplica": 1}},
            "disaggregation.decode.autoscaling.maxReplicas")]
    ok_as = {"maxReplicas": 2, "target": {"inflightPerReplica": 1}}
    for pf, dc, field in bad:
        r = s.post(s.base + "/deployments",
                   json=pd_deployment("bad", port + 2, pf or ok_as, dc or ok_as))
        assert r.status_code == 400 and field in r.text, (pf, dc, r.text)
    body = pd_deployment("bad", port + 2, ok_as, ok_as)
    body["spec"]["disaggregation"]["decode"]["replicas"] = 2
    r = s.post(s.base + "/deployments", json=body)
    assert r.status_code == 400 and "disaggregation.decode.replicas" in r.text, r.text
    body = pd_deployment("bad", port + 2, ok_as, ok_as)
    body["spec"]["autoscaling"] = ok_as
    r = s.post(s.base + "/deployments", json=body)
    assert r.status_code == 400 and "spec.autoscaling" in r.text, r.text
    assert s.get(s.base + "/deployments/bad").status_code == 404
