"""cgroup v2 as far as this machine allows (docs/SECURITY.md): its unified
hierarchy holds no controller (cpu, memory and pids serve its cgroup v1
hierarchies), so v2 limits cannot be tested here; what needs no controller
can. The agent runs in a mount namespace of its own (unshare -m) with
cgroup2 mounted over /sys/fs/cgroup, as on a Debian 12 host, so it takes
the v2 path: each pod gets NODE's v2 cgroup, its device rules are a BPF
program attached there (src/agent/devbpf.c), and it is stopped whole with
cgroup.kill (src/agent/cgkill.c). The machine's v1 hierarchies are not
touched (the mount is private to the agent and its guard); the cgroups the
test's agents make at the root of the unified hierarchy are removed."""
import os
import signal
import subprocess
import uuid

import pytest

from agent_util import Agent, pods_of, run_job, wait_for
from test_devices import fake_devices, pods_see_only_their_gpus
from test_faults import ready
from test_guard_cgroups import alive, hostile_pod

# The agent's command follows as "$0" "$@".
PRIVATE_V2 = ["unshare", "-m", "--propagation", "private", "sh", "-c",
              'mount -t cgroup2 none /sys/fs/cgroup && exec "$0" "$@"']


def v2_mount():
    """The machine's cgroup2 mount point, or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            if right.split()[0] == "cgroup2":
                return left.split()[4]
    return None


def usable():
    if os.geteuid() != 0 or not v2_mount():
        return False
    r = subprocess.run(PRIVATE_V2 + ["true"], capture_output=True)
    return r.returncode == 0


pytestmark = pytest.mark.skipif(not usable(),
                                reason="needs root, a cgroup2 mount and unshare -m")


def v2_cgroup(pid):
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


class V2Agent(Agent):
    def __init__(self, *args, **kw):
        super().__init__(*args, prefix=PRIVATE_V2, **kw)

    def stop(self, sig=signal.SIGTERM):
        super().stop(sig)
        # What it made at the root of the unified hierarchy (empty by now,
        # its pods stopped; kept by the kernel while a process is in it).
        root = os.path.join(v2_mount(), self.cgroup_name())
        for d in (os.listdir(root) if os.path.isdir(root) else []):
            if os.path.isdir(os.path.join(root, d)):
                try:
                    os.rmdir(os.path.join(root, d))
                except OSError:
                    pass
        try:
            os.rmdir(root)
        except OSError:
            pass


def test_v2_device_program_hides_other_gpus(server, admin, tmp_path):
    dev = fake_devices(str(tmp_path / "dev"), 4)
    name = "v2dv" + uuid.uuid4().hex[:8]
    a = V2Agent(server.url, server.token, name, tmp_path / "a", gpus="4xA100-80GB",
                extra=["--dev-dir", dev])
    try:
        wait_for(lambda: ready(admin, name), timeout=40, what="agent ready")
        out = a.output()
        assert "through a BPF device program per pod" in out, out
        with open(os.path.join(v2_mount(), "cgroup.controllers")) as f:
            if "memory" not in f.read().split():  # this machine: v1 holds it
                assert "CPU and memory limits are NOT enforced" in out, out
        pods_see_only_their_gpus(admin, a, dev)
        # A running pod is in its v2 cgroup, which goes with it.
        run_job(admin, "long", ["sleep", "600"], gpu=1, restartPolicy="Never")
        pod_cg = os.path.join(v2_mount(), a.cgroup_name(), "long.long-main-0")
        pid = wait_for(lambda: pods_of(admin, "long").get("long-main-0", {}).get("phase") ==
                       "Running" and os.path.exists(pod_cg) and open(
                           pod_cg + "/cgroup.procs").read().split(), what="long's cgroup",
                       timeout=40)
        assert v2_cgroup(int(pid[0])) == "/%s/long.long-main-0" % a.cgroup_name()
        admin.delete(admin.base + "/jobs/long")
        wait_for(lambda: not os.path.exists(pod_cg), timeout=40,
                 what="the pod's cgroup removed")
    finally:
        a.stop()


def test_v2_guard_kills_a_pod_child_that_left_its_group(server, admin, tmp_path):
    """As test_guard_cgroups, with the pod in a v2 cgroup: the guard of a
    frozen agent empties it with cgroup.kill."""
    name = "v2gd" + uuid.uuid4().hex[:8]
    here = str(tmp_path)
    a = V2Agent(server.url, server.token, name, tmp_path / name, gpus="1xA100-80GB")
    gc = None
    try:
        wait_for(lambda: ready(admin, name), timeout=40, what="the node ready")
        main, gc = hostile_pod(admin, "hostile", "hostile-main-0", here)
        assert v2_cgroup(gc) == "/%s/hostile.hostile-main-0" % a.cgroup_name()
        a.proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: not alive(main), timeout=60, what="the guard fenced the pod")
        wait_for(lambda: not alive(gc), timeout=30,
                 what="the setsid grandchild killed by the guard (cgroup.kill)")
        log = open(os.path.join(a.data_dir, "guard.log")).read()
        assert "grace over, SIGKILL" in log, log
    finally:
        a.proc.send_signal(signal.SIGCONT)
        a.stop()
        if gc and alive(gc):
            os.kill(gc, signal.SIGKILL)
