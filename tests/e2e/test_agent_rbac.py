"""The agent role: a token bound to one node may register and heartbeat
that node (and so report its pods) and read jobs and deployments; nothing
else. A real agent runs with one."""
import subprocess

import pytest

from agent_util import Agent, pod_where, run_job, setup_queue, wait_for
from conftest import BIN, EXAMPLES, manifest, node


def mint(admin, **req):
    r = admin.post(admin.base + "/tokens", json=req)
    return r


def agent_session(server, admin, name="n1"):
    r = mint(admin, role="agent", node=name)
    assert r.status_code == 201, r.text
    assert r.json()["role"] == "agent" and r.json()["node"] == name
    return server.session(r.json()["token"]), r.json()["token"]


HB = {"address": "127.0.0.1:1", "leaseMillis": 6000, "conditions": [], "devices": [],
      "pods": []}


def test_agent_token_may_register_heartbeat_and_read(server, admin):
    ag, _ = agent_session(server, admin)
    assert ag.post(ag.base + "/nodes", json=node("n1")).status_code == 201
    assert ag.patch(ag.base + "/nodes/n1", json={"metadata": {"labels": {"z": "1"}}}).ok
    assert ag.post(ag.base + "/agents/n1/heartbeat", json=HB).status_code == 200
    # Lists and watches are scoped to its node (node authorization): said
    # explicitly, or refused.
    assert ag.get(ag.base + "/jobs?node=n1").status_code == 200
    assert ag.get(ag.base + "/deployments?node=n1").status_code == 200
    assert ag.get(ag.base + "/jobs").status_code == 403
    assert ag.get(ag.base + "/jobs?node=n2").status_code == 403
    with ag.get(ag.base + "/jobs?watch=1&node=n1", stream=True, timeout=5) as r:
        assert r.status_code == 200
    who = ag.get(ag.base + "/tokens/self").json()
    assert who["role"] == "agent" and who["node"] == "n1"


def test_agent_token_nothing_else(server, admin):
    ag, _ = agent_session(server, admin)
    assert admin.post(admin.base + "/nodes", json=node("n2")).status_code == 201
    # Another node: neither written nor heartbeaten.
    assert ag.post(ag.base + "/nodes", json=node("n2")).status_code == 403
    assert ag.patch(ag.base + "/nodes/n2", json={"metadata": {"labels": {"z": "1"}}}).status_code == 403
    assert ag.post(ag.base + "/agents/n2/heartbeat", json=HB).status_code == 403
    # Reads beyond jobs and deployments.
    for plural in ("nodes", "queues", "priorityclasses", "events"):
        assert ag.get(ag.base + "/" + plural).status_code == 403, plural
    assert ag.get(ag.base + "/tokens").status_code == 403
    # Writes of any other kind, and deletes or replaces of its own node.
    for plural in ("queues", "priorityclasses", "jobs", "deployments"):
        assert ag.post(ag.base + "/" + plural, json=EXAMPLES[plural]("x")).status_code == 403
    assert ag.post(ag.base + "/nodes", json=node("n1")).status_code == 201
    assert ag.delete(ag.base + "/nodes/n1").status_code == 403
    assert ag.put(ag.base + "/nodes/n1", json=node("n1")).status_code == 403
    assert ag.post(ag.base + "/nodes/n1/drain", json={}).status_code == 403
    # Status is the server's: an agent's write cannot set it.
    n = node("n1")
    n["status"] = {"ready": False}
    ag.patch(ag.base + "/nodes/n1", json=n)
    assert admin.get(admin.base + "/nodes/n1").json().get("status", {}).get("ready") is not False


@pytest.mark.parametrize("req,field", [
    ({"role": "agent"}, "node"),
    ({"role": "agent", "node": "Bad Name"}, "node"),
    ({"role": "agent", "node": 7}, "node"),
    ({"role": "viewer", "node": "n1"}, "node"),
    ({"role": "root"}, "role"),
])
def test_bad_agent_token_requests(admin, req, field):
    r = mint(admin, **req)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["field"] == field


def test_agent_runs_with_agent_token(server, admin, tmp_path):
    _, tok = agent_session(server, admin, "n1")
    a = Agent(server.url, tok, "n1", tmp_path / "n1")
    try:
        setup_queue(admin)
        run_job(admin, "rb", ["sh", "-c", "exit 0"])
        wait_for(pod_where(admin, "rb", "rb-main-0", lambda p: p["phase"] == "Succeeded"),
                 timeout=10, what="the pod's report applied")
        assert admin.get(admin.base + "/nodes/n1").json()["status"]["ready"] is True
    finally:
        a.stop()


def test_cli_token_create_agent(server):
    r = subprocess.run([BIN, "token", "create", "--role", "agent", "--node", "n9",
                        "--server", server.url, "--token", server.token],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    tok = r.stdout.strip()
    who = server.session(tok).get(server.url + "/api/v1/tokens/self").json()
    assert who["role"] == "agent" and who["node"] == "n9"


def test_dev_agents_use_agent_tokens(tmp_path):
    import os
    import requests
    import signal
    env = dict(os.environ, HOME=str(tmp_path))
    p = subprocess.Popen([BIN, "dev", "--agents", "1", "--gpus", "1xA100-80GB", "--data-dir",
                          str(tmp_path / "dev")], stdout=subprocess.PIPE, text=True, env=env,
                         stderr=subprocess.DEVNULL)
    try:
        # dev speaks TLS by default, with a CA of its own (docs/SECURITY.md).
        lines = dict(p.stdout.readline().split(":", 1) for _ in range(5))
        url, admin_tok = lines["server"].strip(), lines["token"].strip()
        ca = lines["ca"].split()[0]
        assert url.startswith("https://")
        s = requests.Session()
        s.trust_env = False  # $REQUESTS_CA_BUNDLE would override verify
        s.verify = ca
        s.headers["Authorization"] = "Bearer " + admin_tok
        def ready():
            try:
                return s.get(url + "/api/v1/nodes/dev-node-0").json().get(
                    "status", {}).get("ready")
            except requests.ConnectionError:
                return None
        wait_for(ready, timeout=30, what="the dev agent")

        def agent_token():
            for pid in os.listdir("/proc"):
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as f:
                        argv = f.read().decode().split("\0")
                except (OSError, UnicodeDecodeError):
                    continue
                if "agent" in argv and "dev-node-0" in argv:
                    # The token is in a file only its owner reads, never
                    # in argv (every local user reads /proc/*/cmdline).
                    assert "--token" not in argv and admin_tok not in argv
                    path = argv[argv.index("--token-file") + 1]
                    assert os.stat(path).st_mode & 0o077 == 0
                    with open(path) as f:
                        return f.read().strip()
        tok = wait_for(agent_token, what="the agent process")
        who = requests.get(url + "/api/v1/tokens/self", verify=ca,
                           headers={"Authorization": "Bearer " + tok}).json()
        assert who["role"] == "agent" and who["node"] == "dev-node-0"
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=15)
