/* Compaction (beyond KAI, SchedulerConfig compaction; docs/SCHEDULER.md).
 *
 * KAI consolidates only for a pending preemptible job that does not fit;
 * nothing keeps whole nodes free for the large gangs that come next. This
 * action runs last, on what is still waiting: a node whose GPUs are
 * allocated below packThreshold is a candidate to be emptied, its movable
 * pods placed again on nodes at least as full (never on a node emptied in
 * this cycle), in one statement that is rolled back unless every moved pod
 * lands. It happens only when the emptied node gives whole GPUs that a
 * waiting job needs for a pod (the job is then pipelined there, so nothing
 * else takes the room), or, with compaction.targetGpus, when no node has
 * room for a job that big; and only when those GPUs, over
 * compaction.horizon, are worth more than the run time the moves lose
 * (each moved pod loses at most compaction.checkpointEvery of work, plus
 * its grace period).
 *
 * Movable: a preemptible job's running pod that has run minRuntime and was
 * not moved by compaction within cooldown (status movedAt), placed or
 * evicted by no action of this cycle; an elastic or serving job's pods only while it runs
 * above minMember (one at a time), a gang only whole and only when all its
 * pods are on the node being emptied. Bounds: maxMovesPerCycle, and
 * maxMovesPerHour counted from the snapshot's movedAt times. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/actions.h"
#include "core/reservation.h"
#include "core/statement.h"

#define MAX_WANTS 16 /* waiting jobs served per cycle */
#define MAX_CANDS 32 /* nodes tried per pod, emptiest first */

typedef struct cctx {
	sc_sched_t *s;
	const sc_compaction_t *cfg;
	sc_node_pods_t np;
	int budget;    /* pods that may still move this cycle */
	char *emptied; /* per node: emptied in this cycle */
} cctx_t;

/* One node's emptying, as tried. */
typedef struct plan {
	uint32_t node;
	int moved;
	double cost, gain; /* GPU-seconds */
} plan_t;

static const sc_request_t *req_of(const sc_sched_t *s, int j, int p)
{
	return &s->jobs[j].spec->tasks[s->jobs[j].pods[p].task].req;
}

/* GPUs allocated on a node (releasing and waiting pods included), 0..1. */
static double fill_of(const sc_node_view_t *n)
{
	if (n->gpu_count <= 0)
		return 1.0;
	int64_t free = 0;
	for (int d = 0; d < n->gpu_count; d++)
		free += n->gpu_free[d];
	return 1.0 - (double)free / ((double)n->gpu_count * 1000.0);
}

/* Whole devices nothing holds or waits for once the releases end. */
static int whole_free(const sc_node_view_t *n)
{
	int k = 0;
	for (int d = 0; d < n->gpu_count; d++)
		k += n->gpu_free[d] + n->gpu_rel[d] >= 1000 && !n->gpu_wait[d] &&
		     n->gpu_shared[d] == n->shared_rel[d] && n->mig_used[d] == n->mig_rel[d];
	return k;
}

/* Whether one pod may move now, on its own terms (age, cooldown). */
static bool pod_ok(const cctx_t *c, const spod_t *p)
{
	int64_t now = c->s->snap->now;
	if (p->phase != SC_POD_RUNNING || p->placed_now || p->evicted_now)
		return false;
	if (p->started_at > 0 && now - p->started_at < c->cfg->min_runtime)
		return false;
	int64_t moved = p->status ? p->status->moved_at : 0;
	return !(moved > 0 && now - moved < c->cfg->cooldown);
}

/* How pod p of job j may leave `node`: 0 not at all, 1 alone (a spare pod
 * of a job above minMember), 2 with the whole job (every pod of it is on
 * the node and may move). */
