/* Fair share, KAI's way: per resource, top-down through the queue tree.
 *
 * Among the children of one parent (the roots share the cluster):
 *  1. each queue first gets min(quota, limit, request), its deserved part;
 *  2. what remains goes by priority bucket, highest first: inside a bucket
 *     it is water-filled by overQuotaWeight, each queue capped at its
 *     request and its limit, in rounds while some queue asked for less than
 *     its share; a bucket is satisfied before the next gets anything;
 *  3. when shares are in whole units (whole GPUs), the fractions left by
 *     step 2 go one unit at a time to the largest remainders, ties to the
 *     older queue.
 * A parent's fair share is then what its children divide. Request means
 * allocated + pending, so a queue never gets a share it cannot use. */
#include <math.h>
#include <stdlib.h>

#include "core/sched.h"

#define EPS 1e-9

typedef struct fs_ctx {
	sc_sched_t *s;
	int res;
	int *ids; /* siblings being divided */
	int n;
	double *demand;
	double *extra; /* over-quota part given in step 2 */
} fs_ctx_t;

static double demand_of(const squeue_t *q, int r)
{
	double d = q->requested.v[r];
	return d < q->limit.v[r] ? d : q->limit.v[r];
}

/* Step 1. When deserved parts exceed the capacity (quotas oversubscribed),
 * higher-priority queues are served first and a bucket that cannot be
 * satisfied is scaled down in proportion. */
static double give_deserved(fs_ctx_t *x, double cap)
{
	squeue_t *qs = x->s->queues;
	int done = 0;
	while (done < x->n) {
		int prio = -2147483647 - 1;
		for (int i = 0; i < x->n; i++)
			if (qs[x->ids[i]].fair.v[x->res] < 0 && qs[x->ids[i]].spec->priority > prio)
				prio = qs[x->ids[i]].spec->priority;
		double want = 0;
		for (int i = 0; i < x->n; i++) {
			squeue_t *q = &qs[x->ids[i]];
			if (q->fair.v[x->res] < 0 && q->spec->priority == prio)
				want += fmin(q->quota.v[x->res], x->demand[i]);
		}
		double scale = want > cap && want > 0 ? cap / want : 1.0;
		for (int i = 0; i < x->n; i++) {
			squeue_t *q = &qs[x->ids[i]];
			if (q->fair.v[x->res] >= 0 || q->spec->priority != prio)
				continue;
			q->fair.v[x->res] = fmin(q->quota.v[x->res], x->demand[i]) * scale;
			done++;
		}
		cap -= want * scale;
		if (cap < 0)
			cap = 0;
	}
	return cap;
}

/* Step 2 for one priority bucket; returns what is left. */
static double waterfill(fs_ctx_t *x, int prio, double left)
{
	squeue_t *qs = x->s->queues;
	while (left > EPS) {
		double w = 0;
		for (int i = 0; i < x->n; i++) {
			squeue_t *q = &qs[x->ids[i]];
			if (q->spec->priority == prio && q->weight.v[x->res] > 0 &&
			    q->fair.v[x->res] < x->demand[i] - EPS)
				w += q->weight.v[x->res];
		}
		if (w <= 0)
			break;
		double given = 0;
		bool capped = false;
		for (int i = 0; i < x->n; i++) {
			squeue_t *q = &qs[x->ids[i]];
			if (q->spec->priority != prio || q->weight.v[x->res] <= 0 ||
			    q->fair.v[x->res] >= x->demand[i] - EPS)
				continue;
			double share = left * q->weight.v[x->res] / w;
			double room = x->demand[i] - q->fair.v[x->res];
			if (share >= room) {
				share = room;
				capped = true;
			}
			q->fair.v[x->res] += share;
			x->extra[i] += share;
			given += share;
		}
		left -= given;
		if (!capped)
			break;
	}
	return left;
}

static bool integral(double v)
{
	return v >= SC_UNLIMITED || fabs(v - round(v)) < 1e-6;
}

/* Step 3: whole units only. Applies when every demand and deserved part at
 * this level is whole, as it is for GPU devices without shares. */
static void round_units(fs_ctx_t *x)
{
	squeue_t *qs = x->s->queues;
	double frac_total = 0;
	for (int i = 0; i < x->n; i++) {
		double deserved = qs[x->ids[i]].fair.v[x->res] - x->extra[i];
		if (!integral(x->demand[i]) || !integral(deserved))
			return;
	}
	/* extra[] now holds each queue's remainder below one unit. */
	for (int i = 0; i < x->n; i++) {
		double rem = x->extra[i] - floor(x->extra[i] + 1e-9);
		if (rem < 0)
			rem = 0;
		qs[x->ids[i]].fair.v[x->res] -= rem;
		x->extra[i] = rem;
		frac_total += rem;
	}
	long units = lround(floor(frac_total + 1e-6));
	while (units-- > 0) {
		int best = -1;
		for (int i = 0; i < x->n; i++) {
			squeue_t *q = &qs[x->ids[i]];
			if (x->extra[i] <= EPS || q->fair.v[x->res] + 1 > x->demand[i] + EPS)
				continue;
			const squeue_t *b = best < 0 ? NULL : &qs[x->ids[best]];
			if (best < 0 || x->extra[i] > x->extra[best] + EPS ||
			    (fabs(x->extra[i] - x->extra[best]) <= EPS &&
			     (q->spec->created != b->spec->created
			          ? q->spec->created < b->spec->created
			          : q->order < b->order)))
				best = i;
		}
		if (best < 0)
			break;
		qs[x->ids[best]].fair.v[x->res] += 1;
		x->extra[best] = 0;
	}
}

static void divide(sc_sched_t *s, int res, int *ids, int n, double cap);

static void divide_children(sc_sched_t *s, int res, int *ids, int n)
{
	for (int i = 0; i < n; i++) {
		squeue_t *q = &s->queues[ids[i]];
		if (q->nchildren)
			divide(s, res, q->children, q->nchildren, q->fair.v[res]);
	}
}

static int cmp_desc(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x < y) - (x > y);
}

static void divide(sc_sched_t *s, int res, int *ids, int n, double cap)
{
	double *demand = sc_arena_calloc(s->arena, (size_t)n, sizeof(double));
	double *extra = sc_arena_calloc(s->arena, (size_t)n, sizeof(double));
	int *prios = sc_arena_calloc(s->arena, (size_t)n, sizeof(int));
	if (!demand || !extra || !prios)
		return; /* out of memory: shares stay as they are (zero) */
	fs_ctx_t x = {s, res, ids, n, demand, extra};
	for (int i = 0; i < n; i++) {
		demand[i] = demand_of(&s->queues[ids[i]], res);
		s->queues[ids[i]].fair.v[res] = -1; /* not yet given */
		prios[i] = s->queues[ids[i]].spec->priority;
	}
	double left = give_deserved(&x, cap);
	qsort(prios, (size_t)n, sizeof(int), cmp_desc);
	for (int i = 0; i < n && left > EPS; i++)
		if (i == 0 || prios[i] != prios[i - 1])
			left = waterfill(&x, prios[i], left);
	if (res == SC_RES_GPU)
		round_units(&x);
	divide_children(s, res, ids, n);
}

void sc__fairshare(sc_sched_t *s)
{
	for (int r = 0; r < SC_RES_COUNT; r++)
		divide(s, r, s->roots, s->nroots, s->capacity.v[r]);
}
