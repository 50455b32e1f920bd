"""Replica autoscaling of Deployments end to end (issue 18,
docs/AUTOSCALING.md): real agents run real `starcloud worker` replicas, a
real gateway watches the server and reports each autoscaled Deployment's
load once a second; the server's autoscaler changes the replica count.
Under load the Deployment grows at once and shrinks after its stabilization
window; a Deployment parked at zero replicas answers its first request
(held at the gateway until a replica is ready); a held request that no
replica can take ends at the gateway's --timeout; bad load reports are
refused naming the field."""
import os
import threading
import time

import requests

from agent_util import Agent, setup_queue, wait_for
from conftest import BIN, manifest, pod_program
from gwutil import Procs
from test_serving import dep, free_port, ready_endpoints


def worker_template(port, latency_ms=0, gpu=0):
    cmd = [pod_program(BIN), "worker", "--listen", "127.0.0.1:$(STARCLOUD_PORT)",
           "--model", "tiny", "--version", "1"]
    if latency_ms:
        cmd += ["--latency-ms", str(latency_ms)]
    t = {"command": cmd, "port": port, "resources": {"cpu": "100m", "memory": "64Mi"},
         "probes": {"readiness": {"http": {"path": "/v2/health/ready", "port": port},
                                  "periodSeconds": 1}}}
    if gpu:
        t["resources"]["gpu"] = gpu
    return t


def autoscaled(name, port, autoscaling, **kw):
    return manifest("Deployment", name, {
        "queue": "q", "model": kw.pop("model", "tiny"), "version": "1",
        "autoscaling": autoscaling, "template": worker_template(port, **kw)})


def scaling(s, name):
    return dep(s, name).get("status", {}).get("autoscaling", {})


def events_of(s, name, reason):
    return [e for e in s.get(s.base + "/events").json()["items"]
            if e.get("involvedObject", {}).get("name") == name and e["reason"] == reason]


def cluster(server, tmp_path, n=2):
    return [Agent(server.url, server.token, "n%d" % i, tmp_path / ("a%d" % i))
            for i in range(n)]


def test_replicas_follow_the_load(server, admin, tmp_path):
    s, port = admin, free_port()
    setup_queue(s)
    agents = cluster(server, tmp_path)
    procs = Procs(tmp_path)
    stop = threading.Event()
    try:
        d = autoscaled("llm", port, {"minReplicas": 1, "maxReplicas": 3,
                                     "target": {"inflightPerReplica": 2},
                                     "scaleDownStabilization": "3s"}, latency_ms=300)
        r = s.post(s.base + "/deployments", json=d)
        assert r.status_code == 201, r.text
        wait_for(ready_endpoints(s, "llm", 1), timeout=30, what="one replica (the minimum)")
        gw = procs.gateway([], "--server", server.url, "--token", server.token)
        # Idle: the gateway reports zeros and the count stays at the minimum.
        time.sleep(3)
        assert scaling(s, "llm")["replicas"] == 1

        answered = []

        def traffic():
            sess = requests.Session()
            while not stop.is_set():
                try:
                    r = sess.post(gw.url + "/v1/completions", timeout=10,
                                  json={"model": "tiny", "prompt": "x", "max_tokens": 2})
                    answered.append(r.status_code)
                except requests.RequestException:
                    time.sleep(0.05)
        ts = [threading.Thread(target=traffic) for _ in range(6)]
        for t in ts:
            t.start()
        # About 6 in flight at 2 per replica: 3 replicas, at once.
        st = wait_for(lambda: (lambda a: a if a.get("replicas") == 3 else None)(
            scaling(s, "llm")), timeout=20, what="3 replicas wanted")
        assert st["signal"]["inflight"] + st["signal"]["queued"] > 4, st
        assert events_of(s, "llm", "ScaledUp"), "an event for the decision"
        wait_for(ready_endpoints(s, "llm", 3), timeout=30, what="3 ready replicas")
        # Every new replica takes traffic through the gateway.
        n_before = len(answered)
        wait_for(lambda: len(answered) > n_before + 20, timeout=20, what="traffic")
        stop.set()
        for t in ts:
            t.join()
        assert answered.count(200) > 0.9 * len(answered), answered[-20:]
        # Idle again: back to the minimum after the 3 s window, not before.
        t0 = time.time()
        wait_for(lambda: scaling(s, "llm").get("replicas") == 1, timeout=30,
                 what="back to 1 replica")
        assert time.time() - t0 >= 2.5
        wait_for(ready_endpoints(s, "llm", 1), timeout=30, what="one endpoint left")
        ev = events_of(s, "llm", "ScaledDown")
        assert ev and "-> 1" in ev[-1]["message"], ev
        m = admin.get(server.url + "/metrics").text
        assert 'starcloud_deployment_scale_decisions_total{direction="up"}' in m
    finally:
        stop.set()
        procs.stop()
        for a in agents:
            a.stop()


