"""Kubernetes mode against a real kube-apiserver: binding, gangs, GPU
shares, explanations, pods bound by others (see kube_util.py)."""
import pytest

from kube_util import Scheduler, condition, kube, sched_config, wait_for  # noqa: F401


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
            pods = [kube.get_pod("gang-%d" % i) for i in range(4)]
            conds = [condition(p) for p in pods]
            return all(c and c["status"] == "False" and "gang" in c["message"] for c in conds)
        wait_for(explained, 30, "the gang's pods explained")
        assert kube.bound() == {}
        msg = condition(kube.get_pod("gang-0"))["message"]
        assert "4" in msg, msg
        # A fourth GPU: all four are bound at once.
        kube.add_node("n3", gpus=1)
        wait_for(lambda: len(kube.bound()) == 4, 30, "the gang bound")
        nodes = sorted(kube.bound().values())
        assert nodes == ["n1", "n1", "n2", "n3"], nodes
        ev = kube.events(name="gang-0")
        assert any(e["reason"] == "Scheduled" for e in ev), ev
    finally:
        s.stop()
    assert "error" not in s.output().lower() or "binding" not in s.output(), s.output()
