"""Node agent: registration, a job that runs and whose logs are readable,
device environment, bad pod specs refused at apply, NVML discovery."""
import os
import subprocess

import pytest
import requests

from agent_util import Agent, job_obj, pod_where, pods_of, run_job, setup_queue, wait_for
from conftest import BIN, manifest


@pytest.fixture
def agent(server, tmp_path):
    a = Agent(server.url, server.token, "n1", tmp_path / "n1")
    yield a
    a.stop()


def test_registers_and_heartbeats(server, admin, agent):
    def ready():
        n = admin.get(admin.base + "/nodes/n1")
        return n.ok and n.json().get("status", {}).get("ready") is True and n.json()
    node = wait_for(ready, what="node n1 ready")
    assert node["spec"]["gpus"]["count"] == 2
    assert node["spec"]["gpus"]["model"] == "A100-80GB"
    assert node["status"]["agent"]["address"] == agent.addr
    assert requests.get("http://%s/healthz" % agent.addr).text == "ok\n"


def test_job_runs_and_logs_are_readable(server, admin, agent):
    setup_queue(admin)
    run_job(admin, "hello", ["sh", "-c", "echo hello from $STARCLOUD_POD; echo gpus=$CUDA_VISIBLE_DEVICES"],
            gpu=1, restartPolicy="Never")
    pod = wait_for(pod_where(admin, "hello", "hello-main-0",
                             lambda p: p["phase"] == "Succeeded"), what="Succeeded")
    assert pod["exitCode"] == 0 and pod["node"] == "n1"
    env = dict(os.environ, STARCLOUD_SERVER=server.url, STARCLOUD_TOKEN=server.token)
    out = subprocess.run([BIN, "logs", "hello"], env=env, capture_output=True, text=True,
                         timeout=10)
    assert out.returncode == 0, out.stderr
    assert "hello from hello-main-0" in out.stdout
    assert "gpus=%d" % pod["gpus"][0] in out.stdout
    # Another tenant's token cannot read them; no token at all is refused.
    r = requests.get("http://%s/logs?job=hello&pod=hello-main-0" % agent.addr)
    assert r.status_code == 401


def test_logs_follow_and_failed_exit(server, admin, agent):
    setup_queue(admin)
    run_job(admin, "boom", ["sh", "-c", "echo one; sleep 0.5; echo two; exit 3"],
            restartPolicy="Never")
    env = dict(os.environ, STARCLOUD_SERVER=server.url, STARCLOUD_TOKEN=server.token)
    wait_for(lambda: pods_of(admin, "boom").get("boom-main-0"), what="bound")
    wait_for(lambda: os.path.exists(agent.pod_dir("boom", "boom-main-0") + "/output.log"))
    out = subprocess.run([BIN, "logs", "boom", "boom-main-0", "-f"], env=env,
                         capture_output=True, text=True, timeout=15)
    assert "one\ntwo\n" in out.stdout
    pod = wait_for(pod_where(admin, "boom", "boom-main-0", lambda p: p["phase"] == "Failed"))
    assert pod["exitCode"] == 3 and "status 3" in pod["message"]


def test_share_and_env(server, admin, agent):
    setup_queue(admin)
    body = manifest("Job", "share", {"queue": "q", "restartPolicy": "Never", "tasks": [{
        "command": ["sh", "-c", "env | sort"], "env": {"FOO": "bar"},
        "resources": {"gpuFraction": 0.25}}]})
    assert admin.post(admin.base + "/jobs", json=body).status_code == 201
    wait_for(pod_where(admin, "share", "share-main-0", lambda p: p["phase"] == "Succeeded"))
    with open(agent.pod_dir("share", "share-main-0") + "/output.log") as f:
        out = f.read()
    assert "FOO=bar" in out and "STARCLOUD_GPU_SHARE=0.250" in out
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25" in out
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M" in out
    assert "STARCLOUD_TOKEN" not in out and "STARCLOUD_NODE=n1" in out


BAD = [
    ({"probes": {"liveness": {"periodSeconds": 1}}}, "probes.liveness"),
    ({"probes": {"liveness": {"http": {"path": "healthz", "port": 80}}}}, "path"),
    ({"probes": {"readiness": {"tcp": {"port": 70000}}}}, "port"),
    ({"probes": {"startup": {"exec": {"command": []}, "tcp": {"port": 1}}}}, "startup"),
    ({"workingDir": "relative/dir"}, "workingDir"),
    ({"command": [""]}, "command"),
    ({"command": None, "args": ["x"]}, "args"),
]


