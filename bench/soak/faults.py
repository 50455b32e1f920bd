"""The soak's faults. Each is injected, then watched until the service or
the work it hit is whole again; the time that takes is its recovery time
(target: under 10 s). A fault whose recovery is not seen within its limit
is `recovered: False`, which fails the run.

Every fault works on what really runs (the /proc sampler) and on what the
server says, never on one of them alone: a replica counts as back when the
server lists it as a ready endpoint AND a process of it runs."""
import signal
import threading
import time

import requests

import procs
import workload


class Fault:
    name = "fault"
    what = ""

    def __init__(self, at):
        self.at = at            # planned start, seconds after the workload's start
        self.t_inject = None
        self.t_recovered = None
        self.recovered = False
        self.info = {}
        self.notes = []
        self.before = None      # counts() when injected (soak.run_fault)

    @property
    def recovery_s(self):
        if self.t_inject is None or self.t_recovered is None:
            return None
        return self.t_recovered - self.t_inject

    def to_dict(self, t0):
        return {"name": self.name, "what": self.what, "planned_s": self.at,
                "injected_s": None if self.t_inject is None else round(self.t_inject - t0, 2),
                "recovered": self.recovered,
                "recovery_s": None if self.recovery_s is None else round(self.recovery_s, 2),
                "info": self.info, "notes": self.notes}


def ready_count(soak, role, version=None):
    d = soak.get_deployment()
    if not d:
        return None
    eps = d.get("status", {}).get("endpoints", [])
    return len([e for e in eps if e.get("ready") and e.get("role") == role and
                (version is None or e.get("version") == version)])


BURST = 3.0   # the flood faults' load step: the arrival rate times this (at most soak.BURST_CAP/s)


def desired(soak, role):
    """The role's replica count now: the autoscaler's
    (status.autoscaling.ROLE.replicas, its minReplicas before the first
    decision), or the spec's for a role that is not autoscaled."""
    d = soak.get_deployment() or {}
    dis = d.get("spec", {}).get("disaggregation") or {}
    st = (d.get("status", {}).get("autoscaling") or {}).get(role) or {}
    if st.get("replicas") is not None:
        return st["replicas"]
    ro = dis.get(role) or {}
    if ro.get("autoscaling"):
        return ro["autoscaling"].get("minReplicas", 1)
    return ro.get("replicas")


def counts(soak):
    """Each role's count now (desired), kept when a fault is injected."""
    return {r: desired(soak, r) for r in ("prefill", "decode")}


def whole_again(soak, before, stable_only=True):
    """Serving is whole again after a fault: each role has the replicas it
    had when the fault hit (before: counts() then), or the autoscaler's
    count now if that is lower, ready and running. A count the autoscaler
    raised meanwhile (the flood's load step still in its scale-down window)
    is not the fault's to restore; the flood faults time their scale-ups
    apart (ScaleUp)."""
    if not before or None in before.values():
        return serving_whole(soak, stable_only)
    want = {}
    for r, n in before.items():
        now = desired(soak, r)
        want[r] = n if now is None else min(n, now)
    return serving_whole(soak, stable_only, want)


def max_replicas(soak, role):
    d = soak.get_deployment() or {}
    dis = d.get("spec", {}).get("disaggregation") or {}
    return ((dis.get(role) or {}).get("autoscaling") or {}).get("maxReplicas")


class ScaleUp:
    """The autoscaler's answer to a load step: decode's count at the step
    and the highest since (each role's, for the report)."""

    def __init__(self, soak):
        self.before = {r: desired(soak, r) or 0 for r in ("prefill", "decode")}
        self.peak = dict(self.before)
        self.t0 = time.time()
        self.t_up = self.t_all = None

    def seen(self, soak):
        for r in self.peak:
            self.peak[r] = max(self.peak[r], desired(soak, r) or 0)
        up = self.peak["decode"] > self.before["decode"] or \
            self.before["decode"] >= (max_replicas(soak, "decode") or 0)
        if up and self.t_up is None:
            self.t_up = time.time()
        return up

    def served(self, soak, stable_only=True):
        """Serving whole again after the step: each role has at least the
        replicas it had before it ready and running, and decode at least
        one of those the autoscaler added. (All it asks for may not fit: a
        rollout's canary pods count against the same quota; the time until
        they are all ready is reported apart, all_ready_s.)"""
        if not self.seen(soak):
            return False
        if self.t_all is None and serving_whole(soak, stable_only):
            self.t_all = time.time()
        need = dict(self.before)
        need["decode"] = min(self.before["decode"] + 1, self.peak["decode"])
        return serving_whole(soak, stable_only, need)

    def info(self):
        return {"decode_before": self.before["decode"], "decode_after": self.peak["decode"],
                "prefill_before": self.before["prefill"], "prefill_after": self.peak["prefill"],
                "scale_up_s": None if self.t_up is None else round(self.t_up - self.t0, 2),
                "all_ready_s": None if self.t_all is None else round(self.t_all - self.t0, 2)}


