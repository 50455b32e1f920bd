"""PodGroup and Queue status written back (src/k8s/kstatus.c) against a real
kube-apiserver: KAI's scheduling conditions, phase, counts and resources;
queue sums over the tree; no write when nothing changed; other writers'
conditions kept across conflicts; a CRD without the status subresource.
Deadlines are generous: the machine running these is shared and loaded."""
import json
import os
import threading
import time

import pytest
import yaml

from kube_util import (DEPLOY, Kube, Kubelet, Scheduler, condition, kube,  # noqa: F401
                       sched_config, wait_for)

PG = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups/"
Q = "/apis/scheduling.run.ai/v2/queues/"


def get(kube, path):
    r = kube.api("GET", path)
    assert r.ok, r.text
    return r.json()


def ours(pg):
    """The scheduling condition this scheduler writes (KAI's default pool)."""
    for c in (pg.get("status") or {}).get("schedulingConditions") or []:
        if c.get("nodePool") == "default":
            return c
    return None


def patch_status(kube, path, status):
    return kube.api("PATCH", path + "/status", data=json.dumps({"status": status}),
                    headers={"Content-Type": "application/merge-patch+json"})


def test_podgroup_and_queue_status_follow_the_gang(kube, sched_config):
    kube.add_node("n1", gpus=2)
    kube.add_node("n2", gpus=1)
    kube.queue("root", gpu_quota=8)
    kube.queue("team", gpu_quota=4, parent="root")
    kube.pod_group("gang", 4, queue="team")
    for i in range(4):
        kube.pod("gang-%d" % i, gpus=1, cpu="500m", memory="1Gi", group="gang")
    s = Scheduler(kube, sched_config).start()
    try:
        # Three GPUs for a gang of four: KAI's condition, with the reason.
        pg = wait_for(lambda: ours(get(kube, PG + "gang")) and get(kube, PG + "gang"), 60,
                      "the PodGroup's scheduling condition")
        c = ours(pg)
        assert c["type"] == "UnschedulableOnNodePool" and c["reason"] == "Unschedulable", c
        assert c["status"] == "True" and c["transitionID"], c
        assert "gang needs 4 pods, only 3 fit" in c["message"], c
        assert c["reasons"][0]["message"] == c["message"], c
        st = pg["status"]
        assert st["phase"] == "Pending" and st["pending"] == 4 and st["running"] == 0, st
        rs = st["resourcesStatus"]
        assert rs["requested"] == {"cpu": "2", "memory": str(4 << 30), "nvidia.com/gpu": "4"}
        assert rs["allocated"]["nvidia.com/gpu"] == "0", rs
        # An Event on the PodGroup says it too.
        ev = wait_for(lambda: [e for e in kube.events(name="gang")
                               if e["involvedObject"]["kind"] == "PodGroup"], 30,
                      "the PodGroup's Unschedulable event")
        assert ev[0]["reason"] == "Unschedulable" and ev[0]["type"] == "Warning", ev
        assert "gang needs 4 pods" in ev[0]["message"], ev
        # The queues: requested in the leaf and summed in its parent.
        wait_for(lambda: (get(kube, Q + "team").get("status") or {}).get("requested", {})
                 .get("nvidia.com/gpu") == "4", 60, "team's requested GPUs")
        root = wait_for(lambda: (get(kube, Q + "root").get("status") or {}).get(
            "requested", {}).get("nvidia.com/gpu") == "4" and get(kube, Q + "root"), 60,
            "root's requested GPUs (its child's)")
        assert root["status"]["childQueues"] == ["team"], root["status"]
        assert root["status"]["allocated"]["nvidia.com/gpu"] == "0", root["status"]

        # A fourth GPU: the gang runs; the condition goes, phase Running.
        kube.add_node("n3", gpus=1)

        def running():
            pg = get(kube, PG + "gang")
            st = pg.get("status") or {}
            return st.get("phase") == "Running" and not ours(pg) and st

        st = wait_for(running, 90, "the PodGroup Running")
        assert st["running"] == 4 and st["pending"] == 0, st
        assert st["resourcesStatus"]["allocated"]["nvidia.com/gpu"] == "4", st
        # Preemptible (the default class, 50): nothing non-preemptible.
        assert st["resourcesStatus"]["allocatedNonPreemptible"]["nvidia.com/gpu"] == "0", st
        for q in ("team", "root"):
            wait_for(lambda: (get(kube, Q + q).get("status") or {}).get("allocated", {})
                     .get("nvidia.com/gpu") == "4", 60, "%s's allocated GPUs" % q)

        # Nothing changes: nothing is written, though cycles keep running
        # (a pod that cannot fit anywhere keeps the scheduler busy).
        kube.pod("too-big", gpus=16)
        wait_for(lambda: condition(kube.get_pod("too-big")), 60, "too-big explained")
        rv = {p: get(kube, p)["metadata"]["resourceVersion"]
              for p in (PG + "gang", Q + "team", Q + "root")}
        time.sleep(6)  # several periods (1 s) of cycles; a write would show
        for p, v in rv.items():
            assert get(kube, p)["metadata"]["resourceVersion"] == v, p
    finally:
        s.stop()


