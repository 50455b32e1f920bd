/* Internals of the scheduling loop (sched.c, sched_load.c, sched_write.c).
 *
 * A cycle is: take every cached node, queue, priority class, job and
 * deployment (loop thread, references only) -> on a worker thread, decode
 * them with the manifest decoder into a snapshot, sc_scheduler_run(), and
 * turn the decisions into new job statuses and events -> back on the loop
 * thread, write them in one store transaction that is conditional on the
 * revisions read (sched_write.c). */
#ifndef SC_SERVER_SCHED_INT_H
#define SC_SERVER_SCHED_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "server/server.h"
#include "starcloud/core.h"
#include "starcloud/manifest.h"

/* Annotation set by a drain: the node is cordoned and the loop evicts the
 * jobs that run on it. */
#define SC_DRAIN_ANNOTATION "starcloud.dev/drain"
/* Set by the node pool controller on a node it empties before deleting it
 * (pool.h): the loop evicts the pods there one by one, not whole jobs. */
#define SC_SCALEDOWN_ANNOTATION "starcloud.dev/scale-down"
/* Events kept in the store; older ones are deleted in batches. */
#define SC_EVENT_LIMIT 1000

/* One stored object read by a cycle. */
typedef struct sc_sobj {
	const sc_kind_t *kind;
	char *key;   /* owned */
	json_t *obj; /* owned, as stored (no resourceVersion) */
	int64_t mod_rev;
	char *why; /* owned: why the object is left out of the snapshot */
	long job;  /* index into the snapshot's jobs, or -1 */
	/* Owned, or NULL: this revision already decoded by the API's
	 * validation (cache.h), taken over by the decode cache. */
	sc_manifest_set_t *pre;
} sc_sobj_t;

/* Everything a cycle read, and the snapshot built from it. */
typedef struct sc_cycle_in {
	sc_sobj_t *objs; /* owned, in kind order then key order */
	size_t nobjs;
	sc_manifest_set_t *set; /* owns what snap points to */
	sc_snapshot_t snap;
	sc_sobj_t **job_obj; /* snap.jobs[i] -> its object; owned array */
	int64_t now;
	size_t decoded; /* objects decoded by this cycle (new or changed) */
	/* Job name -> status.waitingFor (the node pools' plans), or NULL;
	 * borrowed from the cycle's pool plans (pool.h). */
	json_t *pool_waits;
	/* A copy of the server's agent_pods (server.h), owned, or NULL. */
	json_t *agent_pods;
} sc_cycle_in_t;

/* What a written cycle decided, for metrics and the loop. */
typedef struct sc_cycle_out {
	size_t placements;
	size_t evictions[SC_ACT_COUNT];
	size_t drained; /* pods evicted because their node is drained */
	/* Compaction's moves: GPUs they released on the nodes they left, and
	 * the run time they cost (GPU-seconds, as the action counts it). */
	double compaction_gpus, compaction_lost_gpu_s;
	size_t pending;
	size_t events;  /* events created */
	size_t writes;  /* objects written */
	bool releasing; /* pods are Releasing: run again soon */
	double *waits;  /* seconds from creation to first placement; owned */
	size_t nwaits;
} sc_cycle_out_t;

/* The writes a cycle decided: conditional puts of job statuses (texts
 * owned), and the new events (named at commit, when the revision is known). */
typedef struct sc_cycle_plan {
	sc_store_op_t *v;
	json_t **objs; /* objs[i]: v[i]'s value parsed (references), for the cache */
	char **owned;  /* keys and values to free */
	size_t n, cap, nowned, owncap;
	json_t *events; /* new Event objects, unnamed */
} sc_cycle_plan_t;

