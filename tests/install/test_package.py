"""The Debian package (debian/, `make package`) on a fresh Debian 12.

`apt install ./starcloud_*.deb` in a fresh root (debootstrap, rootfs.py)
gives a working `starcloud`, the starcloud user, a configuration folder
readable by root and that group only, and units installed but disabled,
with nothing started. Then the root boots its own systemd (nspawn) and the
units run for real: the server as a Type=notify service under its sandbox
(systemctl start returns once it serves), restarted after a crash; an agent
that registers and runs a pod as its queue's own unprivileged uid (the agent
runs as root with a bounded capability set), inside the agent's sandbox (the
server's state and the agent's configuration and token out of reach, the
system read-only), that survives a restart of the agent. Skipped with the
reason where the machine cannot (not root, no debootstrap or systemd-nspawn,
no mirror)."""
import os
import shutil
import socket
import subprocess
import time

import pytest
import requests

from rootfs import Root, require

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def version():
    out = subprocess.run(["dpkg-parsechangelog", "-l", os.path.join(TOP, "debian/changelog"),
                          "-S", "Version"], capture_output=True, text=True, check=True).stdout
    return out.strip()


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    """The package: STARCLOUD_DEB (built by `make test-install`), or built here."""
    path = os.environ.get("STARCLOUD_DEB")
    if path:
        assert os.path.exists(path), path
        return path
    require(["dpkg-buildpackage", "dh"], root=False)
    out = tmp_path_factory.mktemp("package")
    r = subprocess.run([os.path.join(TOP, "scripts/package.sh"), str(out)], capture_output=True,
                       text=True, timeout=1800)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


def test_deb_contents(deb):
    """What the package holds and depends on."""
    fields = subprocess.run(["dpkg-deb", "-f", deb, "Package", "Version", "Depends"],
                            capture_output=True, text=True, check=True).stdout
    assert "Package: starcloud" in fields and "Version: %s" % version() in fields
    # The Debian libraries the binary links, found by dpkg-shlibdeps.
    for lib in ("libjansson4", "libyaml-0-2", "libuv1", "libsqlite3-0", "libcurl4",
                "libhttp-parser2.9", "libglpk40", "libc6"):
        assert lib in fields, (lib, fields)
    listing = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True,
                             check=True).stdout
    files = {line.split()[-1].lstrip(".") : line.split()[0] for line in listing.splitlines()}
    for f in ("/usr/bin/starcloud", "/lib/systemd/system/starcloud-server.service",
              "/lib/systemd/system/starcloud-agent.service",
              "/lib/systemd/system/starcloud-gateway.service",
              "/lib/systemd/system/starcloud-worker@.service",
              "/usr/lib/sysusers.d/starcloud.conf", "/etc/starcloud/server.yaml",
              "/etc/starcloud/agent.yaml", "/etc/starcloud/gateway.yaml"):
        assert f in files, f
    assert files["/etc/starcloud/agent.yaml"] == "-rw-r-----"
    assert files["/etc/starcloud/"] == "drwxr-x---"
    conffiles = subprocess.run(["dpkg-deb", "-I", deb, "conffiles"], capture_output=True,
                               text=True, check=True).stdout.split()
    assert sorted(conffiles) == ["/etc/starcloud/agent.yaml", "/etc/starcloud/gateway.yaml",
                                 "/etc/starcloud/server.yaml"]
    # Built with Debian's hardening flags: relro + bind now, the stack
    # protector, _FORTIFY_SOURCE (the checked variants of libc calls).
    tmp = os.path.join(os.path.dirname(deb), "x")
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(["dpkg-deb", "-x", deb, tmp], check=True)
    dyn = subprocess.run(["readelf", "-d", os.path.join(tmp, "usr/bin/starcloud")],
                         capture_output=True, text=True, check=True).stdout
    assert "BIND_NOW" in dyn
    syms = subprocess.run(["readelf", "-W", "--dyn-syms",
                           os.path.join(tmp, "usr/bin/starcloud")],
                          capture_output=True, text=True, check=True).stdout
    assert "__stack_chk_fail" in syms and "__snprintf_chk" in syms
    shutil.rmtree(tmp)


