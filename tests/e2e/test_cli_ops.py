"""The CLI as an operator uses it (issue 20): STATUS/READY/AGE columns sized
to content, queues as their tree, -o name and jsonpath, selectors, get -w,
describe and top from the scheduler's own figures, explain's words, login
and contexts, and shell completion (bash and zsh) against a real server."""
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import time

import pytest

from agent_util import wait_for
from conftest import BIN, EXAMPLES as _EX, ROOT, job, manifest, node, queue  # noqa: F401

EXAMPLES_DIR = os.path.join(ROOT, "examples")


def cli(server, *args, token=None, home="/nonexistent", env_extra=None, input=None,
        timeout=30):
    env = dict(os.environ, HOME=str(home))
    if server is not None:
        env.update(STARCLOUD_SERVER=server.url, STARCLOUD_TOKEN=token or server.token)
    else:
        env.pop("STARCLOUD_SERVER", None)
        env.pop("STARCLOUD_TOKEN", None)
    env.pop("STARCLOUD_CONTEXT", None)
    env.update(env_extra or {})
    return subprocess.run([BIN] + list(args), capture_output=True, text=True, env=env,
                          timeout=timeout, input=input)


def table(text):
    """Rows of a printed table as dicts by header, checking that every
    column starts where its header starts (columns sized to content)."""
    lines = [l for l in text.splitlines() if l.strip()]
    head = lines[0]
    names = re.findall(r"\S+(?: \S+)*", head)  # headers may hold one space
    starts = [head.index(n) for n in names]
    rows = []
    for line in lines[1:]:
        row = {}
        for i, n in enumerate(names):
            end = starts[i + 1] if i + 1 < len(names) else len(line)
            if i + 1 < len(names):
                assert line[end - 1:end] in (" ", ""), (head, line, n)
            row[n] = line[starts[i]:end].strip()
        rows.append(row)
    return rows


def phase(admin, name, plural="jobs"):
    return admin.get(admin.base + "/%s/%s" % (plural, name)).json().get("status", {}).get("phase")


@pytest.fixture
def cluster(server, admin):
    """examples/cluster.yaml and jobs.yaml through the CLI, settled."""
    for f in ("cluster.yaml", "jobs.yaml"):
        r = cli(server, "apply", "-f", os.path.join(EXAMPLES_DIR, f))
        assert r.returncode == 0, r.stderr
    wait_for(lambda: phase(admin, "llama-pretrain") == "Running", what="the examples placed")
    wait_for(lambda: phase(admin, "giant-gang") == "Pending", what="giant-gang explained")
    return admin


# ---- get ----------------------------------------------------------------

def test_get_status_columns(server, cluster):
    admin = cluster
    admin.post(admin.base + "/jobs", json=job("never", q="llm", gpus=64))
    rows = {r["NAME"]: r for r in table(cli(server, "get", "jobs").stdout)}
    assert rows["llama-pretrain"]["STATUS"] == "Running" and rows["llama-pretrain"]["PODS"] == "4/4"
    assert rows["llama-pretrain"]["GPUS"] == "32"
    assert rows["giant-gang"]["STATUS"] == "Pending" and rows["giant-gang"]["PODS"] == "0/5"
    # shares and MIG slices as fractions of a device
    assert rows["notebook-alice"]["GPUS"] == "0.5"
    assert rows["mig-inference"]["GPUS"] == "1.71"
    assert re.fullmatch(r"\d+s", rows["never"]["AGE"]), rows["never"]
    wide = {r["NAME"]: r for r in table(cli(server, "get", "jobs", "-o", "wide").stdout)}
    assert "no rack has room" in wide["giant-gang"]["REASON"]
    assert wide["llama-pretrain"]["NODES"] == "gpu-09,gpu-10,gpu-11,gpu-12"
    assert wide["giant-gang"]["PRIORITY"] == "batch"
    # Succeeded, Failed and Evicted say so (they all read 0/1 before).
    for name, ph in (("done", "Succeeded"), ("broke", "Failed")):
        admin.post(admin.base + "/jobs", json=job(name, q="llm", gpus=64))
        j = admin.get(admin.base + "/jobs/" + name).json()
        j["status"] = {"phase": ph, "pods": [{"name": name + "-worker-0", "phase": ph}]}
        for _ in range(10):
            r = admin.put(admin.base + "/jobs/" + name, json=j)
            if r.status_code != 409:
                break
            j = dict(admin.get(admin.base + "/jobs/" + name).json(), status=j["status"])
    wait_for(lambda: phase(admin, "done") == "Succeeded" and phase(admin, "broke") == "Failed",
             what="finished jobs")
    rows = {r["NAME"]: r for r in table(cli(server, "get", "jobs").stdout)}
    assert rows["done"]["STATUS"] == "Succeeded" and rows["broke"]["STATUS"] == "Failed"


