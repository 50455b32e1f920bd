/* The order in which actions visit jobs: KAI's JobsOrderByQueues with the
 * proportion plugin's queue order (queue_order.go GetQueueOrderResult) and
 * the priority and elastic plugins' job order.
 *
 * Each parent keeps a binary heap of its children that still have jobs;
 * each leaf a heap of its jobs. The next job comes from walking heap tops
 * from the root to a leaf. Two queues compare with the job each would
 * offer next (for a parent, the job its best child offers), the first rule
 * that separates them wins:
 *   1. a queue not above its fair share (above means: in every resource,
 *      prioritizeUnderUtilized) goes first;
 *   2. a queue that stays within its quota with the job goes first
 *      (prioritizeUnderQuotaWithJob);
 *   3. higher queue priority (prioritizePrioritized);
 *   4. a queue that would use a resource of which it may have none goes
 *      last (penalizeZeroShareWithJob);
 *   5. smaller dominant share with the job: allocated / allocatable share,
 *      the cluster's capacity standing in for an unlimited one
 *      (prioritizeSmallerResourceShare);
 *   6. the same without the job (prioritizeSmallerResourceShareWithoutTask);
 *   7. the smaller allocatable share (prioritizeBasedOnAllocatableShare);
 *   8. the older queue, then input order.
 * The job term is what the job's next allocation step asks for (KAI's
 * GetTasksToAllocateInitResource): the pods that bring it to minMember,
 * or one pod once it is there. After a job is taken or put back only the
 * path from its leaf to the root changes, so only that path is re-sifted:
 * O(depth x log(siblings)) per job. */
#include <stdlib.h>
#include <string.h>

#include "core/sched.h"

#define EPS 1e-9

static int vroot(const sc_sched_t *s)
{
	return s->nqueues; /* a virtual root holding the top-level queues */
}

static int parent_of(const sc_sched_t *s, int q)
{
	return s->queues[q].parent >= 0 ? s->queues[q].parent : vroot(s);
}

/* ---- the job's next step --------------------------------------------- */

/* Job j's step and step_req from its pending pods (getNumTasksToAllocate). */
static void job_step(sc_sched_t *s, int j)
{
	sjob_t *jb = &s->jobs[j];
	int want = jb->nrunning < jb->min_member ? jb->min_member - jb->nrunning : 1;
	if (!jb->touched && want >= jb->npending) {
		/* Every pending pod, unchanged since the snapshot: the sum
		 * taken then (the common case of a whole gang). */
		jb->step = jb->npending;
		jb->step_req = jb->pod_req_sum_pending;
		return;
	}
	memset(&jb->step_req, 0, sizeof(jb->step_req));
	jb->step = 0;
	for (int p = 0; p < jb->total && jb->step < want; p++) {
		if (jb->pods[p].phase != SC_POD_PENDING)
			continue;
		res3_t r = sc__pod_res(s, &jb->spec->tasks[jb->pods[p].task].req, NULL);
		for (int k = 0; k < SC_RES_COUNT; k++)
			jb->step_req.v[k] += r.v[k];
		jb->step++;
	}
}

/* ---- job order ------------------------------------------------------- */

/* KAI's elastic JobOrderFn: below minMember first, then exactly at it,
 * then above it. */
static int elastic_state(const sjob_t *j)
{
	return j->nrunning < j->min_member ? 0 : j->nrunning == j->min_member ? 1 : 2;
}

/* Job order inside a queue: higher priority (priority plugin), elastic
 * state, then older, then input order. */
static int job_order_cmp(const void *x, const void *y, void *ctx)
{
	const sc_sched_t *s = ctx;
	const sjob_t *a = &s->jobs[*(const int *)x], *b = &s->jobs[*(const int *)y];
	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	int ea = elastic_state(a), eb = elastic_state(b);
	if (ea != eb)
		return ea < eb ? -1 : 1;
	if (a->spec->created != b->spec->created)
		return a->spec->created < b->spec->created ? -1 : 1;
	return a->index < b->index ? -1 : (a->index > b->index);
}

