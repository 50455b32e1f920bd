#!/usr/bin/python3
"""`make soak` / `starcloud bench soak`: the headline run (issue 23).

On this machine, on loopback: a server (embedded store), 8 agents with 8
declared A100-80GB each (2 in MIG mode), queues for inference, two training
teams under one department and notebooks; a Llama-style Deployment of the
reference worker, prefill/decode disaggregated, behind a gateway, under
open-loop traffic shaped like a day; training gangs from the Gavel trace,
elastic jobs and notebooks; and faults on a schedule. It writes one report
(report.md, the figures as JSON and gnuplot PNGs) and exits 1 when an
acknowledged object was lost, a pod ran twice, a daemon crashed or a fault
was not recovered. docs/BENCHMARKS.md ("The headline run") explains it.

  bench/soak/soak.py [--short] [--out DIR] [--bin build/starcloud] [--shared ../shared]
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cluster  # noqa: E402
import faults  # noqa: E402
import observe  # noqa: E402
import procs  # noqa: E402
import report  # noqa: E402
import traffic  # noqa: E402
import workload  # noqa: E402

# The two modes. Times are seconds after the workload starts; each fault
# also waits for the one before it to recover.
MODES = {
    "full": {"window": 540, "compress": 3000, "rps": (1.0, 9.0), "nb_rate": 0.9, "nb_life": 90,
             "faults": {"hang": 50, "kill_decode": 100, "flood": 150, "rollout": 215,
                        "kill_node": 290, "storm": 360, "restart_server": 470},
             "flood_jobs": 48, "flood_s": 90, "elastic_s": 240},
    # The short mode runs the node kill, the flood and a rollout together
    # (the storm) instead of one after the other.
    "short": {"window": 120, "compress": 3000, "rps": (1.0, 6.0), "nb_rate": 0.8, "nb_life": 45,
              "faults": {"hang": 10, "kill_decode": 20, "rollout": 32, "storm": 50,
                         "restart_server": 100},
              "flood_jobs": 40, "flood_s": 40, "elastic_s": 70},
}
RECOVERY_LIMIT = 60.0   # a fault not whole again by then is not recovered
BURST_CAP = 10.0        # requests/s: the flood faults' load step at most (Soak.burst)


def others_can_reach(path):
    """Whether a user other than its owner can pass through every folder
    above path (o+x), as a pod's uid must."""
    p = os.path.abspath(path)
    while p != "/":
        p = os.path.dirname(p)
        if not os.stat(p).st_mode & 0o001:
            return False
    return True


