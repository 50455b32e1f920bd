"""The web dashboard (/ui) in a real headless Chromium against a real server:
log in with a token, see the cluster applied through the API, see pending
reasons, see watch events arrive live, and see only a tenant's own queues.
Screenshots go to build/test-artifacts/."""
import json
import time

import pytest
import requests

from cdp import browser  # noqa: F401 (fixture)
from conftest import create, job, manifest, node, queue


def login(browser, server, token):
    browser.goto(server.url + "/ui")
    browser.eval("sessionStorage.clear()")
    browser.goto(server.url + "/ui")
    browser.wait_for("!document.getElementById('login').hidden", what="the login form")
    browser.eval("document.getElementById('token').value = %s;"
                 "document.getElementById('login-form').requestSubmit()" % json.dumps(token))
    browser.wait_for("!document.getElementById('app').hidden", what="the dashboard after login")


def painted(browser, rgb):
    """Pixels of the GPU canvas in colour rgb (the map really drew)."""
    return browser.eval("""(() => {
        const c = document.getElementById('gpu-canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4)
            if (d[i] === %d && d[i+1] === %d && d[i+2] === %d) n++;
        return n; })()""" % rgb)


FREE, WHOLE = (0x2c, 0x36, 0x40), (0x3b, 0x82, 0xf6)


def cluster(admin):
    create(admin, "nodes", node("gpu-a1", 8, {"zone": "z1"}))
    create(admin, "nodes", node("gpu-a2", 8, {"zone": "z1"}))
    mig = node("gpu-m1", 4)
    mig["spec"]["gpus"].update({"model": "A100-40GB", "memory": "40Gi", "mig": "dynamic"})
    create(admin, "nodes", mig)
    create(admin, "queues", queue("team-a", 8))
    create(admin, "queues", queue("team-b", 8))


def test_login_rejects_bad_token(browser, server):
    browser.goto(server.url + "/ui")
    browser.eval("sessionStorage.clear()")
    browser.goto(server.url + "/ui")
    browser.eval("document.getElementById('token').value = 'sc_bogus';"
                 "document.getElementById('login-form').requestSubmit()")
    browser.wait_for("document.getElementById('login-error').innerText.includes('401')",
                     what="the 401 message")
    assert browser.eval("sessionStorage.getItem('starcloud.token')") is None
    browser.screenshot("dashboard-login-rejected")


def test_cluster_map(browser, server, admin):
    cluster(admin)
    # Running pods as the server reports them (status written by an admin,
    # which stands in for the scheduler and agents here).
    j = job("train", "team-a", gpus=1, replicas=2)
    j["status"] = {"pods": [
        {"name": "train-worker-0", "phase": "Running", "node": "gpu-a1", "gpus": [0]},
        {"name": "train-worker-1", "phase": "Running", "node": "gpu-a1", "gpus": [1]}]}
    create(admin, "jobs", j)
    s = manifest("Job", "notebook", {"queue": "team-b", "tasks": [
        {"name": "nb", "replicas": 1, "resources": {"gpuFraction": 0.5}}]})
    s["status"] = {"pods": [{"name": "notebook-nb-0", "phase": "Running", "node": "gpu-a2",
                             "gpus": [3], "gpuShare": 500}]}
    create(admin, "jobs", s)
    m = manifest("Job", "infer", {"queue": "team-b", "tasks": [
        {"name": "i", "replicas": 1, "resources": {"mig": "1g.5gb"}}]})
    m["status"] = {"pods": [{"name": "infer-i-0", "phase": "Running", "node": "gpu-m1",
                             "mig": {"gpu": 0, "profile": "1g.5gb", "start": 0}}]}
    create(admin, "jobs", m)
    login(browser, server, server.token)
    # Nodes and jobs are followed by separate watches: the summary shows the
    # nodes first and the pods once the jobs' list arrives, so wait for both.
    summary = browser.wait_for(
        "(t => t.includes('3 nodes') && t.includes('20 GPUs: 2 whole') && t)"
        "(document.getElementById('gpu-summary').innerText)",
        what="3 nodes and the pods in the GPU summary")
    assert "20 GPUs: 2 whole, 1 shared, 1 MIG, 16 free" in summary, summary
    # The canvas really drew the cells: whole-GPU and free colours are there.
    assert painted(browser, WHOLE) > 0 and painted(browser, FREE) > 0
    # Finding a node shows its devices.
    browser.eval("const f = document.getElementById('search'); f.value = 'gpu-a2';"
                 "f.dispatchEvent(new Event('change'))")
    detail = browser.text("node-detail")
    assert "gpu 3: shared 50%: notebook-nb-0" in detail, detail
    running = browser.wait_for("document.getElementById('running').innerText.includes('train')"
                               " && document.getElementById('running').innerText")
    assert "notebook" in running and "infer" in running
    queues = browser.text("queues")
    assert "team-a" in queues and "team-b" in queues
    browser.screenshot("dashboard-cluster")


