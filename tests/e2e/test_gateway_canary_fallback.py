"""A request that fails on a rollout's canary before any byte reached the
client is tried once on the stable version (Envoy's retry with the
previous-hosts predicate, across versions): the client gets the stable
version's answer, and the failure still counts against the canary in the
analysis. A pinned version is never moved. The old gateway relayed the
canary's 500 to the client (a 5xx it does not retry)."""
import time

import requests

from gwutil import completion, counters, procs, sse_texts  # noqa: F401


def rollouts(gw):
    return requests.get(gw.url + "/admin/rollouts/tiny", timeout=5).json()


def canary_counts(gw):
    """The canary's attempts and failures so far: the current window plus
    the last one (a window may close during the test on a slow machine)."""
    st = rollouts(gw)
    cur, last = st["currentWindow"]["canary"], st["lastWindow"]["canary"]
    return cur["requests"] + last["requests"], cur["errors"] + last["errors"]


def first_ok(gw, deadline_s=60):
    deadline = time.time() + deadline_s
    while completion(gw, max_tokens=1).status_code != 200:
        assert time.time() < deadline, "the stable version never served"
        time.sleep(0.2)


def test_canary_failure_is_answered_by_the_stable_version(procs):
    stable = procs.worker("1")
    bad = procs.worker("2", "both", "tiny", "--fail-rate", "1", "--fail-status", "500")
    # Half the traffic to the canary, and a window far longer than the test:
    # no rollback by the window; every canary request fails.
    gw = procs.gateway([stable, bad],
                       rollout="model=tiny,stable=1,canary=2,steps=50/100,window=1h")
    first_ok(gw)
    for i in range(30):
        r = completion(gw, max_tokens=2, stream=(i % 2 == 1))
        assert r.status_code == 200, (r.status_code, r.text)
        assert r.headers["x-starcloud-version"] == "1"
        if i % 2:
            texts, done, _ = sse_texts(r)
            assert done and "".join(texts) == "t0 t1 ", texts
        else:
            assert r.json()["choices"][0]["text"] == "t0 t1 "
    # The canary was tried and failed, and the analysis saw each failure.
    tried = counters(bad).get("failed", 0)
    assert tried >= 1, tried
    n, errors = canary_counts(gw)
    st = rollouts(gw)
    if st["state"] == "progressing":
        assert n == errors == tried, (n, errors, tried, st)
    else:  # the failures proved the canary bad before the window closed
        assert st["state"] == "rolled_back", st
    # A pinned request is the client's choice: the canary's own 500, or 503
    # once its failures ejected it; never the stable version's answer.
    r = completion(gw, model="tiny:2", max_tokens=1)
    assert r.status_code in (500, 503), r.text


def test_pd_canary_failure_is_prefilled_again_on_the_stable_version(procs):
    pre1 = procs.worker("1", "prefill")
    dec1 = procs.worker("1", "decode")
    pre2 = procs.worker("2", "prefill")
    dec2 = procs.worker("2", "decode", "tiny", "--fail-rate", "1", "--fail-status", "500")
    gw = procs.gateway([pre1, dec1, pre2, dec2],
                       rollout="model=tiny,stable=1,canary=2,steps=50/100,window=1h")
    first_ok(gw)
    for _ in range(20):
        r = completion(gw, max_tokens=2)
        assert r.status_code == 200, (r.status_code, r.text)
        assert r.headers["x-starcloud-version"] == "1"
        assert r.headers["x-starcloud-prefill-replica"] == "127.0.0.1:%d" % pre1.port
    failed = counters(dec2).get("failed", 0)
    assert failed >= 1 and counters(pre2).get("prefills", 0) >= failed
    st = rollouts(gw)
    if st["state"] == "progressing":
        n, errors = canary_counts(gw)
        assert n == errors == failed, (n, errors, failed, st)


