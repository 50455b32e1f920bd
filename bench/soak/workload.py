"""What the soak runs: the cluster's queues and priority classes, the
Llama-style serving Deployment (the reference worker, prefill/decode
disaggregated), training gangs from the Philly-derived Gavel trace (time
compressed), elastic jobs and notebooks with GPU shares and MIG slices.

The cluster is 8 nodes x 8 A100-80GB: nodes 0-5 whole GPUs, nodes 6-7 in
MIG mode (the scheduler places only MIG slices there). Queue quotas sum to
the 64 GPUs: inference 16, the research department 32 (team-a 20 with
over-quota weight 2, team-b 12 with weight 1) and notebooks 16."""
import ast
import json
import math
import os
import random

NODES = 8
GPUS_PER_NODE = 8
MIG_NODES = (6, 7)
NORMAL_NODES = [i for i in range(NODES) if i not in MIG_NODES]
MODEL = "A100-80GB"
TOTAL_GPUS = NODES * GPUS_PER_NODE

QUOTAS = {"inference": 16, "research": 32, "team-a": 20, "team-b": 12, "notebooks": 16}
TRAINING_QUEUES = ("team-a", "team-b")
# Gavel virtual clusters replayed as the two teams: both mix 1-, 2-, 4- and
# 8-GPU gangs and offer about 45 and 13 GPUs of work on average.
TEAM_TRACES = {"team-a": "0e4a51", "team-b": "103959"}


def meta(kind, name, spec, labels=None):
    md = {"name": name}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "starcloud.dev/v1", "kind": kind, "metadata": md, "spec": spec}


def node_name(i):
    return "node-%d" % i


def node_gpus(i):
    return "%dx%s%s" % (GPUS_PER_NODE, MODEL, ":mig" if i in MIG_NODES else "")


