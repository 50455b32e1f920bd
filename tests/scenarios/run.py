#!/usr/bin/env python3
"""Scenario tests: manifests in, expected decisions out.

Each tests/scenarios/*.yaml holds manifests plus one `kind: Expect` document
(see README.md in this folder). The Expect document is removed, the rest is
written to a temporary file and run through `starcloud schedule -o json`, and
the output is compared with the expectations. Prints one final line
"scenarios: N passed, M failed" and exits 1 when any scenario failed.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

TOLERANCE = 1e-6


def matches(want, got):
    """A partial object matches when every key in want matches in got."""
    if isinstance(want, dict):
        # "pipelined": false also matches a binding without the key (the
        # output only carries it when true).
        return isinstance(got, dict) and all(
            (k in got and matches(v, got[k])) or (k == "pipelined" and v is False and k not in got)
            for k, v in want.items())
    if isinstance(want, list):
        return isinstance(got, list) and len(want) == len(got) and all(
            matches(w, g) for w, g in zip(want, got))
    if isinstance(want, (int, float)) and not isinstance(want, bool) and \
            isinstance(got, (int, float)) and not isinstance(got, bool):
        return abs(want - got) <= TOLERANCE + 1e-9 * abs(want)
    return want == got


def text_matches(pattern, text):
    """A substring, or a regular expression when it does not occur as is."""
    if pattern in text:
        return True
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


def match_distinct(wants, gots):
    """Each wanted object must match a different actual object (greedy over
    the most constrained first is enough for partial objects in practice;
    a backtracking search keeps it exact)."""
    used = [False] * len(gots)

    def search(i):
        if i == len(wants):
            return True
        for j, g in enumerate(gots):
            if not used[j] and matches(wants[i], g):
                used[j] = True
                if search(i + 1):
                    return True
                used[j] = False
        return False

    return search(0)


def check_list(errors, name, wants, gots, only):
    if not match_distinct(wants, gots):
        errors.append("%s: expected (each matching a distinct entry):\n%s\ngot:\n%s" % (
            name, json.dumps(wants, indent=1), json.dumps(gots, indent=1)))
    elif only and len(wants) != len(gots):
        errors.append("%s: expected exactly %d, got %d:\n%s" % (
            name, len(wants), len(gots), json.dumps(gots, indent=1)))


def check_pending(errors, wants, gots):
    for w in wants:
        hits = [p for p in gots if p.get("job") == w["job"]]
        if not hits:
            errors.append("pending: job %s is not pending; pending: %s" % (
                w["job"], json.dumps(gots)))
        elif "reason" in w and not any(text_matches(w["reason"], p.get("reason", ""))
                                       for p in hits):
            errors.append("pending: job %s: reason %r does not match %r" % (
                w["job"], hits[0].get("reason"), w["reason"]))
        else:
            # Any other key (reservation, ...) is compared as a partial object.
            rest = {k: v for k, v in w.items() if k not in ("job", "reason")}
            if rest and not any(matches(rest, p) for p in hits):
                errors.append("pending: job %s: expected %s, got %s" % (
                    w["job"], json.dumps(rest), json.dumps(hits[0])))


def check_queues(errors, wants, gots):
    by_name = {q.get("name"): q for q in gots}
    for w in wants:
        q = by_name.get(w.get("name"))
        if q is None:
            errors.append("queues: no queue %s" % w.get("name"))
        elif not matches(w, q):
            errors.append("queues: %s: expected %s, got %s" % (
                w["name"], json.dumps(w), json.dumps(q)))


def check_output(expect, out, errors):
    bindings = out.get("bindings", [])
    if "bindings" in expect:
        check_list(errors, "bindings", expect["bindings"], bindings,
                   expect.get("onlyThese", False))
    if "bindingCount" in expect and len(bindings) != expect["bindingCount"]:
        errors.append("bindingCount: expected %d, got %d" % (
            expect["bindingCount"], len(bindings)))
    if "evictions" in expect:
        check_list(errors, "evictions", expect["evictions"], out.get("evictions", []),
                   expect.get("onlyTheseEvictions", False))
    if "evictionCount" in expect and len(out.get("evictions", [])) != expect["evictionCount"]:
        errors.append("evictionCount: expected %d, got %d" % (
            expect["evictionCount"], len(out.get("evictions", []))))
    check_pending(errors, expect.get("pending", []), out.get("pending", []))
    # Node pools (docs/AUTOSCALING.md): the lists are compared whole.
    for key in ("scaleUp", "scaleDown"):
        if key in expect:
            check_list(errors, key, expect[key], out.get(key, []), True)
    bound = {b.get("job") for b in bindings}
    for job in expect.get("notBound", []):
        if job in bound:
            errors.append("notBound: job %s has bindings" % job)
    bound_pods = {b.get("pod") for b in bindings}
    for pod in expect.get("notBoundPods", []):
        if pod in bound_pods:
            errors.append("notBoundPods: pod %s is bound" % pod)
    evicted_pods = {e.get("pod") for e in out.get("evictions", [])}
    for pod in expect.get("notEvictedPods", []):
        if pod in evicted_pods:
            errors.append("notEvictedPods: pod %s is evicted" % pod)
    if "maxBindings" in expect and len(bindings) > expect["maxBindings"]:
        errors.append("maxBindings: expected at most %d, got %d" % (
            expect["maxBindings"], len(bindings)))
    if "maxEvictions" in expect and len(out.get("evictions", [])) > expect["maxEvictions"]:
        errors.append("maxEvictions: expected at most %d, got %d" % (
            expect["maxEvictions"], len(out.get("evictions", []))))
    check_queues(errors, expect.get("queues", []), out.get("queues", []))
    if "cycles" in expect:  # per-cycle expectations for --cycles N
        got = out.get("cycles", [])
        if len(got) != len(expect["cycles"]):
            errors.append("cycles: expected %d, got %d" % (len(expect["cycles"]), len(got)))
        for i, (want, cyc) in enumerate(zip(expect["cycles"], got)):
            sub = []
            check_output(want, cyc, sub)
            errors.extend("cycle %d: %s" % (i + 1, e) for e in sub)


def run_one(binary, path):
    """Returns a list of error strings (empty when the scenario passed)."""
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    expects = [d for d in docs if isinstance(d, dict) and d.get("kind") == "Expect"]
    if len(expects) != 1:
        return ["the file needs exactly one `kind: Expect` document"]
    expect = expects[0]
    rest = [d for d in docs if d is not expect]
    raw = expect.get("input")  # verbatim text, for malformed-YAML cases
    with tempfile.TemporaryDirectory() as tmp:
        manifest = os.path.join(tmp, os.path.basename(path))
        with open(manifest, "w") as f:
            if raw is not None:
                f.write(raw)
            else:
                yaml.safe_dump_all(rest, f, sort_keys=False)
        args = [binary, "schedule", "-o", "json", "-f", manifest] + \
            [str(a) for a in expect.get("args", [])]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    errors = []
    want_code = expect.get("exitCode", 0)
    if proc.returncode != want_code:
        errors.append("exit code: expected %d, got %d\nstderr: %s" % (
            want_code, proc.returncode, proc.stderr.strip()))
    for s in ([expect["stderr"]] if isinstance(expect.get("stderr"), str)
              else expect.get("stderr", [])):
        if not text_matches(s, proc.stderr):
            errors.append("stderr: %r not found in:\n%s" % (s, proc.stderr.strip()))
    if errors or want_code != 0:
        return errors
    try:
        out = json.loads(proc.stdout)
    except ValueError as e:
        return ["output is not JSON (%s):\n%s" % (e, proc.stdout[:2000])]
    check_output(expect, out, errors)
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/starcloud")
    ap.add_argument("paths", nargs="*", default=["tests/scenarios"])
    ap.add_argument("-k", help="only scenarios whose file name contains this")
    a = ap.parse_args()
    files = []
    for p in a.paths:
        # Sub-folders hold groups (kai/: KAI's own unit tests ported).
        files += sorted(glob.glob(os.path.join(p, "**", "*.yaml"), recursive=True)) \
            if os.path.isdir(p) else [p]
    if a.k:
        files = [f for f in files if a.k in os.path.basename(f)]
    passed = failed = 0
    for f in files:
        try:
            errors = run_one(a.bin, f)
        except Exception as e:  # a broken scenario file is a failure, not a crash
            errors = ["%s: %s" % (type(e).__name__, e)]
        if errors:
            failed += 1
            print("FAIL %s" % f)
            for e in errors:
                print("  " + e.replace("\n", "\n  "))
        else:
            passed += 1
    print("scenarios: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
