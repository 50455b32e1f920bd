/* Consolidation (KAI's consolidation action): when a job does not fit
 * although enough GPUs are free or being released, move a few preemptible
 * pods (at most consolidation.maxPreemptees, KAI's
 * max-consolidation-preemptees) so that it fits. A move is valid only when
 * every moved pod is placed again (KAI's allPodsReallocated); otherwise
 * nothing moves.
 *
 * Jobs come in queue order, preemptible ones only, each for its next step
 * (its minMember pods: IsEnoughGPUsAllocatableForJob counts those). For
 * each pod of the step that does not fit as it is, every node that could
 * host it is tried, fewest moves first: the node's movable pods are
 * evicted, the cheapest (fewest GPUs, then KAI's in-queue victim order)
 * first, until the pod fits there, and the moved pods are placed again
 * anywhere, the same node on another device included, as KAI's solver
 * re-allocates its victims. The pieces (the movable-pod index, clearing a
 * node, placing evicted pods again) are in moves.c, shared through
 * actions.h so that another action that moves pods can use them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/actions.h"
#include "core/reservation.h"
#include "core/statement.h"

#define MAX_ATTEMPTS 256 /* jobs tried per cycle: consolidation is costly */
#define MAX_NODES 32     /* nodes tried per pod, fewest moves first */

static const sc_request_t *req_of(const sc_sched_t *s, int j, int p)
{
	return &s->jobs[j].spec->tasks[s->jobs[j].pods[p].task].req;
}

/* KAI's IsEnoughGPUsAllocatableForJob: the step's GPUs are there, idle or
 * being released, only not together. */
static bool enough_gpus(const sc_sched_t *s, const sjob_t *jb)
{
	int64_t total, used;
	sc_cluster_totals(s->cluster, &total, NULL, NULL);
	sc_cluster_used(s->cluster, &used, NULL, NULL);
	double spare = (double)(total - used + sc__cluster_releasing_gpu(s->cluster)) / 1000.0;
	return spare + 1e-9 >= jb->step_req.v[SC_RES_GPU];
}

/* A cheap bound before any trial: the node's idle, releasing and movable
 * GPUs together cover the request. */
static bool could_host(const sc_sched_t *s, const sc_node_pods_t *np, uint32_t node,
                       const sc_request_t *req)
{
	const sc_node_view_t *n = sc_cluster_node(s->cluster, node);
	int64_t need = sc_request_gpu_milli(req, n), have = 0;
	if (need <= 0)
		return true;
	for (int d = 0; d < n->gpu_count; d++)
		have += n->gpu_free[d] + n->gpu_rel[d];
	for (int k = np->start[node]; k < np->start[node + 1] && have < need; k++) {
		int j = np->list[2 * k], p = np->list[2 * k + 1];
		if (sc__movable(s, j, p))
			have += (int64_t)(sc__pod_res(s, req_of(s, j, p), n).v[SC_RES_GPU] * 1000 +
			                  0.5);
	}
	return have >= need;
}

typedef struct cand {
	uint32_t node;
	int moves;
	int prio;       /* lowest priority among the pods it moves */
	int64_t newest; /* newest job among them */
} cand_t;

/* Fewest moves first; between equals, the node whose moved pods come first
 * in KAI's victim order (lower priority, newer job), then the lower index. */
static int cand_cmp(const void *x, const void *y)
{
	const cand_t *a = x, *b = y;
	if (a->moves != b->moves)
		return a->moves - b->moves;
	if (a->prio != b->prio)
		return a->prio < b->prio ? -1 : 1;
	if (a->newest != b->newest)
		return a->newest > b->newest ? -1 : 1;
	return a->node < b->node ? -1 : (a->node > b->node);
}

/* Nodes where pod p of job j fits after some moves, fewest moves first
 * (at most MAX_NODES). Returns the count or an error. */
static int candidates(sc_sched_t *s, sc_stmt_t *st, const sc_node_pods_t *np, int j, int p,
                      int budget, cand_t *out)
{
	const sc_request_t *req = req_of(s, j, p);
	sc_pod_filter_t x;
	sc__pod_filter(s, j, p, &x);
	int n = 0, worst = 0;
	size_t nn = sc_cluster_nnodes(s->cluster);
	for (uint32_t i = 0; i < nn; i++) {
		const sc_node_view_t *v = sc_cluster_node(s->cluster, i);
		if (!v->schedulable || v->gpu_count < req->gpus ||
		    np->start[i] == np->start[i + 1] || !sc__filter_pass(&x.f, v) ||
		    !could_host(s, np, i, req))
			continue;
		size_t mark = sc__stmt_mark(st);
		int m =
		    sc__clear_node(s, st, np, i, req, budget, SC_ACT_CONSOLIDATE, j, NULL, NULL);
		cand_t c = {i, m, 2147483647, INT64_MIN};
		for (size_t k = mark; m > 0 && k < st->nops; k++) {
			const sjob_t *mv = &s->jobs[st->ops[k].job];
			if (mv->priority < c.prio)
				c.prio = mv->priority;
			if (mv->spec->created > c.newest)
				c.newest = mv->spec->created;
		}
		sc__stmt_rollback(st, mark);
		if (m == SC_ENOMEM)
			return m;
		if (m <= 0)
			continue;
		if (n < MAX_NODES) {
			out[n++] = c;
		} else {
			/* Full: replace the worst kept candidate if this is better. */
			worst = 0;
			for (int k = 1; k < n; k++)
				if (cand_cmp(&out[k], &out[worst]) > 0)
					worst = k;
			if (cand_cmp(&c, &out[worst]) < 0)
				out[worst] = c;
		}
	}
	qsort(out, (size_t)n, sizeof(*out), cand_cmp);
	return n;
}

