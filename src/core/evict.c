/* Actions that evict: preempt (inside a queue) and stale-gang eviction,
 * plus what reclaim (reclaim.c) shares with preempt: which pending jobs
 * may evict, in which order, and how a preemption is committed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/actions.h"
#include "core/victims.h"

/* A job evicted in this cycle does not turn around and evict others in the
 * same cycle: its pods would be evicted and bound again at once, which only
 * churns work. It competes again next cycle, from the pending state (in
 * KAI its pods are Releasing, not Pending, so it is not a preemptor). */
static bool evicted_this_cycle(const sjob_t *jb)
{
	return jb->nevicted_now > 0;
}

static bool want_preemptor(sc_sched_t *s, int j, void *ctx)
{
	return !evicted_this_cycle(&s->jobs[j]);
}

int sc__preemptors_init(sc_sched_t *s)
{
	return sc__order_init(s, want_preemptor, NULL);
}

int sc__commit_preemption(sc_sched_t *s, sc_stmt_t *st, int j)
{
	/* KAI's solver places a preemptor pipeline-only: it starts once its
	 * victims are gone, wherever it landed. */
	for (size_t i = 0; i < st->nops; i++)
		if (st->ops[i].kind == OP_ALLOC && st->ops[i].job == j)
			st->ops[i].pipelined = true;
	s->jobs[j].reason = NULL;
	/* The victims' queues hold less now: their place in the order moves. */
	for (size_t i = 0; i < st->nops; i++)
		if (st->ops[i].kind == OP_EVICT)
			sc__order_touch(s, s->jobs[st->ops[i].job].queue);
	sc__order_touch(s, s->jobs[j].queue);
	return sc__stmt_commit(st);
}

/* ---- preempt ------------------------------------------------------- */

static bool utilization_low(const sc_sched_t *s)
{
	int64_t total, used;
	sc_cluster_totals(s->cluster, &total, NULL, NULL);
	sc_cluster_used(s->cluster, &used, NULL, NULL);
	return total > 0 && (double)used / (double)total < s->snap->config.preempt_util_threshold;
}

typedef struct preempt_ctx {
	int queue;
	int priority;
	bool protect_best_effort;
} preempt_ctx_t;

/* KAI's buildFilterFuncForPreempt and the minruntime plugin: preemptible,
 * strictly lower priority, the same queue; a job younger than the queue's
 * preemptMinRuntime keeps its gang (only an elastic job's spare pods go). */
static int preempt_pick(void *ctx, sc_sched_t *s, int j)
{
	const preempt_ctx_t *x = ctx;
	const sjob_t *v = &s->jobs[j];
	if (v->queue != x->queue || v->priority >= x->priority)
		return 0;
	if (x->protect_best_effort && v->priority <= 10)
		return 0;
	int64_t min_rt = s->queues[v->queue].spec->preempt_min_runtime;
	return min_rt <= 0 || sc__job_runtime(s, j) >= min_rt ? 1 : 2;
}

static int preempt(sc_sched_t *s)
{
	int rc = sc__preemptors_init(s);
	if (rc < 0)
		return rc;
	bool low = utilization_low(s);
	int j;
	while ((j = sc__order_pop(s)) >= 0) {
		sjob_t *p = &s->jobs[j];
		if (p->step == 0 || (!p->preemptible && !sc__nonpreempt_within_quota(s, p)))
			continue;
		preempt_ctx_t x = {p->queue, p->priority, low};
		vunit_t *c;
		int nc = sc__victim_units(s, j, p->queue, preempt_pick, &x, &c);
		if (nc <= 0) {
			if (nc < 0)
				return nc;
			continue;
		}
		victim_rules_t rules = {NULL, &x, SC_ACT_PREEMPT, NULL, false};
		sc_stmt_t st;
		sc__stmt_open(&st, s);
		rc = sc__find_victims(s, &st, j, c, nc, &rules);
		if (rc < 0)
			return rc;
		if (rc == 1 && (rc = sc__commit_preemption(s, &st, j)) < 0)
			return rc;
	}
	return 0;
}

/* ---- stale gangs --------------------------------------------------- */

/* KAI's IsStale: running pods below minMember, and no pod succeeded (a
 * job whose pods finish one by one is winding down, not broken). */
static bool is_stale(const sjob_t *jb)
{
	if (jb->nrunning == 0 || jb->nrunning >= jb->min_member)
		return false;
	for (int p = 0; p < jb->total; p++)
		if (jb->pods[p].phase == SC_POD_SUCCEEDED)
			return false;
	return true;
}

static int stale_gangs(sc_sched_t *s)
{
	for (int j = 0; j < s->njobs; j++) {
		sjob_t *jb = &s->jobs[j];
		int64_t grace = jb->spec->staleness_grace >= 0 ? jb->spec->staleness_grace : 60;
		if (!is_stale(jb) || !jb->spec->stale_since ||
		    s->snap->now - jb->spec->stale_since <= grace)
			continue;
		const char *why = sc_arena_printf(
		    s->arena, "%d of %d pods running, below minMember %d for %llds (grace %llds)",
		    jb->nrunning, jb->total, jb->min_member,
		    (long long)(s->snap->now - jb->spec->stale_since), (long long)grace);
		if (!why)
			return SC_ENOMEM;
		sc_stmt_t st;
		sc__stmt_open(&st, s);
		for (int p = 0; p < jb->total; p++) {
			if (jb->pods[p].phase != SC_POD_RUNNING)
				continue;
			int rc = sc__stmt_evict(&st, j, p, SC_ACT_STALE_GANG, -1, why);
			if (rc < 0)
				return rc;
		}
		int rc = sc__stmt_commit(&st);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int sc__preempt(sc_sched_t *s)
{
	return preempt(s);
}

int sc__stale_gangs(sc_sched_t *s)
{
	return stale_gangs(s);
}
