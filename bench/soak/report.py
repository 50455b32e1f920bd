"""The soak's report: report.md, figures.json and gnuplot PNGs in the
output folder. Every number is printed next to the target it is held
against; targets that depend on this machine's speed are reported, while
correctness (lost objects, pods twice, crashed daemons, faults never
recovered) fails the run (soak.py)."""
import json
import math
import os
import subprocess
import time

import workload

TARGETS = {
    "util": 95.0,          # % of GPUs allocated while demand exceeds capacity
    "recovery": 10.0,      # s until service or the gang is whole again
    "serving_wait": 60.0,  # s a serving replica waits for its GPU
    "rollback": 5.0,       # % of requests failed before the rollback
}


def pct(values, p):
    """Nearest-rank percentile of values (None when empty)."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    return v[max(0, int(math.ceil(p / 100.0 * len(v))) - 1)]


def fmt(x, unit="", nd=2):
    if x is None:
        return "-"
    if isinstance(x, float):
        return ("%." + str(nd) + "f%s") % (x, unit)
    return "%s%s" % (x, unit)


def met(ok):
    return "**met**" if ok else "**not met**"


# ---- figures -----------------------------------------------------------------------

def timeline(soak):
    """Per poll (about 1 s): allocated and busy GPU %, the leaf queues'
    demand, each queue's GPUs."""
    rows = []
    samples = soak.sampler.samples if soak.sampler else []
    j = 0
    busy_win = []
    for r in (soak.poller.rows if soak.poller else []):
        t = r["t"] - soak.t0
        while j < len(samples) and samples[j][0] <= r["t"]:
            busy_win.append(samples[j])
            j += 1
        busy_win = [s for s in busy_win if s[0] > r["t"] - 1.0] or busy_win[-1:]
        busy = sum(s[1] for s in busy_win) / len(busy_win) if busy_win else None
        mig = sum(s[4] for s in busy_win) / len(busy_win) if busy_win else None
        demand = sum(r.get("r_" + q, 0) for q in ("inference", "team-a", "team-b", "notebooks"))
        rows.append({"t": t, "alloc": r.get("alloc"), "gpus": r.get("gpus") or workload.TOTAL_GPUS,
                     "busy": busy, "busy_mig": mig, "demand": demand,
                     "down": bool(r.get("server_down")),
                     "queues": {q: r.get("q_" + q) for q in ("inference", "team-a", "team-b",
                                                             "notebooks")},
                     "ready_prefill": r.get("ready_prefill"), "ready_decode": r.get("ready_decode"),
                     "want_decode": r.get("want_decode"), "gw_inflight": r.get("gw_inflight")})
    return rows


def utilisation(rows):
    """Time-weighted allocation and busy share, overall and while the
    leaf queues ask for more GPUs than the cluster has."""
    out = {}
    for key, pred in (("all", lambda r: True),
                      ("saturated", lambda r: r["demand"] >= r["gpus"])):
        sel = [r for r in rows if not r["down"] and r["alloc"] is not None and pred(r)]
        if not sel:
            out[key] = {"seconds": 0, "alloc_pct": None, "busy_pct": None}
            continue
        mig_gpus = len(workload.MIG_NODES) * workload.GPUS_PER_NODE
        out[key] = {"seconds": len(sel),
                    "alloc_pct": 100.0 * sum(r["alloc"] / r["gpus"] for r in sel) / len(sel),
                    "busy_pct": 100.0 * sum((r["busy"] or 0) / r["gpus"] for r in sel) / len(sel),
                    # Busy split by node kind: the MIG nodes take only MIG
                    # slices (notebooks), the others everything else.
                    "busy_whole_pct": 100.0 * sum(((r["busy"] or 0) - (r["busy_mig"] or 0)) /
                                                  (r["gpus"] - mig_gpus) for r in sel) / len(sel),
                    "busy_mig_pct": 100.0 * sum((r["busy_mig"] or 0) / mig_gpus
                                                for r in sel) / len(sel)}
    return out