/* The rest of a move for one pod, once a node is cleared: the pod goes
 * there, and the moved pods go anywhere else. */
typedef struct pod_move {
	int job, pod;
	uint32_t node;
} pod_move_t;

static int finish_move(void *ctx, sc_sched_t *s, sc_stmt_t *st, size_t mark)
{
	const pod_move_t *x = ctx;
	sc_assign_t a;
	if (sc__node_choose_pipe(sc_cluster_node(s->cluster, x->node), req_of(s, x->job, x->pod),
	                         SC_DEV_PACK, &a) < 0)
		return 0;
	int rc = sc__stmt_allocate_pipe(st, x->job, x->pod, &a);
	if (rc < 0)
		return rc == SC_ENOMEM ? rc : 0;
	rc = sc__replace_evicted(s, st, mark);
	return rc;
}

/* Consolidates for one pod that fits nowhere as it is: tries candidate
 * nodes in order, and on each the sets of pods to move in order, until the
 * moves work out; on success the moves and the placements stay in st and
 * *moved grows; returns 1, or 0 when nothing works. */
static int consolidate_pod(sc_sched_t *s, sc_stmt_t *st, const sc_node_pods_t *np, int j, int p,
                           int *moved, const char *why)
{
	int budget = s->snap->config.consolidation_max - *moved;
	if (budget <= 0)
		return 0;
	cand_t c[MAX_NODES];
	int nc = candidates(s, st, np, j, p, budget, c);
	if (nc < 0)
		return nc;
	const sc_request_t *req = req_of(s, j, p);
	for (int k = 0; k < nc; k++) {
		pod_move_t x = {j, p, c[k].node};
		sc_clear_done_t done = {finish_move, &x};
		int m = sc__clear_node(s, st, np, c[k].node, req, budget, SC_ACT_CONSOLIDATE, j,
		                       why, &done);
		if (m == SC_ENOMEM)
			return m;
		if (m > 0) {
			*moved += m;
			return 1;
		}
	}
	return 0;
}

/* Places job j's step, consolidating for each pod that does not fit as it
 * is; leaves everything in st. Returns the number of pods moved when the
 * whole step is placed with at least one move, 0 otherwise. */
static int attempt(sc_sched_t *s, sc_stmt_t *st, const sc_node_pods_t *np, int j, const char *why)
{
	sjob_t *jb = &s->jobs[j];
	int moved = 0, placed = 0;
	for (int p = 0; p < jb->total && placed < jb->step; p++) {
		if (jb->pods[p].phase != SC_POD_PENDING)
			continue;
		int rc = sc__place_pod(s, st, j, p);
		if (rc == SC_ENOMEM)
			return rc;
		if (rc < 0) {
			rc = consolidate_pod(s, st, np, j, p, &moved, why);
			if (rc < 0)
				return rc;
			if (rc == 0)
				break;
		}
		placed++;
	}
	/* Nothing to consolidate (it fits as it is: allocate's job), or no way. */
	return placed < jb->step ? 0 : moved;
}

/* How an attempt in a domain compares: fewer moves, then the moves KAI's
 * victim order takes first (lower priority, newer, later job). */
typedef struct dom_key {
	int moves, prio;
	int64_t newest;
	int job;
} dom_key_t;

static dom_key_t key_of(const sc_sched_t *s, const sc_stmt_t *st, int moves)
{
	dom_key_t k = {moves, 2147483647, INT64_MIN, -1};
	for (size_t i = 0; i < st->nops; i++) {
		if (st->ops[i].kind != OP_EVICT)
			continue;
		const sjob_t *v = &s->jobs[st->ops[i].job];
		if (v->priority < k.prio ||
		    (v->priority == k.prio && v->spec->created > k.newest) ||
		    (v->priority == k.prio && v->spec->created == k.newest &&
		     st->ops[i].job > k.job)) {
			k.prio = v->priority;
			k.newest = v->spec->created;
			k.job = st->ops[i].job;
		}
	}
	return k;
}

static bool key_before(const dom_key_t *a, const dom_key_t *b)
{
	if (a->moves != b->moves)
		return a->moves < b->moves;
	if (a->prio != b->prio)
		return a->prio < b->prio;
	if (a->newest != b->newest)
		return a->newest > b->newest;
	return a->job > b->job;
}

