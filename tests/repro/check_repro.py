#!/usr/bin/env python3
"""Checks `starcloud simulate` against the FGD reference simulator and our
`default` policy against our FGD on every OpenB workload.

Runs, with --curve and --bound:
  * the five reference workloads x the six reference policies and `default`,
    seeds 42..51;
  * every other pod list in ../shared/traces/openb x {fgd, default}, seeds
    42..44 (OTHER_SEEDS: ten seeds on all 24 lists would take about 15 more
    minutes of two cores; docs/BENCHMARKS.md has the ten-seed figures);
and checks:
  * each reference policy's mean allocation at 100 % and 130 % arrived demand
    is within TOLERANCE percentage points of
    ../shared/traces/fgd-reference/summary_by_workload_policy.csv;
  * `default` is never behind our FGD by more than BEHIND points at any 1 %
    step of arrived demand (0..130, means over the seeds), on every workload;
  * `default` allocates more than FGD at 130 % on every workload (also more
    than the reference simulator's FGD where there is one), and at least
    96.0 % on the default workload (docs/SIMULATOR.md: 96.19 on 42..51);
  * the upper bound of every (workload, seed) is at least the final
    allocation of every policy run on it.
Skips (exit 0, with a message) when ../shared/traces is absent.
"""
import argparse
import csv
import glob
import math
import os
import subprocess
import sys
import tempfile
import time

TOLERANCE = 1.0
BEHIND = 0.1
DEFAULT_TARGET = 96.0
POLICY_NAMES = {"01-Random": "random", "02-DotProd": "dotprod",
                "03-GpuClustering": "gpuclustering", "04-GpuPacking": "gpupacking",
                "05-BestFit": "bestfit", "06-FGD": "fgd"}
SEEDS = "42-51"
OTHER_SEEDS = "42-44"


def load_reference(path):
    ref = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            pol = POLICY_NAMES.get(row["policy"])
            if pol:
                ref[(row["workload"], pol)] = (float(row["alloc_pct_at_arrived100"]),
                                               float(row["alloc_pct_at_arrived130"]))
    return ref


def run(binary, workloads, policies, seeds, out_csv):
    cmd = [binary, "simulate", "--policy", policies, "--seeds", seeds, "--curve", "--bound",
           "--quiet", "--csv", out_csv]
    for w in workloads:
        cmd += ["--pods", w]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out_csv) as f:
        return list(csv.DictReader(f))


def value(row, key):
    return float(row[key]) if row[key] != "" else math.nan


def curves(rows):
    """(workload, policy) -> mean curve over seeds, one value per percent."""
    acc = {}
    for row in rows:
        a = acc.setdefault((row["workload"], row["policy"]), [])
        a.append([value(row, "alloc_%d" % k) for k in range(131)])
    out = {}
    for key, runs in acc.items():
        out[key] = []
        for k in range(131):
            vals = [r[k] for r in runs if not math.isnan(r[k])]
            out[key].append(sum(vals) / len(vals) if vals else math.nan)
    return out


def check_reference(ref, mean, failures):
    print("%-28s %-14s %8s %8s %8s %8s" % ("workload", "policy", "ref100", "ours100",
                                           "ref130", "ours130"))
    for (w, p), (r100, r130) in sorted(ref.items()):
        o100, o130 = mean[(w, p)][100], mean[(w, p)][130]
        flag = ""
        if abs(o100 - r100) > TOLERANCE or abs(o130 - r130) > TOLERANCE:
            flag = "  <-- off by more than %.1f pp" % TOLERANCE
            failures.append((w, p))
        print("%-28s %-14s %8.2f %8.2f %8.2f %8.2f%s" % (w, p, r100, o100, r130, o130, flag))


