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
 * Tables (schema 2, values packed from schema 3): changes, the change log watchers replay, which
 * also holds the only copy of every current value; kv, one small row per live key (its revisions
 * and the id of the change that holds its value); meta (the global revision, and the revision the
 * log is compacted up to); schema_version (migrations applied). A change's id is its revision << 20
 * plus its place in the transaction, so the log needs no index of its own
 * and a replay from a revision is one range scan of the primary key.
 * Compaction drops changes older than the newest LOG_KEEP revisions except
 * those still holding a current value. Schema 1 stored each value twice
 * (in kv and in its change); migration 2 moves it. Schema 3 packs values
 * (sqlite_pack.h: 128 bytes or more, deflated when smaller, as a BLOB;
 * shorter ones stay TEXT), about halving the file; migration 3 packs the
 * values already there.
 *
 * The log is bounded in bytes as well: a revision can hold thousands of
 * changes (a scheduling cycle's statuses), so a bound on revisions alone
 * bounds nothing. The store keeps the bytes of current values (live) and
 * of each revision written since it opened; when the log's bytes pass a
 * quarter of the live data (at least LOG_MIN_BYTES), the oldest revisions
 * are compacted until it holds three quarters of that, at most
 * COMPACT_STEP bytes per transaction (a compaction is a range delete on
 * the loop thread: its cost follows the rows it drops). So the store holds
 * about 1.25 x the live data (as written, before packing), plus SQLite's
 * own slack. */
#include "store/store_sqlite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/version.h"
#include "starcloud/error.h"
#include "store/sqlite_pack.h"

/* Revisions the change log keeps; a watcher further behind gets SC_ERANGE
 * (HTTP 410) and must list again, as with etcd compaction. */
#define LOG_KEEP 100000
#define COMPACT_EVERY 1000
#define LOG_MIN_BYTES (1 << 20)
#define LOG_RATIO 4 /* the log's bound: live bytes / LOG_RATIO */
#define COMPACT_STEP (4 << 20)
/* The WAL shrinks back to this after a checkpoint (it is reused in place
 * and would otherwise keep its largest size). */
#define WAL_KEEP_BYTES 16777216
/* Changes per revision: a change's id is rev << OP_BITS | its index. */
#define OP_BITS 20
#define MAX_OPS ((size_t)1 << OP_BITS)
/* WAL pages before SQLite checkpoints them into the database (inside a
 * commit, on the loop thread). SQLite's default is 1,000; a bigger WAL
 * writes each hot page (the log's right edge, kv's interior pages) back
 * once per checkpoint rather than several times, and checkpoints (a
 * pause of the loop) come less often. About 40 MB of WAL at most. */
#define WAL_PAGES 10000
#define SC_STR_(x) #x
#define SC_STR(x) SC_STR_(x)

typedef struct sqlite_store {
	sc_store_t base;
	sqlite3 *db;
	int64_t rev;
	int dirty;      /* commits since the last sync */
	int batch_open; /* the SQLite transaction holding them is still open */
	int lost;       /* < 0: the batch was undone (why); the next sync says so */
	int unflushed;  /* committed batches wait for an fsync (sq_flush_fd) */
	long long probes;
	int walfd; /* store.db-wal, opened at the first sync */
	char walpath[4096];
	sqlite3_stmt *get, *list, *revs, *ins, *upd, *del, *log, *setrev, *replay;
	sqlite3_stmt *sp, *release, *rollback_to; /* the per-transaction savepoint */
	sqlite3_stmt *compact_range, *drop;
	int64_t log_keep, compact_every; /* LOG_KEEP, COMPACT_EVERY */
	/* The log's bytes: per revision written since the store opened (a
	 * ring, oldest first), their sum, the live values' bytes. */
	struct revbytes {
		int64_t rev, bytes;
	} * rb;
	size_t rb_head, rb_n, rb_cap;
	int64_t log_bytes, live_bytes, txn_bytes, txn_live;
	int64_t log_max; /* fixed bound (tests), or 0: live / LOG_RATIO */
	int64_t compacted;
	sc_store_stats_t stats;
	sc_pack_t pk; /* packed values (schema 3) */
	char *unpack; /* the last value a replay unpacked */
	size_t unpack_cap;
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
    /* 2: each value stored once, in its change (see the top of the file).
     * Current values whose change was compacted away get a change of their
     * own with a negative id (below every revision, never replayed). */
    "CREATE TABLE changes2(id INTEGER PRIMARY KEY, key TEXT NOT NULL,"
    " type INTEGER NOT NULL, value TEXT NOT NULL);"
    "INSERT INTO changes2 SELECT (c.rev << 20) + c.id -"
    " (SELECT min(d.id) FROM changes d WHERE d.rev = c.rev), c.key, c.type, c.value"
    " FROM changes c;"
    "CREATE INDEX changes2_key ON changes2(key, id);"
    "INSERT INTO changes2 SELECT -(row_number() OVER (ORDER BY k.key)), k.key, 0, k.value"
    " FROM kv k WHERE NOT EXISTS (SELECT 1 FROM changes2 c WHERE c.key = k.key"
    " AND c.id >= (k.mod_rev << 20) AND c.id < ((k.mod_rev + 1) << 20));"
    "CREATE TABLE kv2(key TEXT PRIMARY KEY, create_rev INTEGER NOT NULL,"
    " mod_rev INTEGER NOT NULL, change INTEGER NOT NULL) WITHOUT ROWID;"
    "INSERT INTO kv2 SELECT k.key, k.create_rev, k.mod_rev,"
    " (SELECT max(c.id) FROM changes2 c WHERE c.key = k.key AND (c.id < 0 OR"
    " (c.id >= (k.mod_rev << 20) AND c.id < ((k.mod_rev + 1) << 20)))) FROM kv k;"
    "INSERT INTO meta VALUES('compacted', coalesce((SELECT min(rev) - 1 FROM changes),"
    " (SELECT value FROM meta WHERE name = 'revision')));"
    "DROP INDEX changes2_key;"
    "DROP TABLE changes;"
    "DROP TABLE kv;"
    "ALTER TABLE changes2 RENAME TO changes;"
    "ALTER TABLE kv2 RENAME TO kv;",
    /* 3: values of SC_PACK_MIN bytes or more may be a BLOB: their length and
     * a raw deflate stream (sqlite_pack.h); shorter or incompressible ones
     * stay TEXT. The values already there are packed now. */
    "UPDATE changes SET value = sc_pack(value) WHERE length(value) >= " SC_STR(SC_PACK_MIN) ";",
};

/* SQLite's last error as ours: a full disk is SC_ENOSPACE (the server
 * answers 507 and waits for space), anything else SC_EIO. */
static int db_error(sqlite3 *db)
{
	return sqlite3_errcode(db) == SQLITE_FULL ? SC_ENOSPACE : SC_EIO;
}

static int exec_quiet(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : db_error(db);
}

static int exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		int rc = db_error(db);
		sc_log_error("store: %s: %s", sql, err ? err : "?");
		sqlite3_free(err);
		return rc;
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

/* Before a migration changes an existing database, a copy of it as it
 * was (VACUUM INTO: one consistent file, no WAL) so that the previous
 * release can be put back (docs/DEPLOY.md). An existing copy is kept: it
 * is from an earlier attempt at the same migration. */
static int keep_copy(sqlite3 *db, const char *path, int64_t have)
{
	char copy[4200], sql[4300];
	struct stat st;
	snprintf(copy, sizeof(copy), "%s.schema%lld", path, (long long)have);
	if (stat(copy, &st) == 0)
		return 0;
	char *q = sqlite3_mprintf("VACUUM INTO %Q", copy);
	if (!q)
		return SC_ENOMEM;
	snprintf(sql, sizeof(sql), "%s", q);
	sqlite3_free(q);
	if (exec(db, sql) < 0) {
		sc_log_error("store: cannot keep a copy of %s before migrating it; nothing was "
		             "changed",
		             path);
		return SC_EIO;
	}
	sc_log_info("store: %s is schema %lld; a copy as it was is kept in %s", path,
	            (long long)have, copy);
	return 0;
}

/* Brings the schema to the newest version, one migration per transaction
 * so a crash mid-way leaves a consistent older version. Refuses a schema
 * newer than this binary knows (a newer release wrote it) and changes
 * nothing then. Returns the schema version, or < 0. */
static int migrate(sqlite3 *db, const char *path, int readonly)
{
	if (!readonly &&
	    exec(db, "CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL)") < 0)
		return SC_EIO;
	int64_t have = query_int(db, "SELECT max(version) FROM schema_version", 0);
	int64_t want = (int64_t)(sizeof(migrations) / sizeof(migrations[0]));
	/* A reader (a backup) never migrates: the store may belong to a
	 * running server of another release. */
	if (readonly && have != want) {
		sc_log_error(
		    "store: %s has schema %lld; this binary (starcloud %s) reads schema %lld "
		    "without changing it: use the release that wrote it%s. Nothing was "
		    "changed.",
		    path, (long long)have, SC_VERSION, (long long)want,
		    have < want ? ", or start a server of this release on it first" : "");
		return SC_ERANGE;
	}
	if (have > want) {
		sc_log_error(
		    "store: %s has schema %lld, written by a newer starcloud; this binary "
		    "(starcloud %s) reads schemas up to %lld. Run the newer release, or restore a "
		    "copy taken before the upgrade (docs/DEPLOY.md). Nothing was changed.",
		    path, (long long)have, SC_VERSION, (long long)want);
		return SC_ERANGE;
	}
	if (have > 0 && have < want && keep_copy(db, path, have) < 0)
		return SC_EIO;
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
		if (have > 0)
			sc_log_info("store: %s migrated to schema %lld", path, (long long)v + 1);
	}
	/* Migration 3 packed every value in place: the file keeps its size
	 * (the freed pages inside it) until it is rewritten once. A failure
	 * (no room for the copy VACUUM writes) loses nothing: the file stays
	 * as it is, only larger. */
	if (have > 0 && have < 3 && want >= 3) {
		uint64_t t0 = sc__store_now_ns();
		if (exec(db, "VACUUM") == 0)
			sc_log_info("store: %s rewritten packed in %.1f s", path,
			            (double)(sc__store_now_ns() - t0) / 1e9);
		else
			sc_log_warn("store: %s could not be rewritten after migration 3; it keeps "
			            "the space its values took before they were packed",
			            path);
	}
	return (int)want;
}

