"""Reclaim and preemption through the Eviction API against a real
kube-apiserver: victims are evicted (a PodDisruptionBudget can refuse it),
and the pods that needed the room are bound only once the victims are gone."""
import time

from kube_util import Scheduler, condition, kube, sched_config, wait_for  # noqa: F401


def setup_borrower(kube, pdb=False):
    """One 8-GPU node; queue b has used a's quota while a had nothing."""
    kube.add_node("n1", gpus=8)
    kube.queue("a", gpu_quota=4)
    kube.queue("b", gpu_quota=4)
    kube.priority_class("train", 50)
    for i in range(8):
        kube.pod("b-%d" % i, queue="b", priority_class="train", labels={"app": "b"})


def names(kube, prefix, deleting=None):
    out = []
    for p in kube.pods("default"):
        n = p["metadata"]["name"]
        if not n.startswith(prefix):
            continue
        if deleting is None or bool(p["metadata"].get("deletionTimestamp")) == deleting:
            out.append(n)
    return sorted(out)


def test_reclaim_evicts_then_binds_after_victims_are_gone(kube, sched_config):
    setup_borrower(kube)
    s = Scheduler(kube, sched_config).start()
    try:
        wait_for(lambda: len(kube.bound()) == 8, 30, "b's 8 pods bound")
        # Victims stay terminating for 3 s, as a slow pod would.
        kube.kubelet.linger = 3.0
        for i in range(4):
            kube.pod("a-%d" % i, queue="a", priority_class="train")
        victims = wait_for(lambda: names(kube, "b-", deleting=True), 30, "victims evicted")
        # Invariant, checked until the reclaimers run: no pod of a is bound
        # while a victim still exists, and b keeps its quota.
        deadline = time.time() + 40
        while time.time() < deadline:
            pods = {p["metadata"]["name"]: p for p in kube.pods("default")}
            a_bound = [n for n, p in pods.items() if n.startswith("a-")
                       and p["spec"].get("nodeName")]
            left = [v for v in victims if v in pods]
            assert not (a_bound and left), (a_bound, left)
            if len(a_bound) == 4:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("a's pods were not bound: %s" % s.output()[-2000:])
        evicted = [n for n in ("b-%d" % i for i in range(8)) if not kube.get_pod(n)]
        assert len(evicted) == 4, evicted
        ev = [e for v in evicted for e in kube.events(name=v) if e["reason"] == "Evicted"]
        assert ev and "reclaim" in ev[0]["message"], ev
        b_left = names(kube, "b-")
        assert len(b_left) == 4 and all(kube.get_pod(n)["spec"]["nodeName"] for n in b_left)
    finally:
        s.stop()


def test_disruption_budget_refuses_eviction(kube, sched_config):
    """Evictions go through the Eviction API: a PodDisruptionBudget that
    allows no disruption keeps every victim (a DELETE would not care), and
    nothing is bound onto their room; once it is gone, reclaim proceeds."""
    setup_borrower(kube)
    kube.create({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
                 "metadata": {"name": "b-all", "namespace": "default"},
                 "spec": {"minAvailable": 8, "selector": {"matchLabels": {"app": "b"}}}})
    s = Scheduler(kube, sched_config).start()
    try:
        wait_for(lambda: len(kube.bound()) == 8, 30, "b's 8 pods bound")
        # The API server lets a Pending pod be evicted whatever the budget
        # says: wait until the kubelet has them Running.
        wait_for(lambda: all(p["status"].get("phase") == "Running"
                             for p in kube.pods("default")), 30, "b's pods running")
        for i in range(4):
            kube.pod("a-%d" % i, queue="a", priority_class="train")
        wait_for(lambda: "refused" in s.output(), 30, "an eviction refused")
        time.sleep(2)
        assert names(kube, "b-", deleting=True) == []
        assert [n for n in kube.bound() if n.startswith("a-")] == []
        assert len(kube.bound()) == 8
        r = kube.api("DELETE", "/apis/policy/v1beta1/namespaces/default/"
                               "poddisruptionbudgets/b-all")
        assert r.ok, r.text
        wait_for(lambda: len([n for n in kube.bound() if n.startswith("a-")]) == 4, 40,
                 "a's pods bound after the budget is gone")
        assert len(names(kube, "b-")) == 4
    finally:
        s.stop()