static int unit_of(const cctx_t *c, int j, int p, uint32_t node)
{
	const sjob_t *jb = &c->s->jobs[j];
	/* (jb->touched is no guide: trials that were rolled back set it.) */
	if (!jb->preemptible || !pod_ok(c, &jb->pods[p]))
		return 0;
	if (jb->nrunning > jb->min_member)
		return 1;
	if (jb->spec->serving)
		return 0; /* a serving job at its minimum keeps every replica */
	for (int q = 0; q < jb->total; q++) {
		const spod_t *o = &jb->pods[q];
		if (o->phase == SC_POD_PENDING || o->phase == SC_POD_SUCCEEDED ||
		    o->phase == SC_POD_FAILED)
			continue;
		if (sc__pod_at(o)->node != node || !pod_ok(c, o))
			return 0;
	}
	return 2;
}

/* Run time a move of the pod loses, in GPU-seconds: the work since its
 * last checkpoint (at most checkpointEvery; all of it when the start is
 * unknown) plus the grace period, times its GPUs. */
static double pod_cost(const cctx_t *c, int j, int p, const sc_node_view_t *n)
{
	const spod_t *pod = &c->s->jobs[j].pods[p];
	int64_t lost = c->cfg->checkpoint_every;
	if (pod->started_at > 0 && c->s->snap->now - pod->started_at < lost)
		lost = c->s->snap->now - pod->started_at;
	double g = sc__pod_res(c->s, req_of(c->s, j, p), n).v[SC_RES_GPU];
	return g * (double)(lost + c->cfg->grace_period);
}

static double unit_cost(const cctx_t *c, int j, int p, int kind, const sc_node_view_t *n)
{
	if (kind == 1)
		return pod_cost(c, j, p, n);
	double sum = 0;
	for (int q = 0; q < c->s->jobs[j].total; q++)
		if (c->s->jobs[j].pods[q].phase == SC_POD_RUNNING)
			sum += pod_cost(c, j, q, n);
	return sum;
}

/* Where a moved pod may go: where its task may (reservations included),
 * never a node emptied in this cycle, and only a node at least as full as
 * the one it leaves. */
typedef struct dest_filter {
	sc_pod_filter_t x;
	bool (*inner)(void *, const sc_node_view_t *);
	const cctx_t *c;
	double min_fill;
} dest_filter_t;

static bool dest_ok(void *ctx, const sc_node_view_t *n)
{
	dest_filter_t *d = ctx;
	if (d->c->emptied[n->index] || fill_of(n) + 1e-9 < d->min_fill)
		return false;
	return !d->inner || d->inner(&d->x, n);
}

/* Places the pods evicted from op `from` on again, on idle resources of
 * fuller nodes (a move that waits for another release would cost more).
 * Returns 1 when all landed, 0 when one did not, or SC_ENOMEM. */
static int place_moved(cctx_t *c, sc_stmt_t *st, size_t from, double min_fill)
{
	sc_sched_t *s = c->s;
	size_t end = st->nops;
	for (size_t i = from; i < end; i++) {
		if (st->ops[i].kind != OP_EVICT)
			continue;
		int j = st->ops[i].job, p = st->ops[i].pod;
		dest_filter_t d;
		sc__pod_filter(s, j, p, &d.x);
		d.inner = d.x.f.accept;
		d.c = c;
		d.min_fill = min_fill;
		d.x.f.accept = dest_ok;
		d.x.f.accept_ctx = &d;
		sc_assign_t a;
		s->placements_tried++;
		int rc = sc_cluster_best_indexed(s->cluster, req_of(s, j, p), &d.x.f, false,
		                                 SC_DEV_PACK, &a);
		if (rc == 0)
			rc = sc__stmt_allocate(st, j, p, &a);
		if (rc < 0)
			return rc == SC_ENOMEM ? rc : 0;
	}
	return 1;
}

/* Evicts units from `node` (the cheapest first, GPU holders before the
 * rest) until req fits there with the releasing resources, then places
 * them again on fuller nodes. Leaves it all in st and fills *pl; returns
 * 1, 0 when it does not work out (st as it was), or SC_ENOMEM. */
