/* Choosing victims: units whose eviction lets the preemptor's step fit.
 *
 * Two searches (SchedulerConfig victims.search):
 *  - minimal (the default, beyond KAI): the cheapest set. Cost of a set,
 *    compared in order: GPUs evicted, then the highest victim priority,
 *    then total runtime lost, then fewer victims, then KAI's victim order.
 *    With few candidates every subset is tried in order of cost (exact);
 *    with many, units are added cheapest first until the preemptor fits
 *    and then every unit that is not needed is taken out again, so no
 *    victim in the result could be spared.
 *  - ordered (KAI's job_solver.go / by_pod_solver.go): the preemptor's
 *    pods are solved one more at a time; for each, victims are accumulated
 *    in KAI's victim order and, for the latest one, each of its nodes is
 *    tried with the accumulated victims on that node (plus the victims the
 *    earlier pods needed); the first set that works is kept.
 * Every candidate set is checked by the action's rules and simulated in
 * the statement (evict, place, roll back), as KAI does, so nothing is
 * committed unless the preemptor really fits. */
#include <stdlib.h>
#include <string.h>

#include "core/actions.h"
#include "core/victims.h"

#define EXACT_MAX 12 /* candidates up to which the minimal search is exhaustive */
#define EPS 1e-9

/* KAI's IsNonPreemptibleJobOverQueueQuota: non-preemptible work stays
 * within the quota of every queue from its leaf up, where it can never be
 * reclaimed. */
bool sc__nonpreempt_within_quota(const sc_sched_t *s, const sjob_t *p)
{
	for (int q = p->queue; q >= 0; q = s->queues[q].parent)
		for (int r = 0; r < SC_RES_COUNT; r++)
			if (p->step_req.v[r] > 0 &&
			    s->queues[q].alloc_nonpreempt.v[r] + p->step_req.v[r] >
			        s->queues[q].quota.v[r] + EPS)
				return false;
	return true;
}

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
		const sc_node_view_t *n =
		    sc_cluster_node(s->cluster, sc__pod_at(&jb->pods[p])->node);
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

/* Grows the units buffer (a reused scratch slot; its contents are kept). */
static int grow(sc_sched_t *s, vunit_t **u, int n, int *cap, int more)
{
	if (n + more <= *cap)
		return 0;
	int ncap = *cap;
	while (n + more > ncap)
		ncap *= 2;
	vunit_t *nu = sc__scratch(s, SC_SCR_UNITS2, (size_t)ncap * sizeof(**u));
	if (!nu)
		return SC_ENOMEM;
	memcpy(nu, *u, (size_t)n * sizeof(**u));
	vunit_t *keep = sc__scratch(s, SC_SCR_UNITS, (size_t)ncap * sizeof(**u));
	if (!keep)
		return SC_ENOMEM;
	memcpy(keep, nu, (size_t)n * sizeof(**u));
	*u = keep;
	*cap = ncap;
	return 0;
}

int sc__victim_units(sc_sched_t *s, int preemptor, int queue,
                     int (*pick)(void *, sc_sched_t *, int), void *ctx, vunit_t **out)
{
	int n = 0, cap = 64;
	vunit_t *u = sc__scratch(s, SC_SCR_UNITS, (size_t)cap * sizeof(*u));
	if (u)
		cap = (int)(s->scratch_cap[SC_SCR_UNITS] / sizeof(*u));
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
		if (j == preemptor || !jb->preemptible || jb->nrunning == 0)
			continue;
		int how = pick(ctx, s, j);
		if (how == SC_PICK_NOT_QUEUE) {
			/* The index holds each leaf queue's jobs together. */
			k = s->running_start[jb->queue + 1] - 1;
			continue;
		}
		if (!how)
			continue;
		int live = 0;
		for (int p = 0; p < jb->total; p++)
			live += evictable(&jb->pods[p]);
		if (live == 0 || live != jb->nrunning)
			continue;                  /* part of it is already leaving or new */
		int spare = live - jb->min_member; /* pods above minMember */
		if (how == 2 && spare <= 0)
			continue;
		if ((rc = grow(s, &u, n, &cap, spare > 0 ? spare + 1 : 1)) < 0)
			return rc;
		/* Spare pods of an elastic job, newest replica first, then the
		 * job as a whole (KAI's GetTasksToEvict). */
		int64_t rt = sc__job_runtime(s, j);
		for (int p = jb->total - 1; p >= 0 && spare > 0; p--) {
			if (!evictable(&jb->pods[p]))
				continue;
			u[n] =
			    (vunit_t){.job = j, .pod = p, .priority = jb->priority, .runtime = rt};
			unit_res(s, j, p, &u[n++]);
			spare--;
		}
		if (how == 2)
			continue;
		u[n] = (vunit_t){.job = j, .pod = -1, .priority = jb->priority, .runtime = rt};
		unit_res(s, j, -1, &u[n++]);
	}
	if ((rc = sc__victim_order(s, u, n)) < 0)
		return rc;
	*out = u;
	return n;
}

