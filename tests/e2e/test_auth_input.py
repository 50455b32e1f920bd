"""RBAC matrix, bad input per kind, and durability across kill -9."""
import base64
import json
import signal
import sqlite3
import subprocess
import threading
import time
import zlib

import pytest
import requests

from conftest import BIN, EXAMPLES, Server, job, queue, settled


def mint(admin, role, queues=()):
    r = admin.post(admin.base + "/tokens", json={"role": role, "queues": list(queues)})
    assert r.status_code == 201, r.text
    return r.json()["token"]


@pytest.fixture
def rbac(server, admin):
    for q in ("team-a", "team-b"):
        assert admin.post(admin.base + "/queues", json=queue(q)).status_code == 201
    assert admin.post(admin.base + "/jobs", json=job("job-b", q="team-b")).status_code == 201
    tenant = server.session(mint(admin, "tenant", ["team-a"]))
    viewer = server.session(mint(admin, "viewer"))
    return admin, tenant, viewer


def test_no_or_bad_token_is_401(server):
    assert requests.get(server.url + "/api/v1/jobs").status_code == 401
    bad = server.session("sc_" + "0" * 48)
    assert bad.get(bad.base + "/jobs").status_code == 401
    r = requests.get(server.url + "/api/v1/jobs", headers={"Authorization": "Basic x"})
    assert r.status_code == 401


def test_tenant(rbac):
    admin, tenant, _ = rbac
    jobs = tenant.base + "/jobs"
    assert tenant.post(jobs, json=job("mine", q="team-a")).status_code == 201
    # Another tenant's queue: refused on write, invisible on read.
    r = tenant.post(jobs, json=job("theirs", q="team-b"))
    assert r.status_code == 403 and r.json()["error"]["field"] == "spec.queue"
    assert tenant.get(jobs + "/job-b").status_code == 404
    assert tenant.delete(jobs + "/job-b").status_code == 404
    assert tenant.patch(jobs + "/job-b", json={"metadata": {"labels": {"x": "y"}}}).status_code == 404
    assert [j["metadata"]["name"] for j in tenant.get(jobs).json()["items"]] == ["mine"]
    # Moving its own job into a foreign queue is refused.
    r = tenant.patch(jobs + "/mine", json={"spec": {"queue": "team-b"}})
    assert r.status_code == 403
    # Queues: sees its own only, never writes.
    assert [q["metadata"]["name"] for q in tenant.get(tenant.base + "/queues").json()["items"]] == ["team-a"]
    assert tenant.get(tenant.base + "/queues/team-b").status_code == 404
    assert tenant.post(tenant.base + "/queues", json=queue("team-c")).status_code == 403
    assert tenant.post(tenant.base + "/nodes", json=EXAMPLES["nodes"]("n")).status_code == 403
    assert tenant.get(tenant.base + "/tokens").status_code == 403
    assert tenant.delete(jobs + "/mine").status_code == 200
    assert admin.get(admin.base + "/jobs/job-b").status_code == 200


def test_viewer_reads_only(rbac):
    admin, _, viewer = rbac
    assert viewer.get(viewer.base + "/jobs/job-b").status_code == 200
    assert len(viewer.get(viewer.base + "/queues").json()["items"]) == 2
    for plural in EXAMPLES:
        assert viewer.post(viewer.base + "/" + plural, json=EXAMPLES[plural]("v")).status_code == 403
    assert viewer.delete(viewer.base + "/jobs/job-b").status_code == 403
    assert viewer.put(viewer.base + "/jobs/job-b", json=job("job-b", q="team-b")).status_code == 403
    assert viewer.post(viewer.base + "/tokens", json={"role": "admin"}).status_code == 403


