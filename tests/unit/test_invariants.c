/* Seeded randomized invariants of one scheduling cycle.
 *
 * Random snapshots (nodes with whole GPUs, shares and MIG, queue trees with
 * quotas and limits, running pods, pending jobs, priority classes) are built
 * directly with the public API and scheduled; the decisions are checked
 * against rules that hold whatever the policy details are:
 *   - no node or device is over-committed (running - evicted + bound);
 *   - a gang is never partly placed (bound + kept >= minMember, or none);
 *   - a queue that received work is within its limit afterwards;
 *   - no non-preemptible job is preempted, reclaimed or moved;
 *   - reclaim takes only from a side (the victim's ancestor that is a
 *     sibling of the reclaimer's) that held more than its quota and limit
 *     allow when the reclaim began: KAI's strategies need it above its
 *     allocatable share min(limit, max(quota, fair share)) or above its
 *     quota, so a queue within min(quota, limit) is never reclaimed from;
 *   - every eviction's `by` job is bound in the same cycle;
 *   - preempt victims have strictly lower priority than the preemptor;
 *   - the same input gives the same output;
 *   - on tiny preemption cases, no victim could have been spared (checked
 *     by re-running allocate with each victim kept and the others gone). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "starcloud/core.h"

#define MAXN 6
#define MAXQ 8
#define MAXJ 24
#define MAXP 8 /* pods per job */

typedef struct world {
	sc_node_spec_t nodes[MAXN];
	char nname[MAXN][16];
	sc_queue_spec_t queues[MAXQ];
	char qname[MAXQ][16];
	sc_job_spec_t jobs[MAXJ];
	sc_task_spec_t tasks[MAXJ];
	char jname[MAXJ][16];
	sc_pod_status_t pods[MAXJ][MAXP];
	char pname[MAXJ][MAXP][40];
	int pgpus[MAXJ][MAXP][8];
	int64_t used_milli[MAXN][8]; /* per device, while building */
	bool mig_used[MAXN][8];
	int64_t cpu_used[MAXN];
	sc_snapshot_t snap;
} world_t;

static world_t W, W2;
static uint64_t rng, cur_seed;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return n ? (uint32_t)(rng % n) : 0;
}

static const char *const classes[] = {"normal", "train",       "build-preemptible",
                                      "build",  "best-effort", "inference"};
static const int class_value[] = {50, 50, 75, 100, 10, 125};

static int prio_of(const sc_job_spec_t *j)
{
	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
		if (j->priority_class && strcmp(j->priority_class, classes[i]) == 0)
			return class_value[i];
	return 50;
}

static bool preemptible_of(const sc_job_spec_t *j)
{
	if (j->preemptible >= 0)
		return j->preemptible;
	return prio_of(j) < 100;
}

static int min_member(const sc_job_spec_t *j)
{
	return j->min_member > 0 ? j->min_member : j->tasks[0].replicas;
}

/* Tries to place one running pod of job j, replica r; false when no room. */
static bool place_running(world_t *w, int j, int r)
{
	sc_job_spec_t *js = &w->jobs[j];
	const sc_request_t *q = &js->tasks[0].req;
	for (int tries = 0; tries < 8; tries++) {
		int n = (int)rnd((uint32_t)w->snap.nnodes);
		sc_node_spec_t *nd = &w->nodes[n];
		if (w->cpu_used[n] + q->cpu_milli > nd->cpu_milli)
			continue;
		sc_pod_status_t *p = &w->pods[j][js->npods];
		int *g = w->pgpus[j][js->npods];
		memset(p, 0, sizeof(*p));
		if (q->mig)
			continue; /* running MIG pods are left to the MIG unit tests */
		if (nd->mig_mode != SC_MIG_NONE && (q->gpus || q->gpu_milli))
			continue;
		int k = 0;
		if (q->gpus) {
			for (int d = 0; d < nd->gpu_count && k < q->gpus; d++)
				if (w->used_milli[n][d] == 0)
					g[k++] = d;
			if (k < q->gpus)
				continue;
			for (int i = 0; i < k; i++)
				w->used_milli[n][g[i]] = 1000;
		} else if (q->gpu_milli) {
			int d = (int)rnd((uint32_t)nd->gpu_count);
			if (w->used_milli[n][d] + q->gpu_milli > 1000 ||
			    w->used_milli[n][d] == 1000)
				continue;
			/* a device with a whole pod has 1000; shares add up */
			w->used_milli[n][d] += q->gpu_milli;
			g[k++] = d;
			p->gpu_milli = q->gpu_milli;
		}
		w->cpu_used[n] += q->cpu_milli;
		snprintf(w->pname[j][js->npods], 40, "%s-w-%d", js->name, r);
		p->name = w->pname[j][js->npods];
		p->phase = SC_POD_RUNNING;
		p->node = nd->name;
		p->gpus = g;
		p->ngpus = (size_t)k;
		p->started_at = w->snap.now - 60 * (int64_t)rnd(30);
		js->npods++;
		return true;
	}
	return false;
}

