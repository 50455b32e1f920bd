"""`apply -f` / `delete -f` of many objects over one pipelined connection."""
import json
import os
import pty
import subprocess

from conftest import BIN, Server, job, node, queue


def cli(server, *args, env_extra=None):
    env = dict(os.environ, STARCLOUD_SERVER=server.url, STARCLOUD_TOKEN=server.token,
               HOME="/nonexistent")
    env.update(env_extra or {})
    return subprocess.run([BIN] + list(args), capture_output=True, text=True, env=env,
                          timeout=120)


def names(server, kind):
    r = server.session().get(server.url + "/api/v1/" + kind + "?limit=0")  # every page
    assert r.ok, r.text
    return {it["metadata"]["name"] for it in r.json()["items"]}


def test_many_objects_stream_then_configured(server, tmp_path):
    f = tmp_path / "many.json"
    objs = [queue("team-a", gpu_quota=64), node("n1")] + [job("j%04d" % i) for i in range(1500)]
    f.write_text("\n".join(json.dumps(o) for o in objs))
    r = cli(server, "apply", "-f", str(f))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(objs)
    # Answers come back in the order the objects were sent.
    assert lines[0] == "queues/team-a created" and lines[-1] == "jobs/j1499 created"
    assert len(names(server, "jobs")) == 1500
    # Again: every object exists, so each is replaced (POST 409 -> PUT).
    r = cli(server, "apply", "-f", str(f))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(" configured") == len(objs)
    r = cli(server, "delete", "-f", str(f))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(" deleted") == len(objs)
    assert names(server, "jobs") == set()


def test_a_top_level_list_and_yaml(server, tmp_path):
    f = tmp_path / "list.json"
    f.write_text(json.dumps([queue("team-a")] + [job("l%d" % i) for i in range(300)]))
    assert cli(server, "apply", "-f", str(f)).returncode == 0
    y = tmp_path / "more.yaml"
    y.write_text("".join("---\napiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: y%d}\n"
                         "spec: {queue: team-a, tasks: [{replicas: 1, resources: {gpu: 1}}]}\n"
                         % i for i in range(200)))
    r = cli(server, "apply", "-f", str(y))
    assert r.returncode == 0, r.stderr
    assert len(names(server, "jobs")) == 500


def test_a_bad_file_applies_nothing(server, tmp_path):
    f = tmp_path / "bad.json"
    good = [queue("team-a")] + [job("b%d" % i) for i in range(50)]
    # A syntax error after 51 good objects: nothing is sent.
    f.write_text("\n".join(json.dumps(o) for o in good) + "\n{\"kind\": ")
    r = cli(server, "apply", "-f", str(f))
    assert r.returncode == 2 and "bad.json:52" in r.stderr, r.stderr
    # An unknown kind or a missing name in the middle: the same.
    for bad, field in (({"kind": "Elephant", "metadata": {"name": "e"}}, "kind"),
                       ({"kind": "Job", "metadata": {}}, "metadata.name")):
        f.write_text("\n".join(json.dumps(o) for o in good[:10] + [bad] + good[10:]))
        r = cli(server, "apply", "-f", str(f))
        assert r.returncode == 2 and "object 11" in r.stderr and field in r.stderr, r.stderr
    assert names(server, "jobs") == set() and names(server, "queues") == set()


def test_invalid_objects_are_reported_and_the_rest_applied(server, tmp_path):
    f = tmp_path / "mixed.json"
    bad = job("x-bad")
    bad["spec"]["tasks"][0]["resources"]["gpu"] = "many"
    objs = [queue("team-a")] + [job("m%d" % i) for i in range(100)] + [bad] + \
        [job("n%d" % i) for i in range(100)]
    f.write_text("\n".join(json.dumps(o) for o in objs))
    r = cli(server, "apply", "-f", str(f))
    assert r.returncode == 2
    assert "jobs/x-bad: 400" in r.stderr and "spec.tasks[0].resources.gpu" in r.stderr
    assert len(names(server, "jobs")) == 200


def test_terminal_shows_progress_and_a_summary(server, tmp_path):
    f = tmp_path / "tty.json"
    objs = [queue("team-a")] + [job("t%d" % i) for i in range(400)]
    f.write_text("\n".join(json.dumps(o) for o in objs))
    env = dict(os.environ, STARCLOUD_SERVER=server.url, STARCLOUD_TOKEN=server.token,
               HOME="/nonexistent")
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(BIN, [BIN, "apply", "-f", str(f)], env)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    text = out.decode()
    assert os.waitstatus_to_exitcode(status) == 0, text
    # No line per object on a terminal, but a summary of all of them.
    assert "jobs/t1 created" not in text
    assert "401 objects in" in text and "401 created" in text, text


def test_a_server_that_closes_the_connection(tmp_path):
    # A body over --max-body is answered 413 and the connection closed:
    # the objects pipelined behind it go again on a new connection.
    srv = Server(tmp_path / "data", ["--max-body", "4096"]).start()
    srv.read_admin_token()
    try:
        big = job("big")
        big["metadata"]["labels"] = {"k%d" % i: "v" * 50 for i in range(100)}
        objs = [queue("team-a")] + [job("c%d" % i) for i in range(100)] + [big] + \
            [job("d%d" % i) for i in range(100)]
        f = tmp_path / "close.json"
        f.write_text("\n".join(json.dumps(o) for o in objs))
        r = cli(srv, "apply", "-f", str(f))
        assert r.returncode == 2 and "jobs/big: 413" in r.stderr, r.stderr
        assert len(names(srv, "jobs")) == 200
    finally:
        srv.stop()


def test_unreachable_server(tmp_path):
    f = tmp_path / "x.json"
    f.write_text(json.dumps(queue("team-a")))
    env = dict(os.environ, STARCLOUD_SERVER="http://127.0.0.1:1", STARCLOUD_TOKEN="t",
               HOME="/nonexistent")
    r = subprocess.run([BIN, "apply", "-f", str(f)], capture_output=True, text=True, env=env,
                       timeout=30)
    assert r.returncode == 1 and "127.0.0.1:1" in r.stderr
