/* Internals of the scheduling loop (sched.c, sched_feed.c, sched_world.c,
 * sched_plan.c, sched_write.c).
 *
 * The loop keeps the core's snapshot between cycles (the world, owned by
 * the cycle's worker thread) and brings it up to date from the changes the
 * object cache reports (the feed, on the loop thread), as kube-scheduler's
 * cache and KAI's snapshot do:
 *
 *   loop thread   the cache reports each changed object; the feed keeps
 *                 its key. A cycle starts with the changes since the last
 *                 one (copies of their stored text: O(changes), nothing
 *                 parsed), never with every object.
 *   worker        the world applies the changes: each changed object is
 *                 decoded once (or its decoding is taken from the API's
 *                 validation, or kept when what the decoder reads did not
 *                 change), references between objects are checked for the
 *                 objects they concern, and the snapshot's arrays are
 *                 refreshed; sc_scheduler_run(); the plan turns decisions
 *                 into job statuses and events, status text ready to store.
 *   loop thread   the plan is committed in batches of bounded time, each
 *                 put conditional on the revision the world read; an API
 *                 write that came in meanwhile drops that put (its change
 *                 brings the job to the next cycle).
 *
 * Nothing on the loop thread walks every object. */
#ifndef SC_SERVER_SCHED_INT_H
#define SC_SERVER_SCHED_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "server/metrics.h"
#include "server/server.h"
#include "starcloud/core.h"
#include "starcloud/manifest.h"

/* Annotation set by a drain: the node is cordoned and the loop evicts the
 * jobs that run on it. */
#define SC_DRAIN_ANNOTATION "starcloud.dev/drain"
/* Set by the node pool controller on a node it empties before deleting it
 * (pool.h): the loop evicts the pods there one by one, not whole jobs. */
#define SC_SCALEDOWN_ANNOTATION "starcloud.dev/scale-down"
/* A node's state for the loop: drained (its jobs evicted whole), or being
 * emptied by its pool (its pods evicted one by one). */
enum { SC_DRAINED_NO = 0, SC_DRAINED_DRAIN, SC_DRAINED_SCALEDOWN };
/* Events kept in the store; older ones are deleted in batches. */
#define SC_EVENT_LIMIT 1000

/* The kinds the scheduler reads, in the order the snapshot lists them (the
 * decoder keeps input order, which breaks ties between equal jobs). */
enum {
	SC_RANK_NODE = 0,
	SC_RANK_QUEUE,
	SC_RANK_CLASS,
	SC_RANK_JOB,
	SC_RANK_DEPLOY,
	/* The cluster's SchedulerConfig and Topology (at most one each,
	 * "default"): not decoded one by one, but read together into the
	 * snapshot's config whenever either changes, as `schedule -f` reads
	 * them from a file. */
	SC_RANK_CONFIG,
	SC_RANK_TOPOLOGY,
	SC_RANKS
};

/* ---- sched_feed.c: changes, loop thread -> worker ---- */

/* One changed object. */
typedef struct sc_change {
	int rank;
	char *key; /* owned */
	int64_t mod_rev;
	char *text; /* one reference (base/rtext.h, shared with the cache): the
	             * stored value at mod_rev; NULL: deleted */
	/* Owned, or NULL: this revision decoded by the API's validation,
	 * and its view's digest. */
	sc_manifest_obj_t *pre;
	uint64_t pre_vh[2];
	/* Set when the world decoded it ahead (a full load, on several
	 * threads): pre or why is the decoding, the node fields its extras. */
	bool prepared;
	char *why;
	char *address;
	int drained; /* SC_DRAINED_* */
	/* A job whose stored status is a plain pending one (the loop's own
	 * words: phase Pending, this reason, no pods): the plan takes it as
	 * settled instead of building it again. Owned, or NULL. */
	char *plain_reason;
} sc_change_t;

typedef struct sc_changes {
	sc_change_t *v;
	size_t n, cap;
	/* The world starts over from these (the first cycle, or after the
	 * cache read the store again): objects not listed are gone. */
	bool full;
} sc_changes_t;

typedef struct sc_feed sc_feed_t;
/* Follows s->cache; the first take is a full one. */
sc_feed_t *sc__feed_new(sc_server_t *s);
void sc__feed_free(sc_feed_t *f);
/* Changes noted since the last take that call for a cycle (the loop's own
 * writes, noted between sc__feed_quiet(f, true) and (f, false), are taken
 * by the next cycle but call for none). */
size_t sc__feed_pending(const sc_feed_t *f);
void sc__feed_quiet(sc_feed_t *f, bool on);
/* The loop is writing key: its next change is the loop's own and calls
 * for no cycle (with etcd it arrives after the call that made it). Until
 * sc__feed_own_end(f, key), when the write was answered. */
void sc__feed_own(sc_feed_t *f, const char *key);
void sc__feed_own_end(sc_feed_t *f, const char *key);
/* An API write of key was answered (stored or refused): sc__feed_own_end,
 * and a change of key noted meanwhile calls for a cycle. */
