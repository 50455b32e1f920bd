/* Scale-up: which new pool nodes would let the waiting work run.
 *
 * The answer comes from the scheduler itself, as the cluster-autoscaler and
 * Karpenter get theirs from a simulated kube-scheduler, but with Starcloud's
 * own allocate action: the world after the cycle's decisions, plus template
 * nodes of every pool (the nodes already requested and those that bring a
 * pool to its minimum first, free; then new ones up to each pool's limits,
 * cheapest pool first), is scheduled again by allocate alone. Fair-share
 * order, whole gangs, required topology domains, spread caps, queue limits,
 * the quota rule for non-preemptible work, selectors and GPU models all
 * decide as they do in a real cycle, so work that waits for anything but
 * capacity stays where it is and asks for nothing. The new nodes that got
 * pods are the request.
 *
 * Template nodes are named "\x1f<index>" (a byte no manifest name has), so a
 * binding on one is told from a binding on a real node by its first byte. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "core/whatif.h"
#include "starcloud/autoscale.h"

#define GHOST_MARK '\x1f'

typedef struct ghost {
	size_t pool;
	bool fresh; /* a new node (not in flight, not for the minimum) */
} ghost_t;

typedef struct pool_state {
	int members, gpus; /* nodes in the snapshot with the pool's label */
	int free_ghosts;   /* in flight + below the minimum */
	int below;         /* nodes missing to the minimum */
	int headroom;      /* new nodes the limits allow */
	double unit_cost;
} pool_state_t;

void sc_scaleup_free(sc_scaleup_t *p)
{
	if (!p)
		return;
	free(p->add);
	free(p->below_min);
	free(p->headroom);
	free(p->waits);
	free(p);
}

static int bad_pool(char *msg, size_t msgsize, const sc_pool_t *p, const char *what)
{
	if (msg && msgsize)
		snprintf(msg, msgsize, "pool %s: %s", p->name ? p->name : "(unnamed)", what);
	return SC_EINVAL;
}

/* Checks what the what-if relies on; the manifest decoder refuses worse. */
static int check_pools(const sc_pool_t *pools, size_t npools, char *msg, size_t msgsize)
{
	for (size_t i = 0; i < npools; i++) {
		const sc_pool_t *p = &pools[i];
		if (!p->name || !p->name[0])
			return bad_pool(msg, msgsize, p, "no name");
		if (p->min_nodes < 0 || p->in_flight < 0 || p->removing < 0)
			return bad_pool(msg, msgsize, p, "negative node count");
		if (p->max_nodes >= 0 && p->min_nodes > p->max_nodes)
			return bad_pool(msg, msgsize, p, "minNodes above maxNodes");
		if (p->tmpl.gpu_count < 0 || p->tmpl.gpu_count > 16 ||
		    (p->tmpl.gpu_count > 0 && !p->tmpl.gpu_model))
			return bad_pool(msg, msgsize, p, "template GPUs: count 0..16 with a model");
		for (size_t k = 0; k < i; k++)
			if (strcmp(pools[k].name, p->name) == 0)
				return bad_pool(msg, msgsize, p, "two pools of that name");
	}
	return 0;
}

static double unit_cost(const sc_pool_t *p)
{
	if (p->cost > 0)
		return p->cost;
	return p->tmpl.gpu_count > 0 ? p->tmpl.gpu_count : 1;
}

/* Members, free template nodes and headroom of every pool. */
static void pool_states(const sc_snapshot_t *s, const sc_pool_t *pools, size_t npools,
                        size_t unplaced, pool_state_t *st, sc_scaleup_t *plan)
{
	for (size_t i = 0; i < s->nnodes; i++)
		for (size_t p = 0; p < npools; p++)
			if (sc__node_has_label(&s->nodes[i], SC_POOL_LABEL, pools[p].name)) {
				st[p].members++;
				st[p].gpus += s->nodes[i].gpu_count;
				break;
			}
	for (size_t p = 0; p < npools; p++) {
		const sc_pool_t *pl = &pools[p];
		int live = st[p].members - pl->removing + pl->in_flight;
		int below = pl->min_nodes > live ? pl->min_nodes - live : 0;
		/* Nodes on their way out still exist, so they count against
		 * the maximum until they are gone. */
		long have = (long)st[p].members + pl->in_flight + below;
		long room = pl->max_nodes < 0 ? INT_MAX : (long)pl->max_nodes - have;
		int g = pl->tmpl.gpu_count;
		if (pl->max_gpus >= 0 && g > 0) {
			long gr =
			    ((long)pl->max_gpus - st[p].gpus - (long)(pl->in_flight + below) * g) /
			    g;
			room = gr < room ? gr : room;
		}
		if (room < 0)
			room = 0;
		if ((size_t)room > unplaced)
			room = (long)unplaced;
		st[p].free_ghosts = pl->in_flight + below;
		st[p].below = below;
		st[p].headroom = (int)room;
		st[p].unit_cost = unit_cost(pl);
		plan->below_min[p] = below;
		plan->add[p] = below;
		plan->headroom[p] = (int)room;
	}
}

