#!/usr/bin/env python3
"""Serving autoscaling under a load step (issue 18, docs/BENCHMARKS.md).

A real server, --agents real agents, an autoscaled Deployment of real
`starcloud worker` replicas (model tiny, --latency-ms L: each request takes
about L ms, as a model's prefill would) and a real gateway with --server,
all on 127.0.0.1. Open-loop load (requests sent at fixed times, whatever
the answers do): --base requests/s for --warmup seconds, then a ramp to
--step x that rate over --ramp seconds (10x in 10 s by default), held for
--hold seconds. The gateway sheds with 429 above --max-inflight per replica.

Reported (one JSON line, and a table on stderr): the replicas the
autoscaler asked for and when, the time from the step's start until the
first request answered by a replica that did not exist before the step and
until every replica asked for served, requests sent, answered 200, shed
(429) and failed otherwise during the step, and the same after it settled.

usage: bench/autoscale_bench.py [--bin build/starcloud] [--base 5] [--step 10]
       [--ramp 10] [--warmup 15] [--hold 40] [--latency-ms 200] [--target 4]
       [--max-replicas 10] [--max-inflight 8] [--agents 3]"""
import argparse
import json
import os
import sys
import tempfile
import threading
import time

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import conftest  # noqa: E402
from agent_util import Agent  # noqa: E402
from gwutil import Procs  # noqa: E402
from test_serving import free_port as port_block  # noqa: E402


def wait_for(fn, timeout=60.0, what="condition", step=0.05):
    """conftest's, with a bench's longer default deadline."""
    return conftest.wait_for(fn, timeout, what, step)


