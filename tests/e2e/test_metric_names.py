"""Every metric named by the alert rules (deploy/prometheus/rules) and the
Grafana dashboards (deploy/grafana) exists in a real server's /metrics, or,
for starcloud_gateway_*, in a real gateway's (which must also be listed in
deploy/prometheus/gateway-metrics.txt), or, for starcloud_agent_* and the
DCGM_* device figures, in a real agent's (with the fake NVML)."""
import glob
import json
import os
import re
import subprocess
import time

import pytest
import requests
import yaml

from conftest import BIN, ROOT, free_port, job, node, queue

NAME = re.compile(r"\b(?:starcloud_[a-z0-9_]+|DCGM_FI_[A-Z_]+)")
GATEWAY = "starcloud_gateway_"
AGENT = ("starcloud_agent_", "DCGM_FI_")
HIST = ("_bucket", "_sum", "_count")


def referenced():
    """{metric name: [files using it]} from rules and dashboards."""
    refs = {}

    def add(text, where):
        for m in NAME.findall(text):
            refs.setdefault(m, set()).add(where)

    for path in glob.glob(os.path.join(ROOT, "deploy/prometheus/rules/*.yml")):
        for g in yaml.safe_load(open(path))["groups"]:
            for r in g["rules"]:
                add(r["expr"], os.path.relpath(path, ROOT))

    def walk(o, where):
        if isinstance(o, dict):
            for k, v in o.items():
                if k in ("expr", "query", "definition") and isinstance(v, str):
                    add(v, where)
                else:
                    walk(v, where)
        elif isinstance(o, list):
            for v in o:
                walk(v, where)

    for path in glob.glob(os.path.join(ROOT, "deploy/grafana/*.json")):
        walk(json.load(open(path)), os.path.relpath(path, ROOT))
    return refs


def exposed(text):
    """Sample names a /metrics page can carry: samples, plus the families
    declared by # TYPE (a histogram's _bucket/_sum/_count included)."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(None, 3)
            names.add(name)
            if typ.strip() in ("histogram", "summary"):
                names.update(name + s for s in HIST)
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, 1)[0])
    return names


def base(name):
    for s in HIST:
        if name.endswith(s):
            return name[: -len(s)]
    return name


def gateway_list():
    path = os.path.join(ROOT, "deploy/prometheus/gateway-metrics.txt")
    return {line.split("#")[0].strip() for line in open(path)} - {""}


def test_rules_and_dashboards_use_server_metrics(server, admin):
    # Some objects, so labelled series have samples too.
    admin.post(admin.base + "/nodes", json=node("n0"))
    admin.post(admin.base + "/queues", json=queue("team-a"))
    admin.post(admin.base + "/jobs", json=job("j0"))
    time.sleep(1.5)  # one scheduling period
    have = exposed(admin.get(server.url + "/metrics").text)
    refs = referenced()
    assert refs, "no metric referenced: rules or dashboards not found"
    missing = {m: sorted(w) for m, w in refs.items()
               if not m.startswith((GATEWAY,) + AGENT) and m not in have}
    assert not missing, "metrics used but not in the server's /metrics: %s" % missing


def test_gateway_metrics_are_listed():
    listed = gateway_list()
    unlisted = {m: sorted(w) for m, w in referenced().items()
                if m.startswith(GATEWAY) and base(m) not in listed}
    assert not unlisted, ("gateway metrics used but not listed in "
                          "deploy/prometheus/gateway-metrics.txt: %s" % unlisted)


def has_gateway():
    try:
        r = subprocess.run([BIN, "gateway", "--help"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def test_gateway_exposes_listed_metrics(server):
    if not has_gateway():
        pytest.skip("this build has no `starcloud gateway`; the names in "
                    "deploy/prometheus/gateway-metrics.txt are expected from it")
    port = free_port()
    # A static backend nobody listens on: the per-model series exist for it.
    proc = subprocess.Popen([BIN, "gateway", "--listen", "127.0.0.1:%d" % port,
                             "--server", server.url, "--token", server.token,
                             "--probe-interval", "0", "--backend",
                             "model=tiny,version=1,url=http://127.0.0.1:%d" % free_port()],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        text = None
        deadline = time.time() + 30
        while time.time() < deadline and text is None:
            if proc.poll() is not None:
                pytest.fail("gateway exited: %s" % proc.stderr.read())
            try:
                r = requests.get("http://127.0.0.1:%d/metrics" % port, timeout=1)
                text = r.text if r.ok else None
            except requests.ConnectionError:
                time.sleep(0.1)
        assert text is not None, "gateway did not serve /metrics"
        have = exposed(text)
        missing = sorted(gateway_list() - {base(n) for n in have})
        assert not missing, "listed gateway metrics missing from its /metrics: %s" % missing
        used = {m: sorted(w) for m, w in referenced().items()
                if m.startswith(GATEWAY) and m not in have}
        assert not used, "gateway metrics used but not in its /metrics: %s" % used
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_agent_exposes_used_metrics(server, admin, tmp_path):
    """starcloud_agent_* and DCGM_* names used by rules and dashboards come
    from a real agent (the fake NVML stands in for the driver)."""
    from agent_util import Agent, metrics_secret, wait_for
    lib = str(tmp_path / "libfake-nvml.so")
    secret, auth = metrics_secret(tmp_path)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", lib,
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_nvml.c")],
                   check=True)
    a = Agent(server.url, server.token, "m1", tmp_path / "m1", gpus=None,
              extra=["--nvml-lib", lib, "--metrics-token-file", secret])
    try:
        text = wait_for(lambda: _get("http://%s/metrics" % a.addr, auth),
                        what="agent /metrics")
        have = exposed(text)
        used = {m: sorted(w) for m, w in referenced().items()
                if m.startswith(AGENT) and m not in have}
        assert not used, "agent metrics used but not in its /metrics: %s" % used
    finally:
        a.stop()


def _get(url, headers=None):
    try:
        r = requests.get(url, timeout=1, headers=headers)
        return r.text if r.ok else None
    except requests.RequestException:
        return None