static char *dup_col(sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	char *p = sc_xstrdup(t ? (const char *)t : "");
	return p;
}

static int sq_get(sc_store_t *s, const char *key, sc_kv_t *out)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	int rc = SC_ENOTFOUND;
	sqlite3_bind_text(q->get, 1, key, -1, SQLITE_STATIC);
	int step = sqlite3_step(q->get);
	if (step == SQLITE_ROW) {
		out->value = sc_pack_column_dup(&q->pk, q->get, 0);
		out->key = out->value ? sc_xstrdup(key) : NULL;
		out->create_rev = sqlite3_column_int64(q->get, 1);
		out->mod_rev = sqlite3_column_int64(q->get, 2);
		rc = out->value ? 0 : SC_EIO;
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
			sc_kv_t *p = sc_xrealloc(out->items, cap * sizeof(*p));
			out->items = p;
		}
		sc_kv_t *kv = &out->items[out->n];
		if (!(kv->value = sc_pack_column_dup(&q->pk, q->list, 1))) {
			step = SQLITE_CORRUPT;
			break;
		}
		out->n++;
		kv->key = dup_col(q->list, 0);
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
	return rc == SQLITE_DONE ? 0 : db_error(sqlite3_db_handle(st));
}

/* Reads a key's revisions and the id of the change holding its value
 * (inside the open transaction); SC_ENOTFOUND when absent. */
