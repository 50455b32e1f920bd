"""The dashboard's operator views in a real headless Chromium against a real
server (issue 20): the rollout column read from the server's rollout status,
queue bars on one scale, the GPU map grouped by zone/rack/model with names,
other queues' use drawn as "in use" for a tenant, search and filters, the
job page (pods, explain, events, logs through the server) and the history
charts. Screenshots go to build/test-artifacts/dashboard-*.png."""
import json
import time

from agent_util import Agent, run_job, setup_queue, wait_for
from cdp import browser  # noqa: F401 (fixture)
from conftest import create, job, manifest, node, queue


def login(browser, server, token, hash=""):
    browser.goto(server.url + "/ui")
    browser.eval("sessionStorage.clear(); location.hash = ''")
    browser.goto(server.url + "/ui" + hash)
    browser.wait_for("!document.getElementById('login').hidden", what="the login form")
    browser.eval("document.getElementById('token').value = %s;"
                 "document.getElementById('login-form').requestSubmit()" % json.dumps(token))
    browser.wait_for("!document.getElementById('app').hidden", what="the dashboard after login")


def running_job(admin, name, q, pods):
    """A job with Running pods as the scheduler and agents report them
    (an admin's status write stands in for both)."""
    j = job(name, q, gpus=1, replicas=len(pods))
    j["status"] = {"pods": pods}
    create(admin, "jobs", j)


def test_rollout_column(browser, server, admin):
    create(admin, "queues", queue("serving", 16))
    for i in range(2):
        create(admin, "nodes", node("s%d" % i, 8))
    d = manifest("Deployment", "chat", {"queue": "serving", "model": "llama-3-8b", "version": "2",
                                        "replicas": 2, "template": {"resources": {"gpu": 1}},
                                        "rollout": {"steps": [10, 50, 100],
                                                    "analysisWindow": "60s"}})
    create(admin, "deployments", d)
    wait_for(lambda: admin.get(admin.base + "/deployments/chat").json().get("status", {})
             .get("rollout"), what="the first rollout status")
    got = admin.get(admin.base + "/deployments/chat").json()
    got["spec"]["version"] = "3"
    for _ in range(20):
        r = admin.put(admin.base + "/deployments/chat", json=got)
        if r.status_code != 409:
            break
        got = dict(admin.get(admin.base + "/deployments/chat").json(), spec=got["spec"])
    assert r.status_code == 200, r.text
    ro = wait_for(lambda: (lambda x: x if x.get("canary") else None)(
        admin.get(admin.base + "/deployments/chat/rollout").json().get("rollout") or {}),
        what="a canary rollout on the server")
    assert ro["weights"], ro
    login(browser, server, server.token)
    cell = "document.querySelector('[data-deployment=\"chat\"] td.split')"
    split = browser.wait_for("%s && %s.innerText.includes('%%') && %s.innerText" % (cell, cell, cell),
                             what="the traffic split")
    for v, pct in ro["weights"].items():
        assert "v%s %s%%" % (v, pct) in split, (split, ro["weights"])
    rollout = browser.eval("document.querySelector('[data-deployment=\"chat\"] td.rollout').innerText")
    assert ro["phase"] in rollout and "v2 → v3" in rollout, rollout
    assert "no rollout status" not in rollout
    browser.screenshot("dashboard-rollout")


def test_queue_bars_one_scale(browser, server, admin):
    create(admin, "nodes", node("n0", 8))
    create(admin, "queues", queue("big", 8))
    create(admin, "queues", manifest("Queue", "a-very-long-queue-name-indeed",
                                   {"resources": {"gpu": {"quota": 2}}}))
    running_job(admin, "hog", "big", [{"name": "hog-worker-%d" % i, "phase": "Running",
                                       "node": "n0", "gpus": [i]} for i in range(4)])
    login(browser, server, server.token)
    browser.wait_for("document.getElementById('queue-source').innerText.includes('one scale')",
                     what="the scheduler's figures")
    bars = browser.eval("""[...document.querySelectorAll('#queues .qbar')].map(b => ({
        q: b.parentElement.dataset.queue === undefined ? b.closest('.qrow').dataset.queue : b.closest('.qrow').dataset.queue,
        w: b.getBoundingClientRect().width,
        x: b.getBoundingClientRect().left,
        quota: (b.querySelector('.quota') || {}).offsetLeft}))""")
    assert len(bars) == 2
    # every bar the same width and at the same place: one column of the grid
    assert abs(bars[0]["w"] - bars[1]["w"]) < 0.5 and abs(bars[0]["x"] - bars[1]["x"]) < 0.5
    # one scale: quota 8 is four times quota 2
    by = {b["q"]: b for b in bars}
    assert abs(by["big"]["quota"] - 4 * by["a-very-long-queue-name-indeed"]["quota"]) <= 2, by
    browser.screenshot("dashboard-queue-bars")


