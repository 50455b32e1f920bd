/* The order in which allocate visits queues, KAI's rules, hierarchically.
 *
 * Each parent keeps a binary heap of its children that still have jobs to
 * try; the next job comes from walking heap tops from the root to a leaf.
 * Siblings compare, first rule that separates them wins:
 *   1. a queue that stays within its fair share with the job goes first;
 *   2. a starved queue (still within quota with the job) goes first;
 *   3. higher queue priority;
 *   4. smaller dominant share after the job (allocated / fair share);
 *   5. the older queue.
 * For a parent the job term is zero. After a job is tried only the path
 * from its leaf to the root changes, so only that path is re-sifted:
 * O(depth x log(siblings)) per job. */
#include <stdlib.h>
#include <string.h>

#include "core/sched.h"

#define EPS 1e-9

static int vroot(const sc_sched_t *s)
{
	return s->nqueues; /* a virtual root holding the top-level queues */
}

static const res3_t *head_req(const sc_sched_t *s, const squeue_t *q)
{
	static const res3_t zero;
	if (!q->leaf || q->next_job >= q->njobs)
		return &zero;
	return &s->jobs[q->jobs[q->next_job]].pod_req_sum_pending;
}

static double share_after(const squeue_t *q, const res3_t *jr)
{
	double m = 0;
	for (int r = 0; r < SC_RES_COUNT; r++) {
		double a = q->allocated.v[r] + jr->v[r];
		if (a <= EPS)
			continue;
		double v = q->fair.v[r] > EPS ? a / q->fair.v[r] : 1e18;
		if (v > m)
			m = v;
	}
	return m;
}

static bool within(const squeue_t *q, const res3_t *jr, const res3_t *bound, bool strict)
{
	bool any = false;
	for (int r = 0; r < SC_RES_COUNT; r++) {
		double a = q->allocated.v[r] + jr->v[r];
		if (jr->v[r] <= 0 && !strict)
			continue;
		if (strict && a <= EPS)
			continue;
		any = true;
		if (strict ? a >= bound->v[r] - EPS : a > bound->v[r] + EPS)
			return false;
	}
	return any || !strict;
}

/* True when a should be visited before b. */
static bool before(const sc_sched_t *s, int ia, int ib)
{
	const squeue_t *a = &s->queues[ia], *b = &s->queues[ib];
	const res3_t *ja = head_req(s, a), *jb = head_req(s, b);
	bool strict_a = !a->leaf, strict_b = !b->leaf;
	bool fa = within(a, ja, &a->fair, strict_a), fb = within(b, jb, &b->fair, strict_b);
	if (fa != fb)
		return fa;
	bool sa = within(a, ja, &a->quota, strict_a), sb = within(b, jb, &b->quota, strict_b);
	if (sa != sb)
		return sa;
	if (a->spec->priority != b->spec->priority)
		return a->spec->priority > b->spec->priority;
	double da = share_after(a, ja), db = share_after(b, jb);
	if (da < db - EPS || da > db + EPS)
		return da < db;
	if (a->spec->created != b->spec->created)
		return a->spec->created < b->spec->created;
	return a->order < b->order;
}

static void heap_swap(sc_sched_t *s, squeue_t *p, int i, int j)
{
	int t = p->heap[i];
	p->heap[i] = p->heap[j];
	p->heap[j] = t;
	s->queues[p->heap[i]].heap_pos = i;
	s->queues[p->heap[j]].heap_pos = j;
}

