/* Reclaim: a queue takes back its fair share from other queues, by KAI's
 * rules (plugins/proportion/reclaimable).
 *
 * A pending job may reclaim when its own queue stays within its fair share
 * with the job's next step, in every resource, and a non-preemptible one
 * within its quota (CanReclaimResources: the leaf only, so two teams under
 * a full department can reclaim from each other). Victims are preemptible
 * running jobs of other queues (with reclaimMinRuntime served), taken in
 * KAI's victim order. A set of victims is acceptable (Reclaimable) when:
 *  - before each victim goes, the victim's side (its queue's ancestor that
 *    is a sibling of the reclaimer's) is still above its allocatable share
 *    min(limit, max(quota, fair share)) in some resource
 *    (MaintainFairShareStrategy), or the reclaimer's side stays within its
 *    quota with the job while the victim's side is above its quota in some
 *    resource (GuaranteeDeservedQuotaStrategy);
 *  - at every level of the reclaimer's path, where the reclaimer would go
 *    above its fair share in a resource the move involves, its
 *    allocated/fair-share ratio stays below that of each sibling the victims
 *    come from (isFairShareSaturationLowerPerResource; 0/0 counts as 0,
 *    x/0 as infinity);
 *  - a non-preemptible reclaimer keeps every queue on its path within quota.
 * Beyond KAI, against flapping, the fair-share strategy takes from a side
 * only when it was above its allocatable share by more than
 * `reclaim.tolerance` (0.2) when the job's solution began; 0 is KAI. */
#include <math.h>
#include <string.h>

#include "core/actions.h"
#include "core/victims.h"

#define EPS 1e-9

typedef struct reclaim_ctx {
	int queue; /* the reclaimer's leaf */
	double tolerance;
	/* Each queue's holdings when the job's solution began (KAI's
	 * jobSimulationQueues): the rules judge against these, also when
	 * they are asked after a simulation. */
	res3_t *alloc0, *np0;
	bool consolidating; /* reclaim.allowConsolidating */
	res3_t *remaining;  /* per queue, valid where touched */
	uint8_t *involved;  /* per queue: resources its victims free (bit r) */
	char *touched;
	int *list; /* touched queues */
	int nlist;
} reclaim_ctx_t;

/* The children of the lowest common ancestor on each side (or the roots):
 * KAI's getLeveledQueues. */
static void leveled(const sc_sched_t *s, int q, int v, int *qa, int *va)
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

static bool above_in_any(const res3_t *have, const res3_t *bound)
{
	for (int r = 0; r < SC_RES_COUNT; r++)
		if (bound->v[r] < SC_UNLIMITED && have->v[r] > bound->v[r] + EPS)
			return true;
	return false;
}

/* MaintainFairShareStrategy, with the tolerance gate on the side's holding
 * when the job's solution began. */
static bool maintain(const sc_sched_t *s, const reclaim_ctx_t *x, int vq, const res3_t *rem)
{
	const squeue_t *q = &s->queues[vq];
	for (int r = 0; r < SC_RES_COUNT; r++) {
		double share = q->allocatable.v[r];
		if (share >= SC_UNLIMITED)
			continue;
		if (rem->v[r] > share + EPS &&
		    x->alloc0[vq].v[r] > share * (1 + x->tolerance) + EPS)
			return true;
	}
	return false;
}

/* GuaranteeDeservedQuotaStrategy. */
static bool guarantee(const sc_sched_t *s, const reclaim_ctx_t *x, int rq, const res3_t *req,
                      int vq, const res3_t *rem)
{
	const squeue_t *a = &s->queues[rq];
	for (int r = 0; r < SC_RES_COUNT; r++)
		if (a->quota.v[r] < SC_UNLIMITED &&
		    x->alloc0[rq].v[r] + req->v[r] > a->quota.v[r] + EPS)
			return false;
	return above_in_any(rem, &s->queues[vq].quota);
}

