"""Serving, server side: a Deployment kept running as ready endpoints by
real agents, canary rollouts with automatic rollback, the rollout API."""
import os
import signal
import subprocess

import pytest
import requests

from agent_util import Agent, processes_with_env, setup_queue, wait_for
import random
import socket

from conftest import BIN, manifest, pod_program


def free_port():
    """A base port for a deployment's pods: the server hands out base, base+1, ... per host,
    and every agent of the test runs on 127.0.0.1. The block lies below the kernel's
    ephemeral range (32768-60999) so client sockets of other tests cannot take a port of it
    between this check and the pod's start, and every port of it is free now."""
    rnd = random.Random()
    for _ in range(200):
        base = rnd.randrange(20000, 32000, 16)
        try:
            socks = []
            for p in range(base, base + 16):
                sk = socket.socket()
                socks.append(sk)
                sk.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for sk in socks:
                sk.close()
    raise RuntimeError("no free block of 16 ports below 32000")

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serving_worker.py")


def template(port, version):
    return {"command": ["/usr/bin/python3", pod_program(WORKER)], "port": port,
            "env": {"VERSION": version},
            "resources": {"cpu": "100m", "memory": "64Mi"},
            "probes": {"readiness": {"http": {"path": "/v2/health/ready", "port": port},
                                     "periodSeconds": 1}}}


def deployment(name, port, version="1", replicas=2, window="1h"):
    return manifest("Deployment", name, {
        "queue": "q", "model": "tiny", "version": version, "replicas": replicas,
        "template": template(port, version),
        "rollout": {"steps": [10, 50, 100], "analysisWindow": window, "maxErrorRate": 0.05}})


@pytest.fixture
def cluster(server, admin, tmp_path):
    agents = [Agent(server.url, server.token, "n%d" % i, tmp_path / ("a%d" % i))
              for i in range(2)]
    setup_queue(admin)
    yield admin
    for a in agents:
        a.stop()


def dep(s, name):
    return s.get(s.base + "/deployments/" + name).json()


def ready_endpoints(s, name, n, version=None):
    def check():
        eps = dep(s, name).get("status", {}).get("endpoints", [])
        eps = [e for e in eps if e["ready"] and (version is None or e["version"] == version)]
        return eps if len(eps) == n else None
    return check


def answers(url, path="/version"):
    try:
        return requests.get(url + path, timeout=1).text
    except requests.RequestException:
        return None


def set_version(s, name, port, version):
    r = s.patch(s.base + "/deployments/" + name,
                json={"spec": {"version": version, "template": template(port, version)}})
    assert r.status_code == 200, r.text


def rollout(s, name, body, sub="rollout"):
    return s.post(s.base + "/deployments/%s/%s" % (name, sub), json=body)


def test_replicas_become_ready_endpoints_and_are_replaced(cluster, tmp_path):
    s, port = cluster, free_port()
    assert s.post(s.base + "/deployments", json=deployment("chat", port)).status_code == 201
    eps = wait_for(ready_endpoints(s, "chat", 2), timeout=30, what="2 ready endpoints")
    assert {e["node"] for e in eps} == {"n0", "n1"}     # spread over 2 nodes
    for e in eps:
        assert e["version"] == "1" and e["role"] == "both"
        assert e["url"].startswith("http://127.0.0.1:")
        assert answers(e["url"]) == "1"
    # Both nodes share one address here, so the server gave distinct ports.
    assert len({e["url"] for e in eps}) == 2
    node = s.get(s.base + "/nodes/n0").json()
    assert node["status"]["address"] == "127.0.0.1"

    victim = eps[0]["pod"]
    pids = processes_with_env("STARCLOUD_POD", victim, str(tmp_path))  # this test's only
    assert pids
    os.kill(pids[0], signal.SIGKILL)

    def restarted():
        pods = {p["name"]: p for p in dep(s, "chat")["status"]["pods"]}
        return pods[victim].get("restarts", 0) >= 1 and pods[victim].get("ready")
    wait_for(restarted, timeout=30, what="the killed replica restarted and ready")
    eps = wait_for(ready_endpoints(s, "chat", 2), timeout=30, what="endpoints back")
    assert all(answers(e["url"]) == "1" for e in eps)

    # Scaling down releases the extra replica and its endpoint.
    r = s.patch(s.base + "/deployments/chat", json={"spec": {"replicas": 1}})
    assert r.status_code == 200, r.text
    wait_for(ready_endpoints(s, "chat", 1), timeout=30, what="one endpoint left")


