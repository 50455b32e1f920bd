"""A Deployment whose pods serve https (template `scheme: https`): the
server writes its endpoints as https:// and the agent's readiness probe
speaks TLS to the pod (`http.scheme: HTTPS`, the certificate not verified,
as Kubernetes probes). A probe left at HTTP never sees such a pod ready,
and a bad scheme is refused at apply naming the field. The pods are a
Python stand-in with a certificate from the openssl command."""
import os
import shutil
import tempfile
import time

import pytest
import requests

from agent_util import Agent, setup_queue, wait_for
from conftest import manifest, pod_program
from test_serving import WORKER, dep, free_port, ready_endpoints
from tls_util import issue, make_ca


@pytest.fixture
def certs(tmp_path):
    """A CA (kept here) and a 127.0.0.1 certificate in a folder the pods'
    users can read (they are not root)."""
    ca = make_ca(tmp_path, "ca")
    shared = tempfile.mkdtemp(prefix="sc-tls-")
    os.chmod(shared, 0o755)
    cert, key = issue(shared, ca, "pod")
    os.chmod(key, 0o644)  # a test key: the pods run as per-queue users
    yield ca[0], cert, key
    shutil.rmtree(shared, ignore_errors=True)


@pytest.fixture
def cluster(server, admin, tmp_path):
    a = Agent(server.url, server.token, "n0", tmp_path / "a0")
    setup_queue(admin)
    yield admin
    a.stop()


def tls_deployment(name, port, cert, key, probe_scheme="HTTPS", scheme="https"):
    tpl = {"command": ["/usr/bin/python3", pod_program(WORKER)], "port": port, "scheme": scheme,
           "env": {"VERSION": "1", "TLS_CERT": cert, "TLS_KEY": key},
           "resources": {"cpu": "100m", "memory": "64Mi"},
           "probes": {"readiness": {"http": {"path": "/v2/health/ready", "port": port,
                                             "scheme": probe_scheme},
                                    "periodSeconds": 1}}}
    return manifest("Deployment", name, {"queue": "q", "model": "tiny", "version": "1",
                                         "replicas": 1, "template": tpl})


def test_https_pods_get_https_endpoints(cluster, certs):
    s, (ca, cert, key) = cluster, certs
    port = free_port()
    r = s.post(s.base + "/deployments", json=tls_deployment("sec", port, cert, key))
    assert r.status_code == 201, r.text
    eps = wait_for(ready_endpoints(s, "sec", 1), timeout=60, what="a ready https endpoint")
    url = eps[0]["url"]
    assert url.startswith("https://127.0.0.1:"), url
    # The endpoint is what the pod serves: https, with the CA that signed it.
    assert requests.get(url + "/version", verify=ca, timeout=10).text == "1"
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(url + "/version", timeout=10)  # the system's CAs do not know it


def test_http_probe_on_an_https_pod_never_ready(cluster, certs):
    s, (ca, cert, key) = cluster, certs
    port = free_port()
    body = tls_deployment("plainprobe", port, cert, key, probe_scheme="HTTP")
    assert s.post(s.base + "/deployments", json=body).status_code == 201
    # The pod runs (it answers https), but a plain-http probe fails on it.
    wait_for(lambda: any(p.get("phase") == "Running" for p in
                         dep(s, "plainprobe").get("status", {}).get("pods", [])),
             timeout=60, what="the pod running")
    url = "https://127.0.0.1:%d/version" % port

    def serving():
        try:
            return requests.get(url, verify=ca, timeout=2).text == "1"
        except requests.RequestException:
            return False
    wait_for(serving, timeout=60, what="the pod serving https")
    # Five probe periods (1 s) after it serves: still no ready endpoint.
    time.sleep(5)
    st = dep(s, "plainprobe")["status"]
    assert not [e for e in st.get("endpoints", []) if e["ready"]], st
    assert not any(p.get("ready") for p in st["pods"]), st


@pytest.mark.parametrize("where,value", [
    ("template", "ftp"), ("template", 5), ("probe", "TLS"), ("probe", ""),
])
def test_bad_scheme_refused_naming_the_field(cluster, where, value):
    s = cluster
    body = tls_deployment("bad", 9000, "/c", "/k")
    tpl = body["spec"]["template"]
    if where == "template":
        tpl["scheme"] = value
        field = "spec.template.scheme"
    else:
        tpl["probes"]["readiness"]["http"]["scheme"] = value
        field = "spec.template.probes.readiness.http.scheme"
    r = s.post(s.base + "/deployments", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["field"] == field, r.text
    assert s.get(s.base + "/deployments/bad").status_code == 404