def test_get_nodes_ready_and_cordoned(server, cluster):
    admin = cluster
    assert cli(server, "drain", "gpu-16").returncode == 0
    n = admin.get(admin.base + "/nodes/gpu-14").json()
    n["status"] = {"ready": False}
    assert admin.put(admin.base + "/nodes/gpu-14", json=n).status_code == 200
    rows = {r["NAME"]: r for r in table(cli(server, "get", "nodes").stdout)}
    assert rows["gpu-16"]["STATUS"] == "Ready,SchedulingDisabled"
    assert rows["gpu-14"]["STATUS"] == "NotReady"
    assert rows["gpu-01"]["STATUS"] == "Ready" and rows["gpu-01"]["GPUS"] == "8"
    assert rows["gpu-15"]["MIG"] == "dynamic"
    wide = {r["NAME"]: r for r in table(cli(server, "get", "nodes", "-o", "wide").stdout)}
    assert wide["gpu-01"]["LABELS"] == "zone=z1,rack=r1", wide["gpu-01"]  # not JSON
    assert wide["gpu-01"]["MEMORY"] == "1Ti" and wide["gpu-01"]["CPU"] == "128"


def test_get_queues_tree(server, cluster):
    out = cli(server, "get", "queues").stdout
    names = [l.split("   ")[0] for l in out.splitlines()[1:]]
    # depth-first, each child under its own parent, indented by depth
    assert names == ["product", "  notebooks", "  serving", "research", "  llm", "  vision"], names
    rows = {r["NAME"]: r for r in table(out)}
    assert rows["vision"]["GPU LIMIT"] == "40" and rows["llm"]["GPU QUOTA"] == "56"
    assert rows["research"]["GPU LIMIT"] == "-"


