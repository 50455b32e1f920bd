"""Fresh Debian 12 roots for the package tests, and a systemd booted in one.

A root is debootstrap's minbase of bookworm plus systemd-sysv and dbus (what
a fresh Debian 12 machine runs), built once and cached as a tarball outside
the checkout ($STARCLOUD_CACHE, default /var/cache/starcloud-test); each
test unpacks its own copy. debootstrap and apt fetch from the Debian mirror
in the root's sources (the same one apt on this machine uses).

Booting: systemd-nspawn --boot runs the root's systemd as PID 1 of its own
namespaces, sharing this machine's network (services in it listen on
127.0.0.1 here); commands run inside through nsenter. Everything started is
stopped by Root.stop()."""
import fcntl
import os
import shutil
import signal
import subprocess
import time

import pytest

CACHE = os.environ.get("STARCLOUD_CACHE", "/var/cache/starcloud-test")
SUITE = "bookworm"
INCLUDE = "systemd-sysv,dbus"


def mirror():
    """The Debian mirror apt uses here (deb822 or one-line sources)."""
    for path in ["/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"]:
        try:
            text = open(path).read()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            if line.startswith("URIs:") and "security" not in line:
                return words[1]
            if words[:1] == ["deb"] and "security" not in line:
                return [w for w in words[1:] if w.startswith("http")][0]
    return "http://deb.debian.org/debian"


def require(tools, root=True):
    why = []
    if root and os.geteuid() != 0:
        why.append("needs root (chroot, mounts, namespaces)")
    for t in tools:
        if not shutil.which(t):
            why.append("%s is missing (scripts/deps.sh installs it)" % t)
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail("; ".join(why))
        pytest.skip("; ".join(why))


def base_tarball():
    """The cached root as a tarball, built on first use (about a minute)."""
    os.makedirs(CACHE, exist_ok=True)
    tar = os.path.join(CACHE, "%s-minbase-systemd.tar" % SUITE)
    with open(os.path.join(CACHE, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run may be building it
        if os.path.exists(tar):
            return tar
        work = os.path.join(CACHE, "debootstrap.tmp")
        shutil.rmtree(work, ignore_errors=True)
        r = subprocess.run(["debootstrap", "--variant=minbase", "--include=" + INCLUDE, SUITE,
                            work, mirror()], capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            shutil.rmtree(work, ignore_errors=True)
            msg = "debootstrap failed (is the Debian mirror reachable?): " + r.stderr[-800:]
            if os.environ.get("CI") == "true":
                pytest.fail(msg)
            pytest.skip(msg)
        subprocess.run(["tar", "-C", work, "-cf", tar + ".tmp", "."], check=True)
        os.rename(tar + ".tmp", tar)
        shutil.rmtree(work, ignore_errors=True)
        return tar


class Root:
    """A fresh root in dir, unpacked from the cached tarball."""

    def __init__(self, path):
        self.path = str(path)
        os.makedirs(self.path)
        subprocess.run(["tar", "-C", self.path, "-xf", base_tarball()], check=True)
        shutil.copy("/etc/resolv.conf", os.path.join(self.path, "etc/resolv.conf"))
        self.mounts = []
        self.boot = None
        self.pid1 = None

    def file(self, rel):
        return os.path.join(self.path, rel.lstrip("/"))

    def _mount(self, *args):
        subprocess.run(["mount"] + list(args), check=True)
        self.mounts.append(args[-1])

    def chroot(self, cmd, timeout=600, check=True, env=None):
        """Runs a shell command in the root (not booted) with /proc, /sys
        and /dev mounted for apt and maintainer scripts."""
        if not self.mounts:
            self._mount("-t", "proc", "proc", self.file("/proc"))
            self._mount("--rbind", "/sys", self.file("/sys"))
            self._mount("--make-rslave", self.file("/sys"))
            self._mount("--rbind", "/dev", self.file("/dev"))
            self._mount("--make-rslave", self.file("/dev"))
        e = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive",
             "LANG": "C.UTF-8"}
        e.update(env or {})
        r = subprocess.run(["chroot", self.path, "/bin/sh", "-c", cmd], capture_output=True,
                           text=True, timeout=timeout, env=e)
        if check and r.returncode != 0:
            raise AssertionError("in the root, %r failed (%d):\n%s\n%s" % (
                cmd, r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
        return r

    def unmount(self):
        for m in reversed(self.mounts):
            subprocess.run(["umount", "-R", "-l", m], capture_output=True)
        self.mounts = []

    def start(self, timeout=60):
        """Boots the root's systemd; returns once it is running."""
        self.unmount()
        self.log = open(self.path + ".boot.log", "w")
        self.boot = subprocess.Popen(
            ["systemd-nspawn", "-D", self.path, "--boot", "--register=no", "--keep-unit",
             "--console=passive", "-q"], stdout=self.log, stderr=self.log)
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert self.boot.poll() is None, "systemd-nspawn exited: see %s" % self.log.name
            self.pid1 = self._find_pid1()
            if self.pid1:
                r = self.run("systemctl is-system-running --wait", check=False, timeout=30)
                if r.stdout.strip() in ("running", "degraded"):
                    return self
            time.sleep(0.2)
        raise AssertionError("the root's systemd did not come up within %d s" % timeout)

    def _find_pid1(self):
        """The root's systemd: the child of systemd-nspawn."""
        try:
            kids = open("/proc/%d/task/%d/children" % (self.boot.pid, self.boot.pid)).read()
        except OSError:
            return None
        for pid in kids.split():
            return int(pid)
        return None

    def run(self, cmd, timeout=120, check=True):
        """Runs a shell command inside the booted root (all its namespaces)."""
        r = subprocess.run(["nsenter", "-t", str(self.pid1), "-a", "/bin/sh", "-c", cmd],
                           capture_output=True, text=True, timeout=timeout,
                           env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})
        if check and r.returncode != 0:
            raise AssertionError("in the booted root, %r failed (%d):\n%s\n%s" % (
                cmd, r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
        return r

    def stop(self):
        if self.boot and self.boot.poll() is None:
            # SIGRTMIN+3 asks systemd to halt; nspawn exits when it has.
            if self.pid1:
                os.kill(self.pid1, signal.SIGRTMIN + 3)
            try:
                self.boot.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.boot.kill()
                self.boot.wait()
        if self.boot:
            self.log.close()
        self.unmount()

    def remove(self):
        self.stop()
        # Never delete through a mount still in place (/dev, /sys of this
        # machine are bound into the root while it is chrooted into).
        with open("/proc/mounts") as f:
            left = [line.split()[1] for line in f
                    if line.split()[1].startswith(self.path.rstrip("/") + "/")]
        assert not left, "still mounted, not removing %s: %s" % (self.path, left)
        shutil.rmtree(self.path, ignore_errors=True)
