"""Bad input to Kubernetes mode: malformed annotations, unsupported
constraints, broken queue trees and missing PodGroups leave the pod pending
with a condition that names the field, and change nothing else; bad flags
and files stop the command with exit status 2 and the field named; a watch
that lost its place lists again."""
import base64
import os
import subprocess
import time

import pytest
import yaml

from conftest import BIN
from kube_util import Scheduler, condition, kube, sched_config, wait_for  # noqa: F401

BAD_PODS = [
    # name, pod() keyword arguments, words the condition must contain
    ("frac-word", {"gpus": 0, "annotations": {"gpu-fraction": "half"}},
     ["annotation gpu-fraction", "half"]),
    ("frac-big", {"gpus": 0, "annotations": {"gpu-fraction": "1.5"}},
     ["annotation gpu-fraction", "(0, 1]"]),
    ("frac-and-gpu", {"gpus": 1, "annotations": {"gpu-fraction": "0.5"}},
     ["gpu-fraction", "nvidia.com/gpu"]),
    ("mem-negative", {"gpus": 0, "annotations": {"gpu-memory": "-3"}},
     ["annotation gpu-memory"]),
    ("multi-frac", {"gpus": 0, "annotations": {"gpu-fraction": "0.5",
                                               "gpu-fraction-num-devices": "2"}},
     ["gpu-fraction-num-devices"]),
    ("anti-affinity", {"spec_extra": {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname",
             "labelSelector": {"matchLabels": {"x": "y"}}}]}}}},
     ["spec.affinity", "(anti-)affinity"]),
    ("node-notin", {"spec_extra": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "NotIn",
                                   "values": ["a"]}]}]}}}}},
     ["matchExpressions[0]", "In"]),
    ("no-group", {"group": "ghost"}, ["PodGroup default/ghost does not exist"]),
    ("bad-queue", {"queue": "negative"}, ["spec.resources.gpu.quota"]),
    ("orphan-queue", {"queue": "orphan"}, ["spec.parentQueue", "no queue named missing"]),
    ("parent-queue", {"queue": "dept"}, ["parent queue"]),
    ("unknown-queue", {"queue": "nowhere"}, ["queue nowhere does not exist"]),
    ("mig", {"gpus": 0, "spec_extra": {"containers": [{
        "name": "m", "image": "busybox",
        "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}}]}},
     ["nvidia.com/mig-1g.10gb"]),
]


def test_bad_pods_and_queues_are_explained_and_change_nothing(kube, sched_config):
    kube.add_node("n0", gpus=8)
    kube.queue("default")
    kube.queue("negative", gpu_quota=-5)
    kube.queue("orphan", parent="missing")
    kube.queue("dept")
    kube.queue("leaf", parent="dept")
    for name, kw, _ in BAD_PODS:
        kube.pod(name, **kw)
    kube.pod_group("subgroups", 1, extra={"subGroups": [{"name": "x", "minMember": 1}]})
    kube.pod("in-subgroups", group="subgroups")
    kube.pod("good", gpus=2)
    s = Scheduler(kube, sched_config).start()
    try:
        wait_for(lambda: "good" in kube.bound(), 30, "the good pod bound")
        time.sleep(1)
        assert kube.bound() == {"good": "n0"}, kube.bound()
        for name, _, words in BAD_PODS + [("in-subgroups", None, ["spec.subGroups"])]:
            c = wait_for(lambda: condition(kube.get_pod(name)), 20, "%s explained" % name)
            assert c["status"] == "False" and c["reason"] == "Unschedulable", (name, c)
            for w in words:
                assert w in c["message"], (name, w, c["message"])
        # Fixing a pod's input is all it takes (a new pod: annotations of a
        # scheduled pod are not edited in place).
        kube.pod("frac-fixed", gpus=0, annotations={"gpu-fraction": "0.5"})
        wait_for(lambda: "frac-fixed" in kube.bound(), 20, "fixed pod bound")
        time.sleep(1)
        assert set(kube.bound()) == {"good", "frac-fixed"}
        assert s.running()
    finally:
        s.stop()


def run_k8s(*args, timeout=10):
    return subprocess.run([BIN, "k8s"] + list(args), capture_output=True, text=True,
                          timeout=timeout)


def write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else yaml.safe_dump(obj))
    return str(p)


def kubeconfig(user=None, cluster=None, current="c"):
    return {"apiVersion": "v1", "kind": "Config", "current-context": current,
            "clusters": [{"name": "k", "cluster": cluster or {"server": "https://127.0.0.1:1"}}],
            "users": [{"name": "u", "user": user if user is not None else {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}


@pytest.mark.parametrize("args,words", [
    (["--bogus"], ["unknown option", "--bogus"]),
    (["--kubeconfig"], ["--kubeconfig", "a value"]),
    (["--kubeconfig", "/nonexistent"], ["/nonexistent", "No such file"]),
    (["--server", "http://127.0.0.1:1"], ["https://"]),
    (["--server", "https://x", "--kubeconfig", "k"], ["give one of them"]),
    (["--token-file", "t"], ["--token-file", "--server"]),
    (["--period", "fast"], ["--period", "duration"]),
    (["--period", "-1s"], ["--period"]),
    (["--max-inflight", "0"], ["--max-inflight", "1 to 1024"]),
    (["--leader-elect", "--lease-duration", "5s", "--renew-deadline", "5s"],
     ["--renew-deadline", "shorter"]),
])
def test_bad_flags(args, words):
    r = run_k8s(*args)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    for w in words:
        assert w in r.stderr, (args, w, r.stderr)


@pytest.mark.parametrize("cfg,words", [
    ("clusters: [", ["kubeconfig", ":"]),
    (kubeconfig(current="other"), ["no context named \"other\""]),
    (kubeconfig(user={"exec": {"command": "evil"}}), ["users[u].user.exec", "not supported"]),
    (kubeconfig(user={"username": "a", "password": "b"}), ["password", "not supported"]),
    (kubeconfig(user={"client-certificate-data": "AAAA"}), ["client-key", "missing"]),
    (kubeconfig(cluster={"server": "ftp://x"}), ["server", "https://"]),
    (kubeconfig(cluster={"server": "https://x", "certificate-authority-data": "%%%"}),
     ["certificate-authority-data", "base64"]),
    (kubeconfig(cluster={"server": "https://x", "certificate-authority": "/no/such/ca"}),
     ["certificate-authority", "/no/such/ca"]),
    (kubeconfig(cluster={"server": "https://x", "insecure-skip-tls-verify": "yes"}),
     ["insecure-skip-tls-verify", "true or false"]),
    (kubeconfig(user={"tokenFile": "/no/such/token"}), ["tokenFile", "/no/such/token"]),
])
def test_bad_kubeconfig(tmp_path, cfg, words):
    r = run_k8s("--kubeconfig", write(tmp_path, "kc", cfg))
    assert r.returncode == 2, (r.stdout, r.stderr)
    for w in words:
        assert w in r.stderr, (w, r.stderr)


def test_bad_config_file(tmp_path):
    kc = write(tmp_path, "kc", kubeconfig())
    node = write(tmp_path, "node.yaml", {"apiVersion": "starcloud.dev/v1", "kind": "Node",
                                         "metadata": {"name": "n"},
                                         "spec": {"cpu": 1, "memory": "1Gi"}})
    r = run_k8s("--kubeconfig", kc, "--scheduler-config", node)
    assert r.returncode == 2 and "only SchedulerConfig and Topology" in r.stderr, r.stderr
    bad = write(tmp_path, "sc.yaml", {"apiVersion": "starcloud.dev/v1", "kind": "SchedulerConfig",
                                      "metadata": {"name": "default"},
                                      "spec": {"actions": ["allocate", "dance"]}})
    r = run_k8s("--kubeconfig", kc, "--scheduler-config", bad)
    assert r.returncode == 2 and "spec.actions" in r.stderr, r.stderr


def test_options_file_and_check_config(tmp_path):
    """--config is the daemons' options file (keys are the flags without
    dashes); --check-config checks it, the kubeconfig and the scheduler
    configuration as a start would, and exits without connecting."""
    kc = write(tmp_path, "kc", kubeconfig())
    sc = write(tmp_path, "sc.yaml", {"apiVersion": "starcloud.dev/v1",
                                     "kind": "SchedulerConfig", "metadata": {"name": "d"},
                                     "spec": {"actions": ["allocate", "reclaim"]}})
    opts = write(tmp_path, "k8s.yaml", "kubeconfig: %s\nscheduler-config: %s\n"
                 "leader-elect: true\nlease-duration: 20s\nrenew-deadline: 15s\n" % (kc, sc))
    r = run_k8s("--config", opts, "--check-config")
    assert r.returncode == 0 and "configuration OK" in r.stdout + r.stderr, (r.stdout, r.stderr)
    bad = write(tmp_path, "bad.yaml", "kubeconfig: %s\nrenew-deadline: soon\n" % kc)
    r = run_k8s("--config", bad, "--check-config")
    assert r.returncode == 2 and "bad.yaml:2" in r.stderr and "renew-deadline" in r.stderr, \
        r.stderr
    # Flags win over the file: a deadline past the file's lease is refused.
    r = run_k8s("--config", opts, "--renew-deadline", "30s", "--check-config")
    assert r.returncode == 2 and "--renew-deadline" in r.stderr, r.stderr
    gone = write(tmp_path, "gone.yaml", "kubeconfig: /no/such/kubeconfig\n")
    r = run_k8s("--config", gone, "--check-config")
    assert r.returncode == 2 and "/no/such/kubeconfig" in r.stderr, r.stderr


def test_server_token_file_and_ca_flags(kube):
    """--server/--token-file/--ca instead of a kubeconfig (the service
    account's files, as in a pod)."""
    tok = kube.tmp + "/token"
    with open(tok, "w") as f:
        f.write(kube.sa_token() + "\n")
    kube.add_node("n0", gpus=1)
    kube.queue("default")
    kube.pod("p")
    log = open(kube.tmp + "/flags.log", "w")
    proc = subprocess.Popen([BIN, "k8s", "--server", kube.url, "--token-file", tok,
                             "--ca", kube.ca], stdout=log, stderr=log)
    try:
        wait_for(lambda: kube.bound() == {"p": "n0"}, 30, "bound with flags")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def test_wrong_ca_is_refused(kube, tmp_path):
    """TLS is verified: another API server's certificate is not trusted."""
    other = str(tmp_path / "other.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(tmp_path / "k"), "-out", other, "-days", "1", "-subj", "/CN=x"],
                   check=True, capture_output=True)
    cfg = yaml.safe_load(open(kube.kubeconfig(kube.sa_token())))
    cfg["clusters"][0]["cluster"]["certificate-authority-data"] = \
        base64.b64encode(open(other, "rb").read()).decode()
    path = write(tmp_path, "kc-wrong-ca", cfg)
    kube.add_node("n0", gpus=1)
    kube.pod("p")
    s = Scheduler(kube, path).start()
    try:
        wait_for(lambda: "list" in s.output() and "error" in s.output(), 20, "TLS refused")
        time.sleep(1)
        assert kube.bound() == {}
    finally:
        s.stop()


def test_relist_after_the_watch_lost_its_place(kube, sched_config):
    """The scheduler's API server goes away; meanwhile, through a second API
    server on the same etcd, the pod that filled the node is deleted and a
    new one waits. When the first API server is back, the watches cannot
    resume (410 Gone: its cache starts after their resourceVersion): the
    scheduler lists again, forgets the deleted pod and binds the new one."""
    kube.add_node("n0", gpus=8)
    kube.queue("default")
    kube.pod("first", gpus=8)
    s = Scheduler(kube, sched_config).start()
    proc2 = None
    try:
        wait_for(lambda: kube.bound() == {"first": "n0"}, 30, "first bound")
        kube.stop_apiserver()
        proc2, url2, ca2 = kube.second_apiserver()
        r = kube.s.delete(url2 + "/api/v1/namespaces/default/pods/first", verify=ca2,
                          json={"gracePeriodSeconds": 0})
        assert r.ok, r.text
        r = kube.s.post(url2 + "/api/v1/namespaces/default/pods", verify=ca2, json={
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "second", "namespace": "default"},
            "spec": {"schedulerName": "starcloud", "containers": [{
                "name": "m", "image": "busybox",
                "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}})
        assert r.status_code == 201, r.text
        kube.restart_apiserver()
        wait_for(lambda: kube.bound() == {"second": "n0"}, 40, "second bound")
        out = s.output()
        assert "listing again" in out or "deleted while not watched" in out, out[-3000:]
    finally:
        s.stop()
        if proc2:
            proc2.terminate()
            proc2.wait(timeout=10)