def serving(soak):
    res = [r for r in soak.traffic.snapshot() if r.sched <= soak.t_end] if soak.traffic else []
    done = [r for r in res if r.end is not None]
    ok = [r for r in done if r.ok()]
    errors = {}
    for r in done:
        if not r.ok():
            k = r.error or ("http %d" % r.status)
            errors[k] = errors.get(k, 0) + 1
    ttft = [r.ttft for r in ok if r.ttft is not None]
    rates = [(r.tokens - 1) / (r.end - r.sched - r.ttft) for r in ok
             if r.ttft is not None and r.tokens > 1 and r.end - r.sched - r.ttft > 0]
    span = (soak.t_end - soak.t0) if soak.t_end else 1
    return {
        "requests": len(res), "answered": len(done), "ok": len(ok),
        "success_pct": 100.0 * len(ok) / len(done) if done else None,
        "errors": errors, "client_dropped": soak.traffic.dropped if soak.traffic else 0,
        "ttft_s": {p: pct(ttft, p) for p in (50, 95, 99)},
        "tokens_per_s_per_stream": {p: pct(rates, p) for p in (5, 50, 95)},
        "tokens_total": sum(r.tokens for r in ok),
        "tokens_per_s": sum(r.tokens for r in ok) / span,
        "rps_mean": len(res) / span,
    }


def window_stats(soak, a, b):
    res = [r for r in soak.traffic.snapshot() if a <= r.sched <= b and r.end is not None]
    bad = [r for r in res if not r.ok()]
    slow = max((r.end - r.sched for r in res), default=None)
    return {"requests": len(res), "failed": len(bad), "slowest_s": slow,
            "errors": sorted({r.error or "http %d" % r.status for r in bad})}


def job_waits(soak):
    """Per job: submitted, first time its minimum of pods ran (from /proc),
    finish (its processes gone with the job Succeeded)."""
    phases = {j["metadata"]["name"]: j.get("status", {}).get("phase")
              for j in getattr(soak, "jobs_final", [])}
    out = {}
    for name, spec in soak.specs.items():
        sub = soak.submitted.get(name)
        if sub is None or name.startswith("probe-"):
            continue
        need = spec.get("minMember") or sum(t.get("replicas", 1) for t in spec["tasks"])
        hist = soak.sampler.counts.get(name, [])
        start = next((t for t, n in hist if n >= need), None)
        finish = None
        if phases.get(name) == "Succeeded" and hist and hist[-1][1] == 0:
            finish = hist[-1][0]
        kind = (spec.get("queue") if name.startswith(("team-a", "team-b")) else
                "flood" if name.startswith(("flood", "storm")) else
                "elastic" if name.startswith("elastic") else spec.get("queue"))
        out[name] = {"kind": kind, "queue": spec.get("queue"), "submitted": sub,
                     "start": start, "finish": finish, "phase": phases.get(name),
                     "wait": None if start is None else start - sub,
                     "censored": None if start is not None else soak.t_end - sub,
                     "jct": None if finish is None else finish - sub}
    return out


def wait_table(waits):
    groups = {}
    for w in waits.values():
        groups.setdefault(w["kind"], []).append(w)
    out = {}
    for kind, ws in sorted(groups.items()):
        started = [w["wait"] for w in ws if w["wait"] is not None]
        # Jobs still waiting at the end count with the wait they had so far
        # (a lower bound), so a queue that starves does not look fast.
        all_w = started + [w["censored"] for w in ws if w["wait"] is None]
        out[kind] = {"jobs": len(ws), "started": len(started),
                     "p50": pct(all_w, 50), "p95": pct(all_w, 95), "max": max(all_w, default=None),
                     "jct_p50": pct([w["jct"] for w in ws], 50),
                     "jct_p95": pct([w["jct"] for w in ws], 95),
                     "finished": len([w for w in ws if w["jct"] is not None])}
    return out


