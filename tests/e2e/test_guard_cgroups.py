"""The pod guard and the agent stop a pod by its cgroups, not only by its
process group (docs/SECURITY.md, src/agent/cgkill.h): a hostile pod forks a
grandchild that calls setsid() (so it leaves the pod's process group) and
ignores SIGTERM. The pod's cgroups are named after the node and the
agent's data folder (src/agent/cgname.h): two agents of the same node name
on one machine never share them (the last test)."""
import json
import os
import signal

import pytest

from agent_util import Agent, pod_where, processes_with_env, run_job, setup_queue, wait_for
from conftest import Server
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


def cgroups_of(a, job, pod):
    with open(os.path.join(a.pod_dir(job, pod), "pod.json")) as f:
        return json.load(f)["cgroups"]


def test_two_agents_of_one_node_name_never_share_pod_cgroups(server, admin, tmp_path):
    """Two agents of the same node name on one machine (two clusters, two
    test runs side by side), in data folders of their own, each run the
    hostile pod under the same name. Their cgroups differ
    (starcloud-NODE-HASH, src/agent/cgname.h), so a restart of one's pod,
    a restart of that agent (it adopts the pod and finds the same cgroups)
    and its guard's fence leave the other's pod and its setsid grandchild
    running. With cgroups named starcloud-NODE/JOB.POD the first of them
    killed both pods."""
    node = "twin%d" % os.getpid()
    other = Server(tmp_path / "data2").start()
    other.read_admin_token()
    admin2 = other.session()
    job, pod = "hostile", "hostile-main-0"
    dirs = [str(tmp_path / "one"), str(tmp_path / "two")]

    def start_a():  # without --drain: its pods outlive its restart
        return Agent(server.url, server.token, node, dirs[0], gpus="1xA100-80GB", drain=False)

    a, b = start_a(), Agent(other.url, other.token, node, dirs[1], gpus="1xA100-80GB")
    mains, gcs = [], []
    try:
        wait_for(lambda: ready(admin, node) and ready(admin2, node), timeout=60,
                 what="both nodes ready")
        a_main, a_gc = hostile_pod(admin, job, pod, dirs[0])
        b_main, b_gc = hostile_pod(admin2, job, pod, dirs[1])
        mains, gcs = [a_main, b_main], [a_gc, b_gc]
        cg_a, cg_b = cgroups_of(a, job, pod), cgroups_of(b, job, pod)
        assert a.cgroup_name() != b.cgroup_name()
        assert cg_a and all("/%s/%s.%s" % (a.cgroup_name(), job, pod) in d for d in cg_a), cg_a
        assert cg_b and all("/%s/%s.%s" % (b.cgroup_name(), job, pod) in d for d in cg_b), cg_b

        def b_untouched():
            assert alive(b_main) and alive(b_gc), "the other agent's pod was killed"

        # 1. A's pod restarts: its old grandchild goes, B's pod stays.
        os.kill(a_main, signal.SIGKILL)
        wait_for(pod_where(admin, job, pod,
                           lambda q: q.get("restarts", 0) >= 1 and q["phase"] == "Running"),
                 timeout=60, what="A's pod restarted")
        wait_for(lambda: not alive(a_gc), timeout=30, what="A's old grandchild killed")
        a_main, a_gc = pair(pod, dirs[0], old=(a_main, a_gc))
        mains.append(a_main)
        gcs.append(a_gc)
        b_untouched()
        # 2. A restarts: it adopts its pod, whose cgroups keep their names.
        a.stop()
        a = start_a()
        wait_for(lambda: "adopted 1 running pod" in a.output(), timeout=60,
                 what="the restarted agent adopted its pod")
        assert cgroups_of(a, job, pod) == cg_a
        assert alive(a_main) and alive(a_gc)
        # 3. A frozen past its lease: its guard fences its pod (the
        # grandchild through the cgroups), and only its pod.
        a.proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: not alive(a_main), timeout=60, what="A's guard fenced its pod")
        wait_for(lambda: not alive(a_gc), timeout=30, what="A's grandchild killed by the guard")
        b_untouched()
    finally:
        a.proc.send_signal(signal.SIGCONT)
        a.stop()
        b.stop()
        other.stop()
        for p in mains + gcs:  # the test's own pods: nothing else is touched
            if alive(p):
                os.kill(p, signal.SIGKILL)


def move_to(src, dst):
    """Moves every process of cgroup folder src into dst (made if needed)."""
    os.makedirs(dst, exist_ok=True)
    for _ in range(20):  # a process forked meanwhile is moved next round
        with open(os.path.join(src, "cgroup.procs")) as f:
            pids = f.read().split()
        if not pids:
            return
        for p in pids:
            try:
                with open(os.path.join(dst, "cgroup.procs"), "w") as f:
                    f.write(p)
            except ProcessLookupError:
                pass
    raise AssertionError("processes keep appearing in " + src)


def test_an_agent_upgraded_in_place_keeps_the_earlier_cgroup_names(server, admin, tmp_path):
    """An agent of the earlier layout put its pods in starcloud-NODE/JOB.POD
    and wrote no `cgroups` in pod.json (0.1.0). Made so here by moving a
    running pod there and dropping the field; the agent restarted on that
    data folder adopts the pod, says it keeps the earlier name, and a
    restart of the pod still kills its setsid grandchild through the
    earlier cgroups (with the new name alone it would live on)."""
    node = "legacy%d" % os.getpid()
    here = str(tmp_path / node)
    job, pod = "hostile", "hostile-main-0"

    def start():
        return Agent(server.url, server.token, node, here, gpus="1xA100-80GB", drain=False)

    a, procs, legacy = start(), [], []
    try:
        wait_for(lambda: ready(admin, node), timeout=60, what="the node ready")
        main, gc = hostile_pod(admin, job, pod, here)
        procs += [main, gc]
        a.stop()
        rec_path = os.path.join(a.pod_dir(job, pod), "pod.json")
        with open(rec_path) as f:
            rec = json.load(f)
        new_root = "/%s/" % a.cgroup_name()
        for d in rec.pop("cgroups"):
            if os.path.isdir(d):
                old = d.replace(new_root, "/starcloud-%s/" % node)
                legacy.append(old)
                move_to(d, old)
                os.rmdir(d)
                os.rmdir(os.path.dirname(d))
        assert legacy
        with open(rec_path, "w") as f:
            json.dump(rec, f)
        a = start()
        wait_for(lambda: "adopted 1 running pod" in a.output(), timeout=60,
                 what="the restarted agent adopted the pod")
        assert "pods of an earlier agent run in cgroup folders starcloud-%s" % node in \
            a.output(), a.output()[-2000:]
        os.kill(main, signal.SIGKILL)
        wait_for(pod_where(admin, job, pod,
                           lambda q: q.get("restarts", 0) >= 1 and q["phase"] == "Running"),
                 timeout=60, what="the pod restarted")
        wait_for(lambda: not alive(gc), timeout=30,
                 what="the grandchild killed through the earlier cgroups")
        procs += list(pair(pod, here, old=(main, gc)))
        # The new process is in the earlier folders too, as pod.json says.
        assert all("/starcloud-%s/" % node in d for d in cgroups_of(a, job, pod))
    finally:
        a.stop()
        for p in procs:  # the test's own pods: nothing else is touched
            if alive(p):
                os.kill(p, signal.SIGKILL)
        try:
            wait_for(lambda: not any(alive(p) for p in procs), timeout=10, what="killed")
        except AssertionError:
            pass
        for d in legacy:
            for x in (d, os.path.dirname(d)):
                try:
                    os.rmdir(x)
                except OSError:
                    pass
