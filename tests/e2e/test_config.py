"""Configuration files of the daemons (src/base/flagfile.c, docs/DEPLOY.md):
YAML whose keys are the flags without dashes, checked by the same table as
the command line; flags given at start win; every mistake is reported as
FILE:LINE:COL with exit 2 before anything starts; --check-config checks
the way a start would and exits."""
import os
import re
import subprocess
import time

import pytest
import requests

from conftest import BIN, ROOT, free_port, stop_process

EXAMPLES = os.path.join(ROOT, "deploy", "config")


def run(args, timeout=30, **kw):
    return subprocess.run([os.path.abspath(BIN)] + args, capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ckpt") / "tiny.bin")
    r = run(["worker", "--gen-checkpoint", path], timeout=60)
    assert r.returncode == 0, r.stderr
    return path


def test_examples_pass_check_config(tmp_path, ckpt):
    """The files `make install` puts in /etc/starcloud are valid as shipped
    (the agent's once its token is filled in, the worker's with a model)."""
    for d in ("server", "gateway"):
        r = run([d, "--config", os.path.join(EXAMPLES, d + ".yaml"), "--check-config"])
        assert r.returncode == 0 and "configuration OK" in r.stdout, (d, r.stderr)
    # Unfilled, the agent's says what is missing.
    r = run(["agent", "--config", os.path.join(EXAMPLES, "agent.yaml"), "--check-config"])
    assert r.returncode == 2 and "--token is required" in r.stderr
    agent = tmp_path / "agent.yaml"
    agent.write_text(open(os.path.join(EXAMPLES, "agent.yaml")).read().replace(
        'token: ""', "token: sc_0123456789"))
    r = run(["agent", "--config", str(agent), "--check-config"])
    assert r.returncode == 0, r.stderr
    worker = tmp_path / "worker.yaml"
    worker.write_text(open(os.path.join(EXAMPLES, "worker.yaml")).read().replace(
        "/var/lib/starcloud/models/tiny.bin", ckpt))
    r = run(["worker", "--config", str(worker), "--check-config"])
    assert r.returncode == 0, r.stderr


def test_check_config_starts_nothing(tmp_path):
    data = tmp_path / "data"
    port = free_port()
    cfg = tmp_path / "s.yaml"
    cfg.write_text("listen: 127.0.0.1:%d\ndata-dir: %s\n" % (port, data))
    r = run(["server", "--config", str(cfg), "--check-config"])
    assert r.returncode == 0 and r.stdout == "starcloud server: configuration OK (%s)\n" % cfg
    assert not data.exists()
    # Without a file: the flags alone.
    r = run(["server", "--listen", "127.0.0.1:1", "--check-config"])
    assert r.returncode == 0 and "flags only" in r.stdout


def wait_up(url, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else proc.returncode
        try:
            return requests.get(url, timeout=1)
        except requests.RequestException:
            time.sleep(0.05)
    raise AssertionError("not up: " + url)


def test_server_runs_from_its_file_and_flags_win(tmp_path):
    data = tmp_path / "data"
    token_file = tmp_path / "admin.token"
    file_port, flag_port = free_port(), free_port()
    cfg = tmp_path / "server.yaml"
    cfg.write_text("# a comment\nlisten: 127.0.0.1:%d\ndata-dir: %s\nadmin-token-file: %s\n"
                   "leader-ttl: 7\n" % (file_port, data, token_file))
    proc = subprocess.Popen([BIN, "server", "--config", str(cfg), "--listen",
                             "127.0.0.1:%d" % flag_port], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_up("http://127.0.0.1:%d/healthz" % flag_port, proc)
        with pytest.raises(requests.ConnectionError):
            requests.get("http://127.0.0.1:%d/healthz" % file_port, timeout=1)
        assert (data / "store.db").exists()
        # The admin token went to the file, mode 0600, and not to stdout.
        assert oct(os.stat(str(token_file)).st_mode & 0o777) == "0o600"
        token = token_file.read_text().strip()
        assert re.fullmatch(r"sc_[0-9a-f]+", token)
        r = requests.get("http://127.0.0.1:%d/api/v1/queues" % flag_port, timeout=5,
                         headers={"Authorization": "Bearer " + token})
        assert r.status_code == 200
    finally:
        stop_process(proc)
    out = proc.stdout.read()
    assert token not in out and "admin token written to %s" % token_file in out


def test_admin_token_file_that_cannot_be_written(tmp_path):
    """The server stops before it makes a token nobody could read."""
    data = tmp_path / "data"
    r = run(["server", "--listen", "127.0.0.1:%d" % free_port(), "--data-dir", str(data),
             "--admin-token-file", str(tmp_path / "no" / "such" / "dir" / "t")])
    assert r.returncode == 1 and "--admin-token-file" in r.stderr
    # A later start with a good file gets the first token: none was made.
    tf = tmp_path / "t"
    proc = subprocess.Popen([BIN, "server", "--listen", "127.0.0.1:%d" % free_port(),
                             "--data-dir", str(data), "--admin-token-file", str(tf)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 30
        while not (tf.exists() and tf.read_text().endswith("\n")):
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.05)
    finally:
        stop_process(proc)


def test_gateway_lists_from_file_and_flags_add(tmp_path):
    port = free_port()
    cfg = tmp_path / "gw.yaml"
    cfg.write_text("listen: 127.0.0.1:%d\n"
                   "probe-interval: 0\n"
                   "backends:\n"
                   "  - {model: m, version: \"1\", url: \"http://127.0.0.1:1\"}\n"
                   "  - {model: m, version: 2, url: \"http://127.0.0.1:2\", role: decode,"
                   " weight: 2}\n"
                   "backend:\n"
                   "  - model=m,version=1,url=http://127.0.0.1:3\n"
                   "rollouts:\n"
                   "  - {model: m, stable: \"1\", canary: \"2\", steps: [10, 50, 100],"
                   " analysisWindow: 30s, maxErrorRate: 0.1}\n" % port)
    proc = subprocess.Popen([BIN, "gateway", "--config", str(cfg), "--backend",
                             "model=m,version=1,url=http://127.0.0.1:4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "(4 backends)" in line, (line, proc.stderr.read() if proc.poll() else "")
        r = requests.get("http://127.0.0.1:%d/admin/rollouts/m" % port, timeout=5)
        assert r.status_code == 200, r.text
    finally:
        stop_process(proc)


BAD = [
    # (command, file text, expected "line:col: message" part)
    ("server", "listen: 127.0.0.1:7070\nlisen: 127.0.0.1:7071\n",
     "2:8: lisen: unknown key (not an option of starcloud server"),
    ("server", "listen: 127.0.0.1:99999\n", '1:9: listen: expected HOST:PORT, got "127.0.0.1:99999"'),
    ("server", "leader-ttl: 61\n", "1:13: leader-ttl: expected a whole number from 2 to 60"),
    ("server", "leader-ttl: 2.5\n", "1:13: leader-ttl: expected a whole number"),
    ("server", "max-body: lots\n", "1:11: max-body: expected"),
    ("server", "listen:\n", "1:8: listen: expected a value, got nothing"),
    ("server", "listen: [a, b]\n", "1:9: listen: takes one value, not a list"),
    ("server", "listen: {a: b}\n", "1:9: listen: expected a single value"),
    ("server", "data-dir: true\n", "1:11: data-dir: true/false is only for switches"),
    ("server", "store: ftp://x\n", '--store: expected sqlite:PATH or etcd://'),
    ("server", "etcd-prefix: nope\n", "--etcd-prefix: expected /a/b/"),
    ("server", "config: /etc/x.yaml\n", "1:9: config: unknown key"),
    ("server", "--listen: 127.0.0.1:1\n", "1:11: --listen: unknown key"),
    ("server", "- listen\n", "1:1: expected a mapping of option: value"),
    ("server", "listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n", "expected one document"),
    ("server", "listen: [1, 2\n", "server.yaml:2:1: "),
    ("server", "listen: a\nlisten: b\n", "server.yaml:2:"),
    ("agent", "drain: yes\n", "1:8: drain: expected true or false"),
    ("agent", "heartbeat: 0.01\n", "1:12: heartbeat: expected"),
    ("agent", "cpu: 0.5\n", "1:6: cpu: write this value in quotes"),
    ("worker", "version: 1.10\n", "1:10: version: write this value in quotes"),
    ("worker", "role: writer\n", '1:7: role: expected prefill, decode or both, got "writer"'),
    ("gateway", "backends:\n  - {model: m, version: \"1\", url: \"ftp://x\"}\n",
     '2:5: backends[0]: "model=m,version=1,url=ftp://x": url: expected http://HOST:PORT'),
    ("gateway", "backends:\n  - {model: m, verzion: \"1\", url: \"http://h:1\"}\n",
     "2:5: backends[0]: verzion: unknown field"),
    ("gateway", "backends: {model: m}\n", "1:11: backends: \"model=m\": model, version and url are required"),
    ("gateway", "backends: [x]\n", "1:12: backends[0]: expected {model: ..."),
    ("gateway", "rollouts:\n  - {model: m, stable: \"1\", canary: \"2\", maxErrorRate: 7}\n",
     "2:5: rollouts[0]: "),
    ("gateway", "rollouts:\n  - {model: m, stable: \"1\", canary: \"2\", steps: [a]}\n",
     "rollouts[0]: steps: expected a list of whole numbers"),
    ("gateway", "backend: model=m\n", "1:10: backend: "),
    ("gateway", "max-retries: 11\n", "1:14: max-retries: expected a whole number from 0 to 10"),
]


@pytest.mark.parametrize("cmd,text,expect", BAD)
def test_bad_files_name_the_line(tmp_path, cmd, text, expect):
    cfg = tmp_path / ("%s.yaml" % cmd)
    cfg.write_text(text)
    extra = ["--server", "http://127.0.0.1:1", "--token", "t", "--name", "n"] \
        if cmd == "agent" else []
    port = free_port()
    # A --listen of our own unless the file is about listen (a flag would
    # win over the file's mistake): if the daemon wrongly started, it
    # would hold that port and never exit (the run times out).
    listen = [] if "listen" in text else ["--listen", "127.0.0.1:%d" % port]
    for check in ([], ["--check-config"]):
        r = run([cmd, "--config", str(cfg)] + listen + extra + check, cwd=str(tmp_path))
        assert r.returncode == 2, (text, r.stdout, r.stderr)
        assert expect in r.stderr, (expect, r.stderr)
        if expect[0].isdigit():
            assert r.stderr.startswith("starcloud %s: %s:%s" % (cmd, cfg, expect)), r.stderr
    # Nothing started: no data dir, nothing listens.
    assert not (tmp_path / "starcloud-data").exists()
    with pytest.raises(requests.ConnectionError):
        requests.get("http://127.0.0.1:%d/" % port, timeout=1)


def test_file_problems(tmp_path):
    r = run(["server", "--config", str(tmp_path / "missing.yaml")])
    assert r.returncode == 2 and "missing.yaml: No such file or directory" in r.stderr
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * (1 << 20) + "\n")
    r = run(["server", "--config", str(big)])
    assert r.returncode == 2 and "larger than 1 MiB" in r.stderr
    empty = tmp_path / "empty.yaml"
    empty.write_text("# only comments\n")
    r = run(["server", "--config", str(empty), "--check-config"])
    assert r.returncode == 0
    os.chmod(str(empty), 0)
    if os.geteuid() != 0:  # root reads anything
        r = run(["server", "--config", str(empty)])
        assert r.returncode == 2 and "Permission denied" in r.stderr