def serving_whole(soak, stable_only=True, want_of=None):
    """Every role has its desired count (or want_of[role]) of ready
    endpoints of the stable version, and as many of its processes run
    (none stopped)."""
    d = soak.get_deployment()
    if not d:
        return False
    stable = d.get("status", {}).get("stableVersion") or d["spec"].get("version")
    running = soak.sampler.running(job="llama")
    for role in ("prefill", "decode"):
        want = want_of[role] if want_of else desired(soak, role)
        have = ready_count(soak, role, stable if stable_only else None)
        if want is None or have is None or have < want:
            return False
        live = [k for k, v in running.items() if "-%s-" % role in k[1] and
                not any(s["stopped"] for s in v.values())]
        if len(live) < want:
            return False
    return True


def serving_pods(soak, role):
    """(pod, [pids]) of the role's processes running now, stable version."""
    out = []
    for (job, pod), sessions in soak.sampler.running(job="llama").items():
        if "-%s-" % role not in pod:
            continue
        for s in sessions.values():
            if not s["stopped"]:
                out.append((pod, s["pids"], s["node"]))
    return sorted(out)


def pod_status(soak, pod):
    """The Deployment's status entry of one pod (restarts, ready), or {}."""
    d = soak.get_deployment() or {}
    for p in d.get("status", {}).get("pods", []):
        if p.get("name") == pod:
            return p
    return {}


def replaced(soak, pod, old_pids, restarts_before):
    """The pod runs again: every old process is gone, the server counts a
    restart and says it is ready, and a new process of it runs. Without
    the first three, the sampler's last scan and the server's last report
    (both from before the fault) read as whole at once."""
    if not all(procs.wait_gone(p, 0) for p in old_pids):
        return False
    st = pod_status(soak, pod)
    if (st.get("restarts") or 0) <= restarts_before or not st.get("ready"):
        return False
    for (job, name), sessions in soak.sampler.running(job="llama").items():
        if name == pod and any(not v["stopped"] and not set(v["pids"]) & set(old_pids)
                               for v in sessions.values()):
            return True
    return False


class HangReplica(Fault):
    name = "hang-replica"
    what = "SIGSTOP every process of one decode replica (a wedged server: its port accepts, nothing answers)"

    def inject(self, soak):
        pods = serving_pods(soak, "decode")
        if not pods:
            self.notes.append("no decode replica running to hang")
            return False
        pod, pids, node = pods[0]
        self.info.update(pod=pod, node=node, pids=pids)
        self.restarts = pod_status(soak, pod).get("restarts") or 0
        self.t_inject = time.time()
        for pid in pids:
            procs.signal_quiet(pid, signal.SIGSTOP)
        return True

    def check(self, soak):
        # Back when the agent's liveness probe has killed the stopped
        # process and started the pod again, and the service is whole.
        return replaced(soak, self.info["pod"], self.info["pids"], self.restarts) and \
            whole_again(soak, self.before)

    def cleanup(self, soak):
        for pid in self.info.get("pids", []):
            procs.signal_quiet(pid, signal.SIGCONT)
            procs.signal_quiet(pid, signal.SIGKILL)