static char *pod_reason(sc_sched_t *s, int action, int preemptor)
{
	const char *what = action == SC_ACT_RECLAIM       ? "reclaimed for"
	                   : action == SC_ACT_PREEMPT     ? "preempted by"
	                   : action == SC_ACT_CONSOLIDATE ? "moved to make room for"
	                                                  : "evicted for";
	return sc_arena_printf(s->arena, "%s %s", what, s->jobs[preemptor].spec->name);
}

/* Evicts one unit into the statement; a unit whose pods an earlier unit of
 * the set already evicted adds nothing. */
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

static int replace_victims(sc_sched_t *s, sc_stmt_t *st, size_t from);
static int idx_cmp(const void *a, const void *b);

/* With consolidating rules: whether the units of set that were not placed
 * again (some pod of theirs stays evicted) pass the rules. */
static bool left_allowed(sc_sched_t *s, int preemptor, const vunit_t *cands, const int *set, int n,
                         const victim_rules_t *r)
{
	if (!r->allowed)
		return true;
	int *left = sc__scratch(s, SC_SCR_LEFT, (size_t)n * sizeof(int) + sizeof(int));
	vunit_t *u = sc__scratch(s, SC_SCR_LEFTU, (size_t)n * sizeof(vunit_t) + 1);
	if (!left || !u)
		return false;
	int m = 0;
	for (int i = 0; i < n; i++) {
		const vunit_t *c = &cands[set[i]];
		const sjob_t *jb = &s->jobs[c->job];
		bool stays = false;
		for (int p = 0; p < jb->total && !stays; p++)
			stays = (c->pod < 0 || p == c->pod) && jb->pods[p].evicted_now &&
			        jb->pods[p].phase == SC_POD_PENDING;
		if (stays)
			left[m++] = set[i];
	}
	qsort(left, (size_t)m, sizeof(int), idx_cmp);
	for (int i = 0; i < m; i++)
		u[i] = cands[left[i]];
	return r->allowed(r->ctx, s, preemptor, u, m);
}

/* Evicts the units in set (indices into cands) and tries to place the
 * preemptor's step. Leaves everything in st when it fits (returns 1); rolls
 * back and returns 0 when not. */
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
	/* KAI's AllocateJob checks the queue's capacity with the victims gone
	 * (IsJobOverQueueCapacityFn: limits on the path, non-preemptible work
	 * within quota). */
	char lim[8];
	if (!sc__res_fits_limit(s, pj->queue, &pj->step_req, lim, sizeof(lim)) ||
	    (!pj->preemptible && !sc__nonpreempt_within_quota(s, pj))) {
		sc__stmt_rollback(st, mark);
		return 0;
	}
	const char *saved = pj->reason;
	bool quiet = s->quiet;
	s->quiet = true; /* a failed trial needs no explanation */
	int placed = sc__place_job(s, st, preemptor);
	s->quiet = quiet;
	pj->reason = saved;
	if (placed < 0)
		return placed;
	if (sc__step_done(pj, placed) && (!r->valid || r->valid(r->ctx, s, preemptor))) {
		if (!r->consolidating)
			return 1;
		int rc = replace_victims(s, st, mark);
		if (rc < 0)
			return rc;
		if (left_allowed(s, preemptor, cands, set, n, r))
			return 1;
	}
	sc__stmt_rollback(st, mark);
	return 0;
}

static int idx_cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* The action's rules on the units set[0..n) of cands, in victim order
 * (cands are sorted by it, so by index). */
static bool set_allowed(sc_sched_t *s, int preemptor, const vunit_t *cands, int *set, int n,
                        const victim_rules_t *r, vunit_t *scratch)
{
	if (!r->allowed || r->consolidating)
		return true; /* consolidating: asked after the simulation */
	qsort(set, (size_t)n, sizeof(int), idx_cmp);
	for (int i = 0; i < n; i++)
		scratch[i] = cands[set[i]];
	return r->allowed(r->ctx, s, preemptor, scratch, n);
}

/* ---- minimal ------------------------------------------------------- */

