"""The shipped monitoring against a real Prometheus (Debian's package):
deploy/prometheus/prometheus.yml's jobs and rules (only the targets and the
intervals changed) scrape a real server, an agent on the fake NVML and a
gateway with a worker behind it. Then:
- every expression of every deploy/grafana dashboard runs in Prometheus
  without error, with its variables as Grafana would fill them, and the
  panels the issue asks for (GPU utilisation per node and per queue, queue
  allocation, requests per model) return the series of this cluster;
- each dashboard variable's label_values() finds this cluster's values;
- the rules load healthy, and a stopped gateway, then a stopped server, set
  off StarcloudGatewayDown and StarcloudServerDown (pending: their `for`
  is a minute), which only happens when the rules' job names and `up`
  match what Prometheus really scrapes."""
import json
import os
import re
import subprocess
import time

import pytest
import requests
import yaml

from agent_util import Agent, metrics_secret, run_job, setup_queue, wait_for
from conftest import BIN, CKPT_MICRO, free_port, gen_checkpoint, stop_process, wait_daemon
from prom_util import running_prometheus

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DEPLOY = os.path.join(ROOT, "deploy")
FAKE_NVML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_nvml.c")


def query(base, expr):
    """(status, result) of an instant query; status "error" with the
    message when Prometheus refuses the expression."""
    r = requests.get(base + "/api/v1/query", params={"query": expr}, timeout=5)
    doc = r.json()
    if doc.get("status") != "success":
        return "error", doc.get("error", r.text)
    return "success", doc["data"]["result"]


def label_values(base, label, match):
    r = requests.get(base + "/api/v1/label/%s/values" % label, params={"match[]": match},
                     timeout=5)
    assert r.ok, r.text
    return r.json()["data"]


def wait_ready(base, log):
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if requests.get(base + "/-/ready", timeout=1).ok:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    pytest.fail("Prometheus not ready: %s" % log.read_text()[-3000:])


def shipped_config(targets, token_file, agent_secret):
    """deploy/prometheus/prometheus.yml with the test's targets, 1 s
    intervals and the rules file by its absolute path; nothing else
    changes (job names, paths)."""
    with open(os.path.join(DEPLOY, "prometheus", "prometheus.yml")) as f:
        cfg = yaml.safe_load(f)
    cfg["global"]["scrape_interval"] = "1s"
    cfg["global"]["evaluation_interval"] = "1s"
    cfg["rule_files"] = [os.path.join(DEPLOY, "prometheus", r) for r in cfg["rule_files"]]
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert set(targets) <= set(jobs), "the shipped config lacks %s" % (set(targets) - set(jobs))
    for name, addr in targets.items():
        jobs[name]["static_configs"] = [{"targets": [addr]}]
    # The server's /metrics may need a token: the test's own file, where the
    # shipped config names one under /etc (or names none). The agents' take
    # their scrape secret (never a Starcloud token), from its own file.
    for job in jobs.values():
        if job["job_name"] == "starcloud-agent":
            assert "authorization" in job, "the shipped config scrapes agents without a secret"
            job["authorization"] = {"credentials_file": str(agent_secret)}
        elif "authorization" in job or job["job_name"] == "starcloud-server":
            job["authorization"] = {"credentials_file": str(token_file)}
    return yaml.safe_dump(cfg)


def dashboard_exprs():
    """(file, panel title, expr) of every target of every dashboard, and
    each dashboard's variables (name -> label_values query)."""
    out, variables = [], {}
    for name in sorted(os.listdir(os.path.join(DEPLOY, "grafana"))):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(DEPLOY, "grafana", name)) as f:
            d = json.load(f)
        for v in d.get("templating", {}).get("list", []):
            variables.setdefault(name, {})[v["name"]] = v.get("query")

        def walk(panels):
            for p in panels:
                walk(p.get("panels", []))
                for t in p.get("targets", []):
                    if t.get("expr"):
                        out.append((name, p.get("title"), t["expr"]))
        walk(d.get("panels", []))
    return out, variables


def fill(expr):
    """Grafana's substitution for "All" on a multi-value variable (a regex
    matching anything) and its built-in intervals."""
    expr = re.sub(r"\$(instance|node|queue|model)\b", ".*", expr)
    return expr.replace("$__rate_interval", "1m").replace("$__interval", "15s")


