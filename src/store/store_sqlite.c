/* Embedded SQLite backend of the store.
 *
 * One database file, store.db, in the data directory, in WAL mode with
 * synchronous=NORMAL. Group commit at two levels: every store transaction
 * between two syncs is a SAVEPOINT inside one SQLite transaction (so 32
 * concurrent API writes cost one SQLite commit, i.e. one set of WAL frames,
 * not 32), and sq_sync commits that transaction and fsyncs the WAL once.
 * The server acknowledges a write only after that sync, so every
 * acknowledged write survives kill -9 and power loss; a crash before the
 * sync loses only writes nobody was told about (a watcher may have seen
 * them, as it may see a write a power loss takes back). SQLite itself syncs
 * the WAL before each checkpoint, so the database file never gets ahead.
 *
 * Tables: kv (current values), changes (the change log watchers replay,
 * trimmed to the newest LOG_KEEP revisions), meta (the global revision),
 * schema_version (migrations applied). */
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "starcloud/error.h"

/* Revisions the change log keeps; a watcher further behind gets SC_ERANGE
 * (HTTP 410) and must list again, as with etcd compaction. */
#define LOG_KEEP 100000
#define COMPACT_EVERY 1000

typedef struct sqlite_store {
	sc_store_t base;
	sqlite3 *db;
	int64_t rev;
	int dirty;       /* commits since the last sync */
	int batch_open;  /* the SQLite transaction holding them is still open */
	int walfd;       /* store.db-wal, opened at the first sync */
	char walpath[4096];
	sqlite3_stmt *get, *list, *ins, *upd, *del, *log, *setrev, *replay;
	sqlite3_stmt *sp, *release, *rollback_to; /* the per-transaction savepoint */
} sqlite_store_t;

/* Each entry moves the schema one version forward. Never edit an entry
 * that has shipped; append a new one. */
static const char *const migrations[] = {
	"CREATE TABLE kv(key TEXT PRIMARY KEY, value TEXT NOT NULL,"
	" create_rev INTEGER NOT NULL, mod_rev INTEGER NOT NULL) WITHOUT ROWID;"
	"CREATE TABLE changes(id INTEGER PRIMARY KEY AUTOINCREMENT, rev INTEGER NOT NULL,"
	" key TEXT NOT NULL, type INTEGER NOT NULL, value TEXT NOT NULL);"
	"CREATE INDEX changes_rev ON changes(rev);"
	"CREATE TABLE meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
	"INSERT INTO meta VALUES('revision', 0);",
};

static int exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		fprintf(stderr, "store: %s: %s\n", sql, err ? err : "?");
		sqlite3_free(err);
		return SC_EIO;
	}
	return 0;
}

static int64_t query_int(sqlite3 *db, const char *sql, int64_t dflt)
{
	sqlite3_stmt *st;
	int64_t v = dflt;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return dflt;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* Brings the schema to the newest version, one migration per transaction
 * so a crash mid-way leaves a consistent older version. */
static int migrate(sqlite3 *db)
{
	if (exec(db, "CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL)") < 0)
		return SC_EIO;
	int64_t have = query_int(db, "SELECT max(version) FROM schema_version", 0);
	int64_t want = (int64_t)(sizeof(migrations) / sizeof(migrations[0]));
	if (have > want) {
		fprintf(stderr, "store: database schema %lld is newer than this binary (%lld)\n",
			(long long)have, (long long)want);
		return SC_EIO;
	}
	for (int64_t v = have; v < want; v++) {
		char bump[96];
		snprintf(bump, sizeof(bump), "INSERT INTO schema_version VALUES(%lld)",
			 (long long)v + 1);
		if (exec(db, "BEGIN IMMEDIATE") < 0)
			return SC_EIO;
		if (exec(db, migrations[v]) < 0 || exec(db, bump) < 0) {
			exec(db, "ROLLBACK");
			return SC_EIO;
		}
		if (exec(db, "COMMIT") < 0)
			return SC_EIO;
	}
	return 0;
}

static char *dup_col(sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	char *p = strdup(t ? (const char *)t : "");
	if (!p)
		abort(); /* daemon code: out of memory is fatal */
	return p;
}

static int sq_get(sc_store_t *s, const char *key, sc_kv_t *out)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	int rc = SC_ENOTFOUND;
	sqlite3_bind_text(q->get, 1, key, -1, SQLITE_STATIC);
	int step = sqlite3_step(q->get);
	if (step == SQLITE_ROW) {
		out->key = strdup(key);
		out->value = dup_col(q->get, 0);
		out->create_rev = sqlite3_column_int64(q->get, 1);
		out->mod_rev = sqlite3_column_int64(q->get, 2);
		rc = 0;
	} else if (step != SQLITE_DONE) {
		rc = SC_EIO;
	}
	sqlite3_reset(q->get);
	return rc;
}