static res3_t *remaining(sc_sched_t *s, reclaim_ctx_t *x, int q)
{
	if (!x->touched[q]) {
		x->touched[q] = 1;
		x->list[x->nlist++] = q;
		x->remaining[q] = x->alloc0[q];
		x->involved[q] = 0;
	}
	return &x->remaining[q];
}

static uint8_t involved_of(const res3_t *r)
{
	uint8_t m = 0;
	for (int k = 0; k < SC_RES_COUNT; k++)
		if (r->v[k] > 0)
			m |= (uint8_t)(1u << k);
	return m;
}

/* fairShareSaturationRatio */
static double saturation(double alloc, double fair)
{
	if (fair <= 0)
		return alloc > 0 ? INFINITY : 0;
	return alloc / fair;
}

/* reclaimingQueuesRemainWithinBoundaries */
static bool within_boundaries(sc_sched_t *s, reclaim_ctx_t *x, const sjob_t *p)
{
	const res3_t *req = &p->step_req;
	uint8_t mine = involved_of(req);
	for (int q = x->queue; q >= 0; q = s->queues[q].parent) {
		const squeue_t *sq = &s->queues[q];
		res3_t rem = x->touched[q] ? x->remaining[q] : x->alloc0[q];
		for (int r = 0; r < SC_RES_COUNT; r++)
			rem.v[r] += req->v[r];
		for (int i = 0; i < x->nlist; i++) {
			int t = x->list[i];
			if (t == q || s->queues[t].parent != sq->parent)
				continue;
			uint8_t inv = x->involved[t] | mine;
			for (int r = 0; r < SC_RES_COUNT; r++) {
				if (!(inv >> r & 1))
					continue;
				double mine_ratio = saturation(rem.v[r], sq->fair.v[r]);
				double theirs =
				    saturation(x->remaining[t].v[r], s->queues[t].fair.v[r]);
				if (mine_ratio > 1 + EPS && s->queues[t].fair.v[r] > 0 &&
				    mine_ratio + EPS >= theirs)
					return false;
			}
		}
		if (p->preemptible)
			continue;
		for (int r = 0; r < SC_RES_COUNT; r++)
			if (sq->quota.v[r] < SC_UNLIMITED &&
			    x->np0[q].v[r] + req->v[r] > sq->quota.v[r] + EPS)
				return false;
	}
	return true;
}

/* KAI's Reclaimable on the victims set[0..n), in victim order. */
static bool reclaimable(void *ctx, sc_sched_t *s, int preemptor, const vunit_t *set, int n)
{
	reclaim_ctx_t *x = ctx;
	const sjob_t *p = &s->jobs[preemptor];
	for (int i = 0; i < x->nlist; i++)
		x->touched[x->list[i]] = 0;
	x->nlist = 0;
	for (int i = 0; i < n; i++) {
		int leaf = s->jobs[set[i].job].queue, rq, vq;
		leveled(s, x->queue, leaf, &rq, &vq);
		const res3_t *rem = remaining(s, x, vq);
		if (!maintain(s, x, vq, rem) && !guarantee(s, x, rq, &p->step_req, vq, rem))
			return false;
		uint8_t inv = involved_of(&set[i].res);
		for (int a = leaf; a >= 0; a = s->queues[a].parent) {
			res3_t *ra = remaining(s, x, a);
			for (int r = 0; r < SC_RES_COUNT; r++)
				ra->v[r] -= set[i].res.v[r];
			x->involved[a] |= inv;
		}
	}
	return within_boundaries(s, x, p);
}

typedef struct pick_ctx {
	reclaim_ctx_t *x;
	int preemptor;
	int memo_queue; /* the leaf queue last judged, or -1 */
	bool memo_ok;
} pick_ctx_t;

/* Whether any job of leaf queue vq may give to the reclaimer: the side it
 * belongs to could give anything at all (the queue's part of reclaim_pick). */
static bool side_may_give(const pick_ctx_t *c, sc_sched_t *s, int leaf)
{
	const reclaim_ctx_t *x = c->x;
	int rq, vq;
	if (leaf == x->queue)
		return false;
	leveled(s, x->queue, leaf, &rq, &vq);
	const res3_t *held = &x->alloc0[vq];
	/* (A victim placed again elsewhere does not count when reclaim may
	 * consolidate: then any side may give a movable job.) */
	return x->consolidating || maintain(s, x, vq, held) ||
	       guarantee(s, x, rq, &s->jobs[c->preemptor].step_req, vq, held);
}

