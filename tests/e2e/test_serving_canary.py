"""Canary analysis on evidence: a Deployment's rollout moves to the next
step only when the gateways' reports of that step add up to
spec.rollout.minRequests canary requests at no more than maxErrorRate, the
last of them fresh. With no gateway (or no traffic) it pauses and says why,
and never promotes on a timer; the reports that arrive later let it go on.
Rollback stays automatic above maxErrorRate. The whole loop is also run
with real workers as the Deployment's pods and a real gateway watching the
server: traffic through the gateway carries the canary to Complete, and with
the gateway stopped the next canary pauses."""
import os
import signal
import threading
import time

import requests

from agent_util import Agent, setup_queue, wait_for
from conftest import BIN, manifest, pod_program, stop_process
from gwutil import Procs
from test_serving import dep, free_port, ready_endpoints, rollout, set_version, template


def deployment(name, port, window="2s", min_requests=5, steps=(50, 100), tpl=template,
               version="1"):
    return manifest("Deployment", name, {
        "queue": "q", "model": "tiny", "version": version, "replicas": 1,
        "template": tpl(port, version),
        "rollout": {"steps": list(steps), "analysisWindow": window, "maxErrorRate": 0.05,
                    "minRequests": min_requests}})


def phase(s, name):
    return dep(s, name)["status"]["rollout"]


def test_without_a_gateway_the_canary_pauses_and_evidence_moves_it(server, admin, tmp_path):
    s, port = admin, free_port()
    setup_queue(s)
    agents = [Agent(server.url, server.token, "n%d" % i, tmp_path / ("a%d" % i))
              for i in range(2)]
    try:
        assert s.post(s.base + "/deployments", json=deployment("m", port)).status_code == 201
        wait_for(ready_endpoints(s, "m", 1), timeout=30, what="stable endpoint")
        set_version(s, "m", port, "2")
        wait_for(ready_endpoints(s, "m", 1, version="2"), timeout=30, what="canary endpoint")
        # No gateway: the window passes, the rollout pauses and says why.
        ro = wait_for(lambda: (lambda r: r if r["phase"] == "Paused" else None)(phase(s, "m")),
                      timeout=20, what="the analysis pause")
        assert "no report from a gateway" in ro["reason"], ro
        assert ro["pausedBy"] == "analysis" and ro["weights"] == {"1": 50, "2": 50}
        events = s.get(s.base + "/events").json()["items"]
        assert [e for e in events if e["reason"] == "RolloutPaused"]
        # Never promoted on a timer: still paused at the same step windows later.
        time.sleep(5)
        ro = phase(s, "m")
        assert ro["phase"] == "Paused" and ro["step"] == 0 and ro["canary"] == "2"
        # Too few requests: still paused, and the reason says how many.
        r = rollout(s, "m", {"version": "2", "requests": 3, "errors": 0}, "rollout/report")
        assert r.status_code == 200
        wait_for(lambda: "3 of 5" in phase(s, "m")["reason"], timeout=30, what="3 of 5")
        # Enough fresh evidence: it goes on by itself, to the next step.
        rollout(s, "m", {"version": "2", "requests": 4, "errors": 0}, "rollout/report")
        ro = wait_for(lambda: (lambda r: r if r["step"] == 1 else None)(phase(s, "m")),
                      timeout=10, what="step 1")
        assert ro["phase"] == "Progressing" and ro["weights"] == {"1": 0, "2": 100}
        assert ro["evidence"]["requests"] == 0  # a step starts with no evidence
        # A user's pause holds even with evidence; resume lets it go.
        rollout(s, "m", {"action": "pause"})
        rollout(s, "m", {"version": "2", "requests": 10, "errors": 0}, "rollout/report")
        time.sleep(3)
        assert phase(s, "m")["phase"] == "Paused" and phase(s, "m")["pausedBy"] == "user"
        rollout(s, "m", {"action": "resume"})
        wait_for(lambda: phase(s, "m")["phase"] == "Complete", timeout=15, what="promotion")
        assert phase(s, "m")["stable"] == "2"
    finally:
        for a in agents:
            a.stop()


def test_stale_evidence_pauses_and_errors_roll_back(server, admin, tmp_path):
    s, port = admin, free_port()
    setup_queue(s)
    agents = [Agent(server.url, server.token, "n%d" % i, tmp_path / ("a%d" % i))
              for i in range(2)]
    try:
        s.post(s.base + "/deployments", json=deployment("m", port, window="1s"))
        wait_for(ready_endpoints(s, "m", 1), timeout=30, what="stable endpoint")
        set_version(s, "m", port, "2")
        wait_for(ready_endpoints(s, "m", 1, version="2"), timeout=30, what="canary endpoint")
        # A report, then silence: once it is older than two windows (at
        # least 10 s) the step does not take it.
        rollout(s, "m", {"version": "2", "requests": 2, "errors": 0}, "rollout/report")
        ro = wait_for(lambda: (lambda r: r if "s old" in r["reason"] else None)(
            phase(s, "m")), timeout=25, what="the stale-report pause")
        assert ro["phase"] == "Paused" and ro["step"] == 0
        # 1 error of 2 is 50 % but proves nothing yet (minRequests 5) ...
        r = rollout(s, "m", {"version": "2", "requests": 2, "errors": 1}, "rollout/report")
        assert r.json()["rollout"]["phase"] == "Paused"
        # ... over the step it does: 2 of 6 -> rolled back at once.
        r = rollout(s, "m", {"version": "2", "requests": 2, "errors": 1}, "rollout/report")
        ro = r.json()["rollout"]
        assert ro["phase"] == "RolledBack" and "over the step" in ro["reason"], ro
    finally:
        for a in agents:
            a.stop()


