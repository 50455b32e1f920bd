#!/usr/bin/env python3
"""Pods bound per second against a real kube-apiserver: `starcloud k8s`
versus the stock kube-scheduler built from the same Debian source tree, on
the same world, alternating, in one run (docs/BENCHMARKS.md).

Each run starts a fresh etcd + kube-apiserver (tests/e2e/kube_util.py),
creates N nodes (8 nvidia.com/gpu, 64 cores, 512Gi each) and P pending pods
(80 % one GPU + 4 cores + 16Gi, 20 % CPU only: 2 cores + 4Gi; everything
fits), then starts one scheduler and times from its start to the last
binding, counted on a watch of the pods; the Scheduled Events are counted on
a watch too (a scheduler may write them after its bindings), and CPU seconds
of the scheduler and the API server (up to the last Event) are reported. No kubelet: bound pods stay
Pending, for both schedulers alike.

  bench/k8s_bench.py [--nodes 1000] [--pods 10000] [--rounds 2]
                     [--kube-qps 5000 --kube-burst 10000]

Prints one JSON line per run and a summary with the ratio."""
import argparse
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
os.environ.setdefault("STARCLOUD_BIN", os.path.join(ROOT, "build", "starcloud"))

import kube_util  # noqa: E402
from conftest import BIN, free_port  # noqa: E402


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def parallel(fn, items, workers=24):
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        for r in ex.map(fn, items):
            if r is not None and not r.ok and r.status_code != 409:
                raise RuntimeError(r.text[:300])