static int lookup(sqlite_store_t *q, const char *key, int64_t *create_rev, int64_t *mod_rev,
                  int64_t *size, int64_t *change)
{
	int rc = SC_ENOTFOUND;
	sqlite3_bind_text(q->revs, 1, key, -1, SQLITE_STATIC);
	int step = sqlite3_step(q->revs);
	if (step == SQLITE_ROW) {
		*create_rev = sqlite3_column_int64(q->revs, 0);
		*mod_rev = sqlite3_column_int64(q->revs, 1);
		*size = sqlite3_column_int64(q->revs, 2);
		*change = sqlite3_column_int64(q->revs, 3);
		rc = 0;
	} else if (step != SQLITE_DONE) {
		rc = SC_EIO;
	}
	sqlite3_reset(q->revs);
	return rc;
}

/* Applies op, the idx-th of the transaction at revision rev, and records
 * it in the change log; for a put that change row is the value's only
 * copy, which kv points to. The event for watchers is filled in ev (a
 * deleted value owned by the caller through *owned). */
static int apply_op(sqlite_store_t *q, const sc_store_op_t *op, int64_t rev, size_t idx,
                    sc_store_event_t *ev, char **owned)
{
	int64_t crev = 0, mrev = 0, size = 0, change = 0, id = (rev << OP_BITS) | (int64_t)idx;
	int rc = lookup(q, op->key, &crev, &mrev, &size, &change);
	int exists = rc == 0;
	if (rc < 0 && rc != SC_ENOTFOUND)
		return rc;
	if (op->expect_rev == SC_REV_ABSENT && exists)
		return SC_EEXISTS;
	if (op->expect_rev > 0 && (!exists || mrev != op->expect_rev))
		return exists ? SC_ECONFLICT : SC_ENOTFOUND;
	ev->key = op->key;
	ev->rev = rev;
	if (op->type == SC_STORE_DELETE) {
		sc_kv_t old = {0};
		if (!exists)
			return SC_ENOTFOUND;
		/* Watchers get the last value; the delete's change keeps a copy,
		 * since the put that held it is compacted on its own schedule. */
		if ((rc = sq_get(&q->base, op->key, &old)) < 0)
			return rc;
		free(old.key);
		ev->type = SC_EV_DELETED;
		ev->value = *owned = old.value;
		q->txn_live -= size;
		sqlite3_bind_text(q->del, 1, op->key, -1, SQLITE_STATIC);
		if ((rc = step_done(q->del)) < 0)
			return rc;
	} else {
		ev->type = exists ? SC_EV_MODIFIED : SC_EV_ADDED;
		ev->value = op->value;
		q->txn_live += (int64_t)strlen(op->value) - (exists ? size : 0);
		sqlite3_stmt *st = exists ? q->upd : q->ins;
		sqlite3_bind_text(st, 1, op->key, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, rev);
		sqlite3_bind_int64(st, 3, id);
		if ((rc = step_done(st)) < 0)
			return rc;
	}
	/* The value this one replaces held a row compaction had to keep; past
	 * the log's window, nothing reads it any more. */
	if (exists && change < ((q->compacted + 1) << OP_BITS)) {
		sqlite3_bind_int64(q->drop, 1, change);
		if ((rc = step_done(q->drop)) < 0)
			return rc;
	}
	q->txn_bytes += (int64_t)strlen(ev->value);
	sqlite3_bind_int64(q->log, 1, id);
	sqlite3_bind_text(q->log, 2, op->key, -1, SQLITE_STATIC);
	sqlite3_bind_int(q->log, 3, ev->type);
	sc_pack_bind(&q->pk, q->log, 4, ev->value);
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
		int rc = exec(q->db, "BEGIN IMMEDIATE");
		if (rc < 0)
			return rc;
		q->batch_open = 1;
	}
	return step_done(q->sp);
}

