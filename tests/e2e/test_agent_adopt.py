"""Node agent restarts: pods still running from before are adopted (no
second copy), those no longer assigned are stopped, an adopted pod that
dies is restarted; old pod folders are removed by retention."""
import os
import signal
import time

from agent_util import Agent, pod_where, pods_of, processes_with_env, run_job, setup_queue, wait_for


def running(p):
    return p["phase"] == "Running"


def one_pid(pod, under):
    pids = wait_for(lambda: processes_with_env("STARCLOUD_POD", pod, under), what="pod process")
    assert len(pids) == 1, pids
    return pids[0]


def restart(server, tmp_path, old, extra=()):
    old.stop()  # SIGTERM without --drain: the pods outlive it
    return Agent(server.url, server.token, "n1", tmp_path / "n1", drain=False, extra=extra)


def test_restarted_agent_adopts_running_pod(server, admin, tmp_path):
    a = Agent(server.url, server.token, "n1", tmp_path / "n1", drain=False)
    try:
        setup_queue(admin)
        run_job(admin, "keep", ["sleep", "600"], restartPolicy="Always")
        wait_for(pod_where(admin, "keep", "keep-main-0", running))
        pid = one_pid("keep-main-0", str(tmp_path))
        a = restart(server, tmp_path, a)
        wait_for(lambda: "adopted (pid %d" % pid in a.output(), what="adoption")
        time.sleep(1.5)  # several heartbeats and the list + reconcile
        assert processes_with_env("STARCLOUD_POD", "keep-main-0", str(tmp_path)) == [pid]
        p = pods_of(admin, "keep")["keep-main-0"]
        assert running(p) and p.get("restarts", 0) == 0
        # The adopted pod is ours: killing it from outside gets a restart.
        os.kill(pid, signal.SIGKILL)
        wait_for(pod_where(admin, "keep", "keep-main-0", lambda q: q.get("restarts") == 1),
                 timeout=8, what="restart of the adopted pod")
        new = one_pid("keep-main-0", str(tmp_path))
        assert new != pid
    finally:
        a.stop()
        for pid in processes_with_env("STARCLOUD_JOB", "keep", str(tmp_path)):
            os.kill(pid, signal.SIGKILL)


def test_restarted_agent_stops_unassigned_pods(server, admin, tmp_path):
    a = Agent(server.url, server.token, "n1", tmp_path / "n1", drain=False)
    try:
        setup_queue(admin)
        run_job(admin, "gone", ["sleep", "600"], restartPolicy="Always")
        wait_for(pod_where(admin, "gone", "gone-main-0", running))
        pid = one_pid("gone-main-0", str(tmp_path))
        a.stop()
        assert admin.delete(admin.base + "/jobs/gone").ok
        a = Agent(server.url, server.token, "n1", tmp_path / "n1", drain=False)
        wait_for(lambda: not processes_with_env("STARCLOUD_POD", "gone-main-0", str(tmp_path)),
                 timeout=30,
                 what="the unassigned pod stopped")
        assert "adopted (pid %d" % pid in a.output()
        assert not os.path.exists(os.path.join(a.pod_dir("gone", "gone-main-0"), "pod.json"))
    finally:
        a.stop()
        for pid in processes_with_env("STARCLOUD_JOB", "gone", str(tmp_path)):
            os.kill(pid, signal.SIGKILL)


def test_dead_record_is_not_adopted(server, admin, tmp_path):
    a = Agent(server.url, server.token, "n1", tmp_path / "n1", drain=False)
    try:
        setup_queue(admin)
        run_job(admin, "dead", ["sleep", "600"], restartPolicy="Always")
        wait_for(pod_where(admin, "dead", "dead-main-0", running))
        pid = one_pid("dead-main-0", str(tmp_path))
        a.stop()
        os.kill(pid, signal.SIGKILL)
        a = Agent(server.url, server.token, "n1", tmp_path / "n1", drain=False)
        # Not adopted (gone), so started afresh: exactly one new copy.
        wait_for(lambda: len(processes_with_env("STARCLOUD_POD", "dead-main-0", str(tmp_path))) == 1,
                 timeout=8, what="a fresh copy")
        assert processes_with_env("STARCLOUD_POD", "dead-main-0", str(tmp_path)) != [pid]
        assert "adopted" not in a.output().split("registered")[-1]
    finally:
        a.stop()
        for pid in processes_with_env("STARCLOUD_JOB", "dead", str(tmp_path)):
            os.kill(pid, signal.SIGKILL)


def test_old_pod_folders_removed(server, admin, tmp_path):
    data = tmp_path / "n1"
    old = time.time() - 3 * 3600
    for i in range(5):
        d = data / "pods" / "old" / ("old-main-%d" % i)
        os.makedirs(d)
        (d / "output.log").write_text("x")
        os.utime(d / "output.log", (old + i, old + i))
        os.utime(d, (old + i, old + i))
    recent = data / "pods" / "new" / "new-main-0"
    os.makedirs(recent)
    a = Agent(server.url, server.token, "n1", data, extra=["--pod-retention", "1h",
                                                           "--keep-pods", "3"])
    try:
        wait_for(lambda: "removed 5 old pod folders" in a.output(), what="retention")
        assert not os.path.exists(data / "pods" / "old")
        assert os.path.exists(recent)
    finally:
        a.stop()


def test_keep_pods_bounds_count(server, admin, tmp_path):
    data = tmp_path / "n1"
    now = time.time()
    for i in range(4):
        d = data / "pods" / "j" / ("j-main-%d" % i)
        os.makedirs(d)
        os.utime(d, (now - 100 + i, now - 100 + i))
    a = Agent(server.url, server.token, "n1", data, extra=["--keep-pods", "2"])
    try:
        wait_for(lambda: "removed 2 old pod folders" in a.output(), what="retention")
        assert sorted(os.listdir(data / "pods" / "j")) == ["j-main-2", "j-main-3"]
    finally:
        a.stop()


def test_bad_retention_options_refused(tmp_path):
    import subprocess
    from conftest import BIN
    for opt, val in (("--keep-pods", "-1"), ("--keep-pods", "x"), ("--pod-retention", "soon"),
                     # NaN, fractions, trailing junk (issue 21)
                     ("--grace", "nan"), ("--keep-pods", "2.5"), ("--heartbeat", "1s!"),
                     ("--backoff-base", "inf"), ("--log-max", "4096.5")):
        r = subprocess.run([BIN, "agent", "--server", "http://127.0.0.1:1", "--token", "t",
                            "--name", "n", opt, val], capture_output=True, text=True)
        assert r.returncode == 2 and opt in r.stderr, (opt, r.stderr)
