"""Fixtures for end-to-end tests: a real `starcloud server` on a free
loopback port in a temporary data directory, stopped after the test."""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import requests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("STARCLOUD_BIN", os.path.join(ROOT, "build", "starcloud"))


# Set by `make test-e2e-san`: the binary is built with ASan + UBSan, whose
# reports go to the server's stderr (the .out file next to its data dir).
SAN = os.environ.get("STARCLOUD_SAN") == "1"
SAN_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def check_sanitizers(path):
    with open(path, errors="replace") as f:
        text = f.read()
    for marker in SAN_MARKERS:
        at = text.find(marker)
        assert at < 0, "sanitizer report in %s:\n%s" % (path, text[max(0, at - 200):at + 3000])


@pytest.fixture(autouse=True)
def pod_users_reach_tmp(tmp_path):
    """Pods run as unprivileged uids (docs/SECURITY.md) in folders under
    the agents' data dirs, which the tests put under pytest's temporary
    folders; those are 0700, so let other users traverse them (o+x only:
    nobody else can list them), as /var/lib is for a real agent."""
    for p in [tmp_path] + list(tmp_path.parents):
        if str(p) in ("/", "/tmp"):
            break
        st = os.stat(p)
        if not st.st_mode & 0o001:
            os.chmod(p, st.st_mode | 0o111)


# What pods run from this checkout (serving_worker.py, the starcloud binary)
# is staged by pod_program() into one folder per test session: root's, mode
# 0755, under /tmp. Pods run as unprivileged uids (docs/SECURITY.md), and a
# checkout may sit below a folder they cannot pass through (`mktemp -d` makes
# 0700 folders; /root is 0700): they could not reach it there, and the
# user's folders are not ours to open.
_staged = {"dir": None, "files": {}}


def pod_program(path):
    """The path of a copy of path (a file of this checkout, or BIN) that the
    pods' users can read and run; made once per session."""
    src = os.path.realpath(path)
    if src in _staged["files"]:
        return _staged["files"][src]
    if _staged["dir"] is None:
        d = tempfile.mkdtemp(prefix="starcloud-pod-programs-")
        os.chmod(d, 0o755)
        _staged["dir"] = d
    dst = os.path.join(_staged["dir"], "%d-%s" % (len(_staged["files"]), os.path.basename(src)))
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o755)
    _staged["files"][src] = dst
    return dst


def remove_pod_programs():
    if _staged["dir"]:
        shutil.rmtree(_staged["dir"], ignore_errors=True)
    _staged["dir"] = None
    _staged["files"].clear()


@pytest.fixture(scope="session", autouse=True)
def pod_programs_removed():
    """The staged copies go with the session."""
    yield
    remove_pod_programs()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Checkpoints of `starcloud worker --gen-checkpoint` the serving tests use:
# TINY answers at once, MICRO is smaller still (a worker to scrape or trace),
# SLOW takes seconds for a long answer on this machine (a stream still
# running when the test acts).
CKPT_TINY = dict(dim=64, layers=2, heads=4, kv_heads=2, vocab=512, seq_len=128, seed=7)
CKPT_MICRO = dict(dim=32, layers=1, heads=2, kv_heads=1, vocab=512, seq_len=64)
CKPT_SLOW = dict(dim=256, layers=6, heads=8, kv_heads=4, vocab=512, seq_len=512, seed=7)


def gen_checkpoint(path, dim, layers, heads, kv_heads, vocab, seq_len, seed=None):
    """Writes a random checkpoint of that shape at path (the worker's own
    default seed when seed is None); returns path."""
    args = [BIN, "worker", "--gen-checkpoint", str(path), "--dim", str(dim), "--layers",
            str(layers), "--heads", str(heads), "--kv-heads", str(kv_heads), "--vocab",
            str(vocab), "--seq-len", str(seq_len)]
    if seed is not None:
        args += ["--seed", str(seed)]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    assert "wrote" in out.stdout, out.stdout
    return path


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return gen_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.bin", **CKPT_TINY)


@pytest.fixture(scope="module")
def slow_ckpt(tmp_path_factory):
    return gen_checkpoint(tmp_path_factory.mktemp("slow") / "slow.bin", **CKPT_SLOW)


# The default deadline is for conditions that hold "soon": generous, since
# a loaded 2-core CI machine delays agents, servers and this loop alike;
# a test that asserts how soon measures it (process start times, server
# timestamps), never by this deadline.
def wait_for(fn, timeout=30.0, what="condition", step=0.05):
    """fn() until it returns something true, which is returned. fn is asked
    once more after the deadline, so a slow last step still counts."""
    deadline = time.time() + timeout
    while True:
        last = fn()
        if last:
            return last
        if time.time() > deadline:
            raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))
        time.sleep(step)


