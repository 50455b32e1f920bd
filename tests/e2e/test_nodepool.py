"""Node pools end to end (issue 18, docs/AUTOSCALING.md): a real server whose
pool controller starts and stops real `starcloud agent` processes (the dev
provider) or runs a pool's exec commands, driven by the scheduler's own
scale-up and scale-down plans."""
import os
import stat
import subprocess

import requests

from agent_util import pods_of, processes_with_env, run_job, setup_queue, wait_for
from conftest import BIN, manifest
from test_metrics_lint import lint
from test_serving import free_port as port_block


def pool(name, spec_extra=None, provider=None, gpus=2, labels=None):
    spec = {"maxNodes": 3, "scaleDownAfter": "2s",
            "template": {"cpu": 4, "memory": "8Gi",
                         "gpus": {"count": gpus, "model": "A100-80GB"}},
            "provider": provider or {"dev": {"joinTimeout": "60s"}}}
    if labels:
        spec["template"]["labels"] = labels
    spec.update(spec_extra or {})
    return manifest("NodePool", name, spec)


def pool_status(s, name):
    r = s.get(s.base + "/nodepools/" + name)
    assert r.ok, r.text
    return r.json().get("status", {})


def pool_events(s, name):
    r = s.get(s.base + "/events")
    assert r.ok, r.text
    return [e for e in r.json()["items"]
            if e.get("involvedObject", {}).get("kind") == "NodePool"
            and e["involvedObject"].get("name") == name]


def pool_nodes(s, name):
    r = s.get(s.base + "/nodes")
    assert r.ok, r.text
    return sorted(n["metadata"]["name"] for n in r.json()["items"]
                  if n["metadata"].get("labels", {}).get("starcloud.dev/pool") == name)


def cmdlines_with(text):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cl = f.read().decode(errors="replace")
            with open("/proc/%s/stat" % pid) as f:
                st = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cl and st not in ("Z", "X"):
            found.append(int(pid))
    return found


def test_gang_that_does_not_fit_grows_the_pool_then_it_shrinks(server, admin):
    """A 2-pod gang of 2 GPUs each on an empty cluster: the pool asks for both
    nodes at once, the dev agents join, the gang runs on them; once it is done
    the idle nodes are cordoned and deleted after scaleDownAfter, agents
    stopped, never below minNodes (1 here)."""
    setup_queue(admin)
    r = admin.post(admin.base + "/nodepools", json=pool("dev2", {"minNodes": 1}))
    assert r.status_code == 201, r.text
    # The minimum comes first, by itself.
    wait_for(lambda: len(pool_nodes(admin, "dev2")) == 1, timeout=60, what="minimum node")
    wait_for(lambda: (lambda st: st.get("members") == 1 and st.get("requested") == 0)(
        pool_status(admin, "dev2")), timeout=30, what="minimum node joined")
    run_job(admin, "gang", ["sh", "-c", "sleep 2"], replicas=3, gpu=2,
            restartPolicy="Never")

    # The dev agents may join before a poll sees the job wait: its Pending
    # event keeps the reason.
    ev = wait_for(lambda: [e for e in admin.get(admin.base + "/events").json()["items"]
                           if e.get("involvedObject", {}).get("name") == "gang"
                           and "of pool dev2" in e.get("message", "")],
                  timeout=30, what="Pending event naming the pool")
    assert ev[0]["message"] == "waiting for 2 nodes of pool dev2 (requested 0 s ago)", ev
    # Two requested in one step (a gang whole), not one by one.
    ups = wait_for(lambda: [e for e in pool_events(admin, "dev2") if e["reason"] == "ScaleUp"
                            and "waiting job" in e["message"]], what="ScaleUp event")
    assert ups[0]["message"].startswith("requested 2 nodes for 1 waiting job"), ups
    pods = wait_for(lambda: (lambda p: len(p) == 3 and all(x["phase"] == "Succeeded"
                                                           for x in p.values()) and p)(
        pods_of(admin, "gang")), timeout=90, what="gang done on pool nodes")
    used = sorted({p["node"] for p in pods.values()})
    assert len(used) == 3 and all(n.startswith("dev2-") for n in used), used
    st = pool_status(admin, "dev2")
    assert st["members"] == 3 and st["gpus"] == 6
    m = admin.get(server.url + "/metrics").text
    assert 'starcloud_nodepool_scale_up_nodes_total{pool="dev2"} 3' in m, m
    # Idle: two go after 2 s, one stays (minNodes).
    wait_for(lambda: len(pool_nodes(admin, "dev2")) == 1 and
             pool_status(admin, "dev2").get("removing") == 0 and
             len(pool_status(admin, "dev2").get("nodes", [])) == 1,
             timeout=60, what="scale-down to the minimum")
    downs = [e for e in pool_events(admin, "dev2") if e["reason"] == "ScaledDown"]
    assert len(downs) == 2, downs
    left = pool_nodes(admin, "dev2")[0]
    gone = [n for n in used if n != left]
    for n in gone:
        wait_for(lambda: not cmdlines_with("--name\0%s\0" % n), what="agent %s stopped" % n)
    kept = cmdlines_with("--name\0%s\0" % left)
    assert kept, "the kept node's agent runs"
    # Its token is in a file only the server's user reads, not on its
    # command line (which every user of the machine can see).
    with open("/proc/%d/cmdline" % kept[0], "rb") as f:
        cl = f.read().decode()
    assert "--token" not in cl and "\0sc_" not in cl, cl
    cfg = os.path.join(server.data_dir, "pools", left, "agent.yaml")
    assert stat.S_IMODE(os.stat(cfg).st_mode) == 0o600
    assert open(cfg).read().startswith('token: "sc_')
    m = admin.get(server.url + "/metrics").text
    assert 'starcloud_nodepool_scale_down_nodes_total{pool="dev2"} 2' in m, m
    # It stays at its minimum.
    r = admin.get(admin.base + "/nodes/" + left)
    assert r.ok and not r.json()["spec"].get("unschedulable"), r.text