def test_disaggregated_pods_run_their_role_template(cluster):
    # Each role's pods run that role's template. The Deployment's rollout
    # state and templates are stored by the create itself: before, they
    # came with the controller's next pass, the scheduling loop could bind
    # the pods first, and an agent then started prefill pods from
    # spec.template (the soak of issue 23 found prefill pods running as
    # decode workers).
    s, port = cluster, free_port()

    def body_at(name, p):
        def tpl(role):
            t = template(p, "1")
            t["env"] = {"VERSION": "1", "ROLE": role}
            return t
        return manifest("Deployment", name, {
            "queue": "q", "model": "tiny", "version": "1", "template": tpl("base"),
            "disaggregation": {"prefill": {"replicas": 2, "template": tpl("prefill")},
                               "decode": {"replicas": 1, "template": tpl("decode")}}})
    body = body_at("pd", port)
    r = s.post(s.base + "/deployments", json=body)
    assert r.status_code == 201, r.text
    st = r.json()["status"]
    assert st["rollout"]["stable"] == "1" and st["rollout"]["phase"] == "Complete"
    assert {k: v["role"] for k, v in st["templates"].items()} == {
        "prefill-v1": "prefill", "decode-v1": "decode"}
    assert st["templates"]["prefill-v1"]["template"]["env"]["ROLE"] == "prefill"
    eps = wait_for(ready_endpoints(s, "pd", 3), timeout=30, what="3 ready endpoints")
    assert sorted(e["role"] for e in eps) == ["decode", "prefill", "prefill"]
    for e in eps:
        assert answers(e["url"], "/role") == e["role"], e
    # A Deployment restored with a rollout but no recorded templates (an
    # admin's write of an older backup): its agents fall back to the spec,
    # by role.
    body = body_at("pd2", port + 8)
    body["status"] = {"rollout": {"stable": "1", "phase": "Complete", "step": 0,
                                  "weights": {"1": 100}}}
    r = s.post(s.base + "/deployments", json=body)
    assert r.status_code == 201 and "templates" not in r.json()["status"], r.text
    eps = wait_for(ready_endpoints(s, "pd2", 3), timeout=30, what="3 ready endpoints")
    assert "templates" not in dep(s, "pd2")["status"]
    for e in eps:
        assert answers(e["url"], "/role") == e["role"], e


def test_canary_rolls_back_on_errors(cluster, tmp_path):
    s, port = cluster, free_port()
    assert s.post(s.base + "/deployments", json=deployment("llm", port)).status_code == 201
    wait_for(ready_endpoints(s, "llm", 2), timeout=30, what="stable endpoints")

    set_version(s, "llm", port, "2")
    ro = dep(s, "llm")["status"]["rollout"]
    assert ro["stable"] == "1" and ro["canary"] == "2" and ro["phase"] == "Progressing"
    assert ro["weights"] == {"1": 90, "2": 10}
    assert dep(s, "llm")["status"]["stableVersion"] == "1"
    canary = wait_for(ready_endpoints(s, "llm", 1, version="2"), timeout=30, what="canary")
    assert answers(canary[0]["url"]) == "2"
    stable = ready_endpoints(s, "llm", 2, version="1")()
    assert stable and all(answers(e["url"]) == "1" for e in stable)

    # A healthy stable window changes nothing; 20 % canary errors roll back.
    r = rollout(s, "llm", {"version": "1", "requests": 100, "errors": 1, "p99": 0.2},
                "rollout/report")
    assert r.status_code == 200 and r.json()["rollout"]["phase"] == "Progressing"
    r = rollout(s, "llm", {"version": "2", "requests": 50, "errors": 10, "p99": 0.4},
                "rollout/report")
    assert r.status_code == 200, r.text
    ro = r.json()["rollout"]
    assert ro["phase"] == "RolledBack" and ro["weights"] == {"1": 100, "2": 0}
    assert "error rate" in ro["reason"]
    wait_for(ready_endpoints(s, "llm", 2, version="1"), timeout=30, what="stable kept")
    wait_for(lambda: not [e for e in dep(s, "llm")["status"]["endpoints"]
                          if e["version"] == "2"], timeout=30, what="canary gone")
    wait_for(lambda: not processes_with_env("STARCLOUD_POD", canary[0]["pod"], str(tmp_path)),
             timeout=30,
             what="canary process stopped")
    events = s.get(s.base + "/events").json()["items"]
    assert [e for e in events if e["reason"] == "RolledBack" and
            e["involvedObject"]["name"] == "llm"]
    metrics = s.get(s.base.replace("/api/v1", "/metrics")).text
    assert 'starcloud_rollbacks_total{reason="error_rate"} 1' in metrics


