/* KAI's victim order: the order in which reclaim and preempt consider
 * running jobs as victims (JobsOrderByQueues with VictimQueue set).
 *
 * It is the allocation order turned around. Among queues, the one that
 * allocate would visit last goes first: above its fair share, over its
 * quota, lower priority, larger dominant share once the victims already
 * taken from it are gone (so taking a victim makes a queue less likely to
 * give the next one: victims come from the most over-served queue, then
 * alternate), and, when all else ties, the newer queue. Inside a queue the
 * job allocate would take last goes first: lower priority, an elastic job's
 * spare pods before whole jobs, then the newest. Queues are compared
 * hierarchically, each parent with the head victim of its best child. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/victims.h"

typedef struct vo {
	sc_sched_t *s;
	vunit_t *u;     /* sorted by leaf, then by in-queue order */
	int *cur;       /* per leaf: next unit */
	int *remain;    /* per queue (and the virtual root): units left below */
	res3_t *valloc; /* per queue: allocated minus the victims taken */
	int *pick;      /* per parent: its chosen child in this step */
	int *head;      /* per queue: its head unit in this step */
	int *stamp;     /* per queue: the step head/pick belong to */
	/* Per parent (and the virtual root), its children that still have
	 * units below: act[abeg[q] .. abeg[q] + nact[q]), apos[c] is child
	 * c's place there. A parent compares only these (the order is total,
	 * so the place does not matter). */
	int *act, *abeg, *nact, *apos;
	int step;
} vo_t;

static int state_of(const sc_sched_t *s, const vunit_t *u)
{
	const sjob_t *j = &s->jobs[u->job];
	if (u->pod >= 0)
		return 2; /* a spare pod: its job is above minMember */
	return j->nrunning >= j->min_member ? 1 : 0;
}

/* In-queue order of victims, the reverse of the allocation job order:
 * queue, lower priority, spare pods before whole jobs above minMember
 * before gangs below it, newer job, later job, later pod (the whole job
 * after its pods). Packed into integers once per unit so that sorting
 * compares numbers instead of following pointers. */
typedef struct ukey {
	uint64_t k[4];
	int idx;
} ukey_t;

static void unit_key(const sc_sched_t *s, const vunit_t *u, int idx, ukey_t *key)
{
	const sjob_t *j = &s->jobs[u->job];
	key->k[0] = (uint64_t)(uint32_t)j->queue << 32 | ((uint32_t)u->priority ^ 0x80000000u);
	key->k[1] = (uint64_t)(2 - state_of(s, u));
	key->k[2] = UINT64_MAX - ((uint64_t)j->spec->created ^ (UINT64_C(1) << 63));
	key->k[3] =
	    (uint64_t)(UINT32_MAX - (uint32_t)u->job) << 32 | (UINT32_MAX - (uint32_t)(u->pod + 1));
	key->idx = idx;
}

static int key_cmp(const void *x, const void *y)
{
	const ukey_t *a = x, *b = y;
	for (int i = 0; i < 4; i++)
		if (a->k[i] != b->k[i])
			return a->k[i] < b->k[i] ? -1 : 1;
	return 0;
}

static bool is_leaf(const vo_t *x, int q)
{
	return q < x->s->nqueues && x->s->queues[q].leaf;
}

static int head_of(vo_t *x, int q);

/* Is queue a's victim taken before queue b's? */
static bool worse(vo_t *x, int a, int b)
{
	const sc_sched_t *s = x->s;
	res3_t da = x->valloc[a], db = x->valloc[b];
	const vunit_t *ha = &x->u[head_of(x, a)], *hb = &x->u[head_of(x, b)];
	for (int r = 0; r < SC_RES_COUNT; r++) {
		da.v[r] -= ha->res.v[r];
		db.v[r] -= hb->res.v[r];
	}
	return sc__queue_cmp_with(s, a, b, &s->queues[a].allocated, &s->queues[b].allocated, &da,
	                          &db) > 0;
}

