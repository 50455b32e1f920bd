"""`starcloud simulate --time` end to end: a hand-made Tiresias trace with known
waits through the real binary (JSON, CSV and exit status on malformed lines)."""
import csv
import json
import subprocess

from conftest import BIN

TRACE = ("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
         "0,4,0,1,m,100,0\n"
         "1,2,10,1,m,50,0\n"
         "2,2,20,1,m,30,0\n"
         "3,1,120,1,m,10,0\n")


def run(*args):
    return subprocess.run([BIN, "simulate"] + list(args), capture_output=True, text=True,
                          timeout=60)


def test_known_waits_json_and_csv(tmp_path):
    t = tmp_path / "jobs.csv"
    t.write_text(TRACE)
    out = tmp_path / "out.csv"
    r = run("--time", str(t), "--cluster", "1x4", "--json", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["finished"] == 4 and j["makespan_s"] == 150
    assert j["wait_s"] == {"mean": 45.0, "p50": 10.0, "p95": 90.0, "p99": 90.0}
    assert abs(j["gpu_util_pct"] - 95.0) < 0.01 and j["jain"] == 1.0
    assert j["policy"] == "starcloud" and j["gpu_busy_pct"] == j["gpu_util_pct"]
    assert j["left_waiting"] == 0
    rows = list(csv.DictReader(out.open()))
    assert [int(x["wait_s"]) for x in rows] == [0, 90, 80, 10]


def test_malformed_line_names_file_line_column(tmp_path):
    t = tmp_path / "bad.csv"
    t.write_text(TRACE.replace("2,2,20,1,m,30,0", "2,2,20,1,m,soon,0"))
    r = run("--time", str(t), "--cluster", "1x4")
    assert r.returncode == 2
    assert "%s:4:12: duration" % t in r.stderr


def test_bad_cluster_option():
    # "8x4.5" and "8x4junk" were read as 8x4 (sscanf stopped at the junk).
    for bad in ("4by8", "8x4.5", "8x4junk", "0x8", "8x17", "x8", "8x"):
        r = run("--time", "x.csv", "--cluster", bad)
        assert r.returncode == 2 and "--cluster" in r.stderr, (bad, r.stderr)


def test_load_compresses_arrivals(tmp_path):
    # --load 10: arrivals 0, 1, 2, 12 instead of 0, 10, 20, 120; run times as
    # before. Job 0 holds the node until 100, jobs 1 and 2 run 100-150 and
    # 100-130, job 3 starts when job 2 ends: waits 0, 99, 98, 118.
    t = tmp_path / "jobs.csv"
    t.write_text(TRACE)
    r = run("--time", str(t), "--cluster", "1x4", "--load", "10", "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["finished"] == 4 and j["makespan_s"] == 150
    assert j["wait_s"]["mean"] == (0 + 99 + 98 + 118) / 4


def test_bad_load_option():
    for bad in ("0", "-1", "x", "1e9", "nan", "2x", "inf"):
        r = run("--time", "x.csv", "--load", bad)
        assert r.returncode == 2 and "--load" in r.stderr, (bad, r.stderr)


def test_fcfs_baseline(tmp_path):
    # A stock Kubernetes scheduler's baseline: job 1's pods are placed one by
    # one and the first holds a GPU idle from 10 to 100 (no gang), job 2 has
    # nothing free at 20 and waits; the core keeps job 1 whole and runs job 2.
    t = tmp_path / "jobs.csv"
    t.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                 "0,3,0,1,m,100,0\n1,2,10,1,m,50,0\n2,1,20,1,m,30,0\n")
    out = tmp_path / "out.csv"
    r = run("--time", str(t), "--cluster", "1x4", "--policy", "fcfs", "--json",
            "--csv", str(out))
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["policy"] == "fcfs" and j["jain"] is None and j["preemptions"] == 0
    assert [int(x["wait_s"]) for x in csv.DictReader(out.open())] == [0, 90, 80]
    assert abs(j["gpu_util_pct"] - 86.667) < 0.01 and abs(j["gpu_busy_pct"] - 71.667) < 0.01
    r = run("--time", str(t), "--cluster", "1x4", "--json", "--csv", str(out))
    assert [int(x["wait_s"]) for x in csv.DictReader(out.open())] == [0, 90, 0]
    table = run("--time", str(t), "--cluster", "1x4", "--policy", "fcfs")
    assert table.returncode == 0 and "held by running jobs 71.67 %" in table.stdout


def test_bad_policy_option():
    for bad in ("kube", "", "FCFS", "fcfs,starcloud"):
        r = run("--time", "x.csv", "--policy", bad)
        assert r.returncode == 2 and "--policy" in r.stderr, (bad, r.stderr)


POOL = """apiVersion: starcloud.dev/v1
kind: NodePool
metadata: {name: p4}
spec:
  maxNodes: 2
  scaleDownAfter: 30s
  template: {cpu: 16, memory: 64Gi, gpus: {count: 4, model: V100}}
  provider: {dev: {}}
"""


def test_nodepools_grow_and_shrink(tmp_path):
    """Issue 18: no node at first. Job 0 (4 GPUs) asks for one node at 0,
    which joins at 60; job 1 (2 GPUs, at 10) finds the node in flight full
    and asks for a second (joins at 70); job 2 (2 GPUs, at 20) fits on that
    second node in flight and asks for nothing; job 3 (at 120) starts at once
    on the second node, which is empty from 130 and goes at 160 (30 s
    later), the run's end. Paid: 4 GPUs for 160 s + 4 for 150 s."""
    t = tmp_path / "jobs.csv"
    t.write_text(TRACE)
    p = tmp_path / "pool.yaml"
    p.write_text(POOL)
    out = tmp_path / "out.csv"
    r = run("--time", str(t), "--nodepools", str(p), "--provision-delay", "60s", "--json",
            "--csv", str(out))
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    rows = list(csv.DictReader(out.open()))
    assert [int(x["start"]) for x in rows] == [60, 70, 70, 120]
    assert j["nodes_requested"] == 2 and j["nodes_removed"] == 1
    assert j["gpus_max"] == 8 and j["total_gpus"] == 0
    assert j["gpus_mean"] == (4 * 10 + 8 * 90) / 160
    assert abs(j["gpu_hours"] - (4 * 160 + 4 * 150) / 3600) < 0.001
    assert j["provision_delay_s"] == 60
    assert max(x["gpus"] for x in j["series"]) == 8
    # The table says it too.
    r = run("--time", str(t), "--nodepools", str(p), "--provision-delay", "60s")
    assert r.returncode == 0, r.stderr
    assert "2 nodes requested (60 s to join), 1 removed" in r.stdout, r.stdout
    # A fixed 4-GPU node beside the pool: jobs 0 starts at once.
    r = run("--time", str(t), "--nodepools", str(p), "--cluster", "1x4", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["total_gpus"] == 4


def test_bad_nodepools_options(tmp_path):
    t = tmp_path / "jobs.csv"
    t.write_text(TRACE)
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(POOL + "---\napiVersion: starcloud.dev/v1\nkind: Queue\n"
                     "metadata: {name: q}\nspec: {resources: {gpu: {quota: 4}}}\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text(POOL.replace("maxNodes: 2", "maxNodes: -2"))
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    good = tmp_path / "pool.yaml"
    good.write_text(POOL)
    cases = [(["--nodepools", str(mixed)], "--nodepools"),
             (["--nodepools", str(bad)], "maxNodes"),
             (["--nodepools", str(empty)], "--nodepools"),
             (["--nodepools", str(tmp_path / "missing.yaml")], "missing.yaml"),
             (["--nodepools", str(good), "--provision-delay", "x"],
              "--provision-delay"),
             (["--nodepools", str(good), "--provision-delay", "-3s"],
              "--provision-delay"),
             (["--nodepools", str(good), "--policy", "fcfs"],
              "--policy fcfs")]
    for args, field in cases:
        r = run("--time", str(t), *args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert field in r.stderr, (args, r.stderr)


def test_bad_compaction_options():
    for flag, bad in (("--compaction", "maybe"), ("--pack-threshold", "0"),
                      ("--pack-threshold", "1.5"), ("--target-gpus", "17"),
                      ("--large-gpus", "0"), ("--target-gpus", "x")):
        r = run("--time", "x.csv", flag, bad)
        assert r.returncode == 2 and flag in r.stderr, (flag, bad, r.stderr)


def test_compaction_json_fields(tmp_path):
    # The hand-made trace has nothing to compact: the figures are there and zero.
    t = tmp_path / "jobs.csv"
    t.write_text(TRACE)
    r = run("--time", str(t), "--cluster", "1x4", "--json", "--one-node-jobs")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["moves"] == 0 and j["lost_gpu_h"] == 0
    assert j["large_finished"] == 0


def test_table_durations_in_hms(tmp_path):
    t = tmp_path / "jobs.csv"
    t.write_text(TRACE.replace("3,1,120,1,m,10,0", "3,1,120,1,m,7200,0"))
    r = run("--time", str(t), "--cluster", "1x4")
    assert r.returncode == 0, r.stderr
    # job 3 waits 10 s, then runs 2 h: makespan 7330 s, h/m/s for people, the seconds beside it
    assert "makespan 2h 02m 10s (7330 s)" in r.stdout, r.stdout
    lines = r.stdout.splitlines()
    assert lines[0].split()[:5] == ["QUEUE", "JOBS", "DONE", "WAIT", "MEAN"]
    allrow = next(l for l in lines if l.startswith("all "))
    assert "45.0s" in allrow and "2h 02m 00s" not in allrow, allrow  # mean wait 45 s
    assert r.stderr == ""  # no progress line when stderr is not a terminal


def test_progress_with_eta_on_a_terminal(tmp_path):
    """On a terminal: a progress line (jobs done, simulated time, ETA)
    rewritten in place and cleared at the end, on stderr only."""
    import os
    import pty
    t = tmp_path / "jobs.csv"
    rows = ["job_id,num_gpu,submit_time,iterations,model_name,duration,interval"]
    rows += ["%d,%d,%d,1,m,%d,0" % (i, 1 + i % 4, i * 7, 60 + (i * 37) % 900) for i in range(3000)]
    t.write_text("\n".join(rows) + "\n")
    master, slave = pty.openpty()
    # stdout to a file: the JSON is larger than a pipe holds, and this loop
    # reads only the terminal until the process closes it
    outf = (tmp_path / "out.json").open("w")
    p = subprocess.Popen([BIN, "simulate", "--time", str(t), "--cluster", "4x8", "--json"],
                         stdout=outf, stderr=slave)
    os.close(slave)
    err = b""
    import select
    import time
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if not select.select([master], [], [], 1)[0]:
            continue
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    p.wait(timeout=120)
    outf.close()
    os.close(master)
    assert p.returncode == 0
    assert json.loads((tmp_path / "out.json").read_text())["finished"] == 3000  # stdout is the document, untouched
    text = err.decode()
    assert "simulate: " in text and " of 3000 jobs done (" in text and "ETA " in text, text[-500:]
    assert "simulated " in text and "elapsed" in text
    assert text.endswith("\r\x1b[K"), repr(text[-80:])  # the line is cleared at the end
