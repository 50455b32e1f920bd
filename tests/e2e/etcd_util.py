"""A real etcd cluster (Debian's etcd-server, 3.4) for the HA tests: members
on 127.0.0.1 with free client and peer ports and a temporary data dir,
stopped afterwards. Skips when etcd is missing, except under CI=true."""
import os
import shutil
import signal
import subprocess
import time

import pytest
import requests

from conftest import free_port, stop_process

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


def require_etcd():
    if os.path.exists(ETCD):
        return
    if os.environ.get("CI") == "true":
        pytest.fail("etcd-server is not installed (scripts/deps.sh installs it)")
    pytest.skip("etcd-server is not installed (apt-get install etcd-server)")


class Etcd:
    def __init__(self, tmp, members=1):
        require_etcd()
        self.tmp = str(tmp)
        self.names = ["m%d" % i for i in range(members)]
        self.client = {n: free_port() for n in self.names}
        self.peer = {n: free_port() for n in self.names}
        self.procs = {}

    @property
    def endpoints(self):
        return ",".join("127.0.0.1:%d" % self.client[n] for n in self.names)

    @property
    def store_url(self):
        return "etcd://" + self.endpoints

    def start_member(self, n):
        cluster = ",".join("%s=http://127.0.0.1:%d" % (m, self.peer[m]) for m in self.names)
        log = open(os.path.join(self.tmp, "etcd-%s.log" % n), "a")
        self.procs[n] = subprocess.Popen(
            [ETCD, "--name", n, "--data-dir", os.path.join(self.tmp, "etcd-" + n),
             "--listen-client-urls", "http://127.0.0.1:%d" % self.client[n],
             "--advertise-client-urls", "http://127.0.0.1:%d" % self.client[n],
             "--listen-peer-urls", "http://127.0.0.1:%d" % self.peer[n],
             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % self.peer[n],
             "--initial-cluster", cluster, "--initial-cluster-token", "sc-test",
             # A scheduling cycle writes every changed job in one txn.
             "--max-txn-ops", "100000", "--max-request-bytes", "33554432",
             "--heartbeat-interval", "50", "--election-timeout", "500"],
            stdout=log, stderr=log)
        log.close()

    def start(self):
        for n in self.names:
            self.start_member(n)
        deadline = time.time() + 20
        while time.time() < deadline:
            if all(self.healthy(n) for n in self.names):
                return self
            time.sleep(0.1)
        raise RuntimeError("etcd did not start")

    def healthy(self, n):
        try:
            r = requests.post("http://127.0.0.1:%d/v3/kv/range" % self.client[n],
                              json={"key": "aGVhbHRo"}, timeout=1)
            return r.ok
        except requests.RequestException:
            return False

    def leader(self, timeout=10.0):
        """The name of the member the live members agree leads (their
        /v3/maintenance/status), waiting until they do."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            ids, leads = {}, set()
            for n in self.names:
                if self.procs.get(n) is None or self.procs[n].poll() is not None:
                    continue
                try:
                    st = requests.post("http://127.0.0.1:%d/v3/maintenance/status"
                                       % self.client[n], json={}, timeout=1).json()
                    ids[st["header"]["member_id"]] = n
                    leads.add(st.get("leader"))
                except (requests.RequestException, KeyError, ValueError):
                    leads.add(None)
            if len(leads) == 1 and None not in leads and next(iter(leads)) in ids:
                return ids[next(iter(leads))]
            time.sleep(0.05)
        raise RuntimeError("etcd members do not agree on a leader")

    def kill(self, n, sig=signal.SIGKILL):
        p = self.procs.get(n)
        if p and p.poll() is None:
            p.send_signal(sig)
            if sig == signal.SIGKILL:
                p.wait(timeout=10)

    def stop(self):
        for n, p in self.procs.items():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)  # a paused member cannot exit
                stop_process(p)
