"""A quiet server gives its SQLite WAL back: once nothing has been written
for a few seconds and all of it is durable, the WAL is checkpointed into
store.db and truncated (commit.c on_quiet, store_sqlite.c sq_quiet), so a
quiet server's store is its database file; nothing is lost by it, even to
kill -9, and writes go on after it."""
import os
import signal

from conftest import Server, queue, wait_for


def wal_bytes(data):
    try:
        return os.path.getsize(str(data / "store.db-wal"))
    except FileNotFoundError:
        return 0


def test_quiet_server_gives_its_wal_back(tmp_path):
    data = tmp_path / "data"
    srv = Server(data).start()
    try:
        srv.read_admin_token()
        s = srv.session()
        # Writes until the WAL holds 1 MiB, below which it is left alone
        # (each commit writes whole 4 KiB pages: a few hundred queues; on a
        # loaded machine a quiet spell may truncate it on the way)...
        n = 0
        while wal_bytes(data) < 1 << 20:
            assert n < 5000, wal_bytes(data)
            assert s.post(s.base + "/queues", json=queue("q%04d" % n)).status_code == 201
            n += 1
        # ...and a quiet spell gives it back (quiet ticks every 2 s; a loaded
        # machine may delay them).
        wait_for(lambda: wal_bytes(data) == 0, timeout=120, what="the WAL truncated")
        assert s.post(s.base + "/queues", json=queue("late")).status_code == 201
        assert wal_bytes(data) > 0
        token = srv.token
    finally:
        srv.stop(signal.SIGKILL)
    # Everything acknowledged, before and after the truncation, survives.
    srv = Server(data).start()
    try:
        s = srv.session(token)
        r = s.get(s.base + "/queues", params={"limit": 0})
        names = {q["metadata"]["name"] for q in r.json()["items"]}
        assert {"q%04d" % i for i in range(n)} | {"late"} <= names
    finally:
        srv.stop()
