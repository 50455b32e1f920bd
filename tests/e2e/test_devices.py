"""A pod sees only its own GPUs' device nodes (devices cgroup, cgroup v1;
src/agent/devcg.c, docs/SECURITY.md).

The nodes are fakes the test makes with mknod in a folder of its own (the
agent's --dev-dir): the NVIDIA major 195 with no driver behind it, mode
0666 as the real ones. Opening one that the pod's cgroup allows reaches
the (absent) driver: ENXIO; one that it denies is stopped by the kernel
before: EPERM. So the two outcomes tell exactly whether the cgroup rule is
there. The agents run as root, so pods run as per-queue users."""
import json
import os
import stat
import uuid

import pytest

from agent_util import Agent, pod_where, pods_of, run_job, setup_queue, wait_for

DEVICES = "/sys/fs/cgroup/devices"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="mknod and cgroups need root"),
    pytest.mark.skipif(not os.path.exists(DEVICES + "/devices.deny"),
                       reason="no cgroup v1 devices controller on this machine"),
]

PROBE = r'''
import errno, json, os
d = os.environ["DEVDIR"]
out = {}
for name in sorted(os.listdir(d)):
    try:
        os.close(os.open(os.path.join(d, name), os.O_RDWR))
        out[name] = "OPENED"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
print("RESULT " + json.dumps(out), flush=True)
'''


def fake_devices(folder, gpus):
    os.makedirs(folder)
    nodes = {"nvidia%d" % i: (195, i) for i in range(gpus)}
    nodes.update({"nvidiactl": (195, 255), "nvidia-uvm": (195, 250)})
    for name, (major, minor) in nodes.items():
        path = os.path.join(folder, name)
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        os.chmod(path, 0o666)
    return folder


def result(admin, a, job):
    wait_for(pod_where(admin, job, job + "-main-0", lambda p: p["phase"] == "Succeeded"),
             timeout=20, what=job + " to finish")
    with open(os.path.join(a.pod_dir(job, job + "-main-0"), "output.log")) as f:
        text = f.read()
    line = [l for l in text.splitlines() if l.startswith("RESULT ")]
    assert line, text
    return json.loads(line[0][7:])


def pods_see_only_their_gpus(admin, a, dev):
    """Runs PROBE in a pod with 2 of the agent's 4 fake GPUs and in one with
    none: each reaches its own GPUs' nodes (ENXIO: no driver behind them)
    and is refused the others' (EPERM); the shared control nodes are for
    pods with GPUs only. The device rules' outcome on cgroup v1 and v2."""
    setup_queue(admin)
    env = {"DEVDIR": dev}
    run_job(admin, "two", ["python3", "-c", PROBE], gpu=2, env=env, restartPolicy="Never")
    run_job(admin, "none", ["python3", "-c", PROBE], env=env, restartPolicy="Never")
    two, none = result(admin, a, "two"), result(admin, a, "none")
    mine = {"nvidia%d" % g for g in pods_of(admin, "two")["two-main-0"]["gpus"]}
    assert len(mine) == 2
    for i in range(4):
        n = "nvidia%d" % i
        assert two[n] == ("ENXIO" if n in mine else "EPERM"), (n, two)
        assert none[n] == "EPERM", (n, none)
    assert two["nvidiactl"] == two["nvidia-uvm"] == "ENXIO"
    assert none["nvidiactl"] == none["nvidia-uvm"] == "EPERM"


def devices_cgroup(pid):
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            n, ctl, path = line.rstrip("\n").split(":", 2)
            if "devices" in ctl.split(","):
                return path
    return None