@pytest.mark.parametrize("patch,field", BAD)
def test_bad_pod_specs_refused(admin, patch, field):
    setup_queue(admin)
    task = {"name": "main", "command": ["true"]}
    task.update(patch)
    if task["command"] is None:
        del task["command"]
    r = admin.post(admin.base + "/jobs", json=manifest("Job", "bad", {"queue": "q", "tasks": [task]}))
    assert r.status_code == 400, r.text
    assert field in r.json()["error"]["field"], r.json()
    assert admin.get(admin.base + "/jobs/bad").status_code == 404


def test_bad_gang_policy_refused(admin):
    setup_queue(admin)
    r = admin.post(admin.base + "/jobs", json=manifest("Job", "bad", {
        "queue": "q", "gangPolicy": "Sometimes", "tasks": [{"command": ["true"]}]}))
    assert r.status_code == 400 and "gangPolicy" in r.json()["error"]["field"]


FAKE_NVML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_nvml.c")


def test_nvml_discovery_with_fake_library(server, admin, tmp_path):
    lib = str(tmp_path / "libfake-nvml.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, FAKE_NVML], check=True)
    a = Agent(server.url, server.token, "gpu1", tmp_path / "gpu1", gpus=None,
              extra=["--nvml-lib", lib])
    try:
        node = wait_for(lambda: (admin.get(admin.base + "/nodes/gpu1").json()
                                 .get("status", {}).get("devices")), what="devices")
        assert len(node) == 2
        assert node[0]["uuid"] == "GPU-fake-0000" and node[0]["model"] == "A100-80GB"
        assert node[1]["mig"] is True
        assert node[1]["migInstances"][0]["uuid"] == "MIG-fake-1-0"
        assert node[1]["migInstances"][0]["profile"] == "1g.10gb"
        spec = admin.get(admin.base + "/nodes/gpu1").json()["spec"]["gpus"]
        assert spec["count"] == 2 and spec["memory"] == 80 << 30
        setup_queue(admin)
        run_job(admin, "uuid", ["sh", "-c", "echo dev=$CUDA_VISIBLE_DEVICES"], gpu=2,
                restartPolicy="Never")
        wait_for(pod_where(admin, "uuid", "uuid-main-0", lambda p: p["phase"] == "Succeeded"))
        with open(a.pod_dir("uuid", "uuid-main-0") + "/output.log") as f:
            assert "dev=GPU-fake-0000,GPU-fake-0001" in f.read()
        # The status port answers the server's own credential only: not
        # even an admin's token is taken there (docs/SECURITY.md).
        assert requests.get("http://%s/pods" % a.addr,
                            headers={"Authorization": "Bearer " + server.token}).status_code == 401
    finally:
        a.stop()


def test_running_pods_keep_their_gpus(server, admin, agent):
    """A running pod's report (ready, restarts, message "") is read back by
    the scheduler: its job stays in the snapshot and its GPU stays taken.
    The decoder refused the empty message, the job left the snapshot and a
    2-GPU job was placed on the node's 2 GPUs beside it (issue 23's soak:
    450 % of the cluster's GPUs allocated). The server now stores no
    message for "", and the decoder also reads a stored "" (a store written
    before)."""
    setup_queue(admin)
    run_job(admin, "first", ["sleep", "60"], gpu=1)
    wait_for(pod_where(admin, "first", "first-main-0",
                       lambda p: p["phase"] == "Running" and p.get("ready")),
             what="first reported running")
    run_job(admin, "second", ["sleep", "60"], gpu=2)

    def considered():
        conds = (job_obj(admin, "second") or {}).get("status", {}).get("conditions", [])
        return [c for c in conds if c.get("type") == "Scheduled"]
    # The scheduler has looked at the second job since the first one's report.
    cond = wait_for(considered, what="a scheduling decision on the second job")[0]
    assert cond["status"] == "False", cond
    assert not pods_of(admin, "second")
    first = job_obj(admin, "first")
    for c in first["status"].get("conditions", []):
        assert "status.pods" not in c.get("message", ""), c
    text = admin.get(server.url + "/metrics").text
    alloc = [float(l.split()[1]) for l in text.splitlines()
             if l.startswith("starcloud_cluster_allocated_gpus ")]
    assert alloc == [1.0], alloc
