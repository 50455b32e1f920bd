"""A real Kubernetes control plane for the Kubernetes-mode tests: etcd plus
the kube-apiserver that scripts/kube-build.sh builds from Debian's
`kubernetes` source package (cached outside the checkout), on 127.0.0.1 with
free ports, a self-signed certificate, static token auth for the test admin
and RBAC. There is no kubelet and no controller-manager: Kubelet below plays
the node's part as KWOK does (bound pods become Running, pods being deleted
are finished), and nodes are created and made Ready through the API.

Tests skip, quoting the reason, when the apiserver cannot be built on this
machine (CI=true turns that into a failure)."""
import base64
import json
import os
import secrets
import signal
import subprocess
import threading
import time

import pytest
import requests
import yaml

from conftest import BIN, SAN, ROOT, check_sanitizers, free_port, stop_process, wait_for

CACHE = os.environ.get("STARCLOUD_KUBE_CACHE", "/var/cache/starcloud/kube")
DEPLOY = os.path.join(ROOT, "deploy", "k8s")
SCHED_NS = "starcloud-system"


def kube_binary(name="kube-apiserver"):
    path = os.path.join(CACHE, "bin", name)
    if os.path.exists(path):
        return path
    why = "%s not built (run scripts/kube-build.sh)" % path
    failed = os.path.join(CACHE, "failed")
    if os.path.exists(failed):
        with open(failed) as f:
            why = "kube-apiserver cannot be built here: " + f.read().strip()
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


