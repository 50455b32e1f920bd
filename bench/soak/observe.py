"""The soak's view of the control plane: a poller that reads the server's
and the gateway's /metrics and the Deployment's status every second, and a
submitter that creates objects at their scheduled times and keeps a ledger
of every write the server acknowledged (so that after a server crash the
harness can check that each one is still there)."""
import threading
import time

import requests

from cluster import metric_sum


class Ledger:
    """Writes the server acknowledged (2xx), by object path. A create that
    failed on the connection and then found the object existing (409) was
    persisted without an acknowledgement reaching us: counted apart."""

    def __init__(self):
        self.lock = threading.Lock()
        self.created = {}      # path -> time acknowledged
        self.deleted = {}      # path -> time acknowledged
        self.unacked_found = set()
        self.failed = {}       # path -> last error

    def ack_create(self, path):
        with self.lock:
            self.created[path] = time.time()

    def ack_delete(self, path):
        with self.lock:
            self.deleted[path] = time.time()

    def expected(self):
        with self.lock:
            return {p for p in self.created if p not in self.deleted}


def create(session, kind, obj, ledger, deadline_s=60.0):
    """POSTs obj, retrying connection failures and 5xx (a server restart)
    until deadline_s. Returns the status code finally seen."""
    path = "%s/%s" % (kind, obj["metadata"]["name"])
    deadline = time.time() + deadline_s
    tried = False
    while True:
        try:
            r = session.post(session.base + "/" + kind, json=obj, timeout=10)
            if r.status_code == 201:
                ledger.ack_create(path)
                return 201
            if r.status_code == 409 and tried:
                with ledger.lock:
                    ledger.unacked_found.add(path)
                return 409
            if r.status_code < 500 and r.status_code != 429:
                with ledger.lock:
                    ledger.failed[path] = "%d %s" % (r.status_code, r.text[:300])
                return r.status_code
            err = "%d" % r.status_code
        except requests.RequestException as e:
            err = type(e).__name__
        tried = True
        if time.time() > deadline:
            with ledger.lock:
                ledger.failed[path] = err
            return 0
        time.sleep(0.25)


def delete(session, kind, name, ledger, deadline_s=30.0):
    path = "%s/%s" % (kind, name)
    deadline = time.time() + deadline_s
    while True:
        try:
            r = session.delete(session.base + "/%s/%s" % (kind, name), timeout=10)
            if r.status_code in (200, 202, 204, 404):
                ledger.ack_delete(path)
                return r.status_code
        except requests.RequestException:
            pass
        if time.time() > deadline:
            return 0
        time.sleep(0.25)


class Submitter(threading.Thread):
    """Creates items [(at seconds, kind, manifest)] at t0 + at, in order."""

    def __init__(self, session, items, ledger, t0):
        super().__init__(daemon=True)
        self.session, self.items, self.ledger, self.t0 = session, sorted(
            items, key=lambda x: x[0]), ledger, t0
        self.submitted = {}   # name -> time the POST was sent
        self.stop_evt = threading.Event()

    def run(self):
        for at, kind, obj in self.items:
            delay = self.t0 + at - time.time()
            if delay > 0 and self.stop_evt.wait(delay):
                return
            name = obj["metadata"]["name"]
            self.submitted[name] = time.time()
            create(self.session, kind, obj, self.ledger)

    def stop(self):
        self.stop_evt.set()
        self.join(timeout=30)


COUNTERS = ("starcloud_evictions_total",)


class Poller(threading.Thread):
    """Once a second: the cluster's allocated GPUs, each queue's allocated,
    requested and fair-share GPUs, eviction counters (carried over server
    restarts, which reset them), the Deployment's ready endpoints by role
    and version, its rollout and the gateway's view of its replicas."""

    def __init__(self, server, gateway_url, deployment, period=1.0):
        super().__init__(daemon=True)
        self.server, self.gw, self.dep, self.period = server, gateway_url, deployment, period
        self.rows = []
        self.evictions = {}      # reason -> count, summed over restarts
        self._last_counter = {}  # reason -> value last read
        self.errors = 0
        self.stop_evt = threading.Event()
        self.lock = threading.Lock()
        self.last_dep = None

    def _counters(self, text):
        for line in text.splitlines():
            if not line.startswith("starcloud_evictions_total{"):
                continue
            reason = line.split('reason="', 1)[1].split('"', 1)[0]
            v = float(line.rsplit(" ", 1)[1])
            last = self._last_counter.get(reason, 0.0)
            inc = v - last if v >= last else v   # a restart reset it
            self.evictions[reason] = self.evictions.get(reason, 0.0) + inc
            self._last_counter[reason] = v

    def poll_once(self):
        t = time.time()
        row = {"t": t}
        hdr = {"Authorization": "Bearer " + self.server.token}
        try:
            text = requests.get(self.server.url + "/metrics", headers=hdr, timeout=3).text
            row["alloc"] = metric_sum(text, "starcloud_cluster_allocated_gpus")
            row["gpus"] = metric_sum(text, "starcloud_cluster_gpus")
            row["pending"] = metric_sum(text, "starcloud_pending_jobs")
            for q in ("inference", "team-a", "team-b", "notebooks", "research"):
                row["q_" + q] = metric_sum(text, "starcloud_queue_allocated_gpus", queue=q)
                row["r_" + q] = metric_sum(text, "starcloud_queue_requested_gpus", queue=q)
                row["f_" + q] = metric_sum(text, "starcloud_queue_fair_share_gpus", queue=q)
            with self.lock:
                self._counters(text)
        except (requests.RequestException, ValueError, IndexError):
            row["server_down"] = True
        try:
            d = requests.get(self.server.url + "/api/v1/deployments/" + self.dep, headers=hdr,
                             timeout=3).json()
            st = d.get("status", {})
            eps = [e for e in st.get("endpoints", []) if e.get("ready")]
            for role in ("prefill", "decode", "both"):
                row["ready_" + role] = len([e for e in eps if e.get("role") == role])
            row["versions"] = sorted({e.get("version") for e in eps})
            spec = d.get("spec", {})
            dis = spec.get("disaggregation") or {}
            # The autoscaler's counts (status.autoscaling.ROLE.replicas), or
            # the spec's for a role that is not autoscaled.
            auto = st.get("autoscaling") or {}
            for role in ("prefill", "decode"):
                row["want_" + role] = (auto.get(role) or {}).get("replicas",
                                                                 (dis.get(role) or {}).get(
                                                                     "replicas"))
            for k in ("replicas", "desiredReplicas"):
                if k in st:
                    row["status_" + k] = st[k]
            ro = st.get("rollout") or {}
            row["rollout"] = {k: ro.get(k) for k in ("phase", "stable", "canary", "weights",
                                                    "reason", "step")}
            self.last_dep = d
        except (requests.RequestException, ValueError):
            row["server_down"] = True
        try:
            text = requests.get(self.gw + "/metrics", timeout=3).text
            row["gw_up"] = metric_sum(text, "starcloud_gateway_replica_up")
            row["gw_inflight"] = metric_sum(text, "starcloud_gateway_requests_in_flight")
        except requests.RequestException:
            row["gw_down"] = True
        with self.lock:
            self.rows.append(row)
        return row

    def run(self):
        while not self.stop_evt.is_set():
            start = time.time()
            self.poll_once()
            self.stop_evt.wait(max(0.05, self.period - (time.time() - start)))

    def stop(self):
        self.stop_evt.set()
        self.join(timeout=10)

    def latest(self):
        with self.lock:
            return self.rows[-1] if self.rows else {}
