/* Storage interface of the control plane.
 *
 * A key-value store of JSON documents with one global, monotonically
 * increasing revision (etcd's model): every committed transaction gets the
 * next revision, each key remembers the revision that created it and the one
 * that last changed it, and a change log lets a watcher resume from any
 * revision still in the log. The server speaks only to this interface, so a
 * backend (embedded SQLite now, etcd later) is a table of function pointers
 * (sc_store_ops_t) behind an opaque handle.
 *
 * Durability: a write is committed (visible, and safe from a crash of the
 * process) when txn returns; it is on disk (safe from power loss) after
 * the next sync. The server acknowledges writes only after a sync, and
 * syncs once per event-loop iteration for every write of that iteration
 * (group commit: one fsync for many writes).
 *
 * Threading: a store is used from one thread (the daemon's event loop);
 * watch callbacks run on it, inside the write that caused them (SQLite) or
 * from sc_store_dispatch (etcd, whose changes arrive over the network).
 *
 * Waiting: the blocking calls below wait for the storage. A daemon's event
 * loop uses the asynchronous calls instead (sc_store_txn_async and
 * sc_store_ping_async): a backend that waits on the network (etcd) runs
 * them on a thread of its own, one at a time in the order they were made,
 * and the loop gets each result from sc_store_dispatch. */
#ifndef SC_STORE_STORE_H
#define SC_STORE_STORE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sc_store sc_store_t;
typedef struct sc_store_watch sc_store_watch_t;
typedef struct sc_store_call sc_store_call_t;

typedef struct sc_kv {
	char *key;   /* owned */
	char *value; /* owned JSON text */
	int64_t create_rev;
	int64_t mod_rev;
} sc_kv_t;

typedef struct sc_kv_list {
	sc_kv_t *items; /* owned, sorted by key */
	size_t n;
	int64_t rev; /* store revision the list was read at */
} sc_kv_list_t;

enum sc_store_op_type { SC_STORE_PUT = 0, SC_STORE_DELETE };

/* Conditions on a key's mod_rev for writes. */
#define SC_REV_ANY (-1) /* no condition */
#define SC_REV_ABSENT 0 /* the key must not exist (create) */

typedef struct sc_store_op {
	int type;           /* enum sc_store_op_type */
	const char *key;    /* borrowed */
	const char *value;  /* borrowed; PUT only */
	int64_t expect_rev; /* SC_REV_ANY, SC_REV_ABSENT, or the mod_rev required */
} sc_store_op_t;

enum sc_event_type { SC_EV_ADDED = 0, SC_EV_MODIFIED, SC_EV_DELETED };

typedef struct sc_store_event {
	int type; /* enum sc_event_type */
	const char *key;
	const char *value; /* new value; for DELETED the last value */
	int64_t rev;       /* revision of the change */
} sc_store_event_t;

/* Called for each change; ev is borrowed for the call. */
typedef void (*sc_store_watch_fn)(const sc_store_event_t *ev, void *ud);

/* What a backend tells about its own upkeep (/metrics). */
typedef struct sc_store_stats {
	int64_t live_bytes; /* current values */
	int64_t log_bytes;  /* the change log, past the current values (approximate) */
	int64_t compacted;  /* revision the log is compacted up to */
	uint64_t compactions, compacted_rows;
	double compaction_seconds; /* spent compacting, in total */
} sc_store_stats_t;