# Where each kind lives in the API (what `kubectl apply` finds by discovery).
KINDS = {
    ("v1", "Namespace"): ("/api/v1", "namespaces", False),
    ("v1", "ServiceAccount"): ("/api/v1", "serviceaccounts", True),
    ("v1", "Pod"): ("/api/v1", "pods", True),
    ("v1", "Node"): ("/api/v1", "nodes", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"):
        ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"):
        ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    ("rbac.authorization.k8s.io/v1", "Role"):
        ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"):
        ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"):
        ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
    ("apps/v1", "Deployment"): ("/apis/apps/v1", "deployments", True),
    ("batch/v1", "Job"): ("/apis/batch/v1", "jobs", True),
    ("policy/v1beta1", "PodDisruptionBudget"):
        ("/apis/policy/v1beta1", "poddisruptionbudgets", True),
    ("scheduling.k8s.io/v1", "PriorityClass"):
        ("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
    ("scheduling.run.ai/v2", "Queue"): ("/apis/scheduling.run.ai/v2", "queues", False),
    ("scheduling.run.ai/v2alpha2", "PodGroup"):
        ("/apis/scheduling.run.ai/v2alpha2", "podgroups", True),
}


def collection_path(obj):
    base, plural, namespaced = KINDS[(obj["apiVersion"], obj["kind"])]
    if namespaced:
        ns = obj["metadata"].get("namespace", "default")
        return "%s/namespaces/%s/%s" % (base, ns, plural)
    return "%s/%s" % (base, plural)


class Kube:
    """etcd + kube-apiserver, and an admin session against it."""

    def __init__(self, tmp):
        from etcd_util import Etcd
        self.apiserver_bin = kube_binary()
        self.tmp = str(tmp)
        self.etcd = Etcd(tmp)
        self.port = free_port()
        self.url = "https://127.0.0.1:%d" % self.port
        self.admin_token = secrets.token_hex(16)
        self.proc = None

    def start(self):
        """Starts etcd and the API server; on any failure stops what did
        start (an API server left behind would outlive the test)."""
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self):
        self.etcd.start()
        self.sa_key = os.path.join(self.tmp, "sa.key")
        subprocess.run(["openssl", "genrsa", "-out", self.sa_key, "2048"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.tokens = os.path.join(self.tmp, "tokens.csv")
        with open(self.tokens, "w") as f:
            f.write('%s,admin,1,"system:masters"\n' % self.admin_token)
        self.cert_dir = os.path.join(self.tmp, "certs")
        self.log_path = os.path.join(self.tmp, "kube-apiserver.log")
        self.proc = self.spawn(self.port, self.cert_dir, self.log_path)
        self.ca = os.path.join(self.cert_dir, "apiserver.crt")
        self.s = self.session(self.admin_token)
        self.wait_ready(self.proc, self.url)
        # The API server's bootstrap creates the system priority classes and
        # RBAC roles just after it reports ready.
        wait_for(lambda: self.s.get(self.url + "/apis/scheduling.k8s.io/v1/priorityclasses/"
                                    "system-node-critical").ok, 30, "bootstrap")
        return self

    def spawn(self, port, cert_dir, log_path):
        log = open(log_path, "a")
        sa_key, tokens = self.sa_key, self.tokens
        proc = subprocess.Popen(
            [self.apiserver_bin, "--etcd-servers", "http://" + self.etcd.endpoints,
             "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
             "--secure-port", str(port), "--insecure-port", "0",
             "--cert-dir", cert_dir, "--token-auth-file", tokens,
             "--authorization-mode", "RBAC",
             "--service-account-key-file", sa_key,
             "--service-account-signing-key-file", sa_key,
             "--service-account-issuer", "https://kubernetes.default.svc",
             "--service-cluster-ip-range", "10.96.0.0/16",
             # No controller-manager makes the default ServiceAccount.
             "--disable-admission-plugins", "ServiceAccount",
             "--profiling=false", "--logtostderr", "--v=0"],
            stdout=log, stderr=log)
        log.close()
        return proc

    def wait_ready(self, proc, url, verify=None):
        deadline = time.time() + 60
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError("kube-apiserver exited: " + self.log_tail())
            try:
                if self.s.get(url + "/readyz", timeout=2, verify=verify or self.s.verify
                              ).status_code == 200:
                    return
            except (requests.RequestException, OSError):
                pass
            time.sleep(0.2)
        raise RuntimeError("kube-apiserver not ready within 60 s: " + self.log_tail())

    def stop_apiserver(self):
        stop_process(self.proc)

    def restart_apiserver(self):
        """The same API server again: same port, certificate and etcd."""
        self.proc = self.spawn(self.port, self.cert_dir, self.log_path)
        self.wait_ready(self.proc, self.url)

    def second_apiserver(self):
        """Another API server on the same etcd (an HA control plane's
        second member); returns (process, url, CA file)."""
        port = free_port()
        cert_dir = os.path.join(self.tmp, "certs-2")
        proc = self.spawn(port, cert_dir, os.path.join(self.tmp, "kube-apiserver-2.log"))
        self.extra_procs = getattr(self, "extra_procs", []) + [proc]
        url = "https://127.0.0.1:%d" % port
        ca = os.path.join(cert_dir, "apiserver.crt")
        wait_for(lambda: os.path.exists(ca), 30, "second API server's certificate")
        self.wait_ready(proc, url, verify=ca)
        return proc, url, ca

    def log_tail(self, n=3000):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def stop(self):
        for p in [self.proc] + getattr(self, "extra_procs", []):
            if p:
                stop_process(p)
        self.etcd.stop()

    def session(self, token):
        s = requests.Session()
        # Otherwise $REQUESTS_CA_BUNDLE (set on some machines) silently
        # replaces the session's CA, and proxies from the environment apply.
        s.trust_env = False
        s.headers["Authorization"] = "Bearer " + token
        s.verify = os.path.join(self.cert_dir, "apiserver.crt")
        return s

    # ---- objects ---------------------------------------------------------

    def api(self, method, path, **kw):
        r = self.s.request(method, self.url + path, timeout=30, **kw)
        return r

    def create(self, obj, check=True):
        r = self.api("POST", collection_path(obj), json=obj)
        if check:
            assert r.status_code in (200, 201), "%s %s: %s" % (
                obj["kind"], obj["metadata"].get("name"), r.text)
        return r

    def apply_file(self, path):
        """Creates every object of a YAML file (kubectl apply on a fresh
        cluster); waits for CRDs to be established."""
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for d in docs:
            r = self.create(d, check=False)
            assert r.status_code in (200, 201, 409), "%s: %s" % (path, r.text)
            if d["kind"] == "CustomResourceDefinition":
                self.wait_crd(d["metadata"]["name"])
        return docs

    def wait_crd(self, name):
        def established():
            r = self.api("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + name)
            conds = (r.json().get("status") or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conds)
        wait_for(established, 30, "CRD %s established" % name)

    def install(self):
        """deploy/k8s: CRDs and RBAC."""
        self.apply_file(os.path.join(DEPLOY, "crds.yaml"))
        self.apply_file(os.path.join(DEPLOY, "rbac.yaml"))
        return self

    def sa_token(self, ns=SCHED_NS, name="starcloud"):
        r = self.api("POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (ns, name),
                     json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                           "spec": {"expirationSeconds": 3600}})
        assert r.status_code == 201, r.text
        return r.json()["status"]["token"]

    def kubeconfig(self, token, path=None):
        path = path or os.path.join(self.tmp, "kubeconfig-%s" % secrets.token_hex(4))
        with open(self.ca, "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "test",
               "clusters": [{"name": "test", "cluster": {
                   "server": self.url, "certificate-authority-data": ca}}],
               "users": [{"name": "sched", "user": {"token": token}}],
               "contexts": [{"name": "test", "context": {
                   "cluster": "test", "user": "sched", "namespace": SCHED_NS}}]}
        with open(path, "w") as f:
            yaml.safe_dump(cfg, f)
        os.chmod(path, 0o600)
        return path

    def add_node(self, name, gpus=8, cpu="64", memory="512Gi", labels=None, model=None,
                 gpu_memory_mib=None, taints=None):
        labels = dict(labels or {})
        labels.setdefault("kubernetes.io/hostname", name)
        if model:
            labels["nvidia.com/gpu.product"] = model
        if gpu_memory_mib:
            labels["nvidia.com/gpu.memory"] = str(gpu_memory_mib)
        self.create({"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": name, "labels": labels}})
        cap = {"cpu": str(cpu), "memory": memory, "pods": "110"}
        if gpus:
            cap["nvidia.com/gpu"] = str(gpus)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {"status": {"capacity": cap, "allocatable": cap, "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady",
             "lastHeartbeatTime": now, "lastTransitionTime": now}]}}
        r = self.api("PATCH", "/api/v1/nodes/%s/status" % name, data=json.dumps(status),
                     headers={"Content-Type": "application/merge-patch+json"})
        assert r.ok, r.text
        # What the node lifecycle controller would do once the node is Ready.
        r = self.api("PATCH", "/api/v1/nodes/" + name,
                     data=json.dumps({"spec": {"taints": taints}}),
                     headers={"Content-Type": "application/merge-patch+json"})
        assert r.ok, r.text

    def queue(self, name, gpu_quota=0, weight=1, limit=-1, parent=None, priority=None,
              extra=None):
        spec = {"resources": {
            "gpu": {"quota": gpu_quota, "overQuotaWeight": weight, "limit": limit},
            "cpu": {"quota": -1, "overQuotaWeight": 1, "limit": -1},
            "memory": {"quota": -1, "overQuotaWeight": 1, "limit": -1}}}
        if parent:
            spec["parentQueue"] = parent
        if priority is not None:
            spec["priority"] = priority
        spec.update(extra or {})
        return self.create({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
                            "metadata": {"name": name}, "spec": spec})

    def pod_group(self, name, min_member, queue=None, ns="default", extra=None):
        spec = {"minMember": min_member}
        if queue:
            spec["queue"] = queue
        spec.update(extra or {})
        return self.create({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                            "metadata": {"name": name, "namespace": ns}, "spec": spec})

    def pod(self, name, gpus=1, cpu="1", memory="1Gi", queue=None, group=None, ns="default",
            scheduler="starcloud", annotations=None, labels=None, priority_class=None,
            spec_extra=None, check=True):
        labels = dict(labels or {})
        ann = dict(annotations or {})
        if queue:
            labels["kai.scheduler/queue"] = queue
        if group:
            ann["pod-group-name"] = group
        res = {"requests": {"cpu": cpu, "memory": memory}}
        if gpus:
            res["limits"] = {"nvidia.com/gpu": str(gpus)}
        spec = {"schedulerName": scheduler, "containers": [
            {"name": "main", "image": "busybox", "resources": res}]}
        if priority_class:
            spec["priorityClassName"] = priority_class
        spec.update(spec_extra or {})
        return self.create({"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": name, "namespace": ns, "labels": labels,
                                         "annotations": ann},
                            "spec": spec}, check=check)

    def priority_class(self, name, value):
        return self.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                            "metadata": {"name": name}, "value": value})

    def pods(self, ns=None):
        path = "/api/v1/namespaces/%s/pods" % ns if ns else "/api/v1/pods"
        r = self.api("GET", path)
        assert r.ok, r.text
        return r.json()["items"]

    def get_pod(self, name, ns="default"):
        r = self.api("GET", "/api/v1/namespaces/%s/pods/%s" % (ns, name))
        return r.json() if r.ok else None

    def bound(self, ns=None):
        """name -> node of every bound pod."""
        return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in self.pods(ns)
                if p["spec"].get("nodeName")}

    def events(self, ns="default", name=None):
        r = self.api("GET", "/api/v1/namespaces/%s/events" % ns)
        evs = r.json()["items"]
        if name:
            evs = [e for e in evs if e["involvedObject"]["name"] == name]
        return evs

    def delete_pod(self, name, ns="default", grace=0):
        return self.api("DELETE", "/api/v1/namespaces/%s/pods/%s" % (ns, name),
                        json={"gracePeriodSeconds": grace})

    def lease(self, name="starcloud-scheduler", ns=SCHED_NS):
        r = self.api("GET", "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s" % (ns, name))
        return r.json() if r.ok else None


