"""An agent rotates its own mTLS client certificate without a restart
(docs/SECURITY.md, Rotating certificates; net/tlsreload.c): the server wants
agents' certificates (--agents-need-cert), the agent's certificate and key
files are replaced by rename, and it goes on heartbeating with the new one
once the old one is no longer trusted (the server shows the serial it saw,
node.status.agent.clientCertificate); a bad pair keeps the one it has.

Certificate A comes from CA 1 and B from CA 2; the server trusts both, then
only CA 2 (A is "revoked" with its CA). An established connection keeps the
certificate it was opened with (TLS), so the server is restarted (same port
and data) to make the agent open new ones: a lease renewed after that was
renewed with a certificate from CA 2. Every wait is for a condition, with
deadlines far above the 2 s file poll."""
import os
import re
import subprocess
import time

import pytest
import requests

from agent_util import Agent, wait_for
from conftest import BIN, free_port, stop_process
from test_tls_reload import RELOAD, not_after, put, replace
from tls_util import issue, issue_client, make_ca


def metric(text, name, **labels):
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in text.splitlines():
        m = re.match(r"^(\w+)(?:\{([^}]*)\})? (\S+)$", line)
        if m and m.group(1) == name and ",".join(sorted((m.group(2) or "").split(","))) == want:
            return float(m.group(3))
    return None


class TlsServer:
    """`starcloud server` with TLS and mTLS for agents, restartable on its
    port with its data."""

    def __init__(self, tmp, ca, cert, client_cas):
        self.port = free_port()
        self.url = "https://127.0.0.1:%d" % self.port
        self.ca = ca
        self.data = str(tmp / "srv")
        self.logpath = str(tmp / "srv.log")
        self.args = [BIN, "server", "--listen", "127.0.0.1:%d" % self.port, "--data-dir",
                     self.data, "--tls-cert", cert[0], "--tls-key", cert[1], "--tls-client-ca",
                     client_cas, "--agents-need-cert", "--metrics-public"]
        self.proc = None

    def start(self):
        self.log = open(self.logpath, "a")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=self.log,
                                     stdin=subprocess.DEVNULL)
        wait_for(lambda: self.proc.poll() is not None or self.healthy(), timeout=60,
                 what="the server up")
        assert self.proc.poll() is None, self.output()

    def healthy(self):
        try:
            return requests.get(self.url + "/healthz", verify=self.ca, timeout=5).ok
        except requests.exceptions.RequestException:
            return False

    def stop(self):
        if self.proc:
            stop_process(self.proc)
            self.log.close()
            self.proc = None

    def output(self):
        with open(self.logpath) as f:
            return f.read()

    def admin(self):
        m = re.search(r"(sc_[0-9a-f]+)", self.output())
        assert m, self.output()[-2000:]
        s = requests.Session()
        s.trust_env = False
        s.verify = self.ca
        s.headers["Authorization"] = "Bearer " + m.group(1)
        s.base = self.url + "/api/v1"
        return s


def agent_metrics(a):
    return requests.get("http://%s/metrics" % a.addr, timeout=10).text


def lease(a):
    """DATA/lease: rewritten after every heartbeat the server took."""
    try:
        with open(os.path.join(a.data_dir, "lease")) as f:
            return f.read()
    except OSError:
        return None


def renewed_twice(a):
    """Waits for two heartbeats taken after now."""
    for n in (1, 2):
        seen = lease(a)
        wait_for(lambda: lease(a) not in (None, seen), timeout=60,
                 what="a heartbeat taken (lease renewal %d)" % n)


def who(server, tok, cert):
    """The principal the server sees for tok over a connection showing
    cert, or the exception that refused it."""
    try:
        r = requests.get(server.url + "/api/v1/tokens/self", cert=cert, verify=server.ca,
                         headers={"Authorization": "Bearer " + tok}, timeout=10)
        return r.status_code, r.json() if r.ok else r.text
    except requests.exceptions.RequestException as e:
        return "refused", str(e)


def serial(cert):
    out = subprocess.run(["openssl", "x509", "-in", cert, "-noout", "-serial"],
                         capture_output=True, text=True, check=True).stdout
    return int(out.strip().split("=", 1)[1], 16)


def seen_by_server(srv, node):
    """The serial of the client certificate the server saw on the node's
    last heartbeat that changed its status (node.status.agent)."""
    st = srv.admin().get(srv.url + "/api/v1/nodes/" + node).json().get("status", {})
    cc = st.get("agent", {}).get("clientCertificate")
    return int(cc["serial"], 16) if cc else None