def check_default(ref, mean, bounds, failures):
    print("\n%-28s %7s %7s %7s %7s %5s %8s" % ("workload", "fgd130", "def130", "diff130",
                                              "mindiff", "at", "bound"))
    for w in sorted({w for w, _ in mean}):
        d, f = mean[(w, "default")], mean[(w, "fgd")]
        diff = [a - b for a, b in zip(d, f) if not (math.isnan(a) or math.isnan(b))]
        ks = [k for k in range(131) if not (math.isnan(d[k]) or math.isnan(f[k]))]
        worst = min(range(len(diff)), key=lambda i: diff[i])
        flags = []
        if diff[worst] < -BEHIND:
            behind = ["%d%%: %+.2f" % (ks[i], diff[i]) for i in range(len(diff))
                      if diff[i] < -BEHIND]
            flags.append("behind fgd by more than %.1f at %s" % (BEHIND, ", ".join(behind)))
        if not d[130] > f[130]:
            flags.append("not ahead at 130 %")
        r = ref.get((w, "fgd"))
        if r and not d[130] > r[1]:
            flags.append("not ahead of the reference's fgd (%.2f)" % r[1])
        b = bounds.get(w, [])
        print("%-28s %7.2f %7.2f %+7.2f %+7.2f %4d%% %8.2f%s"
              % (w, f[130], d[130], d[130] - f[130], diff[worst], ks[worst],
                 sum(b) / len(b) if b else math.nan,
                 "".join("  <-- " + x for x in flags)))
        if flags:
            failures.append((w, "default"))
    dflt = mean.get(("openb_pod_list_default", "default"))
    if not dflt or dflt[130] < DEFAULT_TARGET:
        print("repro: default workload: default policy %s < %.1f  <-- goal not met"
              % ("%.2f" % dflt[130] if dflt else "missing", DEFAULT_TARGET))
        failures.append(("openb_pod_list_default", "default (96.0 goal)"))
    else:
        print("repro: default workload: default policy %.2f >= %.1f" % (dflt[130],
                                                                        DEFAULT_TARGET))


def check_bounds(rows, failures):
    """Every run's final allocation is at most its (workload, seed) bound."""
    low = [(r["workload"], r["policy"], r["seed"], r["final_alloc_pct"], r["bound_pct"])
           for r in rows if float(r["final_alloc_pct"]) > float(r["bound_pct"])]
    for x in low:
        print("repro: %s %s seed %s allocated %s %% above the bound %s %%" % x)
        failures.append((x[0], "bound"))
    print("repro: bound >= final allocation on all %d runs%s"
          % (len(rows), "" if not low else " -- NO, %d below" % len(low)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/starcloud")
    ap.add_argument("--shared", default="../shared")
    args = ap.parse_args()
    summary = os.path.join(args.shared, "traces", "fgd-reference",
                           "summary_by_workload_policy.csv")
    lists = sorted(glob.glob(os.path.join(args.shared, "traces", "openb",
                                          "openb_pod_list_*.csv")))
    if not os.path.exists(summary) or not lists:
        print("repro: SKIPPED: %s or the OpenB pod lists not found (shared traces absent)"
              % summary)
        return 0
    ref = load_reference(summary)
    reference = sorted({w for w, _ in ref})
    others = [os.path.basename(p)[:-4] for p in lists]
    others = [w for w in others if w not in reference]
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        policies = ",".join(sorted(set(POLICY_NAMES.values()))) + ",default"
        rows = run(args.bin, reference, policies, SEEDS, os.path.join(tmp, "reference.csv"))
        t1 = time.time()
        rows += run(args.bin, others, "fgd,default", OTHER_SEEDS,
                    os.path.join(tmp, "others.csv"))
    t2 = time.time()
    print("repro: %d runs and %d bounds: reference sweep %.0f s, other %d workloads %.0f s"
          % (len(rows), len({(r["workload"], r["seed"]) for r in rows}), t1 - t0,
             len(others), t2 - t1))
    mean = curves(rows)
    bounds = {}
    for r in rows:
        if r["policy"] == "default":
            bounds.setdefault(r["workload"], []).append(float(r["bound_pct"]))
    failures = []
    check_reference(ref, mean, failures)
    check_default(ref, mean, bounds, failures)
    check_bounds(rows, failures)
    print("repro: %s (%d failures)" % ("FAILED" if failures else "ok", len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