class Kubelet(threading.Thread):
    """Plays every node's kubelet, as KWOK does: a bound Pending pod becomes
    Running; a pod with a deletionTimestamp is finished (deleted with grace
    0) after `linger` seconds, so tests can watch the victims' release."""

    def __init__(self, kube, linger=0.0, period=0.1):
        super().__init__(daemon=True)
        self.kube = kube
        self.linger = linger
        self.period = period
        self.stop_ev = threading.Event()
        self.seen_deleting = {}
        self.errors = []

    def run(self):
        while not self.stop_ev.is_set():
            try:
                self.step()
            except (requests.RequestException, ValueError):
                pass  # the API server is away (a test restarts it)
            except Exception as e:  # noqa: BLE001 (reported by the test)
                self.errors.append(repr(e))
            self.stop_ev.wait(self.period)

    def step(self):
        now = time.time()
        r = self.kube.api("GET", "/api/v1/pods")
        if not r.ok:
            return  # starting or restarting
        for p in r.json()["items"]:
            md, spec, st = p["metadata"], p["spec"], p.get("status", {})
            key = (md["namespace"], md["name"], md["uid"])
            if md.get("deletionTimestamp"):
                first = self.seen_deleting.setdefault(key, now)
                if now - first >= self.linger:
                    self.kube.api("DELETE", "/api/v1/namespaces/%s/pods/%s" % key[:2],
                                  json={"gracePeriodSeconds": 0,
                                        "preconditions": {"uid": md["uid"]}})
                continue
            if spec.get("nodeName") and st.get("phase") == "Pending":
                ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                conds = [c for c in st.get("conditions", []) if c["type"] != "Ready"]
                conds.append({"type": "Ready", "status": "True", "lastTransitionTime": ts})
                body = {"status": {"phase": "Running", "startTime": ts, "conditions": conds}}
                self.kube.api("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % key[:2],
                              data=json.dumps(body),
                              headers={"Content-Type": "application/strategic-merge-patch+json"})

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=10)