def test_work_no_pool_can_help_asks_for_nothing(server, admin):
    """Quota-blocked work, a selector no template has and a gang larger than
    the pool's maximum ask for no node: the pool stays empty."""
    r = admin.post(admin.base + "/queues", json=manifest(
        "Queue", "small", {"resources": {"gpu": {"quota": 2, "limit": 2}}}))
    assert r.status_code == 201, r.text
    setup_queue(admin)
    r = admin.post(admin.base + "/nodepools", json=pool("p", labels={"zone": "z1"}))
    assert r.status_code == 201, r.text
    run_job(admin, "over-limit", ["true"], replicas=2, gpu=2, q="small")
    r = admin.post(admin.base + "/jobs", json=manifest("Job", "elsewhere", {
        "queue": "q", "tasks": [{"name": "w", "replicas": 1, "command": ["true"],
                                 "resources": {"gpu": 1}, "nodeSelector": {"zone": "z9"}}]}))
    assert r.status_code == 201, r.text
    run_job(admin, "too-big", ["true"], replicas=4, gpu=2)

    def reasons():
        out = {}
        for j in ("over-limit", "elsewhere", "too-big"):
            st = admin.get(admin.base + "/jobs/" + j).json().get("status", {})
            if not st.get("reason"):
                return None
            out[j] = st
        return out
    st = wait_for(reasons, timeout=20, what="pending reasons")
    for j, s in st.items():
        assert "of pool" not in s["reason"] and "waitingFor" not in s, (j, s)
    # Several cycles later still nothing requested.
    before = admin.get(admin.base + "/jobs/too-big").json()["metadata"]["resourceVersion"]
    wait_for(lambda: pool_status(admin, "p").get("members") == 0 and
             admin.get(admin.base + "/jobs/too-big").json()["metadata"][
                 "resourceVersion"] == before, what="a quiet pool")
    import time
    time.sleep(3)
    st = pool_status(admin, "p")
    assert st.get("requested", 0) == 0 and not st.get("nodes"), st
    assert not [e for e in pool_events(admin, "p") if e["reason"] == "ScaleUp"]


def write_script(path, body):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return str(path)


