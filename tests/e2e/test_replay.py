"""A live cluster replayed: what `get -o yaml` prints applies back to a
fresh server and loads in `starcloud schedule -f`, status included (the
pods running are the cluster's state)."""
import json
import os
import subprocess

from conftest import BIN, Server, job, manifest, node, queue
from test_sched import phase, wait_for

KINDS = ("nodes", "queues", "priorityclasses", "jobs", "events")


def cli(url, token, *args):
    env = dict(os.environ, STARCLOUD_SERVER=url, STARCLOUD_TOKEN=token, HOME="/nonexistent")
    return subprocess.run([BIN] + list(args), capture_output=True, text=True, env=env,
                          timeout=60)


def test_get_yaml_applies_back_and_replays_offline(server, admin, tmp_path):
    for i in range(2):
        assert admin.post(admin.base + "/nodes", json=node("n%d" % i)).status_code == 201
    admin.post(admin.base + "/queues", json=queue("team-a", 16))
    admin.post(admin.base + "/priorityclasses",
               json=manifest("PriorityClass", "low", {"value": 40, "preemptible": True}))
    low = job("runs", gpus=4, replicas=2)
    low["spec"]["priorityClass"] = "low"
    admin.post(admin.base + "/jobs", json=low)
    admin.post(admin.base + "/jobs", json=job("waits", gpus=8, replicas=4))
    wait_for(lambda: phase(admin, "runs") == "Running", what="runs Running")
    wait_for(lambda: phase(admin, "waits") == "Pending", what="waits Pending")
    live = admin.get(admin.base + "/jobs/runs").json()

    dump = tmp_path / "dump"
    dump.mkdir()
    for k in KINDS:
        r = cli(server.url, server.token, "get", k, "-o", "yaml")
        assert r.returncode == 0, r.stderr
        (dump / (k + ".yaml")).write_text(r.stdout)

    # Offline: the running pods are the state, so the same placement holds and
    # nothing new is bound; the gang still does not fit.
    r = subprocess.run([BIN, "schedule", "-f", str(dump), "-o", "json"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["bindings"] == []
    assert [p["job"] for p in out["pending"]] == ["waits"]
    team = [q for q in out["queues"] if q["name"] == "team-a"][0]
    assert team["allocated"]["gpu"] == 8

    # Applied to a fresh server (as an admin, who may write status): the same
    # objects, the running job with its pods where they were.
    fresh = Server(tmp_path / "fresh").start()
    fresh.read_admin_token()
    try:
        r = cli(fresh.url, fresh.token, "apply", "-f", str(dump))
        assert r.returncode == 0, r.stderr
        assert "events/" in r.stdout and "skipped" in r.stdout
        s = fresh.session()
        got = s.get(s.base + "/jobs/runs").json()
        assert got["status"]["pods"] == live["status"]["pods"]
        assert got["spec"] == live["spec"]
        wait_for(lambda: s.get(s.base + "/jobs/waits").json().get("status", {}).get("phase")
                 == "Pending", what="waits Pending on the fresh server")
        # The fresh server's loop keeps the running pods (nothing re-bound).
        assert s.get(s.base + "/jobs/runs").json()["status"]["pods"] == live["status"]["pods"]
    finally:
        fresh.stop()


def test_a_list_with_a_bad_item_names_it(tmp_path):
    f = tmp_path / "list.yaml"
    f.write_text("apiVersion: starcloud.dev/v1\nkind: JobList\nitems:\n"
                 "- apiVersion: starcloud.dev/v1\n  kind: Job\n  metadata: {name: a}\n"
                 "  spec: {queue: q, tasks: [{replicas: two}]}\n")
    r = subprocess.run([BIN, "schedule", "-f", str(f)], capture_output=True, text=True,
                       timeout=60)
    # The error points at the item: its line, its object and its field.
    assert r.returncode == 2 and "list.yaml:7:" in r.stderr and "Job a: spec.tasks[0].replicas" \
        in r.stderr, r.stderr
