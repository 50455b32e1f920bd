"""systemd readiness (Type=notify) and watchdog (src/net/sdnotify.c), spoken
to a datagram socket of the test's own, as systemd would hold it: each
daemon says READY=1 once it serves (not before: the test asks it at once),
pings WATCHDOG=1 when $WATCHDOG_USEC asks for it, says STOPPING=1 on
SIGTERM, and keeps $NOTIFY_SOCKET from its children (pods)."""
import os
import signal
import socket
import subprocess
import time

import pytest
import requests

from conftest import BIN, free_port, stop_process


class Notify:
    """A notify socket: a path, or (abstract=True) a name in Linux's
    abstract namespace, given as '@name' as systemd does."""

    def __init__(self, tmp_path, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = "sc-notify-%d-%d" % (os.getpid(), time.monotonic_ns())
            self.sock.bind("\0" + name)
            self.env = "@" + name
        else:
            os.makedirs(str(tmp_path), exist_ok=True)
            path = str(tmp_path / "notify.sock")
            self.sock.bind(path)
            self.env = path
        self.sock.settimeout(0.2)

    def messages(self, until, timeout=30.0):
        """Collects datagrams until one contains `until`; returns them all."""
        got = []
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                got.append(self.sock.recv(4096).decode())
            except socket.timeout:
                continue
            if until in got[-1]:
                return got
        raise AssertionError("no %r within %.0f s; got %r" % (until, timeout, got))

    def collect(self, seconds):
        """Every datagram received within the next `seconds`."""
        got = []
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                got.append(self.sock.recv(4096).decode())
            except socket.timeout:
                pass
        return got

    def close(self):
        self.sock.close()


def spawn(args, notify, watchdog_usec=None, watchdog_pid=None):
    env = dict(os.environ, NOTIFY_SOCKET=notify.env)
    if watchdog_usec:
        env["WATCHDOG_USEC"] = str(watchdog_usec)
    if watchdog_pid:
        env["WATCHDOG_PID"] = str(watchdog_pid)
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def serves(url):
    try:
        return requests.get(url, timeout=2).status_code < 500
    except requests.RequestException:
        return False


def check_daemon(notify, proc, health_url, status_word):
    msgs = notify.messages("READY=1")
    ready = msgs[-1]
    # Ready means serving: asked right after READY=1, the daemon answers.
    assert serves(health_url), health_url
    assert "STATUS=" in ready and status_word in ready, ready
    proc.send_signal(signal.SIGTERM)
    notify.messages("STOPPING=1", timeout=15)
    proc.wait(timeout=15)


@pytest.mark.parametrize("abstract", [False, True])
def test_server_ready_watchdog_stopping(tmp_path, abstract):
    n = Notify(tmp_path, abstract)
    port = free_port()
    proc = spawn([BIN, "server", "--listen", "127.0.0.1:%d" % port, "--data-dir",
                  str(tmp_path / "data")], n, watchdog_usec=200000)
    try:
        n.messages("READY=1")
        assert serves("http://127.0.0.1:%d/healthz" % port)
        # Pings every half period (0.1 s): about ten a second, at least three
        # on a loaded machine.
        assert n.collect(1.0).count("WATCHDOG=1") >= 3
        # A stuck loop stops pinging (systemd would restart the daemon).
        proc.send_signal(signal.SIGSTOP)
        n.collect(0.3)  # what was sent before the stop
        assert n.collect(0.5) == []
        proc.send_signal(signal.SIGCONT)
        assert n.messages("WATCHDOG=1", timeout=5)
        proc.send_signal(signal.SIGTERM)
        n.messages("STOPPING=1", timeout=15)
        assert proc.wait(timeout=15) == 0
    finally:
        proc.send_signal(signal.SIGCONT)
        stop_process(proc)
        n.close()


def test_server_without_watchdog_and_foreign_pid(tmp_path):
    """WATCHDOG_PID naming another process means the watchdog is not ours:
    READY=1 and no pings."""
    n = Notify(tmp_path)
    port = free_port()
    proc = spawn([BIN, "server", "--listen", "127.0.0.1:%d" % port, "--data-dir",
                  str(tmp_path / "data")], n, watchdog_usec=100000, watchdog_pid=1)
    try:
        msgs = n.messages("READY=1") + n.collect(0.5)
        assert not any("WATCHDOG=1" in m for m in msgs), msgs
    finally:
        stop_process(proc)
        n.close()


def test_server_that_cannot_start_is_never_ready(tmp_path):
    """A server refusing its store exits without READY=1 (systemd then
    reports the unit as failed, not as started)."""
    n = Notify(tmp_path)
    (tmp_path / "data").write_text("a file, not a folder")
    proc = spawn([BIN, "server", "--listen", "127.0.0.1:%d" % free_port(), "--data-dir",
                  str(tmp_path / "data")], n)
    assert proc.wait(timeout=15) != 0
    with pytest.raises(AssertionError):
        n.messages("READY=1", timeout=0.5)
    n.close()


def test_bad_notify_socket_is_reported_not_fatal(tmp_path):
    port = free_port()
    env = dict(os.environ, NOTIFY_SOCKET="vsock:2:1234")
    proc = subprocess.Popen([BIN, "server", "--listen", "127.0.0.1:%d" % port, "--data-dir",
                             str(tmp_path / "data")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 30
        while not serves("http://127.0.0.1:%d/healthz" % port):
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.05)
    finally:
        stop_process(proc)
    assert "NOTIFY_SOCKET \"vsock:2:1234\" is not a unix socket path" in proc.stderr.read()


def test_agent_gateway_worker(tmp_path):
    # A server for the agent to talk to (its readiness does not wait for it,
    # but the pod below needs it).
    sport = free_port()
    server = subprocess.Popen([BIN, "server", "--listen", "127.0.0.1:%d" % sport, "--data-dir",
                               str(tmp_path / "sdata")], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    procs = [server]
    try:
        token = server.stdout.readline().split()[-1]
        surl = "http://127.0.0.1:%d" % sport
        deadline = time.time() + 30  # the token is printed before it listens
        while not serves(surl + "/healthz"):
            assert time.time() < deadline, "the server did not start"
            time.sleep(0.05)
        # Agent: ready without waiting for registration, and its pods do not
        # see NOTIFY_SOCKET.
        n = Notify(tmp_path)
        aport = free_port()
        agent = spawn([BIN, "agent", "--server", surl, "--token", token, "--name", "n1",
                       "--listen", "127.0.0.1:%d" % aport, "--data-dir", str(tmp_path / "a"),
                       "--gpus", "1xA100-80GB", "--heartbeat", "300ms", "--drain"], n)
        procs.append(agent)
        n.messages("READY=1")
        assert serves("http://127.0.0.1:%d/healthz" % aport)
        s = requests.Session()
        s.headers["Authorization"] = "Bearer " + token
        base = surl + "/api/v1"
        assert s.post(base + "/queues", json={
            "apiVersion": "starcloud.dev/v1", "kind": "Queue", "metadata": {"name": "q"},
            "spec": {"resources": {"gpu": {"quota": 1}}}}).status_code == 201
        # The pod writes in its own work folder (it runs as its own uid and
        # may write nowhere else: docs/SECURITY.md).
        out = tmp_path / "a" / "pods" / "envdump" / "envdump-t-0" / "work" / "env.txt"
        assert s.post(base + "/jobs", json={
            "apiVersion": "starcloud.dev/v1", "kind": "Job", "metadata": {"name": "envdump"},
            "spec": {"queue": "q", "tasks": [{
                "name": "t", "replicas": 1, "resources": {"cpu": 0.1, "memory": "64Mi"},
                "command": ["/bin/sh", "-c", "env > env.txt.tmp; mv env.txt.tmp env.txt"]}]}
        }).status_code == 201
        deadline = time.time() + 30
        while not out.exists():
            assert time.time() < deadline, "the pod did not run"
            time.sleep(0.1)
        env = out.read_text()
        assert "STARCLOUD_POD=" in env and "NOTIFY_SOCKET" not in env and "WATCHDOG" not in env
        agent.send_signal(signal.SIGTERM)
        n.messages("STOPPING=1", timeout=15)
        agent.wait(timeout=15)
        n.close()

        # Gateway.
        n = Notify(tmp_path / "gw")
        gport = free_port()
        gw = spawn([BIN, "gateway", "--listen", "127.0.0.1:%d" % gport], n)
        procs.append(gw)
        check_daemon(n, gw, "http://127.0.0.1:%d/healthz" % gport, "serving on")
        n.close()

        # Worker: ready only once the model is loaded.
        ckpt = str(tmp_path / "tiny.bin")
        subprocess.run([BIN, "worker", "--gen-checkpoint", ckpt], check=True,
                       capture_output=True, timeout=60)
        n = Notify(tmp_path / "wk")
        wport = free_port()
        wk = spawn([BIN, "worker", "--checkpoint", ckpt, "--listen", "127.0.0.1:%d" % wport,
                    "--model", "tiny"], n)
        procs.append(wk)
        check_daemon(n, wk, "http://127.0.0.1:%d/v2/health/ready" % wport, "serving tiny")
        n.close()
    finally:
        for p in procs:
            stop_process(p)