typedef struct cost {
	double gpus, runtime;
	int prio, count;
	int first[EXACT_MAX]; /* victim-order positions, ascending */
} cost_t;

static void cost_of(const vunit_t *c, int m, int n, cost_t *k)
{
	memset(k, 0, sizeof(*k));
	k->prio = -2147483647;
	for (int i = 0; i < n; i++)
		if (m & (1 << i)) {
			k->gpus += c[i].gpus;
			k->runtime += (double)c[i].runtime;
			if (c[i].priority > k->prio)
				k->prio = c[i].priority;
			k->first[k->count++] = c[i].order;
		}
}

/* Is cost a strictly cheaper than b? */
static bool cheaper(const cost_t *a, const cost_t *b)
{
	if (a->gpus < b->gpus - 1e-9 || a->gpus > b->gpus + 1e-9)
		return a->gpus < b->gpus;
	if (a->prio != b->prio)
		return a->prio < b->prio;
	if (a->runtime != b->runtime)
		return a->runtime < b->runtime;
	if (a->count != b->count)
		return a->count < b->count;
	for (int i = 0; i < a->count; i++)
		if (a->first[i] != b->first[i])
			return a->first[i] < b->first[i];
	return false;
}

/* Exact search over the subsets of at most EXACT_MAX candidates. */
static int exact(sc_sched_t *s, sc_stmt_t *st, int preemptor, const vunit_t *c, int n,
                 const victim_rules_t *r, const char *why)
{
	int total = 1 << n, best = -1;
	cost_t bc = {0}, k;
	int set[EXACT_MAX];
	vunit_t scratch[EXACT_MAX];
	for (int m = 1; m < total; m++) {
		cost_of(c, m, n, &k);
		if (best >= 0 && !cheaper(&k, &bc))
			continue;
		int cnt = 0;
		for (int i = 0; i < n; i++)
			if (m & (1 << i))
				set[cnt++] = i;
		if (!set_allowed(s, preemptor, c, set, cnt, r, scratch))
			continue;
		int rc = try_set(s, st, preemptor, c, set, cnt, r, why);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			sc__stmt_rollback(st, 0);
			best = m;
			bc = k;
		}
	}
	if (best < 0)
		return 0;
	int cnt = 0;
	for (int i = 0; i < n; i++)
		if (best & (1 << i))
			set[cnt++] = i;
	return try_set(s, st, preemptor, c, set, cnt, r, why);
}

static int greedy_cmp(const void *x, const void *y)
{
	const vunit_t *a = x, *b = y;
	if (a->gpus != b->gpus)
		return a->gpus < b->gpus ? -1 : 1;
	if (a->priority != b->priority)
		return a->priority < b->priority ? -1 : 1;
	if (a->runtime != b->runtime)
		return a->runtime < b->runtime ? -1 : 1;
	return a->order - b->order;
}

/* Greedy with pruning for large candidate lists (sorted cheapest first
 * here; set_allowed restores victim order for the rules). */
