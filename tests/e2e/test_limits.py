"""A pod's CPU and memory limits on cgroup v1 (src/agent/cgv1.c,
docs/SECURITY.md): the task's resources.cpu becomes cpu.cfs_quota_us over a
100 ms period and resources.memory memory.limit_in_bytes; a pod above its
memory is killed by the kernel's OOM killer and reported as Kubernetes
does (exitCode 137, reason OOMKilled); a busy pod is throttled (cpu.stat
nr_throttled). The pod is born inside its cgroups: the agent's forking
thread joins them for the fork and goes back at once. The agents run as
root, so pods run as per-queue users."""
import os
import uuid

import pytest

from agent_util import (Agent, pod_where, pods_of, processes_with_env, run_job, setup_queue,
                        wait_for)

V1 = "/sys/fs/cgroup"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root"),
    pytest.mark.skipif(os.path.exists(V1 + "/cgroup.controllers"),
                       reason="cgroup v2 host: limits are set by podenv.c, not cgroup v1"),
    pytest.mark.skipif(not (os.path.exists(V1 + "/memory/memory.limit_in_bytes") and
                            os.path.exists(V1 + "/cpu/cpu.cfs_quota_us")),
                       reason="no cgroup v1 cpu and memory controllers on this machine"),
]

# Touches 16 MiB at a time up to 1 GiB: far above a 64Mi limit.
HOG = r'''
import sys
keep = []
for i in range(64):
    keep.append(b"x" * (16 << 20))
    print("held", (i + 1) * 16, "MiB", flush=True)
print("SURVIVED", flush=True)
'''


def cgroup_of(pid, ctl):
    """pid's cgroup in the v1 hierarchy of ctl."""
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            n, ctls, path = line.rstrip("\n").split(":", 2)
            if ctl in ctls.split(","):
                return path
    return None


def read(path):
    with open(path) as f:
        return f.read()


def stat_of(path):
    return dict((k, int(v)) for k, v in (l.split() for l in read(path).splitlines()))


def agent_root(a, ctl):
    return os.path.join(V1, ctl, a.home[ctl].lstrip("/"), a.cgroup_name())


@pytest.fixture
def agent(server, admin, tmp_path):
    name = "lim" + uuid.uuid4().hex[:8]  # the cgroup folders are machine-wide
    a = Agent(server.url, server.token, name, tmp_path / "a")
    try:
        wait_for(lambda: admin.get(admin.base + "/nodes/" + name).json().get(
            "status", {}).get("ready"), timeout=60, what="agent ready")
        # Its own cgroups, read while it starts no pod: while it forks one,
        # its main thread is in the pod's for a moment.
        a.home = {c: cgroup_of(a.proc.pid, c) for c in ("cpu", "memory", "pids")}
        roots = [agent_root(a, c) for c in ("cpu", "memory", "pids")]
        setup_queue(admin)
        yield a
    finally:
        a.stop()
    for r in roots:
        wait_for(lambda: not os.path.exists(r), timeout=30, what=r + " removed")


def running_pid(a, job):
    """The pid of job's pod once it runs (its own process, found by its
    STARCLOUD_POD: the memory cgroup's tasks also hold the agent's thread
    while it forks)."""
    pod = job + "-main-0"

    def pid():
        pids = processes_with_env("STARCLOUD_POD", pod, under=a.data_dir)
        return pids[0] if pids else None
    return wait_for(pid, timeout=60, what=job + " running")


def test_memory_above_the_limit_is_oom_killed_and_reported(admin, agent):
    run_job(admin, "hog", ["python3", "-c", HOG], restartPolicy="Never")  # 64Mi
    wait_for(pod_where(admin, "hog", "hog-main-0", lambda p: p["phase"] == "Failed"),
             timeout=90, what="hog to fail")
    p = pods_of(admin, "hog")["hog-main-0"]
    assert p["exitCode"] == 137 and p["reason"] == "OOMKilled", p
    assert p["message"].startswith("OOMKilled") and str(64 << 20) in p["message"], p
    out = read(os.path.join(agent.pod_dir("hog", "hog-main-0"), "output.log"))
    assert "held 16 MiB" in out and "SURVIVED" not in out, out
    # A pod that ends on its own is no OOMKilled, in the same cgroup after it.
    run_job(admin, "fine", ["python3", "-c", "print('ok')"], restartPolicy="Never")
    wait_for(pod_where(admin, "fine", "fine-main-0", lambda p: p["phase"] == "Succeeded"),
             timeout=60, what="fine to succeed")
    assert "reason" not in pods_of(admin, "fine")["fine-main-0"]