/* After an error inside the batch: SQLite undoes the whole transaction on
 * some errors (a full disk, an I/O error), not just the statement. Then
 * every store transaction of the batch is gone: the next sync must fail
 * (nothing of it may be acknowledged) and readers must be told. */
static void batch_check(sqlite_store_t *q, int why)
{
	if (!q->batch_open || !sqlite3_get_autocommit(q->db))
		return;
	q->batch_open = 0;
	q->dirty = 0;
	q->lost = why;
	q->base.rollbacks++;
	sc_log_error("store: the writes since the last sync were undone: %s", sc_strerror(why));
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
	int rc = step_done(q->setrev);
	if (rc == 0)
		rc = exec(q->db, "COMMIT");
	if (rc < 0) {
		if (!sqlite3_get_autocommit(q->db))
			exec_quiet(q->db, "ROLLBACK");
		/* The revisions handed out stay used (q->rev keeps counting), so
		 * no revision ever names two different writes. */
		q->dirty = 0;
		q->base.rollbacks++;
		return rc;
	}
	return 0;
}

/* Drops the changes of revisions up to upto, except those that hold a
 * current value (kv points to them), and remembers upto: a watcher from
 * an older revision gets SC_ERANGE. Only the range past the last
 * compaction is walked, each row checked against kv by its key. */