def test_preempt_within_a_queue(kube, sched_config):
    kube.add_node("n1", gpus=4)
    kube.queue("q", gpu_quota=4)
    kube.priority_class("low", 10)
    kube.priority_class("high", 90)
    for i in range(4):
        kube.pod("low-%d" % i, queue="q", priority_class="low")
    s = Scheduler(kube, sched_config).start()
    try:
        wait_for(lambda: len(kube.bound()) == 4, 30, "low pods bound")
        kube.pod("high", gpus=2, queue="q", priority_class="high")
        wait_for(lambda: kube.bound().get("high") == "n1", 40, "high bound")
        assert len([n for n in kube.bound() if n.startswith("low-")]) == 2
        evs = [e for i in range(4) for e in kube.events(name="low-%d" % i)
               if e["reason"] == "Preempted"]
        assert len(evs) == 2 and "high" in evs[0]["message"], evs
    finally:
        s.stop()


def test_scheduler_config_file_turns_reclaim_off(kube, sched_config, tmp_path):
    """--scheduler-config takes a SchedulerConfig as `starcloud schedule` does: with
    only allocate, the borrower keeps every pod and the owner waits."""
    cfg = tmp_path / "sched.yaml"
    cfg.write_text("apiVersion: starcloud.dev/v1\nkind: SchedulerConfig\n"
                   "metadata: {name: default}\nspec: {actions: [allocate]}\n")
    setup_borrower(kube)
    s = Scheduler(kube, sched_config, ["--scheduler-config", str(cfg)]).start()
    try:
        wait_for(lambda: len(kube.bound()) == 8, 30, "b's 8 pods bound")
        for i in range(2):
            kube.pod("a-%d" % i, queue="a", priority_class="train")
        c = wait_for(lambda: condition(kube.get_pod("a-0")), 20, "a-0 explained")
        assert c["status"] == "False", c
        time.sleep(2)
        assert names(kube, "b-", deleting=True) == [] and len(kube.bound()) == 8
    finally:
        s.stop()


def test_consolidation_moves_by_eviction(kube, sched_config):
    """Four GPUs are free but split 2 + 2: consolidation clears one node by
    evicting two preemptible pods (Kubernetes cannot move a pod; their
    controller would make new ones), and the 4-GPU pod is bound there once
    they are gone."""
    kube.add_node("n1", gpus=4)
    kube.add_node("n2", gpus=4)
    kube.queue("default")
    kube.priority_class("train", 50)
    # Spread by an earlier scheduler run (bound here by the admin): bin-packing
    # would have put all four on one node.
    for i, node in enumerate(["n1", "n1", "n2", "n2"]):
        kube.pod("small-%d" % i, queue="default", priority_class="train")
        r = kube.api("POST", "/api/v1/namespaces/default/pods/small-%d/binding" % i,
                     json={"apiVersion": "v1", "kind": "Binding",
                           "metadata": {"name": "small-%d" % i},
                           "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
        assert r.status_code == 201, r.text
    s = Scheduler(kube, sched_config).start()
    try:
        wait_for(lambda: len(kube.bound()) == 4, 30, "small pods bound")
        wait_for(lambda: all(p["status"].get("phase") == "Running"
                             for p in kube.pods("default")), 30, "running")
        kube.kubelet.linger = 2.0
        kube.pod("big", gpus=4, queue="default", priority_class="train")
        node = wait_for(lambda: kube.bound().get("big"), 40, "big bound")
        gone = [n for n in ("small-%d" % i for i in range(4)) if not kube.get_pod(n)]
        assert len(gone) == 2, gone
        assert all(kube.get_pod(n)["spec"]["nodeName"] != node
                   for n in ("small-%d" % i for i in range(4)) if n not in gone)
        ev = [e for n in gone for e in kube.events(name=n) if e["reason"] == "Evicted"]
        assert len(ev) == 2 and all("consolidat" in e["message"] for e in ev), ev
    finally:
        s.stop()
