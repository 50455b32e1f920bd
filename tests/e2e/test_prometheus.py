"""A real Prometheus (Debian's `prometheus` package, installed by
scripts/deps.sh) scrapes the server's /metrics: the text format must parse
and the scheduler's series must be queryable. Prometheus runs on 127.0.0.1
on a free port with a temporary configuration and data folder."""
import os
import shutil
import subprocess
import time

import pytest
import requests

from conftest import free_port, job, node, queue

PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None)


@pytest.fixture
def prometheus(server, tmp_path):
    if not PROMETHEUS:
        if os.environ.get("CI") == "true":
            pytest.fail("prometheus is missing under CI: scripts/deps.sh must install it")
        pytest.skip("prometheus is not installed (apt-get install prometheus, or scripts/deps.sh)")
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("""\
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
- job_name: starcloud
  metrics_path: /metrics
  static_configs: [{targets: ['127.0.0.1:%d']}]
""" % server.port)
    log = open(tmp_path / "prometheus.log", "w")
    proc = subprocess.Popen(
        [PROMETHEUS, "--config.file=%s" % cfg, "--storage.tsdb.path=%s" % (tmp_path / "tsdb"),
         "--web.listen-address=127.0.0.1:%d" % port],
        stdout=log, stderr=subprocess.STDOUT)
    yield "http://127.0.0.1:%d" % port
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def query(base, expr):
    try:
        r = requests.get(base + "/api/v1/query", params={"query": expr}, timeout=2)
    except requests.RequestException:
        return []
    if r.status_code != 200:
        return []
    return r.json()["data"]["result"]


def test_prometheus_scrapes_scheduler_metrics(server, admin, prometheus):
    admin.post(admin.base + "/nodes", json=node("n0"))
    admin.post(admin.base + "/queues", json=queue("team-a"))
    admin.post(admin.base + "/jobs", json=job("j", gpus=2))
    deadline = time.time() + 60
    got = {}
    exprs = {
        "up": 'up{job="starcloud"}',
        "alloc": 'starcloud_queue_allocated_gpus{queue="team-a"}',
        "cycles": "starcloud_schedule_cycle_duration_seconds_count",
        "placements": "starcloud_placements_total",
    }
    while time.time() < deadline and len(got) < len(exprs):
        for k, e in exprs.items():
            res = query(prometheus, e)
            if res and float(res[0]["value"][1]) > 0:
                got[k] = float(res[0]["value"][1])
        time.sleep(0.5)
    assert got.get("up") == 1, "scrape failed (see the target's lastError): %s" % got
    assert got.get("alloc") == 2 and got.get("placements", 0) >= 1, got
    assert got.get("cycles", 0) >= 1, got
