"""Store schema versions (docs/DEPLOY.md, upgrades): each backend records
the version of its layout, a server brings an older store forward at start
and refuses, changing nothing, a store that needs a newer release.

SQLite: the schema_version table (migrations in src/store/store_sqlite.c).
etcd: the key <prefix>schema, {"version", "minReader", "writer"}
(src/store/etcd_schema.c); a store with data and no key is version 1 (0.1)."""
import base64
import json
import os
import sqlite3
import subprocess
import threading

import requests

from conftest import BIN, Server, free_port, queue
from etcd_util import Etcd


def start_fails(data_dir, extra=()):
    """Runs a server that must refuse to start; returns its stderr."""
    r = subprocess.run([BIN, "server", "--listen", "127.0.0.1:%d" % free_port(),
                        "--data-dir", str(data_dir)] + list(extra),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0, r.stderr
    return r.stderr


# ---- SQLite ---------------------------------------------------------------

def dump(db_path):
    db = sqlite3.connect(str(db_path))
    try:
        return (db.execute("SELECT max(version) FROM schema_version").fetchone()[0],
                db.execute("SELECT key, mod_rev, change FROM kv ORDER BY key").fetchall())
    finally:
        db.close()


def test_sqlite_newer_schema_is_refused(tmp_path):
    data = tmp_path / "data"
    srv = Server(data).start()
    srv.read_admin_token()
    s = srv.session()
    assert s.post(s.base + "/queues", json=queue("q1")).status_code == 201
    srv.stop()
    db = sqlite3.connect(str(data / "store.db"))
    db.execute("INSERT INTO schema_version VALUES(4)")
    db.commit()
    db.close()
    before = dump(data / "store.db")
    err = start_fails(data)
    assert "store.db has schema 4, written by a newer starcloud" in err
    assert "reads schemas up to 3" in err and "Nothing was changed" in err
    assert dump(data / "store.db") == before
    assert not os.path.exists(str(data / "store.db.schema4"))


def test_sqlite_current_schema_keeps_no_copy(tmp_path):
    """A copy is kept only when a migration changes the file."""
    data = tmp_path / "data"
    for _ in range(2):
        srv = Server(data).start()
        srv.stop()
    assert sorted(f for f in os.listdir(str(data)) if f.startswith("store.db.schema")) == []


# ---- etcd -------------------------------------------------------------------

def b64(s):
    return base64.b64encode(s.encode()).decode()


class Keys:
    """etcd's JSON gateway, for reading and planting keys under a prefix."""

    def __init__(self, etcd, prefix):
        self.url = "http://127.0.0.1:%d" % etcd.client[etcd.names[0]]
        self.prefix = prefix

    def get(self, key):
        r = requests.post(self.url + "/v3/kv/range", json={"key": b64(self.prefix + key)},
                          timeout=5).json()
        kvs = r.get("kvs") or []
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None

    def put(self, key, value):
        requests.post(self.url + "/v3/kv/put", json={"key": b64(self.prefix + key),
                                                     "value": b64(value)},
                      timeout=5).raise_for_status()

    def delete(self, key):
        requests.post(self.url + "/v3/kv/deleterange", json={"key": b64(self.prefix + key)},
                      timeout=5).raise_for_status()

    def all(self):
        end = self.prefix[:-1] + chr(ord(self.prefix[-1]) + 1)
        r = requests.post(self.url + "/v3/kv/range",
                          json={"key": b64(self.prefix), "range_end": b64(end)},
                          timeout=5).json()
        return {base64.b64decode(kv["key"]).decode()[len(self.prefix):]:
                (base64.b64decode(kv.get("value", "")).decode(), kv["mod_revision"])
                for kv in r.get("kvs") or []}


def etcd_server(tmp_path, etcd, prefix, name="s"):
    return Server(tmp_path / name, ["--store", etcd.store_url, "--etcd-prefix", prefix])


def test_etcd_schema(tmp_path):
    etcd = Etcd(tmp_path).start()
    try:
        run_etcd_cases(tmp_path, etcd)
    finally:
        etcd.stop()


def run_etcd_cases(tmp_path, etcd):
    prefix = "/sc-schema/"
    keys = Keys(etcd, prefix)
    # A new store starts at the newest layout, and says who wrote it.
    srv = etcd_server(tmp_path, etcd, prefix).start()
    srv.read_admin_token()
    token = srv.token
    s = srv.session()
    assert s.post(s.base + "/queues", json=queue("q1")).status_code == 201
    rec = json.loads(keys.get("schema"))
    me = subprocess.run([BIN, "version"], capture_output=True, text=True).stdout.split()[1]
    assert rec == {"version": 2, "minReader": 1, "writer": "starcloud " + me}
    assert requests.get(srv.url + "/version", timeout=5).json()["store"] == \
        {"backend": "etcd", "schema": 2}
    srv.stop()

    # The schema key is the backend's own: a copy of the store leaves it out
    # (and the leader key), and an etcd-to-SQLite copy is a backup that a
    # server opens.
    backup = tmp_path / "backup"
    r = subprocess.run([BIN, "store", "copy", "--from", etcd.store_url, "--etcd-prefix", prefix,
                        "--to", "sqlite:%s" % backup], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    data_keys = [k for k in keys.all() if "/" in k]
    assert r.stdout.startswith("copied %d keys" % len(data_keys)), r.stdout
    db = sqlite3.connect(str(backup / "store.db"))
    assert db.execute("SELECT count(*) FROM kv WHERE key NOT LIKE '/registry/%'").fetchone() \
        == (0,)
    db.close()

    # A store of 0.1 (data, no key) is version 1. A backup of it by this
    # release (store copy reads it as it is) writes nothing there...
    keys.delete("schema")
    r = subprocess.run([BIN, "store", "copy", "--from", etcd.store_url, "--etcd-prefix", prefix,
                        "--to", "sqlite:%s" % (tmp_path / "backup1")], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert keys.get("schema") is None
    # ...and a server of this release brings it forward, data kept.
    before = {k: v for k, v in keys.all().items() if "/" in k}
    srv = etcd_server(tmp_path, etcd, prefix).start()
    srv.token = token
    s = srv.session()
    assert s.get(s.base + "/queues/q1", timeout=5).status_code == 200
    srv.stop()
    assert json.loads(keys.get("schema"))["version"] == 2
    after = {k: v for k, v in keys.all().items() if "/" in k and k in before}
    assert after == before
    with open(str(tmp_path / "s.out")) as f:
        assert "etcd schema 1 -> 2" in f.read()

    # A store a newer release made unreadable for this one: refused, untouched.
    future = json.dumps({"version": 7, "minReader": 5, "writer": "starcloud 9.0.0"})
    keys.put("schema", future)
    snapshot = keys.all()
    err = start_fails(tmp_path / "s", ["--store", etcd.store_url, "--etcd-prefix", prefix])
    assert "schema 7, written by starcloud 9.0.0, needs a server that knows schema 5" in err
    assert "knows schema 2" in err and "Nothing was changed" in err
    assert keys.all() == snapshot

    # Newer but still readable by this release (minReader 2): served as it is.
    keys.put("schema", json.dumps({"version": 3, "minReader": 2, "writer": "starcloud 0.3.0"}))
    srv = etcd_server(tmp_path, etcd, prefix).start()
    try:
        assert requests.get(srv.url + "/version", timeout=5).json()["store"]["schema"] == 3
    finally:
        srv.stop()
    assert json.loads(keys.get("schema"))["version"] == 3

    # A key that is not a schema record: refused, untouched.
    for bad in ("garbage", "{}", '{"version": 2}', '{"version": 2, "minReader": 3}',
                '{"version": 0, "minReader": 0}', '{"version": "2", "minReader": 1}'):
        keys.put("schema", bad)
        err = start_fails(tmp_path / "s", ["--store", etcd.store_url, "--etcd-prefix", prefix])
        assert "expected {\"version\": N, \"minReader\": M}" in err, (bad, err)
        assert "nothing was changed" in err
        assert keys.get("schema") == bad


def test_etcd_unversioned_store_two_servers_at_once(tmp_path):
    """Two servers starting together on a 0.1 store both come up; the
    version is written once."""
    etcd = Etcd(tmp_path).start()
    try:
        prefix = "/sc-race/"
        keys = Keys(etcd, prefix)
        srv = etcd_server(tmp_path, etcd, prefix, "first").start()
        srv.stop()
        keys.delete("schema")
        pair = [etcd_server(tmp_path, etcd, prefix, n) for n in ("a", "b")]
        errors = []

        def start(srv):
            try:
                srv.start()
            except RuntimeError as e:
                errors.append(e)
        threads = [threading.Thread(target=start, args=(srv,)) for srv in pair]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert errors == []
            assert json.loads(keys.get("schema"))["version"] == 2
        finally:
            for srv in pair:
                if srv.proc:
                    srv.stop()
        logs = "".join(open(str(tmp_path / (n + ".out"))).read() for n in ("a", "b"))
        assert logs.count("etcd schema 1 -> 2") >= 1
    finally:
        etcd.stop()