static void compact(sqlite_store_t *q, int64_t upto)
{
	char sql[128];
	if (upto <= q->compacted)
		return;
	uint64_t t0 = sc__store_now_ns();
	sqlite3_bind_int64(q->compact_range, 1, (q->compacted + 1) << OP_BITS);
	sqlite3_bind_int64(q->compact_range, 2, (upto + 1) << OP_BITS);
	if (step_done(q->compact_range) < 0)
		return;
	int64_t rows = sqlite3_changes(q->db);
	snprintf(sql, sizeof(sql), "UPDATE meta SET value = %lld WHERE name = 'compacted'",
	         (long long)upto);
	if (exec(q->db, sql) < 0)
		return;
	q->compacted = upto;
	while (q->rb_n && q->rb[q->rb_head].rev <= upto) {
		q->log_bytes -= q->rb[q->rb_head].bytes;
		q->rb_head = (q->rb_head + 1) % q->rb_cap;
		q->rb_n--;
	}
	q->stats.compactions++;
	q->stats.compacted_rows += (uint64_t)rows;
	q->stats.compaction_seconds += (double)(sc__store_now_ns() - t0) / 1e9;
}

/* Records the bytes of the revision just written. */
static void note_revision(sqlite_store_t *q, int64_t rev, int64_t bytes)
{
	if (q->rb_n == q->rb_cap) {
		size_t cap = q->rb_cap ? q->rb_cap * 2 : 1024;
		struct revbytes *nb = sc_xcalloc(cap, sizeof(*nb));
		for (size_t i = 0; i < q->rb_n; i++)
			nb[i] = q->rb[(q->rb_head + i) % q->rb_cap];
		free(q->rb);
		q->rb = nb;
		q->rb_cap = cap;
		q->rb_head = 0;
	}
	q->rb[(q->rb_head + q->rb_n++) % q->rb_cap] = (struct revbytes){rev, bytes};
	q->log_bytes += bytes;
}

/* The byte bound: past it, the oldest revisions go until the log holds
 * three quarters of it, at most COMPACT_STEP bytes at a time. */
static void bound_bytes(sqlite_store_t *q)
{
	int64_t max = q->log_max ? q->log_max : q->live_bytes / LOG_RATIO;
	if (!q->log_max && max < LOG_MIN_BYTES)
		max = LOG_MIN_BYTES;
	if (q->log_bytes <= max || !q->rb_n)
		return;
	int64_t drop = 0, upto = 0;
	for (size_t i = 0; i < q->rb_n && q->log_bytes - drop > max * 3 / 4 && drop < COMPACT_STEP;
	     i++) {
		const struct revbytes *r = &q->rb[(q->rb_head + i) % q->rb_cap];
		drop += r->bytes;
		upto = r->rev;
	}
	/* The newest revision stays: a watcher that is up to date resumes. */
	if (upto >= q->rev)
		upto = q->rev - 1;
	compact(q, upto);
}