/* build() in the order it draws from rnd (the worlds of every seed stay as
 * they were): nodes, queues, then jobs, some of them running. */
static void build_nodes(world_t *w, bool tiny)
{
	int nn = tiny ? 1 : 1 + (int)rnd(4);
	for (int i = 0; i < nn; i++) {
		sc_node_spec_t *n = &w->nodes[i];
		snprintf(w->nname[i], 16, "n%d", i);
		*n = (sc_node_spec_t){.name = w->nname[i],
		                      .cpu_milli = 16000 + 16000 * rnd(3),
		                      .memory = (int64_t)256 << 30,
		                      .gpu_count = 1 + (int)rnd(8),
		                      .gpu_model = rnd(4) ? "A100" : "H100",
		                      .gpu_memory = (int64_t)80 << 30};
		if (!tiny && rnd(8) == 0)
			n->mig_mode = SC_MIG_DYNAMIC;
		if (!tiny && rnd(16) == 0)
			n->unschedulable = true;
	}
	w->snap.nnodes = (size_t)nn;
}

/* Fills leaves[] with the leaf queues' indexes; returns how many. */
static int build_queues(world_t *w, bool tiny, int *leaves)
{
	/* queues: one or two parents, each with one to three leaves */
	int nq = 0, nleaves = 0;
	int nparents = tiny ? 0 : (int)rnd(3);
	for (int p = 0; p < nparents; p++) {
		snprintf(w->qname[nq], 16, "p%d", p);
		w->queues[nq] = (sc_queue_spec_t){.name = w->qname[nq], .priority = 100};
		nq++;
	}
	int nleaf = tiny ? 1 : 1 + (int)rnd(3);
	for (int l = 0; l < nleaf && nq < MAXQ; l++) {
		snprintf(w->qname[nq], 16, "q%d", l);
		w->queues[nq] = (sc_queue_spec_t){
		    .name = w->qname[nq],
		    .priority = rnd(4) ? 100 : 200,
		    .parent = nparents ? w->qname[rnd((uint32_t)nparents)] : NULL};
		leaves[nleaves++] = nq++;
	}
	for (int q = 0; q < nq; q++) {
		sc_queue_spec_t *qs = &w->queues[q];
		double quota = tiny ? 8 : (rnd(6) == 0 ? -1 : (double)rnd(6));
		double limit = tiny || rnd(3) ? -1 : (quota < 0 ? 4 : quota + rnd(4));
		qs->res[SC_RES_GPU] = (sc_queue_res_t){quota, limit, 1 + rnd(3)};
		qs->res[SC_RES_CPU] = (sc_queue_res_t){-1, -1, 1};
		qs->res[SC_RES_MEM] = (sc_queue_res_t){-1, -1, 1};
		qs->created = q + 1;
	}
	w->snap.nqueues = (size_t)nq;
	return nleaves;
}