class KillDecodeMidStream(Fault):
    name = "kill-decode-mid-stream"
    what = "SIGKILL a decode replica while it streams tokens (the gateway must resume the streams on another decode replica)"

    def inject(self, soak):
        pods = serving_pods(soak, "decode")
        if not pods:
            self.notes.append("no decode replica running to kill")
            return False
        # The busiest one, by the gateway's own count of requests in flight.
        best, load = pods[0], -1.0
        try:
            text = requests.get(soak.gateway.url + "/metrics", timeout=2).text
        except requests.RequestException:
            text = ""
        eps = {e.get("pod"): e.get("url", "") for e in
               (soak.get_deployment() or {}).get("status", {}).get("endpoints", [])}
        for p in pods:
            ids = {p[0], eps.get(p[0], "-"), eps.get(p[0], "-").split("://")[-1]}
            n = 0.0
            for line in text.splitlines():
                if line.startswith("starcloud_gateway_replica_requests_in_flight{") and \
                        any('replica="%s"' % i in line for i in ids):
                    n = float(line.rsplit(" ", 1)[1])
            if n > load:
                best, load = p, n
        # Wait (up to 5 s) until streams are open on it, so the kill is mid-stream.
        deadline = time.time() + 5
        while time.time() < deadline and soak.traffic_open() < 1:
            time.sleep(0.05)
        pod, pids, node = best
        self.info.update(pod=pod, node=node, pids=pids, open_streams=soak.traffic_open())
        self.restarts = pod_status(soak, pod).get("restarts") or 0
        self.t_inject = time.time()
        for pid in pids:
            procs.signal_quiet(pid, signal.SIGKILL)
        return True

    def check(self, soak):
        return replaced(soak, self.info["pod"], self.info["pids"], self.restarts) and \
            whole_again(soak, self.before)


class FloodReclaim(Fault):
    name = "queue-flood-reclaim"
    what = ("team-b floods the cluster with one-GPU jobs far over its quota of 12; then "
            "serving traffic steps up (x3, at most 10/s), its autoscaler asks for more replicas within "
            "serving's own quota, and they must get their GPUs back by reclaim")

    def __init__(self, at, jobs, duration):
        super().__init__(at)
        self.jobs, self.duration = jobs, duration

    def inject(self, soak):
        for k in range(self.jobs):
            soak.submit("jobs", workload.filler_job("flood-%03d" % k, "team-b", self.duration))
        self.info["flood_jobs"] = self.jobs
        # Let team-b take the idle GPUs: far over its share.
        deadline = time.time() + 30
        while time.time() < deadline:
            row = soak.poller.latest()
            if row.get("q_team-b", 0) >= workload.QUOTAS["team-b"] + 8 and \
                    row.get("alloc", 0) >= row.get("gpus", 64) * 0.85:
                break
            time.sleep(0.5)
        row = soak.poller.latest()
        self.info["team_b_gpus_at_flood"] = row.get("q_team-b")
        self.info["cluster_alloc_at_flood"] = row.get("alloc")
        self.ev_before = dict(soak.poller.evictions)
        self.scale = ScaleUp(soak)
        self.t_inject = time.time()
        soak.burst(BURST)
        return True

    def check(self, soak):
        # Whole: the autoscaler asked for more decode replicas and serving
        # has what it had before plus a new decode replica (ScaleUp.served).
        ok = self.scale.served(soak)
        self.info.update(self.scale.info())
        if ok:
            after = soak.poller.evictions
            self.info["reclaims"] = after.get("reclaim", 0) - self.ev_before.get("reclaim", 0)
            self.info["preempts"] = after.get("preempt", 0) - self.ev_before.get("preempt", 0)
        return ok

    def finish(self, soak):
        # Every replica the autoscaler asks for ready: watched up to 30 s
        # more under the same load (all_ready_s).
        deadline = time.time() + 30
        while self.scale.t_all is None and time.time() < deadline and self.recovered:
            self.scale.served(soak)
            time.sleep(0.5)
        self.info.update(self.scale.info())

    def cleanup(self, soak):
        soak.burst(1.0)


