"""The pod guard and the agent stop a pod by its cgroups, not only by its
process group (docs/SECURITY.md, src/agent/cgkill.h): a hostile pod forks a
grandchild that calls setsid() (so it leaves the pod's process group) and
ignores SIGTERM. Each test uses a node name of its own: the pod's cgroups
are named after the node, and another run on this machine must not share
them."""
import json
import os
import signal

import pytest

from agent_util import Agent, pod_where, processes_with_env, run_job, setup_queue, wait_for
from test_faults import ready

# The pod's main process is `sleep 600`; its grandchild leaves the group
# (setsid), ignores SIGTERM and execs `sleep 601`.
HOSTILE = ["sh", "-c", "setsid sh -c 'trap \"\" TERM; exec sleep 601' & exec sleep 600"]


def cgroups_writable():
    return os.access("/sys/fs/cgroup/freezer", os.W_OK) or \
        os.access("/sys/fs/cgroup/cgroup.procs", os.W_OK)


pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not cgroups_writable(),
                                reason="needs root and a writable cgroup hierarchy")


def stat(pid):
    """(state, pgid, session) of a process, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return rest[0], int(rest[2]), int(rest[3])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid):
    st = stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def ignores_sigterm(pid):
    with open("/proc/%d/status" % pid) as f:
        ign = next(int(l.split()[1], 16) for l in f if l.startswith("SigIgn:"))
    return bool(ign & (1 << (signal.SIGTERM - 1)))


def hostile_pod(admin, job, pod, here):
    """Starts the hostile job; returns (main pid, grandchild pid)."""
    setup_queue(admin)
    run_job(admin, job, HOSTILE, gpu=1, restartPolicy="Always")
    wait_for(pod_where(admin, job, pod, lambda q: q["phase"] == "Running"), timeout=40,
             what="the pod running")
    return pair(pod, here)


def pair(pod, here, old=()):
    """(main pid, grandchild pid) of the pod once both run (not those in
    old), having checked that the grandchild really left the pod's group."""

    def both():
        procs = {p: cmdline(p) for p in processes_with_env("STARCLOUD_POD", pod, here)}
        main = [p for p, c in procs.items() if c[:2] == [b"sleep", b"600"] and p not in old]
        gc = [p for p, c in procs.items() if c[:2] == [b"sleep", b"601"] and p not in old]
        return (main[0], gc[0]) if len(main) == 1 and len(gc) == 1 else None

    main, gc = wait_for(both, timeout=40, what="the pod and its setsid grandchild")
    st_main, st_gc = stat(main), stat(gc)
    assert st_main and st_gc
    assert st_gc[1] != st_main[1] and st_gc[2] == gc, (st_main, st_gc)  # its own session
    assert ignores_sigterm(gc)
    return main, gc


def test_the_guard_kills_a_pod_child_that_left_its_process_group(server, admin, tmp_path):
    """The agent is frozen past its lease: its guard fences the pod, and the
    setsid() grandchild that ignores SIGTERM dies too (the guard killed by
    process group only and it outlived the fence, running beside the copy the
    server starts elsewhere). Checked while the agent is still frozen: once
    thawed, it would empty the cgroups itself."""
    node = "guardcg%d" % os.getpid()
    here = str(tmp_path)
    a = Agent(server.url, server.token, node, tmp_path / node, gpus="1xA100-80GB")
    gc = None
    try:
        wait_for(lambda: ready(admin, node), timeout=40, what="the node ready")
        main, gc = hostile_pod(admin, "hostile", "hostile-main-0", here)
        with open(os.path.join(a.pod_dir("hostile", "hostile-main-0"), "pod.json")) as f:
            cgroups = json.load(f)["cgroups"]
        # Every cgroup the pod could be in (its devices one only when it
        # must be kept from a GPU node): the freezer's is there.
        assert any(os.path.isdir(d) and "/freezer/" in d for d in cgroups) or \
            not os.path.isdir("/sys/fs/cgroup/freezer"), cgroups
        a.proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: not alive(main), timeout=60, what="the guard fenced the pod")
        wait_for(lambda: not alive(gc), timeout=30,
                 what="the setsid grandchild killed by the guard (by the pod's cgroups)")
        log = open(os.path.join(a.data_dir, "guard.log")).read()
        assert "stopping 1 pod" in log, log
        assert "grace over, SIGKILL" in log, log  # it ignored SIGTERM
        # Its cgroups are removed by the guard too (an agent killed for good
        # would leave them behind).
        wait_for(lambda: not any(os.path.exists(d) for d in cgroups), timeout=30,
                 what="the pod's cgroups removed by the guard")
    finally:
        a.proc.send_signal(signal.SIGCONT)
        a.stop()
        if gc and alive(gc):
            os.kill(gc, signal.SIGKILL)  # the test's own pod: nothing else is touched


def test_a_restart_and_a_stop_leave_no_child_of_the_pod(server, admin, tmp_path):
    """The agent's own stop: a liveness restart kills the grandchild of the
    old process with it (a restart starts clean, as a container's does),
    and deleting the job leaves nothing of it running."""
    node = "stopcg%d" % os.getpid()
    here = str(tmp_path)
    a = Agent(server.url, server.token, node, tmp_path / node, gpus="1xA100-80GB")
    gcs = []
    try:
        wait_for(lambda: ready(admin, node), timeout=40, what="the node ready")
        main, gc = hostile_pod(admin, "leaky", "leaky-main-0", here)
        gcs.append(gc)
        # The main process ends (as if it crashed): the agent restarts the
        # pod, and the old grandchild must not live on beside the new one.
        os.kill(main, signal.SIGKILL)
        wait_for(pod_where(admin, "leaky", "leaky-main-0",
                           lambda q: q.get("restarts", 0) >= 1 and q["phase"] == "Running"),
                 timeout=40, what="the pod restarted")
        wait_for(lambda: not alive(gc), timeout=30, what="the old grandchild killed")
        gcs.append(pair("leaky-main-0", here, old=(main, gc))[1])
        assert admin.delete(admin.base + "/jobs/leaky").ok
        wait_for(lambda: not processes_with_env("STARCLOUD_POD", "leaky-main-0", here),
                 timeout=40, what="nothing of the deleted pod left")
    finally:
        a.stop()
        for p in gcs:
            if alive(p):
                os.kill(p, signal.SIGKILL)