def test_promote_and_abort(cluster):
    s, port = cluster, free_port()
    assert s.post(s.base + "/deployments", json=deployment("svc", port)).status_code == 201
    wait_for(ready_endpoints(s, "svc", 2), timeout=30, what="stable endpoints")
    set_version(s, "svc", port, "2")
    r = rollout(s, "svc", {"action": "promote"})
    assert r.status_code == 200, r.text
    assert r.json()["rollout"]["weights"] == {"1": 0, "2": 100}

    def promoted():
        ro = dep(s, "svc")["status"]["rollout"]
        return ro["phase"] == "Complete" and ro["stable"] == "2"
    wait_for(promoted, timeout=40, what="promotion complete")
    eps = wait_for(ready_endpoints(s, "svc", 2, version="2"), timeout=30, what="v2 endpoints")
    assert all(answers(e["url"]) == "2" for e in eps)
    wait_for(lambda: len(dep(s, "svc")["status"]["endpoints"]) == 2, timeout=30,
             what="old version removed")
    events = s.get(s.base + "/events").json()["items"]
    assert [e for e in events if e["reason"] == "Promoted"]

    set_version(s, "svc", port, "3")
    cli = [BIN, "rollout", "--server", s.base.replace("/api/v1", ""),
           "--token", s.headers["Authorization"].split()[1]]
    out = subprocess.run(cli + ["status", "svc"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Progressing" in out.stdout and "3=10%" in out.stdout
    out = subprocess.run(cli + ["abort", "svc"], capture_output=True, text=True)
    assert out.returncode == 0 and "RolledBack" in out.stdout, out.stderr
    ro = dep(s, "svc")["status"]["rollout"]
    assert ro["phase"] == "RolledBack" and ro["stable"] == "2"
    got = s.get(s.base + "/deployments/svc/rollout").json()
    assert got["rollout"]["phase"] == "RolledBack" and got["version"] == "3"
    metrics = s.get(s.base.replace("/api/v1", "/metrics")).text
    assert 'starcloud_rollbacks_total{reason="abort"} 1' in metrics
    # Nothing left to abort.
    assert rollout(s, "svc", {"action": "abort"}).status_code == 409
    assert subprocess.run(cli + ["abort", "svc"], capture_output=True).returncode == 1
    assert subprocess.run(cli + ["explode", "svc"], capture_output=True).returncode == 2


def test_scaling_applies_to_the_stable_version_after_a_rollback(cluster):
    """A scale while spec.version names a version that is not the stable
    one (here: rolled back) reaches the stable version's replicas too. The
    soak of issue 23 scaled decode 2 -> 5 after a rollback and the stable
    version stayed at 2 (its recorded count), until a later rollout
    completed."""
    s, port = cluster, free_port()
    assert s.post(s.base + "/deployments",
                  json=deployment("sc", port, replicas=1)).status_code == 201
    wait_for(ready_endpoints(s, "sc", 1), timeout=30, what="one stable endpoint")
    set_version(s, "sc", port, "2")
    assert rollout(s, "sc", {"action": "abort"}).status_code == 200
    assert dep(s, "sc")["status"]["rollout"]["phase"] == "RolledBack"
    r = s.patch(s.base + "/deployments/sc", json={"spec": {"replicas": 3}})
    assert r.status_code == 200, r.text
    eps = wait_for(ready_endpoints(s, "sc", 3, version="1"), timeout=60,
                   what="3 ready endpoints of the stable version 1")
    assert all(answers(e["url"]) == "1" for e in eps)
    # And back down.
    r = s.patch(s.base + "/deployments/sc", json={"spec": {"replicas": 1}})
    assert r.status_code == 200, r.text
    wait_for(ready_endpoints(s, "sc", 1, version="1"), timeout=60, what="one endpoint left")


def test_rollout_bad_input(server, admin):
    s = admin
    setup_queue(s)
    assert s.post(s.base + "/deployments", json=deployment("m", 9100)).status_code == 201
    bad = [({"action": "explode"}, "rollout", "action"),
           ({"action": 5}, "rollout", "action"),
           ({"action": "promote", "extra": 1}, "rollout", "extra"),
           ({"version": "1", "requests": 10, "errors": 11}, "rollout/report", "errors"),
           ({"version": "1", "requests": -1, "errors": 0}, "rollout/report", "requests"),
           ({"requests": 1, "errors": 0}, "rollout/report", "version"),
           ({"version": "1", "requests": 1, "errors": 0, "p99": "slow"}, "rollout/report",
            "p99")]
    for body, sub, field in bad:
        r = rollout(s, "m", body, sub)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"]["field"] == field, (body, r.text)
    r = s.post(s.base + "/deployments/m/rollout", data="{not json")
    assert r.status_code == 400
    r = s.post(s.base + "/deployments/m/rollout", data="[1]")
    assert r.status_code == 400
    assert rollout(s, "m", {"action": "promote"}).status_code == 409   # no canary
    assert rollout(s, "m", {"version": "9", "requests": 1, "errors": 0},
                   "rollout/report").status_code == 409
    assert rollout(s, "nope", {"action": "promote"}).status_code == 404
    assert s.get(s.base + "/deployments/m/rollout/report").status_code == 405
    assert s.delete(s.base + "/deployments/m/rollout").status_code == 405
    assert s.get(s.base + "/deployments/m/rollouts").status_code == 404
    r = s.post(s.base + "/tokens", json={"role": "viewer"})
    viewer = server.session(r.json()["token"])
    assert viewer.get(viewer.base + "/deployments/m/rollout").status_code == 200
    assert rollout(viewer, "m", {"action": "promote"}).status_code == 403
    # A port out of range, a version too long: refused at apply, field named.
    d = deployment("p", 70000)
    r = s.post(s.base + "/deployments", json=d)
    assert r.status_code == 400 and r.json()["error"]["field"] == "spec.template.port"
    d = deployment("p", 9000, version="v" * 64)
    r = s.post(s.base + "/deployments", json=d)
    assert r.status_code == 400 and r.json()["error"]["field"] == "spec.version"
