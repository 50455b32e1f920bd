"""An agent frozen or killed in the middle of a pod's start (docs/AGENT.md,
"Starting a pod"): nothing of the pod runs before its record is on disk and
the node's lease is checked, so the pod never runs unguarded and never runs
twice. The agent's test hook (STARCLOUD_AGENT_SPAWN_STOP_FILE) stops it
exactly after the fork, or after the record, of a pod's process."""
import os
import signal

import pytest

from agent_util import Agent, pod_where, processes_with_env, run_job, setup_queue, wait_for
from test_faults import Sampler, ready

STOP_ENV = "STARCLOUD_AGENT_SPAWN_STOP_FILE"
POD = "solo-main-0"


def stat_fields(pid):
    """State letter and parent pid of a process, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return rest[0], int(rest[1])
    except (OSError, IndexError, ValueError):
        return None


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = stat_fields(int(d))
            if st and st[1] == pid and st[0] not in ("Z", "X"):
                out.append(int(d))
    return out


def alive(pid):
    st = stat_fields(pid)
    return st is not None and st[0] not in ("Z", "X")


def frozen_in_start(agent, stop):
    """The agent stopped itself at the hook (which removes the file)."""
    st = stat_fields(agent.proc.pid)
    return not stop.exists() and st is not None and st[0] == "T"


def start_frozen(server, admin, tmp_path, point):
    """n1 alone, with the hook armed at point; a one-pod job, which n1
    starts and stops itself in. Returns (n1, the stop file, its child)."""
    stop = tmp_path / "stop-at"
    stop.write_text(point + "\n")
    n1 = Agent(server.url, server.token, "n1", tmp_path / "n1", gpus="1xA100-80GB",
               env={STOP_ENV: str(stop)})
    wait_for(lambda: ready(admin, "n1"), what="n1 ready")
    setup_queue(admin)
    run_job(admin, "solo", ["sleep", "600"], gpu=1, restartPolicy="Always")
    wait_for(lambda: frozen_in_start(n1, stop), timeout=40,
             what="n1 stopped by its hook %s" % point)
    kids = children(n1.proc.pid)
    assert len(kids) == 1, kids  # the pod's process, at its gate
    return n1, stop, kids[0]


@pytest.mark.parametrize("point", ["after-fork", "after-record"])
def test_an_agent_frozen_while_starting_a_pod_never_runs_it_twice(server, admin, tmp_path,
                                                                  point):
    sampler = Sampler(POD, str(tmp_path))
    agents = []
    try:
        n1, _, child = start_frozen(server, admin, tmp_path, point)
        agents.append(n1)
        # n1's lease lapses; after the fence time the pod goes to n2.
        n2 = Agent(server.url, server.token, "n2", tmp_path / "n2", gpus="1xA100-80GB")
        agents.append(n2)
        wait_for(pod_where(admin, "solo", POD,
                           lambda q: q["phase"] == "Running" and q["node"] == "n2"),
                 timeout=60, what="the pod placed on n2")
        wait_for(lambda: processes_with_env("STARCLOUD_POD", POD, n2.data_dir), timeout=40,
                 what="the copy on n2 running")
        wait_for(lambda: sampler.known, what="the sampler seeing the copy on n2")
        # n1's process never ran the pod's code (it waits, or the guard
        # fenced it by its record).
        assert processes_with_env("STARCLOUD_POD", POD, n1.data_dir) == []
        # Thawed, n1 finds its lease lapsed and lets nothing run.
        n1.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: "not started: the node's lease lapsed" in n1.output(), timeout=40,
                 what="n1 refusing the start:\n" + n1.output()[-2000:])
        wait_for(lambda: not alive(child), what="n1's waiting child gone")
        wait_for(lambda: ready(admin, "n1"), timeout=40, what="n1 back")
        wait_for(lambda: "stopping (lease lost" in n1.output(), timeout=40,
                 what="n1 fencing the pod it did not start")
        assert processes_with_env("STARCLOUD_POD", POD, n1.data_dir) == []
        assert len(processes_with_env("STARCLOUD_POD", POD, str(tmp_path))) == 1
        spans = sampler.finish()
        assert sampler.max_live == 1 and len(spans) == 1, spans
        assert not sampler.overlaps(), spans
        assert not os.path.exists(os.path.join(n1.pod_dir("solo", POD), "pod.json"))
    finally:
        if not sampler.stop:
            sampler.finish()
        for a in agents:
            if a.proc.poll() is None:
                a.proc.send_signal(signal.SIGCONT)
            a.stop()


@pytest.mark.parametrize("point", ["after-fork", "after-record"])
def test_an_agent_killed_while_starting_a_pod_leaves_nothing_running(server, admin, tmp_path,
                                                                     point):
    sampler = Sampler(POD, str(tmp_path))
    agents = []
    try:
        n1, _, child = start_frozen(server, admin, tmp_path, point)
        agents.append(n1)
        n1.proc.kill()
        n1.proc.wait()
        # The gate's writer is gone: the child exits, having run nothing.
        wait_for(lambda: not alive(child), what="the waiting child gone")
        assert processes_with_env("STARCLOUD_POD", POD, str(tmp_path)) == []
        assert sampler.known == {}, sampler.known
        # A new agent for the node adopts nothing and starts the pod once.
        back = Agent(server.url, server.token, "n1", n1.data_dir, gpus="1xA100-80GB")
        agents.append(back)
        wait_for(lambda: processes_with_env("STARCLOUD_POD", POD, n1.data_dir), timeout=60,
                 what="the pod started by the new agent")
        wait_for(lambda: sampler.known, what="the sampler seeing the pod")
        wait_for(pod_where(admin, "solo", POD,
                           lambda q: q["phase"] == "Running" and q["node"] == "n1"),
                 timeout=40, what="the pod reported running")
        assert "adopted" not in back.output()
        assert len(processes_with_env("STARCLOUD_POD", POD, str(tmp_path))) == 1
        spans = sampler.finish()
        assert sampler.max_live == 1 and len(spans) == 1, spans
    finally:
        if not sampler.stop:
            sampler.finish()
        for a in agents:
            a.stop()