static void build_jobs(world_t *w, uint64_t seed, bool tiny, bool reserve, const int *leaves,
                       int nleaves)
{
	int nj = tiny ? 2 + (int)rnd(5) : 3 + (int)rnd(MAXJ - 3);
	for (int j = 0; j < nj; j++) {
		sc_job_spec_t *js = &w->jobs[j];
		sc_task_spec_t *t = &w->tasks[j];
		snprintf(w->jname[j], 16, "j%d", j);
		*t = (sc_task_spec_t){.name = "w",
		                      .replicas = 1 + (int)rnd(tiny ? 2 : 4),
		                      .req = {.cpu_milli = 1000 * (1 + rnd(4)), .memory = 1 << 30}};
		int kind = (int)rnd(10);
		if (kind < 6)
			t->req.gpus = 1 + (int)rnd(2);
		else if (kind < 8 && !tiny)
			t->req.gpu_milli = rnd(2) ? 500 : 250;
		else if (kind < 9 && !tiny)
			t->req.mig = rnd(2) ? "1g.10gb" : "3g.40gb";
		else
			t->req.gpus = 1;
		*js = (sc_job_spec_t){.name = w->jname[j],
		                      .queue = w->qname[leaves[rnd((uint32_t)nleaves)]],
		                      .priority_class = classes[rnd(tiny ? 3 : 6)],
		                      .preemptible = -1,
		                      .min_member = rnd(3) ? 0 : 1,
		                      .created = j + 1,
		                      .staleness_grace = -1,
		                      .tasks = t,
		                      .ntasks = 1,
		                      .pods = w->pods[j]};
		if (reserve) /* some backfill candidates, some without a runtime */
			js->expected_runtime = (int64_t)((seed + (uint64_t)j) % 4) * 900;
		if (rnd(2)) { /* running: the whole job, or nothing */
			int r;
			for (r = 0; r < t->replicas; r++)
				if (!place_running(w, j, r))
					break;
			if (r < min_member(js)) {
				/* not enough room for its gang: pods stay as placed,
				 * the job is stale since a while */
				js->stale_since =
				    js->npods ? w->snap.now - 30 * (int64_t)rnd(5) : 0;
			}
		}
	}
	w->snap.njobs = (size_t)nj;
}

static void build(world_t *w, uint64_t seed, bool tiny)
{
	memset(w, 0, sizeof(*w));
	rng = seed * 0x9e3779b97f4a7c15ull + 1;
	sc_config_default(&w->snap.config);
	/* Every job has waited since creation (now is far later), so with
	 * reservations on, every pending gang head is a candidate: on even
	 * seeds of the full worlds they are on (more candidates than the 4
	 * slots is common), on the others off. Derived from the seed, not
	 * drawn, so the random worlds stay as they were. */
	bool reserve = !tiny && seed % 2 == 0;
	w->snap.config.reservation_after = reserve ? 1800 : 0;
	w->snap.now = 2000000000;
	w->snap.nodes = w->nodes;
	w->snap.queues = w->queues;
	w->snap.jobs = w->jobs;
	int leaves[MAXQ];
	build_nodes(w, tiny);
	int nleaves = build_queues(w, tiny, leaves);
	build_jobs(w, seed, tiny, reserve, leaves, nleaves);
}

/* Prints a case, for reproducing a failure by hand. */
static void dump(const world_t *w, const sc_decisions_t *d)
{
	for (size_t n = 0; n < w->snap.nnodes; n++)
		print_message("node %s gpus %d cpu %lld mig %d cordoned %d\n", w->nodes[n].name,
		              w->nodes[n].gpu_count, (long long)w->nodes[n].cpu_milli,
		              w->nodes[n].mig_mode, w->nodes[n].unschedulable);
	for (size_t q = 0; q < w->snap.nqueues; q++)
		print_message("queue %s parent %s prio %d quota %g limit %g weight %g\n",
		              w->queues[q].name, w->queues[q].parent ? w->queues[q].parent : "-",
		              w->queues[q].priority, w->queues[q].res[0].quota,
		              w->queues[q].res[0].limit, w->queues[q].res[0].weight);
	for (size_t j = 0; j < w->snap.njobs; j++) {
		const sc_job_spec_t *js = &w->jobs[j];
		const sc_request_t *r = &js->tasks[0].req;
		print_message("job %s queue %s class %s min %d replicas %d gpus %d milli %d mig %s "
		              "cpu %lld stale %lld\n",
		              js->name, js->queue, js->priority_class, js->min_member,
		              js->tasks[0].replicas, r->gpus, r->gpu_milli, r->mig ? r->mig : "-",
		              (long long)r->cpu_milli, (long long)js->stale_since);
		for (size_t p = 0; p < js->npods; p++)
			print_message("  pod %s phase %d on %s gpu0 %d n %zu milli %d\n",
			              js->pods[p].name, js->pods[p].phase, js->pods[p].node,
			              js->pods[p].ngpus ? js->pods[p].gpus[0] : -1,
			              js->pods[p].ngpus, js->pods[p].gpu_milli);
	}
	for (size_t b = 0; d && b < d->nbindings; b++)
		print_message("bind %s -> %s gpu0 %d n %zu milli %d\n", d->bindings[b].pod,
		              d->bindings[b].node,
		              d->bindings[b].ngpus ? d->bindings[b].gpus[0] : -1,
		              d->bindings[b].ngpus, d->bindings[b].gpu_milli);
	for (size_t e = 0; d && e < d->nevictions; e++)
		print_message("evict %s action %d by %s\n", d->evictions[e].pod,
		              d->evictions[e].action,
		              d->evictions[e].by ? d->evictions[e].by : "-");
	for (size_t q = 0; d && q < d->nqueues; q++)
		print_message("report %s fair %g alloc %g\n", d->queues[q].name,
		              d->queues[q].fair_share[0], d->queues[q].allocated[0]);
}