/* The smallest string greater than every string starting with prefix: the
 * prefix with its last byte incremented (keys are ASCII). */
static void prefix_end(const char *prefix, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s", prefix);
	size_t n = strlen(out);
	if (n == 0) {
		snprintf(out, outsz, "\x7f");
		return;
	}
	out[n - 1]++;
}

static int sq_list(sc_store_t *s, const char *prefix, sc_kv_list_t *out)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	char end[512];
	if (strlen(prefix) >= sizeof(end))
		return SC_EINVAL;
	prefix_end(prefix, end, sizeof(end));
	size_t cap = 0;
	out->items = NULL;
	out->n = 0;
	out->rev = q->rev;
	sqlite3_bind_text(q->list, 1, prefix, -1, SQLITE_STATIC);
	sqlite3_bind_text(q->list, 2, end, -1, SQLITE_STATIC);
	int step;
	while ((step = sqlite3_step(q->list)) == SQLITE_ROW) {
		if (out->n == cap) {
			cap = cap ? cap * 2 : 64;
			sc_kv_t *p = realloc(out->items, cap * sizeof(*p));
			if (!p)
				abort();
			out->items = p;
		}
		sc_kv_t *kv = &out->items[out->n++];
		kv->key = dup_col(q->list, 0);
		kv->value = dup_col(q->list, 1);
		kv->create_rev = sqlite3_column_int64(q->list, 2);
		kv->mod_rev = sqlite3_column_int64(q->list, 3);
	}
	sqlite3_reset(q->list);
	if (step != SQLITE_DONE) {
		sc_kv_list_free(out);
		return SC_EIO;
	}
	return 0;
}

static int step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : SC_EIO;
}

/* Reads a key's revisions and value inside the open transaction. */
static int lookup(sqlite_store_t *q, const char *key, int64_t *create_rev, int64_t *mod_rev,
		  char **value)
{
	sc_kv_t kv = { 0 };
	int rc = sq_get(&q->base, key, &kv);
	if (rc < 0)
		return rc;
	*create_rev = kv.create_rev;
	*mod_rev = kv.mod_rev;
	if (value)
		*value = kv.value;
	else
		free(kv.value);
	free(kv.key);
	return 0;
}

/* Applies one op at revision rev; records it in the change log. The
 * event for watchers is filled in ev (value owned by the caller). */
static int apply_op(sqlite_store_t *q, const sc_store_op_t *op, int64_t rev,
		    sc_store_event_t *ev, char **owned)
{
	int64_t crev = 0, mrev = 0;
	char *old = NULL;
	int rc = lookup(q, op->key, &crev, &mrev, op->type == SC_STORE_DELETE ? &old : NULL);
	int exists = rc == 0;
	if (rc < 0 && rc != SC_ENOTFOUND)
		return rc;
	if (op->expect_rev == SC_REV_ABSENT && exists) {
		free(old);
		return SC_EEXISTS;
	}
	if (op->expect_rev > 0 && (!exists || mrev != op->expect_rev)) {
		free(old);
		return exists ? SC_ECONFLICT : SC_ENOTFOUND;
	}
	ev->key = op->key;
	ev->rev = rev;
	if (op->type == SC_STORE_DELETE) {
		if (!exists)
			return SC_ENOTFOUND;
		sqlite3_bind_text(q->del, 1, op->key, -1, SQLITE_STATIC);
		rc = step_done(q->del);
		ev->type = SC_EV_DELETED;
		ev->value = *owned = old;
	} else {
		sqlite3_stmt *st = exists ? q->upd : q->ins;
		sqlite3_bind_text(st, 1, op->key, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, op->value, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, rev);
		rc = step_done(st);
		ev->type = exists ? SC_EV_MODIFIED : SC_EV_ADDED;
		ev->value = op->value;
	}
	if (rc < 0)
		return rc;
	sqlite3_bind_int64(q->log, 1, rev);
	sqlite3_bind_text(q->log, 2, op->key, -1, SQLITE_STATIC);
	sqlite3_bind_int(q->log, 3, ev->type);
	sqlite3_bind_text(q->log, 4, ev->value, -1, SQLITE_STATIC);
	return step_done(q->log);
}