static void sift(sc_sched_t *s, squeue_t *p, int i)
{
	while (i > 0 && before(s, p->heap[i], p->heap[(i - 1) / 2])) {
		heap_swap(s, p, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		if (l < p->nheap && before(s, p->heap[l], p->heap[m]))
			m = l;
		if (r < p->nheap && before(s, p->heap[r], p->heap[m]))
			m = r;
		if (m == i)
			return;
		heap_swap(s, p, i, m);
		i = m;
	}
}

static void heap_remove(sc_sched_t *s, squeue_t *p, int child)
{
	int i = s->queues[child].heap_pos;
	if (i < 0)
		return;
	s->queues[child].heap_pos = -1;
	p->nheap--;
	if (i == p->nheap)
		return;
	p->heap[i] = p->heap[p->nheap];
	s->queues[p->heap[i]].heap_pos = i;
	sift(s, p, i);
}

static int parent_of(const sc_sched_t *s, int q)
{
	return s->queues[q].parent >= 0 ? s->queues[q].parent : vroot(s);
}

static bool active(const squeue_t *q)
{
	return q->leaf ? q->next_job < q->njobs : q->nheap > 0;
}

/* Job order inside a queue: higher priority, then older, then input order.
 * Also the order in which reclaim and preempt consider pending jobs. */
int sc__job_order_cmp(const void *x, const void *y, void *ctx)
{
	const sc_sched_t *s = ctx;
	const sjob_t *a = &s->jobs[*(const int *)x], *b = &s->jobs[*(const int *)y];
	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	if (a->spec->created != b->spec->created)
		return a->spec->created < b->spec->created ? -1 : 1;
	return a->index < b->index ? -1 : 1;
}

static int fill_leaf_jobs(sc_sched_t *s)
{
	for (int q = 0; q < s->nqueues; q++) {
		squeue_t *sq = &s->queues[q];
		sq->jobs = sc_arena_calloc(s->arena, (size_t)sq->njobs + 1, sizeof(int));
		if (!sq->jobs)
			return SC_ENOMEM;
		sq->njobs = 0;
	}
	for (int j = 0; j < s->njobs; j++) {
		sjob_t *jb = &s->jobs[j];
		if (jb->queue >= 0 && !jb->bad && jb->npending > 0)
			s->queues[jb->queue].jobs[s->queues[jb->queue].njobs++] = j;
	}
	for (int q = 0; q < s->nqueues; q++)
		if (s->queues[q].njobs > 1)
			qsort_r(s->queues[q].jobs, (size_t)s->queues[q].njobs, sizeof(int),
			        sc__job_order_cmp, s);
	return 0;
}

int sc__order_init(sc_sched_t *s)
{
	int rc = fill_leaf_jobs(s);
	if (rc < 0)
		return rc;
	squeue_t *root = &s->queues[vroot(s)];
	memset(root, 0, sizeof(*root));
	root->children = s->roots;
	root->nchildren = s->nroots;
	root->parent = -1;
	for (int q = 0; q <= s->nqueues; q++) {
		squeue_t *sq = &s->queues[q];
		sq->heap = sc_arena_calloc(s->arena, (size_t)sq->nchildren + 1, sizeof(int));
		if (!sq->heap)
			return SC_ENOMEM;
		sq->nheap = 0;
		sq->heap_pos = -1;
		sq->next_job = 0;
	}
	/* Insert active queues deepest first so parents see their children. */
	int maxd = 0;
	for (int q = 0; q < s->nqueues; q++)
		if (s->queues[q].depth > maxd)
			maxd = s->queues[q].depth;
	for (int d = maxd; d >= 0; d--)
		for (int q = 0; q < s->nqueues; q++) {
			squeue_t *sq = &s->queues[q];
			if (sq->depth != d || !active(sq))
				continue;
			squeue_t *p = &s->queues[parent_of(s, q)];
			p->heap[p->nheap] = q;
			sq->heap_pos = p->nheap++;
			sift(s, p, sq->heap_pos);
		}
	return 0;
}

int sc__order_next(sc_sched_t *s)
{
	squeue_t *q = &s->queues[vroot(s)];
	if (!q->nheap)
		return -1;
	int id = q->heap[0];
	while (!s->queues[id].leaf)
		id = s->queues[id].heap[0];
	return id;
}

void sc__order_update(sc_sched_t *s, int leaf)
{
	for (int q = leaf; q != vroot(s); q = parent_of(s, q)) {
		squeue_t *p = &s->queues[parent_of(s, q)];
		if (s->queues[q].heap_pos < 0)
			continue;
		if (active(&s->queues[q]))
			sift(s, p, s->queues[q].heap_pos);
		else
			heap_remove(s, p, q);
	}
}