def build_world(kube, nodes, pods, scheduler):
    def node(i):
        kube.add_node("node-%04d" % i, gpus=8, cpu="64", memory="512Gi",
                      labels={"rack": "r%d" % (i // 40)}, model="A100-80GB")
    parallel(node, range(nodes))

    def pod(i):
        gpu = i % 5 != 4
        return kube.pod("p-%05d" % i, gpus=1 if gpu else 0, cpu="4" if gpu else "2",
                        memory="16Gi" if gpu else "4Gi", scheduler=scheduler, check=False)
    parallel(pod, range(pods))


class Counter(threading.Thread):
    """Counts, on a watch started before the scheduler, the pods that got
    a node (kind "pods") or the Scheduled Events written (kind "events");
    `times` holds when each was seen."""

    def __init__(self, kube, rv, want, kind="pods"):
        super().__init__(daemon=True)
        self.kube, self.rv, self.want, self.kind = kube, rv, want, kind
        self.seen = set()
        self.times = []
        self.done = threading.Event()

    def counts(self, obj):
        if self.kind == "pods":
            return bool(obj.get("spec", {}).get("nodeName"))
        return obj.get("reason") == "Scheduled"

    def key(self, obj):
        if self.kind == "pods":
            return obj.get("metadata", {}).get("name")
        return obj.get("involvedObject", {}).get("name")

    def run(self):
        try:
            self.watch()
        except Exception:  # noqa: BLE001 (the API server stops at the end of a run)
            pass

    def watch(self):
        url = "%s/api/v1/%s?watch=1&resourceVersion=%s&timeoutSeconds=3600" % (
            self.kube.url, self.kind, self.rv)
        with self.kube.s.get(url, stream=True, timeout=3700) as r:
            for line in r.iter_lines():
                if not line:
                    continue
                obj = json.loads(line).get("object", {})
                k = self.key(obj)
                if self.counts(obj) and k not in self.seen:
                    self.seen.add(k)
                    self.times.append(time.time())
                    if len(self.seen) >= self.want:
                        self.done.set()
                        return


def one_run(kind, args, tmp):
    kube = kube_util.Kube(tmp).start()
    try:
        kube.install()
        scheduler = "starcloud" if kind == "starcloud" else "default-scheduler"
        t = time.time()
        build_world(kube, args.nodes, args.pods, scheduler)
        setup = time.time() - t
        rv = kube.api("GET", "/api/v1/pods?limit=1").json()["metadata"]["resourceVersion"]
        watch = Counter(kube, rv, args.pods)
        events = Counter(kube, rv, args.pods, "events")
        watch.start()
        events.start()
        time.sleep(0.5)
        cfg = kube.kubeconfig(kube.admin_token)
        log = open(os.path.join(tmp, kind + ".log"), "w")
        if kind == "starcloud":
            cmd = [BIN, "k8s", "--kubeconfig", cfg] + args.starcloud_args.split()
        else:
            cmd = [kube_util.kube_binary("kube-scheduler"), "--kubeconfig", cfg,
                   "--leader-elect=false", "--port=0", "--secure-port=%d" % free_port(),
                   "--bind-address=127.0.0.1", "--authentication-kubeconfig", cfg,
                   "--authorization-kubeconfig", cfg,
                   "--kube-api-qps=%d" % args.kube_qps, "--kube-api-burst=%d" % args.kube_burst,
                   "--v=0"]
        api_cpu0 = cpu_seconds(kube.proc.pid)
        t0 = time.time()
        proc = subprocess.Popen(cmd, stdout=log, stderr=log)
        finished = watch.done.wait(args.timeout)
        t_end = watch.times[-1] if watch.times else time.time()
        events_then = len([t for t in events.times if t <= t_end])
        # The Events (one Scheduled per pod) may trail the bindings: wait
        # for them a while, to know what the run really cost.
        events.done.wait(args.events_wait)
        t_events = events.times[-1] - t0 if events.done.is_set() else None
        sched_cpu = cpu_seconds(proc.pid) if proc.poll() is None else float("nan")
        api_cpu = cpu_seconds(kube.proc.pid) - api_cpu0
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        stats = ""
        if kind == "starcloud":
            with open(os.path.join(tmp, kind + ".log")) as f:
                lines = [ln for ln in f if "cycles" in ln]
            stats = lines[-1].split("k8s: ", 1)[-1].strip() if lines else ""
        n = len(watch.seen)
        first = watch.times[0] - t0 if watch.times else float("nan")
        res = {"scheduler": kind, "nodes": args.nodes, "pods": args.pods, "bound": n,
               "complete": bool(finished), "seconds": round(t_end - t0, 2),
               "pods_per_s": round(n / (t_end - t0), 1) if n else 0.0,
               "first_binding_s": round(first, 2),
               "events_at_last_binding": events_then,
               "all_events_s": round(t_events, 2) if t_events is not None else None,
               "scheduler_cpu_s": round(sched_cpu, 1),
               "apiserver_cpu_s": round(api_cpu, 1), "setup_s": round(setup, 1),
               "load": round(os.getloadavg()[0], 1)}
        if stats:
            res["stats"] = stats
        print(json.dumps(res), flush=True)
        return res
    finally:
        kube.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kube-qps", type=int, default=5000)
    ap.add_argument("--kube-burst", type=int, default=10000)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--events-wait", type=float, default=120,
                    help="seconds to wait after the last binding for every Scheduled Event")
    ap.add_argument("--schedulers", default="starcloud,kube-scheduler",
                    help="which to run, in this order each round")
    ap.add_argument("--starcloud-args", default="",
                    help="extra flags for starcloud k8s (space separated)")
    args = ap.parse_args()
    build = subprocess.run([os.path.join(ROOT, "scripts", "kube-build.sh"), "kube-apiserver",
                            "kube-scheduler"], capture_output=True, text=True)
    if build.returncode != 0:
        sys.exit("k8s_bench: cannot build the API server: " + build.stderr.strip())
    print("# %s, %d cores, load %.1f" % (time.strftime("%Y-%m-%d %H:%M"), os.cpu_count(),
                                         os.getloadavg()[0]), flush=True)
    results = []
    for r in range(args.rounds):
        for kind in args.schedulers.split(","):
            with tempfile.TemporaryDirectory(prefix="k8s-bench-") as tmp:
                results.append(one_run(kind, args, tmp))
    rate = {k: [x["pods_per_s"] for x in results if x["scheduler"] == k]
            for k in ("starcloud", "kube-scheduler")}
    mean = {k: sum(v) / len(v) if v else 0 for k, v in rate.items()}
    print(json.dumps({"summary": {"starcloud_pods_per_s": rate["starcloud"],
                                  "kube_scheduler_pods_per_s": rate["kube-scheduler"],
                                  "ratio": round(mean["starcloud"] / mean["kube-scheduler"], 2)
                                  if mean["kube-scheduler"] else None}}))


if __name__ == "__main__":
    main()