def test_exec_provider_join_timeout_and_failure(server, admin, tmp_path):
    """exec: the create command gets the pool and node in its environment;
    a node that never joins is given up after joinTimeout (delete command
    run, counted); a failing create is an event with its output, and the
    pool backs off."""
    setup_queue(admin)
    log = tmp_path / "calls"
    create = write_script(tmp_path / "create.sh",
                          'echo "$STARCLOUD_ACTION $STARCLOUD_POOL $STARCLOUD_NODE_NAME '
                          '$STARCLOUD_NODE_GPUS $STARCLOUD_NODE_LABELS" '
                          '>> %s\n' % log)
    delete = write_script(tmp_path / "delete.sh",
                          'echo "$STARCLOUD_ACTION $STARCLOUD_NODE_NAME" >> %s\n' % log)
    r = admin.post(admin.base + "/nodepools", json=pool(
        "cloud", {"maxNodes": 1},
        provider={"exec": {"create": [create], "delete": [delete], "joinTimeout": "4s"}},
        labels={"zone": "z1"}))
    assert r.status_code == 201, r.text
    run_job(admin, "one", ["true"], gpu=1)
    # explain says what it waits for while the node is on its way.
    ex = wait_for(lambda: (lambda e: "of pool cloud" in (e.get("reason") or "") and e)(
        admin.get(admin.base + "/jobs/one/explain").json()), what="explain")
    assert ex["reason"].startswith("waiting for 1 node of pool cloud (requested "), ex
    st = admin.get(admin.base + "/jobs/one").json()["status"]
    assert [(w["pool"], w["nodes"]) for w in st["waitingFor"]] == [("cloud", 1)], st

    def calls():
        try:
            with open(log) as f:
                return f.read().splitlines()
        except OSError:
            return []
    got = wait_for(lambda: [c for c in calls() if c.startswith("delete")] and calls(),
                   timeout=30, what="create then delete")
    first = got[0].split(" ")
    assert first[0] == "create" and first[1] == "cloud" and first[2].startswith("cloud-")
    assert first[3] == "2xA100-80GB" and "zone=z1" in first[4]
    assert "starcloud.dev/pool=cloud" in first[4]
    assert got[1] == "delete " + first[2]
    wait_for(lambda: pool_status(admin, "cloud").get("joinFailures", 0) >= 1,
             what="join failure counted")
    ev = [e for e in pool_events(admin, "cloud") if e["reason"] == "NodeJoinTimeout"]
    assert ev and first[2] in ev[0]["message"]
    m = admin.get(server.url + "/metrics").text
    assert 'starcloud_nodepool_join_timeouts_total{pool="cloud"} 1' in m

    # A create command that fails: an event with its output.
    bad = write_script(tmp_path / "bad.sh", 'echo "quota exceeded in z1" >&2; exit 7\n')
    r = admin.post(admin.base + "/nodepools", json=pool(
        "broken", {"maxNodes": 1},
        provider={"exec": {"create": [bad], "delete": [delete]}}))
    assert r.status_code == 201, r.text
    ev = wait_for(lambda: [e for e in pool_events(admin, "broken")
                           if e["reason"] == "ProvisionFailed"], timeout=30,
                  what="ProvisionFailed")
    assert "quota exceeded in z1" in ev[0]["message"] and "exit status 7" in ev[0]["message"]
    m = admin.get(server.url + "/metrics").text
    assert 'starcloud_nodepool_provider_failures_total{pool="broken",action="create"}' in m
    lint(m, "server with node pools")
    # The CLI lists them.
    env = dict(os.environ, STARCLOUD_SERVER=server.url, STARCLOUD_TOKEN=server.token)
    out = subprocess.run([BIN, "get", "nodepools"], env=env, capture_output=True, text=True,
                         timeout=10)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "MEMBERS" in lines[0] and "REQUESTED" in lines[0] and "WAITING" in lines[0], lines
    assert {ln.split()[0] for ln in lines[1:]} == {"cloud", "broken"}, lines


def test_bad_nodepools_are_refused_naming_the_field(server, admin):
    cases = [
        ({"maxNodes": -1}, "maxNodes"),
        ({"minNodes": 5, "maxNodes": 2}, "minNodes"),
        ({"maxGPUs": "lots"}, "maxGPUs"),
        ({"scaleDownAfter": "soon"}, "scaleDownAfter"),
        ({"provider": {"dev": {}, "exec": {"create": ["x"], "delete": ["y"]}}}, "provider"),
        ({"provider": {"exec": {"create": [], "delete": ["y"]}}}, "create"),
        ({"provider": {"dev": {"joinTimeout": "0s"}}}, "joinTimeout"),
        ({"template": {"cpu": 4, "memory": "8Gi", "gpus": {"count": -2}}}, "count"),
        ({"template": {"cpu": 4, "memory": "8Gi",
                       "labels": {"starcloud.dev/pool": "other"}}}, "starcloud.dev/pool"),
        ({"colour": "blue"}, "colour"),
    ]
    for extra, field in cases:
        body = pool("bad", extra)
        r = admin.post(admin.base + "/nodepools", json=body)
        assert r.status_code == 400, (extra, r.text)
        assert field in r.text, (extra, r.text)
    assert admin.get(admin.base + "/nodepools/bad").status_code == 404
    # A good one, then a bad update: the stored one stays.
    r = admin.post(admin.base + "/nodepools", json=pool("good"))
    assert r.status_code == 201, r.text
    body = r.json()
    body["spec"]["maxNodes"] = -3
    r = admin.put(admin.base + "/nodepools/good", json=body)
    assert r.status_code == 400 and "maxNodes" in r.text, r.text
    assert admin.get(admin.base + "/nodepools/good").json()["spec"]["maxNodes"] == 3


