"""Leader election on a coordination.k8s.io Lease against a real
kube-apiserver: one replica binds, a killed leader is replaced within the
lease time with no pod bound twice, a frozen or displaced leader writes
nothing, and the scheduler's ServiceAccount needs nothing beyond
deploy/k8s's RBAC."""
import signal
import time

from kube_util import (SCHED_NS, Scheduler, kube, sched_config,  # noqa: F401
                       wait_for)

LEASE = ["--leader-elect", "--lease-namespace", SCHED_NS, "--lease-duration", "4s",
         "--renew-deadline", "3s", "--retry-period", "500ms"]


def replicas(kube, cfg, n=2):
    return [Scheduler(kube, cfg, LEASE + ["--identity", "r%d" % i], name="r%d" % i).start()
            for i in range(n)]


def holder(kube):
    lease = kube.lease()
    return lease and lease["spec"].get("holderIdentity")


def leading(kube, rs, who=None):
    """The replica that holds the Lease and has said it leads (who: that
    one only). Under load a lease write can succeed while its writer's
    request times out: the Lease then names a replica that does not lead
    (it renews on its next read, or another takes over), so the Lease
    alone does not say which process to freeze or stop."""
    h = holder(kube)
    if not h or (who and h != who):
        return None
    return h if "leading (lease" in rs[int(h[1:])].output() else None


def scheduled_by(kube, ns="default"):
    """pod -> [reportingInstance of each Scheduled event]."""
    out = {}
    for e in kube.events(ns):
        if e["reason"] == "Scheduled":
            out.setdefault(e["involvedObject"]["name"], []).append(e.get("reportingInstance"))
    return out


def check_no_overcommit(kube, gpus_per_node):
    used = {}
    for p in kube.pods("default"):
        node = p["spec"].get("nodeName")
        if node:
            g = int(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
            used[node] = used.get(node, 0) + g
    assert all(v <= gpus_per_node for v in used.values()), used


def test_killed_leader_is_replaced_within_the_lease_time(kube, sched_config):
    for i in range(4):
        kube.add_node("n%d" % i, gpus=8)
    kube.queue("default")
    rs = replicas(kube, sched_config)
    try:
        leader = wait_for(lambda: leading(kube, rs), 30, "a leader")
        for i in range(8):
            kube.pod("first-%d" % i, gpus=2)
        wait_for(lambda: len(kube.bound()) == 8, 30, "first pods bound")
        by = scheduled_by(kube)
        wait_for(lambda: len(scheduled_by(kube)) == 8, 30, "Scheduled events")
        assert {i for v in scheduled_by(kube).values() for i in v} == {leader}, by
        victim = rs[int(leader[1:])]
        other = "r%d" % (1 - int(leader[1:]))
        victim.kill()
        t0 = time.time()
        for i in range(8):
            kube.pod("second-%d" % i, gpus=2)
        wait_for(lambda: leading(kube, rs, other), 30, "the standby takes the lease")
        took = time.time() - t0
        wait_for(lambda: len(kube.bound()) == 16, 20, "second pods bound")
        bound_after = time.time() - t0
        # The lease is 4 s, read every 0.5 s: the standby may take it 4 s
        # after it last saw it renewed, plus one read period; 2 s for load.
        assert took <= 4 + 0.5 + 2, took
        assert bound_after <= took + 5, (took, bound_after)
        wait_for(lambda: len(scheduled_by(kube)) == 16, 30, "Scheduled events")
        by = scheduled_by(kube)
        assert all(len(v) == 1 for v in by.values()), by  # nothing bound twice
        assert {by["second-%d" % i][0] for i in range(8)} == {other}, by
        check_no_overcommit(kube, 8)
    finally:
        for r in rs:
            if r.running():
                r.stop()


def test_stopped_leader_gives_the_lease_up(kube, sched_config):
    """SIGTERM: the leader releases the Lease, so the standby takes over at
    once rather than after the lease duration."""
    kube.add_node("n0", gpus=8)
    kube.queue("default")
    rs = replicas(kube, sched_config)
    try:
        leader = wait_for(lambda: leading(kube, rs), 30, "a leader")
        other = "r%d" % (1 - int(leader[1:]))
        t0 = time.time()
        rs[int(leader[1:])].stop()
        wait_for(lambda: leading(kube, rs, other), 30, "the standby takes the lease")
        # Released: taken on the standby's next read (0.5 s), not after 4 s.
        assert time.time() - t0 < 3, time.time() - t0
        kube.pod("p", gpus=1)
        wait_for(lambda: "p" in kube.bound(), 20, "bound by the new leader")
    finally:
        for r in rs:
            if r.running():
                r.stop()


def test_frozen_leader_writes_nothing_after_waking(kube, sched_config):
    """SIGSTOP the leader past its lease, let the standby take over, wake
    the old leader: it must not bind anything (its lease ran out by its own
    monotonic clock, whatever its timers say)."""
    kube.add_node("n0", gpus=8)
    kube.add_node("n1", gpus=8)
    kube.queue("default")
    rs = replicas(kube, sched_config)
    try:
        leader = wait_for(lambda: leading(kube, rs), 30, "a leader")
        old = rs[int(leader[1:])]
        other = "r%d" % (1 - int(leader[1:]))
        old.proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: leading(kube, rs, other), 30, "the standby takes the lease")
        for i in range(4):
            kube.pod("a-%d" % i, gpus=1)
        wait_for(lambda: len(kube.bound()) == 4, 20, "bound by the new leader")
        old.proc.send_signal(signal.SIGCONT)
        for i in range(4):
            kube.pod("b-%d" % i, gpus=1)
        wait_for(lambda: len(kube.bound()) == 8, 20, "bound by the new leader")
        wait_for(lambda: "lost the lease" in old.output(), 30, "the old leader noticed")
        time.sleep(1.5)
        wait_for(lambda: len(scheduled_by(kube)) == 8, 30, "Scheduled events")
        by = scheduled_by(kube)
        assert all(v == [other] for v in by.values()), by
        check_no_overcommit(kube, 8)
    finally:
        for r in rs:
            if r.running():
                r.stop()


