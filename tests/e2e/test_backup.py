"""Backups and restores as docs/DEPLOY.md describes them, against running
servers: `starcloud store copy` from a live store (SQLite and etcd) into a
SQLite backup, which is never migrated or changed; an online SQLite
snapshot (sqlite3 .backup) and its restore; an etcd snapshot (etcdctl
snapshot save / restore) and a server on the restored member; and the
copy's refusals (a missing source, a source of another schema, a
destination that holds data)."""
import os
import shutil
import sqlite3
import subprocess

import pytest
import requests

from conftest import BIN, Server, job, node, queue
from etcd_util import Etcd


def require(tool, package):
    if shutil.which(tool):
        return
    if os.environ.get("CI") == "true":
        pytest.fail("%s is missing (apt-get install %s; scripts/deps.sh)" % (tool, package))
    pytest.skip("%s is missing (apt-get install %s)" % (tool, package))


def fill(s, n=5):
    assert s.post(s.base + "/queues", json=queue("team-a")).status_code == 201
    assert s.post(s.base + "/nodes", json=node("n1")).status_code == 201
    for i in range(n):
        assert s.post(s.base + "/jobs", json=job("j%d" % i)).status_code == 201


def names(s, plural):
    return sorted(o["metadata"]["name"] for o in s.get(s.base + "/" + plural, timeout=5)
                  .json()["items"])


def copy(frm, to, prefix=None):
    args = [BIN, "store", "copy", "--from", frm, "--to", to]
    if prefix:
        args += ["--etcd-prefix", prefix]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def test_sqlite_online_copy_and_snapshot(tmp_path):
    data = tmp_path / "data"
    srv = Server(data).start()
    srv.read_admin_token()
    try:
        s = srv.session()
        fill(s)
        # 1. starcloud store copy from the live store.
        r = copy("sqlite:%s" % data, "sqlite:%s" % (tmp_path / "copy"))
        assert r.returncode == 0, r.stderr
        # 2. An online snapshot of the database file (sqlite3 .backup).
        require("sqlite3", "sqlite3")
        snap = tmp_path / "snap"
        snap.mkdir()
        subprocess.run(["sqlite3", str(data / "store.db"),
                        ".backup '%s'" % (snap / "store.db")], check=True, timeout=60)
        # The server goes on; a later write is in neither backup.
        assert s.post(s.base + "/jobs", json=job("late")).status_code == 201
        jobs = names(s, "jobs")
    finally:
        srv.stop()
    assert "late" in jobs
    for backup in (tmp_path / "copy", snap):
        restored = Server(backup).start()
        try:
            s = restored.session(srv.token)
            assert names(s, "jobs") == sorted(j for j in jobs if j != "late")
            assert names(s, "queues") == ["team-a"] and names(s, "nodes") == ["n1"]
        finally:
            restored.stop()


def test_copy_never_changes_or_creates_its_source(tmp_path):
    # A mistyped source is an error, not an empty store copied.
    r = copy("sqlite:%s" % (tmp_path / "nothing"), "sqlite:%s" % (tmp_path / "to"))
    assert r.returncode == 1 and "no store at" in r.stderr
    assert not (tmp_path / "nothing").exists()
    # A source of another schema is not migrated by the copy.
    data = tmp_path / "data"
    srv = Server(data).start()
    srv.stop()
    db = sqlite3.connect(str(data / "store.db"))
    db.execute("INSERT INTO schema_version VALUES(4)")
    db.commit()
    db.close()
    r = copy("sqlite:%s" % data, "sqlite:%s" % (tmp_path / "to2"))
    assert r.returncode == 1 and "has schema 4" in r.stderr and "Nothing was changed" in r.stderr
    db = sqlite3.connect(str(data / "store.db"))
    assert db.execute("SELECT max(version) FROM schema_version").fetchone() == (4,)
    db.close()
    # A destination with data is refused.
    full = tmp_path / "full"
    srv = Server(full).start()
    srv.stop()
    other = tmp_path / "other"
    srv = Server(other).start()
    srv.stop()
    r = copy("sqlite:%s" % other, "sqlite:%s" % full)
    assert r.returncode == 1 and "refusing to mix stores" in r.stderr


def test_etcd_copy_snapshot_and_restore(tmp_path):
    require("etcdctl", "etcd-client")
    etcd = Etcd(tmp_path).start()
    restored_etcd = None
    try:
        srv = Server(tmp_path / "s", ["--store", etcd.store_url]).start()
        srv.read_admin_token()
        try:
            s = srv.session()
            fill(s)
            jobs = names(s, "jobs")
            # starcloud store copy from the live etcd store into SQLite.
            r = copy(etcd.store_url, "sqlite:%s" % (tmp_path / "copy"))
            assert r.returncode == 0, r.stderr
            # etcd's own snapshot of the member.
            snap = tmp_path / "etcd.snap"
            r = subprocess.run(["etcdctl", "--endpoints", etcd.endpoints, "snapshot", "save",
                                str(snap)], capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, ETCDCTL_API="3"))
            assert r.returncode == 0, r.stderr
        finally:
            srv.stop()
        # The SQLite copy is a working store.
        restored = Server(tmp_path / "copy").start()
        try:
            assert names(restored.session(srv.token), "jobs") == jobs
        finally:
            restored.stop()
        # Restore the snapshot into a new member's data dir, then a server on it.
        etcd.stop()
        (tmp_path / "restored").mkdir()
        restored_etcd = Etcd(tmp_path / "restored")
        name = restored_etcd.names[0]
        peer = "http://127.0.0.1:%d" % restored_etcd.peer[name]
        r = subprocess.run(["etcdctl", "snapshot", "restore", str(snap), "--name", name,
                            "--data-dir", str(tmp_path / "restored" / ("etcd-" + name)),
                            "--initial-cluster", "%s=%s" % (name, peer),
                            "--initial-advertise-peer-urls", peer],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, ETCDCTL_API="3"))
        assert r.returncode == 0, r.stderr
        restored_etcd.start()
        srv2 = Server(tmp_path / "s2", ["--store", restored_etcd.store_url]).start()
        try:
            s = srv2.session(srv.token)
            assert names(s, "jobs") == jobs
            assert requests.get(srv2.url + "/version", timeout=5).json()["store"]["schema"] == 2
        finally:
            srv2.stop()
    finally:
        etcd.stop()
        if restored_etcd:
            restored_etcd.stop()
