"""Tenant isolation as an attacker tries it (issue 15, docs/SECURITY.md).

A hostile tenant's pod, a hijacked agent token and a log-reading admin
against a lying node: each attempt must fail. The agents here run as root
with --token-file, so pods run as per-queue uids (the secure default)."""
import json
import os
import signal
import subprocess
import time

import pytest
import requests

from agent_util import Agent, pod_where, pods_of, run_job, setup_queue, wait_for
from conftest import BIN, free_port, manifest, node

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="pods switch users only under a root agent")


def mint(admin, **body):
    r = admin.post(admin.base + "/tokens", json=body)
    assert r.status_code == 201, r.text
    return r.json()["token"]


def token_file(path, tok):
    path.write_text(tok + "\n")
    path.chmod(0o600)
    return path


def session(server, tok):
    return server.session(tok)


def bind(admin, job, pod, node_name):
    """Binds a job's pod to a node as the scheduler would; retried while
    the scheduling loop writes the job's status meanwhile (409)."""
    def put():
        obj = admin.get(admin.base + "/jobs/" + job).json()
        obj["status"] = {"pods": [{"name": pod, "phase": "Running", "node": node_name,
                                   "gpus": []}]}
        return admin.put(admin.base + "/jobs/" + job, json=obj).ok
    wait_for(put, what="binding %s to %s" % (pod, node_name))


@pytest.fixture
def cluster(server, admin, tmp_path):
    """One agent (n1) with an agent token in a file and its address fixed
    by the admin; queues a (victim) and b (attacker)."""
    port = free_port()
    tok = mint(admin, role="agent", node="n1", address="127.0.0.1:%d" % port)
    tf = token_file(tmp_path / "n1.token", tok)
    a = Agent(server.url, None, "n1", tmp_path / "n1", token_file=tf, port=port)
    wait_for(lambda: admin.get(admin.base + "/nodes/n1").json().get("status", {}).get("ready"),
             what="n1 ready")
    setup_queue(admin, "a")
    setup_queue(admin, "b")
    yield a, tok, tf
    a.stop()


HOSTILE = r'''
import json, os, signal
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ALLOWED"
    except (OSError, ValueError) as e:
        out[name] = "denied: %s" % type(e).__name__
def read(p):
    with open(p, "rb") as f:
        f.read(1)
attempt("shadow", lambda: read("/etc/shadow"))
attempt("store", lambda: read(os.environ["STORE"]))
attempt("agent_token", lambda: read(os.environ["AGENT_TOKEN_FILE"]))
attempt("agent_uids", lambda: read(os.environ["AGENT_DATA"] + "/uids.json"))
attempt("agent_data_listing", lambda: os.listdir(os.environ["AGENT_DATA"] + "/pods"))
attempt("victim_log", lambda: read(os.environ["VICTIM_DIR"] + "/output.log"))
attempt("victim_record", lambda: read(os.environ["VICTIM_DIR"] + "/pod.json"))
attempt("victim_work", lambda: os.listdir(os.environ["VICTIM_DIR"] + "/work"))
pid = int(os.environ["VICTIM_PID"])
attempt("victim_environ", lambda: read("/proc/%d/environ" % pid))
attempt("signal_victim", lambda: os.kill(pid, signal.SIGTERM))
secrets = [os.environ["ADMIN_HINT"], os.environ["AGENT_HINT"]]
leaked = []
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        leaked += [p for s in secrets if s in cmd]
out["cmdline_leaks"] = leaked
out["uid"] = os.getuid()
print("RESULT " + json.dumps(out), flush=True)
'''


