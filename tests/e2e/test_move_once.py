"""A pod moved by compaction never runs on two nodes at once (the soak of
issue 23, docs/SOAK.md). Two real agents: n0 holds non-preemptible work with
2 GPUs free, n1 a preemptible 2-GPU pod that takes about a second to stop
(it sleeps in its SIGTERM handler). An 8-GPU job arrives: compaction moves
the pod from n1 to n0. The server must start it on n0 only once n1's agent
no longer lists it (running or stopping); before the fix the new copy
started while the old one was still stopping. A sampler looks every 10 ms
at /proc for the pod's processes under each agent's folder. The 8-GPU job,
pipelined onto the GPUs the pod leaves on n1, must likewise start only once
the pod has stopped there."""
import signal
import threading
import time

from agent_util import Agent, pods_of, processes_with_env, setup_queue, wait_for
from conftest import job
from test_compaction import queue_and_movable_class
from test_faults import Sampler

LONG_AGO = "2020-01-01T00:00:00Z"
POD = "a-worker-0"
# One process that ignores SIGTERM for a second before it exits.
SLOW_STOP = ["python3", "-c",
             "import signal, sys, time\n"
             "def term(*_):\n"
             "    time.sleep(1.0)\n"
             "    sys.exit(0)\n"
             "signal.signal(signal.SIGTERM, term)\n"
             "while True:\n"
             "    time.sleep(0.05)\n"]


def ready(admin, node):
    st = (admin.get(admin.base + "/nodes/" + node).json().get("status") or {})
    return st.get("ready") is True


def placed(name, cls, gpus, command, node_name=None, devices=None):
    j = job(name, q="team-a", gpus=gpus)
    j["spec"]["priorityClass"] = cls
    j["spec"]["tasks"][0]["command"] = command
    if node_name:
        j["status"] = {"pods": [{"name": name + "-worker-0", "phase": "Running",
                                 "node": node_name, "gpus": devices, "startedAt": LONG_AGO}]}
    return j


class NodeSampler:
    """The pod's processes and the node (agent folder) of each: /proc is
    scanned for new ones every 100 ms (a process's start time is read from
    /proc, so a late find loses nothing) and every known one is checked for
    life every 10 ms. Under load this thread may not run for a while and
    see a death late: overlaps are judged by when each process was last
    seen alive (proof that it ran then), not by when its death was seen."""

    def __init__(self, pod, agents):
        self.pod, self.agents = pod, agents
        # pid -> [node, start (boottime s), end or None, last seen alive]
        self.spans = {}
        self.samples = 0
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def scan(self):
        for a in self.agents:
            for pid in processes_with_env("STARCLOUD_POD", self.pod, under=a.data_dir):
                if pid not in self.spans:
                    try:
                        start = Sampler.started(pid)
                        self.spans[pid] = [a.name, start, None, start]
                    except OSError:
                        pass

    def run(self):
        while not self.stop:
            if self.samples % 10 == 0:
                self.scan()
            now = time.clock_gettime(time.CLOCK_BOOTTIME)
            for pid, span in list(self.spans.items()):
                if span[2] is None:
                    if Sampler.alive(pid):
                        span[3] = now  # alive at or after now
                    else:
                        span[2] = now
            self.samples += 1
            time.sleep(0.01)

    def finish(self):
        self.stop = True
        self.t.join()

    def overlaps(self):
        """Pairs of processes on different nodes whose lives overlapped:
        each began (start ticks are 10 ms) before the other was last seen
        alive, or still runs."""
        spans = list(self.spans.values())
        bad = []
        for a in spans:
            for b in spans:
                if a[0] < b[0]:
                    a_end = a[3] if a[2] is not None else float("inf")
                    b_end = b[3] if b[2] is not None else float("inf")
                    if a[1] < b_end - 0.02 and b[1] < a_end - 0.02:
                        bad.append((a, b))
        return bad