static sc_decisions_t *sched(const sc_snapshot_t *s)
{
	sc_decisions_t *d = NULL;
	char msg[256] = "";
	int rc = sc_schedule(s, &d, msg, sizeof(msg));
	if (rc < 0)
		fail_msg("sc_schedule: %d %s", rc, msg);
	return d;
}

static int node_index(const world_t *w, const char *name)
{
	for (size_t i = 0; i < w->snap.nnodes; i++)
		if (strcmp(w->nodes[i].name, name) == 0)
			return (int)i;
	fail_msg("unknown node %s", name);
	return -1;
}

static bool evicted(const sc_decisions_t *d, size_t job, const char *pod)
{
	for (size_t e = 0; e < d->nevictions; e++)
		if (d->evictions[e].job == job && strcmp(d->evictions[e].pod, pod) == 0)
			return true;
	return false;
}

static void check_capacity(const world_t *w, const sc_decisions_t *d)
{
	int64_t milli[MAXN][8] = {{0}}, cpu[MAXN] = {0};
	for (size_t j = 0; j < w->snap.njobs; j++) {
		const sc_job_spec_t *js = &w->jobs[j];
		for (size_t p = 0; p < js->npods; p++) {
			const sc_pod_status_t *ps = &js->pods[p];
			if (ps->phase != SC_POD_RUNNING || evicted(d, j, ps->name))
				continue;
			int n = node_index(w, ps->node);
			cpu[n] += js->tasks[0].req.cpu_milli;
			for (size_t g = 0; g < ps->ngpus; g++)
				milli[n][ps->gpus[g]] += ps->gpu_milli ? ps->gpu_milli : 1000;
		}
	}
	for (size_t b = 0; b < d->nbindings; b++) {
		const sc_binding_t *bd = &d->bindings[b];
		int n = node_index(w, bd->node);
		cpu[n] += w->jobs[bd->job].tasks[0].req.cpu_milli;
		if (bd->mig_profile)
			continue;
		for (size_t g = 0; g < bd->ngpus; g++) {
			assert_true(bd->gpus[g] >= 0 && bd->gpus[g] < w->nodes[n].gpu_count);
			milli[n][bd->gpus[g]] += bd->gpu_milli ? bd->gpu_milli : 1000;
		}
		assert_false(w->nodes[n].unschedulable);
	}
	for (size_t n = 0; n < w->snap.nnodes; n++) {
		assert_true(cpu[n] <= w->nodes[n].cpu_milli);
		for (int g = 0; g < w->nodes[n].gpu_count; g++)
			if (milli[n][g] > 1000)
				fail_msg("node %s device %d holds %lld milli", w->nodes[n].name, g,
				         (long long)milli[n][g]);
	}
}

