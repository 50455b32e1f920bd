/* Consolidation: when a job does not fit only because free GPUs are
 * scattered, move a few preemptible pods (at most consolidation_max, KAI's
 * max-consolidation-preemptees) to other nodes so that it fits. A move is
 * valid only when every moved pod is placed again elsewhere; otherwise the
 * whole attempt is rolled back and nothing moves.
 *
 * For each pod of the job that finds no node, the node that needs the
 * fewest GPUs moved is cleared just enough, the job's pod goes there, and
 * the moved pods are placed again through the ordinary search. */
#include <stdlib.h>
#include <string.h>

#include "core/actions.h"
#include "core/reservation.h"
#include "core/statement.h"

#define MAX_ATTEMPTS 256 /* jobs tried per cycle: consolidation is costly */

typedef struct node_pods {
	int *start; /* per node: offset into list */
	int *list;  /* job << 16 | pod ... stored as pairs */
} node_pods_t;

static bool movable(const sc_sched_t *s, int j, int p)
{
	const sjob_t *jb = &s->jobs[j];
	/* A gang running below minMember is stale-gang eviction's to take:
	 * moving its pods would bind a pod that is then evicted again. */
	return jb->preemptible && jb->nrunning >= jb->min_member &&
	       jb->pods[p].phase == SC_POD_RUNNING && !jb->pods[p].placed_now &&
	       !jb->pods[p].evicted_now;
}

/* Pods per node, built once per action: pairs (job, pod) grouped by node. */
static int index_pods(sc_sched_t *s, node_pods_t *np)
{
	size_t n = sc_cluster_nnodes(s->cluster);
	np->start = sc_arena_calloc(s->arena, n + 2, sizeof(int));
	if (!np->start)
		return SC_ENOMEM;
	int total = 0;
	for (int j = 0; j < s->njobs; j++)
		for (int p = 0; p < s->jobs[j].total; p++)
			if (movable(s, j, p)) {
				np->start[s->jobs[j].pods[p].assign.node + 1]++;
				total++;
			}
	for (size_t i = 1; i <= n; i++)
		np->start[i] += np->start[i - 1];
	np->list = sc_arena_calloc(s->arena, 2 * (size_t)total + 2, sizeof(int));
	int *fill = sc_arena_calloc(s->arena, n + 1, sizeof(int));
	if (!np->list || !fill)
		return SC_ENOMEM;
	for (int j = 0; j < s->njobs; j++)
		for (int p = 0; p < s->jobs[j].total; p++)
			if (movable(s, j, p)) {
				uint32_t node = s->jobs[j].pods[p].assign.node;
				int at = np->start[node] + fill[node]++;
				np->list[2 * at] = j;
				np->list[2 * at + 1] = p;
			}
	return 0;
}

/* Reservations hold in every action: a node reserved for a long-waiting
 * job takes neither the job's pods nor moved ones (unless backfill). */
typedef struct res_ctx {
	const sc_sched_t *s;
	int job;
} res_ctx_t;

static bool reservation_ok(void *ctx, const sc_node_view_t *n)
{
	const res_ctx_t *x = ctx;
	return sc__reservation_allows(x->s, x->job, n->index);
}

static void job_filter(const sc_sched_t *s, int j, int p, int *ids, sc_filter_t *f, res_ctx_t *x)
{
	sc__task_filter(s, &s->jobs[j].spec->tasks[s->jobs[j].pods[p].task], ids, f);
	*x = (res_ctx_t){s, j};
	f->accept = reservation_ok;
	f->accept_ctx = x;
}

static const sc_request_t *req_of(const sc_sched_t *s, int j, int p)
{
	return &s->jobs[j].spec->tasks[s->jobs[j].pods[p].task].req;
}

/* Evicts movable pods of `node`, smallest first, until req fits there.
 * Returns the number moved, or -1 when the node cannot be cleared enough. */
static int clear_node(sc_sched_t *s, sc_stmt_t *st, const node_pods_t *np, uint32_t node,
                      const sc_request_t *req, int budget, int by, const char *why)
{
	int moved = 0;
	const sc_node_view_t *n = sc_cluster_node(s->cluster, node);
	sc_assign_t fit;
	while (sc__node_choose_pipe(n, req, SC_DEV_PACK, &fit) < 0) {
		int best = -1;
		double best_gpu = 0;
		for (int k = np->start[node]; k < np->start[node + 1]; k++) {
			int j = np->list[2 * k], p = np->list[2 * k + 1];
			if (!movable(s, j, p))
				continue;
			double g = sc__pod_res(s, req_of(s, j, p), n).v[SC_RES_GPU];
			if (best < 0 || g < best_gpu) {
				best = k;
				best_gpu = g;
			}
		}
		if (best < 0 || moved >= budget)
			return -1;
		int rc = sc__stmt_evict(st, np->list[2 * best], np->list[2 * best + 1],
		                        SC_ACT_CONSOLIDATE, by, why);
		if (rc < 0)
			return rc == SC_ENOMEM ? rc : -1;
		moved++;
	}
	return moved;
}

/* Places the evicted pods of the statement (from index `from`) again,
 * anywhere but where they were. */
static bool replace_moved(sc_sched_t *s, sc_stmt_t *st, size_t from)
{
	size_t end = st->nops;
	for (size_t i = from; i < end; i++) {
		if (st->ops[i].kind != OP_EVICT)
			continue;
		int j = st->ops[i].job, p = st->ops[i].pod;
		sc_assign_t a;
		sc_filter_t f;
		int ids[SC_MAX_MODEL_FILTER];
		res_ctx_t x;
		job_filter(s, j, p, ids, &f, &x);
		int rc = sc_cluster_best_indexed(s->cluster, req_of(s, j, p), &f, false,
		                                 SC_DEV_PACK, &a);
		if (rc == 0 && a.node != st->ops[i].assign.node)
			rc = sc__stmt_allocate(st, j, p, &a);
		else if (sc__cluster_best_pipe(s->cluster, req_of(s, j, p), &f, false, SC_DEV_PACK,
		                               &a) == 0 &&
		         a.node != st->ops[i].assign.node)
			rc = sc__stmt_allocate_pipe(st, j, p, &a);
		else
			rc = SC_ENOFIT;
		if (rc < 0)
			return false;
	}
	return true;
}

