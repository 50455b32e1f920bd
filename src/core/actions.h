/* Scheduling actions, dispatched by name in the configured order. */
#ifndef SC_CORE_ACTIONS_H
#define SC_CORE_ACTIONS_H

#include "core/sched.h"

/* Runs one action (enum sc_action) on the cycle's state. */
int sc__run_action(sc_sched_t *s, int action);

int sc__reclaim(sc_sched_t *s);
int sc__preempt(sc_sched_t *s);
int sc__stale_gangs(sc_sched_t *s);
int sc__consolidate(sc_sched_t *s);
int sc__compact(sc_sched_t *s);

/* evict.c, shared by reclaim and preempt: the pending jobs that may evict,
 * in queue order (sc__order_pop takes them); committing a preemption
 * (KAI's ShouldPipelineJob, queue order refreshed). victims.c: KAI's rule
 * that non-preemptible work stays within its queue's quota. */
int sc__preemptors_init(sc_sched_t *s);
/* The victim searches of reclaim and preempt depend on the preemptor only
 * through its leaf queue, priority, preemptibility, next step and shape
 * (and, with reservations, whether it ends before each), while it holds
 * no pods and no reservation: a search that failed fails again for an
 * equivalent preemptor until a statement is committed. sc__vfail_key is
 * that class (0: the job has none, always search); sc__vfail_seen
 * whether a search of it failed since the last commit; sc__vfail_put
 * notes a failure (SC_ENOMEM or 0). */
uint64_t sc__vfail_key(sc_sched_t *s, int j, int action);
bool sc__vfail_seen(sc_sched_t *s, uint64_t key);
int sc__vfail_put(sc_sched_t *s, uint64_t key);
bool sc__nonpreempt_within_quota(const sc_sched_t *s, const sjob_t *p);
int sc__commit_preemption(sc_sched_t *s, sc_stmt_t *st, int j);

/* moves.c, the pieces of moving pods (for consolidation and any other
 * action that moves pods to make room). */
typedef struct sc_node_pods {
	int *start; /* per node: offset into list */
	int *list;  /* (job, pod) pairs of movable pods, grouped by node */
} sc_node_pods_t;
/* A preemptible job's running pod, not placed or evicted in this cycle,
 * of a job running at least minMember pods (still so after the action's
 * own moves). */
bool sc__movable(const sc_sched_t *s, int j, int p);
/* Indexes the movable pods by node (once per action). */
int sc__movable_index(sc_sched_t *s, sc_node_pods_t *np);
/* What completes a clearing once req fits: fn gets the statement mark
 * before the evictions and returns 1 to keep it, 0 to try the next set of
 * pods, or SC_ENOMEM. */
typedef struct sc_clear_done {
	int (*fn)(void *ctx, sc_sched_t *s, sc_stmt_t *st, size_t mark);
	void *ctx;
} sc_clear_done_t;
/* Evicts movable pods of `node` (never job `by`'s), at most `budget`, so
 * that req fits there with its releasing resources: the fewest pods, sets
 * of one size in KAI's in-queue victim order (lower priority, newer job,
 * fewer GPUs); with done, each fitting set is completed by it until one is
 * kept. Returns the number evicted (left in st), -1 when no set works (st
 * as it was), or SC_ENOMEM. */
int sc__clear_node(sc_sched_t *s, sc_stmt_t *st, const sc_node_pods_t *np, uint32_t node,
                   const sc_request_t *req, int budget, int action, int by, const char *why,
                   const sc_clear_done_t *done);
/* The nodes pod p of job j may go to: its task's filter plus the
 * reservations (a node reserved for a long-waiting job takes another job's
 * pod only as backfill). x must outlive the use of x->f. */
typedef struct sc_pod_filter {
	sc_filter_t f;
	int ids[SC_MAX_MODEL_FILTER];
	const sc_sched_t *s;
	int job;
} sc_pod_filter_t;
void sc__pod_filter(const sc_sched_t *s, int j, int p, sc_pod_filter_t *x);
/* Places pod p of job j anywhere its task may go (idle first, then
 * pipelined), honouring reservations; 0, SC_ENOFIT or SC_ENOMEM. */
int sc__place_pod(sc_sched_t *s, sc_stmt_t *st, int j, int p);
/* Places every pod the statement evicted from op `from` on again, anywhere
 * (idle first, then pipelined); 1 when all landed (they are moves), 0 when
 * one did not (roll back), or SC_ENOMEM. */
int sc__replace_evicted(sc_sched_t *s, sc_stmt_t *st, size_t from);

#endif
