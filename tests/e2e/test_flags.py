"""Every command parses its flags from one table (src/base/flags.h): --help
works for each, and the same kinds of bad values are refused the same way,
exit 2 with a line naming the flag, before anything starts (issue 21)."""
import subprocess

import pytest

from conftest import BIN

VERBS = ["schedule", "simulate", "bench", "server", "agent", "gateway", "worker", "dev",
         "apply", "get", "describe", "delete", "token", "explain", "logs", "top", "drain",
         "rollout", "store", "version", "k8s", "login", "context", "completion", "guard", "audit"]


def test_every_verb_is_listed_here():
    """A verb added to the binary gets its --help tested too."""
    out = subprocess.run([BIN, "help", "--verbs"], capture_output=True, text=True,
                         check=True).stdout
    have = {line.split("\t")[0] for line in out.splitlines() if line}
    assert have - set(VERBS) == set(), "verbs without a --help test: %s" % (have - set(VERBS))


@pytest.mark.parametrize("verb", VERBS)
def test_help(verb):
    p = subprocess.run([BIN, verb, "--help"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("usage: starcloud " + verb), p.stdout


@pytest.mark.parametrize("args", [
    ["server", "--leader-ttl", "2.5"], ["server", "--leader-ttl", "nan"],
    ["server", "--max-body", "nan"], ["server", "--max-body", "1048576x"],
    ["server", "--listen", "127.0.0.1:x"], ["server", "--bogus"],
    ["server", "--listen"],
    ["dev", "--agents", "1x"], ["dev", "--agents", "2.0"], ["bench", "--nodes", "1e3"],
    ["schedule", "--cycles", "nan"], ["get", "-o", "xml"], ["token", "--bogus"],
    ["logs", "--follow=1"], ["store", "--from"],
    ["k8s", "--period", "nan"], ["k8s", "--max-inflight", "2.5"], ["k8s", "--bogus"],
    ["simulate", "--target", "nan"], ["simulate", "--target", "0"], ["simulate", "-j", "2.5"],
    ["simulate", "--jobs", "0"], ["simulate", "--json=1"], ["simulate", "--seeds", "+4"],
    ["simulate", "--bogus"], ["simulate", "--pods"],
])
def test_bad_values_refused(args, tmp_path):
    extra = ["--data-dir", str(tmp_path / "d")] if args[0] in ("server", "dev") else []
    p = subprocess.run([BIN] + args + extra, capture_output=True, text=True, timeout=10)
    assert p.returncode == 2, (args, p.stderr)
    assert p.stderr.startswith("starcloud %s: " % args[0]), p.stderr
    assert args[1].split("=")[0] in p.stderr, p.stderr
    assert not (tmp_path / "d").exists()
