"""Kubernetes mode against a real kube-apiserver: gangs, fair share, GPU
shares, explanations, pods bound by others (kube_util.py starts the control
plane; the scheduler runs as deploy/k8s's ServiceAccount in every test)."""
import json

from kube_util import Scheduler, condition, kube, sched_config, wait_for  # noqa: F401


def scheduled_events(kube, name, ns="default"):
    return [e for e in kube.events(ns, name) if e["reason"] == "Scheduled"]


def test_gang_of_four_all_or_nothing(kube, sched_config):
    kube.add_node("n1", gpus=2)
    kube.add_node("n2", gpus=1)
    kube.queue("default")
    kube.pod_group("gang", 4)
    for i in range(4):
        kube.pod("gang-%d" % i, gpus=1, group="gang")
    s = Scheduler(kube, sched_config).start()
    try:
        # Three GPUs for four pods: none is bound, and each says why.
        def explained():
            conds = [condition(kube.get_pod("gang-%d" % i)) for i in range(4)]
            return all(c and c["status"] == "False" and c["reason"] == "Unschedulable"
                       for c in conds) and conds
        conds = wait_for(explained, 30, "the gang's pods explained")
        assert all("gang needs 4 pods, only 3 fit" in c["message"] for c in conds), conds
        assert kube.bound() == {}
        # A fourth GPU: all four are bound, each once.
        kube.add_node("n3", gpus=1)
        wait_for(lambda: len(kube.bound()) == 4, 30, "the gang bound")
        assert sorted(kube.bound().values()) == ["n1", "n1", "n2", "n3"]
        for i in range(4):
            wait_for(lambda: scheduled_events(kube, "gang-%d" % i), 30, "Scheduled event")
            assert len(scheduled_events(kube, "gang-%d" % i)) == 1
    finally:
        s.stop()


def test_kai_fair_share_70_30(kube, sched_config):
    """KAI's fair-share vector as real objects: 100 GPUs, two queues with
    quota 10 each, weights 3 and 1, 100 one-GPU pods each: 70 and 30 run."""
    for i in range(10):
        kube.add_node("n%d" % i, gpus=10, cpu="200")
    kube.queue("a", gpu_quota=10, weight=3)
    kube.queue("b", gpu_quota=10, weight=1)
    for i in range(100):
        kube.pod("a-%03d" % i, queue="a", cpu="100m", memory="100Mi")
        kube.pod("b-%03d" % i, queue="b", cpu="100m", memory="100Mi")
    s = Scheduler(kube, sched_config).start()
    try:
        wait_for(lambda: len(kube.bound()) == 100, 60, "100 pods bound")
        b = kube.bound()
        got = (sum(n.startswith("a-") for n in b), sum(n.startswith("b-") for n in b))
        assert got == (70, 30), got
        # The 100 still pending say why, in their condition.
        p = kube.get_pod("b-099") if "b-099" not in b else kube.get_pod("a-099")
        c = wait_for(lambda: condition(kube.get_pod(p["metadata"]["name"])), 20, "condition")
        assert c["status"] == "False" and c["message"], c
    finally:
        s.stop()


def test_gpu_fraction_pods_share_a_device(kube, sched_config):
    kube.add_node("one", gpus=1, model="A100-80GB", gpu_memory_mib=81920)
    kube.queue("default")
    for name in ("half-a", "half-b"):
        kube.pod(name, gpus=0, annotations={"gpu-fraction": "0.5"})
    s = Scheduler(kube, sched_config).start()
    try:
        wait_for(lambda: len(kube.bound()) == 2, 30, "both halves bound")
        for name in ("half-a", "half-b"):
            ann = kube.get_pod(name)["metadata"]["annotations"]
            assert ann.get("starcloud.dev/gpus") == "0", ann
            assert ann.get("starcloud.dev/gpu-share") == "500", ann
        # The device is full: a third half and a 20 GiB memory share wait,
        # and say so.
        kube.pod("half-c", gpus=0, annotations={"gpu-fraction": "0.5"})
        kube.pod("mem-20g", gpus=0, annotations={"gpu-memory": "20480"})
        c = wait_for(lambda: condition(kube.get_pod("half-c")), 20, "half-c explained")
        assert c["status"] == "False" and "GPU" in c["message"], c
        assert kube.get_pod("mem-20g")["spec"].get("nodeName") is None
        # Half a device frees up (and the older half-c gives up): the memory
        # share, a quarter of 80 GiB, fits.
        kube.delete_pod("half-c")
        wait_for(lambda: kube.get_pod("half-c") is None, 30, "half-c gone")
        kube.delete_pod("half-a")
        wait_for(lambda: kube.get_pod("mem-20g")["spec"].get("nodeName") == "one", 30,
                 "mem-20g bound")
        ann = kube.get_pod("mem-20g")["metadata"]["annotations"]
        assert ann["starcloud.dev/gpu-share"] == "250", ann
    finally:
        s.stop()


def test_pods_bound_by_others_count_as_used_and_are_never_evicted(kube, sched_config):
    kube.add_node("n1", gpus=8)
    kube.add_node("n2", gpus=8)
    # Non-preemptible pods (priority >= 100) run only within quota (KAI's rule).
    kube.queue("default", gpu_quota=16)
    # Another scheduler's pod holds 6 GPUs on n1 (bound here by the admin,
    # as that scheduler would).
    kube.pod("theirs", gpus=6, scheduler="default-scheduler")
    r = kube.api("POST", "/api/v1/namespaces/default/pods/theirs/binding",
                 json={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "theirs"},
                       "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}})
    assert r.status_code == 201, r.text
    # Ours, high priority, cannot fit on n1 any more.
    kube.priority_class("urgent", 1000)
    kube.pod("four", gpus=4, priority_class="urgent")
    kube.pod("nine", gpus=9)  # larger than any node
    s = Scheduler(kube, sched_config).start()
    try:
        wait_for(lambda: kube.bound().get("four") == "n2", 30, "four on n2")
        c = wait_for(lambda: condition(kube.get_pod("nine")), 20, "nine explained")
        assert "9" in c["message"] and c["status"] == "False", c
        kube.pod("more", gpus=4, priority_class="urgent")
        wait_for(lambda: kube.bound().get("more") == "n2", 30, "more on n2")
        kube.pod("last", gpus=4, priority_class="urgent")
        c = wait_for(lambda: condition(kube.get_pod("last")), 20, "last explained")
        theirs = kube.get_pod("theirs")
        assert theirs and not theirs["metadata"].get("deletionTimestamp"), theirs
        assert kube.bound()["theirs"] == "n1"
    finally:
        s.stop()


def test_taints_and_node_selectors(kube, sched_config):
    kube.add_node("tainted", gpus=8, taints=[{"key": "dedicated", "value": "infer",
                                               "effect": "NoSchedule"}])
    kube.add_node("zone-b", gpus=2, labels={"zone": "b"})
    kube.queue("default")
    kube.pod("plain", gpus=4)
    tol = {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infer",
                            "effect": "NoSchedule"}]}
    kube.pod("tolerant", gpus=4, spec_extra=tol)
    kube.pod("zoned", gpus=1, spec_extra={"nodeSelector": {"zone": "b"}})
    s = Scheduler(kube, sched_config).start()
    try:
        wait_for(lambda: {"tolerant", "zoned"} <= set(kube.bound()), 30, "bound")
        b = kube.bound()
        assert b["tolerant"] == "tainted" and b["zoned"] == "zone-b", b
        c = wait_for(lambda: condition(kube.get_pod("plain")), 20, "plain explained")
        assert "plain" not in b and c["status"] == "False", (b, c)
    finally:
        s.stop()