static void check_gangs(const world_t *w, const sc_decisions_t *d)
{
	for (size_t j = 0; j < w->snap.njobs; j++) {
		int bound = 0, kept = 0;
		for (size_t b = 0; b < d->nbindings; b++)
			bound += d->bindings[b].job == j;
		if (!bound)
			continue;
		const sc_job_spec_t *js = &w->jobs[j];
		for (size_t p = 0; p < js->npods; p++)
			kept +=
			    js->pods[p].phase == SC_POD_RUNNING && !evicted(d, j, js->pods[p].name);
		/* a pod evicted and bound again (a consolidation move, or a
		 * victim that preempts in turn) counts once, as bound */
		if (bound + kept < min_member(js) && bound > 0 && (dump(w, d), true))
			fail_msg("seed %llu: job %s: %d bound + %d kept < minMember %d",
			         (unsigned long long)cur_seed, js->name, bound, kept,
			         min_member(js));
	}
}

static const sc_queue_report_t *report(const sc_decisions_t *d, const char *name)
{
	for (size_t q = 0; q < d->nqueues; q++)
		if (strcmp(d->queues[q].name, name) == 0)
			return &d->queues[q];
	fail_msg("no report for queue %s", name);
	return NULL;
}

static bool is_under(const world_t *w, const char *leaf, const char *q)
{
	while (leaf) {
		if (strcmp(leaf, q) == 0)
			return true;
		const char *parent = NULL;
		for (size_t i = 0; i < w->snap.nqueues; i++)
			if (strcmp(w->queues[i].name, leaf) == 0)
				parent = w->queues[i].parent;
		leaf = parent;
	}
	return false;
}

/* GPUs a queue's subtree held before the cycle (running pods). */
static double gpu_before(const world_t *w, const char *q)
{
	double g = 0;
	for (size_t j = 0; j < w->snap.njobs; j++) {
		const sc_job_spec_t *js = &w->jobs[j];
		if (!is_under(w, js->queue, q))
			continue;
		for (size_t p = 0; p < js->npods; p++)
			if (js->pods[p].phase == SC_POD_RUNNING)
				g += js->pods[p].gpu_milli ? js->pods[p].gpu_milli / 1000.0
				                           : (double)js->pods[p].ngpus;
	}
	return g;
}

static void check_queues(const world_t *w, const sc_decisions_t *d)
{
	for (size_t q = 0; q < w->snap.nqueues; q++) {
		const sc_queue_spec_t *qs = &w->queues[q];
		bool got = false;
		for (size_t b = 0; b < d->nbindings; b++)
			got |= is_under(w, w->jobs[d->bindings[b].job].queue, qs->name) &&
			       !evicted(d, d->bindings[b].job, d->bindings[b].pod);
		double lim = qs->res[SC_RES_GPU].limit;
		if (lim == 0)
			lim = qs->res[SC_RES_GPU].quota;
		/* new work may not take a queue past its limit; a queue that
		 * was already above it (snapshot state) may only not grow */
		double after = report(d, qs->name)->allocated[SC_RES_GPU];
		if (got && lim >= 0 && after > lim + 1e-6 &&
		    after > gpu_before(w, qs->name) + 1e-6 && (dump(w, d), true))
			fail_msg("seed %llu: queue %s: allocated %g above limit %g after new work",
			         (unsigned long long)cur_seed, qs->name,
			         report(d, qs->name)->allocated[SC_RES_GPU], lim);
	}
}

static bool is_by(const sc_decisions_t *d, const char *job)
{
	for (size_t e = 0; e < d->nevictions; e++)
		if (d->evictions[e].by && strcmp(d->evictions[e].by, job) == 0)
			return true;
	return false;
}

/* What a queue's subtree held when reclaim began, at most: before the
 * cycle, plus what jobs that evicted nothing (allocate's) bound there. */
static double before_reclaim(const world_t *w, const sc_decisions_t *d, const char *q)
{
	double g = gpu_before(w, q);
	for (size_t b = 0; b < d->nbindings; b++) {
		const sc_binding_t *bd = &d->bindings[b];
		const sc_job_spec_t *js = &w->jobs[bd->job];
		if (is_under(w, js->queue, q) && !is_by(d, js->name) && !bd->mig_profile)
			g += bd->gpu_milli ? bd->gpu_milli / 1000.0 : (double)bd->ngpus;
	}
	return g;
}