/* ---- sched_decode.c: decoded objects kept between cycles ---- */
typedef struct sc_decoded {
	int rank;  /* the kind's place in the cycle's order */
	char *key; /* owned */
	int64_t mod_rev;
	sc_manifest_set_t *one; /* owned: this object alone, decoded; NULL if refused */
	char *why;              /* owned: the decoder's refusal, or NULL */
	/* Owned reference: what the decoder read (sc__decoder_view or
	 * sc__deploy_view). A new revision with an equal view (a status write
	 * that changed only what the decoder sets aside, such as a pending
	 * reason) keeps this entry instead of being decoded again. */
	json_t *view;
	const char *queue; /* the view's spec.queue (borrowed from view), or NULL */
	/* Set by sched_write.c when this revision's status was found up to
	 * date; while the same inputs hold (no decision for the job, the same
	 * reasons, the same drained nodes) it is skipped without building it. */
	bool settled;
	bool settled_pending;   /* it counted as pending */
	uint64_t settled_drain; /* hash of the drained nodes' names */
	char *settled_why;      /* owned copies, or NULL */
	char *settled_reason;
} sc_decoded_t;
typedef struct sc_decode_cache sc_decode_cache_t;
sc_decode_cache_t *sc__decode_cache_new(void);
void sc__decode_cache_free(sc_decode_cache_t *dc);
/* Brings dc in line with in's objects (ranks[i] is the kind rank of
 * in->objs[i]): decodes only objects that are new or whose decoder view
 * changed (*decoded counts them), taking over an object's `pre` instead
 * of decoding it when there is one, and drops deleted ones. Afterwards sc__decoded(dc, i) is
 * in->objs[i]'s entry, valid until the next refresh. 0 or SC_ENOMEM. */
int sc__decode_refresh(sc_decode_cache_t *dc, sc_cycle_in_t *in, const int *ranks, size_t *decoded);
sc_decoded_t *sc__decoded(const sc_decode_cache_t *dc, size_t i);

/* ---- sched_load.c ---- */
/* Loop thread: takes references to every cached object the scheduler
 * reads (no parsing). */
void sc__cycle_collect(sc_server_t *s, int64_t now, sc_cycle_in_t *in);
/* Worker thread (touches only in and dc): builds the snapshot from the
 * decoded objects, decoding only what changed since the last cycle. in's
 * snapshot borrows from dc: free in before the next refresh of dc.
 * Objects the decoder refuses, or that the snapshot refuses (a job naming
 * a missing queue), are left out with the reason in their `why`, so one
 * bad object never stops the loop. Returns 0, SC_EINVAL or SC_ENOMEM. */
int sc__cycle_build(sc_cycle_in_t *in, sc_decode_cache_t *dc);
void sc__cycle_in_free(sc_cycle_in_t *in);

/* ---- sched_write.c ---- */
/* Worker thread (touches only its arguments): turns the decisions d taken
 * on in into the cycle's writes p (job statuses, new events); dc (refreshed
 * for in) remembers which jobs' statuses are up to date. */
int sc__cycle_plan(const sc_cycle_in_t *in, const sc_decisions_t *d, sc_decode_cache_t *dc,
                   sc_cycle_plan_t *p, sc_cycle_out_t *out);
/* Loop thread: names the events and starts the write of p in one
 * transaction, each job put conditional on the revision the cycle read;
 * fn(res, ud) comes on the loop thread when it is done (store.h: at once
 * with SQLite or when there is nothing to write; with etcd once etcd
 * answered, the loop going on meanwhile). p must live until then. */
void sc__cycle_commit(sc_server_t *s, sc_cycle_plan_t *p, sc_store_done_fn fn, void *ud);
/* In fn: the commit's outcome (0, or SC_ECONFLICT when an object changed
 * since: the caller runs the cycle again); hands the written objects to
 * the cache. */
int sc__cycle_committed(sc_server_t *s, sc_cycle_plan_t *p, const sc_store_res_t *res);
void sc__cycle_plan_free(sc_cycle_plan_t *p);
/* Starts deleting the oldest events beyond SC_EVENT_LIMIT (without
 * waiting for the store); returns how many will be left. */
long sc__events_trim(sc_server_t *s);
/* Formats t (seconds) as RFC 3339 UTC. */

/* ---- sched.c ---- */
/* The last cycle's figures of one queue (core units), for explain. */
const sc_queue_report_t *sc__sched_queue(sc_server_t *s, const char *name);

#endif