/* KAI: non-preemptible work never runs over its queue's quota, where it
 * could not be reclaimed. */
static bool nonpreempt_within_quota(const sc_sched_t *s, const sjob_t *jb)
{
	const squeue_t *q = &s->queues[jb->queue];
	for (int r = 0; r < SC_RES_COUNT; r++)
		if (jb->step_req.v[r] > 0 &&
		    q->alloc_nonpreempt.v[r] + jb->step_req.v[r] > q->quota.v[r] + 1e-9)
			return false;
	return true;
}

/* Total free GPU milli of the cluster, idle and releasing (KAI's
 * IsEnoughGPUsAllocatableForJob): consolidation is only worth trying when
 * the job's GPUs are free, just not together. */
static int64_t free_gpu(const sc_sched_t *s)
{
	int64_t total, used;
	sc_cluster_totals(s->cluster, &total, NULL, NULL);
	sc_cluster_used(s->cluster, &used, NULL, NULL);
	return total - used + sc__cluster_releasing_gpu(s->cluster);
}

static int try_job(sc_sched_t *s, const node_pods_t *np, int j)
{
	sjob_t *jb = &s->jobs[j];
	int budget = s->snap->config.consolidation_max;
	const char *why = sc_arena_printf(s->arena, "moved to make room for %s", jb->spec->name);
	if (!why)
		return SC_ENOMEM;
	sc_stmt_t st;
	sc__stmt_open(&st, s);
	int moved = 0;
	for (int p = 0; p < jb->total; p++) {
		if (jb->pods[p].phase != SC_POD_PENDING)
			continue;
		const sc_request_t *req = req_of(s, j, p);
		sc_assign_t a;
		sc_filter_t f;
		int ids[SC_MAX_MODEL_FILTER];
		res_ctx_t x;
		job_filter(s, j, p, ids, &f, &x);
		bool spread = jb->spec->placement == SC_PLACE_SPREAD;
		if (sc_cluster_best_indexed(s->cluster, req, &f, spread, SC_DEV_PACK, &a) == 0) {
			if (sc__stmt_allocate(&st, j, p, &a) < 0)
				break;
			continue;
		}
		/* The node that needs the fewest moves. */
		int best_moves = -1;
		uint32_t best_node = 0;
		size_t n = sc_cluster_nnodes(s->cluster);
		for (uint32_t i = 0; i < n; i++) {
			if (!sc__filter_pass(&f, sc_cluster_node(s->cluster, i)))
				continue;
			size_t mark = sc__stmt_mark(&st);
			int m = clear_node(s, &st, np, i, req, budget - moved, j, why);
			sc__stmt_rollback(&st, mark);
			if (m == SC_ENOMEM)
				return m;
			if (m > 0 && (best_moves < 0 || m < best_moves)) {
				best_moves = m;
				best_node = i;
			}
		}
		if (best_moves < 0)
			break;
		size_t mark = sc__stmt_mark(&st);
		if (clear_node(s, &st, np, best_node, req, budget - moved, j, why) < 0 ||
		    sc__node_choose_pipe(sc_cluster_node(s->cluster, best_node), req, SC_DEV_PACK,
		                         &a) < 0 ||
		    sc__stmt_allocate_pipe(&st, j, p, &a) < 0 || !replace_moved(s, &st, mark)) {
			/* Undo this pod's moves and placement: a move whose
			 * pods find no other node must not be committed. */
			sc__stmt_rollback(&st, mark);
			break;
		}
		moved += best_moves;
	}
	if (jb->nrunning >= jb->min_member) {
		sc__stmt_pipeline_job(&st, j);
		jb->reason = NULL;
		return sc__stmt_commit(&st);
	}
	sc__stmt_rollback(&st, 0);
	return 0;
}

int sc__consolidate(sc_sched_t *s)
{
	node_pods_t np;
	int rc = index_pods(s, &np);
	if (rc < 0)
		return rc;
	int attempts = 0;
	for (int j = 0; j < s->njobs && attempts < MAX_ATTEMPTS; j++) {
		sjob_t *jb = &s->jobs[j];
		/* Jobs with a topology constraint or a spread factor are left
		 * to allocate: moving pods one node at a time cannot honour
		 * a whole-gang domain. */
		if (jb->queue < 0 || jb->bad || jb->npending == 0 ||
		    jb->nrunning >= jb->min_member || jb->spec->topo_required ||
		    jb->spec->topo_preferred || jb->spec->spread_factor > 1 || jb->spec->serving)
			continue;
		sc__job_step(s, j);
		if ((double)free_gpu(s) / 1000.0 + 1e-9 < jb->step_req.v[SC_RES_GPU] ||
		    jb->step_req.v[SC_RES_GPU] <= 0)
			continue;
		/* Must also respect the queue's limit, and a non-preemptible
		 * job its queue's quota, as allocate does. */
		char why[256];
		if (!sc__res_fits_limit(s, jb->queue, &jb->step_req, why, sizeof(why)) ||
		    (!jb->preemptible && !nonpreempt_within_quota(s, jb)))
			continue;
		attempts++;
		rc = try_job(s, &np, j);
		if (rc < 0)
			return rc;
	}
	return 0;
}