static const char *parent_of_queue(const world_t *w, const char *q)
{
	for (size_t i = 0; i < w->snap.nqueues; i++)
		if (strcmp(w->queues[i].name, q) == 0)
			return w->queues[i].parent;
	return NULL;
}

/* The victim's side: its ancestor whose parent is also the reclaimer's
 * ancestor (or the root), as KAI's getLeveledQueues picks it. */
static const char *side_of(const world_t *w, const char *victim, const char *reclaimer)
{
	for (const char *a = victim; a; a = parent_of_queue(w, a)) {
		const char *p = parent_of_queue(w, a);
		if (!is_under(w, reclaimer, a) && (!p || is_under(w, reclaimer, p)))
			return a;
	}
	return victim;
}

static void check_evictions(const world_t *w, const sc_decisions_t *d)
{
	for (size_t e = 0; e < d->nevictions; e++) {
		const sc_eviction_t *ev = &d->evictions[e];
		const sc_job_spec_t *v = &w->jobs[ev->job];
		if (ev->action == SC_ACT_STALE_GANG)
			continue;
		if (!preemptible_of(v))
			fail_msg("non-preemptible job %s evicted by %s", v->name, ev->by);
		assert_non_null(ev->by);
		size_t by = w->snap.njobs;
		for (size_t j = 0; j < w->snap.njobs; j++)
			if (strcmp(w->jobs[j].name, ev->by) == 0)
				by = j;
		assert_true(by < w->snap.njobs);
		bool bound = false;
		for (size_t b = 0; b < d->nbindings; b++)
			bound |= d->bindings[b].job == by;
		if (!bound)
			fail_msg("%s evicted for %s, which was not bound", ev->pod, ev->by);
		if (ev->action == SC_ACT_PREEMPT) {
			assert_string_equal(v->queue, w->jobs[by].queue);
			if (prio_of(v) >= prio_of(&w->jobs[by]))
				fail_msg("priority inversion: %s (%d) preempted by %s (%d)",
				         v->name, prio_of(v), ev->by, prio_of(&w->jobs[by]));
		}
		if (ev->action == SC_ACT_RECLAIM) {
			const char *side = side_of(w, v->queue, w->jobs[by].queue);
			const sc_queue_report_t *r = report(d, side);
			double quota = r->quota[SC_RES_GPU] < 0 ? 1e300 : r->quota[SC_RES_GPU];
			double limit = r->limit[SC_RES_GPU] < 0 ? 1e300 : r->limit[SC_RES_GPU];
			double keep = fmin(quota, limit);
			if (before_reclaim(w, d, side) <= keep + 1e-6 && (dump(w, d), true))
				fail_msg("seed %llu: %s reclaimed from %s, which held %g <= %g",
				         (unsigned long long)cur_seed, ev->pod, side,
				         before_reclaim(w, d, side), keep);
		}
	}
}

static void check_same(const sc_decisions_t *a, const sc_decisions_t *b)
{
	assert_int_equal(a->nbindings, b->nbindings);
	assert_int_equal(a->nevictions, b->nevictions);
	assert_int_equal(a->npending, b->npending);
	for (size_t i = 0; i < a->nbindings; i++) {
		assert_int_equal(a->bindings[i].job, b->bindings[i].job);
		assert_string_equal(a->bindings[i].pod, b->bindings[i].pod);
		assert_string_equal(a->bindings[i].node, b->bindings[i].node);
		assert_int_equal(a->bindings[i].ngpus, b->bindings[i].ngpus);
		assert_memory_equal(a->bindings[i].gpus, b->bindings[i].gpus,
		                    a->bindings[i].ngpus * sizeof(int));
		assert_int_equal(a->bindings[i].gpu_milli, b->bindings[i].gpu_milli);
		assert_int_equal(a->bindings[i].mig_start, b->bindings[i].mig_start);
	}
	for (size_t i = 0; i < a->nevictions; i++) {
		assert_int_equal(a->evictions[i].job, b->evictions[i].job);
		assert_string_equal(a->evictions[i].pod, b->evictions[i].pod);
		assert_int_equal(a->evictions[i].action, b->evictions[i].action);
	}
	for (size_t i = 0; i < a->npending; i++) {
		assert_int_equal(a->pending[i].job, b->pending[i].job);
		assert_string_equal(a->pending[i].reason, b->pending[i].reason);
	}
}

