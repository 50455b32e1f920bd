/* Internals of the scheduling loop (sched.c, sched_load.c, sched_write.c).
 *
 * A cycle is: load every node, queue, priority class, job and deployment
 * from the store (sched_load.c) -> decode them with the manifest decoder
 * into a snapshot -> sc_schedule() -> turn the decisions into new job
 * statuses and events, written in one store transaction that is
 * conditional on the revisions read (sched_write.c). */
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
/* Events kept in the store; older ones are deleted in batches. */
#define SC_EVENT_LIMIT 1000

/* One stored object read by a cycle. */
typedef struct sc_sobj {
	const sc_kind_t *kind;
	char *key;       /* owned */
	json_t *obj;     /* owned, as stored (no resourceVersion) */
	int64_t mod_rev;
	char *why;       /* owned: why the object is left out of the snapshot */
	long job;        /* index into the snapshot's jobs, or -1 */
} sc_sobj_t;

/* Everything a cycle read, and the snapshot built from it. */
typedef struct sc_cycle_in {
	sc_sobj_t *objs; /* owned, in kind order then key order */
	size_t nobjs;
	sc_manifest_set_t *set;  /* owns what snap points to */
	sc_snapshot_t snap;
	sc_sobj_t **job_obj;     /* snap.jobs[i] -> its object; owned array */
	int64_t now;
} sc_cycle_in_t;

/* What a written cycle decided, for metrics and the loop. */
typedef struct sc_cycle_out {
	size_t placements;
	size_t evictions[SC_ACT_COUNT];
	size_t drained;      /* pods evicted because their node is drained */
	size_t pending;
	size_t events;       /* events created */
	size_t writes;       /* objects written */
	bool releasing;      /* pods are Releasing: run again soon */
	double *waits;       /* seconds from creation to first placement; owned */
	size_t nwaits;
} sc_cycle_out_t;

/* ---- sched_load.c ---- */
/* Reads the store and builds the snapshot. Objects the decoder refuses, or
 * that the snapshot refuses (a job naming a missing queue), are left out
 * with the reason in their `why`, so one bad object never stops the loop.
 * Returns 0, SC_EIO or SC_ENOMEM. */
int sc__cycle_load(sc_server_t *s, int64_t now, sc_cycle_in_t *in);
void sc__cycle_in_free(sc_cycle_in_t *in);

/* ---- sched_write.c ---- */
/* Writes the decisions d taken on in back to the store in one transaction
 * (job statuses, new events). SC_ECONFLICT when an object changed since it
 * was read: the caller runs the cycle again. */
int sc__cycle_write(sc_server_t *s, const sc_cycle_in_t *in, const sc_decisions_t *d,
		    sc_cycle_out_t *out);
/* Deletes the oldest events beyond SC_EVENT_LIMIT; returns how many are
 * left, or a negative SC_E* code. */
long sc__events_trim(sc_server_t *s);
/* Formats t (seconds) as RFC 3339 UTC. */
void sc__rfc3339(int64_t t, char *out, size_t outsz);

/* ---- sched.c ---- */
/* The last cycle's figures of one queue (core units), for explain. */
const sc_queue_report_t *sc__sched_queue(sc_server_t *s, const char *name);

#endif
