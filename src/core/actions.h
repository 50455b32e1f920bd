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

/* evict.c, shared by reclaim and preempt: the pending jobs that may evict,
 * in queue order (sc__order_pop takes them); KAI's rule that
 * non-preemptible work stays within its queue's quota; committing a
 * preemption (KAI's ShouldPipelineJob, queue order refreshed). */
int sc__preemptors_init(sc_sched_t *s);
bool sc__nonpreempt_within_quota(const sc_sched_t *s, const sjob_t *p);
int sc__commit_preemption(sc_sched_t *s, sc_stmt_t *st, int j);

/* consolidate.c, the pieces of moving pods (for consolidation and any other
 * action that moves pods to make room). */
typedef struct sc_node_pods {
	int *start; /* per node: offset into list */
	int *list;  /* (job, pod) pairs of movable pods, grouped by node */
} sc_node_pods_t;
/* A preemptible job's running pod, not placed or evicted in this cycle,
 * of a job running at least minMember pods. */
bool sc__movable(const sc_sched_t *s, int j, int p);
/* Indexes the movable pods by node (once per action). */
int sc__movable_index(sc_sched_t *s, sc_node_pods_t *np);
/* Evicts movable pods of `node` (fewest GPUs first, then KAI's in-queue
 * victim order), at most `budget`, until req fits there with its releasing
 * resources; returns the number evicted, -1 when it cannot be done (some
 * evictions may stay in st: roll back), or SC_ENOMEM. */
int sc__clear_node(sc_sched_t *s, sc_stmt_t *st, const sc_node_pods_t *np, uint32_t node,
                   const sc_request_t *req, int budget, int action, int by, const char *why);
/* Places pod p of job j anywhere its task may go (idle first, then
 * pipelined), honouring reservations; 0, SC_ENOFIT or SC_ENOMEM. */
int sc__place_pod(sc_sched_t *s, sc_stmt_t *st, int j, int p);
/* Places every pod the statement evicted from op `from` on again, anywhere
 * (idle first, then pipelined); 1 when all landed (they are moves), 0 when
 * one did not (roll back), or SC_ENOMEM. */
int sc__replace_evicted(sc_sched_t *s, sc_stmt_t *st, size_t from);

#endif
