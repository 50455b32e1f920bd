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

#endif