def explain_reason(server, admin, name, timeout=8):
    """The server's reason for a pending job, from /explain or the status."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = admin.get(admin.base + "/jobs/%s/explain" % name)
        if r.ok and r.text.strip():
            return r.text
        st = admin.get(admin.base + "/jobs/" + name).json().get("status") or {}
        for k in ("pendingReason", "reason", "message"):
            if st.get(k):
                return st[k]
        time.sleep(0.3)
    return None


def test_pending_reason(browser, server, admin):
    cluster(admin)
    create(admin, "jobs", job("too-big", "team-a", gpus=8, replicas=4))
    login(browser, server, server.token)
    browser.wait_for("document.getElementById('pending').innerText.includes('too-big')",
                     what="the pending job")
    browser.wait_for("document.getElementById('gpu-summary').innerText.includes('3 nodes')")
    reason = explain_reason(server, admin, "too-big")
    if not reason:
        browser.screenshot("dashboard-pending-no-reason")
        pytest.skip("the server gives no pending reason yet (scheduling loop and /explain "
                    "come with the server2 branch); the dashboard shows the job as pending")
    browser.wait_for("document.querySelector('[data-job=\"too-big\"] .reason') && "
                     "!document.querySelector('[data-job=\"too-big\"] .reason')"
                     ".classList.contains('muted')", 15, what="the reason on the page")
    shown = browser.eval("document.querySelector('[data-job=\"too-big\"] .reason').innerText")
    assert shown.strip(), "empty reason"
    browser.screenshot("dashboard-pending-reason")


def test_live_event(browser, server, admin):
    cluster(admin)
    login(browser, server, server.token)
    browser.wait_for("document.getElementById('gpu-summary').innerText.includes('3 nodes')")
    browser.wait_for("document.getElementById('conn').innerText === 'live'", what="live watch")
    create(admin, "nodes", node("gpu-late", 8))
    create(admin, "jobs", job("late-job", "team-a"))
    browser.wait_for("document.querySelector('#events li[data-name=\"gpu-late\"]') !== null",
                     what="the node's ADDED event")
    browser.wait_for("document.querySelector('#events li[data-name=\"late-job\"]') !== null",
                     what="the job's ADDED event")
    assert "ADDED Node/gpu-late" in browser.text("events")
    browser.wait_for("document.getElementById('gpu-summary').innerText.includes('4 nodes')",
                     what="the map to grow")
    free = painted(browser, FREE)
    deadline = time.time() + 30
    while free == 0 and time.time() < deadline:
        time.sleep(0.1)
        free = painted(browser, FREE)
    assert free > 0, "the GPU map is blank after the cluster grew"
    admin.delete(admin.base + "/jobs/late-job")
    browser.wait_for("document.getElementById('events').innerText.includes('DELETED Job/late-job')",
                     what="the DELETED event")
    browser.screenshot("dashboard-live-events")


def test_tenant_sees_only_own_queue(browser, server, admin):
    cluster(admin)
    create(admin, "jobs", job("job-of-a", "team-a", gpus=8, replicas=3))
    create(admin, "jobs", job("job-of-b", "team-b", gpus=8, replicas=3))
    r = admin.post(admin.base + "/tokens", json={"role": "tenant", "queues": ["team-a"]})
    assert r.status_code == 201, r.text
    tenant = r.json()["token"]
    # The API filters (checked directly too).
    t = server.session(tenant)
    assert [q["metadata"]["name"] for q in t.get(t.base + "/queues").json()["items"]] == ["team-a"]
    assert [j["metadata"]["name"] for j in t.get(t.base + "/jobs").json()["items"]] == ["job-of-a"]
    login(browser, server, tenant)
    browser.wait_for("document.getElementById('pending').innerText.includes('job-of-a')",
                     what="the tenant's own job")
    browser.wait_for("document.getElementById('queues').innerText.includes('team-a')")
    assert "job-of-b" not in browser.eval("document.body.innerText")
    assert "team-b" not in browser.text("queues")
    assert "tenant" in browser.text("whoami")
    # Other queues' pods are hidden; the devices they hold are drawn as in use
    # (tests/e2e/test_dashboard_ops.py checks that with running pods).
    browser.wait_for("document.getElementById('gpu-scroll').dataset.others === '0'",
                     what="the tenant's device use read")
    # Live events of the other queue do not reach the tenant either.
    create(admin, "jobs", job("job-of-b-2", "team-b"))
    create(admin, "jobs", job("job-of-a-2", "team-a"))
    browser.wait_for("document.getElementById('events').innerText.includes('job-of-a-2')")
    assert "job-of-b" not in browser.eval("document.body.innerText")
    browser.screenshot("dashboard-tenant")
    # Logging out forgets the token.
    browser.eval("document.getElementById('logout').click()")
    assert browser.eval("sessionStorage.getItem('starcloud.token')") is None


def test_ui_assets_served(server):
    r = requests.get(server.url + "/ui")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert "/ui/app.js" in r.text
    r = requests.get(server.url + "/ui/app.js")
    assert r.status_code == 200 and "javascript" in r.headers["Content-Type"]
    assert requests.get(server.url + "/ui/nope.js").status_code == 404
    assert requests.get(server.url + "/uinope").status_code == 404


def test_deployments(browser, server, admin):
    cluster(admin)
    create(admin, "queues", queue("serving", 8))
    create(admin, "deployments", manifest("Deployment", "llama-chat", {
        "queue": "serving", "model": "llama-3-8b", "version": "2", "replicas": 2,
        "template": {"resources": {"gpu": 1}}}))
    login(browser, server, server.token)
    row = "document.querySelector('[data-deployment=\"llama-chat\"]')"
    browser.wait_for(row + " !== null", what="the deployment row")
    text = browser.eval(row + ".innerText")
    assert "llama-3-8b" in text and "v2" in text, text
    # Replicas placed by the scheduler show up as running, and on the GPU map.
    browser.wait_for("%s.innerText.includes('2/2')" % row, 15, what="2/2 replicas running")
    browser.wait_for("document.getElementById('gpu-summary').innerText.includes('2 whole')",
                     what="the replicas' GPUs on the map")
    browser.screenshot("dashboard-deployments")


def test_node_pools_and_autoscaled_deployments(browser, server, admin):
    """The Node pools panel shows a pool's members, the nodes it requested
    and its size over time (a line per poll since the page opened); an
    autoscaled Deployment says so with its limits."""
    create(admin, "queues", queue("serving", 8))
    create(admin, "nodepools", manifest("NodePool", "cloud", {
        "maxNodes": 4, "template": {"cpu": 8, "memory": "32Gi",
                                    "gpus": {"count": 2, "model": "A100-80GB"}},
        "provider": {"exec": {"create": ["true"], "delete": ["true"],
                              "joinTimeout": "10m"}}}))
    create(admin, "jobs", manifest("Job", "needs-pool", {"queue": "serving", "tasks": [
        {"name": "w", "replicas": 1, "command": ["true"], "resources": {"gpu": 1}}]}))
    create(admin, "deployments", manifest("Deployment", "parked", {
        "queue": "serving", "model": "tiny", "version": "1",
        "autoscaling": {"minReplicas": 0, "maxReplicas": 3,
                        "target": {"inflightPerReplica": 4}},
        "template": {"resources": {"gpu": 1}}}))
    login(browser, server, server.token)
    row = "document.querySelector('[data-pool=\"cloud\"]')"
    browser.wait_for(row + " !== null", what="the pool row")
    # One node requested for the waiting job (cells: name, nodes, GPUs, requested).
    browser.wait_for("%s.children[3].innerText === '1'" % row, 20, what="1 node requested")
    assert "– 4" in browser.eval(row + ".innerText")
    # Two polls make a line.
    browser.wait_for("%s.querySelectorAll('polyline').length === 2" % row, 15,
                     what="the size-over-time line")
    dep = "document.querySelector('[data-deployment=\"parked\"]')"
    browser.wait_for(dep + " !== null", what="the deployment row")
    text = browser.eval(dep + ".innerText")
    assert "0/0 (autoscaled 0–3)" in text, text
    browser.screenshot("dashboard-node-pools")
