"""Version skew between the server and its clients (src/base/version.h):
every Starcloud client names itself and its release in User-Agent; a server
refuses a Starcloud client older than the release before its own with an
error that names both versions; anything else (curl, Prometheus, a browser,
the 0.1 releases that sent no User-Agent) is served. The cross-release
upgrade itself is tests/e2e/test_upgrade.py."""
import re
import subprocess

import requests

from agent_util import Agent, wait_for
from conftest import BIN


def release():
    out = subprocess.run([BIN, "version"], capture_output=True, text=True, check=True).stdout
    m = re.fullmatch(r"starcloud (\d+)\.(\d+)\.(\d+)\n", out)
    assert m, out
    return tuple(int(x) for x in m.groups())


def test_version_endpoint(server):
    v = requests.get(server.url + "/version", timeout=5).json()
    assert v["version"] == "%d.%d.%d" % release()
    assert re.fullmatch(r"\d+\.\d+\.\d+", v["minPeerVersion"])
    assert v["store"] == {"backend": "sqlite", "schema": 3}
    metrics = requests.get(server.url + "/metrics", timeout=5,
                           headers={"Authorization": "Bearer " + server.token}).text
    assert ('starcloud_build_info{component="server",version="%s",store_schema="3"} 1'
            % v["version"]) in metrics


def test_too_old_clients_are_told(server, admin):
    minimum = requests.get(server.url + "/version", timeout=5).json()["minPeerVersion"]
    major, minor, patch = (int(x) for x in minimum.split("."))
    older = "%d.%d.%d" % ((major, minor, patch - 1) if patch else
                          (major, minor - 1, 99) if minor else (major - 1, 99, 99))
    cases = [("/jobs", "GET", "starcloud-cli/" + older),
             ("/agents/n1/heartbeat", "POST", "starcloud-agent/" + older),
             ("/deployments?watch=1", "GET", "starcloud-gateway/" + older),
             ("/tokens", "GET", "starcloud-cli/" + older)]
    for path, method, ua in cases:
        r = admin.request(method, admin.base + path, headers={"User-Agent": ua}, json={},
                          timeout=5)
        assert r.status_code == 400, (path, r.text)
        err = r.json()["error"]
        assert err["reason"] == "ClientTooOld"
        comp, ver = ua.split("/")
        assert "%s %s is too old" % (comp, ver) in err["message"]
        assert minimum in err["message"] and "upgrade it" in err["message"]
    # The version is checked before the token: an old client with a bad
    # token still learns that it is too old, not that its token is wrong.
    r = requests.get(admin.base + "/jobs", timeout=5,
                     headers={"User-Agent": "starcloud-cli/" + older,
                              "Authorization": "Bearer sc_nope"})
    assert r.status_code == 400 and r.json()["error"]["reason"] == "ClientTooOld"
    # A client that claims to be Starcloud but gives no readable version.
    for ua in ("starcloud-cli", "starcloud-cli/", "starcloud-cli/1.2", "starcloud-cli/1.2.x",
               "starcloud-cli/01234567.0.0", "starcloud-/1.0.0", "starcloud-C L I/1.0.0"):
        r = admin.get(admin.base + "/jobs", headers={"User-Agent": ua}, timeout=5)
        assert r.status_code == 400, ua
        assert "without a readable version" in r.json()["error"]["message"], ua
    # Nothing was created by the refused requests.
    assert admin.get(admin.base + "/nodes", timeout=5).json()["items"] == []


def test_other_clients_are_served(server, admin):
    me = "%d.%d.%d" % release()
    for ua in (None, "curl/7.88.1", "Prometheus/2.42.0", "Mozilla/5.0",
               "starcloud-cli/" + me, "starcloud-agent/" + me + " (linux)",
               "starcloud-cli/99.0.0"):
        headers = {"User-Agent": ua} if ua else {}
        s = requests.Session()
        if ua is None:
            del s.headers["User-Agent"]
        r = s.get(admin.base + "/jobs", timeout=5,
                  headers=dict(headers, Authorization="Bearer " + server.token))
        assert r.status_code == 200, (ua, r.text)


def test_cli_and_agent_say_who_they_are(server, admin, tmp_path):
    """The real CLI and agent send their release; the server shows each
    node's agent release in status.agent.version (what a rolling upgrade
    follows)."""
    me = "%d.%d.%d" % release()
    r = subprocess.run([BIN, "get", "jobs", "--server", server.url, "--token", server.token],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    agent = Agent(server.url, server.token, "n1", tmp_path / "a1")
    try:
        def version():
            n = admin.get(admin.base + "/nodes/n1", timeout=5)
            return n.ok and n.json().get("status", {}).get("agent", {}).get("version")
        assert wait_for(version, timeout=20, what="agent version") == me
    finally:
        agent.stop()


class Refusing:
    """A server of a later release that refuses this one's clients, as a
    real one would (400 ClientTooOld), but lets an agent register first:
    the case of a server upgraded past what its running agents support."""
    MESSAGE = ("starcloud-agent 0.2.0 is too old for this server (starcloud 0.4.0 serves "
               "agents, gateways and CLIs from 0.3.0 on): upgrade it to 0.4.0")

    def __init__(self):
        import http.server
        import json
        import threading
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                if self.command == "POST" and self.path == "/api/v1/nodes":
                    code, doc = 201, {"kind": "Node", "metadata": {"name": "n1"}}
                else:
                    code, doc = 400, {"error": {"code": 400, "reason": "ClientTooOld",
                                                "message": outer.MESSAGE, "field": ""}}
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            do_GET = do_POST = do_PUT = do_PATCH = answer

            def log_message(self, *a):
                pass
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


def test_refused_clients_say_why(tmp_path):
    """The agent's heartbeat, the gateway's watch and the CLI print the
    server's reason, not only a status code."""
    srv = Refusing()
    try:
        r = subprocess.run([BIN, "get", "jobs", "--server", srv.url, "--token", "sc_x"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and Refusing.MESSAGE in r.stderr, r.stderr
        agent = Agent(srv.url, "sc_x", "n1", tmp_path / "a1")
        gw_log = tmp_path / "gw.log"
        with open(str(gw_log), "w") as log:
            gw = subprocess.Popen([BIN, "gateway", "--listen", "127.0.0.1:0", "--server",
                                   srv.url, "--token", "sc_x"], stdout=subprocess.DEVNULL,
                                  stderr=log)
        try:
            wait_for(lambda: "heartbeat failed (400: " + Refusing.MESSAGE in agent.output(),
                     timeout=20, what="the agent's reason")
            wait_for(lambda: "control plane watch: HTTP 400: " + Refusing.MESSAGE in
                     gw_log.read_text(), timeout=20, what="the gateway's reason")
        finally:
            agent.stop()
            gw.terminate()
            gw.wait(timeout=10)
    finally:
        srv.close()