def test_other_writers_conditions_are_kept(kube, sched_config):
    """Another node pool's condition (KAI's schedulers, one per pool, share
    the array) survives our writes, even with writes racing ours (the API
    answers 409 to a patch made on an old version; we read and write
    again); a field of ours someone overwrote is put back."""
    kube.add_node("n1", gpus=1)
    kube.queue("default", gpu_quota=4)
    kube.pod_group("pair", 2)
    for i in range(2):
        kube.pod("pair-%d" % i, gpus=1, group="pair")
    s = Scheduler(kube, sched_config).start()
    stop = threading.Event()
    try:
        wait_for(lambda: ours(get(kube, PG + "pair")), 60, "our condition")
        other = {"type": "UnschedulableOnNodePool", "nodePool": "pool-b",
                 "reason": "Unschedulable", "message": "written by another scheduler",
                 "status": "True", "transitionID": "100"}

        # Another writer: our condition as it is plus its own, and a phase
        # that is not ours to choose.
        def write_other(phase):
            pg = get(kube, PG + "pair")
            conds = [c for c in pg["status"]["schedulingConditions"]
                     if c.get("nodePool") != "pool-b"] + [other]
            return patch_status(kube, PG + "pair",
                                {"schedulingConditions": conds, "phase": phase})

        assert write_other("Bogus").ok
        wait_for(lambda: get(kube, PG + "pair")["status"].get("phase") == "Pending", 60,
                 "our phase put back")
        pg = get(kube, PG + "pair")
        assert any(c.get("nodePool") == "pool-b" for c in
                   pg["status"]["schedulingConditions"]), pg["status"]

        # Now race for a while: the other writer rewrites its condition
        # (every 0.1 s, 8 s) while the gang gets its room and our status
        # changes; our patches made on an old version are refused (409)
        # and made again on the new one. Then it settles.
        errors = []

        def racer():
            n = 0
            end = time.time() + 8
            while not stop.is_set() and time.time() < end:
                n += 1
                other["message"] = "written by another scheduler (%d)" % n
                try:
                    r = write_other(get(kube, PG + "pair")["status"].get("phase", ""))
                    if r.status_code not in (200, 409):
                        errors.append(r.text)
                except Exception as e:  # noqa: BLE001 (reported below)
                    errors.append(repr(e))
                stop.wait(0.1)

        t = threading.Thread(target=racer, daemon=True)
        t.start()
        kube.add_node("n2", gpus=1)
        t.join(60)
        assert not errors, errors[:3]

        # The racer's last write may have put back a stale copy of our
        # condition or phase: settled means all of ours is right again.
        def settled():
            st = get(kube, PG + "pair").get("status") or {}
            pools = [c.get("nodePool") for c in st.get("schedulingConditions") or []]
            return (st.get("phase") == "Running" and st.get("running") == 2 and
                    pools == ["pool-b"] and
                    ((st.get("resourcesStatus") or {}).get("allocated") or {}).get(
                        "nvidia.com/gpu") == "2")

        wait_for(settled, 120, "the pair Running in its status, the other pool's kept")
    finally:
        stop.set()
        s.stop()