def log(msg):
    print("[soak %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


class Soak:
    def __init__(self, args):
        self.args = args
        self.mode = MODES["short" if args.short else "full"]
        self.bin = os.path.abspath(args.bin)
        self.shared = os.path.abspath(args.shared)
        self.out = os.path.abspath(args.out)
        self.root = os.path.join(self.out, "run")
        self.root_is_temp = False
        self.pod_bin = self.bin
        self.ledger = observe.Ledger()
        self.specs = {}          # job name -> spec, for everything submitted
        self.submitted = {}      # job name -> time the create was sent
        self.lock = threading.Lock()
        self.agents = {}
        self.server = self.gateway = None
        self.sampler = self.poller = self.traffic = self.submitter = None
        self.faults = []
        self.failures = []       # correctness failures: each fails the run
        self.events = []         # (t, text) for the timeline
        self._dep_cache = (0.0, None)
        self.pc_count = 0
        self.load_factor = 1.0   # burst(): the flood faults' load step

    # ---- API helpers --------------------------------------------------------

    def session(self):
        return self.server.session()

    def get(self, path, timeout=5):
        try:
            r = self.session().get(self.server.url + "/api/v1/" + path, timeout=timeout)
            return r.json() if r.ok else None
        except (OSError, ValueError, Exception):
            return None

    def get_deployment(self):
        t, d = self._dep_cache
        if time.time() - t < 0.2 and d is not None:
            return d
        d = self.get("deployments/llama")
        if d is not None:
            self._dep_cache = (time.time(), d)
        return d

    def get_node(self, name):
        return self.get("nodes/" + name)

    def nodes_ready(self):
        items = self.list_all("nodes")
        return len([n for n in items or [] if n.get("status", {}).get("ready")])

    def list_all(self, kind):
        """Every object of a kind, following metadata.continue."""
        out, cont = [], None
        for _ in range(10000):
            q = "?limit=500" + ("&continue=" + cont if cont else "")
            page = self.get(kind + q, timeout=30)
            if page is None:
                return None
            out.extend(page.get("items", []))
            cont = page.get("metadata", {}).get("continue")
            if not cont:
                return out
        return out

    def job_spec(self, name):
        return self.specs.get(name)

    def job_finished(self, name):
        j = self.get("jobs/" + name)
        return bool(j) and j.get("status", {}).get("phase") in ("Succeeded", "Failed")

    def submit(self, kind, obj):
        name = obj["metadata"]["name"]
        if kind == "jobs":
            with self.lock:
                self.specs[name] = obj["spec"]
                self.submitted[name] = time.time()
        return observe.create(self.session(), kind, obj, self.ledger)

    def delete(self, kind, name):
        if name:
            observe.delete(self.session(), kind, name, self.ledger)

    def ledger_count(self):
        with self.ledger.lock:
            return len(self.ledger.created)

    def patch_deployment(self, body):
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                r = self.session().patch(self.server.url + "/api/v1/deployments/llama",
                                         json=body, timeout=10)
                if r.ok:
                    self._dep_cache = (0.0, None)
                    return r.json()
                if r.status_code < 500:
                    raise RuntimeError("PATCH llama: %d %s" % (r.status_code, r.text[:300]))
            except OSError:
                pass
            except Exception as e:  # requests' own errors
                if isinstance(e, RuntimeError):
                    raise
            time.sleep(0.5)
        raise RuntimeError("PATCH llama: no answer for 60 s")

    def burst(self, factor):
        """A load step: the open-loop arrival rate times factor (1: the
        day's curve alone), but not above BURST_CAP requests/s (what this
        2-core machine serves beside everything else; a x3 step at the
        evening peak asked for 21/s and the run measured its CPUs, 12 % of
        requests timing out in prefill). The autoscaler answers it with
        replicas."""
        self.event("traffic x %g (at most %g/s)" % (factor, BURST_CAP) if factor != 1
                   else "traffic x 1")
        self.load_factor = factor

    def rate(self, t):
        W = self.mode["window"]
        lo, hi = self.mode["rps"]
        base = workload.daily_rate(min(t / W, 1.0), lo, hi)
        if self.load_factor == 1:
            return base
        return max(base, min(base * self.load_factor, BURST_CAP))

    def roll_out(self, version, fail_rate):
        tmpl = lambda role: workload.worker_template(self.pod_bin, self.port, role, version,  # noqa: E731
                                                     fail_rate)
        self.event("roll out version %s (fail rate %g)" % (version, fail_rate))
        # A merge patch: each role's autoscaling stays as it is.
        self.patch_deployment({"spec": {
            "version": version, "template": tmpl("decode"),
            "disaggregation": {"prefill": {"template": tmpl("prefill")},
                               "decode": {"template": tmpl("decode")}}}})

    def pc_writer(self, stop):
        """Creates PriorityClasses one after the other until stop is set."""
        s = self.session()
        while not stop.is_set():
            self.pc_count += 1
            obj = workload.meta("PriorityClass", "soak-pc-%05d" % self.pc_count,
                                {"value": 10, "preemptible": True})
            observe.create(s, "priorityclasses", obj, self.ledger, deadline_s=30)

    def traffic_open(self):
        return len([r for r in self.traffic.snapshot()[-400:] if r.end is None])

    def event(self, text):
        self.events.append((time.time(), text))
        log(text)

    # ---- set-up ---------------------------------------------------------------

    def setup(self):
        # Pods run as their own uids (docs/SECURITY.md): they must reach
        # the run folder (their agents' folders, the model) and the binary
        # they run. Below a folder closed to other users (a checkout in
        # `mktemp -d`, or in /root) the run folder moves to /tmp, and the
        # binary is always run from a copy in it.
        if not others_can_reach(self.out):
            self.root = tempfile.mkdtemp(prefix="starcloud-soak-run-")
            self.root_is_temp = True
            log("%s is below a folder other users cannot pass through, and pods run as "
                "their own users: the run folder is %s" % (self.out, self.root))
        elif os.path.exists(self.root):
            shutil.rmtree(self.root)
        os.makedirs(self.root, exist_ok=True)
        for d in (self.out, self.root):
            os.chmod(d, 0o755)
        bindir = os.path.join(self.root, "bin")
        os.makedirs(bindir)
        os.chmod(bindir, 0o755)
        self.pod_bin = os.path.join(bindir, "starcloud")
        shutil.copyfile(self.bin, self.pod_bin)
        os.chmod(self.pod_bin, 0o755)
        # The model: a Llama-shaped checkpoint (RMSNorm, RoPE, SwiGLU,
        # grouped-query attention) small enough for this machine's CPUs.
        mdir = os.path.join(self.root, "model")
        os.makedirs(mdir)
        os.chmod(mdir, 0o755)
        self.checkpoint = os.path.join(mdir, "llama.bin")
        subprocess.run([self.bin, "worker", "--gen-checkpoint", self.checkpoint, "--dim", "192",
                        "--layers", "4", "--heads", "6", "--kv-heads", "2", "--vocab", "512",
                        "--seq-len", "256", "--seed", "3"], check=True, capture_output=True)
        os.chmod(self.checkpoint, 0o644)
        workload.CHECKPOINT = self.checkpoint
        self.server = cluster.Server(self.bin, self.root).start()
        log("server at %s" % self.server.url)
        for i in range(workload.NODES):
            name = workload.node_name(i)
            tok = self.server.make_token("agent", node=name)
            self.agents[name] = cluster.Agent(self.bin, self.root, self.server, name,
                                              workload.node_gpus(i), workload.node_labels(i),
                                              tok).start()
        cluster.wait_until(lambda: self.nodes_ready() >= workload.NODES, 60,
                           what="8 nodes ready")
        log("8 agents ready (%s)" % ", ".join(workload.node_gpus(i) for i in (0, 6)))
        self.sampler = procs.Sampler(self.root)
        self.sampler.mig_nodes = {workload.node_name(i) for i in workload.MIG_NODES}
        self.sampler.start()
        for q in workload.queues():
            if self.submit("queues", q) != 201:
                raise RuntimeError("queue %s refused: %s" % (q["metadata"]["name"],
                                                             self.ledger.failed))
        self.port = cluster.port_block(64)
        dep = workload.deployment(self.pod_bin, self.port)
        if self.submit("deployments", dep) != 201:
            raise RuntimeError("deployment refused: %s" % self.ledger.failed)
        cluster.wait_until(lambda: faults.serving_whole(self), 120, what="llama serving")
        gtok = self.server.make_token("tenant", queues=["inference"])
        self.gateway = cluster.Gateway(self.bin, self.root, self.server, gtok).start()
        self.poller = observe.Poller(self.server, self.gateway.url, "llama")
        self.poller.start()

        def answers():
            res = traffic.Result(time.time())
            import asyncio
            asyncio.run(traffic.one_request("127.0.0.1", self.gateway.port,
                                            {"model": workload.SERVED_MODEL, "prompt": "Hi",
                                             "max_tokens": 4, "stream": True}, res, 10))
            return res.ok()
        cluster.wait_until(answers, 60, step=0.5, what="an answer through the gateway")
        log("llama serving: 2 prefill + 2 decode replicas (each role autoscaled 2..8) "
            "behind the gateway %s" % self.gateway.url)

    # ---- the run ----------------------------------------------------------------

    def plan(self):
        m = self.mode
        W = m["window"]
        self.training = workload.training_jobs(self.shared, W, m["compress"], dur_max=0.8 * W)
        self.notebooks = workload.notebooks(W, m["nb_rate"], m["nb_life"])
        items = [(j["at"], "jobs", workload.training_job(j)) for j in self.training]
        items += [(n["at"], "jobs", workload.notebook_job(n)) for n in self.notebooks]
        items += [(2.0, "jobs", workload.elastic_job("elastic-%d" % k, "team-b", 8, 2,
                                                     m["elastic_s"])) for k in range(2)]
        fs = m["faults"]
        make = {"hang": lambda at: faults.HangReplica(at),
                "kill_decode": lambda at: faults.KillDecodeMidStream(at),
                "flood": lambda at: faults.FloodReclaim(at, m["flood_jobs"], m["flood_s"]),
                "rollout": lambda at: faults.BadRollout(at),
                "kill_node": lambda at: faults.KillNode(at),
                "storm": lambda at: faults.StormNodeKill(at, m["flood_jobs"], m["flood_s"]),
                "restart_server": lambda at: faults.RestartServer(at)}
        self.faults = [make[k](at) for k, at in sorted(fs.items(), key=lambda kv: kv[1])]
        log("plan: %d training jobs (%d GPUs of gangs), %d notebooks, 2 elastic jobs, %d faults "
            "over %d s" % (len(self.training), sum(j["gpus"] for j in self.training),
                           len(self.notebooks), len(self.faults), W))
        return items

    def check_daemons(self):
        for d in [self.server, self.gateway] + list(self.agents.values()):
            if d and not d.check():
                msg = "%s exited with status %s: %s" % (d.name, d.proc.returncode,
                                                        d.tail(800))
                if msg not in self.failures:
                    self.failures.append(msg)
                    log("DAEMON CRASH: " + msg)

    def run_fault(self, f):
        log("fault %s: %s" % (f.name, f.what))
        f.before = faults.counts(self)
        try:
            if not f.inject(self):
                f.notes.append("not injected")
                return
        except Exception as e:  # a harness error is reported, not hidden
            f.notes.append("inject failed: %r" % e)
            log("fault %s: inject failed: %r" % (f.name, e))
            return
        self.events.append((f.t_inject, f.name))
        limit = f.t_inject + RECOVERY_LIMIT
        while time.time() < limit:
            self.check_daemons()
            try:
                if f.check(self):
                    f.t_recovered = time.time()
                    f.recovered = True
                    break
            except Exception as e:
                f.notes.append("check: %r" % e)
            time.sleep(0.1)
        if hasattr(f, "finish"):
            f.finish(self)
        if hasattr(f, "cleanup") and not f.recovered:
            f.cleanup(self)
        elif isinstance(f, (faults.FloodReclaim, faults.StormNodeKill)):
            f.cleanup(self)
        log("fault %s: %s" % (f.name, "recovered in %.2f s" % f.recovery_s if f.recovered
                              else "NOT recovered within %.0f s" % RECOVERY_LIMIT))
        if not f.recovered:
            self.failures.append("fault %s not recovered within %.0f s (%s)" % (
                f.name, RECOVERY_LIMIT, "; ".join(f.notes)))

    def run(self):
        items = self.plan()
        W = self.mode["window"]
        self.t0 = time.time()
        self.traffic = traffic.Traffic(self.gateway.url, workload.SERVED_MODEL, self.rate,
                                       seconds=W + 600)
        self.traffic.start()
        self.submitter = observe.Submitter(self.session(), items, self.ledger, self.t0)
        self.submitter.submitted = self.submitted
        self.submitter.specs = self.specs
        for _, kind, obj in items:
            if kind == "jobs":
                self.specs[obj["metadata"]["name"]] = obj["spec"]
        self.submitter.start()
        for f in self.faults:
            while time.time() < self.t0 + f.at:
                self.check_daemons()
                time.sleep(0.2)
            self.run_fault(f)
        while time.time() < self.t0 + W:
            self.check_daemons()
            time.sleep(0.2)
        self.t_end = time.time()
        self.traffic.stop_evt.set()
        self.submitter.stop()
        self.traffic.join(timeout=60)
        log("workload over after %.0f s; checking" % (self.t_end - self.t0))

    # ---- correctness checks --------------------------------------------------------

    def check_objects(self):
        """Every object whose creation the server acknowledged is there."""
        expected = self.ledger.expected()
        found = set()
        for kind in ("queues", "deployments", "jobs", "priorityclasses"):
            items = self.list_all(kind)
            if items is None:
                self.failures.append("could not list %s at the end" % kind)
                continue
            found |= {"%s/%s" % (kind, o["metadata"]["name"]) for o in items}
        lost = sorted(p for p in expected if p not in found)
        self.objects = {"acknowledged": len(expected), "found": len(expected) - len(lost),
                        "lost": lost[:50], "lost_count": len(lost),
                        "persisted_unacknowledged": len(self.ledger.unacked_found),
                        "refused": dict(list(self.ledger.failed.items())[:20]),
                        "priority_classes_written": self.pc_count}
        if lost:
            self.failures.append("%d acknowledged objects lost: %s" % (len(lost), lost[:10]))

    def check_duplicates(self):
        d = self.sampler.duplicates
        self.dups = {"samples": self.sampler.scans, "instances": len(d),
                     "pods": sorted("%s/%s" % k for k in self.sampler.dup_keys)[:50],
                     "first": [{"t": round(t - self.t0, 2), "job": j, "pod": p, "copies": c}
                               for t, j, p, c in d[:10]]}
        if d:
            self.failures.append("%d pods ran twice at once: %s" % (
                len(self.sampler.dup_keys), self.dups["pods"][:10]))
        g = self.sampler.gpu_dups
        self.dups["gpu_instances"] = len(self.sampler.gpu_dup_keys)
        self.dups["gpu_samples"] = len(g)
        self.dups["gpu_first"] = [{"t": round(t - self.t0, 2), "node": n, "gpu": dv, "pods": ps}
                                  for t, n, dv, ps in g[:10]]
        if g:
            self.failures.append("%d times two pods ran on one whole GPU at once: %s" % (
                len(self.sampler.gpu_dup_keys), self.dups["gpu_first"][:5]))

    def finish(self):
        self.check_daemons()
        self.check_objects()
        self.check_duplicates()
        self.jobs_final = self.list_all("jobs") or []
        self.events_final = self.list_all("events") or []

    def teardown(self):
        for f in self.faults:
            if hasattr(f, "cleanup") and isinstance(f, faults.HangReplica):
                f.cleanup(self)
        if self.poller:
            self.poller.stop()
        if self.gateway:
            self.gateway.stop()
        for a in self.agents.values():
            a.stop(signal.SIGTERM, timeout=30)
        if self.sampler:
            self.sampler.stop()
        if self.server:
            self.server.stop()
        # Anything of this run still alive (a pod an agent left) goes now.
        left = procs.scan(self.root)
        for sessions in left.values():
            for s in sessions.values():
                for pid in s["pids"]:
                    procs.signal_quiet(pid, signal.SIGKILL)
        self.leftover_pods = len(left)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--short", action="store_true", help="the ~2 minute mode make test runs")
    ap.add_argument("--out", default="build/soak", help="report folder (default build/soak)")
    ap.add_argument("--bin", default=os.environ.get("STARCLOUD_BIN", "build/starcloud"))
    ap.add_argument("--shared", default=os.environ.get("STARCLOUD_SHARED", "../shared"))
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.shared, "traces", "philly-gavel")):
        print("soak: skipped: %s/traces/philly-gavel is missing (the training trace)"
              % args.shared)
        return 0
    os.makedirs(args.out, exist_ok=True)
    soak = Soak(args)
    started = time.time()
    crashed = None
    try:
        soak.setup()
        soak.run()
        soak.finish()
    except Exception as e:
        import traceback
        crashed = traceback.format_exc()
        soak.failures.append("the run stopped: %r" % e)
        log(crashed)
    finally:
        for t in (soak.traffic, soak.submitter):
            if t:
                t.stop_evt.set()
        try:
            soak.teardown()
        except Exception as e:
            soak.failures.append("teardown: %r" % e)
    soak.wall = time.time() - started
    try:
        path = report.write(soak)
        log("report: %s" % path)
    except Exception:
        import traceback
        log("report failed: " + traceback.format_exc())
        soak.failures.append("the report could not be written")
    if soak.failures:
        log("FAILED:\n  " + "\n  ".join(soak.failures))
        if soak.root_is_temp:
            log("the run folder is kept: %s" % soak.root)
        return 1
    if soak.root_is_temp:
        shutil.rmtree(soak.root, ignore_errors=True)
    log("passed: no acknowledged object lost, no pod twice, no daemon crash, every fault "
        "recovered (%.0f s)" % soak.wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
