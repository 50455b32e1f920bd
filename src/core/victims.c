/* Choosing victims: the smallest set that lets the preemptor's gang fit.
 *
 * Cost of a set, compared in order: GPUs evicted, then the highest victim
 * priority, then total runtime lost. With few candidates every subset is
 * tried in order of cost (exact); with many, units are added cheapest first
 * until the preemptor fits and then every unit that is not needed is taken
 * out again, so no victim in the result could be spared. Every candidate
 * set is simulated in the statement (evict, place, roll back), as KAI does,
 * so nothing is committed unless the preemptor really fits. */
#include <stdlib.h>
#include <string.h>

#include "core/victims.h"

#define EXACT_MAX 12 /* candidates up to which the search is exhaustive */

int64_t sc__job_runtime(const sc_sched_t *s, int j)
{
	const sjob_t *jb = &s->jobs[j];
	int64_t oldest = 0;
	for (int p = 0; p < jb->total; p++) {
		const spod_t *pod = &jb->pods[p];
		if (pod->phase == SC_POD_RUNNING && pod->started_at > 0 &&
		    (oldest == 0 || pod->started_at < oldest))
			oldest = pod->started_at;
	}
	if (!oldest || s->snap->now <= oldest)
		return 0;
	return s->snap->now - oldest;
}

static bool evictable(const spod_t *p)
{
	return p->phase == SC_POD_RUNNING && !p->placed_now;
}

static void unit_res(sc_sched_t *s, int j, int pod, vunit_t *u)
{
	sjob_t *jb = &s->jobs[j];
	memset(&u->res, 0, sizeof(u->res));
	for (int p = 0; p < jb->total; p++) {
		if ((pod >= 0 && p != pod) || !evictable(&jb->pods[p]))
			continue;
		const sc_node_view_t *n = sc_cluster_node(s->cluster, jb->pods[p].assign.node);
		res3_t r = sc__pod_res(s, &jb->spec->tasks[jb->pods[p].task].req, n);
		for (int k = 0; k < SC_RES_COUNT; k++)
			u->res.v[k] += r.v[k];
	}
	u->gpus = u->res.v[SC_RES_GPU];
}

/* Builds the per-queue index of jobs holding pods (once per cycle). */
static int sc__running_index(sc_sched_t *s)
{
	if (s->running)
		return 0;
	s->running_start = sc_arena_calloc(s->arena, (size_t)s->nqueues + 2, sizeof(int));
	s->running = sc_arena_calloc(s->arena, (size_t)s->njobs + 1, sizeof(int));
	int *fill = sc_arena_calloc(s->arena, (size_t)s->nqueues + 1, sizeof(int));
	if (!s->running_start || !s->running || !fill)
		return SC_ENOMEM;
	for (int j = 0; j < s->njobs; j++)
		if (s->jobs[j].queue >= 0 && s->jobs[j].nrunning > 0)
			s->running_start[s->jobs[j].queue + 1]++;
	for (int q = 1; q <= s->nqueues; q++)
		s->running_start[q] += s->running_start[q - 1];
	for (int j = 0; j < s->njobs; j++) {
		int q = s->jobs[j].queue;
		if (q >= 0 && s->jobs[j].nrunning > 0)
			s->running[s->running_start[q] + fill[q]++] = j;
	}
	return 0;
}

int sc__victim_units(sc_sched_t *s, int preemptor, int queue,
                     bool (*pick)(void *, sc_sched_t *, int), void *ctx, vunit_t **out)
{
	int n = 0, cap = 64;
	vunit_t *u = sc_arena_alloc(s->arena, (size_t)cap * sizeof(*u));
	int rc = sc__running_index(s);
	if (!u || rc < 0)
		return SC_ENOMEM;
	/* Jobs that held pods when the index was built: the only possible
	 * victims, since pods placed in this cycle are never evicted. */
	int lo = queue >= 0 ? s->running_start[queue] : 0;
	int hi = queue >= 0 ? s->running_start[queue + 1] : s->running_start[s->nqueues];
	for (int k = lo; k < hi; k++) {
		int j = s->running[k];
		sjob_t *jb = &s->jobs[j];
		if (j == preemptor || !jb->preemptible || jb->nrunning == 0 || !pick(ctx, s, j))
			continue;
		int live = 0;
		for (int p = 0; p < jb->total; p++)
			live += evictable(&jb->pods[p]);
		if (live == 0 || live != jb->nrunning)
			continue;                  /* part of it is already leaving or new */
		int spare = live - jb->min_member; /* pods above minMember */
		int units = spare > 0 ? spare + 1 : 1;
		if (n + units > cap) {
			while (n + units > cap)
				cap *= 2;
			vunit_t *nu = sc_arena_alloc(s->arena, (size_t)cap * sizeof(*nu));
			if (!nu)
				return SC_ENOMEM;
			memcpy(nu, u, (size_t)n * sizeof(*u));
			u = nu;
		}
		/* Spare pods of an elastic job, newest replica first, then the
		 * job as a whole. */
		for (int p = jb->total - 1; p >= 0 && spare > 0; p--) {
			if (!evictable(&jb->pods[p]))
				continue;
			u[n] = (vunit_t){.job = j,
			                 .pod = p,
			                 .priority = jb->priority,
			                 .runtime = sc__job_runtime(s, j)};
			unit_res(s, j, p, &u[n++]);
			spare--;
		}
		u[n] = (vunit_t){.job = j,
		                 .pod = -1,
		                 .priority = jb->priority,
		                 .runtime = sc__job_runtime(s, j)};
		unit_res(s, j, -1, &u[n++]);
	}
	*out = u;
	return n;
}

