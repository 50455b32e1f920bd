/* Reservations against starvation (beyond KAI, after Slurm's backfill).
 *
 * Up to SC_MAX_RESERVATIONS jobs that have waited longer than
 * `reservations.after` (the highest priority, then the oldest) are
 * candidates. A candidate is tried in its ordinary turn of the queue order,
 * so a reservation never overrules fair-share order. If it does not fit for
 * lack of room (not because its queue's limit or quota refuses it), and its
 * queue stays within its fair share with it (a job over its share could be
 * reclaimed as soon as it started), the nodes where it will fit soonest are
 * reserved for it: running jobs are released in the order they are
 * expected to end (started + expectedRuntime; jobs without a runtime last,
 * oldest first), in a statement that is rolled back, until the waiting job
 * fits. For the rest of the cycle, in every action, another job may use a
 * reserved node only when it declares an expected runtime that ends before
 * the reservation's expected start, so backfill never delays the waiting
 * job. Without known end times the reservation is held until the job
 * starts. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/actions.h"
#include "core/statement.h"

typedef struct ending {
	int job;
	int64_t end; /* INT64_MAX when unknown */
	int64_t started;
} ending_t;

static int end_cmp(const void *x, const void *y)
{
	const ending_t *a = x, *b = y;
	if (a->end != b->end)
		return a->end < b->end ? -1 : 1;
	if (a->started != b->started)
		return a->started < b->started ? -1 : 1;
	return a->job - b->job;
}

/* When the job started: its oldest running pod, or now for a job placed
 * in this cycle; 0 when unknown. */
static int64_t oldest_start(const sc_sched_t *s, const sjob_t *jb)
{
	int64_t t = 0;
	bool now = false;
	for (int p = 0; p < jb->total; p++) {
		if (jb->pods[p].phase != SC_POD_RUNNING)
			continue;
		now |= jb->pods[p].placed_now;
		if (jb->pods[p].started_at > 0 && (t == 0 || jb->pods[p].started_at < t))
			t = jb->pods[p].started_at;
	}
	return t == 0 && now ? s->snap->now : t;
}

static int running_by_end(sc_sched_t *s, ending_t **out)
{
	ending_t *e = sc_arena_alloc(s->arena, ((size_t)s->njobs + 1) * sizeof(*e));
	if (!e)
		return SC_ENOMEM;
	int n = 0;
	for (int j = 0; j < s->njobs; j++) {
		const sjob_t *jb = &s->jobs[j];
		if (jb->nrunning == 0)
			continue;
		int64_t st = oldest_start(s, jb);
		int64_t rt = jb->spec->expected_runtime;
		e[n++] = (ending_t){j, (rt > 0 && st > 0) ? st + rt : INT64_MAX, st};
	}
	qsort(e, (size_t)n, sizeof(*e), end_cmp);
	*out = e;
	return n;
}

/* KAI's CanReclaimResources test on the leaf, in the state where the job
 * runs in place of the jobs released for it: allocated within the fair
 * share in every resource. A job that would put its queue over its share
 * gets no reservation: it could be reclaimed as soon as it started. */
static bool within_fair_share(const sc_sched_t *s, const sjob_t *jb)
{
	const squeue_t *q = &s->queues[jb->queue];
	for (int r = 0; r < SC_RES_COUNT; r++)
		if (q->allocated.v[r] > q->fair.v[r] + 1e-9)
			return false;
	return true;
}

/* Whole devices a pipelined pod could take now, over the cluster (what
 * pipeline.c's whole_ok counts), when every task of job j asks for whole
 * GPUs; -1 otherwise. */
static double whole_devices(const sc_sched_t *s, const sjob_t *jb)
{
	for (size_t t = 0; t < jb->spec->ntasks; t++) {
		const sc_request_t *r = &jb->spec->tasks[t].req;
		if (r->gpus <= 0 || r->mig || r->gpu_milli || r->gpu_memory)
			return -1;
	}
	double k = 0;
	size_t nn = sc_cluster_nnodes(s->cluster);
	for (size_t i = 0; i < nn; i++) {
		const sc_node_view_t *v = sc_cluster_node(s->cluster, (uint32_t)i);
		if (!v->schedulable || v->spec->mig_mode != SC_MIG_NONE)
			continue;
		for (int d = 0; d < v->gpu_count; d++)
			k += v->gpu_free[d] == SC_GPU_MILLI ||
			     (v->gpu_free[d] + v->gpu_rel[d] == SC_GPU_MILLI &&
			      v->gpu_shared[d] == v->shared_rel[d]);
	}
	return k;
}

/* Whether placing the step of a job of whole GPUs (whose every pending
 * pod the step takes) would put its leaf over its fair share, clearly
 * (within_fair_share would refuse it): its pods add exactly step_req,
 * wherever they go. */
static bool over_share(const sc_sched_t *s, const sjob_t *jb)
{
	if (jb->step != jb->npending)
		return false;
	const squeue_t *q = &s->queues[jb->queue];
	for (int r = 0; r < SC_RES_COUNT; r++)
		if (q->allocated.v[r] + jb->step_req.v[r] > q->fair.v[r] + 1e-6)
			return true;
	return false;
}

/* Releases running jobs in end order until job j fits; records the nodes
 * its pods would take and when. Everything is rolled back.
 *
 * Placing the job after each release scans every node: at 5,000 nodes with
 * thousands of jobs released before a 64-GPU gang fits, a second per cycle.
 * For a job of whole GPUs the scan waits until the devices that could be
 * free (counted once, plus at most each released pod's devices and one)
 * reach its step's: before that it cannot fit; nor while placing it
 * would put its queue over its fair share (releases of other queues' jobs
 * do not change that). The outcome is the same. */