/* The template node's labels: the pool's, plus the pool label. */
static const sc_label_t *ghost_labels(sc_arena_t *a, const sc_pool_t *p, size_t *n)
{
	if (sc__node_has_label(&p->tmpl, SC_POOL_LABEL, p->name)) {
		*n = p->tmpl.nlabels;
		return p->tmpl.labels;
	}
	sc_label_t *l = sc_arena_calloc(a, p->tmpl.nlabels + 1, sizeof(*l));
	if (!l)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < p->tmpl.nlabels; i++)
		if (!p->tmpl.labels[i].key || strcmp(p->tmpl.labels[i].key, SC_POOL_LABEL) != 0)
			l[k++] = p->tmpl.labels[i];
	l[k++] = (sc_label_t){SC_POOL_LABEL, p->name};
	*n = k;
	return l;
}

static int add_ghost(sc_whatif_t *w, const sc_pool_t *pools, size_t p, bool fresh, ghost_t *g,
                     size_t *ng)
{
	sc_node_spec_t n = pools[p].tmpl;
	n.name = sc_arena_printf(w->arena, "%c%zu", GHOST_MARK, *ng);
	n.labels = ghost_labels(w->arena, &pools[p], &n.nlabels);
	n.not_ready = false;
	n.unschedulable = false;
	if (!n.name || !n.labels || sc__whatif_add_node(w, &n) < 0)
		return SC_ENOMEM;
	g[*ng] = (ghost_t){p, fresh};
	(*ng)++;
	return 0;
}

/* Pools by the cost of one node, then in their given order (ctx: the
 * pool states). */