def test_pods_see_only_their_gpus(server, admin, tmp_path):
    dev = fake_devices(str(tmp_path / "dev"), 4)
    name = "dv" + uuid.uuid4().hex[:8]  # the cgroup folder is machine-wide
    a = Agent(server.url, server.token, name, tmp_path / "a", gpus="4xA100-80GB",
              extra=["--dev-dir", dev])
    try:
        wait_for(lambda: admin.get(admin.base + "/nodes/" + name).json().get(
            "status", {}).get("ready"), what="agent ready")
        home = devices_cgroup(a.proc.pid)
        pods_see_only_their_gpus(admin, a, dev)
        # The agent went back to its own cgroup after starting them.
        assert devices_cgroup(a.proc.pid) == home
        # A running pod is in its cgroup; the cgroup goes with the pod.
        run_job(admin, "long", ["sleep", "600"], gpu=1, restartPolicy="Never")
        pod_cg = os.path.join(DEVICES, a.cgroup_name(), "long.long-main-0")
        pid = wait_for(lambda: pods_of(admin, "long").get("long-main-0", {}).get("phase") ==
                       "Running" and os.path.exists(pod_cg) and open(
                           pod_cg + "/cgroup.procs").read().split(), what="long's cgroup")
        assert devices_cgroup(int(pid[0])).endswith("/%s/long.long-main-0" % a.cgroup_name())
        assert not os.path.exists(os.path.join(DEVICES, a.cgroup_name(), "two.two-main-0"))
        admin.delete(admin.base + "/jobs/long")
        wait_for(lambda: not os.path.exists(pod_cg), what="the pod's cgroup removed")
        # An exec probe runs the tenant's code too: in the pod's cgroup.
        probe = PROBE.replace('os.environ["DEVDIR"]', repr(dev)).replace(
            'print("RESULT " + json.dumps(out), flush=True)',
            'open("probe.json", "w").write(json.dumps(out))')
        # The probe runs inside the pod's CPU limit too (100m): python's
        # start-up alone may take over a second under load.
        run_job(admin, "probed", ["sleep", "600"], restartPolicy="Never",
                probes={"startup": {"exec": {"command": ["python3", "-c", probe]},
                                    "periodSeconds": 1, "timeoutSeconds": 60}})
        seen = os.path.join(a.work_dir("probed", "probed-main-0"), "probe.json")
        wait_for(lambda: os.path.exists(seen) and os.path.getsize(seen), what="the probe ran")
        with open(seen) as f:
            assert set(json.load(f).values()) == {"EPERM"}
    finally:
        a.stop()
    wait_for(lambda: not os.path.exists(os.path.join(DEVICES, a.cgroup_name())),
             what="the agent's cgroup folder removed")


def test_device_nodes_follow_nvml_minor_numbers(server, admin, tmp_path):
    """The fake NVML numbers its nodes the other way round (device 0 is
    /dev/nvidia1): the rule follows the node, not the index."""
    import subprocess
    lib = str(tmp_path / "libfake-nvml.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", lib,
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_nvml.c")],
                   check=True)
    dev = fake_devices(str(tmp_path / "dev"), 2)
    name = "dv" + uuid.uuid4().hex[:8]
    a = Agent(server.url, server.token, name, tmp_path / "a", gpus=None,
              extra=["--nvml-lib", lib, "--dev-dir", dev])
    try:
        wait_for(lambda: admin.get(admin.base + "/nodes/" + name).json().get(
            "status", {}).get("ready"), what="agent ready")
        setup_queue(admin)
        run_job(admin, "one", ["python3", "-c", PROBE], gpu=1, env={"DEVDIR": dev},
                restartPolicy="Never")
        got = result(admin, a, "one")
        g = pods_of(admin, "one")["one-main-0"]["gpus"][0]
        assert got["nvidia%d" % (1 - g)] == "ENXIO", got
        assert got["nvidia%d" % g] == "EPERM", got
    finally:
        a.stop()


def test_without_cap_sys_admin_the_agent_says_so(server, admin, tmp_path):
    """Device rules need CAP_SYS_ADMIN: an agent without it (as under the
    shipped systemd unit) says at start-up that GPU isolation is not
    enforced, and it is not (its pods still start)."""
    dev = fake_devices(str(tmp_path / "dev"), 2)
    name = "dv" + uuid.uuid4().hex[:8]
    a = Agent(server.url, server.token, name, tmp_path / "a", gpus="2xA100-80GB",
              extra=["--dev-dir", dev], prefix=["setpriv", "--bounding-set", "-sys_admin", "--"])
    try:
        wait_for(lambda: "GPU isolation NOT enforced" in a.output(), what="the warning")
        assert "CAP_SYS_ADMIN" in a.output()
        assert not os.path.exists(os.path.join(DEVICES, a.cgroup_name()))
        wait_for(lambda: admin.get(admin.base + "/nodes/" + name).json().get(
            "status", {}).get("ready"), what="agent ready")
        setup_queue(admin)
        run_job(admin, "one", ["python3", "-c", PROBE], gpu=1, env={"DEVDIR": dev},
                restartPolicy="Never")
        got = result(admin, a, "one")
        assert got["nvidia0"] == got["nvidia1"] == "ENXIO", got  # as the warning said
    finally:
        a.stop()


def test_without_cap_setuid_pods_keep_the_agents_user_and_it_says_so(server, tmp_path):
    a = Agent(server.url, server.token, "nosetuid", tmp_path / "a",
              prefix=["setpriv", "--bounding-set", "-setuid", "--"])
    try:
        wait_for(lambda: "pod isolation is NOT enforced" in a.output(), what="the warning")
        assert "CAP_SETUID" in a.output()
    finally:
        a.stop()