static int sq_txn(sc_store_t *s, const sc_store_op_t *ops, size_t n, int64_t *rev_out,
                  size_t *failed)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	int64_t rev = q->rev + 1;
	if (n >= MAX_OPS)
		return SC_ETOOBIG; /* change ids have room for MAX_OPS per revision */
	sc_store_event_t *evs = sc_xcalloc(n ? n : 1, sizeof(*evs));
	char **owned = sc_xcalloc(n ? n : 1, sizeof(*owned));
	int rc = 0;
	q->txn_bytes = q->txn_live = 0;
	if ((rc = batch_begin(q)) < 0) {
		batch_check(q, rc);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		rc = apply_op(q, &ops[i], rev, i, &evs[i], &owned[i]);
		if (rc < 0) {
			if (failed)
				*failed = i;
			txn_undo(q);
			batch_check(q, rc);
			goto out;
		}
	}
	if ((rc = step_done(q->release)) < 0) {
		txn_undo(q);
		batch_check(q, rc);
		goto out;
	}
	q->rev = rev;
	q->dirty = 1;
	if (rev_out)
		*rev_out = rev;
	q->live_bytes += q->txn_live;
	note_revision(q, rev, q->txn_bytes);
	/* Trimming the log is housekeeping outside the acknowledged write. */
	if (rev % q->compact_every == 0 && rev > q->log_keep)
		compact(q, rev - q->log_keep);
	bound_bytes(q);
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
	if (from_rev < q->compacted)
		return SC_ERANGE;
	sqlite3_bind_int64(q->replay, 1, (from_rev + 1) << OP_BITS);
	int step;
	size_t plen = strlen(prefix);
	while ((step = sqlite3_step(q->replay)) == SQLITE_ROW) {
		const char *key = (const char *)sqlite3_column_text(q->replay, 1);
		if (strncmp(key, prefix, plen) != 0)
			continue;
		sc_store_event_t ev = {
		    .rev = sqlite3_column_int64(q->replay, 0) >> OP_BITS,
		    .key = key,
		    .type = sqlite3_column_int(q->replay, 2),
		    .value = sc_pack_column(&q->pk, q->replay, 3, &q->unpack, &q->unpack_cap),
		};
		if (!ev.value) {
			step = SQLITE_CORRUPT;
			break;
		}
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
/* fdatasync of the WAL; SC_EIO (or SC_ENOSPACE) when it fails. */
static int sync_wal(sqlite_store_t *q)
{
	if (q->walfd < 0)
		q->walfd = open(q->walpath, O_RDONLY | O_CLOEXEC);
	if (q->walfd < 0 || fdatasync(q->walfd) < 0)
		return errno == ENOSPC || errno == EDQUOT ? SC_ENOSPACE : SC_EIO;
	return 0;
}

static int sq_sync(sc_store_t *s)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	int rc = q->lost;
	if (rc < 0) {
		q->lost = 0; /* said once: those writes are not acknowledged */
		return rc;
	}
	if ((rc = batch_commit(q)) < 0) {
		sc_log_error("store: cannot commit the writes since the last sync: %s; they are "
		             "undone",
		             sc_strerror(rc));
		return rc;
	}
	if (!q->dirty && !q->unflushed)
		return 0;
	if ((rc = sync_wal(q)) < 0) {
		/* The writes are in the file but maybe not on the disk: still
		 * dirty, so the next sync tries again. */
		sc_log_error("store: cannot sync %s: %s", q->walpath, strerror(errno));
		return rc;
	}
	q->dirty = q->unflushed = 0;
	return 0;
}

/* The first half of sq_sync: the batch is committed into the WAL (the
 * loop thread); sq_flush_fd hands out the fsync. */
static int sq_commit(sc_store_t *s)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	int rc = q->lost;
	if (rc < 0) {
		q->lost = 0;
		return rc;
	}
	if ((rc = batch_commit(q)) < 0) {
		sc_log_error("store: cannot commit the writes since the last sync: %s; they are "
		             "undone",
		             sc_strerror(rc));
		return rc;
	}
	if (q->dirty) {
		q->dirty = 0;
		q->unflushed = 1;
	}
	return 0;
}

/* A descriptor of the WAL for an fdatasync on another thread: any
 * descriptor of the file flushes what was written through SQLite's own.
 * Its own (dup) so that closing the store never pulls it from under the
 * thread. */
static int sq_flush_fd(sc_store_t *s)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	if (!q->unflushed)
		return -1;
	if (q->walfd < 0)
		q->walfd = open(q->walpath, O_RDONLY | O_CLOEXEC);
	int fd = q->walfd >= 0 ? fcntl(q->walfd, F_DUPFD_CLOEXEC, 0) : -1;
	if (fd >= 0)
		q->unflushed = 0;
	return fd;
}

/* The write-probe of a store that refused writes: a row of meta, which no
 * reader lists, committed and synced like any batch. */
