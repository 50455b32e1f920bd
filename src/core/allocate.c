/* The allocate action: best queue -> its best job -> place the job's pods
 * in a statement -> commit only when at least minMember pods run.
 *
 * Before placement a job must keep every queue on its path within its
 * limit, and a non-preemptible job must stay within its queue's quota
 * (KAI's rule: non-preemptible work never runs over quota, where it could
 * not be reclaimed). Jobs whose shape already failed this cycle are skipped
 * with the same reason: allocate only ever shrinks free capacity. */
#include <stdio.h>
#include <string.h>

#include "core/statement.h"
#include "core/reservation.h"

static const char *res_name[SC_RES_COUNT] = {"gpu", "cpu", "memory"};

static void fmt_amount(char *buf, size_t n, int r, double v)
{
	if (r == SC_RES_GPU)
		snprintf(buf, n, "%g", v);
	else if (r == SC_RES_CPU)
		snprintf(buf, n, "%g", v / 1000.0);
	else
		snprintf(buf, n, "%.0fMi", v / (1024.0 * 1024.0));
}

bool sc__res_fits_limit(const sc_sched_t *s, int q, const res3_t *add, char *why, size_t n)
{
	for (; q >= 0; q = s->queues[q].parent) {
		const squeue_t *sq = &s->queues[q];
		for (int r = 0; r < SC_RES_COUNT; r++) {
			if (add->v[r] <= 0 ||
			    sq->allocated.v[r] + add->v[r] <= sq->limit.v[r] + 1e-9)
				continue;
			char a[32], b[32], c[32];
			fmt_amount(a, sizeof(a), r, sq->allocated.v[r]);
			fmt_amount(b, sizeof(b), r, add->v[r]);
			fmt_amount(c, sizeof(c), r, sq->limit.v[r]);
			snprintf(why, n, "queue %s would exceed its %s limit (%s used + %s > %s)",
			         sq->spec->name, res_name[r], a, b, c);
			return false;
		}
	}
	return true;
}

static bool within_quota_one(const sc_sched_t *s, int q, const res3_t *add, char *why, size_t n)
{
	const squeue_t *sq = &s->queues[q];
	for (int r = 0; r < SC_RES_COUNT; r++) {
		if (add->v[r] <= 0 ||
		    sq->alloc_nonpreempt.v[r] + add->v[r] <= sq->quota.v[r] + 1e-9)
			continue;
		char a[32], b[32], c[32];
		fmt_amount(a, sizeof(a), r, sq->alloc_nonpreempt.v[r]);
		fmt_amount(b, sizeof(b), r, add->v[r]);
		fmt_amount(c, sizeof(c), r, sq->quota.v[r]);
		snprintf(
		    why, n,
		    "non-preemptible job must stay within queue %s's %s quota (%s used + %s > %s)",
		    sq->spec->name, res_name[r], a, b, c);
		return false;
	}
	return true;
}

/* KAI's resultsWithNonPreemptibleOverQuota: every queue from the leaf up
 * keeps its non-preemptible work within its quota. */
static bool within_quota(const sc_sched_t *s, int q, const res3_t *add, char *why, size_t n)
{
	for (; q >= 0; q = s->queues[q].parent)
		if (!within_quota_one(s, q, add, why, n))
			return false;
	return true;
}

/* ---- failure cache ------------------------------------------------- */

/* A hash of everything that decides whether a job fits, and of the task
 * names its reason quotes: its shape, and where reservations hold nodes.
 * Jobs that already hold pods are never cached: where those pods are
 * matters. */
static uint64_t signature(sc_sched_t *s, int job)
{
	sjob_t *j = &s->jobs[job];
	if (!j->shape_ok) { /* its pods were evicted earlier in the cycle */
		j->shape = sc__job_shape(j);
		j->shape_ok = true;
	}
	uint64_t h = j->shape;
	/* The declared runtime matters only for backfill onto reserved nodes,
	 * and there only as whether it ends before each reservation starts:
	 * hashing the runtime itself made every job of a trace a shape of its
	 * own (simulate --time spent 60 % of its time explaining). */
	if (s->reserved_by) {
		h = sc__mix(h, (uint64_t)s->nres);
		for (int r = 0; r < s->nres; r++)
			h = sc__mix(h, sc__ends_before(s, job, s->res_until[r]));
	}
	/* Spread the last mixes over every bit (splitmix64's finalizer): the
	 * low bit is forced below, and mix() of 0 or 1 may differ only there. */
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
	h ^= h >> 31;
	return h | 1; /* never 0, which marks an empty slot */
}

