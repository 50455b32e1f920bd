"""`make install` (scripts/install.sh): the files it lays out under DESTDIR
and PREFIX, configuration that is never overwritten, units that systemd
accepts (systemd-analyze verify, as Debian's systemd package provides it,
with no systemd running), and one version everywhere."""
import os
import shutil
import subprocess

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("STARCLOUD_BIN", os.path.join(TOP, "build", "starcloud"))
UNITS = ["starcloud-server.service", "starcloud-agent.service", "starcloud-gateway.service",
         "starcloud-worker@.service"]


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    """Man pages and completion, generated as `make install-files` does."""
    out = tmp_path_factory.mktemp("gen")
    subprocess.run([os.path.join(TOP, "scripts/gen-docs.sh"), BIN, str(out)], check=True,
                   timeout=120)
    return str(out)


def install(destdir="", gen=None, **env):
    e = dict(os.environ, BIN=BIN, DESTDIR=str(destdir), GEN=gen or "")
    e.update({k: str(v) for k, v in env.items()})
    return subprocess.run([os.path.join(TOP, "scripts/install.sh")], env=e,
                          capture_output=True, text=True, timeout=120)


def tree(root):
    out = {}
    for d, _, files in os.walk(str(root)):
        for f in files:
            p = os.path.join(d, f)
            out["/" + os.path.relpath(p, str(root))] = oct(os.stat(p).st_mode & 0o7777)
    return out


MAN = ["man1/starcloud.1", "man8/starcloud-server.8", "man8/starcloud-agent.8",
       "man8/starcloud-gateway.8", "man8/starcloud-worker.8", "man8/starcloud-store.8",
       "man1/starcloud-objects.1", "man1/starcloud-offline.1", "man1/starcloud-dev.1",
       "man8/starcloud-k8s.8"]


def test_layout_for_a_package(tmp_path, gen):
    r = install(tmp_path, gen, PREFIX="/usr")
    assert r.returncode == 0, r.stderr
    t = tree(tmp_path)
    expect = {"/usr/bin/starcloud": "0o755",
              "/usr/lib/sysusers.d/starcloud.conf": "0o644",
              "/etc/starcloud/server.yaml": "0o640",
              "/etc/starcloud/agent.yaml": "0o640",
              "/etc/starcloud/gateway.yaml": "0o640"}
    expect.update({"/usr/lib/systemd/system/" + u: "0o644" for u in UNITS})
    expect.update({"/usr/share/man/" + m: "0o644" for m in MAN})
    expect["/usr/share/bash-completion/completions/starcloud"] = "0o644"
    expect["/usr/share/zsh/vendor-completions/_starcloud"] = "0o644"
    for f, mode in expect.items():
        assert t.get(f) == mode, (f, t.get(f))
    assert oct(os.stat(str(tmp_path / "etc/starcloud")).st_mode & 0o777) == "0o750"
    docs = [f for f in t if f.startswith("/usr/share/doc/starcloud/")]
    for d in ("README.md", "DEPLOY.md", "HA.md", "examples/config/worker.yaml",
              "examples/cluster.yaml"):
        assert "/usr/share/doc/starcloud/" + d in docs, d
    # Nothing outside the expected folders.
    for f in t:
        assert f.startswith(("/usr/bin/", "/usr/lib/systemd/system/", "/usr/lib/sysusers.d/",
                             "/usr/share/", "/etc/starcloud/")), f
    unit = (tmp_path / "usr/lib/systemd/system/starcloud-server.service").read_text()
    assert "ExecStart=/usr/bin/starcloud server --config /etc/starcloud/server.yaml" in unit
    assert (tmp_path / "usr/bin/starcloud").read_bytes() == open(BIN, "rb").read()


def test_other_prefix_rewrites_paths(tmp_path):
    r = install(tmp_path, PREFIX="/opt/sc")
    assert r.returncode == 0, r.stderr
    unit = (tmp_path / "opt/sc/lib/systemd/system/starcloud-agent.service").read_text()
    assert "ExecStart=/opt/sc/bin/starcloud agent --config /opt/sc/etc/starcloud/agent.yaml" \
        in unit
    assert "/usr/bin/starcloud" not in unit and " /etc/starcloud" not in unit
    assert "file:/opt/sc/share/doc/starcloud/DEPLOY.md" in unit
    assert (tmp_path / "opt/sc/etc/starcloud/server.yaml").exists()
    ex = (tmp_path / "opt/sc/share/doc/starcloud/examples/config/server.yaml").read_text()
    assert "/opt/sc/etc/starcloud/server.yaml" in ex


def test_configuration_is_never_overwritten(tmp_path):
    assert install(tmp_path, PREFIX="/usr").returncode == 0
    mine = tmp_path / "etc/starcloud/server.yaml"
    mine.write_text("listen: 0.0.0.0:7070\n")
    r = install(tmp_path, PREFIX="/usr")
    assert r.returncode == 0 and "keeping /etc/starcloud/server.yaml" in r.stderr
    assert mine.read_text() == "listen: 0.0.0.0:7070\n"