def fixed_on_n0_and_a_on_n1(admin, agents):
    """Both nodes ready; 6 of n0's GPUs held by `fixed`, and the preemptible
    pod of `a` (slow to stop) placed on n1's GPUs 0-1: compaction can then
    free n1 by moving it to n0."""
    wait_for(lambda: all(ready(admin, a.name) for a in agents), what="nodes ready")
    queue_and_movable_class(admin)
    for obj in (placed("fixed", "build", 6, ["sleep", "600"], "n0", [0, 1, 2, 3, 4, 5]),
                placed("a", "batch-hi", 2, SLOW_STOP, "n1", [0, 1])):
        r = admin.post(admin.base + "/jobs", json=obj)
        assert r.status_code == 201, r.text


def test_a_moved_pod_never_runs_on_two_nodes(server, admin, tmp_path):
    agents = [Agent(server.url, server.token, n, tmp_path / n, gpus="8xA100-80GB")
              for n in ("n0", "n1")]
    sampler = big_sampler = None
    try:
        fixed_on_n0_and_a_on_n1(admin, agents)
        n1 = agents[1]
        wait_for(lambda: processes_with_env("STARCLOUD_POD", POD, under=n1.data_dir),
                 what="the pod running on n1")
        sampler = NodeSampler(POD, agents)
        big_sampler = NodeSampler("big-worker-0", agents)
        time.sleep(0.3)
        big = placed("big", "build", 8, ["sleep", "600"])
        assert admin.post(admin.base + "/jobs", json=big).status_code == 201

        def moved():
            p = pods_of(admin, "a").get(POD)
            return p and p["phase"] == "Running" and p["node"] == "n0"
        wait_for(moved, timeout=60, what="the pod moved to n0 and Running")
        wait_for(lambda: processes_with_env("STARCLOUD_POD", POD, under=agents[0].data_dir),
                 timeout=30, what="the pod running on n0")
        wait_for(lambda: processes_with_env("STARCLOUD_POD", "big-worker-0", under=n1.data_dir),
                 timeout=30, what="big running on n1")
        time.sleep(0.3)
        sampler.finish()
        big_sampler.finish()
        evs = admin.get(admin.base + "/events").json()["items"]
        moves = [e for e in evs if e["reason"] == "Evicted" and e.get("action") == "compaction"]
        assert [e["involvedObject"]["name"] for e in moves] == ["a"], evs
        nodes = sorted(span[0] for span in sampler.spans.values())
        assert nodes == ["n0", "n1"], sampler.spans
        assert not sampler.overlaps(), ("the pod ran on n0 and n1 at once", sampler.spans)
        assert not processes_with_env("STARCLOUD_POD", POD, under=n1.data_dir)
        # big was pipelined onto the GPUs the pod held on n1: it starts once
        # the pod is gone from n1, not beside it.
        old_end = [s[3] for s in sampler.spans.values() if s[0] == "n1"][0]  # last alive
        big_start = [s[1] for s in big_sampler.spans.values() if s[0] == "n1"][0]
        assert big_start >= old_end - 0.02, (old_end, big_start)
    finally:
        for smp in (sampler, big_sampler):
            if smp and not smp.stop:
                smp.finish()
        for a in agents:
            a.stop()