@pytest.fixture
def root(tmp_path):
    require(["debootstrap", "systemd-nspawn", "nsenter", "chroot"])
    r = Root(tmp_path / "root")
    yield r
    r.remove()


def edit(root, path, old, new):
    """Replaces one line of a configuration file in the root, as an operator
    would (the file keeps its owner and mode)."""
    p = root.file(path)
    text = open(p).read()
    assert old in text, (path, old)
    with open(p, "r+") as f:
        f.seek(0)
        f.write(text.replace(old, new, 1))
        f.truncate()


def test_install_on_fresh_debian_and_run(root, deb, tmp_path):
    shutil.copy(deb, root.file("/tmp/"))
    name = os.path.basename(deb)
    root.chroot("apt-get update -qq && apt-get install -y -qq ./tmp/%s" % name, timeout=900)

    # A working binary, the user, the configuration's owners and modes.
    assert root.chroot("starcloud version").stdout == "starcloud %s\n" % version()
    pw = root.chroot("getent passwd starcloud").stdout.split(":")
    assert pw[5] == "/var/lib/starcloud" and pw[6].strip().endswith("nologin"), pw
    st = root.chroot("stat -c '%U:%G %a %n' /etc/starcloud /etc/starcloud/*.yaml").stdout
    assert st.splitlines() == ["root:starcloud 750 /etc/starcloud",
                               "root:starcloud 640 /etc/starcloud/agent.yaml",
                               "root:starcloud 640 /etc/starcloud/gateway.yaml",
                               "root:starcloud 640 /etc/starcloud/server.yaml"], st
    # Installed, disabled, not started.
    for u in ("starcloud-server", "starcloud-agent", "starcloud-gateway"):
        r = root.chroot("systemctl is-enabled %s.service" % u, check=False)
        assert r.stdout.strip() == "disabled", (u, r.stdout, r.stderr)
    assert not os.path.exists(root.file("/var/lib/starcloud/server"))

    # The shipped configuration passes the daemons' own check.
    for d in ("server", "gateway"):
        r = root.chroot("starcloud %s --config /etc/starcloud/%s.yaml --check-config" % (d, d))
        assert "configuration OK" in r.stdout

    # The operator's edits: addresses (free ports here), the agent's node.
    sport, aport = free_port(), free_port()
    edit(root, "/etc/starcloud/server.yaml", "listen: 127.0.0.1:7070",
         "listen: 127.0.0.1:%d" % sport)

    # The root boots; the units are valid for its systemd.
    root.start()
    r = root.run("systemd-analyze verify --man=no /lib/systemd/system/starcloud-server.service "
                 "/lib/systemd/system/starcloud-agent.service "
                 "/lib/systemd/system/starcloud-gateway.service", check=False)
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr

    # Type=notify: `systemctl start` returns once the server serves.
    root.run("systemctl start starcloud-server", timeout=120)
    assert requests.get("http://127.0.0.1:%d/version" % sport, timeout=5).json()["version"] \
        == version()
    show = root.run("systemctl show -p User -p ActiveState -p SubState -p MainPID "
                    "-p NRestarts starcloud-server").stdout
    props = dict(line.split("=", 1) for line in show.split())
    assert props["User"] == "starcloud" and props["ActiveState"] == "active", props
    pid = props["MainPID"]
    assert root.run("stat -c %%U /proc/%s" % pid).stdout.strip() == "starcloud"
    assert root.run("stat -c '%U %a' /var/lib/starcloud/server").stdout.split() == \
        ["starcloud", "700"]
    # The first admin token is in a file only the server's user (and root)
    # can read, not in the journal.
    assert root.run("stat -c '%U %a' /var/lib/starcloud/server/admin.token").stdout.split() \
        == ["starcloud", "600"]
    token = root.run("cat /var/lib/starcloud/server/admin.token").stdout.strip()
    log = root.run("journalctl -u starcloud-server -o cat --no-pager").stdout
    assert token.startswith("sc_") and token not in log, log

    # A crash is restarted (Restart=on-failure) and the store kept.
    s = requests.Session()
    s.headers["Authorization"] = "Bearer " + token
    base = "http://127.0.0.1:%d/api/v1" % sport
    assert s.post(base + "/queues", json={
        "apiVersion": "starcloud.dev/v1", "kind": "Queue", "metadata": {"name": "q"},
        "spec": {"resources": {"gpu": {"quota": 1}}}}).status_code == 201
    root.run("kill -9 %s" % pid)
    deadline = time.time() + 60
    while True:
        show = root.run("systemctl show -p NRestarts -p ActiveState -p MainPID "
                        "starcloud-server").stdout
        props = dict(line.split("=", 1) for line in show.split())
        if props["ActiveState"] == "active" and props["MainPID"] not in ("0", pid):
            break
        assert time.time() < deadline, props
        time.sleep(0.2)
    assert props["NRestarts"] == "1"
    assert s.get(base + "/queues/q", timeout=5).status_code == 200

    # An agent with an agent token for its node; its pod runs as its queue's
    # uid (200000, the first queue on this node), inside the agent's sandbox,
    # and cannot read the agent's configuration (which holds its token).
    r = s.post(base + "/tokens", json={"role": "agent", "node": "n1"})
    assert r.status_code == 201, r.text
    atoken = r.json()["token"]
    for a, b in (("server: http://127.0.0.1:7070", "server: http://127.0.0.1:%d" % sport),
                 ('token: ""', "token: " + atoken), ("name: node-1", "name: n1"),
                 ("listen: 127.0.0.1:7071", "listen: 127.0.0.1:%d" % aport),
                 ("# gpus: 8xA100-80GB", "gpus: 1xA100-80GB")):
        edit(root, "/etc/starcloud/agent.yaml", a, b)
    root.run("systemctl start starcloud-agent", timeout=120)
    probe = ("id -u; touch /etc/x 2>/dev/null && echo etc-writable || echo etc-readonly; "
             "cat /etc/starcloud/agent.yaml >/dev/null 2>&1 && echo config-readable "
             "|| echo config-hidden; "
             "ls /var/lib/starcloud/server 2>/dev/null && echo server-visible "
             "|| echo server-hidden; echo $$ > pid; exec sleep 600")
    assert s.post(base + "/jobs", json={
        "apiVersion": "starcloud.dev/v1", "kind": "Job", "metadata": {"name": "probe"},
        "spec": {"queue": "q", "tasks": [{"name": "t", "replicas": 1,
                                          "resources": {"cpu": 0.1, "memory": "64Mi"},
                                          "command": ["/bin/sh", "-c", probe]}]}
    }).status_code == 201
    pod_dir = root.file("/var/lib/starcloud/agent/pods/probe/probe-t-0")
    out = os.path.join(pod_dir, "output.log")
    work = os.path.join(pod_dir, "work")  # the pod's cwd (docs/SECURITY.md)
    deadline = time.time() + 60
    while not (os.path.exists(os.path.join(work, "pid")) and
               os.path.getsize(os.path.join(work, "pid")) > 0):
        assert time.time() < deadline, "the pod did not start: %s" % root.run(
            "journalctl -u starcloud-agent -o cat --no-pager").stdout[-2000:]
        time.sleep(0.2)
    lines = open(out).read().split()
    assert lines == ["200000", "etc-readonly", "config-hidden", "server-hidden"], lines
    node = s.get(base + "/nodes/n1", timeout=5).json()
    assert node["status"]["agent"]["version"] == version()
    # Restarting the agent (an upgrade) leaves the pod running: same process.
    pod_pid = open(os.path.join(work, "pid")).read().strip()
    root.run("systemctl restart starcloud-agent", timeout=120)
    assert root.run("systemctl is-active starcloud-agent").stdout.strip() == "active"
    assert root.run("cat /proc/%s/comm" % pod_pid).stdout.strip() == "sleep"
    deadline = time.time() + 30
    while "adopted" not in root.run("journalctl -u starcloud-agent -o cat --no-pager").stdout:
        assert time.time() < deadline
        time.sleep(0.2)

    # A clean stop.
    root.run("systemctl stop starcloud-agent starcloud-server", timeout=120)
    assert root.run("systemctl is-active starcloud-server", check=False).stdout.strip() == \
        "inactive"
