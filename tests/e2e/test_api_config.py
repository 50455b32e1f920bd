"""The cluster's SchedulerConfig and Topology through the API (admin only, one
"default" each, used by the scheduling loop); creationTimestamp owned by the
server; malformed label selectors refused; a busy port said plainly."""
import subprocess
import time

import pytest
import requests

from agent_util import wait_for
from conftest import BIN, CKPT_MICRO, free_port, gen_checkpoint, job, manifest, node, queue


def config(spec, name="default"):
    return manifest("SchedulerConfig", name, spec)


def topology(levels, name="default"):
    return manifest("Topology", name, {"levels": levels})


def reason(admin, name):
    j = admin.get(admin.base + "/jobs/" + name).json()
    return j.get("status", {}).get("reason") or ""


def test_config_kinds_crud_and_roles(server, admin):
    base = admin.base + "/schedulerconfigs"
    r = admin.post(base, json=config({"actions": ["allocate"]}))
    assert r.status_code == 201, r.text
    assert admin.get(base + "/default").json()["spec"]["actions"] == ["allocate"]
    # One per cluster, named default.
    r = admin.post(base, json=config({"actions": ["allocate"]}, name="other"))
    assert r.status_code == 400 and r.json()["error"]["field"] == "metadata.name", r.text
    assert "default" in r.json()["error"]["message"]
    # Validated by the manifest decoder: the field is named, nothing stored.
    r = admin.put(base + "/default", json=config({"actions": ["allocate", "teleport"]}))
    assert r.status_code == 400 and "actions" in r.json()["error"]["field"], r.text
    assert admin.get(base + "/default").json()["spec"]["actions"] == ["allocate"]
    r = admin.post(admin.base + "/topologies", json=topology([]))
    assert r.status_code == 400 and "levels" in r.json()["error"]["field"], r.text
    r = admin.post(admin.base + "/topologies", json=manifest("Queue", "default", {}))
    assert r.status_code == 400 and r.json()["error"]["field"] == "kind", r.text
    # Tenants and viewers read them and write nothing.
    for role in ("tenant", "viewer"):
        body = {"role": role, "queues": ["team-a"]} if role == "tenant" else {"role": role}
        tok = admin.post(admin.base + "/tokens", json=body).json()["token"]
        other = server.session(tok)
        assert other.get(base + "/default").status_code == 200
        r = other.put(base + "/default", json=config({"actions": ["allocate", "reclaim"]}))
        assert r.status_code == 403, r.text
        r = other.post(admin.base + "/topologies", json=topology(["rack"]))
        assert r.status_code == 403, r.text
    assert admin.delete(base + "/default").status_code == 200


def test_topology_object_used_by_the_loop(server, admin):
    """A gang that needs one rack: any label key is a level while the
    cluster declares none; once the Topology lists only zone, the loop
    refuses rack as `schedule -f` does with the same manifests, and it
    accepts it again when rack is added."""
    for i, rack in enumerate(["r1", "r1", "r2", "r2"]):
        admin.post(admin.base + "/nodes", json=node("n%d" % i, gpus=2,
                                                      labels={"rack": rack, "zone": "z"}))
    admin.post(admin.base + "/queues", json=queue("team-a", gpu_quota=8))
    gang = job("gang", gpus=1, replicas=6)
    gang["spec"]["topology"] = {"required": "rack"}
    assert admin.post(admin.base + "/jobs", json=gang).status_code == 201
    wait_for(lambda: "no rack has room" in reason(admin, "gang"), what="a rack reason")
    r = admin.post(admin.base + "/topologies", json=topology(["zone"]))
    assert r.status_code == 201, r.text
    wait_for(lambda: "not one of the cluster's levels" in reason(admin, "gang"),
             what="rack refused by the Topology")
    got = admin.get(admin.base + "/topologies/default").json()
    got["spec"]["levels"] = ["zone", "rack"]
    assert admin.put(admin.base + "/topologies/default", json=got).status_code == 200
    wait_for(lambda: "no rack has room" in reason(admin, "gang"), what="rack accepted again")