/* The domain of level l that already holds a running pod of job j, or -1. */
static int held_domain(const sc_sched_t *s, const sjob_t *jb, const topo_level_t *l)
{
	for (int p = 0; p < jb->total; p++)
		if (jb->pods[p].phase == SC_POD_RUNNING || jb->pods[p].phase == SC_POD_RELEASING)
			return l->node_domain[sc__pod_at(&jb->pods[p])->node];
	return -1;
}

static const topo_level_t *level_of(const sc_sched_t *s, const char *key)
{
	for (int k = 0; key && k < s->nlevels; k++)
		if (strcmp(s->levels[k].key, key) == 0)
			return &s->levels[k];
	return NULL;
}

/* For a job with a topology constraint, the domain to consolidate into:
 * every domain of the level is tried (only the one it already runs in,
 * if any), and the best attempt kept. Returns the domain or -1. */
static int best_domain(sc_sched_t *s, const sc_node_pods_t *np, int j, const topo_level_t *l,
                       const char *why, int *err)
{
	int only = held_domain(s, &s->jobs[j], l), best = -1;
	dom_key_t bk = {0};
	for (int d = 0; d < l->ndomains; d++) {
		if (only >= 0 && d != only)
			continue;
		sc_stmt_t st;
		sc__stmt_open(&st, s);
		s->dom_level = l;
		s->dom_job = j;
		s->dom_domain = d;
		int m = attempt(s, &st, np, j, why);
		dom_key_t k = key_of(s, &st, m);
		sc__stmt_rollback(&st, 0);
		s->dom_level = NULL;
		if (m < 0) {
			*err = m;
			return -1;
		}
		if (m > 0 && (best < 0 || key_before(&k, &bk))) {
			best = d;
			bk = k;
		}
	}
	return best;
}

static int try_job(sc_sched_t *s, const sc_node_pods_t *np, int j)
{
	sjob_t *jb = &s->jobs[j];
	const char *why = sc_arena_printf(s->arena, "moved to make room for %s", jb->spec->name);
	if (!why)
		return SC_ENOMEM;
	/* A required level: one of its domains or nothing; a preferred one:
	 * one of its domains, else anywhere (as placement tries them). */
	const topo_level_t *req = level_of(s, jb->spec->topo_required);
	const topo_level_t *pref = level_of(s, jb->spec->topo_preferred);
	const topo_level_t *l = pref ? pref : req;
	int d = -1, err = 0;
	if (l) {
		d = best_domain(s, np, j, l, why, &err);
		if (err < 0)
			return err;
		if (d < 0 && pref && req) {
			l = req;
			d = best_domain(s, np, j, l, why, &err);
			if (err < 0)
				return err;
		}
		if (d < 0 && req)
			return 0;
	}
	sc_stmt_t st;
	sc__stmt_open(&st, s);
	if (d >= 0) {
		s->dom_level = l;
		s->dom_job = j;
		s->dom_domain = d;
	}
	int m = attempt(s, &st, np, j, why);
	s->dom_level = NULL;
	if (m <= 0) {
		sc__stmt_rollback(&st, 0);
		return m < 0 ? m : 0;
	}
	sc__stmt_pipeline_job(&st, j);
	jb->reason = NULL;
	return sc__stmt_commit(&st);
}

static bool want_consolidate(sc_sched_t *s, int j, void *ctx)
{
	const sjob_t *jb = &s->jobs[j];
	if (jb->nevicted_now > 0)
		return false;
	/* Pods are placed one at a time here, which cannot honour a spread
	 * cap: those jobs are left to allocate (a topology domain is held by
	 * trying one domain at a time). Non-preemptible jobs do not
	 * consolidate (KAI's FilterNonPreemptible). */
	const sc_job_spec_t *js = jb->spec;
	return jb->preemptible && js->spread_factor <= 1 && !js->serving;
}

int sc__consolidate(sc_sched_t *s)
{
	if (s->snap->config.consolidation_max <= 0)
		return 0; /* KAI: 0 turns consolidation off */
	sc_node_pods_t np;
	int rc = sc__movable_index(s, &np);
	if (rc < 0)
		return rc;
	if ((rc = sc__order_init(s, want_consolidate, NULL)) < 0)
		return rc;
	int attempts = 0, j;
	while (attempts < MAX_ATTEMPTS && (j = sc__order_pop(s)) >= 0) {
		sjob_t *jb = &s->jobs[j];
		if (jb->step == 0 || !enough_gpus(s, jb))
			continue;
		/* Its queue must admit the step, as allocate checks. */
		char why[8];
		if (!sc__res_fits_limit(s, jb->queue, &jb->step_req, why, sizeof(why)))
			continue;
		attempts++;
		rc = try_job(s, &np, j);
		if (rc < 0)
			return rc;
		sc__order_touch(s, jb->queue); /* its holdings may have grown */
	}
	return 0;
}
