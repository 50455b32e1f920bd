"""The server's loop never waits for etcd (issue 21, docs/HA.md "Calls off
the loop"): the etcd store's calls wait on its own calls thread, reads come
from the cache, and a stalled etcd call leaves the API answering. A real
etcd; the stall is the store's test hook (STARCLOUD_ETCD_STALL_FILE), which
holds a fenced write on the thread that makes it, as a slow etcd would."""
import os
import signal
import threading
import time

import requests

from agent_util import Agent, metrics_secret, pod_where, pods_of, run_job, setup_queue, wait_for
from conftest import Server, job
from test_ha_failover import etcd1, metric, setup_cluster, wait_all_bound  # noqa: F401

STALL_S = 12
BLOCKING = 'starcloud_store_blocking_calls_total{store="etcd"}'


def start_server(tmp_path, etcd, stall):
    os.environ["STARCLOUD_ETCD_STALL_FILE"] = stall
    try:
        # A long lease: the stall must not cost leadership in this test
        # (test_ha_failover shows what happens when it does).
        srv = Server(tmp_path / "s", ["--store", etcd.store_url, "--leader-ttl", "60"]).start()
    finally:
        del os.environ["STARCLOUD_ETCD_STALL_FILE"]
    srv.read_admin_token()
    return srv


def wait_gone(path, timeout=20):
    deadline = time.time() + timeout
    while os.path.exists(path):
        assert time.time() < deadline, "the stall never began"
        time.sleep(0.05)


def test_stalled_etcd_write_leaves_reads_answering(tmp_path, etcd1):  # noqa: F811
    stall = str(tmp_path / "stall")
    srv = start_server(tmp_path, etcd1, stall)
    try:
        admin = srv.session()
        setup_cluster(admin, nodes=1)
        assert admin.post(admin.base + "/jobs", json=job("before")).status_code == 201
        wait_all_bound(admin, ["before"])
        blocking = metric(srv, BLOCKING)
        # The next fenced write (the cycle that binds "trigger") stalls.
        with open(stall, "w") as f:
            f.write("%d" % STALL_S)
        assert admin.post(admin.base + "/jobs", json=job("trigger")).status_code == 201
        wait_gone(stall)
        t_stall = time.time()
        # A write queued behind the stalled one waits for it...
        late = {}

        def post_late():
            s = srv.session()
            late["code"] = s.post(s.base + "/jobs", json=job("late"), timeout=60).status_code
            late["t"] = time.time()

        writer = threading.Thread(target=post_late)
        writer.start()
        # ... while reads, health and metrics are answered meanwhile.
        r = admin.get(admin.base + "/jobs/before", timeout=STALL_S / 2)
        assert r.status_code == 200 and r.json()["metadata"]["name"] == "before"
        r = admin.get(admin.base + "/jobs", timeout=STALL_S / 2)
        assert r.status_code == 200
        assert {"before", "trigger"} <= {j["metadata"]["name"] for j in r.json()["items"]}
        assert requests.get(srv.url + "/healthz", timeout=STALL_S / 2).status_code == 200
        assert metric(srv, 'starcloud_store_calls_pending{store="etcd"}') >= 1
        t_reads = time.time()
        assert writer.is_alive(), "the write did not wait for the stalled call"
        assert t_reads - t_stall < STALL_S / 2, "reads waited for etcd"
        writer.join(timeout=STALL_S + 30)
        assert late.get("code") == 201
        assert late["t"] - t_stall >= STALL_S - 1, "the late write passed the stalled one"
        # The stalled write goes through (still the leader): all bound.
        wait_all_bound(admin, ["before", "trigger", "late"])
        # No call of the loop waited for etcd meanwhile (reads, writes,
        # the scheduler, the controllers, the election all went through
        # the calls thread without the loop waiting).
        assert metric(srv, BLOCKING) == blocking == 0
    finally:
        srv.stop(signal.SIGKILL)


