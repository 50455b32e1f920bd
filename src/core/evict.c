/* Actions that evict: reclaim (across queues), preempt (inside a queue)
 * and stale-gang eviction.
 *
 * Reclaim follows KAI's invariants: the reclaiming queue stays within its
 * fair share (a non-preemptible reclaimer within its quota); a victim queue
 * is never pushed below min(limit, max(quota, fair share)), so in-quota
 * usage is never reclaimed; at the level where the two queues are siblings
 * the reclaimer's allocated/fair-share ratio after the move stays below the
 * victim side's. Against flapping a queue is reclaimed from only when it is
 * above its fair share by more than the configured tolerance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/actions.h"
#include "core/victims.h"

#define EPS 1e-9

/* A job evicted in this cycle does not turn around and evict others in the
 * same cycle: its pods would be evicted and bound again at once, which only
 * churns work. It competes again next cycle, from the pending state. */
static bool evicted_this_cycle(const sjob_t *jb)
{
	for (int p = 0; p < jb->total; p++)
		if (jb->pods[p].evicted_now)
			return true;
	return false;
}

static int pending_jobs(sc_sched_t *s, int **out)
{
	int *ids = sc_arena_alloc(s->arena, ((size_t)s->njobs + 1) * sizeof(int));
	if (!ids)
		return SC_ENOMEM;
	int n = 0;
	for (int j = 0; j < s->njobs; j++) {
		const sjob_t *jb = &s->jobs[j];
		if (jb->queue >= 0 && !jb->bad && jb->npending > 0 &&
		    jb->nrunning < jb->min_member && !evicted_this_cycle(jb)) {
			sc__job_step(s, j);
			ids[n++] = j;
		}
	}
	qsort_r(ids, (size_t)n, sizeof(int), sc__job_order_cmp, s);
	*out = ids;
	return n;
}

static bool within_quota(const sc_sched_t *s, const sjob_t *p)
{
	const squeue_t *q = &s->queues[p->queue];
	for (int r = 0; r < SC_RES_COUNT; r++)
		if (p->step_req.v[r] > 0 &&
		    q->alloc_nonpreempt.v[r] + p->step_req.v[r] > q->quota.v[r] + EPS)
			return false;
	return true;
}

/* Marks the preemptor's new bindings as pipelined: they land on resources
 * that the evictions of the same statement are still releasing. */
static void mark_pipelined(sc_stmt_t *st)
{
	for (size_t i = 0; i < st->nops; i++) {
		if (st->ops[i].kind != OP_ALLOC)
			continue;
		for (size_t k = 0; k < st->nops; k++)
			if (st->ops[k].kind == OP_EVICT &&
			    st->ops[k].assign.node == st->ops[i].assign.node)
				st->ops[i].pipelined = true;
	}
}

static int commit_preemption(sc_sched_t *s, sc_stmt_t *st, int j)
{
	mark_pipelined(st);
	s->jobs[j].reason = NULL;
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
	double before; /* the queue's GPUs before the preemption */
} preempt_ctx_t;

static bool preempt_pick(void *ctx, sc_sched_t *s, int j)
{
	const preempt_ctx_t *x = ctx;
	const sjob_t *v = &s->jobs[j];
	if (v->queue != x->queue || v->priority >= x->priority)
		return false;
	if (x->protect_best_effort && v->priority <= 10)
		return false;
	int64_t min_rt = s->queues[v->queue].spec->preempt_min_runtime;
	return min_rt <= 0 || sc__job_runtime(s, j) >= min_rt;
}

static bool preempt_allowed(void *ctx, sc_sched_t *s, int p, const vunit_t *u,
                            const vunit_t *chosen, int n)
{
	return true; /* the pick already holds every preempt rule */
}

/* After a preemption inside queue q: every queue on q's path is within its
 * GPU limit, or q did not grow (it may already have been over its limit).
 * Preempt moves resources inside one queue, but the preemptor may take more
 * than its victims free (free GPUs plus a victim's). */