def test_displaced_leader_stops_binding_at_once(kube, sched_config):
    kube.add_node("n0", gpus=8)
    kube.queue("default")
    s = Scheduler(kube, sched_config, LEASE + ["--identity", "only"]).start()
    try:
        wait_for(lambda: holder(kube) == "only", 20, "leading")
        kube.pod("before", gpus=1)
        wait_for(lambda: "before" in kube.bound(), 20, "bound while leading")
        # Someone else writes the lease (as a rival that won a race would).
        path = "/apis/coordination.k8s.io/v1/namespaces/%s/leases/starcloud-scheduler" % SCHED_NS

        def take(holder_id):
            lease = kube.lease()
            lease["spec"]["holderIdentity"] = holder_id
            lease["spec"]["renewTime"] = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z",
                                                       time.gmtime())
            return kube.api("PUT", path, json=lease).ok

        assert take("intruder")
        wait_for(lambda: "lost the lease" in s.output(), 30, "the scheduler noticed")
        kube.pod("during", gpus=1)
        deadline = time.time() + 3
        while time.time() < deadline:
            assert "during" not in kube.bound()
            take("intruder")  # keep it fresh: 4 s would let the scheduler take it back
            time.sleep(0.5)
        # Released: the scheduler takes it and binds.
        take("")
        wait_for(lambda: holder(kube) == "only", 30, "leading again")
        wait_for(lambda: "during" in kube.bound(), 30, "bound after taking it back")
    finally:
        s.stop()


def test_scheduler_without_rbac_fails_clearly(kube):
    """A ServiceAccount without deploy/k8s's bindings: the scheduler says
    what it may not do, binds nothing, and keeps running until it may."""
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": "nobody", "namespace": SCHED_NS}})
    cfg = kube.kubeconfig(kube.sa_token(name="nobody"))
    kube.add_node("n0", gpus=8)
    kube.queue("default")
    kube.pod("p", gpus=1)
    s = Scheduler(kube, cfg).start()
    try:
        wait_for(lambda: "forbidden" in s.output(), 30, "a clear refusal in the log")
        assert "nobody" in s.output()
        time.sleep(1)
        assert s.running() and kube.bound() == {}
    finally:
        s.stop()