def test_agent_folder_removed_under_it_is_made_again(admin, agent):
    """The agent's cgroup folders removed under it while they are empty (by
    an operator's clean-up, or an agent of the earlier layout of the same
    node name at its exit): the next pod makes them again instead of
    failing to start."""
    for ctl in ("cpu", "memory", "pids"):
        os.rmdir(agent_root(agent, ctl))  # empty: no pod yet
    run_job(admin, "again", ["sleep", "600"], restartPolicy="Never")
    pid = running_pid(agent, "again")
    for ctl in ("cpu", "memory", "pids"):
        assert cgroup_of(pid, ctl).endswith("/%s/again.again-main-0" % agent.cgroup_name())
    assert pods_of(admin, "again")["again-main-0"].get("restarts", 0) == 0


def test_limits_written_and_cpu_throttled(admin, agent):
    run_job(admin, "spin", ["python3", "-c", "while True: pass"], restartPolicy="Never")
    pid = running_pid(agent, "spin")
    pod = "spin.spin-main-0"
    cpu_dir = os.path.join(agent_root(agent, "cpu"), pod)
    mem_dir = os.path.join(agent_root(agent, "memory"), pod)
    pids_dir = os.path.join(agent_root(agent, "pids"), pod)
    # The task's resources: cpu 100m, memory 64Mi; --pod-pids-max 4096.
    assert read(cpu_dir + "/cpu.cfs_period_us").strip() == "100000"
    assert read(cpu_dir + "/cpu.cfs_quota_us").strip() == "10000"
    assert read(mem_dir + "/memory.limit_in_bytes").strip() == str(64 << 20)
    assert read(pids_dir + "/pids.max").strip() == "4096"
    # Born inside: the pod's process is in all three.
    for ctl in ("cpu", "memory", "pids"):
        assert cgroup_of(pid, ctl).endswith("/%s/%s" % (agent.cgroup_name(), pod)), ctl
    # A busy loop at 100m is throttled, period after period.
    wait_for(lambda: stat_of(cpu_dir + "/cpu.stat")["nr_throttled"] >= 5, timeout=60,
             what="spin throttled")
    assert stat_of(cpu_dir + "/cpu.stat")["throttled_time"] > 0
    # Every thread of the agent went back to its own cgroups.
    def all_home():
        for tid in os.listdir("/proc/%d/task" % agent.proc.pid):
            try:
                with open("/proc/%d/task/%s/cgroup" % (agent.proc.pid, tid)) as f:
                    lines = f.read().splitlines()
            except OSError:
                continue  # a thread that ended meanwhile
            for ctl, path in agent.home.items():
                line = [l for l in lines if ctl in l.split(":")[1].split(",")][0]
                if line.split(":", 2)[2] != path:
                    return False
        return True
    wait_for(all_home, timeout=30, what="the agent's threads in their own cgroups")
    # The cgroups go with the pod.
    admin.delete(admin.base + "/jobs/spin")
    for d in (cpu_dir, mem_dir, pids_dir):
        wait_for(lambda: not os.path.exists(d), timeout=60, what=d + " removed")


