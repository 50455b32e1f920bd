"""The SQLite store's schema migration: a data dir written by schema 1 (each
value stored in kv and again in the change log) opens under schema 3 (the
change log holds the only copy, schema 2; values of 128 bytes or more
deflated, schema 3) with every object, revision and the replayable part of
the log intact, and a copy of the schema 1 file kept."""
import json
import os
import sqlite3
import zlib

from conftest import Server

V1 = """
CREATE TABLE schema_version(version INTEGER NOT NULL);
INSERT INTO schema_version VALUES(1);
CREATE TABLE kv(key TEXT PRIMARY KEY, value TEXT NOT NULL,
 create_rev INTEGER NOT NULL, mod_rev INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE changes(id INTEGER PRIMARY KEY AUTOINCREMENT, rev INTEGER NOT NULL,
 key TEXT NOT NULL, type INTEGER NOT NULL, value TEXT NOT NULL);
CREATE INDEX changes_rev ON changes(rev);
CREATE TABLE meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


def obj(kind, name, **spec):
    return {"apiVersion": "starcloud.dev/v1", "kind": kind, "metadata": {"name": name},
            "spec": spec}


def test_schema_1_data_dir_opens(tmp_path):
    data = tmp_path / "data"
    os.makedirs(data)
    queue = obj("Queue", "q1")
    node = obj("Node", "n1", cpu=8, memory="64Gi")
    job_old = obj("Job", "j1", queue="q1",
                  tasks=[{"name": "w", "replicas": 1, "resources": {"cpu": 1}}])
    job = json.loads(json.dumps(job_old))
    job["metadata"]["labels"] = {"v": "2"}
    gone = obj("Queue", "gone")
    # Long enough to be packed by migration 3, and replayed from the log.
    gone["metadata"]["labels"] = {"label-%d" % i: "value-%d" % i for i in range(12)}
    db = sqlite3.connect(str(data / "store.db"))
    db.executescript(V1)
    # The queue's and the first job revision's changes were compacted away
    # (the log starts at revision 3); revision 5 wrote two keys.
    rows = [("/registry/queues/q1", queue, 1, 1), ("/registry/jobs/j1", job, 2, 3),
            ("/registry/nodes/n1", node, 4, 5)]
    for key, value, crev, mrev in rows:
        db.execute("INSERT INTO kv VALUES(?,?,?,?)", (key, json.dumps(value), crev, mrev))
    log = [(3, "/registry/jobs/j1", 1, job), (4, "/registry/nodes/n1", 0, node),
           (5, "/registry/nodes/n1", 1, node), (5, "/registry/queues/gone", 0, gone),
           (6, "/registry/queues/gone", 2, gone)]
    for rev, key, typ, value in log:
        db.execute("INSERT INTO changes(rev, key, type, value) VALUES(?,?,?,?)",
                   (rev, key, typ, json.dumps(value)))
    db.execute("INSERT INTO meta VALUES('revision', 6)")
    db.commit()
    db.close()

    srv = Server(data).start()
    try:
        srv.read_admin_token()
        s = srv.session()
        assert s.get(s.base + "/queues/q1").json()["metadata"]["resourceVersion"] == "1"
        j = s.get(s.base + "/jobs/j1").json()
        assert j["metadata"]["labels"] == {"v": "2"}
        assert int(j["metadata"]["resourceVersion"]) >= 3  # the loop may write its status
        assert s.get(s.base + "/nodes/n1").json()["metadata"]["resourceVersion"] == "5"
        assert s.get(s.base + "/queues/gone").status_code == 404
        # Revision 2 is older than the log: a watch from it must list again.
        r = s.get(s.base + "/queues", params={"watch": "1", "resourceVersion": "1"})
        assert r.status_code == 410
        # From revision 3 on the log replays, in order, with the values.
        with s.get(s.base + "/queues", params={"watch": "1", "resourceVersion": "3"},
                   stream=True, timeout=10) as resp:
            assert resp.status_code == 200
            evs = []
            for line in resp.iter_lines():
                if line:
                    evs.append(json.loads(line))
                if len(evs) == 2:
                    break
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == \
            [("ADDED", "gone"), ("DELETED", "gone")]
        assert all(e["object"]["metadata"]["labels"] == gone["metadata"]["labels"] for e in evs)
        # New writes go on from the old revision, and reads see them.
        r = s.post(s.base + "/queues", json=obj("Queue", "q2"))
        assert r.status_code == 201 and int(r.json()["metadata"]["resourceVersion"]) > 6
    finally:
        srv.stop()
    db = sqlite3.connect(str(data / "store.db"))
    assert db.execute("SELECT max(version) FROM schema_version").fetchone()[0] == 3
    cols = [c[1] for c in db.execute("PRAGMA table_info(kv)")]
    assert "value" not in cols
    # Packed: the value's length (4 bytes, little-endian), then raw deflate.
    packed = [v for (v,) in db.execute("SELECT value FROM changes WHERE key = "
                                       "'/registry/queues/gone'")]
    assert len(packed) == 2
    for v in packed:
        assert isinstance(v, bytes)
        raw = zlib.decompress(v[4:], -15)
        assert int.from_bytes(v[:4], "little") == len(raw)
        assert json.loads(raw) == gone
    short = db.execute("SELECT typeof(value) FROM changes WHERE key = "
                       "'/registry/queues/q1'").fetchall()
    assert short == [("text",)]
    db.close()
    # The database as it was before the migration is kept beside it, so the
    # previous release can be put back (docs/DEPLOY.md), and says so.
    db = sqlite3.connect(str(data / "store.db.schema1"))
    assert db.execute("SELECT max(version) FROM schema_version").fetchone()[0] == 1
    assert db.execute("SELECT value FROM kv WHERE key = '/registry/jobs/j1'").fetchone()[0] == \
        json.dumps(job)
    db.close()
    with open(str(data) + ".out") as f:
        log = f.read()
    assert "a copy as it was is kept in %s.schema1" % (data / "store.db") in log
    assert "migrated to schema 2" in log and "migrated to schema 3" in log
    assert "rewritten packed" in log  # VACUUM after migration 3: the file shrinks
    # A second start finds schema 3 and keeps everything.
    token = srv.token
    srv = Server(data).start()
    try:
        s = srv.session(token)
        assert s.get(s.base + "/jobs/j1").json()["metadata"]["labels"] == {"v": "2"}
        assert s.get(s.base + "/queues/q2").status_code == 200
    finally:
        srv.stop()