/* The part of the job order that cannot change within a cycle: higher
 * priority, older, input order (job_order_cmp without the elastic state). */
static int job_static_cmp(const void *x, const void *y, void *ctx)
{
	const sc_sched_t *s = ctx;
	const sjob_t *a = &s->jobs[*(const int *)x], *b = &s->jobs[*(const int *)y];
	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	if (a->spec->created != b->spec->created)
		return a->spec->created < b->spec->created ? -1 : 1;
	return a->index < b->index ? -1 : (a->index > b->index);
}

/* Sorts every leaf's jobs by the static part of the job order, once per
 * cycle: each action's sc__order_init then only splits runs of equal
 * priority by elastic state (O(jobs)), where it sorted all the jobs again
 * (five actions, 100,000 jobs: a sixth of the core's time at 10k nodes). */
static int presort(sc_sched_t *s)
{
	int most = 0;
	for (int q = 0; q < s->nqueues; q++) {
		squeue_t *sq = &s->queues[q];
		sq->nsorted = 0;
		sq->sorted = NULL;
		if (!sq->leaf)
			continue;
		sq->sorted = sc_arena_alloc(s->arena, ((size_t)sq->njobs_all + 1) * sizeof(int));
		if (!sq->sorted)
			return SC_ENOMEM;
		if (sq->njobs_all > most)
			most = sq->njobs_all;
	}
	s->order_tmp = sc_arena_alloc(s->arena, (2 * (size_t)most + 1) * sizeof(int));
	if (!s->order_tmp)
		return SC_ENOMEM;
	for (int j = 0; j < s->njobs; j++) {
		int q = s->jobs[j].queue;
		if (q >= 0)
			s->queues[q].sorted[s->queues[q].nsorted++] = j;
	}
	for (int q = 0; q < s->nqueues; q++) {
		squeue_t *sq = &s->queues[q];
		if (sq->nsorted > 1)
			qsort_r(sq->sorted, (size_t)sq->nsorted, sizeof(int), job_static_cmp, s);
	}
	s->presorted = true;
	return 0;
}

/* Leaf q's jobs that `want` takes, in job order: its static order with each
 * run of equal priority split by elastic state (stable), which is what
 * sorting them with job_order_cmp gives. Each taken job's step is made. */
static void fill_leaf(sc_sched_t *s, squeue_t *sq, bool (*want)(sc_sched_t *, int, void *),
                      void *ctx)
{
	int *t1 = s->order_tmp, *t2 = s->order_tmp + sq->nsorted;
	int i = 0;
	while (i < sq->nsorted) {
		int prio = s->jobs[sq->sorted[i]].priority, n1 = 0, n2 = 0;
		for (; i < sq->nsorted && s->jobs[sq->sorted[i]].priority == prio; i++) {
			int j = sq->sorted[i];
			sjob_t *jb = &s->jobs[j];
			if (jb->bad || jb->npending == 0 || !want(s, j, ctx))
				continue;
			job_step(s, j);
			int e = elastic_state(jb);
			if (e == 0)
				sq->jobs[sq->njobs++] = j;
			else if (e == 1)
				t1[n1++] = j;
			else
				t2[n2++] = j;
		}
		memcpy(sq->jobs + sq->njobs, t1, (size_t)n1 * sizeof(int));
		sq->njobs += n1;
		memcpy(sq->jobs + sq->njobs, t2, (size_t)n2 * sizeof(int));
		sq->njobs += n2;
	}
}

static bool job_before(sc_sched_t *s, int a, int b)
{
	return job_order_cmp(&a, &b, s) < 0;
}

/* A leaf's jobs are a sorted array consumed from `next_job`, plus a small
 * heap of jobs put back (elastic jobs that took a step and want more): most
 * jobs are tried once, so sorting once is cheaper than a heap of all. */