/* The unit queue q offers next in this step (its subtree has some). */
static int head_of(vo_t *x, int q)
{
	if (x->stamp[q] == x->step)
		return x->head[q];
	int h;
	if (is_leaf(x, q)) {
		h = x->cur[q];
	} else {
		const int *kids = x->act + x->abeg[q];
		int best = kids[0];
		for (int i = 1; i < x->nact[q]; i++)
			if (worse(x, kids[i], best))
				best = kids[i];
		x->pick[q] = best;
		h = head_of(x, best);
	}
	x->stamp[q] = x->step;
	x->head[q] = h;
	return h;
}

static int parent_of(const sc_sched_t *s, int q)
{
	return s->queues[q].parent >= 0 ? s->queues[q].parent : s->nqueues;
}

/* Queue q has no units left below: out of its parent's active children. */
static void deactivate(vo_t *x, int q)
{
	int par = parent_of(x->s, q);
	int *a = x->act + x->abeg[par];
	int last = a[--x->nact[par]];
	a[x->apos[q]] = last;
	x->apos[last] = x->apos[q];
}

int sc__victim_order(sc_sched_t *s, vunit_t *u, int n)
{
	if (n <= 0)
		return 0;
	size_t nq = (size_t)s->nqueues + 1;
	vo_t x = {.s = s, .u = u};
	/* One reused block: per-queue state, then the output. */
	size_t ints = 9 * nq,
	       bytes = ints * sizeof(int) + nq * sizeof(res3_t) + (size_t)n * sizeof(vunit_t) + 64;
	char *blk = sc__scratch(s, SC_SCR_VO, bytes);
	if (!blk)
		return SC_ENOMEM;
	x.valloc = (res3_t *)blk;
	vunit_t *out = (vunit_t *)(x.valloc + nq);
	int *ip = (int *)(out + n);
	x.cur = ip;
	x.remain = ip + nq;
	x.pick = ip + 2 * nq;
	x.head = ip + 3 * nq;
	x.stamp = ip + 4 * nq;
	x.act = ip + 5 * nq;
	x.abeg = ip + 6 * nq;
	x.nact = ip + 7 * nq;
	x.apos = ip + 8 * nq;
	/* Sorted into out, then copied back, before out is used below. */
	ukey_t *keys = sc__scratch(s, SC_SCR_VOKEY, (size_t)n * sizeof(ukey_t));
	if (!keys)
		return SC_ENOMEM;
	for (int i = 0; i < n; i++)
		unit_key(s, &u[i], i, &keys[i]);
	qsort(keys, (size_t)n, sizeof(*keys), key_cmp);
	for (int i = 0; i < n; i++)
		out[i] = u[keys[i].idx];
	memcpy(u, out, (size_t)n * sizeof(*u));
	memset(x.remain, 0, nq * sizeof(int));
	memset(x.stamp, 0, nq * sizeof(int));
	memset(x.nact, 0, nq * sizeof(int));
	int off = 0;
	for (size_t q = 0; q < nq; q++) {
		x.abeg[q] = off;
		off += (int)q == s->nqueues ? s->nroots : s->queues[q].nchildren;
	}
	for (int q = 0; q < s->nqueues; q++)
		x.valloc[q] = s->queues[q].allocated;
	for (int i = 0; i < n; i++) {
		int q = s->jobs[u[i].job].queue;
		if (i == 0 || q != s->jobs[u[i - 1].job].queue)
			x.cur[q] = i;
		for (int a = q; a >= 0; a = s->queues[a].parent)
			x.remain[a]++;
		x.remain[s->nqueues]++;
	}
	for (int q = 0; q < s->nqueues; q++)
		if (x.remain[q] > 0) {
			int par = parent_of(s, q);
			x.apos[q] = x.nact[par];
			x.act[x.abeg[par] + x.nact[par]++] = q;
		}
	for (int k = 0; k < n; k++) {
		x.step = k + 1;
		int q = s->nqueues;
		head_of(&x, q);
		while (!is_leaf(&x, q))
			q = x.pick[q];
		vunit_t *v = &u[x.cur[q]++];
		out[k] = *v;
		out[k].order = k;
		for (int a = q; a >= 0; a = s->queues[a].parent) {
			if (--x.remain[a] == 0)
				deactivate(&x, a);
			for (int r = 0; r < SC_RES_COUNT; r++)
				x.valloc[a].v[r] -= v->res.v[r];
		}
		x.remain[s->nqueues]--;
	}
	memcpy(u, out, (size_t)n * sizeof(*u));
	return 0;
}