static void free_events(sc_store_event_t *evs, char **owned, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(owned[i]);
	free(owned);
	free(evs);
}

/* Opens the iteration's SQLite transaction if needed, then this store
 * transaction's savepoint. */
static int batch_begin(sqlite_store_t *q)
{
	if (!q->batch_open) {
		if (exec(q->db, "BEGIN IMMEDIATE") < 0)
			return SC_EIO;
		q->batch_open = 1;
	}
	return step_done(q->sp);
}

/* Undoes this store transaction only; earlier ones of the batch stay. */
static void txn_undo(sqlite_store_t *q)
{
	step_done(q->rollback_to);
	step_done(q->release);
}

/* Commits the batch with the newest revision (written once per batch: it
 * commits with the writes, so it can never disagree with them); on failure
 * the batch is rolled back and SC_EIO. */
static int batch_commit(sqlite_store_t *q)
{
	if (!q->batch_open)
		return 0;
	q->batch_open = 0;
	sqlite3_bind_int64(q->setrev, 1, q->rev);
	if (step_done(q->setrev) < 0 || exec(q->db, "COMMIT") < 0) {
		exec(q->db, "ROLLBACK");
		return SC_EIO;
	}
	return 0;
}

static int sq_txn(sc_store_t *s, const sc_store_op_t *ops, size_t n, int64_t *rev_out,
		  size_t *failed)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	int64_t rev = q->rev + 1;
	sc_store_event_t *evs = calloc(n ? n : 1, sizeof(*evs));
	char **owned = calloc(n ? n : 1, sizeof(*owned));
	int rc = 0;
	if (!evs || !owned)
		abort();
	if (batch_begin(q) < 0) {
		rc = SC_EIO;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		rc = apply_op(q, &ops[i], rev, &evs[i], &owned[i]);
		if (rc < 0) {
			if (failed)
				*failed = i;
			txn_undo(q);
			goto out;
		}
	}
	if (step_done(q->release) < 0) {
		txn_undo(q);
		rc = SC_EIO;
		goto out;
	}
	q->rev = rev;
	q->dirty = 1;
	if (rev_out)
		*rev_out = rev;
	/* Trimming the log is housekeeping outside the acknowledged write. */
	if (rev % COMPACT_EVERY == 0) {
		char sql[96];
		snprintf(sql, sizeof(sql), "DELETE FROM changes WHERE rev <= %lld",
			 (long long)(rev - LOG_KEEP));
		exec(q->db, sql);
	}
	for (size_t i = 0; i < n; i++)
		sc__store_notify(s, &evs[i]);
out:
	free_events(evs, owned, n);
	return rc;
}

static int sq_replay(sc_store_t *s, const char *prefix, int64_t from_rev, sc_store_watch_fn fn,
		     void *ud)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	if (from_rev >= q->rev)
		return 0;
	int64_t oldest = query_int(q->db, "SELECT min(rev) FROM changes", q->rev + 1);
	if (from_rev + 1 < oldest)
		return SC_ERANGE;
	sqlite3_bind_int64(q->replay, 1, from_rev);
	int step;
	size_t plen = strlen(prefix);
	while ((step = sqlite3_step(q->replay)) == SQLITE_ROW) {
		const char *key = (const char *)sqlite3_column_text(q->replay, 1);
		if (strncmp(key, prefix, plen) != 0)
			continue;
		sc_store_event_t ev = {
			.rev = sqlite3_column_int64(q->replay, 0),
			.key = key,
			.type = sqlite3_column_int(q->replay, 2),
			.value = (const char *)sqlite3_column_text(q->replay, 3),
		};
		fn(&ev, ud);
	}
	sqlite3_reset(q->replay);
	return step == SQLITE_DONE ? 0 : SC_EIO;
}

static int64_t sq_revision(sc_store_t *s)
{
	return ((sqlite_store_t *)s)->rev;
}

/* fdatasync on any descriptor of the WAL file flushes the pages SQLite
 * wrote to it. The WAL is reused in place after a checkpoint (same inode)
 * while the database is open, so one descriptor serves for the lifetime. */