def no_status_subresource_crds(tmp_path):
    with open(os.path.join(DEPLOY, "crds.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for d in docs:
        if d["metadata"]["name"] == "podgroups.scheduling.run.ai":
            for v in d["spec"]["versions"]:
                v.pop("subresources", None)
    path = tmp_path / "crds-no-status.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def test_crd_without_status_subresource(tmp_path):
    """KAI's CRDs have the status subresource; an older or hand-made one
    may not. Scheduling goes on, PodGroup status is not written, one
    warning names the CRD, and Queue status (its CRD has it) still is."""
    k = Kube(tmp_path).start()
    kubelet = None
    s = None
    try:
        k.apply_file(no_status_subresource_crds(tmp_path))
        k.apply_file(os.path.join(DEPLOY, "rbac.yaml"))
        kubelet = Kubelet(k)
        kubelet.start()
        k.add_node("n1", gpus=1)
        k.queue("default", gpu_quota=4)
        k.pod_group("pair", 2)
        for i in range(2):
            k.pod("pair-%d" % i, gpus=1, group="pair")
        s = Scheduler(k, k.kubeconfig(k.sa_token())).start()
        # Scheduling and the pods' explanations go on.
        wait_for(lambda: all((condition(k.get_pod("pair-%d" % i)) or {}).get("reason") ==
                             "Unschedulable" for i in range(2)), 60, "the pods explained")
        wait_for(lambda: (get(k, Q + "default").get("status") or {}).get(
            "requested", {}).get("nvidia.com/gpu") == "2", 60, "the queue's status")
        wait_for(lambda: "no status subresource" in s.output(), 60, "the warning")
        k.add_node("n2", gpus=1)
        wait_for(lambda: len(k.bound()) == 2, 60, "the pair bound")
        wait_for(lambda: (get(k, Q + "default").get("status") or {}).get(
            "allocated", {}).get("nvidia.com/gpu") == "2", 60, "the queue's allocation")
        out = s.output()
        # One warning per 5 minutes of refusals, not one per cycle (this
        # test takes well under a minute; two allows for a very slow run).
        assert 1 <= out.count("no status subresource") <= 2, out
        assert "podgroups.scheduling.run.ai" in out, out
        assert "status" not in get(k, PG + "pair"), get(k, PG + "pair")
    finally:
        if s:
            s.stop()
        if kubelet:
            kubelet.stop()
        k.stop()


def test_refused_requests_say_so_on_pods_and_podgroup(kube, sched_config):
    """What Kubernetes mode does not schedule (MIG instances, a share over
    several devices) is refused out loud: the pod's PodScheduled condition
    and a FailedScheduling Event name the field, and so does its PodGroup's
    scheduling condition and Event; nothing is bound."""
    kube.add_node("n1", gpus=8)
    kube.queue("default", gpu_quota=8)
    kube.pod_group("mig-gang", 2)
    mig = {"containers": [{"name": "m", "image": "busybox", "resources": {
        "limits": {"nvidia.com/mig-1g.10gb": "1"}}}]}
    for i in range(2):
        kube.pod("mig-%d" % i, gpus=0, group="mig-gang", spec_extra=mig)
    kube.pod("multi", gpus=0, annotations={"gpu-fraction": "0.5",
                                           "gpu-fraction-num-devices": "2"})
    kube.pod("fine", gpus=1)
    s = Scheduler(kube, sched_config).start()
    try:
        wait_for(lambda: "fine" in kube.bound(), 60, "the fine pod bound")
        for name, words in (("mig-0", ["nvidia.com/mig-1g.10gb", "MIG instances are not"]),
                            ("mig-1", ["nvidia.com/mig-1g.10gb"]),
                            ("multi", ["gpu-fraction-num-devices", "several devices"])):
            c = wait_for(lambda: condition(kube.get_pod(name)), 60, name + " explained")
            assert c["status"] == "False" and c["reason"] == "Unschedulable", c
            ev = wait_for(lambda: [e for e in kube.events(name=name)
                                   if e["reason"] == "FailedScheduling"], 60,
                          name + "'s FailedScheduling event")
            for w in words:
                assert w in c["message"] and w in ev[0]["message"], (name, w, c, ev)
        pg = wait_for(lambda: ours(get(kube, PG + "mig-gang")) and get(kube, PG + "mig-gang"),
                      60, "the MIG gang's condition")
        assert "nvidia.com/mig-1g.10gb" in ours(pg)["message"], ours(pg)
        assert pg["status"]["phase"] == "Pending", pg["status"]
        wait_for(lambda: [e for e in kube.events(name="mig-gang")
                          if e["involvedObject"]["kind"] == "PodGroup"
                          and "nvidia.com/mig-1g.10gb" in e["message"]], 60,
                 "the MIG gang's event")
        assert set(kube.bound()) == {"fine"}, kube.bound()
    finally:
        s.stop()


class WriteRacer:
    """A TLS proxy between the scheduler and the real API server (HTTP/1.1,
    bytes passed through unchanged) that, just before it forwards the first
    request whose line starts with `trigger`, runs `race()`: another writer
    changing the object first, exactly between the scheduler's read (its
    watch) and its write. The API server then answers the scheduler's
    conditional patch 409 for real, every time."""

    def __init__(self, kube, tmp_path, trigger, race):
        import socket
        import ssl
        import subprocess
        from conftest import free_port
        self.kube, self.trigger, self.race = kube, trigger.encode(), race
        self.fired = threading.Event()
        self.lines = []
        key, crt = str(tmp_path / "proxy.key"), str(tmp_path / "proxy.crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                        key, "-out", crt, "-days", "1", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ca = crt
        self.down = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.down.load_cert_chain(crt, key)
        self.down.set_alpn_protocols(["http/1.1"])
        self.up = ssl.create_default_context(cafile=kube.ca)
        self.up.set_alpn_protocols(["http/1.1"])
        self.port = free_port()
        self.url = "https://127.0.0.1:%d" % self.port
        self.lsock = socket.create_server(("127.0.0.1", self.port))
        self.socket_mod = socket
        self.stopping = False
        threading.Thread(target=self.accept, daemon=True).start()

    def kubeconfig(self, token):
        import base64
        path = self.kube.kubeconfig(token)
        with open(path) as f:
            cfg = yaml.safe_load(f)
        cfg["clusters"][0]["cluster"]["server"] = self.url
        with open(self.ca, "rb") as f:
            cfg["clusters"][0]["cluster"]["certificate-authority-data"] = \
                base64.b64encode(f.read()).decode()
        with open(path, "w") as f:
            yaml.safe_dump(cfg, f)
        return path

    def accept(self):
        while not self.stopping:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, raw):
        # One thread per connection drives both TLS sessions (non-blocking,
        # select). OpenSSL sessions are not thread-safe, and CPython's
        # SSLSocket takes no lock: the former reader/writer thread pair
        # (recv on one thread while the other sent on the same session)
        # sometimes lost the API server's answers (1 run in 5 under load:
        # the requests forwarded, the proxy's threads all waiting in recv,
        # nothing more reaching the scheduler), which looked like a
        # scheduler that never sent its watch or status writes.
        import select
        import ssl
        try:
            c = self.down.wrap_socket(raw, server_side=True)
            u = self.up.wrap_socket(self.socket_mod.create_connection(
                ("127.0.0.1", self.kube.port)), server_hostname="127.0.0.1")
        except OSError:
            raw.close()
            return
        c.setblocking(False)
        u.setblocking(False)
        inbuf, to_up, to_down = b"", b"", b""

        def recv(s):
            try:
                d = s.recv(65536)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return None  # a record not whole yet, or not data (a ticket)
            if not d:
                raise EOFError
            return d

        def send(s, buf):
            try:
                return buf[s.send(buf):]
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return buf

        try:
            while not self.stopping:
                # Decrypted bytes may wait inside a session: read them first.
                busy = c.pending() or u.pending()
                wl = [s for s, b in ((u, to_up), (c, to_down)) if b]
                rd, wr, _ = select.select([c, u], wl, [], 0 if busy else 1.0)
                if c in rd or c.pending():
                    d = recv(c)
                    if d:
                        inbuf += d
                        inbuf, fwd = self.requests(inbuf)
                        to_up += fwd
                if u in rd or u.pending():
                    d = recv(u)
                    if d:
                        to_down += d
                if to_up and u in wr:
                    to_up = send(u, to_up)
                if to_down and c in wr:
                    to_down = send(c, to_down)
        except EOFError:
            # One side closed: what the API server said still goes down.
            try:
                c.setblocking(True)
                c.sendall(to_down)
            except OSError:
                pass
        except (OSError, ValueError):
            pass
        finally:
            for s in (c, u):
                try:
                    s.close()
                except OSError:
                    pass

    def requests(self, buf):
        """Takes the whole requests at the start of buf (their lines noted,
        the race run before the trigger); returns (rest, bytes to forward)."""
        out = b""
        while b"\r\n\r\n" in buf:
            head, rest = buf.split(b"\r\n\r\n", 1)
            n = 0
            for h in head.split(b"\r\n")[1:]:
                name, _, v = h.partition(b":")
                if name.strip().lower() == b"content-length":
                    n = int(v.strip())
            if len(rest) < n:
                break
            body, buf = rest[:n], rest[n:]
            line = head.split(b"\r\n", 1)[0]
            self.lines.append(line.decode(errors="replace"))
            if line.startswith(self.trigger) and not self.fired.is_set():
                self.race()
                self.fired.set()
            out += head + b"\r\n\r\n" + body
        return buf, out

    def stop(self):
        self.stopping = True
        self.lsock.close()


def test_conflicting_write_is_refused_then_made_on_the_new_version(kube, tmp_path):
    """The 409 path, deterministically: another writer adds its node pool's
    condition between the scheduler's read and its first status write. The
    API server refuses that write (its resourceVersion is old); the
    scheduler waits for the watch to show the new version and writes again
    on it, keeping the other writer's condition."""
    kube.add_node("n1", gpus=1)
    kube.queue("default", gpu_quota=4)
    kube.pod_group("pair", 2)
    for i in range(2):
        kube.pod("pair-%d" % i, gpus=1, group="pair")
    other = {"type": "UnschedulableOnNodePool", "nodePool": "pool-b", "reason": "Unschedulable",
             "message": "written by another scheduler", "status": "True", "transitionID": "7"}

    def race():
        r = patch_status(kube, PG + "pair", {"schedulingConditions": [other]})
        assert r.ok, r.text

    proxy = WriteRacer(kube, tmp_path, "PATCH " + PG + "pair/status", race)
    s = Scheduler(kube, proxy.kubeconfig(kube.sa_token())).start()
    try:
        def both():
            pg = get(kube, PG + "pair")
            conds = (pg.get("status") or {}).get("schedulingConditions") or []
            return ours(pg) and any(c.get("nodePool") == "pool-b" for c in conds) and pg

        pg = wait_for(both, 90, "our condition beside the other writer's")
        c = ours(pg)
        assert "gang needs 2 pods" in c["message"], c
        # KAI's rule: one above the last transitionID in the array.
        assert c["transitionID"] == "8", pg["status"]
        assert proxy.fired.is_set()
        patches = [ln for ln in proxy.lines if ln.startswith("PATCH " + PG + "pair/status")]
        assert len(patches) >= 2, proxy.lines
        wait_for(lambda: "PodGroup default/pair status: changed by someone else" in s.output(),
                 30, "the conflict logged")
    finally:
        s.stop()
        proxy.stop()