static int sq_probe(sc_store_t *s)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	char sql[128];
	int rc;
	if (q->batch_open && (rc = batch_commit(q)) < 0)
		return rc;
	snprintf(sql, sizeof(sql),
	         "BEGIN IMMEDIATE; INSERT OR REPLACE INTO meta VALUES('probe', %lld); COMMIT",
	         ++q->probes);
	if ((rc = exec_quiet(q->db, sql)) < 0) {
		if (!sqlite3_get_autocommit(q->db))
			exec_quiet(q->db, "ROLLBACK");
		return rc;
	}
	return sync_wal(q);
}

static void sq_close(sc_store_t *s)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	batch_commit(q); /* a caller that never synced still keeps its writes */
	sqlite3_stmt *sts[] = {q->get,     q->list,        q->revs,          q->ins,    q->upd,
	                       q->del,     q->log,         q->setrev,        q->replay, q->sp,
	                       q->release, q->rollback_to, q->compact_range, q->drop};
	for (size_t i = 0; i < sizeof(sts) / sizeof(sts[0]); i++)
		sqlite3_finalize(sts[i]);
	sqlite3_close(q->db);
	if (q->walfd >= 0)
		close(q->walfd);
	sc_pack_free(&q->pk);
	free(q->unpack);
	free(q->rb);
	free(q);
}

static int sq_stats(sc_store_t *s, sc_store_stats_t *out)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	*out = q->stats;
	out->live_bytes = q->live_bytes;
	out->log_bytes = q->log_bytes;
	out->compacted = q->compacted;
	return 0;
}

static const sc_store_ops_t sqlite_ops = {
    .stats = sq_stats,
    .name = "sqlite",
    .get = sq_get,
    .list = sq_list,
    .txn = sq_txn,
    .replay = sq_replay,
    .revision = sq_revision,
    .sync = sq_sync,
    .probe = sq_probe,
    .commit = sq_commit,
    .flush_fd = sq_flush_fd,
    .close = sq_close,
};