def baseline(soak):
    """The same training trace (compressed as submitted) on the 48 whole
    GPUs in the simulator's time mode: the core against the FCFS baseline."""
    folder = os.path.join(soak.out, "baseline", "trace")
    workload.write_gavel(soak.training, folder, soak.shared)
    tput = os.path.join(soak.shared, "traces", "philly-gavel", "simulation_throughputs.json")
    out = {}
    for policy in ("starcloud", "fcfs"):
        csv = os.path.join(soak.out, "baseline", "%s.csv" % policy)
        r = subprocess.run([soak.bin, "simulate", "--time", folder, "--throughputs", tput,
                            "--cluster", "%dx%d" % (len(workload.NORMAL_NODES),
                                                    workload.GPUS_PER_NODE),
                            "--policy", policy, "--json", "--csv", csv],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            out[policy] = {"error": r.stderr.strip()[:500]}
            continue
        j = json.loads(r.stdout)
        j.pop("series", None)
        out[policy] = j
    return out


def live_training(waits):
    ws = [w for w in waits.values() if w["kind"] in workload.TRAINING_QUEUES]
    started = [w["wait"] for w in ws if w["wait"] is not None]
    all_w = started + [w["censored"] for w in ws if w["wait"] is None]
    jct = [w["jct"] for w in ws if w["jct"] is not None]
    return {"jobs": len(ws), "started": len(started), "finished": len(jct),
            "wait_p50": pct(all_w, 50), "wait_p95": pct(all_w, 95),
            "wait_mean": sum(all_w) / len(all_w) if all_w else None,
            "jct_p50": pct(jct, 50), "jct_p95": pct(jct, 95)}


# ---- plots -----------------------------------------------------------------------------

def gnuplot(script):
    try:
        r = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True, timeout=60)
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def plots(soak, rows, fault_marks):
    d = soak.out
    with open(os.path.join(d, "timeline.dat"), "w") as f:
        for r in rows:
            if r["alloc"] is None:
                continue
            f.write("%.1f %.2f %.2f %.1f %s %s %s %s\n" % (
                r["t"], 100 * r["alloc"] / r["gpus"], 100 * (r["busy"] or 0) / r["gpus"],
                min(r["demand"], 2 * r["gpus"]) * 100 / r["gpus"],
                *[r["queues"].get(q) or 0 for q in ("inference", "team-a", "team-b",
                                                      "notebooks")]))
    res = soak.traffic.snapshot() if soak.traffic else []
    buckets = {}
    for r in res:
        if r.end is None or r.sched > soak.t_end:
            continue
        b = int((r.sched - soak.t0) // 5)
        x = buckets.setdefault(b, {"n": 0, "bad": 0, "ttft": []})
        x["n"] += 1
        x["bad"] += 0 if r.ok() else 1
        if r.ok() and r.ttft is not None:
            x["ttft"].append(r.ttft)
    with open(os.path.join(d, "serving.dat"), "w") as f:
        for b in sorted(buckets):
            x = buckets[b]
            f.write("%.1f %.2f %d %.4f\n" % (b * 5 + 2.5, x["n"] / 5.0, x["bad"],
                                             pct(x["ttft"], 95) or 0))
    with open(os.path.join(d, "replicas.dat"), "w") as f:
        for r in rows:
            f.write("%.1f %s %s\n" % (r["t"], r["ready_prefill"] if r["ready_prefill"] is not None
                                      else "?", r["ready_decode"] if r["ready_decode"] is not None
                                      else "?"))
    marks = "".join("set arrow from %.1f, graph 0 to %.1f, graph 1 nohead lc rgb '#aa0000' dt 2\n"
                    "set label '%s' at %.1f, graph 0.97 rotate by 90 right font ',8' tc rgb "
                    "'#aa0000'\n" % (t, t, name, t + 1.5) for t, name in fault_marks)
    common = "set terminal pngcairo size 900,420 font ',9'\nset grid\nset key outside right\n" \
             "set xlabel 'seconds since the workload started'\nset datafile missing '?'\n"
    ok = gnuplot(common + marks +
                 "set output '%s/utilisation.png'\nset title 'GPUs allocated (scheduler) and busy "
                 "(pod processes running), 64 GPUs'\nset ylabel '%% of GPUs'\nset yrange [0:210]\n"
                 "plot '%s/timeline.dat' u 1:2 w l lw 2 t 'allocated', '' u 1:3 w l lw 1 t 'busy', "
                 "'' u 1:4 w l dt 3 lc rgb 'gray40' t 'asked (capped at 200)'\n" % (d, d))
    ok &= gnuplot(common + marks +
                  "set output '%s/queues.png'\nset title 'GPUs allocated per queue'\n"
                  "set ylabel 'GPUs'\nset yrange [0:*]\n"
                  "plot '%s/timeline.dat' u 1:5 w l lw 2 t 'inference', '' u 1:6 w l lw 2 "
                  "t 'team-a', '' u 1:7 w l lw 2 t 'team-b', '' u 1:8 w l lw 2 t 'notebooks'\n"
                  % (d, d))
    ok &= gnuplot(common + marks +
                  "set output '%s/serving.png'\nset title 'Serving: requests/s, failed requests "
                  "and TTFT p95 per 5 s; ready decode replicas'\nset ylabel 'requests/s, "
                  "failures, replicas'\nset y2label 'TTFT p95 (s)'\nset y2tics\nset ytics nomirror\n"
                  "plot '%s/serving.dat' u 1:2 w l lw 2 t 'requests/s', '' u 1:3 w impulses lw 3 "
                  "t 'failed', '%s/replicas.dat' u 1:3 w steps t 'decode ready', '' u 1:2 w steps "
                  "t 'prefill ready', '%s/serving.dat' u 1:4 axes x1y2 w l t 'TTFT p95'\n"
                  % (d, d, d, d))
    return ok


# ---- the report ------------------------------------------------------------------------

def machine():
    try:
        load = open("/proc/loadavg").read().split()[:3]
    except OSError:
        load = ["?"] * 3
    return {"nproc": os.cpu_count(), "loadavg": load, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=os.path.dirname(os.path.abspath(__file__)),
                              timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def write(soak):
    if not hasattr(soak, "t0"):       # the set-up failed: report what there is
        soak.t0 = soak.t_end = time.time()
    if not hasattr(soak, "t_end"):
        soak.t_end = time.time()
    rows = timeline(soak)
    util = utilisation(rows)
    srv = serving(soak) if soak.traffic else {}
    waits = job_waits(soak) if soak.sampler and hasattr(soak, "t_end") else {}
    wt = wait_table(waits)
    fault_list = [f.to_dict(soak.t0) for f in soak.faults if f.t_inject]
    for f, d in zip([f for f in soak.faults if f.t_inject], fault_list):
        end = f.t_recovered or (f.t_inject + 60)
        d["traffic"] = window_stats(soak, f.t_inject - 0.5, end + 2) if soak.traffic else {}
    try:
        base = baseline(soak) if getattr(soak, "training", None) else {}
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        base = {"error": repr(e)}
    live = live_training(waits)
    fault_marks = [(f.t_inject - soak.t0, f.name) for f in soak.faults if f.t_inject]
    plotted = plots(soak, rows, fault_marks) if rows else False
    figures = {"mode": "short" if soak.args.short else "full", "machine": machine(),
               "commit": commit(), "wall_s": soak.wall, "window_s": soak.mode["window"],
               "utilisation": util, "serving": srv, "faults": fault_list, "waits": wt,
               "training_live": live, "baseline": base,
               "evictions": dict(soak.poller.evictions) if soak.poller else {},
               "objects": getattr(soak, "objects", {}), "duplicates": getattr(soak, "dups", {}),
               "crashes": [f for f in soak.failures if "exited with status" in f],
               "failures": soak.failures, "leftover_pods": getattr(soak, "leftover_pods", None),
               "plots": plotted}
    with open(os.path.join(soak.out, "figures.json"), "w") as f:
        json.dump(figures, f, indent=1, default=str)
    md = markdown(soak, figures)
    path = os.path.join(soak.out, "report.md")
    with open(path, "w") as f:
        f.write(md)
    return path


def markdown(soak, F):
    L = []
    m = F["machine"]
    L.append("# Starcloud soak: %s run" % F["mode"])
    L.append("")
    L.append("%s, commit %s, %d cores, load average %s at the end; %.0f s in all (workload "
             "window %d s). Command: `%s`." % (m["date"], F["commit"] or "?", m["nproc"] or 0,
                                               " ".join(m["loadavg"]), F["wall_s"],
                                               F["window_s"], "make soak" + (
                                                   " SOAK_SHORT=1" if soak.args.short else "")))
    L.append("")
    L.append("Cluster: 8 agents x 8 declared A100-80GB (node-6 and node-7 in MIG mode), one "
             "server (SQLite), one gateway. Queues (GPU quota): inference 16 (priority 200), "
             "research 32 = team-a 20 (over-quota weight 2) + team-b 12 (weight 1), notebooks 16 "
             "(priority 50). Serving: `llama` (model %s), prefill/decode disaggregated, class "
             "critical, each role autoscaled between 2 and 8 replicas (prefill on prompt "
             "tokens, decode on tokens/s). Training: Gavel/Philly virtual clusters %s (team-a) and %s (team-b), %d "
             "jobs compressed %dx; notebooks (best-effort) with GPU shares and MIG slices; 2 "
             "elastic jobs." % (workload.SERVED_MODEL, workload.TEAM_TRACES["team-a"],
                                workload.TEAM_TRACES["team-b"], len(getattr(soak, "training", [])),
                                soak.mode["compress"]))
    L.append("")
    # ---- verdict
    L.append("## Targets")
    L.append("")
    L.append("| what | target | measured | |")
    L.append("|---|---|---|---|")
    u = F["utilisation"].get("saturated", {})
    if u.get("alloc_pct") is not None:
        L.append("| GPU allocation while the queues ask for more than the cluster has (%d s of "
                 "the run) | >= 95 %% | %.1f %% allocated, %.1f %% busy (whole-GPU nodes %.1f "
                 "%%, MIG nodes %.1f %%) | %s |" % (
                     u["seconds"], u["alloc_pct"], u["busy_pct"], u["busy_whole_pct"],
                     u["busy_mig_pct"],
                     met(u["alloc_pct"] >= TARGETS["util"])))
    else:
        L.append("| GPU allocation while demand exceeds capacity | >= 95 % | demand never "
                 "exceeded capacity | **not measured** |")
    for f in F["faults"]:
        r = f["recovery_s"]
        L.append("| recovery: %s | < 10 s | %s | %s |" % (
            f["name"], "not recovered" if r is None else "%.1f s" % r,
            met(r is not None and r < TARGETS["recovery"])))
    sw = serving_waits(F)
    if sw:
        worst = max(v for _, v in sw)
        L.append("| wait of serving work for a GPU (worst of %d) | < 1 min | %.1f s | %s |" % (
            len(sw), worst, met(worst < TARGETS["serving_wait"])))
    ro = next((f for f in F["faults"] if f["name"] == "bad-rollout"), None)
    if ro:
        share = ro["info"].get("failed_share_pct")
        L.append("| bad version rolled back before 5 %% of requests failed | RolledBack, < 5 %% | "
                 "%s, %s of requests failed during the rollout | %s |" % (
                     "rolled back" if ro["info"].get("t_rollback") or ro["info"].get(
                         "rollback_s") else "NOT rolled back", fmt(share, " %", 2),
                     met(bool(ro["info"].get("rollback_s")) and share is not None and
                         share < TARGETS["rollback"])))
    o = F["objects"]
    L.append("| acknowledged objects lost | 0 | %s of %s | %s |" % (
        o.get("lost_count", "?"), o.get("acknowledged", "?"), met(o.get("lost_count") == 0)))
    dp = F["duplicates"]
    L.append("| pods running twice (sampled from /proc every 0.1 s, %s samples) | 0 | %s | %s |"
             % (dp.get("samples", "?"), len(dp.get("pods", [])), met(dp.get("instances") == 0)))
    L.append("| whole GPUs held by two pods at once (same samples) | 0 | %s | %s |"
             % (dp.get("gpu_instances", "?"), met(dp.get("gpu_instances") == 0)))
    L.append("| daemon crashes | 0 | %d | %s |" % (len(F["crashes"]), met(not F["crashes"])))
    L.append("")
    if F["failures"]:
        L.append("**Correctness failures:** " + "; ".join(F["failures"]))
        L.append("")
    # ---- timeline
    L.append("## GPUs over time")
    L.append("")
    L.append("![allocation](utilisation.png)")
    L.append("")
    ua = F["utilisation"].get("all", {})
    L.append("Allocated is the server's `starcloud_cluster_allocated_gpus`; busy is the GPUs "
             "of pod processes that run (found in /proc by their STARCLOUD_POD environment, a "
             "SIGSTOPped one not counted). Over the whole window: %s allocated, %s busy. The "
             "gap is pods bound but not started yet, or finished but not yet released." % (
                 fmt(ua.get("alloc_pct"), " %", 1), fmt(ua.get("busy_pct"), " %", 1)))
    L.append("")
    L.append("![queues](queues.png)")
    L.append("")
    # ---- faults
    L.append("## Faults")
    L.append("")
    L.append("| fault | at (s) | recovered after | requests in the window | failed | slowest | "
             "details |")
    L.append("|---|---|---|---|---|---|---|")
    for f in F["faults"]:
        tr = f.get("traffic", {})
        L.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            f["name"], fmt(f["injected_s"], "", 1),
            "**not recovered**" if f["recovery_s"] is None else "%.2f s" % f["recovery_s"],
            tr.get("requests", "-"), tr.get("failed", "-"), fmt(tr.get("slowest_s"), " s", 2),
            details(f)))
    L.append("")
    for f in F["faults"]:
        L.append("- **%s**: %s%s" % (f["name"], f["what"], (" (" + "; ".join(f["notes"]) + ")")
                                     if f["notes"] else ""))
    L.append("")
    # ---- serving
    s = F["serving"]
    if s:
        L.append("## Serving")
        L.append("")
        L.append("![serving](serving.png)")
        L.append("")
        L.append("Open-loop streamed completions (Poisson arrivals following a day compressed "
                 "into the window: %.1f to %.1f requests/s, %.2f on average; 16-48 tokens each), "
                 "each timed from its scheduled arrival." % (soak.mode["rps"][0],
                                                              soak.mode["rps"][1], s["rps_mean"]))
        L.append("")
        L.append("| requests | succeeded | errors | TTFT p50 / p95 / p99 | tokens/s per stream "
                 "p5 / p50 / p95 | tokens/s served |")
        L.append("|---|---|---|---|---|---|")
        L.append("| %d | %s | %s | %s / %s / %s | %s / %s / %s | %.0f |" % (
            s["requests"], fmt(s["success_pct"], " %", 3),
            ", ".join("%s: %d" % kv for kv in sorted(s["errors"].items())) or "none",
            *[fmt(s["ttft_s"][p], " s", 3) for p in (50, 95, 99)],
            *[fmt(s["tokens_per_s_per_stream"][p], "", 0) for p in (5, 50, 95)],
            s["tokens_per_s"]))
        L.append("")
    # ---- queues
    L.append("## Queue waits")
    L.append("")
    L.append("Wait = from the create call until the job's minimum of pods ran as processes. "
             "Jobs still waiting at the end count with the wait they had (a lower bound).")
    L.append("")
    L.append("| work | jobs | started | wait p50 | wait p95 | max | finished | JCT p50 | JCT p95 |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for k, w in F["waits"].items():
        L.append("| %s | %d | %d | %s | %s | %s | %d | %s | %s |" % (
            k, w["jobs"], w["started"], fmt(w["p50"], " s", 1), fmt(w["p95"], " s", 1),
            fmt(w["max"], " s", 1), w["finished"], fmt(w["jct_p50"], " s", 1),
            fmt(w["jct_p95"], " s", 1)))
    if sw:
        L.append("| serving replicas (%d events) | - | - | %s | %s | %s | - | - | - |" % (
            len(sw), fmt(pct([v for _, v in sw], 50), " s", 1),
            fmt(pct([v for _, v in sw], 95), " s", 1), fmt(max(v for _, v in sw), " s", 1)))
    L.append("")
    ev = F["evictions"]
    L.append("Evictions (server counters, summed over its restart): " + (", ".join(
        "%s %d" % (k, v) for k, v in sorted(ev.items()) if v) or "none") + ".")
    L.append("")
    # ---- baseline
    b = F["baseline"]
    if b and "starcloud" in b:
        L.append("## What the scheduler buys: the same trace under a stock Kubernetes baseline")
        L.append("")
        L.append("The training jobs of this run, as submitted (compressed), replayed in "
                 "`starcloud simulate --time --policy starcloud|fcfs` on the 48 whole GPUs "
                 "alone (docs/SIMULATOR.md): fcfs is pods first come first served, spread "
                 "first, no gangs, queues, fair share or preemption. The live column is this "
                 "run, where the same jobs shared the GPUs with serving and notebooks.")
        L.append("")
        L.append("| | Starcloud (simulated) | FCFS baseline (simulated) | Starcloud (live) |")
        L.append("|---|---|---|---|")
        sc, fc, lv = b["starcloud"], b["fcfs"], F["training_live"]

        def g(d, *k):
            for x in k:
                d = (d or {}).get(x)
            return d
        L.append("| GPUs allocated (time-weighted) | %s | %s | see above |" % (
            fmt(g(sc, "gpu_util_pct"), " %", 1), fmt(g(fc, "gpu_util_pct"), " %", 1)))
        L.append("| GPUs held by running jobs | %s | %s | - |" % (
            fmt(g(sc, "gpu_busy_pct"), " %", 1), fmt(g(fc, "gpu_busy_pct"), " %", 1)))
        L.append("| jobs finished / left waiting | %s / %s | %s / %s | %s of %s |" % (
            g(sc, "finished"), g(sc, "left_waiting"), g(fc, "finished"),
            g(fc, "left_waiting"), lv["finished"], lv["jobs"]))
        L.append("| wait p50 / p95 | %s / %s | %s / %s | %s / %s |" % (
            fmt(g(sc, "wait_s", "p50"), " s", 0), fmt(g(sc, "wait_s", "p95"), " s", 0),
            fmt(g(fc, "wait_s", "p50"), " s", 0), fmt(g(fc, "wait_s", "p95"), " s", 0),
            fmt(lv["wait_p50"], " s", 1), fmt(lv["wait_p95"], " s", 1)))
        L.append("| JCT p50 / p95 | %s / %s | %s / %s | %s / %s |" % (
            fmt(g(sc, "jct_s", "p50"), " s", 0), fmt(g(sc, "jct_s", "p95"), " s", 0),
            fmt(g(fc, "jct_s", "p50"), " s", 0), fmt(g(fc, "jct_s", "p95"), " s", 0),
            fmt(lv["jct_p50"], " s", 1), fmt(lv["jct_p95"], " s", 1)))
        for q in workload.TRAINING_QUEUES:
            qs = next((x for x in sc.get("queues", []) if x["name"] == q), {})
            qf = next((x for x in fc.get("queues", []) if x["name"] == q), {})
            L.append("| %s wait p50 / p95 | %s / %s | %s / %s | %s / %s |" % (
                q, fmt(g(qs, "wait_s", "p50"), " s", 0), fmt(g(qs, "wait_s", "p95"), " s", 0),
                fmt(g(qf, "wait_s", "p50"), " s", 0), fmt(g(qf, "wait_s", "p95"), " s", 0),
                fmt(F["waits"].get(q, {}).get("p50"), " s", 1),
                fmt(F["waits"].get(q, {}).get("p95"), " s", 1)))
        L.append("")
    elif b:
        L.append("Baseline: %s" % b)
        L.append("")
    # ---- correctness
    L.append("## Correctness")
    L.append("")
    L.append("- Objects: %s creations acknowledged (queues, deployments, jobs and %s "
             "PriorityClasses written through the server's crash), %s found at the end, "
             "%s lost; %s persisted without an acknowledgement reaching the client." % (
                 o.get("acknowledged"), o.get("priority_classes_written"), o.get("found"),
                 o.get("lost_count"), o.get("persisted_unacknowledged")))
    L.append("- Pods twice: %s scans of every process's environment, %s instances%s." % (
        dp.get("samples"), dp.get("instances"),
        (": " + json.dumps(dp.get("first"))) if dp.get("instances") else ""))
    L.append("- Daemons: %s." % ("; ".join(F["crashes"]) if F["crashes"] else
                                 "the server, 8 agents and the gateway ran throughout (the "
                                 "server and one agent only stopped when the faults killed them)"))
    L.append("")
    return "\n".join(L) + "\n"


def serving_waits(F):
    """Times serving work waited for GPUs: the replicas the flood's
    scale-up asked for (they needed reclaim), and the replacements after a
    node loss."""
    out = []
    for f in F["faults"]:
        if f["name"] == "queue-flood-reclaim" and f["recovery_s"] is not None:
            out.append(("scale-up under a full cluster", f["recovery_s"]))
        if f["name"] == "kill-node" and f["info"].get("serving_s") is not None:
            out.append(("replicas of a dead node", f["info"]["serving_s"]))
        if f["name"] == "node-kill-in-rollout-and-reclaim" and \
                f["info"].get("serving_s") is not None:
            out.append(("scale-up and replicas of a dead node during a rollout",
                        f["info"]["serving_s"] + (f["info"].get("kill_after_s") or 0)))
    return out


def details(f):
    i = f["info"]
    n = f["name"]
    if n in ("hang-replica", "kill-decode-mid-stream"):
        return "%s on %s" % (i.get("pod"), i.get("node"))
    if n == "queue-flood-reclaim":
        return "team-b at %s GPUs (quota 12); traffic x3 (at most 10/s): the autoscaler took decode %s -> " \
               "%s (%s s after the step), prefill %s -> %s; all it asked for ready after %s " \
               "s; %s reclaim, %s preempt evictions" % (
                   i.get("team_b_gpus_at_flood"), i.get("decode_before"), i.get("decode_after"),
                   fmt(i.get("scale_up_s"), "", 1), i.get("prefill_before"),
                   i.get("prefill_after"), fmt(i.get("all_ready_s"), "", 1),
                   fmt(i.get("reclaims"), "", 0), fmt(i.get("preempts"), "", 0))
    if n == "bad-rollout":
        return "rolled back after %s s (%s s after the canary's first request); the canary " \
               "failed %s of %s attempts (each retried on the stable version); clients: " \
               "%s of %s requests failed; %s" % (
                   fmt(i.get("rollback_s"), "", 1), fmt(i.get("rollback_after_canary_s"), "", 1),
                   i.get("canary_failed"), i.get("canary_attempts"), i.get("failed_during"),
                   i.get("requests_during"), i.get("reason"))
    if n == "kill-node":
        g = i.get("gangs") or {}
        whole = [v for v in g.values() if v is not None]
        return "%s (%s processes); node NotReady after %s s, serving whole after %s s; %d " \
               "gangs hit, whole again after %s s" % (
                   i.get("node"), i.get("killed_processes"), fmt(i.get("node_lost_s"), "", 1),
                   fmt(i.get("serving_s"), "", 1), len(g),
                   ", ".join("%.1f" % v for v in sorted(whole)) or "-")
    if n == "node-kill-in-rollout-and-reclaim":
        g = i.get("gangs") or {}
        whole = [v for v in g.values() if v is not None]
        return "team-b at %s GPUs; traffic x3 (at most 10/s), the autoscaler took decode %s -> %s " \
               "(prefill %s -> %s; all it asked for ready after %s s), and rollout to " \
               "version 3 (%s when the node " \
               "died, %s s after the step, %s reclaims by then); %s killed (%s " \
               "processes), NotReady after %s s, serving whole after %s s; %d gangs hit, whole " \
               "again after %s s; %s reclaim, %s preempt evictions; rollout %s (stable %s) %s " \
               "s after it began" % (
                   i.get("team_b_gpus_at_flood"), i.get("decode_before"),
                   i.get("decode_after"), i.get("prefill_before"), i.get("prefill_after"),
                   fmt(i.get("all_ready_s"), "", 1), i.get("rollout_at_kill"),
                   i.get("kill_after_s"),
                   fmt(i.get("reclaims_before_kill"), "", 0), i.get("node"),
                   i.get("killed_processes"), fmt(i.get("node_lost_s"), "", 1),
                   fmt(i.get("serving_s"), "", 1), len(g),
                   ", ".join("%.1f" % v for v in sorted(whole)) or "-",
                   fmt(i.get("reclaims"), "", 0), fmt(i.get("preempts"), "", 0),
                   i.get("rollout_phase"), i.get("rollout_stable"),
                   fmt(i.get("rollout_done_s"), "", 1))
    if n == "restart-server":
        return "up again after %s s; %s writes acknowledged before the kill" % (
            fmt(i.get("server_up_s"), "", 1), i.get("acked_before_kill"))
    return ""
