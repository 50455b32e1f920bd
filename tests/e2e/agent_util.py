"""Helpers for the node agent's end-to-end tests: real `starcloud agent`
processes against a real server, with short heartbeats and back-offs."""
import os
import signal
import subprocess

from conftest import BIN, free_port, manifest, stop_process, wait_for  # noqa: F401 (re-exported)

FAST = ["--heartbeat", "300ms", "--backoff-base", "200ms", "--backoff-max", "2s",
        "--grace", "2s"]


class Agent:
    def __init__(self, server_url, token, name, data_dir, gpus="2xA100-80GB", extra=(),
                 prefix=(), listen_host="127.0.0.1", drain=True, token_file=None, port=None,
                 env=None):
        self.name = name
        self.data_dir = str(data_dir)
        self.port = port or free_port()
        self.addr = "%s:%d" % (listen_host, self.port)
        os.makedirs(self.data_dir, exist_ok=True)
        self.log = open(self.data_dir + ".log", "a+")
        cred = ["--token-file", str(token_file)] if token_file else ["--token", token]
        args = list(prefix) + [BIN, "agent", "--server", server_url] + cred + [
                               "--name", name, "--listen", self.addr,
                               "--data-dir", self.data_dir] + FAST + list(extra)
        if drain:
            args.append("--drain")
        if gpus:
            args += ["--gpus", gpus]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log,
                                     env=dict(os.environ, **env) if env else None)

    def stop(self, sig=signal.SIGTERM):
        stop_process(self.proc, sig)
        self.log.close()

    def output(self):
        self.log.flush()
        with open(self.data_dir + ".log") as f:
            return f.read()

    def cgroup_name(self):
        return cgroup_name(self.name, self.data_dir)

    def pod_dir(self, job, pod):
        return os.path.join(self.data_dir, "pods", job, pod)

    def work_dir(self, job, pod):
        """The pod's own folder (its cwd and HOME, owned by its uid); the
        pod folder above it holds the agent's files (log, record)."""
        return os.path.join(self.pod_dir(job, pod), "work")


def cgroup_name(node, data_dir):
    """The agent's folder under every cgroup hierarchy (src/agent/cgname.h):
    starcloud-NODE-HASH, HASH the 8 hex digits of a 32-bit FNV-1a over the
    node name and the data folder's real path, each with its NUL."""
    h = 2166136261
    for b in node.encode() + b"\0" + os.path.realpath(str(data_dir)).encode() + b"\0":
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return "starcloud-%s-%08x" % (node[:255 - len("starcloud--00000000")], h)


def metrics_secret(folder, secret="scrape-secret-0123456789"):
    """A scrape secret file for an agent's --metrics-token-file (0600, as
    it must be) and the headers that present it."""
    path = os.path.join(str(folder), "metrics.secret")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, (secret + "\n").encode())
    os.close(fd)
    return path, {"Authorization": "Bearer " + secret}


def job_obj(session, name):
    r = session.get(session.base + "/jobs/" + name)
    return r.json() if r.ok else None


def pods_of(session, name):
    obj = job_obj(session, name) or {}
    return {p["name"]: p for p in obj.get("status", {}).get("pods", [])}


def pod_where(session, job, pod, pred):
    def check():
        p = pods_of(session, job).get(pod)
        return p if p and pred(p) else None
    return check


def setup_queue(session, name="q", gpus=64):
    r = session.post(session.base + "/queues", json=manifest(
        "Queue", name, {"resources": {"gpu": {"quota": gpus}}}))
    assert r.status_code == 201, r.text


def run_job(session, name, command, replicas=1, gpu=0, q="q", **spec):
    task = {"name": "main", "replicas": replicas, "command": command,
            "resources": {"cpu": "100m", "memory": "64Mi"}}
    if gpu:
        task["resources"]["gpu"] = gpu
    for k in ("probes", "env", "args", "workingDir"):
        if k in spec:
            task[k] = spec.pop(k)
    body = manifest("Job", name, dict({"queue": q, "tasks": [task]}, **spec))
    r = session.post(session.base + "/jobs", json=body)
    assert r.status_code == 201, r.text
    return r


def process_start(pid):
    """When a process began, in CLOCK_BOOTTIME seconds (from /proc; 10 ms
    ticks): how soon something started, whatever the test's own delays."""
    with open("/proc/%d/stat" % pid) as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    return ticks / os.sysconf("SC_CLK_TCK")


def processes_with_env(key, value, under=None):
    """PIDs whose environment holds key=value (pods carry STARCLOUD_POD).
    under: only pods of an agent whose data folder is there (a pod's HOME is
    its folder), so a test is not confused by the same pod name in another
    test run on the same machine."""
    want = ("%s=%s" % (key, value)).encode()
    home = ("HOME=%s" % under).encode() if under else None
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read()
            with open("/proc/%s/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            fields = env.split(b"\0")
            if home and not any(f.startswith(home) for f in fields):
                continue
            if want in fields and state not in ("Z", "X"):
                found.append(int(pid))
        except OSError:
            pass
    return found