static int empty_node(cctx_t *c, sc_stmt_t *st, uint32_t node, const sc_request_t *req, int by,
                      const char *why, plan_t *pl)
{
	sc_sched_t *s = c->s;
	const sc_node_view_t *n = sc_cluster_node(s->cluster, node);
	double fill0 = fill_of(n);
	int before = whole_free(n);
	size_t mark = sc__stmt_mark(st);
	sc_assign_t fit;
	*pl = (plan_t){node, 0, 0, 0};
	while (sc__node_choose_pipe(n, req, SC_DEV_PACK, &fit) < 0) {
		int bj = -1, bp = -1, bkind = 0;
		double bcost = 0;
		bool bgpu = false;
		for (int k = c->np.start[node]; k < c->np.start[node + 1]; k++) {
			int j = c->np.list[2 * k], p = c->np.list[2 * k + 1];
			if (j == by)
				continue;
			int kind = unit_of(c, j, p, node);
			if (!kind)
				continue;
			bool gpu = sc__pod_res(s, req_of(s, j, p), n).v[SC_RES_GPU] > 0;
			double cost = unit_cost(c, j, p, kind, n);
			if (bj < 0 || (gpu && !bgpu) || (gpu == bgpu && cost < bcost)) {
				bj = j, bp = p, bkind = kind, bcost = cost, bgpu = gpu;
			}
		}
		if (bj < 0)
			goto fail;
		for (int q = 0; q < s->jobs[bj].total; q++) {
			if (bkind == 1 ? q != bp : s->jobs[bj].pods[q].phase != SC_POD_RUNNING)
				continue;
			if (pl->moved >= c->budget)
				goto fail;
			int rc = sc__stmt_evict(st, bj, q, SC_ACT_COMPACT, by, why);
			if (rc < 0) {
				sc__stmt_rollback(st, mark);
				return rc == SC_ENOMEM ? rc : 0;
			}
			pl->moved++;
		}
		pl->cost += bcost;
	}
	if (pl->moved == 0)
		return 0;      /* it fits as it is: nothing for compaction */
	c->emptied[node] |= 4; /* the moved pods go elsewhere */
	int rc = place_moved(c, st, mark, fill0);
	c->emptied[node] &= 3;
	if (rc <= 0) {
		sc__stmt_rollback(st, mark);
		return rc;
	}
	pl->gain = (double)(whole_free(n) - before) * (double)c->cfg->horizon;
	return 1;
fail:
	sc__stmt_rollback(st, mark);
	return 0;
}

typedef struct cand {
	uint32_t node;
	double fill;
} cand_t;

static int cand_cmp(const void *x, const void *y)
{
	const cand_t *a = x, *b = y;
	if (a->fill != b->fill)
		return a->fill < b->fill ? -1 : 1;
	return a->node < b->node ? -1 : (a->node > b->node);
}

/* The nodes below the pack threshold that could give req (f: where it may
 * go), emptiest first, at most MAX_CANDS. */
static int candidates(const cctx_t *c, const sc_request_t *req, const sc_filter_t *f, cand_t *out)
{
	const sc_sched_t *s = c->s;
	size_t nn = sc_cluster_nnodes(s->cluster);
	int n = 0;
	for (uint32_t i = 0; i < nn; i++) {
		const sc_node_view_t *v = sc_cluster_node(s->cluster, i);
		double fill = fill_of(v);
		if (!v->schedulable || c->emptied[i] || v->gpu_count < req->gpus || fill <= 0 ||
		    fill >= s->snap->config.pack_threshold ||
		    c->np.start[i] == c->np.start[i + 1] || (f && !sc__filter_pass(f, v)))
			continue;
		cand_t cd = {i, fill};
		if (n < MAX_CANDS) {
			out[n++] = cd;
			continue;
		}
		int worst = 0;
		for (int k = 1; k < n; k++)
			if (cand_cmp(&out[k], &out[worst]) > 0)
				worst = k;
		if (cand_cmp(&cd, &out[worst]) < 0)
			out[worst] = cd;
	}
	qsort(out, (size_t)n, sizeof(*out), cand_cmp);
	return n;
}

/* The candidate whose emptying for req costs least and gains more than it
 * costs, tried in a statement that is rolled back. Returns 1 with *best,
 * 0 when none, or SC_ENOMEM. */