static void test_random_invariants(void **state)
{
	int reserved = 0; /* worlds where a job got nodes reserved */
	for (uint64_t seed = 1; seed <= 600; seed++) {
		cur_seed = seed;
		build(&W, seed, false);
		sc_decisions_t *d = sched(&W.snap);
		for (size_t i = 0; i < d->npending; i++)
			if (d->pending[i].nreserved) {
				reserved++;
				break;
			}
		check_capacity(&W, d);
		check_gangs(&W, d);
		check_queues(&W, d);
		check_evictions(&W, d);
		sc_decisions_t *again = sched(&W.snap);
		check_same(d, again);
		sc_decisions_free(again);
		sc_decisions_free(d);
	}
	/* The reservation path is exercised, not just configured. */
	assert_true(reserved >= 20);
}

/* Tiny preemption cases: one node, one queue, one preemptor. For each
 * victim job V, keep V running, drop the other victims' evicted pods and
 * every other pending job, and run allocate alone: the preemptor must not
 * fit, or V could have been spared. */
static void test_victims_minimal(void **state)
{
	int checked = 0;
	for (uint64_t seed = 1; seed <= 1500 && checked < 150; seed++) {
		build(&W, seed, true);
		W.snap.config.actions[0] = SC_ACT_PREEMPT;
		W.snap.config.nactions = 1;
		sc_decisions_t *d = sched(&W.snap);
		if (!d->nevictions) {
			sc_decisions_free(d);
			continue;
		}
		size_t by = W.snap.njobs;
		bool one = true;
		for (size_t e = 0; e < d->nevictions; e++) {
			for (size_t j = 0; j < W.snap.njobs; j++)
				if (strcmp(W.jobs[j].name, d->evictions[e].by) == 0) {
					one &= by == W.snap.njobs || by == j;
					by = j;
				}
		}
		if (!one) {
			sc_decisions_free(d);
			continue;
		}
		checked++;
		for (size_t e = 0; e < d->nevictions; e++) {
			size_t keep = d->evictions[e].job;
			memcpy(&W2, &W, sizeof(W));
			W2.snap.nodes = W2.nodes;
			W2.snap.queues = W2.queues;
			W2.snap.jobs = W2.jobs;
			for (size_t j = 0; j < W2.snap.njobs; j++) {
				W2.jobs[j].tasks = &W2.tasks[j];
				W2.jobs[j].pods = W2.pods[j];
				for (size_t p = 0; p < W2.jobs[j].npods; p++) {
					W2.pods[j][p].name = W2.pname[j][p];
					W2.pods[j][p].gpus = W2.pgpus[j][p];
					if (j != keep && evicted(d, j, W.pods[j][p].name))
						W2.pods[j][p].phase = SC_POD_SUCCEEDED;
				}
				if (j != by && W2.jobs[j].npods == 0)
					W2.tasks[j].replicas = 0; /* other pending jobs: nothing */
			}
			/* only the preemptor may still want pods */
			for (size_t j = 0; j < W2.snap.njobs; j++)
				if (j != by && W2.jobs[j].npods < (size_t)W2.tasks[j].replicas)
					W2.tasks[j].replicas = (int)W2.jobs[j].npods;
			W2.snap.config.actions[0] = SC_ACT_ALLOCATE;
			W2.snap.config.nactions = 1;
			sc_decisions_t *d2 = sched(&W2.snap);
			for (size_t b = 0; b < d2->nbindings; b++)
				if (d2->bindings[b].job == by && (dump(&W, d), dump(&W2, d2), true))
					fail_msg("seed %llu: %s fits without evicting %s",
					         (unsigned long long)seed, W.jobs[by].name,
					         W.jobs[keep].name);
			sc_decisions_free(d2);
		}
		sc_decisions_free(d);
	}
	assert_true(checked >= 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_random_invariants),
	    cmocka_unit_test(test_victims_minimal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