static bool queue_path_within_limit(const sc_sched_t *s, int q, double before)
{
	if (s->queues[q].allocated.v[SC_RES_GPU] <= before + EPS)
		return true;
	for (int a = q; a >= 0; a = s->queues[a].parent)
		if (s->queues[a].allocated.v[SC_RES_GPU] > s->queues[a].limit.v[SC_RES_GPU] + EPS)
			return false;
	return true;
}

static bool preempt_valid(void *ctx, const sc_sched_t *s, int p)
{
	const preempt_ctx_t *x = ctx;
	return queue_path_within_limit(s, x->queue, x->before);
}

static int preempt(sc_sched_t *s)
{
	int *ids, n = pending_jobs(s, &ids);
	if (n < 0)
		return n;
	bool low = utilization_low(s);
	for (int i = 0; i < n; i++) {
		sjob_t *p = &s->jobs[ids[i]];
		if (p->nrunning >= p->min_member || (!p->preemptible && !within_quota(s, p)))
			continue;
		preempt_ctx_t x = {p->queue, p->priority, low, 0};
		vunit_t *c;
		int nc = sc__victim_units(s, ids[i], p->queue, preempt_pick, &x, &c);
		if (nc <= 0) {
			if (nc < 0)
				return nc;
			continue;
		}
		x.before = s->queues[p->queue].allocated.v[SC_RES_GPU];
		victim_rules_t rules = {preempt_allowed, NULL, SC_ACT_PREEMPT, preempt_valid};
		rules.ctx = &x;
		sc_stmt_t st;
		sc__stmt_open(&st, s);
		int rc = sc__find_victims(s, &st, ids[i], c, nc, &rules);
		if (rc < 0)
			return rc;
		if (rc == 1 && (rc = commit_preemption(s, &st, ids[i])) < 0)
			return rc;
	}
	return 0;
}

/* ---- reclaim ------------------------------------------------------- */

static bool is_ancestor(const sc_sched_t *s, int a, int q)
{
	for (; q >= 0; q = s->queues[q].parent)
		if (q == a)
			return true;
	return false;
}

/* The children of the lowest common ancestor on each side (or the roots). */
static void sibling_pair(const sc_sched_t *s, int q, int v, int *qa, int *va)
{
	for (int a = q; a >= 0; a = s->queues[a].parent) {
		int b = v;
		while (b >= 0 && s->queues[b].parent != s->queues[a].parent)
			b = s->queues[b].parent;
		if (b >= 0 && b != a) {
			*qa = a;
			*va = b;
			return;
		}
	}
	*qa = q;
	*va = v;
}

static double ratio(const squeue_t *q, double alloc_gpu)
{
	return q->fair.v[SC_RES_GPU] > EPS ? alloc_gpu / q->fair.v[SC_RES_GPU] : 1e18;
}

typedef struct reclaim_ctx {
	int queue;
	double tolerance;
} reclaim_ctx_t;

static bool reclaim_pick(void *ctx, sc_sched_t *s, int j)
{
	const reclaim_ctx_t *x = ctx;
	const sjob_t *v = &s->jobs[j];
	if (v->queue < 0 || v->queue == x->queue)
		return false;
	const squeue_t *vq = &s->queues[v->queue];
	/* Hysteresis: only a queue clearly over its fair share loses work. */
	if (vq->allocated.v[SC_RES_GPU] <= vq->fair.v[SC_RES_GPU] * (1 + x->tolerance) + EPS)
		return false;
	int64_t min_rt = vq->spec->reclaim_min_runtime;
	return min_rt <= 0 || sc__job_runtime(s, j) >= min_rt;
}

/* Would evicting u on top of chosen keep every queue on the victim's side
 * at or above its protected amount, and the reclaimer below the victim
 * side in allocated/fair share? */