def test_map_groups_names_search(browser, server, admin):
    for z, r, name, model in (("z1", "r1", "a1", "A100-80GB"), ("z1", "r1", "a2", "A100-80GB"),
                              ("z1", "r2", "b1", "A100-80GB"), ("z2", "r9", "h1", "H100-80GB")):
        n = node(name, 8, {"zone": z, "rack": r})
        n["spec"]["gpus"]["model"] = model
        create(admin, "nodes", n)
    login(browser, server, server.token)
    grp = "document.getElementById('gpu-scroll').dataset.groups"
    browser.wait_for("%s === '3'" % grp, what="three zone/rack groups")
    browser.eval("{const g = document.getElementById('group-by'); g.value = 'model';"
                 "g.dispatchEvent(new Event('change'))}")
    browser.wait_for("%s === '2'" % grp, what="two model groups")
    browser.eval("{const g = document.getElementById('group-by'); g.value = 'zone';"
                 "g.dispatchEvent(new Event('change'))}")
    browser.wait_for("%s === '2'" % grp, what="two zones")
    # names and headers are drawn on the canvas: text pixels in the header row
    assert browser.eval("""(() => { const c = document.getElementById('gpu-canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, 14 * (window.devicePixelRatio||1)).data;
        let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i] > 150 && d[i+1] > 150) n++;
        return n; })()""") > 20, "no header text on the map"
    # search dims what does not match and says how many match
    browser.eval("{const s = document.getElementById('search'); s.value = 'rack=r1';"
                 "s.dispatchEvent(new Event('input'))}")
    browser.wait_for("document.getElementById('gpu-summary').innerText.includes('2 of 4 nodes match')",
                     what="2 nodes matching rack=r1")
    browser.screenshot("dashboard-map-groups")
    browser.eval("{const s = document.getElementById('search'); s.value = '';"
                 "s.dispatchEvent(new Event('input'))}")


def test_filters_on_job_lists(browser, server, admin):
    create(admin, "nodes", node("n0", 8))
    for q in ("qa", "qb"):
        create(admin, "queues", queue(q, 8))
    running_job(admin, "alpha", "qa", [{"name": "alpha-worker-0", "phase": "Running",
                                        "node": "n0", "gpus": [0]}])
    running_job(admin, "beta", "qb", [{"name": "beta-worker-0", "phase": "Running",
                                       "node": "n0", "gpus": [1]}])
    login(browser, server, server.token)
    run = "document.getElementById('running').innerText"
    browser.wait_for("%s.includes('alpha') && %s.includes('beta')" % (run, run), what="both jobs")
    browser.wait_for("document.getElementById('queue-filter').options.length === 3",
                     what="the queue filter's choices")
    browser.eval("{const f = document.getElementById('queue-filter'); f.value = 'qb';"
                 "f.dispatchEvent(new Event('change'))}")
    browser.wait_for("!%s.includes('alpha') && %s.includes('beta')" % (run, run),
                     what="only qb's job")
    assert "1 running (of 2)" in browser.text("running-count")
    browser.eval("{const f = document.getElementById('queue-filter'); f.value = '';"
                 "f.dispatchEvent(new Event('change'));"
                 "const s = document.getElementById('search'); s.value = 'alp';"
                 "s.dispatchEvent(new Event('input'))}")
    browser.wait_for("%s.includes('alpha') && !%s.includes('beta')" % (run, run),
                     what="the search")


def test_tenant_sees_others_in_use(browser, server, admin):
    create(admin, "nodes", node("n0", 8))
    create(admin, "queues", queue("mine", 8))
    create(admin, "queues", queue("theirs", 8))
    running_job(admin, "ours", "mine", [{"name": "ours-worker-0", "phase": "Running",
                                         "node": "n0", "gpus": [0]}])
    running_job(admin, "secret", "theirs", [{"name": "secret-worker-%d" % i, "phase": "Running",
                                             "node": "n0", "gpus": [i + 1]} for i in range(3)])
    tok = admin.post(admin.base + "/tokens", json={"role": "tenant", "queues": ["mine"]}).json()["token"]
    # the API says how much is held, never by whom
    t = server.session(tok)
    use = t.get(t.base + "/scheduler/devices").json()["nodes"]
    assert use["n0"][:4] == [1000, 1000, 1000, 1000] and "secret" not in json.dumps(use)
    login(browser, server, tok)
    browser.wait_for("document.getElementById('gpu-scroll').dataset.others === '3'",
                     what="3 devices in use by other queues")
    summary = browser.text("gpu-summary")
    assert "1 whole" in summary and "3 in use by queues this token cannot see" in summary
    assert "4 free" in summary, summary
    assert "secret" not in browser.eval("document.body.innerText")
    browser.screenshot("dashboard-tenant-others")


