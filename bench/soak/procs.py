"""What really runs on the machine, read from /proc: the pod processes
(every pod carries STARCLOUD_JOB, STARCLOUD_POD and STARCLOUD_NODE in its
environment and runs in a session of its own), the GPUs they were given,
and whether one pod runs twice. The sampler is the ground truth the soak
holds the control plane's view against."""
import os
import signal
import threading
import time

MIG_SLICES = {"1g": 1, "2g": 2, "3g": 3, "4g": 4, "7g": 7}
# Memory slices (of 8) of the A100-80GB profiles (src/core/mig.c).
MIG_MEMORY = {"1g.10gb": 1, "1g.20gb": 2, "2g.20gb": 2, "3g.40gb": 4, "4g.40gb": 4,
              "7g.80gb": 8}


def signal_quiet(pid, sig):
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stat(pid):
    """(state, ppid, session id, start time in ticks) of pid, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return rest[0], int(rest[1]), int(rest[3]), int(rest[19])
    except (OSError, IndexError, ValueError):
        return None


def _environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            data = f.read()
    except OSError:
        return None
    env = {}
    for item in data.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep and k.startswith((b"STARCLOUD_", b"NVIDIA_VISIBLE", b"HOME")):
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def descendants(root):
    """Every process below root (by parent pid), at the moment of the scan."""
    children = {}
    for pid in all_pids():
        st = _stat(pid)
        if st:
            children.setdefault(st[1], []).append(pid)
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def pods_of_node(node):
    """Pids of every live process that belongs to a pod of node."""
    out = []
    for pid in all_pids():
        env = _environ(pid)
        if env and env.get("STARCLOUD_NODE") == node and "STARCLOUD_POD" in env:
            st = _stat(pid)
            if st and st[0] not in "ZX":
                out.append(pid)
    return out


def gpu_of(env):
    """GPUs a pod holds, from what its agent gave it: a share, a MIG slice
    (its share of the device's 7 compute slices) or whole devices."""
    share = env.get("STARCLOUD_GPU_SHARE")
    if share:
        try:
            return float(share)
        except ValueError:
            return 0.0
    prof = env.get("STARCLOUD_MIG_PROFILE")
    if prof:
        return MIG_SLICES.get(prof.split(".")[0], 1) / 7.0
    dev = env.get("NVIDIA_VISIBLE_DEVICES", "void")
    if not dev or dev in ("void", "none"):
        return 0.0
    return float(len([d for d in dev.split(",") if d]))


def mig_of(env):
    """(device, compute slices of 7, memory slices of 8) of a MIG pod, or
    None."""
    prof = env.get("STARCLOUD_MIG_PROFILE")
    if not prof:
        return None
    c = MIG_SLICES.get(prof.split(".")[0], 1)
    return env.get("STARCLOUD_MIG_GPU", "?"), c, MIG_MEMORY.get(prof, c * 8 / 7.0)


def mig_busy(held):
    """GPUs busy on MIG devices, from {(node, device): [compute, memory]}:
    each device as the larger of its compute (of 7) and memory (of 8) slices
    held, at most 1 (two 3g.40gb hold 6 of 7 compute slices and all 8 of
    memory: nothing more fits), as the server's allocated gauge counts."""
    return sum(min(1.0, max(c / 7.0, m / 8.0)) for c, m in held.values())


def whole_devices(env):
    """Device indices a whole-GPU pod holds (none for shares and MIG)."""
    if env.get("STARCLOUD_GPU_SHARE") or env.get("STARCLOUD_MIG_PROFILE"):
        return ()
    dev = env.get("NVIDIA_VISIBLE_DEVICES", "")
    return tuple(d for d in dev.split(",") if d.isdigit())


def scan(under=None):
    """The pods running now: {(job, pod): {session: {node, gpus, pids}}}.
    under: only processes whose HOME lies below that folder (this run's
    agents), so another run on the machine cannot confuse the count."""
    pods = {}
    for pid in all_pids():
        env = _environ(pid)
        if not env or "STARCLOUD_POD" not in env:
            continue
        if under and not env.get("HOME", "").startswith(under):
            continue
        st = _stat(pid)
        if not st or st[0] in "ZX":
            continue
        key = (env.get("STARCLOUD_JOB", ""), env["STARCLOUD_POD"])
        sess = pods.setdefault(key, {}).setdefault(st[2], {
            "node": env.get("STARCLOUD_NODE", ""), "gpus": gpu_of(env), "mig": mig_of(env),
            "pids": [],
            "stopped": False, "devices": whole_devices(env)})
        sess["pids"].append(pid)
        sess["stopped"] |= st[0] == "T"
    return pods


def any_alive(pids):
    """Whether one of pids still runs (not a zombie)."""
    for pid in pids:
        st = _stat(pid)
        if st and st[0] not in "ZX":
            return True
    return False


def still_together(sessions):
    """Whether every one of sessions still runs, checked after the scan
    that saw them all: then the oldest, alive now, was alive when the scan
    saw the newest, so they certainly ran at once. A scan takes a while on
    a loaded machine: a copy that stopped early in it and one that started
    late in it are not an overlap."""
    return all(any_alive(v["pids"]) for v in sessions)


class Sampler(threading.Thread):
    """Scans the pods every `period` seconds. Records, per sample, the GPUs
    held by pod processes that run (busy) and every instant a pod had two
    live sessions at once (a pod running twice), with both nodes."""

    def __init__(self, under, period=0.1):
        super().__init__(daemon=True)
        self.under, self.period = under, period
        self.samples = []       # (t, busy GPUs, pods running, stopped pods, busy on MIG nodes)
        self.counts = {}        # job -> [(t, pods running)] at every change
        self.mig_nodes = set()
        self.duplicates = []    # (t, job, pod, [(node, pids)])
        self.dup_keys = set()
        self.gpu_dups = []      # (t, node, device, [pods]): two pods on one whole GPU
        self.gpu_dup_keys = set()
        self.scans = 0
        self.stop_evt = threading.Event()
        self.lock = threading.Lock()
        self.last = {}

    def run(self):
        while not self.stop_evt.is_set():
            t = time.time()
            try:
                pods = scan(self.under)
            except OSError:
                pods = {}
            busy, stopped, mig = 0.0, 0, 0.0
            mig_held = {}  # (node, device) -> [compute, memory] slices
            per_job = {}
            holders = {}
            for key, sessions in pods.items():
                for v in sessions.values():
                    for d in v["devices"]:
                        holders.setdefault((v["node"], d), set()).add(key)
            for (node, d), keys in holders.items():
                if len(keys) > 1 and still_together(
                        [v for k in keys for v in pods[k].values() if v["node"] == node]):
                    with self.lock:
                        self.gpu_dups.append((t, node, d, sorted("%s/%s" % k for k in keys)))
                        self.gpu_dup_keys.add((node, d, tuple(sorted(keys))))
            for key, sessions in pods.items():
                per_job[key[0]] = per_job.get(key[0], 0) + 1
                live = {s: v for s, v in sessions.items()}
                if len(live) > 1 and still_together(live.values()):
                    with self.lock:
                        self.duplicates.append((t, key[0], key[1],
                                                [(v["node"], v["pids"]) for v in live.values()]))
                        self.dup_keys.add(key)
                for v in live.values():
                    if v["stopped"]:
                        stopped += 1
                    elif v["mig"]:
                        h = mig_held.setdefault((v["node"], v["mig"][0]), [0, 0])
                        h[0] += v["mig"][1]
                        h[1] += v["mig"][2]
                    else:
                        busy += v["gpus"]
                        if v["node"] in self.mig_nodes:
                            mig += v["gpus"]
            on_mig = mig_busy(mig_held)
            busy += on_mig
            mig += on_mig
            with self.lock:
                self.samples.append((t, busy, len(pods), stopped, mig))
                for job in set(per_job) | {j for j, c in self.counts.items() if c[-1][1]}:
                    n = per_job.get(job, 0)
                    hist = self.counts.setdefault(job, [(t, 0)])
                    if hist[-1][1] != n:
                        hist.append((t, n))
                self.last = pods
                self.scans += 1
            self.stop_evt.wait(self.period)

    def stop(self):
        self.stop_evt.set()
        self.join(timeout=5)

    def running(self, job=None):
        """The pods of the last scan, optionally only one job's."""
        with self.lock:
            return {k: v for k, v in self.last.items() if job is None or k[0] == job}


def pids_of_pod(pod, under=None):
    out = []
    for (job, name), sessions in scan(under).items():
        if name == pod:
            for s in sessions.values():
                out.extend(s["pids"])
    return out


def kill_tree(pid, sig=signal.SIGKILL):
    for p in descendants(pid) + [pid]:
        signal_quiet(p, sig)


def wait_gone(pid, timeout=10):
    deadline = time.time() + timeout
    while True:   # looks once even with timeout 0
        st = _stat(pid)
        if st is None or st[0] in "ZX":
            return True
        if time.time() >= deadline:
            return False
        time.sleep(0.05)