/* Candidate victims: other queues' jobs whose side could give anything at
 * all (a side neither strategy allows is skipped before the search), and
 * whose queue's reclaimMinRuntime is served (else only an elastic job's
 * spare pods). */
static int reclaim_pick(void *ctx, sc_sched_t *s, int j)
{
	pick_ctx_t *c = ctx;
	const sjob_t *v = &s->jobs[j];
	if (v->queue < 0)
		return 0;
	/* Candidates come queue by queue: judge each queue once. */
	if (c->memo_queue != v->queue) {
		c->memo_queue = v->queue;
		c->memo_ok = side_may_give(c, s, v->queue);
	}
	if (!c->memo_ok)
		return SC_PICK_NOT_QUEUE; /* the same for every job of the queue */
	int64_t min_rt = s->queues[v->queue].spec->reclaim_min_runtime;
	return min_rt <= 0 || sc__job_runtime(s, j) >= min_rt ? 1 : 2;
}

/* CanReclaimResources */
static bool can_reclaim(const sc_sched_t *s, const sjob_t *p)
{
	const squeue_t *q = &s->queues[p->queue];
	for (int r = 0; r < SC_RES_COUNT; r++)
		if (q->allocated.v[r] + p->step_req.v[r] > q->fair.v[r] + EPS)
			return false;
	return p->preemptible || sc__nonpreempt_within_quota(s, p);
}

int sc__reclaim(sc_sched_t *s)
{
	int rc = sc__preemptors_init(s);
	if (rc < 0)
		return rc;
	size_t nq = (size_t)s->nqueues + 1;
	reclaim_ctx_t x = {.tolerance = s->snap->config.reclaim_tolerance,
	                   .consolidating = s->snap->config.reclaim_consolidating};
	x.remaining = sc_arena_alloc(s->arena, nq * sizeof(res3_t));
	x.involved = sc_arena_calloc(s->arena, nq, 1);
	x.touched = sc_arena_calloc(s->arena, nq, 1);
	x.list = sc_arena_alloc(s->arena, nq * sizeof(int));
	x.alloc0 = sc_arena_alloc(s->arena, nq * sizeof(res3_t));
	x.np0 = sc_arena_alloc(s->arena, nq * sizeof(res3_t));
	if (!x.remaining || !x.involved || !x.touched || !x.list || !x.alloc0 || !x.np0)
		return SC_ENOMEM;
	int j;
	while ((j = sc__order_pop(s)) >= 0) {
		sjob_t *p = &s->jobs[j];
		if (p->step == 0 || !can_reclaim(s, p))
			continue;
		uint64_t key = sc__vfail_key(s, j, SC_ACT_RECLAIM);
		if (sc__vfail_seen(s, key))
			continue;
		x.queue = p->queue;
		for (int q = 0; q < s->nqueues; q++) {
			x.alloc0[q] = s->queues[q].allocated;
			x.np0[q] = s->queues[q].alloc_nonpreempt;
		}
		pick_ctx_t pc = {&x, j, -1, false};
		vunit_t *c;
		int nc = sc__victim_units(s, j, -1, reclaim_pick, &pc, &c);
		if (nc < 0)
			return nc;
		victim_rules_t rules = {reclaimable, &x, SC_ACT_RECLAIM, NULL,
		                        s->snap->config.reclaim_consolidating};
		sc_stmt_t st;
		sc__stmt_open(&st, s);
		rc = nc > 0 ? sc__find_victims(s, &st, j, c, nc, &rules) : 0;
		if (rc == 0)
			rc = sc__vfail_put(s, key); /* an equivalent job fails too */
		else if (rc == 1)
			rc = sc__commit_preemption(s, &st, j);
		if (rc < 0)
			return rc;
	}
	return 0;
}
