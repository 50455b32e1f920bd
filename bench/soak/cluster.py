"""The soak's daemons: one `starcloud server` (embedded SQLite store), one
agent per node with declared GPUs and a token of its own, and a gateway that
follows the server's Deployments. Every process listens on 127.0.0.1 on a
free port and is started and stopped by this module; nothing here sends
traffic anywhere but loopback."""
import json
import os
import re
import signal
import socket
import subprocess
import time

import requests

import procs


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_block(n=64):
    """A base port for the Deployment's pods (the server hands out base,
    base+1, ... on a shared host): below the kernel's ephemeral range so
    client sockets cannot take one, every port of the block free now."""
    import random
    rnd = random.Random()
    for _ in range(400):
        base = rnd.randrange(20000, 32000 - n, 16)
        socks = []
        try:
            for p in range(base, base + n):
                sk = socket.socket()
                socks.append(sk)
                sk.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for sk in socks:
                sk.close()
    raise RuntimeError("no free block of %d ports below 32000" % n)


def wait_until(fn, timeout, step=0.1, what="condition"):
    """Polls fn until it returns something true; raises after timeout."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = fn()
        except (requests.RequestException, OSError, ValueError) as e:
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(step)
    raise TimeoutError("timed out after %.0f s waiting for %s (last: %r)" % (timeout, what, last))


def write_secret(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def flags_of(binary, verb):
    """The flags a verb accepts (from its --help), so the harness starts
    daemons the way the binary it is given requires (a token file where
    --token-file exists, for instance)."""
    out = subprocess.run([binary, verb, "--help"], capture_output=True, text=True)
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", out.stdout + out.stderr))


class Daemon:
    """A process with its log; `alive()` says whether it still runs, and
    `exited_unexpectedly` whether it died without being told to."""

    def __init__(self, name, args, log_path, env=None):
        self.name, self.args, self.log_path, self.env = name, args, log_path, env
        self.proc = None
        self.stopping = False
        self.crashes = []   # (time, returncode) of exits nobody asked for

    def start(self, stdout=None):
        self.log = open(self.log_path, "a+")
        self.stopping = False
        self.proc = subprocess.Popen(self.args, stdout=stdout or self.log, stderr=self.log,
                                     env=self.env, start_new_session=True)
        self.started = time.time()
        return self

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def check(self):
        """Records an exit nobody asked for (a crash); returns False then."""
        if self.proc is None or self.stopping:
            return True
        rc = self.proc.poll()
        if rc is None:
            return True
        if not any(c[1] == rc and c[2] == self.proc.pid for c in self.crashes):
            self.crashes.append((time.time(), rc, self.proc.pid))
        return False

    def stop(self, sig=signal.SIGTERM, timeout=15):
        self.stopping = True
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()
            self.log = None

    def kill(self):
        """SIGKILL, as a crash or a power cut would."""
        self.stopping = True
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def tail(self, n=3000):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""


class Server(Daemon):
    def __init__(self, binary, root):
        self.data_dir = os.path.join(root, "server")
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.token_file = os.path.join(root, "admin.token")
        args = [binary, "server", "--listen", "127.0.0.1:%d" % self.port,
                "--data-dir", self.data_dir]
        self.has_token_file = "--admin-token-file" in flags_of(binary, "server")
        if self.has_token_file:
            args += ["--admin-token-file", self.token_file]
        super().__init__("server", args, os.path.join(root, "server.log"))
        self.token = None

    def start(self, stdout=None):
        first = self.token is None
        super().start(stdout=subprocess.PIPE if first and not self.has_token_file else None)
        wait_until(self.ready, 60, what="the server's /healthz")
        if first:
            if self.has_token_file:
                wait_until(lambda: os.path.exists(self.token_file) and
                           open(self.token_file).read().strip(), 10, what="the admin token")
                self.token = open(self.token_file).read().strip()
            else:
                line = self.proc.stdout.readline()
                m = re.search(r"(sc_[0-9a-f]+)", line)
                if not m:
                    raise RuntimeError("no admin token printed: %r" % line)
                self.token = m.group(1)
                write_secret(self.token_file, self.token)
        return self

    def ready(self):
        if not self.alive():
            raise RuntimeError("server exited with %s: %s" % (self.proc.returncode, self.tail()))
        try:
            return requests.get(self.url + "/healthz", timeout=2).ok
        except requests.RequestException:
            return False

    def session(self, token=None):
        s = requests.Session()
        s.headers["Authorization"] = "Bearer " + (token or self.token)
        s.base = self.url + "/api/v1"
        return s

    def make_token(self, role, queues=None, node=None):
        body = {"role": role}
        if queues:
            body["queues"] = queues
        if node:
            body["node"] = node
        r = self.session().post(self.url + "/api/v1/tokens", json=body, timeout=10)
        if r.status_code not in (200, 201):
            raise RuntimeError("token %s: %d %s" % (body, r.status_code, r.text))
        return r.json()["token"]


class Agent(Daemon):
    """One node: `starcloud agent` with declared GPUs. A fast heartbeat and
    back-off, as the e2e tests use, so the soak's faults resolve in seconds,
    and a 3 s fence time (default 5 s): a lost node's pods are given away
    lease 1.5 s + 3 s after its last heartbeat; it stops them itself at
    lease + 1.5 s and kills what is left 0.75 s later (docs/AGENT.md)."""

    def __init__(self, binary, root, server, name, gpus, labels, token):
        self.node = name
        self.data_dir = os.path.join(root, "agents", name)
        os.makedirs(self.data_dir, exist_ok=True)
        os.chmod(os.path.join(root, "agents"), 0o755)
        self.port = free_port()
        flags = flags_of(binary, "agent")
        args = [binary, "agent", "--server", server.url, "--name", name,
                "--gpus", gpus, "--labels", labels, "--cpu", "96", "--memory", "1Ti",
                "--listen", "127.0.0.1:%d" % self.port, "--data-dir", self.data_dir,
                "--heartbeat", "500ms", "--backoff-base", "500ms", "--backoff-max", "5s",
                "--grace", "3s", "--fence-time", "3s"]
        env = dict(os.environ)
        if "--token-file" in flags:
            args += ["--token-file", write_secret(os.path.join(root, name + ".token"), token)]
        else:
            args += ["--token", token]
        super().__init__("agent " + name, args, os.path.join(root, "agents", name + ".log"),
                         env=env)

    def kill_node(self):
        """The node dies: its agent, everything the agent started and every
        pod process of this node, frozen first (SIGSTOP) so none of them
        can start another before the SIGKILLs land. Returns how many
        processes were killed."""
        self.stopping = True
        pids = set(procs.descendants(self.pid)) if self.alive() else set()
        if self.alive():
            pids.add(self.pid)
        pids |= set(procs.pods_of_node(self.node))
        for pid in pids:
            procs.signal_quiet(pid, signal.SIGSTOP)
        for pid in pids:
            procs.signal_quiet(pid, signal.SIGKILL)
        if self.proc:
            self.proc.wait()
        # A process this scan missed (started between the two) goes too.
        late = set(procs.pods_of_node(self.node)) - pids
        for pid in late:
            procs.signal_quiet(pid, signal.SIGKILL)
        if getattr(self, "log", None):
            self.log.close()
            self.log = None
        return len(pids | late)


class Gateway(Daemon):
    def __init__(self, binary, root, server, token):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        flags = flags_of(binary, "gateway")
        args = [binary, "gateway", "--listen", "127.0.0.1:%d" % self.port,
                "--server", server.url, "--probe-interval", "500ms",
                "--analysis-window", "2s", "--attempt-timeout", "3s", "--idle-timeout", "2s",
                "--timeout", "30s"]
        env = dict(os.environ)
        if "--token-file" in flags:
            args += ["--token-file", write_secret(os.path.join(root, "gateway.token"), token)]
        else:
            env["STARCLOUD_TOKEN"] = token
        super().__init__("gateway", args, os.path.join(root, "gateway.log"), env=env)

    def start(self, stdout=None):
        super().start()
        wait_until(lambda: requests.get(self.url + "/healthz", timeout=1).ok, 30,
                   what="the gateway's /healthz")
        return self

    def metrics(self):
        return requests.get(self.url + "/metrics", timeout=5).text


def metric_sum(text, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not (line.startswith(name + "{") or line.startswith(name + " ")):
            continue
        if all('%s="%s"' % kv in line for kv in labels.items()):
            try:
                total += float(line.rsplit(" ", 1)[1])
            except ValueError:
                pass
    return total


def load_json(path):
    with open(path) as f:
        return json.load(f)