static int unit_cmp(const void *x, const void *y)
{
	const vunit_t *a = x, *b = y;
	if (a->gpus != b->gpus)
		return a->gpus < b->gpus ? -1 : 1;
	if (a->priority != b->priority)
		return a->priority < b->priority ? -1 : 1;
	if (a->runtime != b->runtime)
		return a->runtime < b->runtime ? -1 : 1;
	if (a->job != b->job)
		return a->job < b->job ? -1 : 1;
	return a->pod > b->pod ? -1 : 1; /* spare pods: newest replica first */
}

static char *pod_reason(sc_sched_t *s, int action, int preemptor)
{
	const char *what = action == SC_ACT_RECLAIM       ? "reclaimed for"
	                   : action == SC_ACT_PREEMPT     ? "preempted by"
	                   : action == SC_ACT_CONSOLIDATE ? "moved to make room for"
	                                                  : "evicted for";
	return sc_arena_printf(s->arena, "%s %s", what, s->jobs[preemptor].spec->name);
}

/* Evicts one unit into the statement; a unit whose job is already being
 * evicted by an earlier unit of the set is a no-op. */
static int evict_unit(sc_sched_t *s, sc_stmt_t *st, const vunit_t *u, int preemptor,
                      const victim_rules_t *r, const char *why)
{
	sjob_t *jb = &s->jobs[u->job];
	for (int p = 0; p < jb->total; p++) {
		if ((u->pod >= 0 && p != u->pod) || jb->pods[p].phase != SC_POD_RUNNING ||
		    jb->pods[p].placed_now)
			continue;
		int rc = sc__stmt_evict(st, u->job, p, r->action, preemptor, why);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Evicts the units in set (indices into cands) and tries to place the
 * preemptor. Leaves everything in st when it fits (returns 1); rolls back
 * and returns 0 when not. */
static int try_set(sc_sched_t *s, sc_stmt_t *st, int preemptor, const vunit_t *cands,
                   const int *set, int n, const victim_rules_t *r, const char *why)
{
	size_t mark = sc__stmt_mark(st);
	for (int i = 0; i < n; i++) {
		int rc = evict_unit(s, st, &cands[set[i]], preemptor, r, why);
		if (rc < 0)
			return rc;
	}
	sjob_t *pj = &s->jobs[preemptor];
	const char *saved = pj->reason;
	bool quiet = s->quiet;
	s->quiet = true; /* a failed trial needs no explanation */
	int placed = sc__place_job(s, st, preemptor);
	s->quiet = quiet;
	pj->reason = saved;
	if (placed < 0)
		return placed;
	if (placed > 0 && pj->nrunning >= pj->min_member &&
	    (!r->valid || r->valid(r->ctx, s, preemptor)))
		return 1;
	sc__stmt_rollback(st, mark);
	return 0;
}

static bool set_allowed(sc_sched_t *s, int preemptor, const vunit_t *cands, const int *set, int n,
                        const victim_rules_t *r, vunit_t *scratch)
{
	for (int i = 0; i < n; i++) {
		if (!r->allowed(r->ctx, s, preemptor, &cands[set[i]], scratch, i))
			return false;
		scratch[i] = cands[set[i]];
	}
	return true;
}

/* Exact search over subsets of at most EXACT_MAX candidates, in order of
 * GPUs evicted, then highest priority, then runtime. */
static int exact(sc_sched_t *s, sc_stmt_t *st, int preemptor, const vunit_t *c, int n,
                 const victim_rules_t *r, const char *why)
{
	int total = 1 << n, best = -1;
	double best_gpu = 0, best_rt = 0;
	int best_prio = 0;
	int set[EXACT_MAX];
	vunit_t scratch[EXACT_MAX];
	for (int m = 1; m < total; m++) {
		int k = 0, prio = -2147483647;
		double gpu = 0, rt = 0;
		for (int i = 0; i < n; i++)
			if (m & (1 << i)) {
				set[k++] = i;
				gpu += c[i].gpus;
				rt += (double)c[i].runtime;
				if (c[i].priority > prio)
					prio = c[i].priority;
			}
		if (best >= 0 && (gpu > best_gpu + 1e-9 ||
		                  (gpu > best_gpu - 1e-9 &&
		                   (prio > best_prio || (prio == best_prio && rt >= best_rt)))))
			continue;
		if (!set_allowed(s, preemptor, c, set, k, r, scratch))
			continue;
		int rc = try_set(s, st, preemptor, c, set, k, r, why);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			sc__stmt_rollback(st, 0);
			best = m;
			best_gpu = gpu;
			best_prio = prio;
			best_rt = rt;
		}
	}
	if (best < 0)
		return 0;
	int k = 0;
	for (int i = 0; i < n; i++)
		if (best & (1 << i))
			set[k++] = i;
	return try_set(s, st, preemptor, c, set, k, r, why);
}

/* Greedy with pruning for large candidate lists. */
static int greedy(sc_sched_t *s, sc_stmt_t *st, int preemptor, const vunit_t *c, int n,
                  const victim_rules_t *r, const char *why)
{
	int *set = sc_arena_alloc(s->arena, (size_t)n * sizeof(int));
	vunit_t *scratch = sc_arena_alloc(s->arena, (size_t)n * sizeof(vunit_t));
	if (!set || !scratch)
		return SC_ENOMEM;
	const res3_t *need = &s->jobs[preemptor].step_req;
	double freed = 0;
	int k = 0, found = 0;
	for (int i = 0; i < n && !found; i++) {
		if (!r->allowed(r->ctx, s, preemptor, &c[i], scratch, k))
			continue;
		scratch[k] = c[i];
		set[k++] = i;
		freed += c[i].gpus;
		/* Simulate only once enough GPUs could be free. */
		if (need->v[SC_RES_GPU] > 0 && freed + 1e-9 < need->v[SC_RES_GPU] * 0.999 && k < n)
			continue;
		found = try_set(s, st, preemptor, c, set, k, r, why);
		if (found < 0)
			return found;
		if (found)
			sc__stmt_rollback(st, 0);
	}
	if (!found)
		return 0;
	/* Prune: drop the most expensive units that are not needed. */
	for (int i = k - 1; i >= 0; i--) {
		int save = set[i];
		memmove(&set[i], &set[i + 1], (size_t)(k - i - 1) * sizeof(int));
		int rc = set_allowed(s, preemptor, c, set, k - 1, r, scratch)
		             ? try_set(s, st, preemptor, c, set, k - 1, r, why)
		             : 0;
		if (rc < 0)
			return rc;
		if (rc == 1) {
			sc__stmt_rollback(st, 0);
			k--;
			continue;
		}
		memmove(&set[i + 1], &set[i], (size_t)(k - i - 1) * sizeof(int));
		set[i] = save;
	}
	return try_set(s, st, preemptor, c, set, k, r, why);
}

int sc__find_victims(sc_sched_t *s, sc_stmt_t *st, int preemptor, vunit_t *cands, int n,
                     const victim_rules_t *rules)
{
	if (n <= 0)
		return 0;
	qsort(cands, (size_t)n, sizeof(*cands), unit_cmp);
	const char *why = pod_reason(s, rules->action, preemptor);
	if (!why)
		return SC_ENOMEM;
	/* A preemptor that fits without evicting anything needs no victims:
	 * evicting would only cost work (allocate decides such jobs). */
	int rc = try_set(s, st, preemptor, cands, NULL, 0, rules, why);
	if (rc != 0) {
		if (rc == 1)
			sc__stmt_rollback(st, 0);
		return rc < 0 ? rc : 0;
	}
	if (n <= EXACT_MAX)
		return exact(s, st, preemptor, cands, n, rules, why);
	return greedy(s, st, preemptor, cands, n, rules, why);
}