static int prepare_all(sqlite_store_t *q)
{
	struct {
		sqlite3_stmt **st;
		const char *sql;
	} t[] = {
	    {&q->get, "SELECT c.value, k.create_rev, k.mod_rev FROM kv k"
	              " JOIN changes c ON c.id = k.change WHERE k.key = ?1"},
	    {&q->list, "SELECT k.key, c.value, k.create_rev, k.mod_rev FROM kv k"
	               " JOIN changes c ON c.id = k.change"
	               " WHERE k.key >= ?1 AND k.key < ?2 ORDER BY k.key"},
	    {&q->revs, "SELECT k.create_rev, k.mod_rev, sc_rawlen(c.value), k.change FROM kv k"
	               " JOIN changes c ON c.id = k.change WHERE k.key = ?1"},
	    {&q->drop, "DELETE FROM changes WHERE id = ?1"},
	    {&q->compact_range, "DELETE FROM changes WHERE id >= ?1 AND id < ?2 AND NOT EXISTS"
	                        " (SELECT 1 FROM kv WHERE kv.key = changes.key AND"
	                        " kv.change = changes.id)"},
	    {&q->ins, "INSERT INTO kv VALUES(?1, ?2, ?2, ?3)"},
	    {&q->upd, "UPDATE kv SET mod_rev = ?2, change = ?3 WHERE key = ?1"},
	    {&q->del, "DELETE FROM kv WHERE key = ?1"},
	    {&q->log, "INSERT INTO changes(id, key, type, value) VALUES(?1, ?2, ?3, ?4)"},
	    {&q->setrev, "UPDATE meta SET value = ?1 WHERE name = 'revision'"},
	    {&q->replay, "SELECT id, key, type, value FROM changes WHERE id >= ?1 ORDER BY id"},
	    {&q->sp, "SAVEPOINT txn"},
	    {&q->release, "RELEASE txn"},
	    {&q->rollback_to, "ROLLBACK TO txn"},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (sqlite3_prepare_v3(q->db, t[i].sql, -1, SQLITE_PREPARE_PERSISTENT, t[i].st,
		                       NULL) != SQLITE_OK) {
			sc_log_error("store: %s", sqlite3_errmsg(q->db));
			return SC_EIO;
		}
	return 0;
}

int sc_store_sqlite_open(const char *dir, sc_store_t **out)
{
	return sc_store_sqlite_open_mode(dir, 0, out);
}

int sc_store_sqlite_open_mode(const char *dir, int readonly, sc_store_t **out)
{
	char path[4096];
	struct stat fst;
	int rc = SC_EIO;
	sqlite_store_t *q = sc_calloc(1, sizeof(*q));
	if (!q)
		return SC_ENOMEM;
	q->base.ops = &sqlite_ops;
	q->log_keep = LOG_KEEP;
	q->compact_every = COMPACT_EVERY;
	q->walfd = -1;
	if (readonly) {
		/* A reader never creates: a mistyped path is an error, not an
		 * empty store. */
		if ((size_t)snprintf(path, sizeof(path), "%s/store.db", dir) >= sizeof(path) ||
		    stat(path, &fst) < 0 || !S_ISREG(fst.st_mode)) {
			fprintf(stderr, "store: no store at %s (expected %s/store.db)\n", dir, dir);
			rc = SC_ENOTFOUND;
			goto error;
		}
	} else if (mkdir(dir, 0700) < 0) {
		struct stat st;
		if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
			sc_log_error("store: cannot create data directory %s", dir);
			goto error;
		}
	}
	snprintf(q->walpath, sizeof(q->walpath), "%s/store.db-wal", dir);
	if ((size_t)snprintf(path, sizeof(path), "%s/store.db", dir) >= sizeof(path)) {
		rc = SC_EINVAL;
		goto error;
	}
	if (sqlite3_open(path, &q->db) != SQLITE_OK) {
		sc_log_error("store: cannot open %s: %s", path, sqlite3_errmsg(q->db));
		goto error;
	}
	sqlite3_busy_timeout(q->db, 5000);
	/* A reader leaves the WAL to its server, even when it is the last
	 * connection to close. */
	if (readonly)
		sqlite3_db_config(q->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	/* WAL + NORMAL + sq_sync before acknowledging: see the top of the file;
	 * WAL also lets readers (backups, sqlite3 CLI) run alongside. */
	if (exec(q->db, "PRAGMA journal_mode=WAL") < 0 ||
	    exec(q->db, "PRAGMA synchronous=NORMAL") < 0 ||
	    exec(q->db, "PRAGMA wal_autocheckpoint=" SC_STR(WAL_PAGES)) < 0 ||
	    exec(q->db, "PRAGMA journal_size_limit=" SC_STR(WAL_KEEP_BYTES)) < 0 ||
	    (rc = sc_pack_init(&q->pk, q->db)) < 0 ||
	    (rc = q->base.schema = migrate(q->db, path, readonly)) < 0 || prepare_all(q) < 0 ||
	    (readonly && exec(q->db, "PRAGMA query_only=1") < 0)) {
		rc = rc < 0 ? rc : SC_EIO;
		goto error;
	}
	q->rev = query_int(q->db, "SELECT value FROM meta WHERE name = 'revision'", 0);
	q->compacted = query_int(q->db, "SELECT value FROM meta WHERE name = 'compacted'", 0);
	/* One pass over the current values: the byte bound follows them. */
	q->live_bytes = query_int(q->db,
	                          "SELECT coalesce(sum(sc_rawlen(c.value)), 0) FROM kv k"
	                          " JOIN changes c ON c.id = k.change",
	                          0);
	*out = &q->base;
	return 0;
error:
	sq_close(&q->base);
	return rc;
}

void sc__sqlite_log_bytes(sc_store_t *s, int64_t max)
{
	((sqlite_store_t *)s)->log_max = max;
}

void sc__sqlite_log_window(sc_store_t *s, int64_t keep, int64_t every)
{
	sqlite_store_t *q = (sqlite_store_t *)s;
	q->log_keep = keep > 0 ? keep : LOG_KEEP;
	q->compact_every = every > 0 ? every : COMPACT_EVERY;
}

int64_t sc__sqlite_changes(sc_store_t *s)
{
	return query_int(((sqlite_store_t *)s)->db, "SELECT count(*) FROM changes", -1);
}