def test_write_then_read_sees_it_on_etcd(tmp_path, etcd1):  # noqa: F811
    """An answered write is in the cache that serves reads: create, update
    and delete are seen by the very next request, each time."""
    srv = start_server(tmp_path, etcd1, str(tmp_path / "never"))
    try:
        admin = srv.session()
        setup_cluster(admin, nodes=1)
        for i in range(20):
            name = "rw%02d" % i
            r = admin.post(admin.base + "/jobs", json=job(name))
            assert r.status_code == 201, r.text
            rv = r.json()["metadata"]["resourceVersion"]
            g = admin.get(admin.base + "/jobs/" + name)
            assert g.status_code == 200
            assert int(g.json()["metadata"]["resourceVersion"]) >= int(rv)
            d = admin.delete(admin.base + "/jobs/" + name)
            assert d.status_code == 200, d.text
            assert admin.get(admin.base + "/jobs/" + name).status_code == 404
        # A stale resourceVersion is still refused (the condition is etcd's).
        r = admin.post(admin.base + "/jobs", json=job("cond"))
        body = r.json()
        body["metadata"]["resourceVersion"] = "1"
        r = admin.put(admin.base + "/jobs/cond", json=body)
        assert r.status_code == 409, r.text
    finally:
        srv.stop(signal.SIGKILL)


def agent_metric(agent, name):
    try:
        text = requests.get("http://%s/metrics" % agent.addr, timeout=2,
                            headers=agent.metrics_auth).text
    except requests.RequestException:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_agent_heartbeats_go_on_while_etcd_stalls(tmp_path, etcd1):  # noqa: F811
    """A node's heartbeats are answered while a store call stalls (its
    lease is the server's memory; its reports are written behind the stalled
    call): the agent never sees a failing heartbeat, its pod keeps running,
    and the reports reach the store afterwards."""
    stall = str(tmp_path / "stall")
    srv = start_server(tmp_path, etcd1, stall)
    secret, auth = metrics_secret(tmp_path)  # the agent's /metrics needs it
    agent = Agent(srv.url, srv.token, "n1", tmp_path / "agent",
                  extra=["--metrics-token-file", secret])
    agent.metrics_auth = auth
    try:
        admin = srv.session()
        setup_queue(admin)
        run_job(admin, "a", ["sleep", "600"])
        running = lambda p: p.get("phase") == "Running" and p.get("startedAt")  # noqa: E731
        wait_for(pod_where(admin, "a", "a-main-0", running), timeout=30)
        wait_for(lambda: agent_metric(agent, "starcloud_agent_heartbeat_failing") == 0)
        with open(stall, "w") as f:
            f.write("%d" % STALL_S)
        run_job(admin, "b", ["sleep", "600"])  # its binding is the stalled write
        wait_gone(stall)
        t_stall = time.time()
        seen = 0
        while time.time() < t_stall + STALL_S - 2:
            assert agent_metric(agent, "starcloud_agent_heartbeat_failing") == 0
            assert agent_metric(agent, "starcloud_agent_fenced") == 0
            seen += 1
            time.sleep(0.5)
        assert seen >= 5
        assert metric(srv, 'starcloud_store_calls_pending{store="etcd"}') >= 1
        # After the stall: "b" is bound and runs, "a" never restarted.
        wait_for(pod_where(admin, "b", "b-main-0", running), timeout=30)
        assert pods_of(admin, "a")["a-main-0"].get("restarts", 0) == 0
        assert agent_metric(agent, "starcloud_agent_fenced") == 0
    finally:
        agent.stop()
        srv.stop(signal.SIGKILL)


def test_node_pool_on_etcd_makes_no_blocking_call(tmp_path, etcd1):  # noqa: F811
    """The node-pool controller's status writes and the token it mints for
    each dev agent go through the store's asynchronous calls: a pool on etcd
    that brings up its minimum node (token stored, written to the agent's
    file, agent started, joined) and records it makes no blocking call."""
    from test_nodepool import pool, pool_status  # its helpers; not its tests

    srv = start_server(tmp_path, etcd1, str(tmp_path / "never"))
    try:
        admin = srv.session()
        setup_queue(admin)
        r = admin.post(admin.base + "/nodepools", json=pool("devp", {"minNodes": 1}))
        assert r.status_code == 201, r.text
        st = wait_for(lambda: (lambda s: s.get("members") == 1 and s.get("requested") == 0
                               and s)(pool_status(admin, "devp")),
                      timeout=120, what="the pool's minimum node joined")
        node = st["nodes"][0]["name"]
        cfg = os.path.join(srv.data_dir, "pools", node, "agent.yaml")
        assert open(cfg).read().startswith('token: "sc_')
        assert metric(srv, BLOCKING) == 0
    finally:
        srv.stop()
