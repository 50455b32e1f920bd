"""Compaction through the server (issue 25): n1 is half used by two preemptible
2-GPU jobs that have run for hours; n0 and n2 hold non-preemptible work with 2
GPUs free each. A non-preemptible 8-GPU job arrives: KAI's consolidation does
not serve it, compaction moves both pods off n1 and the job is bound there. The
moves are Evicted events with the reason, the moved pods carry movedAt,
explain of a moved job says so, and /metrics counts the evictions."""
import re

import requests

from conftest import create, job, manifest, node, queue, wait_for

LONG_AGO = "2020-01-01T00:00:00Z"


def running(name, q, gpus, cls, node_name, devices):
    j = job(name, q=q, gpus=gpus)
    j["spec"]["priorityClass"] = cls
    j["status"] = {"pods": [{"name": name + "-worker-0", "phase": "Running", "node": node_name,
                             "gpus": devices, "startedAt": LONG_AGO}]}
    return j


def queue_and_movable_class(admin):
    """Queue team-a (64 GPUs; CPU and memory without quota, since
    non-preemptible work must stay within quota in every resource it asks
    for) and batch-hi, a preemptible class whose pods compaction may move."""
    q = queue("team-a", 64)
    q["spec"]["resources"].update({"cpu": {"quota": -1}, "memory": {"quota": -1}})
    create(admin, "queues", q)
    create(admin, "priorityclasses",
           manifest("PriorityClass", "batch-hi", {"value": 100, "preemptible": True}))


def status(admin, name):
    return admin.get(admin.base + "/jobs/" + name).json().get("status", {})


def test_compaction_frees_a_node_for_a_big_job(server, admin):
    for i in range(3):
        assert admin.post(admin.base + "/nodes", json=node("n%d" % i)).status_code == 201
    queue_and_movable_class(admin)
    for obj in (running("fixed-0", "team-a", 6, "build", "n0", [0, 1, 2, 3, 4, 5]),
                running("fixed-2", "team-a", 6, "build", "n2", [0, 1, 2, 3, 4, 5]),
                running("a", "team-a", 2, "batch-hi", "n1", [0, 1]),
                running("b", "team-a", 2, "batch-hi", "n1", [2, 3])):
        r = admin.post(admin.base + "/jobs", json=obj)
        assert r.status_code == 201, r.text
    big = job("big", gpus=8)
    big["spec"]["priorityClass"] = "build"
    assert admin.post(admin.base + "/jobs", json=big).status_code == 201

    def big_on_n1():
        pods = status(admin, "big").get("pods") or []
        return pods and pods[0].get("node") == "n1"
    wait_for(big_on_n1, what="big bound to n1")

    evs = admin.get(admin.base + "/events").json()["items"]
    moves = [e for e in evs if e["reason"] == "Evicted" and e.get("action") == "compaction"]
    assert sorted(e["involvedObject"]["name"] for e in moves) == ["a", "b"], evs
    for e in moves:
        assert e["by"] == "big" and e["node"] == "n1"
        assert "compaction: freed node n1 for 8-GPU work (big)" in e["message"]

    # The moved pods run on n0 and n2 now, with movedAt; explain says so.
    def moved(name):
        pods = status(admin, name).get("pods") or []
        live = [p for p in pods if p["phase"] == "Running"]
        return live and live[0]["node"] in ("n0", "n2") and live[0].get("movedAt")
    wait_for(lambda: moved("a") and moved("b"), what="a and b moved with movedAt")
    ex = admin.get(admin.base + "/jobs/a/explain").json()
    assert ex["phase"] == "Running"
    assert "moved by compaction" in ex["reason"], ex
    assert [m["pod"] for m in ex["moved"]] == ["a-worker-0"]
    assert ex["moved"][0]["node"] in ("n0", "n2") and ex["moved"][0]["movedAt"]

    text = admin.get(server.url + "/metrics").text
    m = re.search(r'^starcloud_evictions_total\{reason="compaction"\} (\S+)$', text, re.M)
    assert m and float(m.group(1)) == 2
    # Two 2-GPU pods left n1; each had run for years: 30 min of run time lost each.
    m = re.search(r'^starcloud_compaction_gpus_freed_total (\S+)$', text, re.M)
    assert m and float(m.group(1)) == 4
    m = re.search(r'^starcloud_compaction_lost_gpu_seconds_total (\S+)$', text, re.M)
    assert m and float(m.group(1)) == 2 * 2 * 1800
