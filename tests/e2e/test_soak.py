"""The headline run's short mode (`make soak SOAK_SHORT=1`, docs/SOAK.md) as
part of `make test`: a server, 8 agents with 64 declared GPUs, a P/D
Deployment behind the gateway under open-loop traffic, training gangs from
the Gavel trace, notebooks and five faults (a hung and a killed decode
replica, a bad rollout, a node killed while reclaim and a rollout act, a
server restart). It fails when an acknowledged object was lost, a pod ran
on two nodes at once, a whole GPU was held by two pods at once, a daemon
crashed or a fault was not whole again within 60 s.

The run takes about 3 minutes; its own deadlines are generous for a
loaded 2-core machine (recovery targets of 10 s are reported, not tested:
the test fails only on what is wrong, never on what is slow). It skips
where the training trace (../shared/traces/philly-gavel) is absent."""
import os
import subprocess
import sys

import pytest

from conftest import BIN, ROOT

SOAK = os.path.join(ROOT, "bench", "soak", "soak.py")
SHARED = os.environ.get("STARCLOUD_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))


def test_short_soak(tmp_path):
    if not os.path.exists(os.path.join(SHARED, "traces", "philly-gavel")):
        pytest.skip("no training trace at %s/traces/philly-gavel" % SHARED)
    out = tmp_path / "soak"
    log = tmp_path / "soak.log"
    with open(log, "w") as f:
        # The run ends on its own (120 s of workload, each fault bounded
        # by 60 s, then the checks); 30 minutes only stops a hang.
        proc = subprocess.run([sys.executable, SOAK, "--short", "--bin", BIN, "--shared", SHARED,
                               "--out", str(out)], stdout=f, stderr=subprocess.STDOUT,
                              timeout=1800)
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, "soak --short failed (report in %s):\n%s" % (out, text[-6000:])
    assert "passed:" in text, text[-3000:]
    report = out / "report.md"
    assert report.exists() and report.stat().st_size > 0, text[-3000:]


def test_bench_soak_runs_the_soak_script(tmp_path):
    """`starcloud bench soak` runs bench/soak/soak.py with this binary: its
    help and its own bad-argument refusal come through; without the script
    (a binary outside a checkout, or STARCLOUD_SOAK naming nothing) it says
    where it looked and fails."""
    out = subprocess.run([BIN, "bench", "soak", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "--short" in out.stdout, out.stderr
    out = subprocess.run([BIN, "bench", "soak", "--no-such-flag"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "--no-such-flag" in out.stderr, out
    env = dict(os.environ, STARCLOUD_SOAK=str(tmp_path / "nothing.py"))
    out = subprocess.run([BIN, "bench", "soak", "--short"], capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 1 and "nothing.py: not found" in out.stderr, out
    lonely = tmp_path / "bin" / "starcloud"
    lonely.parent.mkdir()
    lonely.write_bytes(open(BIN, "rb").read())
    lonely.chmod(0o755)
    env.pop("STARCLOUD_SOAK")
    out = subprocess.run([str(lonely), "bench", "soak"], capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 1 and "bench/soak/soak.py: not found" in out.stderr, out
