/* The etcd v3 backend of the store, and the leases and leader key the
 * control plane's high availability is built on (docs/HA.md).
 *
 * Keys: a store key "/registry/jobs/x" is the etcd key
 * "<prefix>registry/jobs/x" (prefix default "/starcloud/"); the leader key
 * is "<prefix>leader" and is never listed or watched as data. Values are
 * the JSON text unchanged; a key's mod_rev is etcd's mod_revision, so
 * resourceVersion is the etcd revision.
 *
 * Writes: one /v3/kv/txn per sc_store_txn, every condition a compare on
 * create_revision or mod_revision. While a fence is set
 * (sc_store_etcd_fence), every txn also compares the leader key's
 * mod_revision, so the writes of a leader that lost its lease fail with
 * SC_EFENCED whatever it believes.
 *
 * Changes: a thread keeps one etcd watch on the prefix and queues what it
 * receives; the loop thread dispatches them to the store's watchers when
 * the fd of sc_store_poll_fd becomes readable (sc_store_dispatch). Replays
 * are served from the events seen since the store was opened (older:
 * SC_ERANGE).
 *
 * Threading: as every store, used from one thread. Two threads of the
 * backend's wait for etcd instead of it: the watch thread, which only
 * fills the queue, and the calls thread, which runs the asynchronous calls
 * (store.h) and every blocking call made once it runs. sc_store_revision
 * makes no call: it is the newest revision this store has seen. */
#ifndef SC_STORE_STORE_ETCD_H
#define SC_STORE_STORE_ETCD_H

#include <stdint.h>

#include "store/store.h"

#define SC_ETCD_DEFAULT_PREFIX "/starcloud/"
#define SC_ETCD_LAT_BUCKETS 12

/* Client-side figures for /metrics. */
typedef struct sc_etcd_stats {
	uint64_t calls;
	uint64_t errors;    /* calls that failed (transport or etcd error) */
	uint64_t failovers; /* switches to another endpoint */
	uint64_t fenced;    /* txns refused because the fence moved */
	uint64_t refused;   /* calls failed at once: breaker open */
	uint64_t blocking;  /* blocking calls a thread waited for while the calls thread ran */
	uint64_t pending;   /* asynchronous calls not answered yet */
	uint64_t lat[SC_ETCD_LAT_BUCKETS + 1]; /* by sc_etcd_lat_bounds, +Inf */
	double lat_sum;
} sc_etcd_stats_t;

/* Upper bounds (seconds) of the latency buckets. */
extern const double sc_etcd_lat_bounds[SC_ETCD_LAT_BUCKETS];

/* Opens the store on "host:port[,host:port...]" under prefix (borrowed;
 * must start and end with '/'). SC_EUNAVAIL when no endpoint answers.
 * readonly: for a reader such as a backup, which must not migrate the
 * store under running servers (see sc__etcd_schema_open); the caller
 * then only reads. */
int sc_store_etcd_open_mode(const char *endpoints, const char *prefix, int readonly,
                            sc_store_t **out);
/* 1 when s is an etcd store. */
int sc_store_is_etcd(sc_store_t *s);
/* A copy of the client-side figures. */
void sc_store_etcd_stats(sc_store_t *s, sc_etcd_stats_t *out);
/* 1 while calls fail at once because etcd stopped answering (the
 * breaker of etcd_int.h is open); any thread. */
int sc_store_etcd_down(sc_store_t *s);
/* A probe for another thread: its own connection to the same endpoints,
 * asking for a linearizable read (which needs a quorum). Made and freed on
 * the loop thread; sc_etcd_probe_run may block for SC_ETCD_ANSWER_MS. */
typedef struct sc_etcd_probe sc_etcd_probe_t;
sc_etcd_probe_t *sc_store_etcd_probe_new(sc_store_t *s);
/* 0 when etcd answered (with a quorum behind it). */
int sc_etcd_probe_run(sc_etcd_probe_t *p);
void sc_etcd_probe_free(sc_etcd_probe_t *p);
/* The probe saw etcd answer: calls go to etcd again. */
void sc_store_etcd_up(sc_store_t *s);
/* Sets (mod_rev > 0) or clears (0) the fence on the leader key. */
void sc_store_etcd_fence(sc_store_t *s, int64_t leader_mod_rev);

/* ---- leases and the leader key (etcd_lease.c) ----
 * Blocking calls: a daemon's loop makes them inside sc_store_run_async,
 * on the calls thread. */
int sc_etcd_lease_grant(sc_store_t *s, int64_t ttl_s, int64_t *id);
/* Renews a lease; *ttl_left is 0 (and SC_ENOTFOUND returned) when it is gone. */
int sc_etcd_lease_keepalive(sc_store_t *s, int64_t id, int64_t *ttl_left);
int sc_etcd_lease_revoke(sc_store_t *s, int64_t id);
/* Tries to become leader: creates the leader key with value (borrowed)
 * under lease id if no one holds it. Returns 1 and the key's mod_rev when
 * we hold it (now or already), 0 when another does (*holder: its value,
 * malloc'd, may be NULL), or a negative SC_E* code. */
int sc_etcd_campaign(sc_store_t *s, int64_t lease, const char *value, int64_t *mod_rev,
                     char **holder);
/* Deletes the leader key if it still is ours (mod_rev). */
int sc_etcd_resign(sc_store_t *s, int64_t mod_rev);

#endif