void sc__feed_writer_done(sc_feed_t *f, const char *key);
/* Hands the changes since the last take to out (emptied first) and starts
 * a new batch. */
void sc__feed_take(sc_feed_t *f, sc_changes_t *out);
void sc__changes_free(sc_changes_t *c);

/* ---- sched_world.c: the kept snapshot, worker thread ---- */

/* One object of the world. */
typedef struct sc_wobj {
	int rank;
	char *key;        /* owned: /registry/<plural>/<name> */
	const char *name; /* into key */
	int64_t mod_rev;
	char *text;             /* one reference (base/rtext.h): the stored value at mod_rev */
	uint64_t vh[2];         /* digest of the decoder's view of text, when vh_ok */
	bool vh_ok;             /* vh known (made when first needed) */
	sc_manifest_obj_t *dec; /* owned: the view decoded; NULL when refused */
	char *dec_why;          /* owned: the decoder's refusal, or NULL */
	char *ref_why;          /* owned: a reference that does not hold, or NULL */
	char *address;          /* node: status.address, or NULL (deployment ports) */
	int drained;            /* node: SC_DRAINED_* */
	long slot;              /* index in the snapshot's array of its kind, or -1 */
	/* The status the plan wrote last (sched_plan.c), promised until the
	 * change that stores it comes back: its text, digest and decoding are
	 * then taken as they are, without parsing the text again. */
	char *promise;
	uint64_t pvh[2];
	bool pvh_ok;
	sc_manifest_obj_t *pdec; /* owned, or NULL: the view did not change */
	/* Status bookkeeping (sched_plan.c). settled: this revision's stored
	 * status is what the plan would write while the same inputs hold (no
	 * decision for the job, the same reasons, the same drained nodes). */
	bool settled, settled_pending;
	uint64_t settled_drain;
	char *settled_why, *settled_reason; /* owned copies, or NULL */
	int64_t reason_at;                  /* when a pending reason was last written (seconds) */
} sc_wobj_t;

typedef struct sc_world sc_world_t;
sc_world_t *sc__world_new(void);
void sc__world_free(sc_world_t *w);
/* Applies changes (their texts and decodings are taken); *decoded counts
 * objects the decoder ran for. Then checks references where something
 * they depend on changed and refreshes the snapshot's arrays. */
void sc__world_apply(sc_world_t *w, sc_changes_t *c, size_t *decoded);
/* The snapshot of the world at now (borrowed; valid until the next
 * apply). */
const sc_snapshot_t *sc__world_snapshot(sc_world_t *w, int64_t now);
/* Leaves an object out after the core refused the snapshot because of it
 * (msg: the core's message); returns 1 when one was found. */
int sc__world_exclude(sc_world_t *w, const char *msg);
/* Changes whenever the snapshot's content may have changed (its arrays or
 * config rebuilt): decisions taken at one generation hold for the same
 * snapshot until it changes, but for the time rules. */
uint64_t sc__world_gen(const sc_world_t *w);
/* Objects of one rank in key order (borrowed). */
sc_wobj_t *const *sc__world_objs(const sc_world_t *w, int rank, size_t *n);
/* Hash of the drained nodes' names; 0 when none. */
uint64_t sc__world_drain_hash(const sc_world_t *w);
/* The drained nodes' names -> true, and those a pool empties ->
 * "scale-down" (new reference). */
json_t *sc__world_drained(const sc_world_t *w);
/* Bytes the world holds (texts, decodings, arrays), for metrics. */
size_t sc__world_bytes(const sc_world_t *w);
/* Digest of a decoder view (for the plan's promises). */
void sc__view_digest(json_t *view, uint64_t out[2]);
/* The view of o's kind that the decoder reads (new reference). */
json_t *sc__world_view(int rank, json_t *obj);

/* ---- sched_plan.c: decisions -> writes, worker thread ---- */

/* What a written cycle decided, for metrics and the loop. */
typedef struct sc_cycle_out {
	size_t placements;
	size_t evictions[SC_ACT_COUNT];
	size_t drained; /* pods evicted because their node is drained */
	size_t pending;
	size_t events;   /* events created */
	size_t writes;   /* objects written */
	size_t deferred; /* pending-reason updates left for a later cycle */
	size_t decoded;  /* statuses decoded as written (their pods changed) */
	bool releasing;  /* pods are Releasing: run again soon */
	bool released;   /* Releasing pods were removed: their resources are free */
	double *waits;   /* seconds from creation to first placement; owned */
	size_t nwaits;
	int64_t next_due; /* when a time rule may decide otherwise (0: none known) */
	/* Compaction's moves: GPUs they released on the nodes they left, and
	 * the run time they cost (GPU-seconds, as the action counts it). */
	double compaction_gpus, compaction_lost_gpu_s;
} sc_cycle_out_t;

