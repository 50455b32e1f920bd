"""Kubernetes mode's client side reloads its TLS material without a
restart (net/tlsreload.h): the CA named by --ca, or by a kubeconfig's
certificate-authority path, replaced by rename, is trusted on the next
connection. Against a real kube-apiserver whose certificate the scheduler
first cannot verify: nothing is bound until the right CA is in place, then
the pending pod is bound. The waits are for conditions, with deadlines far
above the 2 s poll and the scheduler's back-off."""
import os
import shutil
import subprocess

import pytest
import yaml

from conftest import BIN, stop_process
from kube_util import kube, wait_for  # noqa: F401


def replace(src, dst):
    shutil.copyfile(src, dst + ".tmp")
    os.rename(dst + ".tmp", dst)


def stranger_ca(folder):
    path = os.path.join(str(folder), "stranger.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                    os.path.join(str(folder), "stranger.key"), "-out", path, "-days", "1",
                    "-subj", "/CN=stranger"], check=True, capture_output=True)
    return path


@pytest.mark.parametrize("how", ["flags", "kubeconfig"])
def test_ca_replaced_by_rename_is_trusted_without_a_restart(kube, tmp_path, how):
    ca = str(tmp_path / "ca.pem")
    replace(stranger_ca(tmp_path), ca)
    token = kube.sa_token()
    if how == "flags":
        tok = str(tmp_path / "token")
        with open(tok, "w") as f:
            f.write(token + "\n")
        args = ["--server", kube.url, "--token-file", tok, "--ca", ca]
    else:
        cfg = yaml.safe_load(open(kube.kubeconfig(token)))
        cluster = cfg["clusters"][0]["cluster"]
        del cluster["certificate-authority-data"]
        cluster["certificate-authority"] = ca
        path = str(tmp_path / "kubeconfig")
        with open(path, "w") as f:
            yaml.safe_dump(cfg, f)
        args = ["--kubeconfig", path]
    kube.add_node("n0", gpus=1)
    kube.queue("default")
    kube.pod("p")
    log_path = str(tmp_path / "sched.log")
    log = open(log_path, "w")
    proc = subprocess.Popen([BIN, "k8s"] + args, stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL)

    def output():
        with open(log_path, errors="replace") as f:
            return f.read()
    try:
        # The API server's certificate is refused: lists fail, nothing binds.
        wait_for(lambda: "error" in output() or proc.poll() is not None, 60,
                 "the refused handshake logged")
        assert proc.poll() is None, output()
        assert kube.bound() == {}
        replace(kube.ca, ca)
        wait_for(lambda: kube.bound() == {"p": "n0"}, 120, "bound once the CA was replaced")
        assert "TLS client: reloaded (a file changed)" in output()
        assert proc.poll() is None
    finally:
        stop_process(proc)
        log.close()