static void back_sift(sc_sched_t *s, squeue_t *q, int i)
{
	int *h = q->back;
	while (i > 0 && job_before(s, h[i], h[(i - 1) / 2])) {
		int t = h[i];
		h[i] = h[(i - 1) / 2];
		h[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		if (l < q->nback && job_before(s, h[l], h[m]))
			m = l;
		if (r < q->nback && job_before(s, h[r], h[m]))
			m = r;
		if (m == i)
			return;
		int t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/* The leaf's next job, or -1; *from_back says where it is. */
static int leaf_head(sc_sched_t *s, const squeue_t *q, bool *from_back)
{
	int a = q->next_job < q->njobs ? q->jobs[q->next_job] : -1;
	int b = q->nback ? q->back[0] : -1;
	*from_back = b >= 0 && (a < 0 || job_before(s, b, a));
	return *from_back ? b : a;
}

static void leaf_refresh(sc_sched_t *s, squeue_t *q)
{
	bool b;
	q->head = leaf_head(s, q, &b);
}

/* ---- queue order ----------------------------------------------------- */

static res3_t with_job(const squeue_t *q, const res3_t *jr)
{
	res3_t a = q->allocated;
	for (int r = 0; jr && r < SC_RES_COUNT; r++)
		a.v[r] += jr->v[r];
	return a;
}

/* KAI's ResourceQuantities.LessEqual, unlimited being the largest. */
static bool less_equal(const res3_t *a, const res3_t *b)
{
	for (int r = 0; r < SC_RES_COUNT; r++)
		if (b->v[r] < SC_UNLIMITED && a->v[r] > b->v[r] + EPS)
			return false;
	return true;
}

/* KAI's GetAllocatableShare: what the queue may hold when others ask
 * (computed once per cycle into q->allocatable by sc__fairshare). */
res3_t sc__allocatable(const squeue_t *q)
{
	res3_t a;
	for (int r = 0; r < SC_RES_COUNT; r++) {
		if (q->quota.v[r] >= SC_UNLIMITED) {
			a.v[r] = q->limit.v[r];
			continue;
		}
		double v = q->quota.v[r] > q->fair.v[r] ? q->quota.v[r] : q->fair.v[r];
		a.v[r] = v < q->limit.v[r] ? v : q->limit.v[r];
	}
	return a;
}

/* Above its fair share in every resource (fair share Less allocated). */
static bool over_utilized(const squeue_t *q)
{
	for (int r = 0; r < SC_RES_COUNT; r++)
		if (q->fair.v[r] + EPS >= q->allocated.v[r])
			return false;
	return true;
}

static bool zero_share_violation(const squeue_t *q, const res3_t *alloc)
{
	const res3_t share = q->allocatable;
	for (int r = 0; r < SC_RES_COUNT; r++)
		if (share.v[r] == 0 && alloc->v[r] > EPS)
			return true;
	return false;
}

/* KAI's GetDominantResourceShare of an allocation. */
static double dominant_share(const sc_sched_t *s, const squeue_t *q, const res3_t *alloc)
{
	const res3_t share = q->allocatable;
	double m = 0;
	for (int r = 0; r < SC_RES_COUNT; r++) {
		double cap = share.v[r] >= SC_UNLIMITED ? s->capacity.v[r] : share.v[r];
		double v = cap == 0 ? alloc->v[r] * 1000 : alloc->v[r] / cap;
		if (v > m)
			m = v;
	}
	return m;
}

/* GetQueueOrderResult on queues ia and ib: wa/wb are what each would hold
 * with its job (rules 2 and 4), da/db what its dominant share is taken of
 * (rule 5: the same for allocation; allocated minus the victims for
 * victims). < 0 when a goes first, > 0 when b does. */
int sc__queue_cmp_with(const sc_sched_t *s, int ia, int ib, const res3_t *wa, const res3_t *wb,
                       const res3_t *da, const res3_t *db)
{
	const squeue_t *a = &s->queues[ia], *b = &s->queues[ib];
	bool oa = over_utilized(a), ob = over_utilized(b);
	if (oa != ob)
		return oa ? 1 : -1;
	bool sa = less_equal(wa, &a->quota), sb = less_equal(wb, &b->quota);
	if (sa != sb)
		return sa ? -1 : 1;
	if (a->spec->priority != b->spec->priority)
		return a->spec->priority > b->spec->priority ? -1 : 1;
	bool za = zero_share_violation(a, wa), zb = zero_share_violation(b, wb);
	if (za != zb)
		return za ? 1 : -1;
	double sha = dominant_share(s, a, da), shb = dominant_share(s, b, db);
	if (sha < shb - EPS || sha > shb + EPS)
		return sha < shb ? -1 : 1;
	sha = dominant_share(s, a, &a->allocated);
	shb = dominant_share(s, b, &b->allocated);
	if (sha < shb - EPS || sha > shb + EPS)
		return sha < shb ? -1 : 1;
	bool ale = less_equal(&a->allocatable, &b->allocatable);
	bool ble = less_equal(&b->allocatable, &a->allocatable);
	if (ale != ble)
		return ale ? -1 : 1;
	if (a->spec->created != b->spec->created)
		return a->spec->created < b->spec->created ? -1 : 1;
	return a->order < b->order ? -1 : (a->order > b->order);
}

/* The dominant share of an allocation from the queue's inverse shares. */
static double dominant_inv(const squeue_t *q, const res3_t *alloc)
{
	double m = 0;
	for (int r = 0; r < SC_RES_COUNT; r++) {
		double v = alloc->v[r] * q->k_inv.v[r];
		if (v > m)
			m = v;
	}
	return m;
}

/* Computes queue q's terms of GetQueueOrderResult with the job it offers
 * now (those that depend on its holdings and its job). A parent offers its
 * best child's job: the child's terms are fresh (paths are re-sorted from
 * the leaf up, and queues are inserted deepest first). */
static void refresh_key(sc_sched_t *s, int q)
{
	squeue_t *sq = &s->queues[q];
	if (sq->leaf)
		sq->k_req = sq->head >= 0 ? &s->jobs[sq->head].step_req : NULL;
	else
		sq->k_req = sq->nheap ? s->queues[sq->heap[0]].k_req : NULL;
	res3_t w = with_job(sq, sq->k_req);
	sq->k_over = over_utilized(sq);
	sq->k_within = less_equal(&w, &sq->quota);
	sq->k_zero = zero_share_violation(sq, &w);
	sq->k_share = dominant_inv(sq, &w);
	sq->k_share0 = dominant_inv(sq, &sq->allocated);
}

/* True when a should be visited before b: queue_cmp on the queues' current
 * jobs, from their refreshed terms. */
static bool before(const sc_sched_t *s, int ia, int ib)
{
	const squeue_t *a = &s->queues[ia], *b = &s->queues[ib];
	if (a->k_over != b->k_over)
		return b->k_over;
	if (a->k_within != b->k_within)
		return a->k_within;
	if (a->spec->priority != b->spec->priority)
		return a->spec->priority > b->spec->priority;
	if (a->k_zero != b->k_zero)
		return b->k_zero;
	if (a->k_share < b->k_share - EPS || a->k_share > b->k_share + EPS)
		return a->k_share < b->k_share;
	if (a->k_share0 < b->k_share0 - EPS || a->k_share0 > b->k_share0 + EPS)
		return a->k_share0 < b->k_share0;
	bool ale = less_equal(&a->allocatable, &b->allocatable);
	bool ble = less_equal(&b->allocatable, &a->allocatable);
	if (ale != ble)
		return ale;
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

static bool active(const squeue_t *q)
{
	return q->leaf ? q->head >= 0 : q->nheap > 0;
}

/* Re-sifts the path from q to the root, inserting queues that became
 * active and removing those that ran out of jobs. */
static void update_path(sc_sched_t *s, int q)
{
	for (; q != vroot(s); q = parent_of(s, q)) {
		squeue_t *p = &s->queues[parent_of(s, q)];
		squeue_t *sq = &s->queues[q];
		if (sq->heap_pos < 0) {
			if (!active(sq))
				continue;
			p->heap[p->nheap] = q;
			sq->heap_pos = p->nheap++;
		}
		if (active(sq)) {
			refresh_key(s, q);
			sift(s, p, sq->heap_pos);
		} else {
			heap_remove(s, p, q);
		}
	}
}

int sc__order_init(sc_sched_t *s, bool (*want)(sc_sched_t *, int, void *), void *ctx)
{
	squeue_t *root = &s->queues[vroot(s)];
	memset(root, 0, sizeof(*root));
	root->children = s->roots;
	root->nchildren = s->nroots;
	root->parent = -1;
	for (int q = 0; q <= s->nqueues; q++) {
		squeue_t *sq = &s->queues[q];
		if (!sq->heap || sq->heap_cap < sq->nchildren + 1) {
			sq->heap =
			    sc_arena_calloc(s->arena, (size_t)sq->nchildren + 1, sizeof(int));
			sq->heap_cap = sq->nchildren + 1;
		}
		if (q < s->nqueues && sq->leaf && (!sq->jobs || sq->jobs_cap < sq->njobs_all + 1)) {
			sq->jobs =
			    sc_arena_alloc(s->arena, ((size_t)sq->njobs_all + 1) * sizeof(int));
			sq->back = NULL;
			sq->jobs_cap = sq->njobs_all + 1;
		}
		if (!sq->heap || (q < s->nqueues && sq->leaf && !sq->jobs))
			return SC_ENOMEM;
		sq->nheap = 0;
		sq->heap_pos = -1;
		sq->k_req = NULL;
		for (int r = 0; q < s->nqueues && r < SC_RES_COUNT; r++) {
			/* As dominant_share: x/0 counts as x * 1000. */
			double share = sq->allocatable.v[r];
			double cap = share >= SC_UNLIMITED ? s->capacity.v[r] : share;
			sq->k_inv.v[r] = cap == 0 ? 1000 : 1 / cap;
		}
		sq->njobs = sq->next_job = sq->nback = 0;
		sq->head = -1;
	}
	if (!s->presorted && presort(s) < 0)
		return SC_ENOMEM;
	for (int q = 0; q < s->nqueues; q++) {
		squeue_t *sq = &s->queues[q];
		if (sq->leaf)
			fill_leaf(s, sq, want, ctx);
		leaf_refresh(s, sq);
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
			refresh_key(s, q);
			p->heap[p->nheap] = q;
			sq->heap_pos = p->nheap++;
			sift(s, p, sq->heap_pos);
		}
	return 0;
}

int sc__order_pop(sc_sched_t *s)
{
	squeue_t *q = &s->queues[vroot(s)];
	if (!q->nheap)
		return -1;
	int id = q->heap[0];
	while (!s->queues[id].leaf)
		id = s->queues[id].heap[0];
	squeue_t *leaf = &s->queues[id];
	bool from_back;
	int j = leaf_head(s, leaf, &from_back);
	if (from_back) {
		leaf->back[0] = leaf->back[--leaf->nback];
		if (leaf->nback > 1)
			back_sift(s, leaf, 0);
	} else {
		leaf->next_job++;
	}
	leaf_refresh(s, leaf);
	update_path(s, id);
	return j;
}

int sc__order_push(sc_sched_t *s, int j)
{
	int id = s->jobs[j].queue;
	squeue_t *leaf = &s->queues[id];
	if (!leaf->back &&
	    !(leaf->back = sc_arena_alloc(s->arena, (size_t)leaf->jobs_cap * sizeof(int))))
		return SC_ENOMEM;
	if (leaf->nback >= leaf->jobs_cap)
		return 0; /* cannot happen: a job is put back only after a pop */
	job_step(s, j);
	leaf->back[leaf->nback++] = j;
	back_sift(s, leaf, leaf->nback - 1);
	leaf_refresh(s, leaf);
	update_path(s, id);
	return 0;
}

void sc__order_touch(sc_sched_t *s, int q)
{
	if (q >= 0 && q < s->nqueues)
		update_path(s, q);
}