def stop_process(proc, sig=signal.SIGTERM, timeout=10):
    """Sends sig to proc if it still runs, waits up to timeout seconds, then
    kills it; returns once it has exited."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Server:
    def __init__(self, data_dir, extra=()):
        self.data_dir = str(data_dir)
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.extra = list(extra)
        self.proc = None
        self.token = None

    def start(self):
        self.out = open(os.path.join(self.data_dir + ".out"), "a+")
        self.proc = subprocess.Popen(
            [BIN, "server", "--listen", "127.0.0.1:%d" % self.port, "--data-dir", self.data_dir]
            + self.extra, stdout=subprocess.PIPE, stderr=self.out, text=True)
        # Generous: on a loaded 2-core machine a first start (fsync of a new
        # database) can take seconds. A server that exited is reported at once.
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.out.seek(0)
                raise RuntimeError("server exited with %d: %s" % (self.proc.returncode,
                                                                  self.out.read()[-2000:]))
            try:
                if requests.get(self.url + "/healthz", timeout=1).ok:
                    return self
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.05)
        raise RuntimeError("server did not start within 30 s")

    def read_admin_token(self):
        line = self.proc.stdout.readline()
        m = re.search(r"(sc_[0-9a-f]+)", line)
        assert m, "no admin token printed: %r" % line
        self.token = m.group(1)
        return self.token

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30 if SAN else 10)
        self.out.close()
        if SAN:
            check_sanitizers(self.data_dir + ".out")

    def session(self, token=None):
        s = requests.Session()
        s.headers["Authorization"] = "Bearer " + (token or self.token)
        s.base = self.url + "/api/v1"
        return s


# Modules whose tests run against both store backends (the etcd one needs
# etcd-server; see etcd_util.py).
BOTH_BACKENDS = {"test_api", "test_auth_input", "test_list", "test_sched"}


def pytest_generate_tests(metafunc):
    if "server" in metafunc.fixturenames and \
            metafunc.module.__name__.rsplit(".", 1)[-1] in BOTH_BACKENDS:
        metafunc.parametrize("backend", ["sqlite", "etcd"], indirect=True)


@pytest.fixture
def backend(request):
    return getattr(request, "param", "sqlite")


@pytest.fixture(scope="session")
def etcd_session(tmp_path_factory):
    from etcd_util import Etcd
    e = Etcd(tmp_path_factory.mktemp("etcd")).start()
    yield e
    e.stop()


_prefixes = iter(range(1, 1 << 30))


@pytest.fixture
def server(tmp_path, backend, request):
    extra = []
    if backend == "etcd":
        # One etcd for the session; each server gets its own key prefix.
        etcd = request.getfixturevalue("etcd_session")
        extra = ["--store", etcd.store_url, "--etcd-prefix", "/t%d/" % next(_prefixes)]
    srv = Server(tmp_path / "data", extra).start()
    srv.read_admin_token()
    yield srv
    srv.stop()


@pytest.fixture
def admin(server):
    return server.session()


def manifest(kind, name, spec=None, labels=None, api="starcloud.dev/v1"):
    md = {"name": name}
    if labels:
        md["labels"] = labels
    obj = {"apiVersion": api, "kind": kind, "metadata": md}
    if spec is not None:
        obj["spec"] = spec
    return obj


def node(name, gpus=8, labels=None):
    return manifest("Node", name, {"cpu": 64, "memory": "512Gi",
                                   "gpus": {"count": gpus, "model": "A100-80GB",
                                            "memory": "80Gi"}}, labels)


def queue(name, gpu_quota=8):
    return manifest("Queue", name, {"resources": {"gpu": {"quota": gpu_quota,
                                                          "overQuotaWeight": 1,
                                                          "limit": -1}}})


def pclass(name, value=100):
    return manifest("PriorityClass", name, {"value": value, "preemptible": True})


def job(name, q="team-a", gpus=1, replicas=1, labels=None):
    return manifest("Job", name, {"queue": q, "tasks": [
        {"name": "worker", "replicas": replicas, "command": ["python3", "train.py"],
         "resources": {"cpu": 1, "memory": "1Gi", "gpu": gpus}}]}, labels)


def deployment(name, q="serving"):
    return manifest("Deployment", name, {"queue": q, "model": "llama-3-8b", "version": "2",
                                         "replicas": 2,
                                         "template": {"resources": {"gpu": 1}}})


EXAMPLES = {
    "nodes": lambda n: node(n),
    "queues": lambda n: queue(n),
    "priorityclasses": lambda n: pclass(n),
    "jobs": lambda n: job(n),
    "deployments": lambda n: deployment(n),
}


def wait_daemon(url, proc, what, headers=None, timeout=30):
    """GETs url until it answers 2xx and returns the text; the test fails
    when proc (the daemon `what`) exits first, or after timeout seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail("%s exited with %d" % (what, proc.returncode))
        try:
            r = requests.get(url, timeout=1, headers=headers)
            if r.ok:
                return r.text
        except requests.RequestException:
            pass
        time.sleep(0.1)
    pytest.fail("%s did not answer %s" % (what, url))


def create(session, kind, obj):
    """POSTs obj to /api/v1/<kind>; it must be created (201). Its JSON."""
    r = session.post(session.base + "/" + kind, json=obj)
    assert r.status_code == 201, r.text
    return r.json()


def settled(session, url, timeout=10.0):
    """Waits until the scheduler has written the object's status (jobs and
    deployments get a phase from the first cycle after a change; a
    deployment's POST already stores rollout state, so "status" alone is not
    enough) and the object has stopped changing, then returns it; a write
    based on it then does not race that cycle. Fails rather than return an
    object the loop is still about to rewrite."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        obj = session.get(url).json()
        if "phase" in obj.get("status", {}):
            if last is not None and obj == last:
                return obj
            last = obj
        time.sleep(0.1)
    raise AssertionError("%s did not settle within %.0f s: %r" % (url, timeout, last))