static bool reclaim_allowed(void *ctx, sc_sched_t *s, int p, const vunit_t *u,
                            const vunit_t *chosen, int n)
{
	const reclaim_ctx_t *x = ctx;
	int vq = s->jobs[u->job].queue;
	/* Protection is checked on what the reclaimer is short of: GPUs for a
	 * GPU job, else CPU and memory. A queue with an unlimited CPU quota
	 * would otherwise shield its GPUs from every reclaim. */
	bool gpu = s->jobs[p].step_req.v[SC_RES_GPU] > 0;
	for (int q = vq; q >= 0 && !is_ancestor(s, q, x->queue); q = s->queues[q].parent) {
		const squeue_t *sq = &s->queues[q];
		for (int r = gpu ? SC_RES_GPU : SC_RES_CPU; r < (gpu ? SC_RES_CPU : SC_RES_COUNT);
		     r++) {
			double out = u->res.v[r];
			for (int i = 0; i < n; i++)
				if (is_ancestor(s, q, s->jobs[chosen[i].job].queue))
					out += chosen[i].res.v[r];
			if (out <= 0)
				continue;
			double protect = fmin(sq->limit.v[r], fmax(sq->quota.v[r], sq->fair.v[r]));
			if (sq->allocated.v[r] - out < protect - EPS)
				return false;
		}
	}
	int qa, va;
	sibling_pair(s, x->queue, vq, &qa, &va);
	double out = u->gpus;
	for (int i = 0; i < n; i++)
		if (is_ancestor(s, va, s->jobs[chosen[i].job].queue))
			out += chosen[i].gpus;
	const squeue_t *A = &s->queues[qa], *V = &s->queues[va];
	double need = s->jobs[p].step_req.v[SC_RES_GPU];
	return ratio(A, A->allocated.v[SC_RES_GPU] + need) <
	       ratio(V, V->allocated.v[SC_RES_GPU] - out) + EPS;
}

static bool within_fair_share(const sc_sched_t *s, const sjob_t *p)
{
	for (int q = p->queue; q >= 0; q = s->queues[q].parent) {
		const squeue_t *sq = &s->queues[q];
		for (int r = 0; r < SC_RES_COUNT; r++)
			if (p->step_req.v[r] > 0 &&
			    sq->allocated.v[r] + p->step_req.v[r] > sq->fair.v[r] + EPS)
				return false;
	}
	return true;
}

static int reclaim(sc_sched_t *s)
{
	int *ids, n = pending_jobs(s, &ids);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		sjob_t *p = &s->jobs[ids[i]];
		if (p->nrunning >= p->min_member || !within_fair_share(s, p) ||
		    (!p->preemptible && !within_quota(s, p)))
			continue;
		reclaim_ctx_t x = {p->queue, s->snap->config.reclaim_tolerance};
		vunit_t *c;
		int nc = sc__victim_units(s, ids[i], -1, reclaim_pick, &x, &c);
		if (nc <= 0) {
			if (nc < 0)
				return nc;
			continue;
		}
		victim_rules_t rules = {reclaim_allowed, &x, SC_ACT_RECLAIM, NULL};
		sc_stmt_t st;
		sc__stmt_open(&st, s);
		int rc = sc__find_victims(s, &st, ids[i], c, nc, &rules);
		if (rc < 0)
			return rc;
		if (rc == 1 && (rc = commit_preemption(s, &st, ids[i])) < 0)
			return rc;
	}
	return 0;
}

/* ---- stale gangs --------------------------------------------------- */

static int stale_gangs(sc_sched_t *s)
{
	for (int j = 0; j < s->njobs; j++) {
		sjob_t *jb = &s->jobs[j];
		int64_t grace = jb->spec->staleness_grace >= 0 ? jb->spec->staleness_grace : 60;
		if (jb->nrunning == 0 || jb->nrunning >= jb->min_member || !jb->spec->stale_since ||
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

int sc__reclaim(sc_sched_t *s)
{
	return reclaim(s);
}

int sc__preempt(sc_sched_t *s)
{
	return preempt(s);
}

int sc__stale_gangs(sc_sched_t *s)
{
	return stale_gangs(s);
}
