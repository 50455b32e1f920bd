/* Actions that evict: preempt (inside a queue) and stale-gang eviction,
 * plus what reclaim (reclaim.c) shares with preempt: which pending jobs
 * may evict, in which order, and how a preemption is committed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/actions.h"
#include "core/reservation.h"
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
	/* Each action starts with no failure known (sc__vfail_seen). */
	s->vfail_commits = s->commits + 1;
	return sc__order_init(s, want_preemptor, NULL);
}

/* ---- failed searches, per class of preemptor ----------------------- */

uint64_t sc__vfail_key(sc_sched_t *s, int j, int action)
{
	sjob_t *jb = &s->jobs[j];
	if (jb->nrunning > 0 || jb->reservation || jb->nreserved)
		return 0; /* where its pods are, or its reservation, matters */
	if (!jb->shape_ok) {
		jb->shape = sc__job_shape(jb);
		jb->shape_ok = true;
	}
	uint64_t h = sc__mix(jb->shape, (uint64_t)action);
	h = sc__mix(h, (uint64_t)jb->queue);
	h = sc__mix(h, (uint64_t)(int64_t)jb->priority);
	h = sc__mix(h, (uint64_t)jb->preemptible * 2 + 1);
	h = sc__mix(h, (uint64_t)jb->step);
	for (int r = 0; r < SC_RES_COUNT; r++) {
		uint64_t bits;
		memcpy(&bits, &jb->step_req.v[r], sizeof(bits));
		h = sc__mix(h, bits);
	}
	if (s->reserved_by) {
		h = sc__mix(h, (uint64_t)s->nres);
		for (int r = 0; r < s->nres; r++)
			h = sc__mix(h, sc__ends_before(s, j, s->res_until[r]));
	}
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull; /* splitmix64's finalizer */
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
	h ^= h >> 31;
	return h | 1;
}

/* Forgets every failure once a statement was committed since. */
static void vfail_sync(sc_sched_t *s)
{
	if (s->vfail_commits == s->commits)
		return;
	if (s->nvfail)
		memset(s->vfail, 0, s->capvfail * sizeof(*s->vfail));
	s->nvfail = 0;
	s->vfail_commits = s->commits;
}

bool sc__vfail_seen(sc_sched_t *s, uint64_t key)
{
	vfail_sync(s);
	if (!key || !s->capvfail)
		return false;
	size_t mask = s->capvfail - 1;
	for (size_t i = key & mask; s->vfail[i]; i = (i + 1) & mask)
		if (s->vfail[i] == key)
			return true;
	return false;
}

int sc__vfail_put(sc_sched_t *s, uint64_t key)
{
	vfail_sync(s);
	if (!key)
		return 0;
	if ((s->nvfail + 1) * 2 > s->capvfail) {
		size_t cap = s->capvfail ? s->capvfail * 2 : 1024;
		uint64_t *n = sc_arena_calloc(s->arena, cap, sizeof(uint64_t));
		if (!n)
			return SC_ENOMEM;
		for (size_t i = 0; i < s->capvfail; i++) {
			if (!s->vfail[i])
				continue;
			size_t k = s->vfail[i] & (cap - 1);
			while (n[k])
				k = (k + 1) & (cap - 1);
			n[k] = s->vfail[i];
		}
		s->vfail = n;
		s->capvfail = cap;
	}
	size_t mask = s->capvfail - 1, i = key & mask;
	while (s->vfail[i]) {
		if (s->vfail[i] == key)
			return 0;
		i = (i + 1) & mask;
	}
	s->vfail[i] = key;
	s->nvfail++;
	return 0;
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
		uint64_t key = sc__vfail_key(s, j, SC_ACT_PREEMPT);
		if (sc__vfail_seen(s, key))
			continue;
		preempt_ctx_t x = {p->queue, p->priority, low};
		vunit_t *c;
		int nc = sc__victim_units(s, j, p->queue, preempt_pick, &x, &c);
		if (nc < 0)
			return nc;
		victim_rules_t rules = {NULL, &x, SC_ACT_PREEMPT, NULL, false};
		sc_stmt_t st;
		sc__stmt_open(&st, s);
		rc = nc > 0 ? sc__find_victims(s, &st, j, c, nc, &rules) : 0;
		if (rc == 0)
			rc = sc__vfail_put(s, key);
		else if (rc == 1)
			rc = sc__commit_preemption(s, &st, j);
		if (rc < 0)
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