def test_token_management(server, admin):
    tok = mint(admin, "viewer")
    s = server.session(tok)
    me = s.get(s.base + "/tokens/self").json()
    assert me["role"] == "viewer"
    listed = admin.get(admin.base + "/tokens").json()["items"]
    assert any(t["id"] == me["id"] for t in listed)
    assert all("hash" not in t for t in listed)
    assert admin.delete(admin.base + "/tokens/" + me["id"]).status_code == 200
    assert s.get(s.base + "/jobs").status_code == 401
    for bad in ({"role": "king"}, {"role": "tenant"}, {"role": "tenant", "queues": ["Bad Name"]},
                {"role": "viewer", "extra": 1}):
        r = admin.post(admin.base + "/tokens", json=bad)
        assert r.status_code == 400, bad


def test_tokens_are_stored_hashed(server, admin, backend):
    tok = mint(admin, "viewer")
    if backend == "etcd":
        etcd = server.extra[1][len("etcd://"):].split(",")[0]
        r = requests.post("http://%s/v3/kv/range" % etcd, json={"key": "Lw==", "range_end": "MA=="})
        values = b"".join(base64.b64decode(kv["value"]) for kv in r.json()["kvs"])
        assert tok.encode() not in values and server.token.encode() not in values
        return
    with open(server.data_dir + "/store.db", "rb") as f:
        data = f.read()
    wal = open(server.data_dir + "/store.db-wal", "rb").read()
    assert tok.encode() not in data and tok.encode() not in wal
    assert server.token.encode() not in data and server.token.encode() not in wal
    # Values of 128 bytes or more are stored deflated (store schema 3): the
    # bytes of the file do not show them, so every value is read unpacked.
    db = sqlite3.connect(server.data_dir + "/store.db")
    try:
        values = [v if isinstance(v, str) else zlib.decompress(v[4:], -15).decode()
                  for (v,) in db.execute("SELECT value FROM changes")]
    finally:
        db.close()
    assert any("viewer" in v for v in values)  # the token's record is there...
    assert not any(tok in v or server.token in v for v in values)  # ...hashed


def deep_set(obj, path, value):
    cur = obj
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return obj


# (kind, path to change, bad value, field named in the error)
BAD = [
    ("nodes", ["spec", "gpus", "count"], 99, "spec.gpus.count"),
    ("nodes", ["spec", "memory"], "lots", "spec.memory"),
    ("nodes", ["spec", "colour"], "red", "spec.colour"),
    ("queues", ["spec", "resources", "gpu", "quota"], "eight", "spec.resources.gpu.quota"),
    ("queues", ["spec", "resources", "gpu", "overQuotaWeight"], -1,
     "spec.resources.gpu.overQuotaWeight"),
    ("queues", ["spec", "priority"], 1.5, "spec.priority"),
    ("priorityclasses", ["spec", "value"], "high", "spec.value"),
    ("priorityclasses", ["spec", "preemptible"], "yes", "spec.preemptible"),
    ("jobs", ["spec", "tasks", 0, "resources", "gpu"], -1, "spec.tasks[0].resources.gpu"),
    ("jobs", ["spec", "tasks", 0, "resources", "gpuFraction"], 1.5,
     "spec.tasks[0].resources.gpuFraction"),
    ("jobs", ["spec", "tasks", 0, "replicas"], "two", "spec.tasks[0].replicas"),
    ("jobs", ["spec", "placement"], "random", "spec.placement"),
    ("jobs", ["spec", "tasks"], [], "spec.tasks"),
    ("jobs", ["spec", "bogus"], 1, "spec.bogus"),
    ("jobs", ["metadata", "name"], "Not_Valid", "metadata.name"),
    ("deployments", ["spec", "replicas"], -2, "spec.replicas"),
    ("deployments", ["spec", "rollout"], {"maxErrorRate": 2}, "spec.rollout.maxErrorRate"),
    ("deployments", ["spec", "queue"], 5, "spec.queue"),
    ("deployments", ["spec", "template"], "x", "spec.template"),
]


