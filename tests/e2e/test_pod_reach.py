"""A pod whose program its user cannot reach fails at once, saying why
(src/agent/podreach.c, docs/AGENT.md "Where a pod's program comes from").

Pods run as per-queue uids; a program below a 0700 folder (a checkout in
`mktemp -d`, /root) cannot be run by them. The agent checks first, as the
pod's user, and fails the pod with CreateContainerError and a message that
names the path and the folder in the way, instead of a crash loop or a
probe that never passes. Each case is a real root agent and a real pod."""
import os
import re

import pytest

from agent_util import Agent, pod_where, pods_of, run_job, setup_queue, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="pods switch users only under a root agent")

SCRIPT = "#!/bin/sh\necho reached\n"


@pytest.fixture
def agent(server, admin, tmp_path):
    a = Agent(server.url, server.token, "n1", tmp_path / "n1")
    wait_for(lambda: admin.get(admin.base + "/nodes/n1").json().get("status", {}).get("ready"),
             what="n1 ready")
    setup_queue(admin)
    yield a
    a.stop()


def folder(path, mode):
    path.mkdir()
    path.chmod(mode)
    return path


def program(path, text=SCRIPT, mode=0o755):
    path.write_text(text)
    path.chmod(mode)
    return str(path)


def finished(admin, job):
    return wait_for(pod_where(admin, job, job + "-main-0",
                              lambda p: p["phase"] in ("Succeeded", "Failed")),
                    timeout=60, what=job + " to finish")


def blocked_by(pod, what, path, closed):
    """The pod failed before it ran, naming path and the closed folder."""
    assert pod["phase"] == "Failed", pod
    assert pod.get("reason") == "CreateContainerError" and pod.get("exitCode") == 126, pod
    msg = pod["message"]
    want = "cannot start: %s %s: %s is 0700 owned by root; the pod runs as uid " % (
        what, path, closed)
    assert msg.startswith(want), msg
    assert re.search(r"the pod runs as uid 2\d{5} gid 2\d{5}", msg), msg


def test_command_below_a_closed_folder(admin, agent, tmp_path):
    closed = folder(tmp_path / "closed", 0o700)
    prog = program(folder(closed / "bin", 0o755) / "prog")
    run_job(admin, "direct", [prog], restartPolicy="Never")
    blocked_by(finished(admin, "direct"), "command", prog, closed)
    # The interpreter case: python3 starts, its script would not open.
    script = program(closed / "bin" / "worker.py", "print('reached')\n", 0o644)
    run_job(admin, "interp", ["/usr/bin/python3", script], restartPolicy="Never")
    blocked_by(finished(admin, "interp"), "argument 1", script, closed)
    # A path that does not exist below the closed folder: the program
    # could neither open nor create it.
    run_job(admin, "output", ["touch", str(closed / "new")], restartPolicy="Never")
    blocked_by(finished(admin, "output"), "argument 1", str(closed / "new"), closed)
    # A working dir the pod cannot enter.
    run_job(admin, "cwd", ["true"], workingDir=str(closed / "bin"), restartPolicy="Never")
    blocked_by(finished(admin, "cwd"), "working dir", str(closed / "bin"), closed)
    assert "cannot start: command %s" % prog in agent.output()