def worker_template(port, version):
    return {"command": [pod_program(BIN), "worker", "--listen", "127.0.0.1:$(STARCLOUD_PORT)",
                        "--model", "tiny", "--version", version],
            "port": port, "resources": {"cpu": "100m", "memory": "64Mi"},
            "probes": {"readiness": {"http": {"path": "/v2/health/ready", "port": port},
                                     "periodSeconds": 1}}}


def test_real_gateway_carries_the_canary_and_its_absence_pauses_it(server, admin, tmp_path):
    s, port = admin, free_port()
    setup_queue(s)
    agents = [Agent(server.url, server.token, "n%d" % i, tmp_path / ("a%d" % i))
              for i in range(2)]
    procs = Procs(tmp_path)
    stop = threading.Event()
    try:
        d = deployment("llm", port, window="2s", tpl=worker_template)
        assert s.post(s.base + "/deployments", json=d).status_code == 201
        wait_for(ready_endpoints(s, "llm", 1), timeout=30, what="stable endpoint")
        gw = procs.gateway([], "--server", server.url, "--token", server.token,
                           "--analysis-window", "1s")

        def traffic():
            sess = requests.Session()
            while not stop.is_set():
                try:
                    sess.post(gw.url + "/v1/completions", timeout=10,
                              json={"model": "tiny", "prompt": "x", "max_tokens": 2})
                except requests.RequestException:
                    time.sleep(0.1)
        ts = [threading.Thread(target=traffic) for _ in range(2)]
        for t in ts:
            t.start()
        r = s.patch(s.base + "/deployments/llm",
                    json={"spec": {"version": "2", "template": worker_template(port, "2")}})
        assert r.status_code == 200, r.text
        # Evidence from the gateway's windows carries it through both steps.
        wait_for(lambda: phase(s, "llm")["phase"] == "Complete" and
                 phase(s, "llm")["stable"] == "2", timeout=90, what="promotion on evidence")
        events = s.get(s.base + "/events").json()["items"]
        assert [e for e in events if e["reason"] == "RolloutStep"]
        # The gateway down, the next canary pauses and never completes.
        stop.set()
        for t in ts:
            t.join()
        stop_process(gw.proc, signal.SIGTERM)
        r = s.patch(s.base + "/deployments/llm",
                    json={"spec": {"version": "3", "template": worker_template(port, "3")}})
        assert r.status_code == 200
        ro = wait_for(lambda: (lambda r: r if r["phase"] == "Paused" else None)(
            phase(s, "llm")), timeout=60, what="the pause without a gateway")
        assert "gateway" in ro["reason"] and ro["canary"] == "3"
        time.sleep(6)
        ro = phase(s, "llm")
        assert ro["phase"] == "Paused" and ro["stable"] == "2" and ro["step"] == 0
    finally:
        stop.set()
        procs.stop()
        for a in agents:
            a.stop()


def test_min_requests_is_validated(server, admin):
    s = admin
    setup_queue(s)
    for bad in (0, -1, "5", 1.5):
        d = deployment("v", 9000)
        d["spec"]["rollout"]["minRequests"] = bad
        r = s.post(s.base + "/deployments", json=d)
        assert r.status_code == 400, (bad, r.text)
        assert r.json()["error"]["field"] == "spec.rollout.minRequests"


def test_early_rollback_confidence_is_validated(server, admin):
    s = admin
    setup_queue(s)
    for bad in (0.3, 1, 1.5, -0.1, "0.99", True):
        d = deployment("v", 9000)
        d["spec"]["rollout"]["earlyRollbackConfidence"] = bad
        r = s.post(s.base + "/deployments", json=d)
        assert r.status_code == 400, (bad, r.text)
        assert r.json()["error"]["field"] == "spec.rollout.earlyRollbackConfidence", r.text
    for good in (0, 0.95, 0.99, 0.9999):
        d = deployment("v%d" % int(good * 10000), 9000)
        d["spec"]["rollout"]["earlyRollbackConfidence"] = good
        d["spec"]["replicas"] = 0
        r = s.post(s.base + "/deployments", json=d)
        assert r.status_code == 201, (good, r.text)