class Scheduler:
    """A `starcloud k8s` process."""

    def __init__(self, kube, kubeconfig, args=(), name="sched"):
        self.kube = kube
        self.kubeconfig = kubeconfig
        self.args = list(args)
        self.log_path = os.path.join(kube.tmp, "%s-%s.log" % (name, secrets.token_hex(3)))
        self.proc = None

    def start(self):
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen([BIN, "k8s", "--kubeconfig", self.kubeconfig] + self.args,
                                     stdout=self.log, stderr=self.log)
        return self

    def running(self):
        return self.proc and self.proc.poll() is None

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM):
        if self.proc:
            stop_process(self.proc, sig, timeout=30 if SAN else 10)
        self.log.close()
        if SAN:
            check_sanitizers(self.log_path)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def condition(pod, type_="PodScheduled"):
    for c in pod.get("status", {}).get("conditions", []):
        if c["type"] == type_:
            return c
    return None


@pytest.fixture
def kube(tmp_path):
    k = Kube(tmp_path).start()
    k.install()
    kubelet = Kubelet(k)
    kubelet.start()
    k.kubelet = kubelet
    yield k
    kubelet.stop()
    k.stop()
    assert not kubelet.errors, kubelet.errors[:3]


@pytest.fixture
def sched_config(kube):
    """A kubeconfig for the scheduler's ServiceAccount (deploy/k8s RBAC only)."""
    return kube.kubeconfig(kube.sa_token())
