"""A real Prometheus (Debian's `prometheus` package, installed by
scripts/deps.sh) scrapes the server's /metrics: the text format must parse
and the scheduler's series must be queryable. Prometheus runs on 127.0.0.1
on a free port with a temporary configuration and data folder."""
import time

import pytest
import requests

from conftest import job, node, queue
from prom_util import running_prometheus



@pytest.fixture
def prometheus(server, admin, tmp_path):
    # /metrics takes a viewer token; Prometheus reads it from a file, as
    # deploy/prometheus/prometheus.yml does.
    tok = admin.post(admin.base + "/tokens", json={"role": "viewer"}).json()["token"]
    tfile = tmp_path / "viewer.token"
    tfile.write_text(tok + "\n")
    tfile.chmod(0o600)
    with running_prometheus(tmp_path, """\
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
- job_name: starcloud
  metrics_path: /metrics
  authorization: {credentials_file: '%s'}
  static_configs: [{targets: ['127.0.0.1:%d']}]
""" % (tfile, server.port)) as base:
        yield base


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