def test_a_pod_moved_off_a_dead_node_starts_after_the_fence_time(server, admin, tmp_path):
    """n1's agent is frozen (as dead) when compaction moves the pod off it: no
    word comes from n1, so the pod waits Pipelined until the server gives n1
    up (lease + fence time), by when n1's pod guard has stopped the pod; then
    it starts on n0, and never beside the old copy."""
    fence = ["--fence-time", "2s"]
    agents = [Agent(server.url, server.token, n, tmp_path / n, gpus="8xA100-80GB", extra=fence)
              for n in ("n0", "n1")]
    sampler = None
    n1 = agents[1]
    try:
        fixed_on_n0_and_a_on_n1(admin, agents)
        wait_for(lambda: processes_with_env("STARCLOUD_POD", POD, under=n1.data_dir),
                 what="the pod running on n1")
        sampler = NodeSampler(POD, agents)
        n1.proc.send_signal(signal.SIGSTOP)
        t0 = time.time()
        t0_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        big = placed("big", "build", 8, ["sleep", "600"])
        assert admin.post(admin.base + "/jobs", json=big).status_code == 201

        def at_n0(phase):
            p = pods_of(admin, "a").get(POD)
            return p and p["phase"] == phase and p["node"] == "n0" and p
        p = wait_for(lambda: at_n0("Pipelined") or at_n0("Running"), timeout=30,
                     what="the pod moved to n0")
        if p["phase"] == "Pipelined":
            assert p["from"]["node"] == "n1", p
        wait_for(lambda: at_n0("Running"), timeout=40, what="the pod Running on n0")
        waited = time.time() - t0
        new = wait_for(lambda: processes_with_env("STARCLOUD_POD", POD, under=agents[0].data_dir),
                       timeout=30, what="the pod running on n0")
        # When the copy on n0 began (from /proc), whatever this loop's delays.
        began = Sampler.started(new[0]) - t0_boot
        time.sleep(0.3)
        sampler.finish()
        nodes = sorted(span[0] for span in sampler.spans.values())
        assert nodes == ["n0", "n1"], sampler.spans
        assert not sampler.overlaps(), ("the pod ran on n0 and n1 at once", sampler.spans)
        # Lease 0.9 s (3 x 300 ms heartbeats) + fence 2 s: not before, nor much after.
        assert 2.5 < waited and began < 8, (waited, began)
    finally:
        if sampler and not sampler.stop:
            sampler.finish()
        n1.proc.send_signal(signal.SIGCONT)
        for a in agents:
            a.stop()


def test_a_serving_replica_is_placed_again_when_its_node_expires(server, admin, tmp_path):
    """A Deployment's replica on a node whose lease expired is bound again
    at the node's fence deadline (expiry + half the fence time), long before
    the node is given up, Pipelined on the other node with from: the old
    one (issue 23: a lost node cost serving the fence time plus a placement
    and any reclaim it needed), and starts there only when the old node is
    given up (lease + fence time), by when that node's pod guard has stopped
    the old copy: never both at once. A long fence time (30 s) keeps the
    window between the two wide on a loaded machine."""
    from test_serving import deployment, free_port as port_block
    fence = ["--fence-time", "30s"]
    agents = {n: Agent(server.url, server.token, n, tmp_path / n, extra=fence)
              for n in ("n0", "n1")}
    sampler = None
    frozen = None
    try:
        wait_for(lambda: all(ready(admin, n) for n in agents), what="nodes ready")
        setup_queue(admin)
        port = port_block()
        r = admin.post(admin.base + "/deployments", json=deployment("chat", port, replicas=1))
        assert r.status_code == 201, r.text

        def running_pod():
            pods = (admin.get(admin.base + "/deployments/chat").json().get("status") or {}) \
                .get("pods") or []
            run = [p for p in pods if p.get("phase") == "Running" and p.get("node")]
            return run[0] if len(run) == 1 else None
        p = wait_for(running_pod, timeout=30, what="the replica Running")
        pod, old = p["name"], p["node"]
        frozen = agents[old]
        new = [n for n in agents if n != old][0]
        wait_for(lambda: processes_with_env("STARCLOUD_POD", pod, under=frozen.data_dir),
                 timeout=30, what="the replica's process on %s" % old)
        sampler = NodeSampler(pod, list(agents.values()))
        frozen.proc.send_signal(signal.SIGSTOP)
        t0 = time.time()

        def entry():
            pods = (admin.get(admin.base + "/deployments/chat").json().get("status") or {}) \
                .get("pods") or []
            return {q["name"]: q for q in pods}.get(pod)

        def pipelined_on_new():
            e = entry()
            return e if e and e.get("node") == new and e.get("phase") == "Pipelined" else None
        # Placed again at lease (0.9 s) + 15 s, long before the give-up (+30.9 s).
        e = wait_for(pipelined_on_new, timeout=29, what="the replica Pipelined on " + new)
        assert e["from"]["node"] == old, e
        assert time.time() - t0 < 29.5, "placed only at the give-up"
        # No endpoint is ready meanwhile: the old one is not listed as ready.
        eps = admin.get(admin.base + "/deployments/chat").json()["status"].get("endpoints", [])
        assert not [x for x in eps if x.get("ready") and x.get("node") == old], eps
        wait_for(lambda: (entry() or {}).get("phase") == "Running", timeout=90,
                 what="the replica Running on " + new)
        waited = time.time() - t0
        wait_for(lambda: processes_with_env("STARCLOUD_POD", pod,
                                            under=agents[new].data_dir),
                 timeout=30, what="the replica's process on " + new)
        time.sleep(0.3)
        sampler.finish()
        nodes = sorted(span[0] for span in sampler.spans.values())
        assert nodes == sorted(agents), sampler.spans
        assert not sampler.overlaps(), ("the replica ran on two nodes at once", sampler.spans)
        # Not before the give-up (lease 0.9 s + fence 30 s after the node's
        # last heartbeat, which on a loaded machine may have come a few
        # seconds before the freeze at t0), and well after the Pipelined
        # binding (fence deadline, ~16 s): failed once at waited > 30.
        assert waited > 25, waited
    finally:
        if sampler and not sampler.stop:
            sampler.finish()
        if frozen:
            frozen.proc.send_signal(signal.SIGCONT)
        for a in agents.values():
            a.stop()


