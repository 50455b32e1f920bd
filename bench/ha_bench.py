#!/usr/bin/env python3
"""HA benchmark (make bench-ha): apply throughput and apply-to-bound latency
on etcd versus SQLite, and leader failover time over N trials (kill -9 of
the leader -> another server reports leader in /readyz). Starts its own
etcd and servers on 127.0.0.1; prints one JSON object per measurement."""
import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
os.environ.setdefault("STARCLOUD_BIN", os.path.join(HERE, "..", "build", "starcloud"))

import requests  # noqa: E402
from conftest import Server, job, node, queue  # noqa: E402
from etcd_util import Etcd  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def apply_bench(srv, n):
    s = srv.session()
    s.post(s.base + "/queues", json=queue("team-a", 100000))
    for i in range(64):
        s.post(s.base + "/nodes", json=node("n%03d" % i))
    t0 = time.time()
    sent = {}
    for i in range(n):
        name = "b%05d" % i
        sent[name] = time.time()
        r = s.post(s.base + "/jobs", json=job(name))
        assert r.status_code == 201, r.text
    thr = n / (time.time() - t0)
    bound = {}
    deadline = time.time() + 120
    while len(bound) < n and time.time() < deadline:
        for j in s.get(s.base + "/jobs").json()["items"]:
            nm = j["metadata"]["name"]
            if nm not in bound and any(p.get("node") for p in j.get("status", {}).get("pods", [])):
                bound[nm] = time.time()
        time.sleep(0.01)
    # Polling the list adds up to one poll interval; it is small (10 ms +
    # one list) next to a cycle.
    lat = [bound[k] - sent[k] for k in bound]
    return thr, lat


def run_apply(backend, n, tmp):
    extra, etcd = [], None
    if backend == "etcd":
        etcd = Etcd(tmp + "/etcd-apply", 1)
        os.makedirs(etcd.tmp, exist_ok=True)
        etcd.start()
        extra = ["--store", etcd.store_url]
    srv = Server(tmp + "/apply-" + backend, extra).start()
    srv.read_admin_token()
    try:
        thr, lat = apply_bench(srv, n)
    finally:
        srv.stop()
        if etcd:
            etcd.stop()
    print(json.dumps({"bench": "apply", "store": backend, "jobs": n,
                      "apply_per_s": round(thr, 1),
                      "apply_to_bound_p50_ms": round(1000 * pct(lat, 50), 1),
                      "apply_to_bound_p99_ms": round(1000 * pct(lat, 99), 1)}), flush=True)


def leader_of(servers, exclude=None, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for s in servers:
            if s is exclude or s.proc.poll() is not None:
                continue
            try:
                if requests.get(s.url + "/readyz", timeout=0.5).json().get("leader"):
                    return s
            except (requests.RequestException, ValueError):
                pass
        time.sleep(0.02)
    raise RuntimeError("no leader")


def run_failover(trials, tmp):
    etcd = Etcd(tmp + "/etcd-fo", 3)
    os.makedirs(etcd.tmp, exist_ok=True)
    etcd.start()
    servers, times = [], []
    try:
        for i in range(3):
            s = Server("%s/fo-%d" % (tmp, i), ["--store", etcd.store_url]).start()
            servers.append(s)
        for t in range(trials):
            old = leader_of(servers)
            old.proc.send_signal(signal.SIGKILL)
            old.proc.wait()
            t0 = time.time()
            leader_of(servers, exclude=old)
            times.append(time.time() - t0)
            old.out.close()
            old.proc = None
            old.start()  # back as a follower for the next trial
    finally:
        for s in servers:
            if s.proc and s.proc.poll() is None:
                s.stop(signal.SIGKILL)
        etcd.stop()
    print(json.dumps({"bench": "failover", "trials": trials, "ttl_s": 5,
                      "p50_s": round(statistics.median(times), 2),
                      "p99_s": round(pct(times, 99), 2), "max_s": round(max(times), 2),
                      "all_s": [round(x, 2) for x in times]}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--trials", type=int, default=10)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("sqlite", "etcd"):
            run_apply(backend, a.jobs, tmp)
        run_failover(a.trials, tmp)


if __name__ == "__main__":
    main()