static int best_plan(cctx_t *c, sc_stmt_t *st, const sc_request_t *req, const sc_filter_t *f,
                     int by, plan_t *best)
{
	cand_t cd[MAX_CANDS];
	int n = candidates(c, req, f, cd), found = 0;
	for (int k = 0; k < n; k++) {
		plan_t pl;
		size_t mark = sc__stmt_mark(st);
		int rc = empty_node(c, st, cd[k].node, req, by, NULL, &pl);
		sc__stmt_rollback(st, mark);
		if (rc < 0)
			return rc;
		if (rc == 0 || pl.gain <= pl.cost)
			continue;
		if (!found || pl.cost < best->cost) {
			*best = pl;
			found = 1;
		}
	}
	return found;
}

static const char *reason(cctx_t *c, uint32_t node, int gpus, const char *what)
{
	return sc_arena_printf(c->s->arena, "compaction: freed node %s for %d-GPU work (%s)",
	                       sc_cluster_node(c->s->cluster, node)->spec->name, gpus, what);
}

/* Empties the planned node for real; 1, 0 or SC_ENOMEM. */
static int carry_out(cctx_t *c, sc_stmt_t *st, const plan_t *pl, const sc_request_t *req, int by,
                     const char *what)
{
	const char *why = reason(c, pl->node, req->gpus, what);
	if (!why)
		return SC_ENOMEM;
	plan_t done;
	int rc = empty_node(c, st, pl->node, req, by, why, &done);
	if (rc == 1)
		c->emptied[pl->node] = 1;
	return rc;
}

/* A waiting job: each pod of its step that does not fit as things are gets
 * an emptied node and is pipelined there; all of the step or nothing. */
static int serve_job(cctx_t *c, int j)
{
	sc_sched_t *s = c->s;
	sjob_t *jb = &s->jobs[j];
	sc_stmt_t st;
	sc__stmt_open(&st, s);
	int placed = 0, moved = 0, budget0 = c->budget, rc = 0;
	for (int p = 0; p < jb->total && placed < jb->step; p++) {
		if (jb->pods[p].phase != SC_POD_PENDING)
			continue;
		rc = sc__place_pod(s, &st, j, p);
		if (rc == SC_ENOMEM)
			goto out;
		if (rc == 0) {
			placed++;
			continue;
		}
		const sc_request_t *req = req_of(s, j, p);
		sc_pod_filter_t x;
		sc__pod_filter(s, j, p, &x);
		plan_t pl;
		if ((rc = best_plan(c, &st, req, &x.f, j, &pl)) <= 0)
			goto out;
		if ((rc = carry_out(c, &st, &pl, req, j, jb->spec->name)) <= 0)
			goto out;
		sc_assign_t a;
		if (sc__node_choose_pipe(sc_cluster_node(s->cluster, pl.node), req, SC_DEV_PACK,
		                         &a) < 0 ||
		    (rc = sc__stmt_allocate_pipe(&st, j, p, &a)) < 0) {
			rc = rc == SC_ENOMEM ? rc : 0;
			goto out;
		}
		moved += pl.moved;
		c->budget -= pl.moved;
		placed++;
	}
	rc = 0;
	if (placed >= jb->step && moved > 0) {
		sc__stmt_pipeline_job(&st, j);
		jb->reason = NULL;
		return sc__stmt_commit(&st);
	}
out:
	/* Not all of the step: nothing moves, the emptied marks go too. */
	sc__stmt_rollback(&st, 0);
	c->budget = budget0;
	for (size_t i = 0; i < sc_cluster_nnodes(s->cluster); i++)
		c->emptied[i] &= 2;
	return rc < 0 ? rc : 0;
}

/* compaction.targetGpus: when no schedulable node can take a job that big
 * (idle or being released), empty the one that costs least. */