class BadRollout(Fault):
    name = "bad-rollout"
    what = "roll out version 2, whose workers fail 20 % of requests (--fail-rate 0.2)"

    def inject(self, soak):
        self.t_inject = time.time()
        self.gw_last = None
        soak.roll_out("2", fail_rate=0.2)
        return True

    def watch_gateway(self, soak):
        """The gateway's view of the rollout: its canary attempts and failures
        (a failed canary request is answered by the stable version, so the
        clients' records do not show it), and when the canary first served."""
        try:
            st = requests.get(soak.gateway.url + "/admin/rollouts/" + workload.SERVED_MODEL,
                              timeout=1).json()
        except (requests.RequestException, ValueError):
            return
        if st.get("canary") != "2":
            return
        self.gw_last = st
        ev = st.get("stepEvidence") or {}
        cur = (st.get("currentWindow") or {}).get("canary") or {}
        if "t_canary_first" not in self.info and (ev.get("requests") or cur.get("requests")):
            self.info["t_canary_first"] = time.time()

    def check(self, soak):
        if "t_rollback" not in self.info:
            self.watch_gateway(soak)
        d = soak.get_deployment() or {}
        ro = d.get("status", {}).get("rollout") or {}
        if ro.get("phase") == "RolledBack" and "t_rollback" not in self.info:
            self.info["t_rollback"] = time.time()
            self.info["reason"] = ro.get("reason")
            self.watch_gateway(soak)
        if ro.get("phase") in ("Complete",) and ro.get("stable") == "2":
            self.notes.append("the bad version was PROMOTED")
            self.info["promoted"] = True
            return True
        if "t_rollback" not in self.info:
            return False
        # Whole again: the canary's processes gone, the stable version serving.
        canary = [k for k in soak.sampler.running(job="llama") if "-v2-" in k[1]]
        return not canary and whole_again(soak, self.before)

    def finish(self, soak):
        """What the clients saw between the rollout and its rollback, and
        what the canary did (the gateway's counts: every attempt on it, a
        failed one included, though its client got the stable version's
        answer)."""
        t_rb = self.info.pop("t_rollback", None)
        t_first = self.info.pop("t_canary_first", None)
        end = t_rb or time.time()
        res = [r for r in soak.traffic.snapshot() if self.t_inject <= r.sched <= end and
               r.end is not None]
        failed = [r for r in res if not r.ok()]
        self.info.update(
            requests_during=len(res), failed_during=len(failed),
            failed_share_pct=100.0 * len(failed) / len(res) if res else None,
            canary_answers=len([r for r in res if r.version == "2"]),
            errors=sorted({r.error or "http %d" % r.status for r in failed}))
        st = self.gw_last or {}
        ev = st.get("stepEvidence") or {}
        self.info.update(canary_attempts=ev.get("requests"), canary_failed=ev.get("errors"),
                         gateway_reason=st.get("reason"))
        if ev.get("requests"):
            self.info["canary_failed_pct"] = 100.0 * ev.get("errors", 0) / ev["requests"]
        if t_rb:
            self.info["rollback_s"] = round(t_rb - self.t_inject, 2)
        if t_first:
            self.info["canary_first_s"] = round(t_first - self.t_inject, 2)
            if t_rb:
                self.info["rollback_after_canary_s"] = round(t_rb - t_first, 2)