static int reserve_for(sc_sched_t *s, int j, const ending_t *e, int n)
{
	sjob_t *jb = &s->jobs[j];
	sc_stmt_t st;
	sc__stmt_open(&st, s);
	int64_t when = -1;
	const char *saved = jb->reason;
	double devices = whole_devices(s, jb), need = jb->step_req.v[SC_RES_GPU];
	for (int i = 0; i < n && when < 0; i++) {
		const sjob_t *v = &s->jobs[e[i].job];
		if (e[i].job == j)
			continue;
		for (int p = 0; p < v->total; p++)
			if (v->pods[p].phase == SC_POD_RUNNING) {
				if (devices >= 0)
					devices += sc__pod_at(&v->pods[p])->ngpus + 1;
				int rc = sc__stmt_evict(&st, e[i].job, p, SC_ACT_ALLOCATE, j, NULL);
				if (rc < 0)
					return rc;
			}
		if (devices >= 0 && (devices + 1e-9 < need || over_share(s, jb)))
			continue; /* cannot fit yet, or would be refused */
		size_t mark = sc__stmt_mark(&st);
		int placed = sc__place_job(s, &st, j);
		if (placed < 0)
			return placed;
		if (sc__step_done(jb, placed) && within_fair_share(s, jb)) {
			when = e[i].end;
			for (size_t k = mark; k < st.nops; k++) {
				uint32_t node = st.ops[k].assign.node;
				s->reserved_by[node] = j;
				s->reserved_until[node] = when;
			}
		} else {
			sc__stmt_rollback(&st, mark); /* release more and try again */
		}
	}
	sc__stmt_rollback(&st, 0);
	jb->reason = saved;
	if (when < 0)
		return 0;
	jb->reservation = when;
	s->res_until[s->nres++] = when;
	int nres = 0;
	size_t nn = sc_cluster_nnodes(s->cluster);
	for (size_t i = 0; i < nn; i++)
		nres += s->reserved_by[i] == j;
	jb->reserved = sc_arena_alloc(s->arena, (size_t)nres * sizeof(uint32_t) + 1);
	if (!jb->reserved)
		return SC_ENOMEM;
	for (size_t i = 0; i < nn; i++)
		if (s->reserved_by[i] == j)
			jb->reserved[jb->nreserved++] = (uint32_t)i;
	if (when == INT64_MAX)
		jb->reason =
		    sc_arena_printf(s->arena, "%s; %d node%s reserved for it until it starts",
		                    saved ? saved : "waiting", nres, nres == 1 ? "" : "s");
	else
		jb->reason = sc_arena_printf(
		    s->arena, "%s; %d node%s reserved for it, expected to start in %llds",
		    saved ? saved : "waiting", nres, nres == 1 ? "" : "s",
		    (long long)(when - s->snap->now));
	return jb->reason ? 1 : SC_ENOMEM;
}

/* Whether job a goes before job b for a reservation: higher priority,
 * then the older (an equal one already in the list stays ahead). */
static bool ranks_first(const sjob_t *a, const sjob_t *b)
{
	return a->priority > b->priority ||
	       (a->priority == b->priority && a->spec->created <= b->spec->created);
}

/* The longest-waiting gang heads, best first, into cand; returns how many
 * (at most SC_MAX_RESERVATIONS). */
static int pick_candidates(const sc_sched_t *s, int cand[SC_MAX_RESERVATIONS])
{
	int64_t after = s->snap->config.reservation_after;
	int nc = 0;
	for (int j = 0; j < s->njobs; j++) {
		const sjob_t *jb = &s->jobs[j];
		/* A job without a creation time cannot be said to have waited. */
		if (jb->queue < 0 || jb->bad || jb->npending == 0 ||
		    jb->nrunning >= jb->min_member || jb->spec->created <= 0 ||
		    s->snap->now - jb->spec->created < after)
			continue;
		int k;
		if (nc < SC_MAX_RESERVATIONS) {
			k = nc++;
		} else {
			/* Full: the new job replaces the last candidate if it ranks above it. */
			k = SC_MAX_RESERVATIONS - 1;
			if (ranks_first(&s->jobs[cand[k]], jb))
				continue;
		}
		cand[k] = j;
		for (; k > 0 && !ranks_first(&s->jobs[cand[k - 1]], &s->jobs[cand[k]]); k--) {
			int t = cand[k];
			cand[k] = cand[k - 1];
			cand[k - 1] = t;
		}
	}
	return nc;
}

int sc__reserve_prepare(sc_sched_t *s)
{
	s->nres_cand = 0;
	s->nres = 0;
	s->reserved_by = NULL;
	if (s->snap->config.reservation_after <= 0)
		return 0;
	s->nres_cand = pick_candidates(s, s->res_cand);
	if (s->nres_cand == 0)
		return 0;
	size_t nn = sc_cluster_nnodes(s->cluster);
	s->reserved_by = sc_arena_alloc(s->arena, (nn + 1) * sizeof(int));
	s->reserved_until = sc_arena_alloc(s->arena, (nn + 1) * sizeof(int64_t));
	if (!s->reserved_by || !s->reserved_until)
		return SC_ENOMEM;
	for (size_t i = 0; i < nn; i++)
		s->reserved_by[i] = -1;
	return 0;
}

int sc__reserve_job(sc_sched_t *s, int j)
{
	int k = 0;
	while (k < s->nres_cand && s->res_cand[k] != j)
		k++;
	if (k == s->nres_cand || s->jobs[j].reservation)
		return 0;
	if (!s->ending) {
		int ne = running_by_end(s, &s->ending);
		if (ne < 0)
			return ne;
		s->nending = ne;
	}
	int rc = reserve_for(s, j, s->ending, s->nending);
	return rc < 0 ? rc : 0;
}