static int serve_target(cctx_t *c)
{
	sc_sched_t *s = c->s;
	int g = c->cfg->target_gpus;
	size_t nn = sc_cluster_nnodes(s->cluster);
	bool any = false;
	for (size_t i = 0; i < nn; i++) {
		const sc_node_view_t *v = sc_cluster_node(s->cluster, i);
		if (v->schedulable && v->gpu_count >= g) {
			any = true;
			if (whole_free(v) >= g)
				return 0;
		}
	}
	if (!any)
		return 0;
	sc_request_t req = {.gpus = g};
	sc_stmt_t st;
	sc__stmt_open(&st, s);
	plan_t pl;
	int rc = best_plan(c, &st, &req, NULL, -1, &pl);
	if (rc > 0)
		rc = carry_out(c, &st, &pl, &req, -1, "the typical large job");
	if (rc <= 0) {
		sc__stmt_rollback(&st, 0);
		return rc;
	}
	c->budget -= pl.moved;
	return sc__stmt_commit(&st);
}

/* A waiting job compaction may serve: whole GPUs in its step, its queue
 * admits the step (limits; quota for non-preemptible work), placement one
 * pod at a time suits it, and nothing else keeps it out (a bad spec, pods
 * being evicted). */
static bool want_compact(sc_sched_t *s, int j, void *ctx)
{
	(void)ctx;
	const sjob_t *jb = &s->jobs[j];
	if (jb->bad || jb->step <= 0)
		return false;
	/* Pods are placed one at a time here, which can honour neither a
	 * topology domain shared by several pods nor a spread cap: those
	 * jobs are left to allocate (compaction_topology_gang_left). */
	const sc_job_spec_t *js = jb->spec;
	if (((js->topo_required || js->topo_preferred) && jb->step > 1) || js->spread_factor > 1 ||
	    js->serving)
		return false;
	if (jb->nevicted_now > 0)
		return false;
	for (int t = 0; t < (int)jb->spec->ntasks; t++)
		if (jb->spec->tasks[t].req.gpus <= 0)
			return false;
	return true;
}

/* Moves made by compaction within the last hour, by the pods' movedAt. */
static int moves_last_hour(const sc_sched_t *s)
{
	int n = 0;
	for (int j = 0; j < s->njobs; j++)
		for (int p = 0; p < s->jobs[j].total; p++) {
			const sc_pod_status_t *st = s->jobs[j].pods[p].status;
			n += st && st->moved_at > 0 && s->snap->now - st->moved_at < 3600;
		}
	return n;
}

int sc__compact(sc_sched_t *s)
{
	const sc_compaction_t *cfg = &s->snap->config.compaction;
	if (!cfg->enabled || s->snap->config.pack_threshold <= 0)
		return 0;
	cctx_t c = {.s = s, .cfg = cfg};
	c.budget = cfg->max_moves_cycle;
	int left = cfg->max_moves_hour - moves_last_hour(s);
	if (left < c.budget)
		c.budget = left;
	if (c.budget <= 0)
		return 0;
	c.emptied = sc_arena_calloc(s->arena, sc_cluster_nnodes(s->cluster) + 1, 1);
	int rc = c.emptied ? sc__movable_index(s, &c.np) : SC_ENOMEM;
	if (rc < 0)
		return rc;
	if ((rc = sc__order_init(s, want_compact, NULL)) < 0)
		return rc;
	int served = 0, j;
	while (served < MAX_WANTS && c.budget > 0 && (j = sc__order_pop(s)) >= 0) {
		sjob_t *jb = &s->jobs[j];
		char why[8];
		if (!sc__res_fits_limit(s, jb->queue, &jb->step_req, why, sizeof(why)) ||
		    (!jb->preemptible && !sc__nonpreempt_within_quota(s, jb)))
			continue;
		served++;
		if ((rc = serve_job(&c, j)) < 0)
			return rc;
		for (size_t i = 0; i < sc_cluster_nnodes(s->cluster); i++)
			c.emptied[i] = c.emptied[i] ? 2 : 0; /* kept by a commit */
		sc__order_touch(s, jb->queue);
	}
	if (cfg->target_gpus > 0 && c.budget > 0)
		return serve_target(&c);
	return 0;
}