def test_get_events_sorted_by_time(server, cluster):
    rows = table(cli(server, "get", "events").stdout)
    assert rows and set(rows[0]) == {"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}
    assert {r["TYPE"] for r in rows} <= {"Normal", "Warning"}
    assert any(r["OBJECT"] == "job/giant-gang" and r["REASON"] == "Pending" for r in rows)
    # oldest first: ages never grow down the table
    def secs(a):
        m = re.fullmatch(r"(\d+)s", a)
        return int(m.group(1)) if m else 10 ** 9
    ages = [secs(r["LAST SEEN"]) for r in rows]
    assert ages == sorted(ages, reverse=True), ages


def test_output_name_jsonpath_selector(server, cluster):
    admin = cluster
    admin.post(admin.base + "/jobs", json=job("tagged", q="llm", gpus=64, labels={"team": "x"}))
    r = cli(server, "get", "jobs", "-o", "name", "-l", "team=x")
    assert r.returncode == 0 and r.stdout == "job/tagged\n", r.stdout
    r = cli(server, "get", "nodes", "-l", "rack=r1", "-o",
            "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}")
    assert r.stdout.split() == ["gpu-01", "gpu-02", "gpu-03", "gpu-04"], r.stdout
    r = cli(server, "get", "job", "llama-pretrain", "-o", "jsonpath={.status.pods[*].node}")
    assert r.stdout == "gpu-09 gpu-10 gpu-11 gpu-12"
    r = cli(server, "get", "jobs", "-o",
            "jsonpath={.items[?(@.status.phase==\"Pending\")].metadata.name}")
    assert "giant-gang" in r.stdout.split() and "llama-pretrain" not in r.stdout
    r = cli(server, "get", "jobs", "--no-headers")
    assert not r.stdout.startswith("NAME")
    # bad input: exit 2, saying what is wrong, nothing printed
    r = cli(server, "get", "jobs", "-o", "jsonpath={.items[0")
    assert r.returncode == 2 and "jsonpath: position 1: unclosed {" in r.stderr and not r.stdout
    r = cli(server, "get", "jobs", "-l", "team in (x)")
    assert r.returncode == 2 and "labelSelector" in r.stderr and "set-based" in r.stderr
    r = cli(server, "get", "jobs", "-o", "csv")
    assert r.returncode == 2 and "--output" in r.stderr


def test_get_watch(server, cluster, tmp_path):
    admin = cluster
    env = dict(os.environ, STARCLOUD_SERVER=server.url, STARCLOUD_TOKEN=server.token,
               HOME="/nonexistent")
    out = open(tmp_path / "watch.out", "w+")
    p = subprocess.Popen([BIN, "get", "jobs", "-w"], stdout=out, stderr=subprocess.PIPE,
                         env=env, text=True)
    try:
        wait_for(lambda: "llama-pretrain" in open(tmp_path / "watch.out").read(),
                 what="the first table")
        admin.post(admin.base + "/jobs", json=job("late", q="llm", gpus=1))
        wait_for(lambda: re.search(r"^late +llm +Running +1/1 ",
                                   open(tmp_path / "watch.out").read(), re.M),
                 what="the new job's rows")
        text = open(tmp_path / "watch.out").read()
        lines = text.splitlines()
        assert lines[0].startswith("NAME") and sum(l.startswith("NAME") for l in lines) == 1
        # rows after the table keep its column positions
        head = lines[0]
        late = [l for l in lines if l.startswith("late ")][-1]
        assert late.index("llm") == head.index("QUEUE")
        assert p.poll() is None, "get -w ended by itself"
        # a watch for one name shows that object only
        out2 = open(tmp_path / "watch2.out", "w+")
        p2 = subprocess.Popen([BIN, "get", "job", "late", "-w", "-o", "name"], stdout=out2,
                              stderr=subprocess.DEVNULL, env=env)
        try:
            wait_for(lambda: "job/late" in open(tmp_path / "watch2.out").read(),
                     what="the named object")
            admin.post(admin.base + "/jobs", json=job("other", q="llm", gpus=1))
            admin.delete(admin.base + "/jobs/late")
            wait_for(lambda: open(tmp_path / "watch2.out").read().count("job/late") >= 2,
                     what="the deletion")
            assert "other" not in open(tmp_path / "watch2.out").read()
        finally:
            p2.send_signal(signal.SIGINT)
            p2.wait(timeout=10)
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=10)
        out.close()


# ---- describe, top, explain --------------------------------------------

def node_of(admin, job, pod):
    return next(p["node"] for p in admin.get(admin.base + "/jobs/" + job).json()["status"]["pods"]
                if p["name"] == pod)


def test_describe_node(server, cluster):
    admin = cluster
    where = node_of(admin, "notebook-alice", "notebook-alice-main-0")
    r = cli(server, "describe", "node", where)
    assert r.returncode == 0, r.stderr
    t = r.stdout
    assert "Status:         Ready" in t and re.search(r"^Labels: +zone=z\d,rack=r\d+$", t, re.M)
    assert "Capacity:       cpu 128, memory 1Ti, GPUs 8 x A100-80GB (80Gi each)" in t
    assert re.search(r"^Allocated: +GPUs \d+\.\d+ of 8 \(\d+%\), cpu \d+ of 128", t, re.M), t
    assert re.search(r"^  \d +shared \d+% +notebook-alice-main-0 \(500m\)", t, re.M), t
    assert re.search(r"^  notebook-alice-main-0 +job/notebook-alice +notebooks +Running +\d "
                     r"\(500m\) +4 +32Gi", t, re.M), t
    mig = cli(server, "describe", "node", "gpu-15").stdout  # the one MIG node
    assert "MIG dynamic" in mig
    assert re.search(r"^  \d +MIG 6/7 +mig-inference-large-0 \(3g.20gb\), "
                     r"mig-inference-large-1 \(3g.20gb\)$", mig, re.M), mig
    assert "Allocated:      GPUs 1.71 of 8 (21%)" in mig