class KillNode(Fault):
    name = "kill-node"
    what = "SIGKILL a node: its agent and every pod process on it, as a power cut would"

    def __init__(self, at, restart_after=20.0):
        super().__init__(at)
        self.restart_after = restart_after

    def inject(self, soak):
        # The whole-GPU node with the most running GPU work, preferring one
        # that also hosts a serving replica.
        score = {}
        for (job, pod), sessions in soak.sampler.running().items():
            for s in sessions.values():
                n = s["node"]
                score[n] = score.get(n, 0) + s["gpus"] + (100 if job == "llama" else 0)
        cands = [workload.node_name(i) for i in workload.NORMAL_NODES]
        node = max(cands, key=lambda n: score.get(n, 0))
        agent = soak.agents[node]
        hit = {}
        for (job, pod), sessions in soak.sampler.running().items():
            if any(s["node"] == node for s in sessions.values()):
                hit.setdefault(job, []).append(pod)
        self.info.update(node=node, jobs_hit=sorted(hit), serving_hit=sorted(hit.get("llama", [])))
        self.gangs = {j: None for j in hit if j != "llama"}
        self.t_inject = time.time()
        self.info["killed_processes"] = agent.kill_node()
        self.node = node
        return True

    def gang_whole(self, soak, job):
        running = soak.sampler.running(job=job)
        spec = soak.job_spec(job)
        if spec is None:
            return False
        want = spec.get("minMember") or sum(t.get("replicas", 1) for t in spec["tasks"])
        live = [k for k, v in running.items()
                if any(s["node"] != self.node and not s["stopped"] for s in v.values())]
        return len(live) >= want

    def check(self, soak):
        now = time.time()
        for job, t in self.gangs.items():
            if t is None and (self.gang_whole(soak, job) or soak.job_finished(job)):
                self.gangs[job] = now
        if "t_node_lost" not in self.info:
            n = soak.get_node(self.node)
            if n and n.get("status", {}).get("ready") is False:
                self.info["t_node_lost"] = now
        serving = whole_again(soak, self.before)
        if serving and "t_serving" not in self.info:
            self.info["t_serving"] = now
        # Recovered once the server has given the node up and serving is
        # whole; the gangs' times are reported as they come (a gang may
        # wait for capacity like any pending job: 8 GPUs are gone).
        done = serving and "t_node_lost" in self.info
        if done and now - self.t_inject > self.restart_after and not self.info.get("restarted"):
            self.restart(soak)
        if not done:
            return False
        if "t_done" not in self.info:
            self.info["t_done"] = now
        # Recovered when serving is whole and the server gave the node up;
        # keep watching the gangs (up to 30 s more) to report their times.
        return all(t is not None for t in self.gangs.values()) or \
            now - self.t_inject > self.limit_gangs

    limit_gangs = 45.0

    def restart(self, soak):
        soak.agents[self.node].start()
        self.info["restarted"] = round(time.time() - self.t_inject, 2)

    def finish(self, soak):
        self.info["gangs"] = {j: (None if t is None else round(t - self.t_inject, 2))
                              for j, t in self.gangs.items()}
        # The fault's recovery is the service's (and the node given up);
        # gangs are reported one by one beside it.
        t_done = self.info.pop("t_done", None)
        if t_done is not None:
            self.t_recovered = t_done
        for k in ("t_node_lost", "t_serving"):
            if k in self.info:
                self.info[k.replace("t_", "") + "_s"] = round(self.info.pop(k) - self.t_inject, 2)
        if not self.info.get("restarted"):
            self.restart(soak)


class RestartServer(Fault):
    name = "restart-server"
    what = ("SIGKILL the server (embedded store) while objects are being written, start it "
            "again; every write it acknowledged must be there")

    def inject(self, soak):
        # A writer creates small objects as fast as the server answers, up
        # to and through the crash: the writes acknowledged just before
        # the kill are the ones a lost fsync would lose.
        self.stop_writer = threading.Event()
        self.writer = threading.Thread(target=soak.pc_writer, args=(self.stop_writer,),
                                       daemon=True)
        self.writer.start()
        time.sleep(2.0)
        self.t_inject = time.time()
        soak.server.kill()
        self.info["acked_before_kill"] = soak.ledger_count()
        soak.server.start()
        self.info["server_up_s"] = round(time.time() - self.t_inject, 2)
        # A probe job submitted after the restart must run.
        self.probe = "probe-%d" % int(self.t_inject)
        soak.submit("jobs", workload.meta("Job", self.probe, {
            "queue": "notebooks", "priorityClass": "best-effort",
            "tasks": [{"name": "main", "command": ["/bin/sleep", "600"],
                       "resources": {"cpu": "100m", "memory": "16Mi"}}]},
            labels={"soak": "probe"}))
        return True

    def check(self, soak):
        if not soak.sampler.running(job=self.probe):
            return False
        if not self.stop_writer.is_set():
            self.stop_writer.set()
            self.writer.join(timeout=30)
        nodes = soak.nodes_ready()
        self.info["nodes_ready"] = nodes
        return nodes >= workload.NODES

    def finish(self, soak):
        if hasattr(self, "stop_writer"):
            self.stop_writer.set()
        soak.delete("jobs", getattr(self, "probe", ""))