static int cmp_pool_cost(const void *a, const void *b, void *ctx)
{
	const pool_state_t *st = ctx;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	double cx = st[x].unit_cost, cy = st[y].unit_cost;
	if (cx != cy)
		return cx < cy ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Free template nodes first (the binpack tie-break is the lower node
 * index), then new ones, cheapest pool first. */
static int add_ghosts(sc_whatif_t *w, const sc_pool_t *pools, size_t npools, const pool_state_t *st,
                      ghost_t *g, size_t *ng)
{
	size_t *order = sc_arena_calloc(w->arena, npools + 1, sizeof(size_t));
	if (!order)
		return SC_ENOMEM;
	for (size_t p = 0; p < npools; p++)
		for (int k = 0; k < st[p].free_ghosts; k++)
			if (add_ghost(w, pools, p, false, g, ng) < 0)
				return SC_ENOMEM;
	for (size_t p = 0; p < npools; p++)
		order[p] = p;
	qsort_r(order, npools, sizeof(size_t), cmp_pool_cost, (void *)st);
	for (size_t i = 0; i < npools; i++)
		for (int k = 0; k < st[order[i]].headroom; k++)
			if (add_ghost(w, pools, order[i], true, g, ng) < 0)
				return SC_ENOMEM;
	return 0;
}

/* The template node a binding went to, or -1 for a real node. */
static long ghost_of(const char *node)
{
	if (!node || node[0] != GHOST_MARK || !node[1])
		return -1;
	long v = 0;
	for (const char *c = node + 1; *c; c++) {
		if (*c < '0' || *c > '9' || v > LONG_MAX / 10 - 10)
			return -1;
		v = v * 10 + (*c - '0');
	}
	return v;
}

typedef struct use {
	size_t job;
	long ghost;
} use_t;

static int cmp_use(const void *a, const void *b)
{
	const use_t *x = a, *y = b;
	if (x->job != y->job)
		return x->job < y->job ? -1 : 1;
	return x->ghost < y->ghost ? -1 : x->ghost > y->ghost;
}

/* Adds one (job, template node) use to the job's wait on that pool. */
static void add_wait(sc_scaleup_t *plan, size_t job, const ghost_t *g)
{
	sc_pool_wait_t *w = NULL;
	for (size_t i = plan->nwaits; i > 0; i--) {
		if (plan->waits[i - 1].job != job)
			break;
		if (plan->waits[i - 1].pool == g->pool) {
			w = &plan->waits[i - 1];
			break;
		}
	}
	if (!w) {
		w = &plan->waits[plan->nwaits++];
		*w = (sc_pool_wait_t){.job = job, .pool = g->pool};
	}
	w->nodes++;
	w->new_nodes += g->fresh;
}

/* Reads the what-if's bindings: new nodes used per pool, and which jobs
 * wait for how many template nodes of which pool. */
static int read_uses(const sc_decisions_t *wd, const ghost_t *g, size_t ng, sc_scaleup_t *plan)
{
	use_t *u = sc_calloc(wd->nbindings + 1, sizeof(*u));
	bool *used = sc_calloc(ng + 1, sizeof(bool));
	size_t nu = 0;
	int rc = SC_ENOMEM;
	if (!u || !used)
		goto out;
	for (size_t b = 0; b < wd->nbindings; b++) {
		long k = ghost_of(wd->bindings[b].node);
		if (k >= 0 && (size_t)k < ng)
			u[nu++] = (use_t){wd->bindings[b].job, k};
	}
	qsort(u, nu, sizeof(*u), cmp_use);
	if (!(plan->waits = sc_calloc(nu + 1, sizeof(*plan->waits))))
		goto out;
	for (size_t i = 0; i < nu; i++) {
		if (i > 0 && u[i].job == u[i - 1].job && u[i].ghost == u[i - 1].ghost)
			continue;
		const ghost_t *gh = &g[u[i].ghost];
		add_wait(plan, u[i].job, gh);
		if (gh->fresh && !used[u[i].ghost]) {
			used[u[i].ghost] = true;
			plan->add[gh->pool]++;
		}
	}
	rc = 0;
out:
	free(u);
	free(used);
	return rc;
}

static sc_scaleup_t *plan_new(size_t npools)
{
	sc_scaleup_t *p = sc_calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->npools = npools;
	p->add = sc_calloc(npools + 1, sizeof(int));
	p->below_min = sc_calloc(npools + 1, sizeof(int));
	p->headroom = sc_calloc(npools + 1, sizeof(int));
	if (!p->add || !p->below_min || !p->headroom) {
		sc_scaleup_free(p);
		return NULL;
	}
	return p;
}

/* One what-if run and what it needs. */
typedef struct trial {
	sc_scaleup_t *plan;
	int *bound;  /* per job: pods the what-if bound */
	double cost; /* of the new nodes */
} trial_t;

static void trial_free(trial_t *t)
{
	sc_scaleup_free(t->plan);
	free(t->bound);
	memset(t, 0, sizeof(*t));
}

typedef struct upctx {
	const sc_snapshot_t *s;
	size_t npools;
	sc_whatif_t w;
	pool_state_t *st;
	ghost_t *g;
	size_t ng;
	char *msg;
	size_t msgsize;
} upctx_t;

/* Runs the what-if with the new nodes of the excluded pools withheld. */
static int run_trial(upctx_t *c, const bool *excluded, trial_t *t)
{
	sc_decisions_t *wd = NULL;
	int rc = SC_ENOMEM;
	memset(t, 0, sizeof(*t));
	if (!(t->plan = plan_new(c->npools)) ||
	    !(t->bound = sc_calloc(c->s->njobs + 1, sizeof(int))))
		goto out;
	for (size_t p = 0; p < c->npools; p++) {
		t->plan->below_min[p] = t->plan->add[p] = c->st[p].below;
		t->plan->headroom[p] = c->st[p].headroom;
	}
	for (size_t k = 0; k < c->ng; k++)
		c->w.nodes[c->s->nnodes + k].unschedulable =
		    c->g[k].fresh && excluded[c->g[k].pool];
	t->plan->template_nodes = c->ng;
	if ((rc = sc__whatif_allocate(&c->w, &wd, c->msg, c->msgsize)) < 0)
		goto out;
	for (size_t b = 0; b < wd->nbindings; b++)
		if (wd->bindings[b].job < c->s->njobs)
			t->bound[wd->bindings[b].job]++;
	if ((rc = read_uses(wd, c->g, c->ng, t->plan)) < 0)
		goto out;
	for (size_t p = 0; p < c->npools; p++)
		t->cost += (t->plan->add[p] - c->st[p].below) * c->st[p].unit_cost;
out:
	sc_decisions_free(wd);
	if (rc < 0)
		trial_free(t);
	return rc;
}

/* True when b places at least what a places, job by job. */
static bool places_all(const trial_t *a, const trial_t *b, size_t njobs)
{
	for (size_t j = 0; j < njobs; j++)
		if (b->bound[j] < a->bound[j])
			return false;
	return true;
}

/* The cheaper-set pass: binpack prefers the fullest node that fits, so a
 * small expensive node can win over a large cheap one. Withholding a used
 * pool's new nodes, most expensive first, is kept when the same work still
 * runs for less. One what-if per pool used, at most. */
static int cheaper(upctx_t *c, trial_t *best)
{
	bool *ex = sc_calloc(c->npools + 1, sizeof(bool));
	size_t *order = sc_calloc(c->npools + 1, sizeof(size_t));
	int rc = ex && order ? 0 : SC_ENOMEM;
	for (size_t p = 0; rc == 0 && p < c->npools; p++)
		order[p] = p;
	if (rc == 0)
		qsort_r(order, c->npools, sizeof(size_t), cmp_pool_cost, c->st);
	for (size_t i = c->npools; rc == 0 && i > 0; i--) {
		size_t p = order[i - 1];
		trial_t t;
		if (best->plan->add[p] <= c->st[p].below)
			continue;
		ex[p] = true;
		if ((rc = run_trial(c, ex, &t)) < 0)
			break;
		if (places_all(best, &t, c->s->njobs) && t.cost < best->cost) {
			trial_free(best);
			*best = t;
		} else {
			trial_free(&t);
			ex[p] = false;
		}
	}
	free(ex);
	free(order);
	return rc;
}

int sc_scaleup_plan(const sc_snapshot_t *s, const sc_decisions_t *d, const sc_pool_t *pools,
                    size_t npools, sc_scaleup_t **out, char *msg, size_t msgsize)
{
	upctx_t c = {.s = s, .npools = npools, .msg = msg, .msgsize = msgsize};
	trial_t best = {0};
	bool *none = NULL;
	size_t total = 0;
	*out = NULL;
	if (msg && msgsize)
		msg[0] = '\0';
	int rc = check_pools(pools, npools, msg, msgsize);
	if (rc < 0)
		return rc;
	sc_scaleup_t *plan = plan_new(npools);
	rc = SC_ENOMEM;
	if (!plan || !(c.st = sc_calloc(npools + 1, sizeof(*c.st))) ||
	    !(none = sc_calloc(npools + 1, sizeof(bool))))
		goto out;
	if ((rc = sc__whatif_build(&c.w, s, d, 0, true)) < 0)
		goto out;
	pool_states(s, pools, npools, c.w.unplaced, c.st, plan);
	for (size_t p = 0; p < npools; p++)
		total += (size_t)c.st[p].free_ghosts + (size_t)c.st[p].headroom;
	/* Nothing waits, or nowhere to grow: the minimums are the answer. */
	rc = 0;
	if (c.w.unplaced == 0 || total == 0)
		goto out;
	rc = SC_ENOMEM;
	if (!(c.g = sc_calloc(total + 1, sizeof(*c.g))) ||
	    add_ghosts(&c.w, pools, npools, c.st, c.g, &c.ng) < 0)
		goto out;
	if ((rc = run_trial(&c, none, &best)) < 0 || (npools > 1 && (rc = cheaper(&c, &best)) < 0))
		goto out;
	sc_scaleup_free(plan);
	plan = best.plan;
	best.plan = NULL;
out:
	trial_free(&best);
	sc__whatif_free(&c.w);
	free(c.st);
	free(c.g);
	free(none);
	if (rc < 0) {
		sc_scaleup_free(plan);
		return rc;
	}
	*out = plan;
	return 0;
}