def test_bad_paths_are_refused(tmp_path):
    for env in ({"PREFIX": "usr"}, {"PREFIX": "/usr/lo cal"}, {"PREFIX": "/usr", "UNITDIR": "/x;y"}):
        r = install(tmp_path, **env)
        assert r.returncode == 2, (env, r.stderr)
    assert not any(os.scandir(str(tmp_path)))


def test_make_install_target(tmp_path):
    """The Makefile's target passes DESTDIR and PREFIX through."""
    r = subprocess.run(["make", "-s", "-C", TOP, "install", "DESTDIR=%s" % tmp_path,
                        "PREFIX=/usr", "BUILD=%s" % os.path.dirname(BIN)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "usr/bin/starcloud").exists()
    assert (tmp_path / "usr/lib/systemd/system/starcloud-server.service").exists()


def test_systemd_accepts_the_units(tmp_path, gen):
    """systemd-analyze verify on the installed units (installed under a
    prefix of their own so that ExecStart= names a real file). Any message
    at all is a failure: unknown keys and bad values are only warnings."""
    if not shutil.which("systemd-analyze"):
        if os.environ.get("CI") == "true":
            pytest.fail("systemd-analyze is missing (Debian's systemd package)")
        pytest.skip("systemd-analyze is missing (apt-get install systemd)")
    prefix = tmp_path / "usr"
    r = install("", gen, PREFIX=prefix, SYSCONFDIR=tmp_path / "etc")
    assert r.returncode == 0, r.stderr
    unitdir = prefix / "lib/systemd/system"
    # A template is verified through an instance.
    shutil.copy(str(unitdir / "starcloud-worker@.service"), str(tmp_path / "starcloud-worker@a.service"))
    units = [str(unitdir / u) for u in UNITS if "@" not in u] + \
        [str(tmp_path / "starcloud-worker@a.service")]
    # Documentation=man:starcloud-server(8) and the others must resolve.
    env = dict(os.environ, MANPATH=str(prefix / "share/man"))
    r = subprocess.run(["systemd-analyze", "verify"] + units, capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stderr
    # The same check sees a mistake (so it can fail).
    bad = tmp_path / "bad.service"
    bad.write_text((unitdir / "starcloud-server.service").read_text().replace(
        "NoNewPrivileges=yes", "NoNewPrivilege=yes"))
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(bad)], capture_output=True,
                       text=True, timeout=120)
    assert "Unknown key" in r.stderr
    # The sandbox, as systemd rates it (0 best .. 10 worst): the server and
    # gateway need nothing; the agent keeps what pods need (GPUs, files).
    for u, worst in (("starcloud-server.service", 2.0), ("starcloud-gateway.service", 2.0),
                     ("starcloud-agent.service", 5.0)):
        r = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(unitdir / u)],
                           capture_output=True, text=True, timeout=120)
        level = float(r.stdout.split("Overall exposure level for")[1].split(":")[1].split()[0])
        assert level <= worst, (u, level)


def test_one_version_everywhere():
    out = subprocess.run([BIN, "version"], capture_output=True, text=True, check=True).stdout
    deb = subprocess.run(["dpkg-parsechangelog", "-l", os.path.join(TOP, "debian/changelog"),
                          "-S", "Version"], capture_output=True, text=True, check=True).stdout
    assert out == "starcloud %s\n" % deb.strip()


def test_man_pages_and_completion_come_from_the_tables(gen):
    """Every flag --help shows is in its man page; the pages format without
    a warning; the completion knows each verb's flags and choices."""
    verbs = subprocess.run([BIN, "help", "--verbs"], capture_output=True, text=True,
                           check=True).stdout.split("\n")
    verbs = [v.split("\t")[0] for v in verbs if v]
    pages = {}
    # Every page made (a verb that no group names gets one of its own).
    for m in sorted(os.listdir(os.path.join(gen, "man"))):
        path = os.path.join(gen, "man", m)
        pages[m] = open(path).read()
        if shutil.which("groff"):
            r = subprocess.run(["groff", "-man", "-ww", "-z", path], capture_output=True,
                               text=True, env=dict(os.environ, LC_ALL="C.UTF-8"))
            assert r.stderr == "", (m, r.stderr)
    everything = "".join(pages.values())
    for v in verbs:
        assert '.SS "starcloud %s' % v in everything, v
        words = subprocess.run([BIN, v, "--help-words"], capture_output=True, text=True)
        if words.returncode != 0:
            continue  # no flag table (version): its --help text is in the page
        for line in words.stdout.splitlines():
            flag = line.split("\t")[0]
            assert "\\fB" + flag.replace("-", "\\-") + "\\fR" in everything, (v, flag)
    assert "--listen" in subprocess.run([BIN, "server", "--help"], capture_output=True,
                                        text=True).stdout
    comp = os.path.join(gen, "completion", "starcloud.bash")
    script = 'source %s; COMP_WORDS=(starcloud gateway --prefill-failure ""); COMP_CWORD=3; ' \
             '_starcloud; echo "${COMPREPLY[@]}"; COMP_WORDS=(starcloud agent --fence-t); ' \
             'COMP_CWORD=2; _starcloud; echo "${COMPREPLY[@]}"; COMP_WORDS=(starcloud dr); ' \
             'COMP_CWORD=1; _starcloud; echo "${COMPREPLY[@]}"' % comp
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["fail retry", "--fence-time", "drain"], out
