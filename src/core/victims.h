/* Victim search shared by reclaim and preempt.
 *
 * A victim unit is what can be evicted on its own: a whole job, or one pod
 * of an elastic job that runs more pods than its minMember (evicting such a
 * pod does not break the gang; KAI's GetTasksToEvict). Units are numbered
 * in KAI's victim order (victim_order.c). The search finds a set of units
 * whose eviction lets the preemptor's step fit, and leaves the evictions
 * and the preemptor's placements in the statement for the caller to
 * commit. */
#ifndef SC_CORE_VICTIMS_H
#define SC_CORE_VICTIMS_H

#include "core/statement.h"

typedef struct vunit {
	int job;
	int pod;   /* -1: every running pod of the job */
	int order; /* position in KAI's victim order, 0 first */
	int priority;
	double gpus; /* GPUs freed */
	int64_t runtime;
	res3_t res; /* resources freed, queue units */
} vunit_t;

/* Rule-specific checks. */
typedef struct victim_rules {
	/* May the units set[0..n) (in victim order) be evicted together for
	 * the preemptor? Called before the set is simulated. NULL: yes. */
	bool (*allowed)(void *ctx, sc_sched_t *s, int preemptor, const vunit_t *set, int n);
	void *ctx;
	int action; /* enum sc_action, recorded on the evictions */
	/* Optional: is the state after evicting a set and placing the
	 * preemptor acceptable as a whole? A refused set does not end the
	 * search: a larger one may pass (e.g. one that frees more). */
	bool (*valid)(void *ctx, const sc_sched_t *s, int preemptor);
	/* KAI's allowConsolidatingReclaim: `allowed` is asked after the
	 * simulation, about the units not placed again elsewhere only. */
	bool consolidating;
} victim_rules_t;

/* Collects candidate units: running, preemptible pods not placed in this
 * cycle, of leaf queue `queue` (-1: any queue), of jobs for which pick()
 * returns 1 (every unit) or 2 (only the spare pods of an elastic job: its
 * gang is protected, e.g. by a minimum runtime), and numbers them in KAI's
 * victim order. pick() returns 0 to pass a job over, or SC_PICK_NOT_QUEUE
 * when it would pass over every job of that job's leaf queue (its answer
 * depends on the queue alone): the rest of the queue is then not asked,
 * which at 10,000 nodes is most of reclaim's cost. Returns the count or
 * SC_ENOMEM. */
#define SC_PICK_NOT_QUEUE 3
int sc__victim_units(sc_sched_t *s, int preemptor, int queue,
                     int (*pick)(void *, sc_sched_t *, int), void *ctx, vunit_t **out);

/* victim_order.c: numbers units in KAI's victim order (the reverse of the
 * allocation order: the most over-served queue first, and in a queue the
 * job allocate would take last first) and sorts them by it. */
int sc__victim_order(sc_sched_t *s, vunit_t *u, int n);

/* Finds a set of units among cands whose eviction lets preemptor run, by
 * the configured search (SchedulerConfig victims.search). On success
 * returns 1 with the evictions and placements in st (uncommitted); returns
 * 0 when no set works (st unchanged), or a negative error. */
int sc__find_victims(sc_sched_t *s, sc_stmt_t *st, int preemptor, vunit_t *cands, int n,
                     const victim_rules_t *rules);

/* Seconds a job has been running (its oldest running pod), 0 if unknown. */
int64_t sc__job_runtime(const sc_sched_t *s, int j);

#endif