static int greedy(sc_sched_t *s, sc_stmt_t *st, int preemptor, vunit_t *c, int n,
                  const victim_rules_t *r, const char *why)
{
	vunit_t *byorder = sc__scratch(s, SC_SCR_UNITS2, (size_t)n * sizeof(vunit_t));
	int *set = sc__scratch(s, SC_SCR_SET, (size_t)n * sizeof(int));
	int *tmp = sc__scratch(s, SC_SCR_SET2, (size_t)n * sizeof(int));
	vunit_t *scratch = sc__scratch(s, SC_SCR_UNITS3, (size_t)n * sizeof(vunit_t));
	if (!byorder || !set || !tmp || !scratch)
		return SC_ENOMEM;
	memcpy(byorder, c, (size_t)n * sizeof(vunit_t)); /* c is in victim order */
	qsort(c, (size_t)n, sizeof(*c), greedy_cmp);
	/* Indices below are into byorder (victim order) via each unit's order. */
	const res3_t *need = &s->jobs[preemptor].step_req;
	double freed = 0;
	int k = 0, found = 0;
	for (int i = 0; i < n && !found; i++) {
		set[k] = c[i].order;
		memcpy(tmp, set, (size_t)(k + 1) * sizeof(int));
		if (!set_allowed(s, preemptor, byorder, tmp, k + 1, r, scratch))
			continue;
		k++;
		freed += c[i].gpus;
		/* Simulate only once enough GPUs could be free. */
		if (need->v[SC_RES_GPU] > 0 && freed + 1e-9 < need->v[SC_RES_GPU] * 0.999 &&
		    i + 1 < n)
			continue;
		found = try_set(s, st, preemptor, byorder, set, k, r, why);
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
		memcpy(tmp, set, (size_t)(k - 1) * sizeof(int));
		int rc = set_allowed(s, preemptor, byorder, tmp, k - 1, r, scratch)
		             ? try_set(s, st, preemptor, byorder, set, k - 1, r, why)
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
	return try_set(s, st, preemptor, byorder, set, k, r, why);
}

/* ---- ordered (KAI) -------------------------------------------------- */

static bool unit_on_node(const sc_sched_t *s, const vunit_t *u, uint32_t node)
{
	const sjob_t *jb = &s->jobs[u->job];
	for (int p = 0; p < jb->total; p++)
		if ((u->pod < 0 || p == u->pod) && evictable(&jb->pods[p]) &&
		    sc__pod_at(&jb->pods[p])->node == node)
			return true;
	return false;
}

/* One partial step of KAI's Solve: victims for the preemptor's first
 * `pods` pods, with the earlier pods' victims (rec[0..nrec)) always
 * evicted. On success the chosen set is in rec (1), else 0. */
static int ordered_step(sc_sched_t *s, sc_stmt_t *st, int preemptor, const vunit_t *c, int n,
                        const victim_rules_t *r, const char *why, int *rec, int *nrec, char *in_rec,
                        int *set, int *acc, vunit_t *scratch)
{
	int rc;
	/* The recorded victims alone (KAI's first scenario). */
	if (*nrec > 0) {
		memcpy(set, rec, (size_t)*nrec * sizeof(int));
		if (set_allowed(s, preemptor, c, set, *nrec, r, scratch)) {
			memcpy(set, rec, (size_t)*nrec * sizeof(int));
			if ((rc = try_set(s, st, preemptor, c, set, *nrec, r, why)) != 0)
				return rc;
		}
	}
	int nacc = 0;
	for (int k = 0; k < n; k++) {
		if (in_rec[k])
			continue;
		acc[nacc++] = k;
		/* KAI validates a scenario with every victim accumulated so far. */
		memcpy(set, rec, (size_t)*nrec * sizeof(int));
		memcpy(set + *nrec, acc, (size_t)nacc * sizeof(int));
		if (!set_allowed(s, preemptor, c, set, *nrec + nacc, r, scratch))
			continue;
		const sjob_t *vj = &s->jobs[c[k].job];
		for (int p = 0; p < vj->total; p++) {
			if ((c[k].pod >= 0 && p != c[k].pod) || !evictable(&vj->pods[p]))
				continue;
			uint32_t node = sc__pod_at(&vj->pods[p])->node;
			bool seen = false; /* each node of the latest victim once */
			for (int q = 0; q < p && !seen; q++)
				seen = (c[k].pod < 0 || q == c[k].pod) && evictable(&vj->pods[q]) &&
				       sc__pod_at(&vj->pods[q])->node == node;
			if (seen)
				continue;
			int m = *nrec;
			memcpy(set, rec, (size_t)m * sizeof(int));
			for (int i = 0; i < nacc; i++)
				if (unit_on_node(s, &c[acc[i]], node))
					set[m++] = acc[i];
			rc = try_set(s, st, preemptor, c, set, m, r, why);
			if (rc < 0)
				return rc;
			if (rc == 1) {
				for (int i = *nrec; i < m; i++)
					in_rec[set[i]] = 1;
				memcpy(rec, set, (size_t)m * sizeof(int));
				*nrec = m;
				return 1;
			}
		}
	}
	return 0;
}

static int ordered(sc_sched_t *s, sc_stmt_t *st, int preemptor, const vunit_t *c, int n,
                   const victim_rules_t *r, const char *why)
{
	int *rec = sc__scratch(s, SC_SCR_SET, (size_t)n * sizeof(int) + sizeof(int));
	int *set = sc__scratch(s, SC_SCR_SET2, (size_t)n * 2 * sizeof(int) + sizeof(int));
	int *acc = sc__scratch(s, SC_SCR_SET3, (size_t)n * sizeof(int) + sizeof(int));
	char *in_rec = sc__scratch(s, SC_SCR_FLAGS, (size_t)n + 1);
	vunit_t *scratch = sc__scratch(s, SC_SCR_UNITS3, (size_t)n * 2 * sizeof(vunit_t) + 1);
	if (in_rec)
		memset(in_rec, 0, (size_t)n + 1);
	if (!rec || !set || !acc || !in_rec || !scratch)
		return SC_ENOMEM;
	sjob_t *pj = &s->jobs[preemptor];
	int step = pj->step, nrec = 0;
	for (int pods = 1; pods <= step; pods++) {
		pj->step = pods; /* a partial job of the first `pods` pods */
		int rc = ordered_step(s, st, preemptor, c, n, r, why, rec, &nrec, in_rec, set, acc,
		                      scratch);
		if (rc <= 0) {
			pj->step = step;
			return rc;
		}
		if (pods < step)
			sc__stmt_rollback(st, 0);
	}
	pj->step = step;
	return 1;
}

/* KAI's solver allocates its victims again after the preemptor
 * (TryToVirtuallyAllocatePreemptorAndGetVictims), each victim job for one
 * step of its own (its pods up to minMember, or one pod): a victim whose
 * step fits elsewhere, within its queue's limits, is moved rather than
 * stopped; the rest of its pods stay evicted. */
static int replace_victims(sc_sched_t *s, sc_stmt_t *st, size_t from)
{
	size_t end = st->nops;
	size_t *ops = sc__scratch(s, SC_SCR_REPL, (end + 1) * sizeof(size_t));
	if (!ops)
		return SC_ENOMEM;
	for (size_t i = from; i < end; i++) {
		if (st->ops[i].kind != OP_EVICT)
			continue;
		int j = st->ops[i].job;
		bool first = true;
		for (size_t k = from; k < i && first; k++)
			first = !(st->ops[k].kind == OP_EVICT && st->ops[k].job == j);
		if (!first)
			continue;
		/* The job's evicted pods still waiting, in task order. */
		int n = 0;
		for (size_t k = i; k < end; k++) {
			if (st->ops[k].kind != OP_EVICT || st->ops[k].job != j ||
			    s->jobs[j].pods[st->ops[k].pod].phase != SC_POD_PENDING)
				continue;
			int at = n++;
			for (; at > 0 && st->ops[ops[at - 1]].pod > st->ops[k].pod; at--)
				ops[at] = ops[at - 1];
			ops[at] = k;
		}
		const sjob_t *jb = &s->jobs[j];
		int want = jb->nrunning < jb->min_member ? jb->min_member - jb->nrunning : 1;
		if (want > n)
			want = n;
		res3_t need = {{0}};
		for (int k = 0; k < want; k++) {
			const stmt_op_t *op = &st->ops[ops[k]];
			const sc_node_view_t *nv = sc_cluster_node(s->cluster, op->assign.node);
			res3_t r = sc__pod_res(s, &jb->spec->tasks[jb->pods[op->pod].task].req, nv);
			for (int q = 0; q < SC_RES_COUNT; q++)
				need.v[q] += r.v[q];
		}
		char why[8];
		if (!sc__res_fits_limit(s, jb->queue, &need, why, sizeof(why)))
			continue;
		size_t mark = sc__stmt_mark(st);
		int rc = 0;
		for (int k = 0; k < want && rc == 0; k++) {
			/* Where it was first: a victim that still fits there
			 * (the preemptor did not need its place after all) is
			 * not evicted (KAI's Statement.Pipeline -> Unevict).
			 * (Copies: allocating may move st->ops.) */
			int pod = st->ops[ops[k]].pod;
			sc_assign_t at = st->ops[ops[k]].assign;
			rc = sc__stmt_allocate_pipe(st, j, pod, &at);
			if (rc == SC_ENOFIT)
				rc = sc__place_pod(s, st, j, pod);
		}
		if (rc == SC_ENOMEM)
			return rc;
		if (rc < 0)
			sc__stmt_rollback(st, mark);
	}
	return 1;
}

static int search(sc_sched_t *s, sc_stmt_t *st, int preemptor, vunit_t *cands, int n,
                  const victim_rules_t *rules, const char *why)
{
	if (s->snap->config.victim_search == SC_VICTIMS_ORDERED)
		return ordered(s, st, preemptor, cands, n, rules, why);
	if (n <= EXACT_MAX)
		return exact(s, st, preemptor, cands, n, rules, why);
	return greedy(s, st, preemptor, cands, n, rules, why);
}

int sc__find_victims(sc_sched_t *s, sc_stmt_t *st, int preemptor, vunit_t *cands, int n,
                     const victim_rules_t *rules)
{
	if (n <= 0)
		return 0;
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
	rc = search(s, st, preemptor, cands, n, rules, why);
	return rc == 1 && !rules->consolidating ? replace_victims(s, st, 0) : rc;
}