def test_scheduler_config_object_used_by_the_loop(server, admin):
    """actions: [allocate] turns reclaim off: the owner's job waits while the
    borrower keeps its pods; deleting the object brings reclaim back."""
    admin.post(admin.base + "/nodes", json=node("n0", gpus=4))
    admin.post(admin.base + "/queues", json=queue("borrower", gpu_quota=0))
    admin.post(admin.base + "/queues", json=queue("owner", gpu_quota=4))
    assert admin.post(admin.base + "/schedulerconfigs",
                      json=config({"actions": ["allocate"]})).status_code == 201
    for i in range(4):
        admin.post(admin.base + "/jobs", json=job("borrow-%d" % i, q="borrower", gpus=1))

    def running(name):
        pods = admin.get(admin.base + "/jobs/" + name).json().get("status", {}).get("pods", [])
        return len([p for p in pods if p.get("phase") == "Running"])

    def borrowed():
        return sum(running("borrow-%d" % i) for i in range(4))
    wait_for(lambda: borrowed() == 4, what="the borrower on all 4 GPUs")
    admin.post(admin.base + "/jobs", json=job("own", q="owner", gpus=1, replicas=2))
    wait_for(lambda: reason(admin, "own"), what="the owner's pending reason")
    time.sleep(2.5)  # cycles run every second: two more would have reclaimed
    assert borrowed() == 4 and running("own") == 0
    assert admin.delete(admin.base + "/schedulerconfigs/default").status_code == 200
    wait_for(lambda: running("own") == 2, timeout=20, what="reclaim after the config went")


def test_creation_timestamp_owned_by_server(admin):
    old = job("stamped")
    old["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    r = admin.post(admin.base + "/jobs", json=old)
    assert r.status_code == 201, r.text
    ts = r.json()["metadata"]["creationTimestamp"]
    assert not ts.startswith("2020"), ts
    got = admin.get(admin.base + "/jobs/stamped").json()
    got["metadata"]["creationTimestamp"] = "2001-01-01T00:00:00Z"
    for _ in range(10):  # the loop may write status meanwhile: retry on 409
        r = admin.put(admin.base + "/jobs/stamped", json=got)
        if r.status_code != 409:
            break
        got = admin.get(admin.base + "/jobs/stamped").json()
        got["metadata"]["creationTimestamp"] = "2001-01-01T00:00:00Z"
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["creationTimestamp"] == ts
    r = admin.patch(admin.base + "/jobs/stamped",
                    json={"metadata": {"creationTimestamp": None}},
                    headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["metadata"]["creationTimestamp"] == ts


@pytest.mark.parametrize("sel", ["a in (b)", "a=b=c", "=x", "a!", "a,,b", ",", "a=b,",
                                 "-a=b", "a=-b", "a/b/c=d", "a" * 64, "!", "a!==b",
                                 "k=" + "v" * 64, "a b"])
def test_bad_label_selector_is_400(admin, sel):
    admin.post(admin.base + "/jobs", json=job("j", labels={"a": "b"}))
    for extra in ({}, {"watch": "1"}):
        r = admin.get(admin.base + "/jobs", params=dict(labelSelector=sel, **extra),
                      timeout=5)
        assert r.status_code == 400, (sel, r.status_code, r.text[:200])
        e = r.json()["error"]
        assert e["field"] == "labelSelector" and "labelSelector" in e["message"], e


@pytest.mark.parametrize("sel,names", [
    ("team=a", ["j1"]), ("team==a", ["j1"]), ("team!=a", ["j2", "j3"]), ("team", ["j1", "j2"]),
    ("!team", ["j3"]), ("team=a,tier=gold", ["j1"]), ("example.com/x=y", ["j3"]),
    ("team=", []), ("", ["j1", "j2", "j3"])])
def test_good_label_selectors(admin, sel, names):
    admin.post(admin.base + "/jobs", json=job("j1", labels={"team": "a", "tier": "gold"}))
    admin.post(admin.base + "/jobs", json=job("j2", labels={"team": "b"}))
    admin.post(admin.base + "/jobs", json=job("j3", labels={"example.com/x": "y"}))
    r = admin.get(admin.base + "/jobs", params={"labelSelector": sel})
    assert r.status_code == 200, r.text
    assert sorted(o["metadata"]["name"] for o in r.json()["items"]) == names


@pytest.mark.parametrize("verb", ["server", "gateway", "agent", "worker"])
def test_busy_port_is_said(tmp_path, verb):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    args = {"server": ["--data-dir", str(tmp_path / "d")],
            "gateway": ["--backend", "model=m,version=1,url=http://127.0.0.1:1"],
            "agent": ["--server", "http://127.0.0.1:1", "--token", "x", "--name", "n",
                      "--data-dir", str(tmp_path / "a"), "--gpus", "1xA100-80GB"],
            "worker": ["--gen-checkpoint-if-missing"]}[verb]
    if verb == "worker":
        ck = tmp_path / "c.bin"
        gen_checkpoint(ck, **dict(CKPT_MICRO, seq_len=32))
        args = ["--checkpoint", str(ck)]
    try:
        p = subprocess.run([BIN, verb, "--listen", "127.0.0.1:%d" % port] + args,
                           capture_output=True, text=True, timeout=30)
    finally:
        s.close()
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "cannot listen on 127.0.0.1:%d: address already in use" % port in p.stderr, p.stderr
    assert "input/output error" not in p.stderr, p.stderr
    if verb == "server":
        # No admin token was made (it would be lost): the next start prints one.
        assert "sc_" not in p.stdout, p.stdout