def test_only_admins_write_nodepools(server, admin):
    """An exec pool runs commands on the server's machine: tenants and
    agents may not create one."""
    setup_queue(admin)
    r = admin.post(admin.base + "/tokens", json={"role": "tenant", "queues": ["q"]})
    assert r.status_code == 201, r.text
    tenant = server.session(r.json()["token"])
    r = tenant.post(tenant.base + "/nodepools", json=pool(
        "evil", provider={"exec": {"create": ["/bin/sh", "-c", "touch /tmp/pwned"],
                                   "delete": ["true"]}}))
    assert r.status_code == 403, r.text
    assert admin.get(admin.base + "/nodepools/evil").status_code == 404
    # Tenants may read the pools (capacity is a cluster fact).
    assert tenant.get(tenant.base + "/nodepools").ok


def test_a_deployment_replica_grows_the_pool(server, admin):
    """Serving and pools together: an autoscaled Deployment whose replica
    needs a GPU on a cluster with no node makes the dev pool start one, and
    the replica runs there and becomes a ready endpoint."""
    setup_queue(admin)
    r = admin.post(admin.base + "/nodepools", json=pool("gpu"))
    assert r.status_code == 201, r.text
    port = port_block()
    r = admin.post(admin.base + "/deployments", json=manifest("Deployment", "llm", {
        "queue": "q", "model": "tiny", "version": "1",
        "autoscaling": {"minReplicas": 1, "maxReplicas": 2,
                        "target": {"inflightPerReplica": 4}},
        "template": {"command": ["/usr/bin/python3", "-m", "http.server", "--bind",
                                 "127.0.0.1", "$(STARCLOUD_PORT)"],
                     "port": port, "resources": {"gpu": 1, "cpu": "100m", "memory": "64Mi"},
                     "probes": {"readiness": {"tcp": {"port": port}, "periodSeconds": 1}}}}))
    assert r.status_code == 201, r.text

    def ready():
        st = admin.get(admin.base + "/deployments/llm").json().get("status", {})
        eps = [e for e in st.get("endpoints", []) if e.get("ready")]
        return eps if eps else None
    eps = wait_for(ready, timeout=60, what="a ready replica on a pool node")
    assert eps[0]["node"].startswith("gpu-"), eps
    st = pool_status(admin, "gpu")
    assert st["members"] == 1 and st["gpus"] == 2, st


def test_half_used_nodes_are_consolidated_and_one_goes(server, admin):
    """Scale-down by moving pods: two pool nodes end up half used (one
    long pod each); the scale-down plan sees that one node's pod fits on
    the other, so after scaleDownAfter that node is cordoned, its pod is
    evicted alone (the Evicted event says the pool removes the node) and
    placed on the other node, and the emptied node is deleted."""
    setup_queue(admin)
    r = admin.post(admin.base + "/nodepools", json=pool("mv", {"scaleDownAfter": "3s"}))
    assert r.status_code == 201, r.text
    long_cmd = ["sh", "-c", "sleep 600"]
    run_job(admin, "b", long_cmd, gpu=1)
    wait_for(lambda: (pods_of(admin, "b").get("b-main-0") or {}).get("phase") == "Running",
             timeout=60, what="b running")
    n1 = pods_of(admin, "b")["b-main-0"]["node"]
    # A short gang of two 1-GPU pods: one beside b, one on a new node.
    run_job(admin, "x", ["sh", "-c", "sleep 6"], replicas=2, gpu=1, restartPolicy="Never")
    xs = wait_for(lambda: (lambda p: len(p) == 2 and all(v["phase"] == "Running"
                                                         for v in p.values()) and p)(
        pods_of(admin, "x")), timeout=60, what="x running")
    n2 = [v["node"] for v in xs.values() if v["node"] != n1]
    assert len(n2) == 1, xs
    n2 = n2[0]
    run_job(admin, "c", long_cmd, gpu=1)
    c = wait_for(lambda: (lambda p: p if p and p.get("phase") == "Running" else None)(
        pods_of(admin, "c").get("c-main-0")), timeout=30, what="c running")
    assert c["node"] == n2
    # x ends: n1 holds b, n2 holds c, each half used. One node goes.
    wait_for(lambda: len(pool_nodes(admin, "mv")) == 1, timeout=90,
             what="one node consolidated away")
    left = pool_nodes(admin, "mv")[0]
    assert left in (n1, n2)
    for j in ("b", "c"):
        p = wait_for(lambda: (lambda q: q if q and q.get("phase") == "Running" else None)(
            pods_of(admin, j).get(j + "-main-0")), timeout=30, what=j + " running again")
        assert p["node"] == left, (j, p)
    ev = [e for e in admin.get(admin.base + "/events").json()["items"]
          if e["reason"] == "Evicted" and "node pool is removing" in e.get("message", "")]
    assert len(ev) == 1, ev
    downs = [e for e in pool_events(admin, "mv") if e["reason"] == "ScaledDown"]
    assert len(downs) == 1, downs
