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
    assert v["store"] == {"backend": "sqlite", "schema": 2}
    metrics = requests.get(server.url + "/metrics", timeout=5).text
    assert 'starcloud_build_info{version="%s",store_schema="2"} 1' % v["version"] in metrics


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