def test_an_agent_rotates_its_client_certificate(tmp_path):
    pki = tmp_path / "pki"
    ca1, ca2 = make_ca(pki, "ca1"), make_ca(pki, "ca2")
    node = "rot%d" % os.getpid()
    a_cert = issue_client(pki, ca1, "a", "node:" + node, days=2)
    b_cert = issue_client(pki, ca2, "b", "node:" + node, days=3)
    live_dir = tmp_path / "live"
    live_dir.mkdir()
    client_cas = str(live_dir / "client-cas.pem")
    put(open(ca1[0]).read() + open(ca2[0]).read(), client_cas)
    live = (str(live_dir / "client.crt"), str(live_dir / "client.key"))
    replace(a_cert[0], live[0])
    replace(a_cert[1], live[1])
    os.chmod(live[1], 0o600)

    srv = TlsServer(tmp_path, ca1[0], issue(pki, ca1, "srv"), client_cas)
    srv.start()
    agent = None
    try:
        admin = srv.admin()
        r = admin.post(admin.base + "/tokens", json={"role": "agent", "node": node})
        assert r.status_code == 201, r.text
        tok = r.json()["token"]
        agent = Agent(srv.url, tok, node, tmp_path / node, gpus="1xA100-80GB",
                      extra=["--ca", ca1[0], "--tls-client-cert", live[0], "--tls-client-key",
                             live[1], "--metrics-public"])
        # The token needs its node's certificate on the same connection.
        assert who(srv, tok, None)[0] == 401
        assert who(srv, tok, a_cert)[0] == 200
        wait_for(lambda: lease(agent) is not None, timeout=60, what="the agent's first lease")
        renewed_twice(agent)
        wait_for(lambda: seen_by_server(srv, node) == serial(a_cert[0]), timeout=60,
                 what="the server seeing certificate A")
        st = srv.admin().get(srv.url + "/api/v1/nodes/" + node).json()["status"]
        assert st["agent"]["clientCertificate"]["notAfter"] == time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(not_after(a_cert[0])))
        expiry = lambda: metric(agent_metrics(agent),
                                "starcloud_tls_certificate_expiry_timestamp_seconds",
                                context="client")
        assert expiry() == not_after(a_cert[0])

        # B replaces A by rename: the agent loads it (file change).
        replace(b_cert[0], live[0])
        replace(b_cert[1], live[1])
        wait_for(lambda: expiry() == not_after(b_cert[0]), timeout=RELOAD,
                 what="the agent's client certificate B loaded")
        ok = metric(agent_metrics(agent), "starcloud_tls_reload_total", context="client",
                    result="ok")
        assert ok >= 1, agent_metrics(agent)
        assert "TLS client: reloaded (a file changed)" in agent.output()

        # CA 1 leaves the server's bundle: A is refused, B accepted.
        put(open(ca2[0]).read(), client_cas)
        wait_for(lambda: who(srv, tok, a_cert)[0] == "refused", timeout=RELOAD,
                 what="certificate A refused once CA 1 left the bundle")
        code, body = who(srv, tok, b_cert)
        assert code == 200 and body["node"] == node, (code, body)

        # New connections only: the agent renews its lease with B.
        srv.stop()
        srv.start()
        renewed_twice(agent)
        assert metric(agent_metrics(agent), "starcloud_agent_heartbeat_failing") == 0
        wait_for(lambda: seen_by_server(srv, node) == serial(b_cert[0]), timeout=60,
                 what="the server seeing certificate B")

        # A bad pair (B's certificate with A's key) is refused and B kept.
        errors = lambda: metric(agent_metrics(agent), "starcloud_tls_reload_total",
                                context="client", result="error") or 0
        replace(a_cert[1], live[1])
        wait_for(lambda: errors() >= 1, timeout=RELOAD, what="the bad pair refused")
        assert expiry() == not_after(b_cert[0])
        assert "TLS client: reload" in agent.output()
        srv.stop()
        srv.start()
        renewed_twice(agent)
        assert metric(agent_metrics(agent), "starcloud_agent_heartbeat_failing") == 0
        node_obj = srv.admin().get(srv.url + "/api/v1/nodes/" + node).json()
        assert node_obj["status"]["ready"] is True, node_obj
        assert seen_by_server(srv, node) == serial(b_cert[0])
    finally:
        if agent:
            agent.stop()
        srv.stop()