class Load:
    """Open loop: request i is sent at its planned time by a pool of
    threads; answers are recorded with their send time and replica."""

    def __init__(self, url, threads=96):
        self.url = url
        self.plan = []
        self.results = []
        self.lock = threading.Lock()
        self.next = 0
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(threads)]

    def schedule(self, t0, base, step, warmup, ramp, hold):
        t, rate = 0.0, base
        end = warmup + ramp + hold
        while t < end:
            self.plan.append(t0 + t)
            if t < warmup:
                rate = base
            elif t < warmup + ramp:
                rate = base * (1 + (step - 1) * (t - warmup) / ramp)
            else:
                rate = base * step
            t += 1.0 / rate

    def take(self):
        with self.lock:
            if self.next >= len(self.plan):
                return None
            i = self.next
            self.next += 1
            return self.plan[i]

    def run(self):
        sess = requests.Session()
        while True:
            at = self.take()
            if at is None:
                return
            delay = at - time.time()
            if delay > 0:
                time.sleep(delay)
            sent = time.time()
            try:
                r = sess.post(self.url + "/v1/completions", timeout=30,
                              json={"model": "tiny", "prompt": "x", "max_tokens": 2})
                res = (at, sent, time.time(), r.status_code,
                       r.headers.get("x-starcloud-replica", ""))
            except requests.RequestException:
                res = (at, sent, time.time(), 0, "")
            with self.lock:
                self.results.append(res)

    def start(self):
        for t in self.threads:
            t.start()

    def join(self):
        for t in self.threads:
            t.join()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "starcloud"))
    ap.add_argument("--base", type=float, default=5)
    ap.add_argument("--step", type=float, default=10)
    ap.add_argument("--ramp", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=15)
    ap.add_argument("--hold", type=float, default=40)
    ap.add_argument("--latency-ms", type=int, default=200)
    ap.add_argument("--target", type=float, default=4)
    ap.add_argument("--max-replicas", type=int, default=10)
    ap.add_argument("--max-inflight", type=int, default=8)
    ap.add_argument("--agents", type=int, default=3)
    a = ap.parse_args()
    conftest.BIN = os.path.abspath(a.bin)
    import agent_util
    import gwutil
    agent_util.BIN = gwutil.BIN = conftest.BIN
    tmp = tempfile.mkdtemp(prefix="sc-autoscale-bench-")
    # Pods run as their own uids and pass through it to their folders;
    # their binary is a staged copy (a checkout may be closed to them).
    os.chmod(tmp, 0o711)
    srv = conftest.Server(os.path.join(tmp, "data")).start()
    srv.read_admin_token()
    s = srv.session()
    agents, procs = [], Procs(tmp)
    try:
        r = s.post(s.base + "/queues", json=conftest.manifest(
            "Queue", "q", {"resources": {"gpu": {"quota": 64}}}))
        assert r.status_code == 201, r.text
        for i in range(a.agents):
            agents.append(Agent(srv.url, srv.token, "n%d" % i, os.path.join(tmp, "a%d" % i)))
        port = port_block()
        tpl = {"command": [conftest.pod_program(conftest.BIN), "worker", "--listen", "127.0.0.1:$(STARCLOUD_PORT)",
                           "--model", "tiny", "--version", "1", "--latency-ms",
                           str(a.latency_ms)],
               "port": port, "resources": {"cpu": "100m", "memory": "64Mi"},
               "probes": {"readiness": {"http": {"path": "/v2/health/ready", "port": port},
                                        "periodSeconds": 1}}}
        d = conftest.manifest("Deployment", "llm", {
            "queue": "q", "model": "tiny", "version": "1", "template": tpl,
            "spreadFactor": a.agents,
            "autoscaling": {"minReplicas": 1, "maxReplicas": a.max_replicas,
                            "target": {"inflightPerReplica": a.target},
                            "scaleDownStabilization": "60s"}})
        r = s.post(s.base + "/deployments", json=d)
        assert r.status_code == 201, r.text

        def endpoints():
            st = s.get(s.base + "/deployments/llm").json().get("status", {})
            return [e for e in st.get("endpoints", []) if e.get("ready")]
        wait_for(lambda: len(endpoints()) == 1, 60, what="the first replica")
        gw = procs.gateway([], "--server", srv.url, "--token", srv.token,
                           "--max-inflight", str(a.max_inflight), "--timeout", "30s")
        wait_for(lambda: requests.post(gw.url + "/v1/completions", timeout=10, json={
            "model": "tiny", "prompt": "x", "max_tokens": 1}).status_code == 200, 30,
            what="the gateway serving")
        # Watch the Deployment: replicas asked for and ready, over time.
        timeline, stop = [], threading.Event()

        def watch():
            while not stop.is_set():
                st = s.get(s.base + "/deployments/llm").json().get("status", {})
                timeline.append((time.time(), st.get("autoscaling", {}).get("replicas"),
                                 len([e for e in st.get("endpoints", []) if e.get("ready")])))
                time.sleep(0.2)
        w = threading.Thread(target=watch, daemon=True)
        w.start()
        load = Load(gw.url)
        t0 = time.time() + 1
        load.schedule(t0, a.base, a.step, a.warmup, a.ramp, a.hold)
        load.start()
        load.join()
        stop.set()
        w.join()
        step_at = t0 + a.warmup
        res = sorted(load.results)
        before = {rep for (_, _, _, code, rep) in res if code == 200 and _ < step_at}
        first_new = min((done for (at, _, done, code, rep) in res
                         if code == 200 and at >= step_at and rep and rep not in before),
                        default=None)
        asked = max((n or 0) for (_, n, _) in timeline)
        t_asked = min((t for (t, n, _) in timeline if n == asked), default=None)
        t_all = min((t for (t, n, rdy) in timeline if t >= step_at and rdy >= asked),
                    default=None)
        served_by = {}
        for (at, _, done, code, rep) in res:
            if code == 200 and rep and rep not in served_by:
                served_by[rep] = done
        t_all_served = None
        if len(served_by) >= asked:
            t_all_served = sorted(served_by.values())[asked - 1]
        # Shedding: during the step (ramp start to all replicas serving)
        # and after it.
        settle = t_all_served or (t0 + a.warmup + a.ramp + a.hold)

        def count(lo, hi):
            part = [x for x in res if lo <= x[0] < hi]
            return {"sent": len(part), "ok": sum(1 for x in part if x[3] == 200),
                    "shed": sum(1 for x in part if x[3] == 429),
                    "failed": sum(1 for x in part if x[3] not in (200, 429))}
        rel = lambda t: None if t is None else round(t - step_at, 2)  # noqa: E731
        out = {"bench": "autoscale", "base_rps": a.base, "step": a.step, "ramp_s": a.ramp,
               "latency_ms": a.latency_ms, "target_inflight": a.target,
               "max_inflight": a.max_inflight, "replicas_before": len(before),
               "replicas_asked": asked, "asked_at_s": rel(t_asked),
               "first_new_replica_served_s": rel(first_new),
               "all_ready_s": rel(t_all), "all_served_s": rel(t_all_served),
               "warmup": count(t0, step_at), "until_served": count(step_at, settle),
               "after": count(settle, float("inf"))}
        print(json.dumps(out))
        print("replicas %d -> %d (asked %s s after the step began); first new replica "
              "served at %s s, all %d at %s s; shed %d of %d sent meanwhile, %d after"
              % (len(before), asked, out["asked_at_s"], out["first_new_replica_served_s"],
                 asked, out["all_served_s"], out["until_served"]["shed"],
                 out["until_served"]["sent"], out["after"]["shed"]), file=sys.stderr)
    finally:
        procs.stop()
        for ag in agents:
            ag.stop()
        srv.stop()
        conftest.remove_pod_programs()


if __name__ == "__main__":
    main()