def test_describe_job_and_queue(server, cluster):
    t = cli(server, "describe", "job", "giant-gang").stdout
    assert "Status:         Pending, 0 of 5 pods running" in t
    assert "Why pending:" in t and "no rack has room for 5 pods" in t
    assert re.search(r"^  worker +5 +16 +128Gi +8 ", t, re.M), t
    assert re.search(r"^  Scheduled +False +Unschedulable", t, re.M)
    assert "Warning   Pending" in t
    t = cli(server, "describe", "deployment", "chat").stdout
    assert "Kind:           Deployment" in t and "Model:          llama-3-8b version 2" in t
    assert "Why pending" not in t  # all its replicas run
    t = cli(server, "describe", "queue", "llm").stdout
    assert "Parent:         research" in t
    assert re.search(r"^  gpu +72 +32 +72 +56 +-$", t, re.M), t  # fair, alloc, req, quota, limit
    t = cli(server, "describe", "queue", "research").stdout
    assert "Children:       llm, vision" in t
    r = cli(server, "describe", "job", "nope")
    assert r.returncode == 1 and "not found" in r.stderr


def test_top_from_the_scheduler(server, cluster):
    rows = {r["QUEUE"].strip(): r for r in table(cli(server, "top", "queues").stdout)}
    # shares and MIG as fractions; the deployment (serving) counted; parents summed
    assert rows["notebooks"]["GPUS"] == "2.46"
    assert rows["serving"]["GPUS"] == "4"
    assert rows["product"]["GPUS"] == "6.46"
    assert rows["research"]["GPUS"] == "44" and rows["research"]["PENDING"] == "1"
    assert rows["llm"]["FAIR SHARE"] == "72" and rows["vision"]["LIMIT"] == "40"
    lines = cli(server, "top", "queues").stdout.splitlines()
    assert lines[4].startswith("research") and lines[5].startswith("  llm"), lines
    nodes = {r["NODE"]: r for r in table(cli(server, "top", "nodes").stdout)}
    assert nodes["gpu-15"]["GPUS"] == "1.71/8" and nodes["gpu-15"]["GPU%"] == "21%"
    for n in ("gpu-09", "gpu-10", "gpu-11", "gpu-12"):  # llama-pretrain's 4 x 8 GPUs
        assert nodes[n]["GPUS"] == "8/8" and nodes[n]["PODS"] == "1", nodes[n]
    share = nodes[node_of(cluster, "notebook-alice", "notebook-alice-main-0")]
    assert "." in share["GPUS"], share  # 0.5 of a device counted as such
    total = sum(float(r["GPUS"].split("/")[0]) for r in nodes.values())
    assert abs(total - 50.46) < 0.05, total  # = product 6.46 + research 44


def test_explain_words(server, cluster):
    admin = cluster
    t = cli(server, "explain", "deployment", "chat").stdout
    assert t.startswith("Deployment chat (queue serving): Running"), t
    assert "template main: 4 x" in t or "template serve" in t or "template" in t
    admin.post(admin.base + "/jobs", json=job("fin", q="llm", gpus=64))
    j = admin.get(admin.base + "/jobs/fin").json()
    j["status"] = {"phase": "Succeeded", "pods": [{"name": "fin-worker-0", "phase": "Succeeded"}]}
    wait_for(lambda: admin.put(admin.base + "/jobs/fin", json=dict(
        admin.get(admin.base + "/jobs/fin").json(), status=j["status"])).status_code == 200,
        what="a finished job")
    wait_for(lambda: phase(admin, "fin") == "Succeeded", what="Succeeded")
    t = cli(server, "explain", "job", "fin").stdout
    assert "Reason:   finished: every pod succeeded" in t and "{" not in t, t
    t = cli(server, "explain", "job", "notebook-bob").stdout
    assert "Asks:     1 pod" in t and "task main: 1 x cpu 4, memory 32Gi, gpuMemory 20Gi" in t, t


