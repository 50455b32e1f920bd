/* Fair share, KAI's way (plugins/proportion/resource_division), per
 * resource, top-down through the queue tree.
 *
 * Among the children of one parent (the roots share the cluster):
 *  1. setDeservedResource: each queue first gets min(quota, limit, request),
 *     its deserved part, even when the deserved parts add up to more than
 *     the capacity (quotas may be oversubscribed, e.g. after a node was
 *     drained; nothing is left over then);
 *  2. divideUpToFairShare: what remains goes by priority bucket, highest
 *     first, in rounds: each unsatisfied queue of the bucket is offered
 *     remaining x weight / (sum of weights) and takes its whole remaining
 *     request if that fits, else the floor of the offer (shares are kept in
 *     whole units); the fraction it could not take is remembered. Rounds
 *     repeat while some queue took less than it was offered;
 *  3. divideRemainingResource: the whole units left over by the floors go
 *     one at a time (or the last fraction) to the largest remembered
 *     fractions, bucket by bucket, ties to the older queue.
 * A parent's fair share is then what its children divide. Request means
 * allocated + pending (KAI's Request), capped by the limit where KAI uses
 * the requestable share. KAI also weighs historical usage (kValue); without
 * usage the weights are the overQuotaWeights, which is what happens here. */
#include <math.h>
#include <stdlib.h>

#include "core/sched.h"

#define EPS 1e-9

typedef struct fs_ctx {
	sc_sched_t *s;
	int res;
	int *ids; /* siblings being divided */
	int n;
	double *rem; /* fraction not given in the last round, < 0 = none */
} fs_ctx_t;

static squeue_t *q_of(const fs_ctx_t *x, int i)
{
	return &x->s->queues[x->ids[i]];
}

/* KAI's GetRequestableShare: the request, capped by the limit. */
static double requestable(const squeue_t *q, int r)
{
	return fmin(q->requested.v[r], q->limit.v[r]);
}

/* KAI's isQueueSatisfied: it asked for no more than it has, or its limit
 * is reached. */
static bool satisfied(const squeue_t *q, int r)
{
	return q->requested.v[r] <= q->fair.v[r] + EPS ||
	       (q->limit.v[r] < SC_UNLIMITED && q->limit.v[r] <= q->fair.v[r] + EPS);
}

static double remaining_request(const squeue_t *q, int r)
{
	double d = requestable(q, r) - q->fair.v[r];
	return d > EPS ? d : 0;
}

/* Step 1. Returns what the deserved parts leave of cap, never below 0. */
static double set_deserved(fs_ctx_t *x, double cap)
{
	double left = cap;
	for (int i = 0; i < x->n; i++) {
		squeue_t *q = q_of(x, i);
		double deserved = q->quota.v[x->res] >= SC_UNLIMITED ? cap : q->quota.v[x->res];
		double amount = fmin(deserved, requestable(q, x->res));
		q->fair.v[x->res] = amount;
		left -= amount;
	}
	return left > EPS ? left : 0;
}

/* Step 2 for the queues of one priority; returns what is left. */
static double divide_up_to_fair_share(fs_ctx_t *x, int prio, double left)
{
	int r = x->res;
	for (;;) {
		double total_w = 0, sum = 0;
		for (int i = 0; i < x->n; i++) {
			squeue_t *q = q_of(x, i);
			if (q->spec->priority == prio && remaining_request(q, r) > 0)
				total_w += q->weight.v[r];
		}
		if (total_w <= 0)
			break;
		for (int i = 0; i < x->n; i++) {
			squeue_t *q = q_of(x, i);
			if (q->spec->priority == prio && !satisfied(q, r))
				sum += q->weight.v[r] / total_w;
		}
		if (sum <= 0)
			break;
		double offer_all = left;
		bool again = false;
		for (int i = 0; i < x->n && left > EPS; i++) {
			squeue_t *q = q_of(x, i);
			if (q->spec->priority != prio || satisfied(q, r) || q->weight.v[r] <= 0)
				continue;
			double want = remaining_request(q, r);
			double offer = offer_all * (q->weight.v[r] / total_w) / sum;
			double give = 0;
			if (want <= offer + EPS) {
				give = want;
				x->rem[i] = -1; /* satisfied: nothing to remember */
			} else {
				/* Shares are limited in whole units ("for better
				 * usability", KAI says); the fraction is given out
				 * in step 3. */
				give = floor(offer + EPS);
				if (give < 0)
					give = 0;
				if (offer - give > EPS)
					x->rem[i] = offer - give;
			}
			if (give <= 0)
				continue;
			q->fair.v[r] += give;
			left -= give;
			again |= want < offer - EPS;
		}
		if (!again || left <= EPS)
			break;
	}
	return left > EPS ? left : 0;
}

/* Order of step 3: the largest remembered fraction, then the older queue,
 * then input order. */
static int rem_cmp(const void *a, const void *b, void *ctx)
{
	const fs_ctx_t *x = ctx;
	int i = *(const int *)a, k = *(const int *)b;
	if (fabs(x->rem[i] - x->rem[k]) > EPS)
		return x->rem[i] > x->rem[k] ? -1 : 1;
	const squeue_t *p = q_of(x, i), *q = q_of(x, k);
	if (p->spec->created != q->spec->created)
		return p->spec->created < q->spec->created ? -1 : 1;
	return p->order < q->order ? -1 : (p->order > q->order);
}

/* Step 3 for one priority; returns what is left. */
static double divide_remaining(fs_ctx_t *x, int prio, double left, int *scratch)
{
	int m = 0;
	for (int i = 0; i < x->n; i++)
		if (q_of(x, i)->spec->priority == prio && x->rem[i] > EPS)
			scratch[m++] = i;
	qsort_r(scratch, (size_t)m, sizeof(int), rem_cmp, x);
	for (int k = 0; k < m && left > EPS; k++) {
		double give = fmin(1, left);
		q_of(x, scratch[k])->fair.v[x->res] += give;
		left -= give;
	}
	return left > EPS ? left : 0;
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
	double *rem = sc_arena_alloc(s->arena, (size_t)n * sizeof(double) + 1);
	int *prios = sc_arena_calloc(s->arena, (size_t)n + 1, sizeof(int));
	int *scratch = sc_arena_calloc(s->arena, (size_t)n + 1, sizeof(int));
	if (!rem || !prios || !scratch)
		return; /* out of memory: shares stay as they are (zero) */
	fs_ctx_t x = {s, res, ids, n, rem};
	for (int i = 0; i < n; i++) {
		rem[i] = -1;
		prios[i] = s->queues[ids[i]].spec->priority;
	}
	qsort(prios, (size_t)n, sizeof(int), cmp_desc);
	double left = set_deserved(&x, cap);
	if (left > 0) {
		for (int i = 0; i < n; i++)
			if (i == 0 || prios[i] != prios[i - 1])
				left = divide_up_to_fair_share(&x, prios[i], left);
		for (int i = 0; i < n && left > 0; i++)
			if (i == 0 || prios[i] != prios[i - 1])
				left = divide_remaining(&x, prios[i], left, scratch);
	}
	divide_children(s, res, ids, n);
}

void sc__fairshare(sc_sched_t *s)
{
	for (int r = 0; r < SC_RES_COUNT; r++)
		divide(s, r, s->roots, s->nroots, s->capacity.v[r]);
	for (int q = 0; q < s->nqueues; q++)
		s->queues[q].allocatable = sc__allocatable(&s->queues[q]);
}