static const char *cache_get(const sc_sched_t *s, uint64_t sig)
{
	if (!s->capfail)
		return NULL;
	size_t mask = s->capfail - 1;
	for (size_t i = sig & mask; s->fail_sig[i]; i = (i + 1) & mask)
		if (s->fail_sig[i] == sig)
			return s->fail_reason[i];
	return NULL;
}

static int cache_put(sc_sched_t *s, uint64_t sig, const char *reason)
{
	if ((s->nfail + 1) * 2 > s->capfail) {
		size_t cap = s->capfail ? s->capfail * 2 : 1024;
		uint64_t *ns = sc_arena_calloc(s->arena, cap, sizeof(uint64_t));
		const char **nr = sc_arena_calloc(s->arena, cap, sizeof(char *));
		if (!ns || !nr)
			return SC_ENOMEM;
		for (size_t i = 0; i < s->capfail; i++) {
			if (!s->fail_sig[i])
				continue;
			size_t k = s->fail_sig[i] & (cap - 1);
			while (ns[k])
				k = (k + 1) & (cap - 1);
			ns[k] = s->fail_sig[i];
			nr[k] = s->fail_reason[i];
		}
		s->fail_sig = ns;
		s->fail_reason = nr;
		s->capfail = cap;
	}
	size_t mask = s->capfail - 1, i = sig & mask;
	while (s->fail_sig[i])
		i = (i + 1) & mask;
	s->fail_sig[i] = sig;
	s->fail_reason[i] = reason;
	s->nfail++;
	return 0;
}

/* ---- the action ---------------------------------------------------- */

/* Tries job j's next step; returns 1 when it was committed, 0 when not (the
 * reason is on the job), or an error. */
static int try_job(sc_sched_t *s, int j)
{
	sjob_t *jb = &s->jobs[j];
	char why[256];
	s->jobs_considered++;
	if (jb->step == 0)
		return 0;
	/* KAI's IsJobOverQueueCapacityFn on the tasks to allocate. */
	if (!sc__res_fits_limit(s, jb->queue, &jb->step_req, why, sizeof(why)) ||
	    (!jb->preemptible && !within_quota(s, jb->queue, &jb->step_req, why, sizeof(why)))) {
		jb->reason = sc_arena_strdup(s->arena, why);
		return jb->reason ? 0 : SC_ENOMEM;
	}
	bool cacheable = jb->nrunning == 0;
	if (cacheable) {
		jb->signature = signature(s, j);
		const char *r = cache_get(s, jb->signature);
		if (r) {
			jb->reason = r;
			s->signature_skips++;
			return sc__reserve_job(s, j);
		}
	}
	sc_stmt_t st;
	sc__stmt_open(&st, s);
	jb->reason = NULL;
	int placed = sc__place_job(s, &st, j);
	if (placed < 0)
		return placed;
	if (sc__step_done(jb, placed)) {
		jb->reason = NULL;
		sc__stmt_pipeline_job(&st, j);
		int rc = sc__stmt_commit(&st);
		return rc < 0 ? rc : 1;
	}
	sc__stmt_rollback(&st, 0);
	if (!jb->reason)
		jb->reason = "not enough free resources";
	if (cacheable) {
		int rc = cache_put(s, jb->signature, jb->reason);
		if (rc < 0)
			return rc;
	}
	/* Only a job its queue admits, that failed for room, may hold nodes. */
	return sc__reserve_job(s, j);
}

static bool want_any(sc_sched_t *s, int j, void *ctx)
{
	return true;
}

/* KAI's allocate: jobs in queue order; a job that got its step and still
 * has pending pods goes back into the order, so every job reaches its
 * minMember before any gets extra pods, and then they get one at a time. */
int sc__allocate(sc_sched_t *s)
{
	int rc = sc__reserve_prepare(s);
	if (rc < 0)
		return rc;
	rc = sc__order_init(s, want_any, NULL);
	if (rc < 0)
		return rc;
	int j;
	while ((j = sc__order_pop(s)) >= 0) {
		sjob_t *jb = &s->jobs[j];
		jb->done = true;
		rc = try_job(s, j);
		if (rc < 0)
			return rc;
		/* Its queue holds more now: re-sort its path (pushing the job
		 * back does that too). */
		if (rc == 1 && jb->npending > 0 && jb->nrunning >= jb->min_member)
			rc = sc__order_push(s, j);
		else if (rc == 1)
			sc__order_touch(s, jb->queue);
		if (rc < 0)
			return rc;
	}
	return 0;
}
