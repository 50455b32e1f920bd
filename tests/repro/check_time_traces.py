#!/usr/bin/env python3
"""Runs `starcloud simulate --time` over the whole real traces in
../shared/traces and checks what must hold of any correct replay:

  * the run ends (exit 0) and every job of the trace finishes;
  * a job never waits less than 0 s, and waits are ordered p50 <= p99;
  * completion time is at least the wait (a job runs for a while);
  * GPU utilisation is in (0, 100] %, Jain's index in (0, 1];
  * while jobs are pending, the cluster is busy: the time-weighted GPU
    utilisation over those stretches is at least MIN_BUSY_WHILE_PENDING %
    (a scheduler that leaves GPUs idle while work waits fails this);
  * per queue, jobs and finished jobs add up to the totals.

The unit test tests/unit/test_sim_time.c checks exact waits on a small
trace; this one covers what only the full traces reach (15,264 Gavel jobs,
reservations with more waiting jobs than reservation slots, preemption
between 15 virtual clusters). Skips (exit 0, with a message) when
../shared/traces is absent.
"""
import argparse
import json
import os
import subprocess
import sys

MIN_BUSY_WHILE_PENDING = 90.0


def busy_while_pending(series):
    pend = busy = 0.0
    for a, b in zip(series, series[1:]):
        dt = b["t"] - a["t"]
        if a["pending"] > 0:
            pend += dt
            busy += dt * a["gpu_util_pct"]
    return busy / pend if pend > 0 else None


def check(name, out, errors):
    def need(cond, what):
        if not cond:
            errors.append("%s: %s" % (name, what))

    need(out["finished"] == out["jobs"],
         "%d of %d jobs finished" % (out["finished"], out["jobs"]))
    w, c = out["wait_s"], out["jct_s"]
    need(0 <= w["p50"] <= w["p99"] and w["mean"] >= 0, "waits out of order: %r" % w)
    need(c["mean"] >= w["mean"], "mean completion time %g below mean wait %g"
         % (c["mean"], w["mean"]))
    need(0 < out["gpu_util_pct"] <= 100, "utilisation %g" % out["gpu_util_pct"])
    need(0 < out["jain"] <= 1, "Jain's index %g" % out["jain"])
    need(sum(q["jobs"] for q in out["queues"]) == out["jobs"], "queue job counts")
    need(sum(q["finished"] for q in out["queues"]) == out["finished"], "queue finished counts")
    b = busy_while_pending(out["series"])
    need(b is None or b >= MIN_BUSY_WHILE_PENDING,
         "GPUs %.1f %% busy while jobs were pending" % (b or 0))
    print("%-28s %6d jobs  wait mean %10.0f s  util %5.1f %%  Jain %.3f  "
          "busy while pending %s  %.1f s" % (
              name, out["jobs"], w["mean"], out["gpu_util_pct"], out["jain"],
              "-" if b is None else "%.1f %%" % b, out["wall_s"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/starcloud")
    ap.add_argument("--shared", default="../shared")
    args = ap.parse_args()
    traces = os.path.join(args.shared, "traces")
    if not os.path.isdir(traces):
        print("time traces: skipped, %s is absent" % traces)
        return 0
    runs = [("gavel msr-seed0", os.path.join(traces, "philly-gavel", "msr-seed0")),
            ("openb default", "default"),
            ("tiresias 60_job", os.path.join(traces, "tiresias", "60_job.csv"))]
    errors = []
    for name, trace in runs:
        p = subprocess.run([args.bin, "simulate", "--time", trace, "--json"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            errors.append("%s: exit %d: %s" % (name, p.returncode, p.stderr.strip()[-500:]))
            continue
        check(name, json.loads(p.stdout), errors)
    for e in errors:
        print("FAIL " + e)
    print("time traces: %d runs, %d problems" % (len(runs), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