typedef struct sc_store_ops {
	const char *name;
	/* Fills out (NULL: the backend keeps none of these figures). */
	int (*stats)(sc_store_t *s, sc_store_stats_t *out);
	/* Reads one key. SC_ENOTFOUND when absent. out is owned by the caller. */
	int (*get)(sc_store_t *s, const char *key, sc_kv_t *out);
	/* Reads every key starting with prefix. */
	int (*list)(sc_store_t *s, const char *prefix, sc_kv_list_t *out);
	/* Applies ops atomically at one new revision (*rev), or none of them:
	 * SC_ECONFLICT when a condition fails (*failed = its index), SC_EIO on
	 * a storage error. Deleting an absent key is SC_ENOTFOUND. */
	int (*txn)(sc_store_t *s, const sc_store_op_t *ops, size_t n, int64_t *rev, size_t *failed);
	/* Changes with revision > from_rev, from the log, in order, then live.
	 * SC_ERANGE when from_rev is older than the log keeps. */
	int (*replay)(sc_store_t *s, const char *prefix, int64_t from_rev, sc_store_watch_fn fn,
	              void *ud);
	int64_t (*revision)(sc_store_t *s);
	/* Makes every committed write durable (fsync); cheap when none is new. */
	int (*sync)(sc_store_t *s);
	/* Tries a small durable write of the backend's own (nothing a reader
	 * sees): 0 when the storage takes writes again (NULL: always). */
	int (*probe)(sc_store_t *s);
	/* sync in two halves, for a caller that waits for the disk off its
	 * thread (NULL: sync does both). commit: every write taken so far goes
	 * where a flush makes it durable; flush_fd: a new descriptor whose
	 * fdatasync does that (the caller closes it), or -1 when no committed
	 * write waits for one. */
	int (*commit)(sc_store_t *s);
	int (*flush_fd)(sc_store_t *s);
	void (*close)(sc_store_t *s);
	/* Asynchronous calls (NULL: the generic code runs the blocking call
	 * and the callback at once). submit takes the call. */
	void (*submit)(sc_store_t *s, sc_store_call_t *c);
	int (*poll_fd)(sc_store_t *s);
	void (*dispatch)(sc_store_t *s);
	void (*drain)(sc_store_t *s);
} sc_store_ops_t;

/* The part every backend starts with. */
struct sc_store {
	const sc_store_ops_t *ops;
	struct sc_store_watch *watchers;
	int schema; /* the layout version the backend found or migrated to */
	/* Set by the backend each time writes it had taken were undone before
	 * they were durable (a failed commit): whoever holds state derived
	 * from them (the server's cache) must read the store again. */
	unsigned long rollbacks;
	int refuse; /* < 0: every write fails with it (sc_store_refuse_writes) */
};

/* ---- generic calls (dispatch to the backend) ---- */
int sc_store_get(sc_store_t *s, const char *key, sc_kv_t *out);
int sc_store_list(sc_store_t *s, const char *prefix, sc_kv_list_t *out);
/* PUT with a condition (SC_REV_ANY / SC_REV_ABSENT / a mod_rev). */
int sc_store_put(sc_store_t *s, const char *key, const char *value, int64_t expect_rev,
                 int64_t *rev);
int sc_store_delete(sc_store_t *s, const char *key, int64_t expect_rev, int64_t *rev);
int sc_store_txn(sc_store_t *s, const sc_store_op_t *ops, size_t n, int64_t *rev, size_t *failed);
int64_t sc_store_revision(sc_store_t *s);
/* Makes committed writes durable; 0, SC_EIO or SC_ENOSPACE. On failure the
 * writes since the last sync may have been undone (s->rollbacks grows)
 * or, when the data reached the file but not the disk, kept. */
int sc_store_sync(sc_store_t *s);
/* sync in two halves (store_sqlite: COMMIT on this thread, the fsync on
 * any): sc_store_commit, then fdatasync(sc_store_flush_fd()) on any thread
 * makes every write taken before the commit durable; SC_EIO or
 * SC_ENOSPACE from the commit as from sc_store_sync. flush_fd is -1 when
 * nothing waits (then everything committed is durable already). */
int sc_store_commit(sc_store_t *s);
int sc_store_flush_fd(sc_store_t *s);
/* While rc < 0, every write fails with rc at once, touching nothing (the
 * server stops writing to a full disk); 0 takes writes again. */
void sc_store_refuse_writes(sc_store_t *s, int rc);
/* A small durable write of the backend's own: 0 when the storage takes
 * writes again, else why not. */
int sc_store_probe(sc_store_t *s);
/* Streams changes under prefix after from_rev (replayed from the log), then
 * every later change until sc_store_unwatch. *out is owned by the store. */
int sc_store_watch(sc_store_t *s, const char *prefix, int64_t from_rev, sc_store_watch_fn fn,
                   void *ud, sc_store_watch_t **out);
void sc_store_unwatch(sc_store_t *s, sc_store_watch_t *w);
/* Calls fn for each change under prefix after from_rev still in the log,
 * in order, and returns (no live changes). SC_ERANGE when from_rev is
 * older than the log keeps. */
int sc_store_replay(sc_store_t *s, const char *prefix, int64_t from_rev, sc_store_watch_fn fn,
                    void *ud);
