"""`starcloud simulate` (packing mode) end to end on small hand-made traces:
the bound, the difference curve in the report and the plots, and every kind
of bad input the issue tracker found (each exits 2 with a message naming
what is wrong, before any run and without writing anything)."""
import csv
import json
import os
import subprocess

from conftest import BIN

NODES = ("sn,cpu_milli,memory_mib,gpu,model\n"
         "n0,32000,65536,4,T4\n"
         "n1,32000,65536,2,V100\n")
PODS_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
               "creation_time,deletion_time,scheduled_time\n")
PODS = PODS_HEADER + "".join(
    "p%02d,%d,1024,%d,%d,%s,LS,Running,0,10,0\n" % row for row in [
        (0, 2000, 1, 810, ""), (1, 2000, 1, 1000, ""), (2, 1000, 1, 470, "T4"),
        (3, 4000, 2, 1000, ""), (4, 1000, 1, 320, ""), (5, 2000, 0, 0, ""),
        (6, 2000, 1, 650, "V100"), (7, 1000, 1, 160, ""), (8, 3000, 1, 1000, "T4|V100"),
        (9, 1000, 1, 230, "")])


def run(*args, timeout=120):
    return subprocess.run([BIN, "simulate"] + list(args), capture_output=True, text=True,
                          timeout=timeout)


def traces(tmp_path, pods=PODS, nodes=NODES):
    n = tmp_path / "nodes.csv"
    p = tmp_path / "pods.csv"
    n.write_text(nodes)
    p.write_text(pods)
    return str(n), str(p)


def test_bound_is_above_every_policy(tmp_path):
    n, p = traces(tmp_path)
    r = run("--nodes", n, "--pods", p, "--policy", "all", "--seeds", "1-20", "--bound",
            "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(rows) == 7 * 20
    for row in rows:
        assert row["bound_pct"] >= row["final_alloc_pct"] - 1e-9, row
        assert row["bound_offline_pct"] >= row["bound_pct"], row
        assert 0 < row["forced_pct"] <= row["bound_pct"], row


def test_report_shows_difference_and_bound(tmp_path):
    n, p = traces(tmp_path)
    out = tmp_path / "runs.csv"
    r = run("--nodes", n, "--pods", p, "--policy", "fgd,default", "--seeds", "1-5",
            "--bound", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    assert "default - fgd" in r.stdout and "BEHIND" in r.stdout
    line = [x for x in r.stdout.splitlines() if x.startswith("pods:")]
    assert len(line) == 1 and "fgd" in line[0] and "default" in line[0] and "bound" in line[0]
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 10 and all(float(x["bound_pct"]) > 0 for x in rows)


def test_plots_have_the_difference_curve(tmp_path):
    n, p = traces(tmp_path)
    p2 = tmp_path / "pods2.csv"
    p2.write_text(PODS.replace("p0", "q0"))
    plots = tmp_path / "plots"
    r = run("--nodes", n, "--pods", p, "--pods", str(p2), "--policy", "fgd,default",
            "--seeds", "1-3", "--plot", str(plots))
    assert r.returncode == 0, r.stderr
    for w in ("pods", "pods2"):
        assert (plots / (w + ".png")).stat().st_size > 1000
        dat = (plots / (w + ".dat")).read_text()
        assert "# default - fgd" in dat
    assert (plots / "diff.png").stat().st_size > 1000
    assert "# pods2" in (plots / "diff.dat").read_text()


def test_header_only_or_cpu_only_pods_exit_2(tmp_path):
    n, _ = traces(tmp_path)
    for name, text in (("empty", PODS_HEADER),
                       ("cpuonly", PODS_HEADER + "c0,1000,1024,0,0,,LS,Running,0,1,0\n")):
        p = tmp_path / (name + ".csv")
        p.write_text(text)
        r = run("--nodes", n, "--pods", str(p))
        assert r.returncode == 2, (name, r.stdout, r.stderr)
        assert "no GPU pods" in r.stderr and r.stdout == ""
        assert "nan" not in r.stdout + r.stderr


def test_largest_seed_runs_once(tmp_path):
    n, p = traces(tmp_path)
    top = 2**64 - 1
    r = run("--nodes", n, "--pods", p, "--seed", str(top), "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["seed"] for x in rows] == [top]
    r = run("--nodes", n, "--pods", p, "--seeds", "%d-%d" % (top - 1, top), "--json")
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["seed"] for x in r.stdout.splitlines()] == [top - 1, top]
    r = run("--nodes", n, "--pods", p, "--seed", str(top + 1))
    assert r.returncode == 2 and "--seeds" in r.stderr


def test_empty_names_are_rejected(tmp_path):
    n, p = traces(tmp_path)
    for flag, value in (("--policy", ""), ("--policy", "fgd,,default"), ("--policy", ","),
                        ("--seeds", ""), ("--seeds", ","), ("--csv", ""), ("--plot", "")):
        r = run("--nodes", n, "--pods", p, flag, value)
        assert r.returncode == 2, (flag, value, r.stdout)
        assert flag in r.stderr and r.stdout == "", (flag, value, r.stderr)


def test_unknown_gpu_spec_model(tmp_path):
    n, p = traces(tmp_path, pods=PODS.replace("T4|V100", "T4|A100"))
    r = run("--nodes", n, "--pods", p)
    assert r.returncode == 2
    assert 'pod p08: gpu_spec "T4|A100": no node has GPU model "A100"' in r.stderr


def test_unwritable_outputs_found_before_the_runs(tmp_path):
    n, p = traces(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for flag, path in (("--csv", str(tmp_path / "missing" / "out.csv")),
                       ("--csv", str(blocker / "out.csv")),
                       ("--plot", str(blocker / "plots")),
                       ("--plot", str(blocker)),
                       ("--plot", str(tmp_path / "missing" / "deeper"))):
        r = run("--nodes", n, "--pods", p, "--seeds", "1-3", flag, path)
        assert r.returncode == 2, (flag, path, r.stderr)
        # Nothing ran: the table would have been printed first.
        assert r.stdout == "" and flag in r.stderr and path in r.stderr, (flag, r.stderr)
    assert not (tmp_path / "missing").exists()


def test_not_found_messages(tmp_path):
    n, p = traces(tmp_path)
    absent = str(tmp_path / "absent.csv")
    r = run("--nodes", n, "--pods", absent)
    assert r.returncode == 2
    assert absent in r.stderr and "No such file" in r.stderr
    assert "traces" not in r.stderr.replace(str(tmp_path), "")
    r = run("--nodes", absent, "--pods", p)
    assert r.returncode == 2 and "--nodes" in r.stderr and "No such file" in r.stderr
    r = run("--nodes", n, "--pods", "no_such_workload")
    assert r.returncode == 2
    assert "traces/openb/openb_pod_list_no_such_workload.csv" in r.stderr
    assert "../shared/traces/openb/openb_pod_list_no_such_workload.csv" in r.stderr


def test_nothing_written_on_bad_input(tmp_path):
    n, p = traces(tmp_path)
    out = tmp_path / "out.csv"
    r = run("--nodes", n, "--pods", p, "--policy", "nope", "--csv", str(out))
    assert r.returncode == 2 and not out.exists()
    assert not os.path.exists(tmp_path / "plots")
