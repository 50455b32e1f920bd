"""`starcloud k8s` in-cluster, as a pod of deploy/k8s/deployment.yaml runs
it: no kubeconfig, no --server; the address from KUBERNETES_SERVICE_HOST and
_PORT, the ServiceAccount's token, ca.crt and namespace from its mounted
directory (here a temporary one, through --service-account-dir: the same
files the kubelet would mount, with a real token for deploy/k8s's
ServiceAccount and the API server's own CA)."""
import os
import shutil
import subprocess

from conftest import BIN, SAN, check_sanitizers, stop_process
from kube_util import SCHED_NS, kube, wait_for  # noqa: F401


def sa_dir(kube, tmp_path, ca=None, namespace=SCHED_NS):
    d = tmp_path / "serviceaccount"
    d.mkdir()
    (d / "token").write_text(kube.sa_token())
    shutil.copy(ca or kube.ca, str(d / "ca.crt"))
    (d / "namespace").write_text(namespace + "\n")
    return str(d)


def start(kube, tmp_path, sa, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env["KUBERNETES_SERVICE_HOST"] = "127.0.0.1"
    env["KUBERNETES_SERVICE_PORT"] = str(kube.port)
    log_path = str(tmp_path / "sched-incluster.log")
    log = open(log_path, "a")
    proc = subprocess.Popen([BIN, "k8s", "--service-account-dir", sa] + list(args), env=env,
                            stdout=log, stderr=log)
    log.close()
    return proc, log_path


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def stop(proc, log_path):
    stop_process(proc, timeout=30 if SAN else 10)
    if SAN:
        check_sanitizers(log_path)


def test_in_cluster_service_account_schedules_and_leads(kube, tmp_path):
    kube.add_node("n1", gpus=2)
    kube.queue("default", gpu_quota=2)
    kube.pod_group("pair", 2)
    for i in range(2):
        kube.pod("pair-%d" % i, gpus=1, group="pair")
    # The Lease goes to the namespace of the mounted service account.
    proc, log = start(kube, tmp_path, sa_dir(kube, tmp_path), "--leader-elect",
                      "--identity", "in-cluster-0")
    try:
        wait_for(lambda: len(kube.bound()) == 2, 90, "the pair bound in-cluster")
        lease = wait_for(lambda: kube.lease(ns=SCHED_NS), 60, "the Lease in " + SCHED_NS)
        assert lease["spec"]["holderIdentity"] == "in-cluster-0", lease
        assert proc.poll() is None, read(log)
        assert "127.0.0.1:%d" % kube.port in read(log), read(log)
    finally:
        stop(proc, log)


def test_in_cluster_with_the_wrong_ca_binds_nothing(kube, tmp_path):
    """A ca.crt that did not sign the API server's certificate: every
    request fails the TLS check (logged as the lists failing), nothing is
    bound. The same directory with the right ca.crt works (above)."""
    other = tmp_path / "other"
    other.mkdir()
    key, crt = str(other / "ca.key"), str(other / "ca.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    key, "-out", crt, "-days", "1", "-subj", "/CN=not-the-cluster-ca"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kube.add_node("n1", gpus=1)
    kube.queue("default", gpu_quota=1)
    kube.pod("lone", gpus=1)
    proc, log = start(kube, tmp_path, sa_dir(kube, tmp_path, ca=crt))
    try:
        wait_for(lambda: read(log).count("error: list pods") >= 2, 60,
                 "the lists refused, twice")
        assert kube.bound() == {}
        assert proc.poll() is None, read(log)
    finally:
        stop(proc, log)


def test_in_cluster_files_missing_fail_clearly(kube, tmp_path):
    """No token in the mounted directory: a usage error naming the file."""
    d = tmp_path / "empty-sa"
    d.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env.update(KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=str(kube.port))
    r = subprocess.run([BIN, "k8s", "--service-account-dir", str(d)], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert str(d / "token") in r.stderr, r.stderr
    # And without the service's address it says it is not in a cluster.
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    r = subprocess.run([BIN, "k8s", "--service-account-dir", str(d)], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "KUBERNETES_SERVICE_HOST" in r.stderr, r.stderr