/* The backend's figures; SC_ENOTFOUND when it keeps none. */
int sc_store_stats(sc_store_t *s, sc_store_stats_t *out);
/* Closes the store; accepts NULL. */
void sc_store_close(sc_store_t *s);

void sc_kv_free(sc_kv_t *kv);
void sc_kv_list_free(sc_kv_list_t *l);

/* ---- asynchronous calls (for a daemon's event loop) ----
 * The result comes to fn on the loop thread: at once, before the call
 * returns, with a local backend (SQLite); from sc_store_dispatch with
 * one that waits on the network (etcd), in the order the calls were made.
 * Either way, when fn runs the store's watchers have seen every change up
 * to the revision the call observed (a write's own, or the one that made
 * its condition fail), so state a watch keeps (the server's cache) shows
 * the write, or what refused it, as with a blocking call on SQLite, whose
 * watchers run inside the write. If the watch does not get there within
 * SC_STORE_WATCH_WAIT_MS the result is delivered anyway (the write is
 * committed; the cache catches up later).
 *
 * Every call gets its callback exactly once: sc_store_drain and
 * sc_store_close fail the calls not yet answered with SC_EUNAVAIL rather
 * than drop them, so a caller may keep memory in ud until fn runs. */
#define SC_STORE_WATCH_WAIT_MS 2000

typedef struct sc_store_res {
	int rc;        /* 0 or a negative SC_E* code, as from the blocking call */
	int64_t rev;   /* txn: the write's revision; ping: the store's */
	size_t failed; /* txn: the op whose condition failed */
} sc_store_res_t;

/* res is borrowed for the call. */
typedef void (*sc_store_done_fn)(const sc_store_res_t *res, void *ud);

/* A call in flight (a backend's business; declared for sc_store_ops_t). */
struct sc_store_call {
	struct sc_store_call *next;  /* the backend's queues */
	struct sc_store_call *fnext; /* the loop's list, in call order */
	int kind;                    /* enum sc_store_call_kind */
	sc_store_op_t *ops;          /* owned copies (txn) */
	size_t n;
	int64_t fence;                        /* backend's: the fence when the call was made */
	int finished;                         /* set by the backend's thread */
	int64_t wait_rev;                     /* the result waits until the watch got here */
	uint64_t deadline;                    /* ... or this monotonic ms */
	void (*run)(sc_store_t *s, void *ud); /* SC_STORE_CALL_RUN: on the thread */
	sc_store_res_t res;
	sc_store_done_fn fn;
	void *ud;
};

enum sc_store_call_kind { SC_STORE_CALL_TXN = 0, SC_STORE_CALL_PING, SC_STORE_CALL_RUN };

/* Applies ops (copied, with the strings they point to) as sc_store_txn. */
void sc_store_txn_async(sc_store_t *s, const sc_store_op_t *ops, size_t n, sc_store_done_fn fn,
                        void *ud);
/* Asks whether the store answers now (etcd: a read that needs a quorum);
 * res->rev is its revision. */
void sc_store_ping_async(sc_store_t *s, sc_store_done_fn fn, void *ud);
/* Runs run(s, ud) where the backend's blocking calls may wait (etcd: its
 * calls thread, where the blocking calls of store_etcd.h are safe), then
 * fn(res, ud) on the loop thread (res->rc 0, or SC_EUNAVAIL when the store
 * closed first and run never ran). SQLite: both at once. */
void sc_store_run_async(sc_store_t *s, void (*run)(sc_store_t *s, void *ud), sc_store_done_fn fn,
                        void *ud);
/* A descriptor that becomes readable when results or changes wait for
 * sc_store_dispatch; -1 when the backend has none (everything happens at
 * once). */
int sc_store_poll_fd(sc_store_t *s);
/* Loop thread: delivers the changes and results that arrived; call it
 * when the descriptor is readable and at least every 250 ms (results
 * waiting for the watch time out by the clock). */
void sc_store_dispatch(sc_store_t *s);
/* Waits until every call made so far has been answered and delivers the
 * results (blocking: for shutdown). */
void sc_store_drain(sc_store_t *s);

/* For backends: a monotonic clock in nanoseconds. */
uint64_t sc__store_now_ns(void);
/* For backends: deliver a committed change to the live watchers. */
void sc__store_notify(sc_store_t *s, const sc_store_event_t *ev);

/* ---- backends: store_sqlite.h, store_etcd.h ---- */

#endif