def node_labels(i):
    return "zone=z%d,rack=r%d,pool=%s" % (i // 4, i // 2, "mig" if i in MIG_NODES else "gpu")


def queues():
    def q(name, quota, weight, priority, parent=None):
        spec = {"priority": priority,
                "resources": {"gpu": {"quota": quota, "overQuotaWeight": weight, "limit": -1},
                              "cpu": {"quota": -1, "overQuotaWeight": 1, "limit": -1},
                              "memory": {"quota": -1, "overQuotaWeight": 1, "limit": -1}}}
        if parent:
            spec["parentQueue"] = parent
        return meta("Queue", name, spec)
    return [q("inference", QUOTAS["inference"], 1, 200),
            q("research", QUOTAS["research"], 2, 100),
            q("team-a", QUOTAS["team-a"], 2, 100, "research"),
            q("team-b", QUOTAS["team-b"], 1, 100, "research"),
            q("notebooks", QUOTAS["notebooks"], 1, 50)]


# ---- serving --------------------------------------------------------------------

SERVED_MODEL = "llama-3-8b"


CHECKPOINT = None   # set by the harness: the generated Llama-shaped checkpoint


def worker_template(binary, port, role, version, fail_rate=0.0):
    args = ["worker", "--listen", "127.0.0.1:$(STARCLOUD_PORT)", "--model", SERVED_MODEL,
            "--version", version, "--role", role, "--max-tokens", "128"]
    if CHECKPOINT:
        args += ["--checkpoint", CHECKPOINT]
    if fail_rate > 0:
        args += ["--fail-rate", "%g" % fail_rate, "--fault-seed", "7"]
    probe = {"http": {"path": "/v2/health/ready", "port": port}}
    return {"command": [binary], "args": args, "port": port,
            "resources": {"cpu": "500m", "memory": "256Mi", "gpu": 1},
            "probes": {"readiness": dict(probe, periodSeconds=1, failureThreshold=1),
                       "liveness": dict(probe, periodSeconds=1, failureThreshold=3,
                                        timeoutSeconds=1)}}


# Each role autoscaled between 2 and 8 replicas on its own signal
# (docs/AUTOSCALING.md, "Disaggregated Deployments"): prefill on the prompt
# tokens waiting for or in prefill, decode on the tokens per second it
# generates. The targets are set from this machine's figures: a decode
# replica of the generated checkpoint streams several hundred tokens/s
# alone but the 2 shared cores hold the whole cluster, so 50 tokens/s per
# replica puts the short run's peak (6 requests/s x ~32 tokens) at 4
# replicas and the full run's (9/s) at 6, the night at the minimum.
AUTOSCALING = {
    "prefill": {"minReplicas": 2, "maxReplicas": 8,
                "target": {"promptTokensPerReplica": 100}, "scaleDownStabilization": "20s"},
    "decode": {"minReplicas": 2, "maxReplicas": 8,
               "target": {"tokensPerSecondPerReplica": 50}, "scaleDownStabilization": "20s"},
}


def deployment(binary, port, version="1", fail_rate=0.0):
    spec = {"queue": "inference", "model": SERVED_MODEL, "version": version,
            "priorityClass": "critical",
            "template": worker_template(binary, port, "decode", version, fail_rate),
            "disaggregation": {
                role: {"autoscaling": AUTOSCALING[role],
                       "template": worker_template(binary, port, role, version, fail_rate)}
                for role in ("prefill", "decode")},
            "rollout": {"steps": [25, 50, 100], "analysisWindow": "4s", "maxErrorRate": 0.05,
                        "minRequests": 20}}
    return meta("Deployment", "llama", spec)


# ---- training: the Gavel trace, compressed ----------------------------------------

def read_gavel(shared, vc):
    """(arrival s, duration s, gpus, job type) of every job of one virtual
    cluster; durations as src/sim/jobs.c computes them (total_steps over
    the isolated v100 throughput; types measured on one GPU only scale
    linearly)."""
    base = os.path.join(shared, "traces", "philly-gavel")
    with open(os.path.join(base, "simulation_throughputs.json")) as f:
        tp = json.load(f)["v100"]
    table = {}
    for k, v in tp.items():
        name, sf = ast.literal_eval(k)
        table[(name, int(sf))] = v["null"] if isinstance(v, dict) else v
    jobs = []
    with open(os.path.join(base, "msr-seed0", vc + ".trace")) as f:
        for line in f:
            r = line.rstrip("\n").split("\t")
            if len(r) < 7:
                continue
            jt, steps, arrival, sf = r[0], int(r[4]), float(r[5]), int(r[6])
            th = table.get((jt, sf))
            if th is None:
                th = table[(jt, 1)] * sf
            jobs.append({"type": jt, "steps": steps, "arrival": arrival, "gpus": sf,
                         "duration": steps / th, "line": r})
    return jobs


def training_jobs(shared, window, compress, max_gang=8, start_frac=0.30, dur_min=6.0,
                  dur_max=None):
    """The jobs of each team's virtual cluster that arrive in `window`
    seconds of the soak, taken from the trace at `start_frac` of its span
    and compressed `compress` times (arrivals and run times alike, so the
    offered load is the trace's own). Run times are clamped to
    [dur_min, dur_max] seconds of the soak (a pod must live long enough to
    be seen starting; the run must end). Gangs above max_gang GPUs (one node)
    are left out. Returns the jobs, each with the fields of the Gavel
    line it came from, compressed, for the simulator."""
    out = []
    dur_max = dur_max or window
    for team, vc in TEAM_TRACES.items():
        jobs = read_gavel(shared, vc)
        t_first, t_last = jobs[0]["arrival"], jobs[-1]["arrival"]
        t0 = t_first + start_frac * (t_last - t_first)
        k = 0
        for j in jobs:
            at = (j["arrival"] - t0) / compress
            if at < 0 or at >= window or j["gpus"] > max_gang:
                continue
            d = min(max(j["duration"] / compress, dur_min), dur_max)
            out.append({"name": "%s-%03d" % (team, k), "queue": team, "at": round(at, 1),
                        "gpus": j["gpus"], "duration": round(d, 1), "type": j["type"],
                        "steps": j["steps"]})
            k += 1
    out.sort(key=lambda j: (j["at"], j["name"]))
    return out


def write_gavel(jobs, folder, shared, window_scale=1):
    """The compressed jobs as Gavel trace files (one per team), so the
    simulator replays exactly what the soak submitted: total_steps is
    chosen so that total_steps / throughput is the soak's run time."""
    os.makedirs(folder, exist_ok=True)
    base = os.path.join(shared, "traces", "philly-gavel")
    with open(os.path.join(base, "simulation_throughputs.json")) as f:
        tp = json.load(f)["v100"]
    by_team = {}
    for j in jobs:
        key = "('%s', %d)" % (j["type"], j["gpus"])
        th = tp[key]["null"] if key in tp else tp["('%s', 1)" % j["type"]]["null"] * j["gpus"]
        steps = max(1, int(round(j["duration"] * th)))
        by_team.setdefault(j["queue"], []).append(
            "%s\tcmd\t-n\t1\t%d\t%.6f\t%d\n" % (j["type"], steps, j["at"] * window_scale,
                                                 j["gpus"]))
    for team, lines in by_team.items():
        with open(os.path.join(folder, team + ".trace"), "w") as f:
            f.writelines(lines)
    return folder


def training_job(j, index_label=True):
    """A trace job as a Starcloud Job: a gang of one-GPU workers (Gavel's
    scale_factor), each sleeping for the compressed run time."""
    return meta("Job", j["name"], {
        "queue": j["queue"], "priorityClass": "normal", "minMember": j["gpus"],
        "restartPolicy": "OnFailure",
        "tasks": [{"name": "worker", "replicas": j["gpus"],
                   "command": ["/bin/sleep", "%g" % j["duration"]],
                   "resources": {"cpu": "100m", "memory": "64Mi", "gpu": 1}}]},
        labels={"soak": "training", "team": j["queue"]})


def elastic_job(name, queue, replicas, min_member, duration):
    """An elastic job: runs with min_member workers, grows into idle GPUs up
    to replicas, and may be shrunk back to min_member by reclaim."""
    return meta("Job", name, {
        "queue": queue, "priorityClass": "normal", "minMember": min_member,
        "restartPolicy": "OnFailure",
        "tasks": [{"name": "worker", "replicas": replicas,
                   "command": ["/bin/sleep", "%g" % duration],
                   "resources": {"cpu": "100m", "memory": "64Mi", "gpu": 1}}]},
        labels={"soak": "elastic"})


NOTEBOOK_SHAPES = [  # (weight, resources)
    (3, {"gpuFraction": 0.5}),
    (3, {"gpuFraction": 0.25}),
    (3, {"mig": "1g.10gb"}),
    (3, {"mig": "2g.20gb"}),
    (3, {"mig": "3g.40gb"}),
    (1, {"mig": "7g.80gb"}),
]


def notebooks(window, rate_per_s, life, seed=11):
    """A Poisson stream of notebooks (best-effort, preemptible), each one
    pod with a GPU share or a MIG slice, living `life` seconds on average."""
    rnd = random.Random(seed)
    t, k, out = 0.0, 0, []
    total = sum(w for w, _ in NOTEBOOK_SHAPES)
    while True:
        t += rnd.expovariate(rate_per_s)
        if t >= window:
            break
        x, acc = rnd.uniform(0, total), 0
        for w, res in NOTEBOOK_SHAPES:
            acc += w
            if x <= acc:
                break
        d = max(8.0, rnd.expovariate(1.0 / life))
        out.append({"name": "nb-%03d" % k, "at": round(t, 1), "res": dict(res),
                    "duration": round(min(d, 3 * life), 1)})
        k += 1
    return out


def notebook_job(n):
    res = {"cpu": "100m", "memory": "64Mi"}
    res.update(n["res"])
    return meta("Job", n["name"], {
        "queue": "notebooks", "priorityClass": "best-effort", "restartPolicy": "OnFailure",
        "tasks": [{"name": "main", "replicas": 1,
                   "command": ["/bin/sleep", "%g" % n["duration"]], "resources": res}]},
        labels={"soak": "notebook"})


def filler_job(name, queue, duration):
    """One GPU of plain work, for the queue flood that reclaim must undo."""
    return meta("Job", name, {
        "queue": queue, "priorityClass": "normal", "restartPolicy": "OnFailure",
        "tasks": [{"name": "worker", "replicas": 1,
                   "command": ["/bin/sleep", "%g" % duration],
                   "resources": {"cpu": "100m", "memory": "64Mi", "gpu": 1}}]},
        labels={"soak": "flood"})


# ---- serving traffic: a day compressed -------------------------------------------

def daily_rate(frac, low, peak):
    """Requests per second at `frac` (0..1) of a compressed day starting at
    midnight: a night trough, a morning ramp, a midday peak, a smaller
    evening one (the shape of an interactive service's diurnal load)."""
    h = 24.0 * frac
    morning = math.exp(-((h - 11.0) / 2.6) ** 2)
    evening = 0.75 * math.exp(-((h - 17.5) / 2.2) ** 2)
    shape = max(morning, evening)
    return low + (peak - low) * shape