def test_a_replica_bound_to_a_node_that_stopped_before_listing_it_waits_for_the_give_up(
        server, admin, tmp_path):
    """A binding the node never listed still counts as running there until
    the node is given up: its agent may have started the pod after its last
    heartbeat and then stopped (here it is frozen before the binding, so
    its heartbeats never list the pod). At the node's fence deadline the
    replica is bound again Pipelined with from: that node, not Running
    beside a copy that may run (the loop branch once started it at once
    when the freeze fell between the spawn and the next heartbeat).
    A 5 s heartbeat (15 s lease) leaves the binding at least 10 s to reach
    the frozen node before its lease lapses; a 10 s fence keeps the
    Pipelined binding in place for 5 s."""
    from test_serving import deployment, free_port as port_block
    slow = ["--fence-time", "10s", "--heartbeat", "5s"]
    agents = {"n0": Agent(server.url, server.token, "n0", tmp_path / "n0", extra=slow)}
    try:
        wait_for(lambda: ready(admin, "n0"), what="n0 ready")
        setup_queue(admin)
        agents["n0"].proc.send_signal(signal.SIGSTOP)
        t0 = time.time()
        r = admin.post(admin.base + "/deployments",
                       json=deployment("chat", port_block(), replicas=1))
        assert r.status_code == 201, r.text

        def pods():
            return (admin.get(admin.base + "/deployments/chat").json().get("status") or {}) \
                .get("pods") or []

        def bound_to_n0():
            run = [p for p in pods() if p.get("node") == "n0" and p.get("phase") == "Running"]
            return run[0] if run else None
        pod = wait_for(bound_to_n0, timeout=9, what="the replica bound to n0")["name"]
        assert ready(admin, "n0"), "n0 lapsed before the binding: the test proves nothing"
        agents["n1"] = Agent(server.url, server.token, "n1", tmp_path / "n1", extra=slow)
        seen = []

        def on_n1():
            e = {q["name"]: q for q in pods()}.get(pod)
            if e and e.get("node") == "n1":
                seen.append(e)
                return e
            return None
        # The first binding on n1 is Pipelined from n0 (at n0's fence
        # deadline, lease + 5 s), not Running.
        first = wait_for(on_n1, timeout=60, what="the replica bound to n1")
        assert first.get("phase") == "Pipelined", first
        assert (first.get("from") or {}).get("node") == "n0", first
        # Running on n1 once n0 is given up (lease + 10 s: at least 20 s
        # after the freeze, whose last renewal came at most 5 s before it).
        wait_for(lambda: (on_n1() or {}).get("phase") == "Running", timeout=60,
                 what="the replica Running on n1")
        assert time.time() - t0 > 19, time.time() - t0
        assert not processes_with_env("STARCLOUD_POD", pod, under=agents["n0"].data_dir)
    finally:
        agents["n0"].proc.send_signal(signal.SIGCONT)
        for a in agents.values():
            a.stop()