def test_pd_canary_prefill_failure_counts_against_the_canary(procs):
    """A failed prefill on the canary is the canary's failure (the old
    gateway counted only decodes, so such a canary looked healthy)."""
    pre1 = procs.worker("1", "prefill")
    dec1 = procs.worker("1", "decode")
    pre2 = procs.worker("2", "prefill", "tiny", "--fail-rate", "1", "--fail-status", "500")
    dec2 = procs.worker("2", "decode")
    gw = procs.gateway([pre1, dec1, pre2, dec2],
                       rollout="model=tiny,stable=1,canary=2,steps=50/100,window=1h")
    first_ok(gw)
    for _ in range(20):
        r = completion(gw, max_tokens=2)
        assert r.status_code == 200, (r.status_code, r.text)
        assert r.headers["x-starcloud-version"] == "1"
    failed = counters(pre2).get("failed", 0)
    assert failed >= 1 and counters(dec2).get("decodes", 0) == 0
    st = rollouts(gw)
    if st["state"] == "progressing":
        n, errors = canary_counts(gw)
        assert n == errors == failed, (n, errors, failed, st)


def test_no_fallback_without_retries(procs):
    """--max-retries 0: the operator asked for no second attempt at all."""
    stable = procs.worker("1")
    bad = procs.worker("2", "both", "tiny", "--fail-rate", "1", "--fail-status", "500")
    gw = procs.gateway([stable, bad], "--max-retries", "0",
                       rollout="model=tiny,stable=1,canary=2,steps=50/100,window=1h,"
                               "early-rollback-confidence=0")
    codes = set()
    deadline = time.time() + 60
    while 500 not in codes and time.time() < deadline:
        codes.add(completion(gw, max_tokens=1).status_code)
    assert 500 in codes, (codes, rollouts(gw))
    assert rollouts(gw)["state"] == "progressing"


def test_failures_that_prove_the_canary_bad_roll_it_back_early(procs):
    """Early rollback: 2 failures of the canary's first 2 requests prove its
    error rate above 5 % at 99 % (P = 0.25 %), so it is rolled back at once,
    not after min-requests nor at the end of its (hour-long) window; the
    old gateway waited for the window. The clients saw no failure."""
    stable = procs.worker("1")
    bad = procs.worker("2", "both", "tiny", "--fail-rate", "1", "--fail-status", "500")
    gw = procs.gateway([stable, bad], rollout="model=tiny,stable=1,canary=2,steps=50/100,"
                                              "window=1h,min-requests=1000")
    first_ok(gw)
    deadline = time.time() + 60
    while rollouts(gw)["state"] == "progressing":
        assert time.time() < deadline, rollouts(gw)
        r = completion(gw, max_tokens=1)
        assert r.status_code == 200, r.text
    st = rollouts(gw)
    assert st["state"] == "rolled_back" and st["weight"] == 0, st
    assert "99 % confidence" in st["reason"], st
    assert st["earlyRollbackConfidence"] == 0.99 and st["minRequests"] == 1000
    assert st["stepEvidence"]["errors"] == 2 and st["stepEvidence"]["requests"] == 2, st
    assert counters(bad).get("failed", 0) == 2


def test_early_rollback_can_be_turned_off(procs):
    """early-rollback-confidence=0: only the window's verdict with
    min-requests rolls back; a canary failing every request then runs on
    until its window ends (here: not within the test)."""
    stable = procs.worker("1")
    bad = procs.worker("2", "both", "tiny", "--fail-rate", "1", "--fail-status", "500")
    gw = procs.gateway([stable, bad], rollout="model=tiny,stable=1,canary=2,steps=50/100,"
                                              "window=1h,min-requests=1000,"
                                              "early-rollback-confidence=0")
    first_ok(gw)
    for _ in range(20):
        assert completion(gw, max_tokens=1).status_code == 200
    st = rollouts(gw)
    assert st["state"] == "progressing" and st["stepEvidence"]["errors"] >= 2, st


def test_early_rollback_confidence_is_validated():
    import subprocess
    from conftest import BIN
    for bad in ("0.3", "1", "nan", "x", "-0.5"):
        args = ["--rollout", "model=m,stable=1,canary=2,early-rollback-confidence=" + bad]
        p = subprocess.run([BIN, "gateway"] + args, capture_output=True, text=True, timeout=5)
        assert p.returncode == 2, (bad, p.stderr)
        assert "early-rollback-confidence" in p.stderr, (bad, p.stderr)
