#!/usr/bin/env python3
"""Node agent benchmarks (docs/BENCHMARKS.md), against a real server and
real agents on 127.0.0.1, with the agent's DEFAULT timing unless stated:

  failover   kill a node (its agent and its pods, SIGKILL) -> its gang is
             Running again on other nodes with live processes; p50/p99 over
             --trials (default 20). Default lease: 2 s, renewed every 667 ms.
  liveness   a liveness probe starts failing -> the new process runs
             (exec probe, periodSeconds 1, failureThreshold 1, back-off fixed
             at 100 ms so the number is the agent's reaction, not the
             configured back-off); includes up to one probe period.
  footprint  one agent running --pods (default 100) pods: its RSS and CPU
             share over --seconds (default 30).

usage: bench/agent_bench.py [--bin build/starcloud] [all|failover|liveness|footprint]"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import conftest  # noqa: E402  (Server, free_port, manifest)


def wait_for(fn, timeout=60.0, what="condition", step=0.05):
    """conftest's, with a bench's longer default deadline."""
    return conftest.wait_for(fn, timeout, what, step)


def env_pids(**want):
    """{pid: env} of live processes whose environment has every k=v."""
    need = [("%s=%s" % kv).encode() for kv in want.items()]
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
            with open("/proc/%s/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] in "ZX":
                    continue
        except OSError:
            continue
        if all(n in env for n in need):
            out[int(pid)] = dict(e.decode(errors="replace").split("=", 1)
                                 for e in env if b"=" in e)
    return out


class Cluster:
    def __init__(self, binary, tmp):
        conftest.BIN = binary
        self.bin, self.tmp = binary, tmp
        self.srv = conftest.Server(os.path.join(tmp, "server")).start()
        self.srv.read_admin_token()
        self.s = self.srv.session()
        self.agents = {}
        r = self.s.post(self.s.base + "/queues", json=conftest.manifest(
            "Queue", "q", {"resources": {"gpu": {"quota": 64}}}))
        assert r.status_code == 201, r.text

    def start_agent(self, name, gpus="1xA100-80GB", extra=()):
        d = os.path.join(self.tmp, name + "-%d" % random.randint(0, 1 << 30))
        log = open(d + ".log", "w")
        args = [self.bin, "agent", "--server", self.srv.url, "--token", self.srv.token,
                "--name", name, "--listen", "127.0.0.1:%d" % conftest.free_port(),
                "--data-dir", d] + (["--gpus", gpus] if gpus else []) + list(extra)
        self.agents[name] = subprocess.Popen(args, stdout=log, stderr=log)
        return self.agents[name]

    def node_ready(self, name):
        r = self.s.get(self.s.base + "/nodes/" + name)
        return r.ok and r.json().get("status", {}).get("ready") is True

    def pods(self, job):
        r = self.s.get(self.s.base + "/jobs/" + job)
        return {p["name"]: p for p in r.json().get("status", {}).get("pods", [])} if r.ok else {}

    def run_job(self, name, command, replicas=1, gpu=0, spec_extra=None, **task_extra):
        task = {"name": "main", "replicas": replicas, "command": command,
                "resources": {"cpu": "10m", "memory": "1Mi"}}
        if gpu:
            task["resources"]["gpu"] = gpu
        task.update(task_extra)
        r = self.s.post(self.s.base + "/jobs", json=conftest.manifest(
            "Job", name, dict({"queue": "q", "restartPolicy": "Always", "tasks": [task]},
                              **(spec_extra or {}))))
        assert r.status_code == 201, r.text

    def kill_node(self, name):
        self.agents[name].send_signal(signal.SIGKILL)
        self.agents[name].wait()
        for pid in env_pids(STARCLOUD_NODE=name):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self):
        for p in self.agents.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
        for pid in env_pids(STARCLOUD_QUEUE_BENCH="1"):
            os.kill(pid, signal.SIGKILL)
        self.srv.stop()


def bench_dir():
    """A fresh folder for a run: 0711, as pods run as their own uids and
    pass through it to their folders (mkdtemp makes it 0700)."""
    tmp = tempfile.mkdtemp(prefix="sc-agent-bench-")
    os.chmod(tmp, 0o711)
    return tmp


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def summary(xs):
    return {"n": len(xs), "p50": round(pct(xs, 50), 3), "p99": round(pct(xs, 99), 3),
            "min": round(min(xs), 3), "max": round(max(xs), 3)}


def failover(binary, trials):
    tmp = bench_dir()
    c = Cluster(binary, tmp)
    times = []
    try:
        for n in ("b0", "b1", "b2"):
            c.start_agent(n, extra=["--drain"])
        wait_for(lambda: all(c.node_ready(n) for n in ("b0", "b1", "b2")), what="nodes")
        c.run_job("gang", ["sleep", "100000"], replicas=2, gpu=1,
                  env={"STARCLOUD_QUEUE_BENCH": "1"})
        names = ("gang-main-0", "gang-main-1")

        def placed(exclude=None):
            ps = c.pods("gang")
            nodes = [ps.get(n, {}).get("node") if ps.get(n, {}).get("phase") == "Running"
                     else None for n in names]
            if not all(nodes) or exclude in nodes:
                return None
            for n, node in zip(names, nodes):
                live = env_pids(STARCLOUD_POD=n)
                if len(live) != 1 or list(live.values())[0]["STARCLOUD_NODE"] != node:
                    return None
            return nodes
        for t in range(trials):
            nodes = wait_for(placed, what="gang running")
            victim = nodes[0]
            time.sleep(random.uniform(0, 0.7))  # any phase of the heartbeat
            t0 = time.time()
            c.kill_node(victim)
            wait_for(lambda: placed(exclude=victim), timeout=60, what="gang moved")
            times.append(time.time() - t0)
            print("failover trial %d: %.2f s" % (t + 1, times[-1]), flush=True)
            c.start_agent(victim, extra=["--drain"])
            wait_for(lambda: c.node_ready(victim), what="node back")
    finally:
        c.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return summary(times)


def pod_procs(pod):
    """Pids of the pod's own process (exec probes carry the pod's
    environment too, so they are told apart by their command)."""
    out = []
    for pid in env_pids(STARCLOUD_POD=pod):
        try:
            with open("/proc/%d/comm" % pid) as f:
                if f.read().strip() in ("sh", "sleep"):
                    out.append(pid)
        except OSError:
            pass
    return out


def liveness(binary, trials):
    tmp = bench_dir()
    c = Cluster(binary, tmp)
    times = []
    try:
        # A fixed 100 ms back-off (base = max) and a high backoffLimit: every
        # trial measures the same thing, not the back-off's growth.
        c.start_agent("l0", gpus=None, extra=["--drain", "--backoff-base", "100ms",
                                              "--backoff-max", "100ms"])
        wait_for(lambda: c.node_ready("l0"), what="node")
        c.run_job("live", ["sh", "-c", "touch alive; exec sleep 100000"],
                  env={"STARCLOUD_QUEUE_BENCH": "1"}, spec_extra={"backoffLimit": 1000},
                  probes={"liveness": {"exec": {"command": ["test", "-f", "alive"]},
                                       "periodSeconds": 1, "failureThreshold": 1}})
        for t in range(trials):
            def one():
                live = pod_procs("live-main-0")
                if len(live) != 1:
                    return None
                pid = live[0]
                env = env_pids(STARCLOUD_POD="live-main-0").get(pid)
                if not env:
                    return None
                alive = os.path.join(env["HOME"], "alive")
                return (pid, alive) if os.path.exists(alive) else None
            pid, alive = wait_for(one, what="pod running")
            time.sleep(random.uniform(0, 1.0))
            t0 = time.time()
            os.unlink(alive)
            wait_for(lambda: [p for p in pod_procs("live-main-0") if p != pid],
                     what="restart")
            times.append(time.time() - t0)
            print("liveness trial %d: %.2f s" % (t + 1, times[-1]), flush=True)
    finally:
        c.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return summary(times)


def proc_cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def footprint(binary, npods, seconds):
    tmp = bench_dir()
    c = Cluster(binary, tmp)
    try:
        a = c.start_agent("f0", gpus=None, extra=["--drain", "--cpu", "64", "--memory",
                                                  "256Gi"])
        wait_for(lambda: c.node_ready("f0"), what="node")
        c.run_job("many", ["sleep", "100000"], replicas=npods,
                  env={"STARCLOUD_QUEUE_BENCH": "1"})
        t0 = time.time()
        wait_for(lambda: len(env_pids(STARCLOUD_JOB="many")) == npods, timeout=120,
                 step=0.2, what="%d pods" % npods)
        started = time.time() - t0
        time.sleep(5)
        cpu0, w0 = proc_cpu_seconds(a.pid), time.time()
        rss = []
        while time.time() - w0 < seconds:
            rss.append(proc_rss_kib(a.pid))
            time.sleep(1)
        cpu = (proc_cpu_seconds(a.pid) - cpu0) / (time.time() - w0) * 100
        return {"pods": npods, "start_all_s": round(started, 2),
                "rss_mib_max": round(max(rss) / 1024, 2),
                "rss_mib_mean": round(sum(rss) / len(rss) / 1024, 2),
                "cpu_pct_of_one_core": round(cpu, 3), "seconds": seconds}
    finally:
        c.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", nargs="?", default="all",
                    choices=["all", "failover", "liveness", "footprint"])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "starcloud"))
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--pods", type=int, default=100)
    ap.add_argument("--seconds", type=int, default=30)
    o = ap.parse_args()
    binary = os.path.abspath(o.bin)
    out = {}
    if o.what in ("all", "failover"):
        out["failover_s"] = failover(binary, o.trials)
        print(json.dumps({"failover_s": out["failover_s"]}), flush=True)
    if o.what in ("all", "liveness"):
        out["liveness_restart_s"] = liveness(binary, o.trials)
        print(json.dumps({"liveness_restart_s": out["liveness_restart_s"]}), flush=True)
    if o.what in ("all", "footprint"):
        out["footprint"] = footprint(binary, o.pods, o.seconds)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
