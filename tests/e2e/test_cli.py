"""The CLI client verbs against a real server."""
import json
import os
import subprocess

from conftest import BIN, job, node, queue


def cli(server, *args, token=None, env_extra=None):
    env = dict(os.environ, STARCLOUD_SERVER=server.url, STARCLOUD_TOKEN=token or server.token,
               HOME="/nonexistent")
    env.update(env_extra or {})
    return subprocess.run([BIN] + list(args), capture_output=True, text=True, env=env, timeout=30)


def test_apply_get_describe_delete(server, tmp_path):
    d = tmp_path / "manifests"
    d.mkdir()
    (d / "a.json").write_text(json.dumps(queue("team-a")) + "\n" + json.dumps(node("n1")))
    (d / "b.json").write_text(json.dumps([job("j1"), job("j2")]))
    r = cli(server, "apply", "-f", str(d))
    assert r.returncode == 0, r.stderr
    assert "jobs/j1 created" in r.stdout and "nodes/n1 created" in r.stdout
    r = cli(server, "apply", "-f", str(d / "b.json"))
    assert r.returncode == 0 and "jobs/j1 configured" in r.stdout
    r = cli(server, "get", "jobs")
    assert r.returncode == 0 and "j1" in r.stdout and "team-a" in r.stdout
    r = cli(server, "get", "job", "j1", "-o", "json")
    assert json.loads(r.stdout)["metadata"]["name"] == "j1"
    r = cli(server, "get", "nodes", "-o", "yaml")
    assert 'name: "n1"' in r.stdout
    r = cli(server, "describe", "job", "j2")
    assert r.returncode == 0 and "Queue:          team-a" in r.stdout
    r = cli(server, "top", "queues")
    assert r.returncode == 0 and "team-a" in r.stdout
    r = cli(server, "delete", "job", "j1")
    assert r.returncode == 0
    r = cli(server, "get", "job", "j1")
    assert r.returncode == 1 and "not found" in r.stderr


def test_get_jobs_counts_pods_asked_for(server, tmp_path):
    # RUNNING is running/asked: a task without `replicas` asks for one pod
    # (the decoder's default), not none. 64 GPUs per pod: nothing runs.
    one = job("ask-one", gpus=64)
    del one["spec"]["tasks"][0]["replicas"]
    f = tmp_path / "jobs.json"
    f.write_text(json.dumps([queue("team-a"), one, job("ask-three", gpus=64, replicas=3)]))
    assert cli(server, "apply", "-f", str(f)).returncode == 0
    rows = {line.split()[0]: line.split() for line in cli(server, "get", "jobs").stdout.splitlines()}
    assert rows["NAME"][3] == "PODS"
    assert rows["ask-one"][3] == "0/1" and rows["ask-three"][3] == "0/3"


def test_bad_input_exit_2(server, tmp_path):
    f = tmp_path / "bad.json"
    bad = job("x")
    bad["spec"]["tasks"][0]["resources"]["gpu"] = "many"
    f.write_text(json.dumps(bad))
    r = cli(server, "apply", "-f", str(f))
    assert r.returncode == 2 and "spec.tasks[0].resources.gpu" in r.stderr
    f.write_text("{oops")
    assert cli(server, "apply", "-f", str(f)).returncode == 2
    assert cli(server, "get", "elephants").returncode == 2
    assert cli(server, "get", "jobs", "-o", "xml").returncode == 2


def test_token_verb_and_flags(server):
    r = cli(server, "token", "create", "--role", "tenant", "--queue", "team-a")
    assert r.returncode == 0, r.stderr
    tok = r.stdout.strip()
    r = cli(server, "token", "whoami", "--token", tok)
    assert "tenant" in r.stdout and "team-a" in r.stdout
    r = cli(server, "get", "nodes", "--token", "sc_nope_nope")
    assert r.returncode == 1 and "401" in r.stderr
    r = cli(server, "get", "nodes", "--server", "http://127.0.0.1:1")
    assert r.returncode == 1


def test_config_file(server, tmp_path):
    cfg = tmp_path / ".config" / "starcloud"
    cfg.mkdir(parents=True)
    (cfg / "config").write_text("server: %s\ntoken: %s\n" % (server.url, server.token))
    env = dict(os.environ, HOME=str(tmp_path))
    env.pop("STARCLOUD_SERVER", None)
    env.pop("STARCLOUD_TOKEN", None)
    r = subprocess.run([BIN, "get", "queues"], capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