/* One put of the plan. */
typedef struct sc_put {
	char *key;      /* owned */
	char *value;    /* owned */
	int64_t expect; /* the revision read, or SC_REV_ABSENT (events) */
	/* Owned, or NULL: value decoded as the loop would, for the cache. */
	sc_manifest_obj_t *pre;
	bool evicts;          /* it turns a pod Releasing */
	bool pipelined;       /* it binds onto resources still being released */
	bool event;           /* an Event, named at commit */
	const char *involved; /* event: the object's name (in value's json) */
} sc_put_t;

typedef struct sc_cycle_plan {
	sc_put_t *v;
	size_t n, cap;
	json_t *events;     /* new Event objects, unnamed */
	size_t done;        /* puts committed or dropped so far */
	bool named;         /* events named and appended to v */
	bool dropped_evict; /* an eviction was dropped: drop pipelined bindings */
	bool dropped;       /* a put was dropped: decide again soon */
	/* The part in flight (sched_write.c): its puts' indexes in v, and
	 * where the next part starts once it is written. */
	size_t *part_idx;
	size_t part_n, part_end;
} sc_cycle_plan_t;

/* Cluster figures for /metrics, computed by the cycle from its snapshot. */
typedef struct sc_cycle_gauges {
	double gpus, allocated;
	char *state;             /* owned: exposition lines (nodes' readiness, GPUs) */
	sc_queue_wait_t *queues; /* owned: each leaf queue's oldest waiting job */
	size_t nqueues;
} sc_cycle_gauges_t;

/* Worker: turns the decisions d taken on the world's snapshot into the
 * cycle's writes p (job statuses, new events). pool_waits: job name ->
 * status.waitingFor from the node pools' plans (pool.h), or NULL.
 * agent_pods: the cycle's copy of the server's (server.h), or NULL. */
int sc__cycle_plan(sc_world_t *w, const sc_snapshot_t *snap, const sc_decisions_t *d,
                   json_t *pool_waits, json_t *agent_pods, sc_cycle_plan_t *p, sc_cycle_out_t *out);
void sc__cycle_plan_free(sc_cycle_plan_t *p);
/* Worker: the gauges of /metrics from the snapshot and decisions. */
void sc__cycle_gauges(sc_world_t *w, const sc_snapshot_t *snap, const sc_decisions_t *d,
                      sc_cycle_gauges_t *g);
/* A pending job's status fields in events: "Pending" events are made only
 * when a job becomes pending, and folded per queue past a burst. */
#define SC_EVENT_BURST 10

/* ---- sched_move.c: what the plan asks of the agents' heartbeats ---- */

/* The number of node's heartbeats the server had taken when the cycle
 * started (0 when none). */
json_int_t sc__move_heartbeats(json_t *agent_pods, const char *node);
/* Whether pod entry e of object kind/job is a move whose old node
 * (e.from.node) may still run the pod, or be stopping it: no heartbeat of
 * it came after the move was decided (e.from.seen), or the last one listed
 * the pod. */
bool sc__move_still_on_old_node(json_t *agent_pods, const char *kind, const char *job, json_t *e);
/* Nodes (-> true; new reference) whose agent still runs or stops a pod
 * that the store does not have Running there (evicted, moved, of a deleted
 * job): its devices are not free yet, so a pod bound there waits
 * (Pipelined). Fills listed with every pod an agent lists ("Kind/job/pod"
 * -> its node): a pod bound elsewhere waits for that node too. */
json_t *sc__move_busy_nodes(const sc_world_t *world, const sc_snapshot_t *snap, json_t *agent_pods,
                            json_t *listed);

/* ---- sched_write.c: commit, loop thread ---- */

/* Starts the next part of p: one store transaction of the puts still
 * valid, as many as budget_ms of preparing lets through. Returns 1 when it
 * was started (fn(res, ud) comes on the loop thread when the store has
 * answered: at once with SQLite, later with etcd; then call
 * sc__cycle_part_done), 2 when this part had nothing left to write but
 * puts remain, 0 when the plan is done (fn is not called then). The
 * changes the puts make reach the feed as the loop's own (sc__feed_own). */
int sc__cycle_commit(sc_server_t *s, sc_feed_t *f, sc_cycle_plan_t *p, double budget_ms,
                     sc_store_done_fn fn, void *ud);
/* In fn: takes the part's outcome. 1 when puts remain, 0 when the plan is
 * done, or < 0 (a store error). A put the store refused is dropped (its
 * object's change is in the feed) and the part sent again. */
int sc__cycle_part_done(sc_feed_t *f, sc_cycle_plan_t *p, const sc_store_res_t *res);
/* Starts deleting the oldest events beyond SC_EVENT_LIMIT (not waited
 * for); returns how many will be left. */
long sc__events_trim(sc_server_t *s);

/* ---- sched.c ---- */
/* The last cycle's figures of one queue (core units), for explain. */
const sc_queue_report_t *sc__sched_queue(sc_server_t *s, const char *name);

#endif