@pytest.mark.parametrize("plural,path,value,field", BAD)
def test_bad_input_per_kind(admin, plural, path, value, field):
    obj = deep_set(EXAMPLES[plural]("bad"), path, value)
    r = admin.post(admin.base + "/" + plural, json=obj)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["field"] == field and err["reason"] == "Invalid" and field in err["message"]
    assert admin.get(admin.base + "/" + plural).json()["items"] == []
    # The same mistake in a PUT over a good object: refused the same way, nothing changes.
    base = admin.base + "/" + plural
    assert admin.post(base, json=EXAMPLES[plural]("bad")).status_code == 201
    cur = settled(admin, base + "/bad") if plural in ("jobs", "deployments") else \
        admin.get(base + "/bad").json()
    r = admin.put(base + "/bad", json=deep_set(json.loads(json.dumps(cur)), path, value))
    assert r.status_code == 400, r.text
    assert r.json()["error"]["field"] == field
    assert admin.get(base + "/bad").json() == cur


@pytest.mark.parametrize("plural", sorted(EXAMPLES))
def test_malformed_wrong_kind_and_missing_fields(admin, plural):
    base = admin.base + "/" + plural
    r = admin.post(base, data="{not json")
    assert r.status_code == 400 and r.json()["error"]["reason"] == "BadRequest"
    assert admin.post(base, data='{"a":1,"a":2}').status_code == 400  # duplicate keys
    obj = EXAMPLES[plural]("x")
    obj["kind"] = "Elephant"
    r = admin.post(base, json=obj)
    assert r.status_code == 400 and r.json()["error"]["field"] == "kind"
    obj = EXAMPLES[plural]("x")
    del obj["metadata"]["name"]
    r = admin.post(base, json=obj)
    assert r.status_code == 400 and r.json()["error"]["field"] == "metadata.name"
    r = admin.post(base, json=[EXAMPLES[plural]("x")])
    assert r.status_code == 400
    # A bad PATCH leaves the object as it was.
    admin.post(base, json=EXAMPLES[plural]("keep"))
    before = settled(admin, base + "/keep") if plural in ("jobs", "deployments") else \
        admin.get(base + "/keep").json()
    r = admin.patch(base + "/keep", json={"spec": {"nonsense": True}})
    assert r.status_code == 400 and r.json()["error"]["field"] == "spec.nonsense"
    assert admin.get(base + "/keep").json() == before
    assert admin.get(base, params={"x": "1"}).status_code == 200


def test_unknown_kind_and_events_readonly(admin):
    r = admin.get(admin.base + "/elephants")
    assert r.status_code == 404 and r.json()["error"]["field"] == "kind"
    assert admin.post(admin.base + "/events", json={"kind": "Event"}).status_code == 405


def test_kill_9_during_applies_keeps_acknowledged(tmp_path):
    srv = Server(tmp_path / "data").start()
    srv.read_admin_token()
    admin = srv.session()
    acked = []
    stop = threading.Event()

    def worker(start):
        s = requests.Session()
        s.headers.update(admin.headers)
        for i in range(start, 1000, 4):
            if stop.is_set():
                return
            try:
                r = s.post(admin.base + "/jobs", json=job("j-%04d" % i), timeout=5)
            except requests.RequestException:
                return
            if r.status_code == 201:
                acked.append("j-%04d" % i)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    deadline = time.time() + 60
    while len(acked) < 300 and time.time() < deadline:
        time.sleep(0.01)
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait()
    stop.set()
    for t in threads:
        t.join()
    srv.out.close()
    assert len(acked) >= 300
    srv2 = Server(tmp_path / "data").start()  # same data dir, new port
    try:
        s = srv2.session(srv.token)  # the admin token survives too
        names = {j["metadata"]["name"] for j in s.get(s.base + "/jobs").json()["items"]}
        missing = set(acked) - names
        assert not missing, "acknowledged but lost: %s" % sorted(missing)[:10]
    finally:
        srv2.stop()
