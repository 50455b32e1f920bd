"""A real Prometheus (Debian's package) on 127.0.0.1 scrapes a real server,
evaluates deploy/prometheus/rules, and fires the GPU-allocation alert once
the test has filled the cluster through the API and the scheduler has placed
the jobs. The rules' `for:` durations are set to 0 in the copy it loads
(their timing is covered by promtool test rules); the expressions are the
real ones."""
import os
import re
import time

import pytest
import requests

from conftest import ROOT, job, node, queue
from prom_util import running_prometheus

RULES = os.path.join(ROOT, "deploy/prometheus/rules/starcloud.rules.yml")


@pytest.fixture
def prometheus(server, admin, tmp_path):
    rules = tmp_path / "rules.yml"
    rules.write_text(re.sub(r"(?m)^(\s+)for: .*$", r"\1for: 0s", open(RULES).read()))
    # /metrics takes a viewer token, from a file as in deploy/prometheus.
    tfile = tmp_path / "viewer.token"
    tfile.write_text(admin.post(admin.base + "/tokens", json={"role": "viewer"}).json()["token"])
    tfile.chmod(0o600)
    with running_prometheus(tmp_path, """\
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: ['%s']
scrape_configs:
- job_name: starcloud-server
  authorization: {credentials_file: '%s'}
  static_configs: [{targets: ['127.0.0.1:%d']}]
""" % (rules, tfile, server.port)) as base:
        yield base


def firing(base):
    try:
        r = requests.get(base + "/api/v1/alerts", timeout=2)
    except requests.RequestException:
        return {}
    if not r.ok:
        return {}
    return {a["labels"]["alertname"]: a for a in r.json()["data"]["alerts"]
            if a["state"] == "firing"}


def scheduled(admin, name, timeout=10):
    """True once the server's scheduling loop has written the job's status."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = admin.get(admin.base + "/jobs/" + name).json().get("status") or {}
        if st.get("phase") or st.get("pods"):
            return True
        time.sleep(0.3)
    return False


def test_gpu_allocation_alert_fires(server, admin, prometheus):
    for n in ("n0", "n1"):
        assert admin.post(admin.base + "/nodes", json=node(n, 8)).status_code == 201
    assert admin.post(admin.base + "/queues", json=queue("team-a", 16)).status_code == 201
    # Before filling: nothing fires.
    time.sleep(3)
    assert "StarcloudGPUAllocationHigh" not in firing(prometheus)
    for i in range(2):
        r = admin.post(admin.base + "/jobs", json=job("fill-%d" % i, "team-a", gpus=8))
        assert r.status_code == 201, r.text
    if not scheduled(admin, "fill-0"):
        pytest.skip("the server has no scheduling loop yet (server2 branch): jobs are never "
                    "placed, so GPU allocation cannot rise; rule timing is covered by "
                    "promtool test rules")
    deadline = time.time() + 60
    alerts = {}
    while time.time() < deadline and "StarcloudGPUAllocationHigh" not in alerts:
        alerts = firing(prometheus)
        time.sleep(0.5)
    assert "StarcloudGPUAllocationHigh" in alerts, "alert did not fire; firing: %s" % list(alerts)
    assert alerts["StarcloudGPUAllocationHigh"]["labels"]["severity"] == "warning"
