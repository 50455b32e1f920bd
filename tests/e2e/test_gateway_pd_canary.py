"""Gateway end to end with fake workers: prefill/decode faults the real worker
cannot make (a decode that fails before its first byte, prefill failure
policies, a KV that cannot be fetched) and canary promotion. Real workers:
test_gateway_worker.py."""
import subprocess
import time

import requests

from conftest import BIN
from gwutil import completion, counters, metric, procs, sse_texts  # noqa: F401


def test_decode_failure_before_first_byte_is_retried(procs):
    pre = procs.worker("1", "prefill")
    bad = procs.worker("1", "decode", "tiny", "--fail-rate", "1", "--fail-status", "503")
    good = procs.worker("1", "decode")
    gw = procs.gateway([pre, bad, good])
    for _ in range(5):
        r = completion(gw, max_tokens=4)
        assert r.status_code == 200 and r.json()["choices"][0]["text"] == "t0 t1 t2 t3 "
        assert r.headers["x-starcloud-replica"] == "127.0.0.1:%d" % good.port
        assert r.headers["x-starcloud-prefill-replica"] == "127.0.0.1:%d" % pre.port
    assert counters(pre)["prefills"] == 5


def test_prefill_failure_policy(procs):
    dead = procs.worker("1", "prefill", "tiny", "--fail-rate", "1", "--fail-status", "500")
    good = procs.worker("1", "prefill")
    dec = procs.worker("1", "decode")
    fail_gw = procs.gateway([dead, dec], "--prefill-failure", "fail")
    t0 = time.time()
    r = completion(fail_gw, max_tokens=2)
    assert r.status_code == 502 and r.json()["error"]["code"] == "prefill_failed"
    assert time.time() - t0 < 2
    retry_gw = procs.gateway([dead, good, dec], "--prefill-failure", "retry")
    for _ in range(4):
        r = completion(retry_gw, max_tokens=2)
        assert r.status_code == 200 and r.json()["choices"][0]["text"] == "t0 t1 "
    assert counters(dec)["decodes"] == 4


def test_prefill_429_is_retried_on_another_prefill_replica(procs):
    """A prefill replica whose queue is full (429) is not at fault and
    another may have room: the prefill goes there (the real worker's 429
    needs a full queue, which a test cannot time). With nowhere else to go
    the client gets 429 with Retry-After."""
    busy = procs.worker("1", "prefill", "tiny", "--fail-rate", "1", "--fail-status", "429")
    good = procs.worker("1", "prefill")
    dec = procs.worker("1", "decode")
    gw = procs.gateway([busy, good, dec])
    for _ in range(40):
        r = completion(gw, max_tokens=2)
        assert r.status_code == 200 and r.json()["choices"][0]["text"] == "t0 t1 "
        if metric(gw, "starcloud_gateway_prefill_retries_total", reason="busy") >= 2:
            break
    assert metric(gw, "starcloud_gateway_prefill_retries_total", reason="busy") >= 2
    assert metric(gw, "starcloud_gateway_ejections_total") == 0
    only_busy = procs.gateway([busy, dec])
    r = completion(only_busy, max_tokens=2)
    assert r.status_code == 429 and r.headers["Retry-After"] == "1"
    assert r.json()["error"]["code"] == "overloaded"
    assert metric(only_busy, "starcloud_gateway_prefill_retries_denied_total",
                  reason="no_replica") == 1


def test_kv_gone_reprefills_or_fails(procs):
    pre = procs.worker("1", "prefill")
    dec = procs.worker("1", "decode")
    gw = procs.gateway([pre, dec], "--probe-interval", "0", "--prefill-failure", "fail")
    assert completion(gw, max_tokens=2).status_code == 200
    # The prefill side dies after answering: the decode cannot fetch the KV.
    pre2 = procs.worker("1", "prefill", "tiny", "--die-after-chunks", "0")
    pre.proc.kill()
    pre.proc.wait()
    r = completion(gw, max_tokens=2)
    assert r.status_code in (502, 503) and r.content  # never an empty 200
    assert pre2


def rollout_state(gw):
    return requests.get(gw.url + "/admin/rollouts/tiny").json()


def test_good_canary_is_promoted_and_cli_abort(procs):
    v1 = procs.worker("1")
    v2 = procs.worker("2")
    gw = procs.gateway([v1, v2], rollout="model=tiny,stable=1,canary=2,window=300ms")
    weights = set()
    deadline = time.time() + 30
    while time.time() < deadline and rollout_state(gw)["state"] == "progressing":
        for _ in range(10):
            assert completion(gw, max_tokens=1).status_code == 200
        weights.add(rollout_state(gw)["weight"])
    st = rollout_state(gw)
    assert st["state"] == "promoted" and st["weight"] == 100, st
    assert weights & {10, 50}
    for _ in range(10):
        assert completion(gw, max_tokens=1).headers["x-starcloud-version"] == "2"
    out = subprocess.run([BIN, "rollout", "abort", "tiny", "--gateway", gw.url],
                         capture_output=True, text=True, timeout=5)
    assert out.returncode == 0, out.stderr
    assert rollout_state(gw)["state"] == "aborted"
    for _ in range(10):
        assert completion(gw, max_tokens=1).headers["x-starcloud-version"] == "1"
    r = requests.post(gw.url + "/admin/rollouts/tiny", json={"action": "explode"})
    assert r.status_code == 400 and "action" in r.json()["error"]["message"]
    assert requests.post(gw.url + "/admin/rollouts/nope",
                         json={"action": "abort"}).status_code == 404


def test_pd_canary_missing_a_role_is_skipped(procs):
    """A P/D canary with its prefill ready and no decoder is not eligible:
    the old gateway took the canary's prefill and answered 404 at the decode.
    Every request must go to the stable version, and none counts as canary
    evidence."""
    pre1 = procs.worker("1", "prefill")
    dec1 = procs.worker("1", "decode")
    pre2 = procs.worker("2", "prefill")
    # A window far longer than the test: the counts stay in currentWindow.
    gw = procs.gateway([pre1, dec1, pre2],
                       rollout="model=tiny,stable=1,canary=2,steps=50/100,window=1h")
    deadline = time.time() + 60
    while completion(gw, max_tokens=1).status_code != 200:
        assert time.time() < deadline, "stable P/D never served"
        time.sleep(0.2)
    st = rollout_state(gw)
    assert st["state"] == "progressing" and st["weight"] == 50, st
    for _ in range(40):
        r = completion(gw, max_tokens=2)
        assert r.status_code == 200, (r.status_code, r.text)
        assert r.headers["x-starcloud-version"] == "1"
        assert r.headers["x-starcloud-prefill-replica"] == "127.0.0.1:%d" % pre1.port
    assert counters(pre2)["prefills"] == 0
    cur = rollout_state(gw)["currentWindow"]
    assert cur["canary"]["requests"] == 0 and cur["canary"]["errors"] == 0, cur
    assert cur["stable"]["requests"] >= 41 and cur["stable"]["errors"] == 0, cur
    # A version with neither a whole pair: the existing error stays.
    pinned = completion(gw, model="tiny:2", max_tokens=1)
    assert pinned.status_code == 404, pinned.text