def test_hostile_tenant_pod(server, admin, cluster, tmp_path):
    a, agent_tok, tf = cluster
    tenant_b = session(server, mint(admin, role="tenant", queues=["b"]))
    run_job(admin, "victim", ["sh", "-c", "echo the-victims-secret; exec sleep 600"], q="a",
            env={"VICTIM_SECRET": "s3cret"}, restartPolicy="Never")
    wait_for(lambda: os.path.exists(os.path.join(a.pod_dir("victim", "victim-main-0"),
                                                 "pod.json")), what="victim record")
    with open(os.path.join(a.pod_dir("victim", "victim-main-0"), "pod.json")) as f:
        victim_pid = json.load(f)["pid"]
    env = {"STORE": os.path.join(server.data_dir, "store.db"),
           "AGENT_TOKEN_FILE": str(tf), "AGENT_DATA": a.data_dir,
           "VICTIM_DIR": a.pod_dir("victim", "victim-main-0"), "VICTIM_PID": str(victim_pid),
           # Parts of the secrets: the script must not hold them whole.
           "ADMIN_HINT": server.token[:20], "AGENT_HINT": agent_tok[:20]}
    for p in (env["STORE"], env["AGENT_TOKEN_FILE"], env["VICTIM_DIR"] + "/output.log"):
        assert os.path.exists(p), p  # the targets are real
    # The tenant of queue b submits the hostile job itself.
    body = manifest("Job", "evil", {"queue": "b", "restartPolicy": "Never", "tasks": [{
        "name": "main", "command": ["python3", "-c", HOSTILE], "env": env,
        "resources": {"cpu": "100m", "memory": "64Mi"}}]})
    assert tenant_b.post(tenant_b.base + "/jobs", json=body).status_code == 201
    wait_for(pod_where(admin, "evil", "evil-main-0", lambda p: p["phase"] == "Succeeded"),
             timeout=20, what="the hostile pod to finish")
    # Its log, read by its own tenant through the server.
    r = tenant_b.get(tenant_b.base + "/jobs/evil/logs")
    assert r.status_code == 200, r.text
    line = [l for l in r.text.splitlines() if l.startswith("RESULT ")]
    assert line, r.text
    res = json.loads(line[0][7:])
    assert res["uid"] != 0
    for k in ("shadow", "store", "agent_token", "agent_uids", "agent_data_listing",
              "victim_log", "victim_record", "victim_work", "victim_environ",
              "signal_victim"):
        assert res[k].startswith("denied"), (k, res[k])
    assert res["cmdline_leaks"] == []
    # The victim is untouched, and tenant b cannot read its logs either.
    assert pods_of(admin, "victim")["victim-main-0"]["phase"] == "Running"
    assert tenant_b.get(tenant_b.base + "/jobs/victim/logs").status_code == 404
    assert "the-victims-secret" in admin.get(admin.base + "/jobs/victim/logs").text


def test_agent_token_is_node_scoped(server, admin, cluster):
    a, agent_tok, _ = cluster
    ag = session(server, agent_tok)
    admin.post(admin.base + "/nodes", json=node("n2", gpus=0))
    # A job on the other node (bound by an admin, as the scheduler would).
    run_job(admin, "other", ["sleep", "600"], q="a")
    bind(admin, "other", "other-main-0", "n2")
    assert ag.get(ag.base + "/jobs/other").status_code == 403
    assert ag.get(ag.base + "/jobs").status_code == 403
    assert ag.get(ag.base + "/jobs?node=n2").status_code == 403
    names = [j["metadata"]["name"] for j in ag.get(ag.base + "/jobs?node=n1").json()["items"]]
    assert "other" not in names
    # Its address was fixed by the admin's token: a heartbeat cannot move it.
    hb = {"address": "127.0.0.1:1", "leaseMillis": 2000, "conditions": [], "devices": [],
          "pods": []}
    r = ag.post(ag.base + "/agents/n1/heartbeat", json=hb)
    assert r.status_code == 403 and r.json()["error"]["field"] == "address"
    st = admin.get(admin.base + "/nodes/n1").json()["status"]["agent"]
    assert st["address"] == a.addr
    # Nor may it read logs, or reach the other agent's status port.
    assert ag.get(ag.base + "/jobs/other/logs").status_code == 403


