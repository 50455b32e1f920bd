"""Every daemon's /metrics passes `promtool check metrics` (HELP on every
family, `_total` counters, base units, snake_case names and labels), carries
starcloud_build_info and the process_* family; the agent's /metrics gives
the fake NVML's device figures under the DCGM exporter's names, with the pod
and queue holding each device."""
import os
import re
import shutil
import subprocess
import time

import pytest
import requests

from agent_util import Agent, metrics_secret, run_job, setup_queue, wait_for
from conftest import (BIN, CKPT_MICRO, free_port, gen_checkpoint, job, node, queue,
                      stop_process, wait_daemon)

FAKE_NVML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_nvml.c")


def promtool():
    path = shutil.which("promtool")
    if not path:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool missing under CI (scripts/deps.sh installs prometheus)")
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return path


def lint(text, who):
    """promtool's findings on a page, which must be none."""
    p = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    findings = (p.stdout + p.stderr).strip()
    assert p.returncode == 0 and not findings, "%s /metrics: %s" % (who, findings)


def common(text, component):
    assert re.search(r'^starcloud_build_info\{component="%s",version="[0-9.]+"' % component,
                     text, re.M), text[-2000:]
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes",
                 "process_start_time_seconds", "process_open_fds"):
        assert re.search(r"^%s [0-9.e+]+$" % name, text, re.M), name
    start = float(re.search(r"^process_start_time_seconds (\S+)$", text, re.M).group(1))
    assert abs(start - time.time()) < 3600, "start time %s is not this hour" % start


def sample(text, name, **labels):
    """Values of the samples of name whose labels include labels."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^%s\{(.*)\} (\S+)$" % re.escape(name), line)
        if not m:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(have.get(k) == v for k, v in labels.items()):
            out.append(float(m.group(2)))
    return out


def test_server_metrics_lint(server, admin):
    promtool()
    admin.post(admin.base + "/nodes", json=node("n0"))
    admin.post(admin.base + "/queues", json=queue("team-a"))
    admin.post(admin.base + "/jobs", json=job("j0"))
    wait_for(lambda: 'starcloud_queue_allocated_gpus{queue="team-a"} 1' in
             admin.get(server.url + "/metrics").text, what="a cycle placed j0")
    text = admin.get(server.url + "/metrics").text
    lint(text, "server")
    common(text, "server")
    assert 'store_schema="' in text
    assert sample(text, "starcloud_cluster_allocated_gpus") == [] and \
        re.search(r"^starcloud_cluster_allocated_gpus 1$", text, re.M)


def test_gateway_and_worker_metrics_lint(tmp_path):
    promtool()
    ckpt = tmp_path / "tiny.bin"
    gen_checkpoint(ckpt, **CKPT_MICRO)
    wport, gport = free_port(), free_port()
    wlog = open(tmp_path / "worker.log", "w")
    w = subprocess.Popen([BIN, "worker", "--checkpoint", str(ckpt), "--model", "tiny",
                          "--listen", "127.0.0.1:%d" % wport], stdout=wlog, stderr=wlog)
    glog = open(tmp_path / "gateway.log", "w")
    g = subprocess.Popen([BIN, "gateway", "--listen", "127.0.0.1:%d" % gport,
                          "--probe-interval", "0", "--backend",
                          "model=tiny,version=1,url=http://127.0.0.1:%d" % wport],
                         stdout=glog, stderr=glog)
    try:
        wait_daemon("http://127.0.0.1:%d/v2/health/live" % wport, w, "worker")
        wait_daemon("http://127.0.0.1:%d/metrics" % gport, g, "gateway")
        # One request through, so the per-model series have samples.
        r = requests.post("http://127.0.0.1:%d/v1/completions" % gport,
                          json={"model": "tiny", "prompt": "a", "max_tokens": 2}, timeout=30)
        assert r.status_code == 200, r.text
        gtext = requests.get("http://127.0.0.1:%d/metrics" % gport, timeout=5).text
        wtext = requests.get("http://127.0.0.1:%d/metrics" % wport, timeout=5).text
        lint(gtext, "gateway")
        lint(wtext, "worker")
        common(gtext, "gateway")
        common(wtext, "worker")
        assert sample(gtext, "starcloud_gateway_requests_total", model="tiny", code="200") == [1]
        assert not re.search(r"^sc_gateway_", gtext, re.M), "old prefix still exposed"
    finally:
        stop_process(g)
        stop_process(w)
        glog.close()
        wlog.close()


def test_agent_metrics_nvml(server, admin, tmp_path):
    promtool()
    lib = str(tmp_path / "libfake-nvml.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, FAKE_NVML], check=True)
    secret, auth = metrics_secret(tmp_path)
    a = Agent(server.url, server.token, "gpu1", tmp_path / "gpu1", gpus=None,
              extra=["--nvml-lib", lib, "--metrics-token-file", secret])
    try:
        url = "http://%s/metrics" % a.addr
        text = wait_daemon(url, a.proc, "agent", auth)
        lint(text, "agent")
        common(text, "agent")
        # The fake library's figures, in DCGM's units (MiB, %, C, W).
        assert sample(text, "DCGM_FI_DEV_GPU_UTIL", gpu="0", UUID="GPU-fake-0000",
                      Hostname="gpu1", model="A100-80GB") == [37]
        assert sample(text, "DCGM_FI_DEV_GPU_UTIL", gpu="1") == [81]
        assert sample(text, "DCGM_FI_DEV_MEM_COPY_UTIL", gpu="1") == [40]
        assert sample(text, "DCGM_FI_DEV_FB_USED", gpu="0") == [10240]
        assert sample(text, "DCGM_FI_DEV_FB_FREE", gpu="1") == [61440]
        assert sample(text, "DCGM_FI_DEV_GPU_TEMP", gpu="1") == [61]
        assert sample(text, "DCGM_FI_DEV_POWER_USAGE", gpu="0") == [250.5]
        assert sample(text, "starcloud_agent_gpus", source="nvml") == [2]
        # A pod holding device 0 names itself and its queue on that device.
        setup_queue(admin, "research")
        run_job(admin, "train", ["sleep", "60"], gpu=1, q="research")
        held = wait_for(lambda: [v for v in sample(requests.get(url, timeout=5, headers=auth).text,
                                                      "DCGM_FI_DEV_GPU_UTIL",
                                                      pod="train-main-0", queue="research")],
                        what="device series with the pod's labels")
        assert held in ([37], [81])
        text = requests.get(url, timeout=5, headers=auth).text
        lint(text, "agent with a pod")
        assert sample(text, "starcloud_agent_pods", state="running") == [1]
        assert sample(text, "starcloud_agent_pod_restarts_total", pod="train-main-0",
                      queue="research") == [0]
    finally:
        a.stop()


def test_agent_metrics_declared_gpus(server, tmp_path):
    """Declared GPUs are not measured: no DCGM series, never a made-up 0."""
    promtool()
    a = Agent(server.url, server.token, "decl", tmp_path / "decl", extra=["--metrics-public"])
    try:
        text = wait_daemon("http://%s/metrics" % a.addr, a.proc, "agent")
        lint(text, "agent (declared GPUs)")
        assert "DCGM_FI_DEV" not in text
        assert sample(text, "starcloud_agent_gpus", source="declared") == [2]
    finally:
        a.stop()