class StormNodeKill(KillNode):
    """Three at once, as the brief of issue 23 asks: team-b floods the
    cluster far over its quota; serving traffic steps up and its autoscaler
    scales decode up within its
    own quota (reclaim must take GPUs back from team-b) and rolls out a good
    version; while that reclaim and that rollout run, the whole-GPU node
    with the most serving and gang pods dies."""
    name = "node-kill-in-rollout-and-reclaim"
    what = ("team-b floods the cluster; serving traffic steps up (x3, at most 10/s) and the autoscaler scales "
            "decode up (reclaim must act) while version 3 rolls out; while both run, the "
            "busiest whole-GPU node is SIGKILLed")

    def __init__(self, at, jobs, duration, restart_after=20.0):
        super().__init__(at, restart_after)
        self.jobs, self.duration = jobs, duration

    def inject(self, soak):
        for k in range(self.jobs):
            soak.submit("jobs", workload.filler_job("storm-%03d" % k, "team-b", self.duration))
        deadline = time.time() + 25
        while time.time() < deadline:
            row = soak.poller.latest()
            if row.get("alloc", 0) >= row.get("gpus", 64) * 0.85 and \
                    row.get("q_team-b", 0) > workload.QUOTAS["team-b"]:
                break
            time.sleep(0.5)
        row = soak.poller.latest()
        self.info.update(team_b_gpus_at_flood=row.get("q_team-b"),
                         cluster_alloc_at_flood=row.get("alloc"))
        self.ev_before = dict(soak.poller.evictions)
        self.scale = ScaleUp(soak)
        self.t_start = time.time()
        soak.burst(BURST)
        soak.roll_out("3", fail_rate=0.0)
        # The node dies once the autoscaler asked for more decode replicas
        # and reclaim has begun (its counter moved) while the rollout runs,
        # or after 8 s whatever happened.
        deadline = time.time() + 8
        while time.time() < deadline:
            if self.scale.seen(soak) and \
                    soak.poller.evictions.get("reclaim", 0) > self.ev_before.get("reclaim", 0):
                break
            time.sleep(0.1)
        ro = ((soak.get_deployment() or {}).get("status") or {}).get("rollout") or {}
        self.info.update(self.scale.info())
        self.info.update(rollout_at_kill=ro.get("phase"),
                         reclaims_before_kill=soak.poller.evictions.get("reclaim", 0) -
                         self.ev_before.get("reclaim", 0),
                         kill_after_s=round(time.time() - self.t_start, 2))
        return super().inject(soak)

    def check(self, soak):
        now = time.time()
        for job, t in self.gangs.items():
            if t is None and (self.gang_whole(soak, job) or soak.job_finished(job)):
                self.gangs[job] = now
        if "t_node_lost" not in self.info:
            n = soak.get_node(self.node)
            if n and n.get("status", {}).get("ready") is False:
                self.info["t_node_lost"] = now
        # Serving whole: the autoscaler asked for more decode replicas and
        # serving has what it had before the step plus a new decode
        # replica (ScaleUp.served; the rollout may have either version
        # serving).
        whole = self.scale.served(soak, stable_only=False)
        self.info.update(self.scale.info())
        if whole and "t_serving" not in self.info:
            self.info["t_serving"] = now
        if "t_node_lost" in self.info and now - self.t_inject > self.restart_after and \
                not self.info.get("restarted"):
            self.restart(soak)
        if not (whole and "t_node_lost" in self.info):
            return False
        self.info.setdefault("t_done", now)
        return all(t is not None for t in self.gangs.values()) or \
            now - self.t_inject > self.limit_gangs

    def finish(self, soak):
        # The rollout's outcome, watched up to 90 s more (it steps on
        # evidence: minRequests canary requests per step).
        deadline = time.time() + 90
        phase = None
        while time.time() < deadline:
            self.scale.served(soak, stable_only=False)   # all_ready_s, if it comes
            ro = ((soak.get_deployment() or {}).get("status") or {}).get("rollout") or {}
            phase = ro.get("phase")
            if phase in ("Complete", "RolledBack") and ro.get("stable") in ("3", None) or \
                    phase == "RolledBack":
                break
            time.sleep(0.5)
        ro = ((soak.get_deployment() or {}).get("status") or {}).get("rollout") or {}
        self.info.update(rollout_phase=ro.get("phase"), rollout_stable=ro.get("stable"),
                         rollout_reason=ro.get("reason"),
                         rollout_done_s=round(time.time() - self.t_start, 2)
                         if ro.get("phase") in ("Complete", "RolledBack") else None)
        self.info.update(self.scale.info())
        after = soak.poller.evictions
        self.info["reclaims"] = after.get("reclaim", 0) - self.ev_before.get("reclaim", 0)
        self.info["preempts"] = after.get("preempt", 0) - self.ev_before.get("preempt", 0)
        super().finish(soak)

    def cleanup(self, soak):
        soak.burst(1.0)