def test_logs_never_send_the_readers_token_to_a_node(server, admin, tmp_path):
    """An agent (admin-minted token without a fixed address) points its node
    at a listener of the attacker's: `starcloud logs` as admin must not hand
    the admin token to it."""
    captured = []
    import socket
    import threading
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    evil = "127.0.0.1:%d" % ls.getsockname()[1]

    def serve():
        ls.settimeout(15)
        try:
            while True:
                c, _ = ls.accept()
                c.settimeout(2)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        chunk = c.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                except OSError:
                    pass
                captured.append(data.decode(errors="replace"))
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nlies\n")
                c.close()
        except OSError:
            return
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    tok = mint(admin, role="agent", node="liar")
    ag = session(server, tok)
    assert ag.post(ag.base + "/nodes", json=node("liar", gpus=0)).status_code == 201
    hb = {"address": evil, "leaseMillis": 60000, "conditions": [], "devices": [], "pods": []}
    assert ag.post(ag.base + "/agents/liar/heartbeat", json=hb).status_code == 200
    setup_queue(admin, "a")
    run_job(admin, "j", ["sleep", "1"], q="a")
    bind(admin, "j", "j-main-0", "liar")
    env = dict(os.environ, STARCLOUD_TOKEN=server.token)
    out = subprocess.run([BIN, "logs", "j", "--server", server.url], env=env,
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "lies\n"  # what the node said, through the server
    wait_for(lambda: captured, what="the node's request")
    for req in captured:
        assert server.token not in req
        assert "Bearer " in req  # the server's own per-node key
    # The key the liar got is its own node's: it opens no other node.
    key = captured[0].split("Bearer ", 1)[1].split("\r\n", 1)[0]
    other_tok = mint(admin, role="agent", node="other")
    ao = session(server, other_tok)
    ao.post(ao.base + "/nodes", json=node("other", gpus=0))
    r = ao.post(ao.base + "/agents/other/heartbeat", json=hb)
    assert r.json()["statusKey"] != key
    ls.close()


def test_revoked_token_watch_closes(server, admin):
    r = admin.post(admin.base + "/tokens", json={"role": "viewer"})
    tok, tid = r.json()["token"], r.json()["id"]
    v = session(server, tok)
    with v.get(v.base + "/jobs?watch=1", stream=True, timeout=10) as w:
        assert w.status_code == 200
        t0 = time.time()
        assert admin.delete(admin.base + "/tokens/" + tid).ok
        for _ in w.iter_content(chunk_size=None):
            pass  # ends when the server closes the stream
        assert time.time() - t0 < 1.0
    assert v.get(v.base + "/jobs").status_code == 401


def test_token_expiry_and_watch_timeout(tmp_path):
    from conftest import Server
    s = Server(tmp_path / "srv", extra=["--watch-timeout", "1s"]).start()
    try:
        s.read_admin_token()
        admin = s.session()
        r = admin.post(admin.base + "/tokens", json={"role": "viewer", "expiresIn": "2s"})
        assert r.status_code == 201 and r.json()["expires"] > time.time()
        v = s.session(r.json()["token"])
        assert v.get(v.base + "/jobs").status_code == 200
        with admin.get(admin.base + "/jobs?watch=1", stream=True, timeout=10) as w:
            t0 = time.time()
            for _ in w.iter_content(chunk_size=None):
                pass
            assert time.time() - t0 < 3  # the server's timeout, 1 s (- jitter)
        wait_for(lambda: v.get(v.base + "/jobs").status_code == 401, timeout=30,
                 what="the token to expire")
        bad = admin.post(admin.base + "/tokens", json={"role": "viewer", "expiresIn": "soon"})
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "expiresIn"
        bad = admin.post(admin.base + "/tokens", json={"role": "viewer", "address": "h:1"})
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "address"
    finally:
        s.stop()


def test_audit_log_records_writes_and_denials(server, admin):
    tenant = session(server, mint(admin, role="tenant", queues=["a"]))
    setup_queue(admin, "a")
    assert tenant.post(tenant.base + "/queues", json=manifest("Queue", "x", {})).status_code == 403
    requests.get(server.url + "/api/v1/jobs", headers={"Authorization": "Bearer sc_nope0000"})
    out = subprocess.run([BIN, "audit", "--data-dir", server.data_dir, "-o", "json"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(l) for l in out.stdout.splitlines()]
    assert {"time", "principal", "verb", "object", "result"} <= set(lines[0])
    assert any(l["verb"] == "POST" and l["object"] == "/api/v1/queues" and
               l["result"] == 201 and l["role"] == "admin" for l in lines)
    assert any(l["object"] == "/api/v1/queues" and l["result"] == 403 and
               l["role"] == "tenant" for l in lines)
    assert any(l["result"] == 401 and l["principal"] == "" for l in lines)
    assert not any(l["verb"] == "GET" and l["result"] == 200 for l in lines)
    assert os.stat(os.path.join(server.data_dir, "audit.log")).st_mode & 0o077 == 0
    assert os.stat(server.data_dir).st_mode & 0o077 == 0


def test_admission_pod_names_and_run_as_user(admin):
    setup_queue(admin, "a")
    long = "x" * 250
    r = admin.post(admin.base + "/jobs", json=manifest("Job", long, {"queue": "a", "tasks": [
        {"name": "main", "command": ["true"]}]}))
    assert r.status_code == 400 and r.json()["error"]["field"] == "metadata.name"
    assert admin.get(admin.base + "/jobs/" + long).status_code == 404
    spec = {"queue": "a", "runAsUser": 1234, "tasks": [{"name": "main", "command": ["true"]}]}
    r = admin.post(admin.base + "/jobs", json=manifest("Job", "u", spec))
    assert r.status_code == 400 and r.json()["error"]["field"] == "spec.runAsUser"
    q = admin.get(admin.base + "/queues/a").json()
    q["spec"]["podSecurity"] = {"allowRunAsUser": True}
    assert admin.put(admin.base + "/queues/a", json=q).ok
    assert admin.post(admin.base + "/jobs", json=manifest("Job", "u", spec)).status_code == 201
    spec["runAsUser"] = 0
    r = admin.post(admin.base + "/jobs", json=manifest("Job", "root", spec))
    assert r.status_code == 400 and "root" in r.json()["error"]["message"]
    q = admin.get(admin.base + "/queues/a").json()
    q["spec"]["podSecurity"] = {"allowRunAsUser": True, "allowRoot": "yes"}
    r = admin.put(admin.base + "/queues/a", json=q)
    assert r.status_code == 400 and "allowRoot" in r.json()["error"]["field"]


def test_token_file_mode_checked(server, tmp_path):
    f = tmp_path / "t"
    f.write_text(server.token + "\n")
    f.chmod(0o644)
    out = subprocess.run([BIN, "get", "jobs", "--server", server.url, "--token-file", str(f)],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode != 0 and "chmod 600" in out.stderr
    f.chmod(0o600)
    out = subprocess.run([BIN, "get", "jobs", "--server", server.url, "--token-file", str(f)],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([BIN, "get", "jobs", "--server", server.url, "--token", server.token],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0 and "--token-file" in out.stderr  # works, warns


@pytest.fixture
def dev_tls(tmp_path):
    """`starcloud dev` as a user runs it: TLS on, with a CA of its own."""
    env = dict(os.environ, HOME=str(tmp_path / "home"))
    os.makedirs(env["HOME"])
    p = subprocess.Popen([BIN, "dev", "--agents", "1", "--gpus", "1xA100-80GB", "--data-dir",
                          str(tmp_path / "dev")], stdout=subprocess.PIPE, text=True, env=env,
                         stderr=subprocess.DEVNULL)
    try:
        lines = dict(p.stdout.readline().split(":", 1) for _ in range(5))
        info = {"url": lines["server"].strip(), "token": lines["token"].strip(),
                "ca": lines["ca"].split()[0], "tls": str(tmp_path / "dev" / "tls"),
                "home": env["HOME"]}
        s = requests.Session()
        s.trust_env = False  # $REQUESTS_CA_BUNDLE would override verify
        s.verify = info["ca"]
        s.headers["Authorization"] = "Bearer " + info["token"]
        wait_for(lambda: s.get(info["url"] + "/api/v1/nodes/dev-node-0").json().get(
            "status", {}).get("ready"), timeout=15, what="the dev agent over TLS")
        yield info
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=15)


def test_tls_client_without_the_ca_refuses_the_server(dev_tls, tmp_path):
    url = dev_tls["url"]
    assert url.startswith("https://")
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(url + "/healthz", timeout=5)
    assert requests.get(url + "/healthz", timeout=5, verify=dev_tls["ca"]).text == "ok\n"
    # Plain HTTP to the TLS port gets nothing useful.
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(url.replace("https://", "http://") + "/healthz", timeout=5)
    # The CLI: without the CA (and no config naming it) it refuses; with --ca it works,
    # and so does a log read (server -> agent over TLS, with the server's key).
    env = dict(os.environ, HOME=str(tmp_path), STARCLOUD_TOKEN=dev_tls["token"])
    out = subprocess.run([BIN, "get", "nodes", "--server", url], env=env, capture_output=True,
                         text=True, timeout=20)
    assert out.returncode != 0 and "certificate" in out.stderr.lower(), out.stderr
    out = subprocess.run([BIN, "get", "nodes", "--server", url, "--ca", dev_tls["ca"]], env=env,
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 0 and "dev-node-0" in out.stdout, out.stderr
    # apply -f (its own pipelined connection) checks the certificate the same way.
    f = tmp_path / "q.yaml"
    f.write_text("apiVersion: starcloud.dev/v1\nkind: Queue\nmetadata: {name: tlsq}\n"
                 "spec: {resources: {gpu: {quota: 1}}}\n")
    out = subprocess.run([BIN, "apply", "-f", str(f), "--server", url], env=env,
                         capture_output=True, text=True, timeout=20)
    assert out.returncode != 0 and "certificate" in out.stderr.lower(), out.stderr
    out = subprocess.run([BIN, "apply", "-f", str(f), "--server", url, "--ca", dev_tls["ca"]],
                         env=env, capture_output=True, text=True, timeout=20)
    assert out.returncode == 0 and "tlsq" in out.stdout, (out.stdout, out.stderr)
    # The agent's status port speaks TLS too, and answers only the server's key.
    s = requests.Session()
    s.trust_env = False
    s.verify = dev_tls["ca"]
    s.headers["Authorization"] = "Bearer " + dev_tls["token"]
    st = s.get(url + "/api/v1/nodes/dev-node-0").json()["status"]["agent"]
    assert st.get("tls") is True
    r = requests.get("https://%s/pods" % st["address"], verify=dev_tls["ca"],
                     headers={"Authorization": "Bearer " + dev_tls["token"]}, timeout=5)
    assert r.status_code == 401


def test_mtls_agent_without_a_client_certificate_is_refused(dev_tls, tmp_path):
    """A server that wants agents' certificates (--agents-need-cert): an
    agent token alone, or with another node's certificate, is refused."""
    from conftest import Server
    t = dev_tls["tls"]
    s = Server(tmp_path / "srv", extra=[
        "--tls-cert", t + "/server.pem", "--tls-key", t + "/server-key.pem",
        "--tls-client-ca", t + "/ca.pem", "--agents-need-cert"])
    s.url = s.url.replace("http://", "https://")
    import conftest
    orig = conftest.requests.get
    conftest.requests.get = lambda *a, **k: orig(*a, **dict(k, verify=t + "/ca.pem"))
    try:
        s.start()
    finally:
        conftest.requests.get = orig
    try:
        s.read_admin_token()
        admin = s.session()
        admin.trust_env = False
        admin.verify = t + "/ca.pem"
        tok = mint(admin, role="agent", node="dev-node-0")
        base = s.url + "/api/v1"
        hdr = {"Authorization": "Bearer " + tok}
        mine = (t + "/dev-node-0-client.pem", t + "/dev-node-0-client-key.pem")
        # Token without a certificate: refused.
        r = requests.post(base + "/nodes", json=node("dev-node-0", gpus=0), headers=hdr,
                          verify=t + "/ca.pem", timeout=5)
        assert r.status_code == 401
        # Its node's certificate alone authenticates it (no token needed) ...
        r = requests.post(base + "/nodes", json=node("dev-node-0", gpus=0), cert=mine,
                          verify=t + "/ca.pem", timeout=5)
        assert r.status_code == 201, r.text
        # ... and with its token too; but not the token of another node.
        assert requests.get(base + "/tokens/self", headers=hdr, cert=mine,
                            verify=t + "/ca.pem", timeout=5).json()["node"] == "dev-node-0"
        other = mint(admin, role="agent", node="n9")
        r = requests.get(base + "/tokens/self", cert=mine, verify=t + "/ca.pem", timeout=5,
                         headers={"Authorization": "Bearer " + other})
        assert r.status_code == 401
        # A server certificate is no client certificate.
        bad = (t + "/server.pem", t + "/server-key.pem")
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(base + "/tokens/self", cert=bad, verify=t + "/ca.pem", timeout=5)
    finally:
        s.stop()


def answer(url, headers=None, **kw):
    """The body of a 200 answer, None otherwise (not up yet included)."""
    try:
        r = requests.get(url, headers=headers, timeout=5, **kw)
        return r.text if r.ok else None
    except requests.RequestException:
        return None


def test_agent_metrics_need_the_scrape_secret(server, admin, tmp_path):
    """The agent's /metrics names queues, jobs and pods: it answers only the
    bearer of --metrics-token-file's secret (never a Starcloud token, which
    must not be sent to nodes), or everyone with --metrics-public."""
    from agent_util import metrics_secret
    secret, auth = metrics_secret(tmp_path, "the-scrape-secret-42")
    a = Agent(server.url, server.token, "m1", tmp_path / "m1",
              extra=["--metrics-token-file", secret])
    closed = Agent(server.url, server.token, "m2", tmp_path / "m2")
    try:
        url = "http://%s/metrics" % a.addr
        text = wait_for(lambda: answer(url, auth), what="agent /metrics with the secret")
        assert "starcloud_agent_pods" in text
        for hdr in ({}, {"Authorization": "Bearer " + server.token},
                    {"Authorization": "Bearer the-scrape-secret-4"},
                    {"Authorization": "Bearer the-scrape-secret-421"},
                    {"Authorization": "Basic " + auth["Authorization"][7:]}):
            r = requests.get(url, headers=hdr, timeout=5)
            assert r.status_code == 401, (hdr, r.status_code)
            assert "starcloud_agent" not in r.text
        # Without a secret configured nobody reads it (not even an admin).
        curl = "http://%s/metrics" % closed.addr
        wait_for(lambda: answer("http://%s/healthz" % closed.addr), what="m2 up")
        for hdr in ({}, {"Authorization": "Bearer " + server.token}, auth):
            r = requests.get(curl, headers=hdr, timeout=5)
            assert r.status_code == 401 and "--metrics-token-file" in r.text
    finally:
        a.stop()
        closed.stop()
    # A secret others can read is refused at start-up, naming the flag.
    os.chmod(secret, 0o644)
    out = subprocess.run([BIN, "agent", "--server", server.url, "--token", server.token,
                          "--name", "m3", "--metrics-token-file", secret,
                          "--data-dir", str(tmp_path / "m3")],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode != 0
    assert "--metrics-token-file" in out.stderr and "chmod 600" in out.stderr, out.stderr