# ---- login and contexts -------------------------------------------------

def test_login_and_contexts(server, admin, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    cfgfile = home / ".config" / "starcloud" / "config"
    viewer = admin.post(admin.base + "/tokens", json={"role": "viewer"}).json()["token"]
    tf = tmp_path / "viewer.token"
    tf.write_text(viewer + "\n")
    os.chmod(tf, 0o600)
    # a refused token writes nothing
    r = cli(None, "login", server.url, "--token", "sc_nope", home=home)
    assert r.returncode == 1 and "refused" in r.stderr and not cfgfile.exists()
    r = cli(None, "login", server.url, "--token-file", str(tf), "--context", "view", home=home)
    assert r.returncode == 0 and "as viewer" in r.stdout, r.stderr
    assert stat.S_IMODE(os.stat(cfgfile).st_mode) == 0o600
    assert viewer not in cfgfile.read_text()  # the file's path, not the token
    r = cli(None, "login", server.url + "/", home=home, input=server.token + "\n")
    assert r.returncode == 0 and "as admin" in r.stdout, r.stderr
    host = server.url.split("//")[1].replace(":", "-")
    rows = {r["NAME"]: r for r in table(cli(None, "context", home=home).stdout)}
    assert rows[host]["CURRENT"] == "*" and rows["view"]["CURRENT"] == ""
    assert rows["view"]["AUTH"] == "token-file " + str(tf)
    # the current context (admin) may write; --context picks the viewer
    q = tmp_path / "q.json"
    q.write_text(json.dumps(queue("from-cli")))
    assert cli(None, "apply", "-f", str(q), home=home).returncode == 0
    r = cli(None, "delete", "queue", "from-cli", "--context", "view", home=home)
    assert r.returncode == 1 and "403" in r.stderr
    r = cli(None, "get", "queues", home=home, env_extra={"STARCLOUD_CONTEXT": "view"})
    assert r.returncode == 0 and "from-cli" in r.stdout
    assert cli(None, "context", "view", home=home).returncode == 0
    assert cli(None, "delete", "queue", "from-cli", home=home).returncode == 1
    r = cli(None, "get", "queues", "--context", "nowhere", home=home)
    assert r.returncode == 2 and 'no context "nowhere"' in r.stderr
    r = cli(None, "context", "nowhere", home=home)
    assert r.returncode == 1 and "nowhere" in r.stderr
    r = cli(None, "login", "ftp://x", "--token", "a", home=home)
    assert r.returncode == 2 and "URL" in r.stderr


def test_old_flat_config_still_read_and_kept(server, tmp_path):
    """A file `starcloud dev` wrote before contexts keeps working, and login
    keeps it as the context "default"."""
    cfg = tmp_path / ".config" / "starcloud"
    cfg.mkdir(parents=True)
    (cfg / "config").write_text("server: %s\ntoken: %s\n" % (server.url, server.token))
    assert cli(None, "get", "nodes", home=tmp_path).returncode == 0
    r = cli(None, "login", server.url, "--token", server.token, "--context", "second",
            home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert cli(None, "get", "nodes", "--context", "default", home=tmp_path).returncode == 0
    names = [r["NAME"] for r in table(cli(None, "context", home=tmp_path).stdout)]
    assert sorted(names) == ["default", "second"]


# ---- completion ----------------------------------------------------------

def test_completion_bash(server, cluster, tmp_path):
    script = tmp_path / "sc.bash"
    r = cli(None, "completion", "bash")
    assert r.returncode == 0
    script.write_text(r.stdout)
    env = dict(os.environ, STARCLOUD_SERVER=server.url, STARCLOUD_TOKEN=server.token,
               PATH=os.path.dirname(os.path.abspath(BIN)) + ":" + os.environ["PATH"])

    def complete(*words):
        line = " ".join("'%s'" % w for w in words)
        out = subprocess.run(["bash", "-c", 'source %s; COMP_WORDS=(%s); COMP_CWORD=%d; '
                              '_starcloud; echo "${COMPREPLY[@]}"' % (script, line, len(words) - 1)],
                             capture_output=True, text=True, env=env, check=True)
        return out.stdout.split()
    assert complete("starcloud", "des") == ["describe"]
    assert "login" in complete("starcloud", "") and "completion" in complete("starcloud", "")
    assert complete("starcloud", "get", "-o", "j") == ["json", "jsonpath="]
    assert complete("starcloud", "get", "--wa") == ["--watch"]
    assert complete("starcloud", "get", "dep") == ["deployments"]
    assert complete("starcloud", "describe", "node", "gpu-1") == [
        "gpu-10", "gpu-11", "gpu-12", "gpu-13", "gpu-14", "gpu-15", "gpu-16"]
    assert complete("starcloud", "get", "-o", "wide", "jobs", "ll") == ["llama-pretrain"]
    assert complete("starcloud", "explain", "job", "gi") == ["giant-gang"]
    assert complete("starcloud", "completion", "") == ["bash", "zsh"]
    assert complete("starcloud", "gateway", "--prefill-failure", "") == ["fail", "retry"]


def test_completion_zsh(server, cluster, tmp_path):
    if not shutil.which("zsh"):
        if os.environ.get("CI") == "true":
            pytest.fail("zsh missing under CI (scripts/deps.sh installs it)")
        pytest.skip("zsh not installed (apt-get install zsh)")
    script = tmp_path / "_starcloud"
    r = cli(None, "completion", "zsh")
    assert r.returncode == 0 and r.stdout.startswith("#compdef starcloud")
    script.write_text(r.stdout)
    assert subprocess.run(["zsh", "-n", str(script)]).returncode == 0
    env = dict(os.environ, STARCLOUD_SERVER=server.url, STARCLOUD_TOKEN=server.token,
               PATH=os.path.dirname(os.path.abspath(BIN)) + ":" + os.environ["PATH"])
    # zsh's completion builtins stubbed to print what they are given
    stubs = ("compdef() { :; }; compadd() { [[ $1 == -- ]] && shift; print -r -- \"C:$*\"; }; "
             "_describe() { local a=${@[-1]}; print -r -- \"D:${(P)a}\"; }; "
             "_files() { print -r -- F; }; ")

    def complete(*words):
        arr = " ".join("'%s'" % w for w in words)
        code = stubs + "source %s; words=(%s); CURRENT=%d; _starcloud" % (script, arr, len(words))
        out = subprocess.run(["zsh", "-f", "-c", code], capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()
    assert "describe:show an object" in complete("starcloud", "")
    assert complete("starcloud", "get", "-o", "") == "C:table wide json yaml name jsonpath="
    flags = complete("starcloud", "get", "-")
    assert "--watch:after the list" in flags and "--output:table" in flags
    assert complete("starcloud", "get", "") .startswith("C:nodes queues jobs")
    assert complete("starcloud", "describe", "queue", "") == "C:llm notebooks product research serving vision"
    assert complete("starcloud", "apply", "-f", "") == "F"


# ---- schedule (make run's first screen) -----------------------------------

def test_schedule_queue_tree():
    r = subprocess.run([BIN, "schedule", "-f", os.path.join(EXAMPLES_DIR, "cluster.yaml"), "-f",
                        os.path.join(EXAMPLES_DIR, "jobs.yaml")], capture_output=True, text=True,
                       check=True)
    lines = r.stdout.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("QUEUES"))
    q = [l for l in lines[start + 2:start + 8]]
    names = [l[2:].split("   ")[0] for l in q]
    assert names == ["research", "  llm", "  vision", "product", "  serving", "  notebooks"], names
    head = lines[start + 1]
    for col in ("GPU QUOTA", "LIMIT", "FAIR SHARE", "ALLOCATED", "REQUESTED"):
        assert col in head
    vision = next(l for l in q if l.strip().startswith("vision"))
    assert vision[head.index("LIMIT"):].split()[0] == "40"