static int sq_sync(sc_store_t *s)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	if (batch_commit(q) < 0) {
		fprintf(stderr, "store: cannot commit the writes since the last sync\n");
		return SC_EIO;
	}
	if (!q->dirty)
		return 0;
	if (q->walfd < 0)
		q->walfd = open(q->walpath, O_RDONLY | O_CLOEXEC);
	if (q->walfd < 0 || fdatasync(q->walfd) < 0) {
		fprintf(stderr, "store: cannot sync %s\n", q->walpath);
		return SC_EIO;
	}
	q->dirty = 0;
	return 0;
}

static void sq_close(sc_store_t *s)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	batch_commit(q); /* a caller that never synced still keeps its writes */
	sqlite3_stmt *sts[] = { q->get,	   q->list,   q->ins, q->upd,	   q->del,
				q->log,	   q->setrev, q->replay, q->sp, q->release,
				q->rollback_to };
	for (size_t i = 0; i < sizeof(sts) / sizeof(sts[0]); i++)
		sqlite3_finalize(sts[i]);
	sqlite3_close(q->db);
	if (q->walfd >= 0)
		close(q->walfd);
	free(q);
}

static const sc_store_ops_t sqlite_ops = {
	.name = "sqlite",
	.get = sq_get,
	.list = sq_list,
	.txn = sq_txn,
	.replay = sq_replay,
	.revision = sq_revision,
	.sync = sq_sync,
	.close = sq_close,
};

static int prepare_all(sqlite_store_t *q)
{
	struct {
		sqlite3_stmt **st;
		const char *sql;
	} t[] = {
		{ &q->get, "SELECT value, create_rev, mod_rev FROM kv WHERE key = ?1" },
		{ &q->list, "SELECT key, value, create_rev, mod_rev FROM kv"
			    " WHERE key >= ?1 AND key < ?2 ORDER BY key" },
		{ &q->ins, "INSERT INTO kv VALUES(?1, ?2, ?3, ?3)" },
		{ &q->upd, "UPDATE kv SET value = ?2, mod_rev = ?3 WHERE key = ?1" },
		{ &q->del, "DELETE FROM kv WHERE key = ?1" },
		{ &q->log, "INSERT INTO changes(rev, key, type, value) VALUES(?1, ?2, ?3, ?4)" },
		{ &q->setrev, "UPDATE meta SET value = ?1 WHERE name = 'revision'" },
		{ &q->replay, "SELECT rev, key, type, value FROM changes WHERE rev > ?1 ORDER BY id" },
		{ &q->sp, "SAVEPOINT txn" },
		{ &q->release, "RELEASE txn" },
		{ &q->rollback_to, "ROLLBACK TO txn" },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (sqlite3_prepare_v3(q->db, t[i].sql, -1, SQLITE_PREPARE_PERSISTENT, t[i].st,
				       NULL) != SQLITE_OK) {
			fprintf(stderr, "store: %s\n", sqlite3_errmsg(q->db));
			return SC_EIO;
		}
	return 0;
}

int sc_store_sqlite_open(const char *dir, sc_store_t **out)
{
	char path[4096];
	int rc = SC_EIO;
	sqlite_store_t *q = calloc(1, sizeof(*q));
	if (!q)
		return SC_ENOMEM;
	q->base.ops = &sqlite_ops;
	q->walfd = -1;
	if (mkdir(dir, 0700) < 0) {
		struct stat st;
		if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "store: cannot create data directory %s\n", dir);
			goto error;
		}
	}
	snprintf(q->walpath, sizeof(q->walpath), "%s/store.db-wal", dir);
	if ((size_t)snprintf(path, sizeof(path), "%s/store.db", dir) >= sizeof(path)) {
		rc = SC_EINVAL;
		goto error;
	}
	if (sqlite3_open(path, &q->db) != SQLITE_OK) {
		fprintf(stderr, "store: cannot open %s: %s\n", path, sqlite3_errmsg(q->db));
		goto error;
	}
	sqlite3_busy_timeout(q->db, 5000);
	/* WAL + NORMAL + sq_sync before acknowledging: see the top of the file;
	 * WAL also lets readers (backups, sqlite3 CLI) run alongside. */
	if (exec(q->db, "PRAGMA journal_mode=WAL") < 0 ||
	    exec(q->db, "PRAGMA synchronous=NORMAL") < 0 || migrate(q->db) < 0 ||
	    prepare_all(q) < 0)
		goto error;
	q->rev = query_int(q->db, "SELECT value FROM meta WHERE name = 'revision'", 0);
	*out = &q->base;
	return 0;
error:
	sq_close(&q->base);
	return rc;
}
