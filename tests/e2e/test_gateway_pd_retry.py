"""Prefill retries, prefill admission and cancellation through the gateway,
against real `starcloud worker` processes (docs/GATEWAY.md, "Prefill/decode"):
a prefill that times out is retried on another prefill replica; a prefill
pool that does not answer sheds new requests with 503 and Retry-After
(without sending them to a replica) instead of letting every one time out,
and takes requests again once it answers; a client that leaves cancels its
prefill on the worker. A replica's 429 needs a fake worker (the real one
answers 429 only when its queue is full, which a test cannot time).

Every wait is for a condition with a generous deadline: the machine running
these may be loaded."""
import json
import signal
import socket
import threading
import time

import requests

from gwutil import metric, procs  # noqa: F401
from test_gateway_worker import ckpt, counters, worker  # noqa: F401


def completion(gw, timeout=60, max_tokens=2):
    return requests.post(gw.url + "/v1/completions",
                         json={"model": "tiny", "prompt": "Once upon", "max_tokens": max_tokens},
                         timeout=timeout)


def wait_until(cond, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def hung_prefill(procs, ckpt):
    """A prefill worker that takes requests and answers nothing at all
    (--hang-after 1, its one answer spent here): from outside, a replica
    whose queue never moves. The gateway's probes must be off (they would
    take it out of rotation: a saturated worker still answers them)."""
    w = worker(procs, ckpt, "1", "prefill", "--hang-after", "1")
    r = requests.post(w.url + "/v1/prefill", json={"model": "tiny", "prompt": "x"}, timeout=30)
    assert r.status_code == 200, r.text
    return w


def sent(gw, w):
    """Attempts the gateway sent to replica w (finished ones)."""
    return metric(gw, "starcloud_gateway_replica_requests_total", replica="127.0.0.1:%d" % w.port)


def test_prefill_timeout_is_retried_on_another_prefill_replica(procs, ckpt):
    stuck = hung_prefill(procs, ckpt)
    good = [worker(procs, ckpt, "1", "prefill") for _ in range(2)]
    dec = worker(procs, ckpt, "1", "decode")
    # No probes and no ejection, so the hung replica keeps being drawn.
    gw = procs.gateway([stuck] + good + [dec], "--attempt-timeout", "3s", "--eject-after",
                       "1000", "--probe-interval", "0")
    answers = []
    deadline = time.time() + 120
    while sent(gw, stuck) < 2 and time.time() < deadline:
        r = completion(gw)
        answers.append((r.status_code, r.headers.get("x-starcloud-prefill-replica")))
    hits = sent(gw, stuck)
    assert hits >= 2, "the hung prefill replica was never drawn"
    hung_id = "127.0.0.1:%d" % stuck.port
    assert all(code == 200 and pre != hung_id for code, pre in answers), answers
    # Every prefill the hung replica took timed out and was retried elsewhere
    # (at least those: on a loaded machine a good replica may be late too).
    assert metric(gw, "starcloud_gateway_prefill_retries_total", model="tiny",
                  reason="timeout") >= hits
    assert metric(gw, "starcloud_gateway_prefill_retries_denied_total", model="tiny") == 0
    assert sum(counters(g)["prefills"] for g in good) >= len(answers)


def test_prefill_retries_beyond_the_budget_are_refused_503(procs, ckpt):
    """Retries in flight stay under the budget (20 % of the requests in
    flight, at least 3): six prefills time out at once on a hung replica
    while nothing else is in flight, three are retried on the slow good
    one, the others answer 503 overloaded with Retry-After at once."""
    stuck = hung_prefill(procs, ckpt)
    # Answers every prefill after 4 s: never late (half of 12 s is 6 s).
    slow = worker(procs, ckpt, "1", "prefill", "--latency-ms", "4000")
    dec = worker(procs, ckpt, "1", "decode")
    gw = procs.gateway([stuck, slow, dec], "--attempt-timeout", "12s", "--timeout", "60s",
                       "--probe-interval", "0", "--eject-after", "1000")
    rows, lock = [], threading.Lock()

    def one():
        r = completion(gw, timeout=120)
        with lock:
            rows.append((r.status_code, r.headers.get("Retry-After"),
                         r.json().get("error", {}) if r.status_code != 200 else None))
    # Two choices by requests in flight split twelve requests sent
    # together six and six over the two replicas.
    ts = [threading.Thread(target=one) for _ in range(12)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    hits = sent(gw, stuck)
    assert hits >= 4, (hits, rows)
    refused = [r for r in rows if r[0] == 503]
    assert all(r[0] == 200 for r in rows if r[0] != 503), rows
    assert refused, rows
    for _, ra, err in refused:
        assert ra == "1" and err["code"] == "overloaded", refused
        assert "retry budget" in err["message"], err
    # At least three were retried (the floor), and every refusal is counted.
    assert metric(gw, "starcloud_gateway_prefill_retries_total", reason="timeout") >= 3
    assert metric(gw, "starcloud_gateway_prefill_retries_denied_total",
                  reason="budget") == len(refused)
    assert metric(gw, "starcloud_gateway_retry_budget_exhausted_total") >= len(refused)


def load(gw, threads, seconds, stagger):
    """threads clients in a loop for seconds, the i-th starting i x stagger s
    late (clients in step would all arrive when a replica's queue has just
    emptied): [(status, Retry-After, error code)]."""
    out, lock, t0 = [], threading.Lock(), time.time()
    stop = t0 + seconds

    def run(i):
        time.sleep(i * stagger)
        s = requests.Session()
        while time.time() < stop:
            try:
                r = s.post(gw.url + "/v1/completions",
                           json={"model": "tiny", "prompt": "Once upon", "max_tokens": 2},
                           timeout=60)
                code = r.json().get("error", {}).get("code") if r.status_code != 200 else None
                row = (r.status_code, r.headers.get("Retry-After"), code)
            except (requests.RequestException, ValueError) as e:
                row = (0, None, str(e))
            with lock:
                out.append(row)
            if row[0] != 200:
                time.sleep(0.1)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def test_overloaded_prefill_pool_sheds_503_instead_of_timing_out(procs, ckpt):
    # Two prefill replicas that take requests and answer none: a pool whose
    # queue never moves (what a saturated pool looks like from outside).
    pre = [hung_prefill(procs, ckpt) for _ in range(2)]
    dec = worker(procs, ckpt, "1", "decode")
    gw = procs.gateway(pre + [dec], "--attempt-timeout", "2s", "--timeout", "30s",
                       "--eject-after", "1000", "--probe-interval", "0")
    rows = load(gw, 6, 10, 0.3)
    codes = [c for c, _, _ in rows]
    assert 200 not in codes and 0 not in codes, rows
    assert set(codes) <= {502, 503}, rows
    shed = [r for r in rows if r[0] == 503 and r[2] == "overloaded"]
    assert shed, "no request was shed: every one waited for its timeouts (%s)" % rows
    assert all(ra == "1" for _, ra, _ in shed), shed
    # Shed requests never reached a replica: the replicas saw fewer
    # prefills than the clients sent (without shedding, each request is at
    # least one prefill there, two with its retry).
    reached = sum(sent(gw, p) for p in pre)
    assert reached < len(rows), (reached, len(rows))
    # Each 503 is a new request shed or a retry refused for overload.
    refused = sum(metric(gw, "starcloud_gateway_prefill_retries_denied_total", model="tiny",
                         reason=why) for why in ("overloaded", "budget"))
    assert metric(gw, "starcloud_gateway_shed_requests_total", model="tiny") + refused == len(shed)


def test_a_stopped_prefill_pool_sheds_and_then_serves_again(procs, ckpt):
    pre = worker(procs, ckpt, "1", "prefill")
    dec = worker(procs, ckpt, "1", "decode")
    gw = procs.gateway([pre, dec], "--attempt-timeout", "2s", "--timeout", "30s",
                       "--probe-interval", "0")
    assert completion(gw).status_code == 200
    pre.proc.send_signal(signal.SIGSTOP)
    try:
        rows = load(gw, 4, 6, 0.4)
        assert any(c == 503 and code == "overloaded" for c, _, code in rows), rows
    finally:
        pre.proc.send_signal(signal.SIGCONT)
    # Nothing stays refused once the replica answers again.
    ok = []
    wait_until(lambda: ok.append(completion(gw).status_code) or ok[-1] == 200, 60,
               "a 200 after SIGCONT (got %s)" % ok)


def test_client_gone_cancels_its_prefill(procs, ckpt):
    # The prefill worker waits 3 s before working on each request: the
    # client leaves while its prefill waits there.
    pre = worker(procs, ckpt, "1", "prefill", "--latency-ms", "3000")
    dec = worker(procs, ckpt, "1", "decode")
    gw = procs.gateway([pre, dec], "--attempt-timeout", "20s")
    host, port = gw.url[len("http://"):].split(":")
    body = json.dumps({"model": "tiny", "prompt": "Once upon", "max_tokens": 2}).encode()
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    wait_until(lambda: counters(pre)["model_requests"] == 1, 30, "the prefill to reach the worker")
    s.close()
    wait_until(lambda: counters(pre)["cancelled"] == 1, 30, "the worker to cancel the prefill")
    # A request after it is served; only its prefill made a KV handle and
    # only it was decoded.
    assert completion(gw).status_code == 200
    c = counters(pre)
    assert c["kv_created"] == 1 and c["cancelled"] == 1, c
    assert counters(dec)["decode_requests"] == 1
    wait_until(lambda: metric(gw, "starcloud_gateway_requests_total", model="tiny", code="499")
               == 1, 30, "the gateway to count the client that left (499)")