def test_command_found_through_path_as_execvp_does(admin, agent, tmp_path):
    closed = folder(tmp_path / "closed", 0o700)
    bindir = folder(closed / "bin", 0o755)
    program(bindir / "onlyhere")
    program(bindir / "true")
    # Only in the closed folder: execvp would fail with EACCES. The folder
    # is named, never looked into (as root that would tell the pod what it
    # cannot see).
    run_job(admin, "viapath", ["onlyhere"], env={"PATH": "%s:/usr/bin:/bin" % bindir},
            restartPolicy="Never")
    pod = finished(admin, "viapath")
    assert pod["phase"] == "Failed" and pod.get("exitCode") == 126, pod
    assert pod.get("reason") == "CreateContainerError", pod
    assert pod["message"].startswith(
        "cannot start: command onlyhere: in none of the PATH folders open to the pod's user; "
        "%s is closed to it: %s is 0700 owned by root; the pod runs as uid " % (bindir, closed)), pod
    # Also found later in PATH: execvp skips the closed entry, and so does
    # the check.
    run_job(admin, "later", ["true"], env={"PATH": "%s:/usr/bin:/bin" % bindir},
            restartPolicy="Never")
    assert finished(admin, "later")["phase"] == "Succeeded"
    # In no PATH folder at all.
    run_job(admin, "nowhere", ["no-such-program-here"], env={"PATH": "/usr/bin:/bin"},
            restartPolicy="Never")
    pod = finished(admin, "nowhere")
    assert pod["phase"] == "Failed" and pod.get("exitCode") == 127, pod
    assert pod["message"].startswith("cannot start: command no-such-program-here: not found "
                                     "in PATH /usr/bin:/bin"), pod
    # A path that does not exist: the spawn says so, as before.
    run_job(admin, "missing", [str(tmp_path / "missing")], restartPolicy="Never")
    pod = finished(admin, "missing")
    assert pod["phase"] == "Failed" and "no such file or directory" in pod["message"], pod
    assert pod.get("reason") != "CreateContainerError", pod


def test_reachable_paths_are_not_refused(admin, agent, tmp_path):
    """What the pod's user can reach runs; arguments that do not exist, or
    that exist and are reachable but not readable, are the program's
    business (only a closed folder on the way is refused)."""
    open_dir = folder(tmp_path / "open", 0o755)
    prog = program(open_dir / "prog")
    secret = program(open_dir / "secret", "x\n", 0o600)
    run_job(admin, "fine", [prog, "/no/such/path"], restartPolicy="Never")
    assert finished(admin, "fine")["phase"] == "Succeeded"
    # test -r fails (exit 1): the check let it run.
    run_job(admin, "unreadable", ["test", "-r", secret], restartPolicy="Never")
    pod = finished(admin, "unreadable")
    assert pod["phase"] == "Failed" and pod.get("exitCode") == 1, pod
    assert "exited with status 1" in pod["message"], pod


def test_opening_the_folder_lets_the_retry_start(admin, agent, tmp_path):
    """Under OnFailure the pod is tried again after its back-off, and the
    check runs again: opening the folder is enough, nothing is re-applied."""
    closed = folder(tmp_path / "closed", 0o700)
    prog = program(closed / "prog")
    run_job(admin, "retry", [prog], restartPolicy="OnFailure", backoffLimit=1000)
    wait_for(pod_where(admin, "retry", "retry-main-0",
                       lambda p: "cannot start: command %s" % prog in p.get("message", "")),
             timeout=60, what="the first refusal")
    closed.chmod(0o755)
    pod = finished(admin, "retry")
    assert pod["phase"] == "Succeeded", pod
    assert pods_of(admin, "retry")["retry-main-0"]["restarts"] >= 1


def test_working_dir_in_another_queues_pod_folder_is_refused(admin, agent, tmp_path):
    """The spawn enters the working dir as root before it changes user: a
    workingDir the pod's user cannot reach by its path would put a tenant's
    pod inside another queue's private folder, reading what is open to all
    there. It is refused; the pod's own folder is not affected."""
    setup_queue(admin, "a")
    setup_queue(admin, "b")
    run_job(admin, "victim", ["sh", "-c", "echo the-secret > note; chmod 644 note; "
                                          "exec sleep 600"], q="a", restartPolicy="Never")
    work = agent.work_dir("victim", "victim-main-0")
    wait_for(lambda: os.path.exists(os.path.join(work, "note")), what="the victim's note")
    run_job(admin, "snoop", ["cat", "note"], q="b", workingDir=work, restartPolicy="Never")
    pod = finished(admin, "snoop")
    assert pod["phase"] == "Failed" and pod.get("reason") == "CreateContainerError", pod
    assert pod["message"].startswith("cannot start: working dir %s: %s is 0700 owned by uid "
                                     % (work, work)), pod
    assert "the-secret" not in admin.get(admin.base + "/jobs/snoop/logs").text