def proc_start(pid):
    """A process's start time (clock ticks), or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return None if rest[0] in ("Z", "X") else int(rest[19])
    except (OSError, IndexError, ValueError):
        return None


def uid_of(pid):
    with open("/proc/%d/status" % pid) as f:
        line = [l for l in f if l.startswith("Uid:")][0]
    return int(line.split()[1])


# Written by the probe into its working folder (its output is discarded).
WHO = ("echo uid=$(id -u) gid=$(id -g) pwd=$(pwd) pod=$STARCLOUD_POD v=$PROBE_VAR "
       "pg=$(cut -d' ' -f5 /proc/$$/stat) self=$$ > who.tmp; cat /proc/$$/cgroup >> who.tmp; "
       "mv who.tmp who.txt")


def test_exec_probe_runs_as_the_pod_inside_its_cgroups(admin, agent):
    """An exec probe is the tenant's code: the pod's uid, folder and
    environment, inside the pod's cgroups (so its limits hold it), in a
    process group of its own (issue 15's gap: it ran in none of them, with
    only PATH and HOME)."""
    run_job(admin, "who", ["sleep", "600"], restartPolicy="Never", env={"PROBE_VAR": "x1"},
            probes={"readiness": {"exec": {"command": ["sh", "-c", WHO]},
                                  "periodSeconds": 1, "timeoutSeconds": 60}})
    pid = running_pid(agent, "who")
    work = agent.work_dir("who", "who-main-0")
    out = wait_for(lambda: os.path.exists(work + "/who.txt") and read(work + "/who.txt"),
                   timeout=60, what="the probe's report")
    first, cg = out.split("\n", 1)
    f = dict(kv.split("=", 1) for kv in first.split())
    uid = uid_of(pid)
    assert uid != 0 and f["uid"] == str(uid) and f["gid"] == str(uid), (f, uid)
    assert f["pwd"] == work and f["pod"] == "who-main-0" and f["v"] == "x1", f
    assert f["pg"] == f["self"], f  # leads its own process group
    pod = "who.who-main-0"
    lines = dict((l.split(":", 2)[1], l.split(":", 2)[2]) for l in cg.splitlines() if l)
    for ctl in ("cpu", "memory", "pids"):
        path = [p for c, p in lines.items() if ctl in c.split(",")][0]
        assert path == cgroup_of(pid, ctl) and path.endswith(
            "/%s/%s" % (agent.cgroup_name(), pod)), (ctl, path, cg)
    wait_for(pod_where(admin, "who", "who-main-0", lambda p: p["ready"]), timeout=60,
             what="ready by the probe")


# Leaves a child behind, then hangs past its timeout.
HANG = "sleep 1000 & echo $! > hang.pid; sleep 1000"
# Leaves a child behind and succeeds (after a second, so that the test
# sees the child alive first).
LEAVE = "sleep 1001 & echo $! > leave.pid; sleep 1; exit 0"


def caught_child(work, name, arg):
    """A live child a probe left (its pid file names it, it runs `sleep
    arg`): (pid, start) once one is seen alive, else None."""
    try:
        pid = int(read(os.path.join(work, name)).strip())
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read()
    except (OSError, ValueError):
        return None
    start = proc_start(pid)
    return (pid, start) if cmd == b"sleep\0" + arg + b"\0" and start else None


# Leaves a child in a session of its own (out of the probe's group): it
# lives on in the pod's cgroups until the pod stops.
# (It waits until the child has its session, so its own end cannot catch
# the child still in its group.)
ESCAPE = ("setsid sleep 1002 & c=$!; "
          "while [ \"$(cut -d' ' -f6 /proc/$c/stat)\" = \"$(cut -d' ' -f6 /proc/$$/stat)\" ]; "
          "do sleep 0.1; done; echo $c > escape.pid")


def test_exec_probe_process_group_dies_at_its_timeout_and_end(admin, agent):
    """A hostile probe forks a child meant to outlive it: the timeout kills
    the probe's whole process group, and a probe that ends leaves nothing
    behind either; a child that left the group stays in the pod's cgroups
    and goes with the pod."""
    run_job(admin, "hang", ["sleep", "600"], restartPolicy="Never",
            probes={"startup": {"exec": {"command": ["sh", "-c", ESCAPE]},
                                "periodSeconds": 1, "timeoutSeconds": 60},
                    "readiness": {"exec": {"command": ["sh", "-c", HANG]},
                                  "periodSeconds": 4, "timeoutSeconds": 2},
                    "liveness": {"exec": {"command": ["sh", "-c", LEAVE]},
                                 "periodSeconds": 4, "timeoutSeconds": 60}})
    pid = running_pid(agent, "hang")
    work = agent.work_dir("hang", "hang-main-0")
    for name, arg in (("hang.pid", b"1000"), ("leave.pid", b"1001")):
        child, start = wait_for(lambda: caught_child(work, name, arg), timeout=60,
                                what="a live child of the probe (%s)" % name)
        # Inside the pod's cgroups, as the probe.
        for ctl in ("cpu", "memory", "pids"):
            assert cgroup_of(child, ctl) == cgroup_of(pid, ctl), ctl
        wait_for(lambda: proc_start(child) != start, timeout=30,
                 what="the probe's child (%s) killed" % name)
    # The readiness probe only ever timed out: never ready; the liveness
    # probe passed: no restart.
    p = pods_of(admin, "hang")["hang-main-0"]
    assert p["phase"] == "Running" and not p["ready"] and p.get("restarts", 0) == 0, p
    escaped, start = caught_child(work, "escape.pid", b"1002")
    for ctl in ("cpu", "memory", "pids"):
        assert cgroup_of(escaped, ctl) == cgroup_of(pid, ctl), ctl
    admin.delete(admin.base + "/jobs/hang")
    wait_for(lambda: proc_start(escaped) != start, timeout=60, what="the escaped child killed")
    for ctl in ("cpu", "memory", "pids"):
        d = os.path.join(agent_root(agent, ctl), "hang.hang-main-0")
        wait_for(lambda: not os.path.exists(d), timeout=60, what=d + " removed")