def test_scale_from_zero_answers_the_first_request(server, admin, tmp_path):
    s, port = admin, free_port()
    setup_queue(s)
    agents = cluster(server, tmp_path, 1)
    procs = Procs(tmp_path)
    try:
        d = autoscaled("parked", port, {"minReplicas": 0, "maxReplicas": 2,
                                        "target": {"inflightPerReplica": 4},
                                        "scaleDownStabilization": "2s"})
        assert s.post(s.base + "/deployments", json=d).status_code == 201
        gw = procs.gateway([], "--server", server.url, "--token", server.token,
                           "--timeout", "60s")
        # Parked: no replica, no pod.
        time.sleep(2)
        obj = dep(s, "parked")
        assert obj["status"]["autoscaling"]["replicas"] == 0, obj["status"]
        assert not [p for p in obj["status"].get("pods", []) if p["phase"] == "Running"]
        t0 = time.time()
        r = requests.post(gw.url + "/v1/completions", timeout=60,
                          json={"model": "tiny", "prompt": "hello", "max_tokens": 4})
        took = time.time() - t0
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["text"] != "" or r.json()["usage"]["completion_tokens"] > 0
        ev = events_of(s, "parked", "ScaledUp")
        assert ev and "0 -> 1" in ev[0]["message"], ev
        assert took > 0.2  # it did wait for a replica to start
        # Idle for the window: parked again, its pod released.
        wait_for(lambda: scaling(s, "parked").get("replicas") == 0, timeout=30,
                 what="parked again")
        wait_for(lambda: not [p for p in dep(s, "parked")["status"].get("pods", [])
                              if p["phase"] == "Running"], timeout=30, what="pod gone")
        # And once more from zero.
        r = requests.post(gw.url + "/v1/completions", timeout=60,
                          json={"model": "tiny", "prompt": "again", "max_tokens": 2})
        assert r.status_code == 200, r.text
    finally:
        procs.stop()
        for a in agents:
            a.stop()


def test_a_held_request_ends_at_the_timeout(server, admin, tmp_path):
    """A parked Deployment whose replica can never be placed (8 GPUs on a
    2-GPU node): the request waits, then the gateway's --timeout ends it;
    the Deployment did ask for its replica."""
    s, port = admin, free_port()
    setup_queue(s)
    agents = cluster(server, tmp_path, 1)
    procs = Procs(tmp_path)
    try:
        d = autoscaled("big", port, {"minReplicas": 0, "maxReplicas": 1,
                                     "target": {"queueDepth": 1}}, gpu=8, model="huge")
        assert s.post(s.base + "/deployments", json=d).status_code == 201
        gw = procs.gateway([], "--server", server.url, "--token", server.token,
                           "--timeout", "3s")
        wait_for(lambda: scaling(s, "big").get("replicas") == 0, what="parked")
        t0 = time.time()
        r = requests.post(gw.url + "/v1/completions", timeout=30,
                          json={"model": "huge", "prompt": "x", "max_tokens": 2})
        assert r.status_code == 504, r.text
        assert 2.5 < time.time() - t0 < 10
        assert scaling(s, "big")["replicas"] == 1
        # A model no Deployment serves is still a 404 at once.
        r = requests.post(gw.url + "/v1/completions", timeout=5,
                          json={"model": "nope", "prompt": "x", "max_tokens": 2})
        assert r.status_code == 404
    finally:
        procs.stop()
        for a in agents:
            a.stop()


def test_bad_load_reports_are_refused(server, admin):
    s, port = admin, free_port()
    setup_queue(s)
    d = autoscaled("m", port, {"maxReplicas": 2, "target": {"inflightPerReplica": 1}})
    assert s.post(s.base + "/deployments", json=d).status_code == 201
    plain = manifest("Deployment", "fixed", {"queue": "q", "model": "tiny", "replicas": 1,
                                             "template": worker_template(port + 1)})
    assert s.post(s.base + "/deployments", json=plain).status_code == 201
    url = s.base + "/deployments/m/autoscale/report"
    good = {"gateway": "g1", "inflight": 3, "queued": 0, "busy": 1, "requests": 5,
            "ttftP95": 0.2}
    cases = [({**good, "inflight": -1}, "inflight"),
             ({**good, "queued": "many"}, "queued"),
             ({**good, "ttftP95": -2}, "ttftP95"),
             ({**good, "gateway": ""}, "gateway"),
             ({**good, "gateway": "x" * 200}, "gateway"),
             ({k: v for k, v in good.items() if k != "inflight"}, "inflight"),
             ({**good, "colour": 1}, "colour"),
             ({**good, "busy": 10 ** 12}, "busy")]
    for body, field in cases:
        r = s.post(url, json=body)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"]["field"] == field, (body, r.text)
    r = s.post(url, data="{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    r = s.post(s.base + "/deployments/fixed/autoscale/report", json=good)
    assert r.status_code == 409 and "spec.autoscaling" in r.text
    r = s.post(s.base + "/deployments/none/autoscale/report", json=good)
    assert r.status_code == 404
    r = s.get(url)
    assert r.status_code == 405
    tok = s.post(s.base + "/tokens", json={"role": "viewer"}).json()["token"]
    viewer = requests.Session()
    viewer.headers["Authorization"] = "Bearer " + tok
    assert viewer.post(url, json=good).status_code == 403
    r = s.post(url, json=good)
    assert r.status_code == 200 and r.json()["replicas"] == 1, r.text
    # Bad autoscaling specs name the field.
    for spec, field in [({"maxReplicas": 0, "target": {"inflightPerReplica": 1}}, "maxReplicas"),
                        ({"maxReplicas": 2, "target": {}}, "target"),
                        ({"maxReplicas": 2, "minReplicas": 3,
                          "target": {"queueDepth": 1}}, "maxReplicas"),
                        ({"maxReplicas": 2, "target": {"ttftP95": "soon"}}, "ttftP95")]:
        r = s.post(s.base + "/deployments", json=autoscaled("bad", port, spec))
        assert r.status_code == 400 and field in r.text, (spec, r.text)