def test_job_page(browser, server, admin, tmp_path):
    """Pods, why it waits, events, and logs read through the server."""
    setup_queue(admin, "q", 4)
    a = Agent(server.url, server.token, "n1", tmp_path / "n1")
    try:
        run_job(admin, "hello", ["sh", "-c", "echo hello-from-the-pod; sleep 30"])
        create(admin, "jobs", manifest("Job", "huge", {"queue": "q", "tasks": [
            {"name": "w", "replicas": 1, "resources": {"gpu": 64}}]}))
        wait_for(lambda: any(p.get("phase") == "Running" for p in
                             admin.get(admin.base + "/jobs/hello").json()
                             .get("status", {}).get("pods", [])), what="hello running")
        login(browser, server, server.token, hash="#job/huge")
        page = "document.getElementById('job-page')"
        browser.wait_for("!%s.hidden && document.getElementById('jp-explain') &&"
                         " document.getElementById('jp-explain').innerText.includes('GPU')" % page,
                         what="the job page with explain")
        assert "Pending" in browser.eval(page + ".innerText")
        ex = browser.text("jp-explain")
        assert "no node fits" in ex or "lack" in ex, ex
        browser.wait_for("document.getElementById('jp-events') && "
                         "document.getElementById('jp-events').innerText.includes('Pending')",
                         what="the job's events")
        browser.screenshot("dashboard-job-pending")
        # a running job, opened from the running list
        browser.wait_for("document.querySelector('#running a[href=\"#job/hello\"]') !== null",
                         what="the link in the running list")
        browser.eval("document.querySelector('#running a[href=\"#job/hello\"]').click()")
        browser.wait_for("document.getElementById('jp-pods') && "
                         "document.getElementById('jp-pods').innerText.includes('hello-main-0')",
                         what="the pods table")
        assert "n1" in browser.text("jp-pods") and "Running" in browser.text("jp-pods")
        browser.eval("document.getElementById('jp-log-load').click()")
        # The pod's output, read through the server (issue 15's
        # GET /api/v1/jobs/NAME/logs): the page shows it, and every request
        # the page made went to the server, none to the node's agent.
        browser.wait_for("document.getElementById('jp-logs').innerText"
                         ".includes('hello-from-the-pod')", what="the pod's logs on the page")
        urls = browser.eval("performance.getEntriesByType('resource').map(e => e.name)")
        assert any("/api/v1/jobs/hello/logs?pod=hello-main-0" in u for u in urls), urls
        others = [u for u in urls if not u.startswith(server.url + "/")]
        assert not others, "the page asked something other than its server: %s" % others
        browser.screenshot("dashboard-job-running")
        browser.eval("location.hash = ''")
        browser.wait_for("document.getElementById('job-page').hidden", what="the page to close")
    finally:
        a.stop()


def test_history_charts(browser, server, admin):
    create(admin, "nodes", node("n0", 8))
    create(admin, "queues", queue("research", 8))
    create(admin, "queues", manifest("Queue", "llm", {"parentQueue": "research",
                                                    "resources": {"gpu": {"quota": 4}}}))
    create(admin, "queues", manifest("Queue", "vision", {"parentQueue": "research",
                                                       "resources": {"gpu": {"quota": 4}}}))
    create(admin, "jobs", job("train", "llm", gpus=2, replicas=2))
    create(admin, "jobs", job("waits", "vision", gpus=8, replicas=2))
    # the ring takes the first cycle of each 10 s window: that cycle may have
    # run before train was placed, so llm's GPUs can take until the next window
    hist = wait_for(lambda: (lambda s: s if s and s[-1]["queues"].get("llm", {}).get("allocated")
                             else None)(admin.get(admin.base + "/scheduler/history").json()["samples"]),
                    timeout=25, what="a history sample with llm's GPUs")
    assert hist[-1]["queues"]["llm"]["allocated"] == 4
    assert hist[-1]["queues"]["vision"]["pending"] == 1 and hist[-1]["gpus"] == 8
    login(browser, server, server.token)
    browser.wait_for("document.getElementById('hist-alloc').dataset.samples >= 1",
                     what="samples in the chart")
    # leaf queues only (llm, vision) plus the cluster's two dashed lines
    assert browser.eval("document.getElementById('hist-alloc').dataset.series") == "4"
    assert browser.eval("document.getElementById('hist-pending').dataset.series") == "2"
    legend = browser.text("hist-legend")
    assert "llm" in legend and "vision" in legend and "research" not in legend
    # wait for a second sample (one per 10 s) so the charts draw lines
    browser.wait_for("document.getElementById('hist-alloc').dataset.samples >= 2", 35,
                     what="a second sample")
    assert float(browser.eval("document.getElementById('hist-alloc').dataset.max")) >= 8
    browser.eval("document.getElementById('history').scrollIntoView()")
    browser.screenshot("dashboard-history")
    # since= returns only newer samples; a bad one is refused
    last = admin.get(admin.base + "/scheduler/history").json()["samples"][-1]["unix"]
    assert admin.get(admin.base + "/scheduler/history", params={"since": last}).json()["samples"] == []
    r = admin.get(admin.base + "/scheduler/history", params={"since": "yesterday"})
    assert r.status_code == 400 and r.json()["error"]["field"] == "since"