@pytest.fixture
def stack(server, admin, tmp_path):
    """The server (fixture), an agent with two fake NVML devices, a worker
    and a gateway in front of it, and Prometheus scraping the three
    daemons with the shipped configuration. Yields a dict of them."""
    lib = str(tmp_path / "libfake-nvml.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, FAKE_NVML], check=True)
    secret, auth = metrics_secret(tmp_path)
    agent = Agent(server.url, server.token, "gpu1", tmp_path / "gpu1", gpus=None,
                  extra=["--nvml-lib", lib, "--metrics-token-file", secret])
    ckpt = tmp_path / "tiny.bin"
    gen_checkpoint(ckpt, **CKPT_MICRO)
    wport, gport = free_port(), free_port()
    log = open(tmp_path / "serving.log", "w")
    worker = subprocess.Popen([BIN, "worker", "--checkpoint", str(ckpt), "--model", "tiny",
                               "--listen", "127.0.0.1:%d" % wport], stdout=log, stderr=log)
    gateway = subprocess.Popen([BIN, "gateway", "--listen", "127.0.0.1:%d" % gport,
                                "--probe-interval", "0", "--backend",
                                "model=tiny,version=1,url=http://127.0.0.1:%d" % wport],
                               stdout=log, stderr=log)
    token_file = tmp_path / "prom-token"
    token_file.write_text(server.token)
    os.chmod(token_file, 0o600)
    try:
        wait_daemon("http://%s/metrics" % agent.addr, agent.proc, "agent", auth)
        wait_daemon("http://127.0.0.1:%d/v2/health/live" % wport, worker, "worker")
        wait_daemon("http://127.0.0.1:%d/metrics" % gport, gateway, "gateway")
        cfg = shipped_config({"starcloud-server": "127.0.0.1:%d" % server.port,
                              "starcloud-gateway": "127.0.0.1:%d" % gport,
                              "starcloud-agent": agent.addr}, token_file, secret)
        with running_prometheus(tmp_path, cfg) as base:
            wait_ready(base, tmp_path / "prometheus.log")
            yield {"prom": base, "server": server, "agent": agent, "gateway": gateway,
                   "gport": gport}
    finally:
        stop_process(gateway)
        stop_process(worker)
        agent.stop()
        log.close()


def up(base, job):
    st, res = query(base, 'up{job="%s"}' % job)
    return res[0]["value"][1] if st == "success" and res else None


def test_shipped_dashboards_and_alerts_on_real_prometheus(stack, admin):
    base = stack["prom"]
    setup_queue(admin, "research")
    run_job(admin, "train", ["sleep", "120"], gpu=1, q="research")
    r = requests.post("http://127.0.0.1:%d/v1/completions" % stack["gport"],
                      json={"model": "tiny", "prompt": "a", "max_tokens": 2}, timeout=30)
    assert r.status_code == 200, r.text
    for job in ("starcloud-server", "starcloud-gateway", "starcloud-agent"):
        wait_for(lambda: up(base, job) == "1", timeout=60, step=0.5,
                 what="Prometheus scraping %s (up == 1)" % job)

    # Every rule group of the shipped rules loaded and evaluates.
    rules = requests.get(base + "/api/v1/rules", timeout=5).json()["data"]["groups"]
    assert rules, "no rule group loaded"
    bad = [(g["name"], r["name"], r.get("lastError")) for g in rules for r in g["rules"]
           if r.get("health") not in ("ok", "unknown")]
    assert not bad, bad

    # The series the panels need, as Prometheus stored them.
    want = {
        "GPU utilisation per queue": ("queue", "research"),
        "GPU utilisation per node": ("Hostname", "gpu1"),
        "Allocated GPUs": ("queue", "research"),
        "Requests by model and version": ("model", "tiny"),
    }

    missing = []

    def panels_have_data():
        exprs, _ = dashboard_exprs()
        got = set()
        for _, title, expr in exprs:
            st, res = query(base, fill(expr))
            if title in want and st == "success":
                label, value = want[title]
                if any(s["metric"].get(label) == value for s in res):
                    got.add(title)
        missing[:] = sorted(set(want) - got)
        return not missing
    try:
        wait_for(panels_have_data, timeout=60, step=1, what="panels")
    except AssertionError:
        pytest.fail("dashboard panels without this cluster's series: %s" % missing)

    exprs, variables = dashboard_exprs()
    assert len(exprs) > 30, "dashboards lost their panels? %d expressions" % len(exprs)
    errors = []
    for name, title, expr in exprs:
        st, res = query(base, fill(expr))
        if st != "success":
            errors.append("%s / %s: %s: %s" % (name, title, expr, res))
    assert not errors, "\n".join(errors)

    # Each variable's label_values(METRIC{...}, LABEL) finds this cluster.
    expect = {"instance": None, "node": "gpu1", "queue": "research", "model": "tiny"}
    for name, vs in variables.items():
        for var, q in vs.items():
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q or "")
            assert m, "%s: variable %s: %r is not label_values(METRIC, LABEL)" % (name, var, q)
            vals = label_values(base, m.group(2), fill(m.group(1)))
            assert vals, "%s: variable %s (%s) finds nothing" % (name, var, q)
            if expect.get(var):
                assert expect[var] in vals, (name, var, vals)

    # Down targets set off the shipped alerts (pending for their minute).
    def alert(name):
        st, res = query(base, 'ALERTS{alertname="%s"}' % name)
        return res[0]["metric"]["alertstate"] if st == "success" and res else None
    assert alert("StarcloudGatewayDown") is None and alert("StarcloudServerDown") is None
    stop_process(stack["gateway"])
    wait_for(lambda: alert("StarcloudGatewayDown") in ("pending", "firing"), timeout=30,
             step=0.5, what="StarcloudGatewayDown after the gateway stopped")
    stack["server"].stop()
    wait_for(lambda: alert("StarcloudServerDown") in ("pending", "firing"), timeout=30,
             step=0.5, what="StarcloudServerDown after the server stopped")
