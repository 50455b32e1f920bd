/* Scale-down: which pool nodes could go now.
 *
 * A node is a candidate when it is a pool member that is not cordoned, not
 * reserved for a waiting job and holds no pod that is still releasing (or
 * pipelined, waiting for one that is). An
 * empty candidate may go as it is. One with pods may go only if every pod on
 * it is preemptible, belongs to a job without a required topology (moving
 * one pod could take the gang out of its domain) and the allocate action
 * places every one of them on the nodes that stay: the cluster-autoscaler's
 * "pods can be moved" test, done by our own scheduler. The job's other pods
 * keep their places and its pods that were not running are frozen, so the
 * what-if places the moved pods and nothing else, and a gang is never
 * broken: allocate commits a job's pods only when the gang holds. Nodes are
 * taken one by one, each what-if seeing the nodes chosen before it gone and
 * their pods where they moved, and no pool goes below its minimum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "core/whatif.h"
#include "starcloud/autoscale.h"

void sc_scaledown_opts_default(sc_scaledown_opts_t *o)
{
	o->moves = true;
	o->util_threshold = 0.5;
	o->max_checks = 8;
}

void sc_scaledown_free(sc_scaledown_t *p)
{
	if (!p)
		return;
	free(p->nodes);
	free(p);
}

/* What a node holds after the cycle. */
typedef struct nstate {
	long pool; /* -1: not a pool member */
	int pods, releasing;
	bool immovable;   /* a pod that may not be moved */
	bool reserved;    /* held for a waiting job */
	int64_t gpu_used; /* milli */
	int64_t cpu_used;
} nstate_t;

typedef struct down {
	const sc_snapshot_t *s;
	const sc_pool_t *pools;
	size_t npools;
	sc_whatif_t w;
	nstate_t *ns;
	int *allowed; /* per pool: nodes it may still lose */
	const sc_scaledown_opts_t *o;
	sc_scaledown_t *out;
	char *msg;
	size_t msgsize;
} down_t;

static int64_t pod_gpu_milli(const sc_request_t *r, const sc_pod_status_t *p)
{
	if (r->gpus > 0)
		return (int64_t)r->gpus * 1000;
	if (p->gpu_milli > 0)
		return p->gpu_milli;
	return r->mig ? 1000 / 7 : 0;
}

static const sc_task_spec_t *task_of(const sc_job_spec_t *j, const char *pod)
{
	size_t jl = strlen(j->name);
	if (strncmp(pod, j->name, jl) != 0 || pod[jl] != '-')
		return NULL;
	const char *rest = pod + jl + 1;
	for (size_t t = 0; t < j->ntasks; t++) {
		const char *tn = j->tasks[t].name ? j->tasks[t].name : "task";
		size_t tl = strlen(tn);
		if (strncmp(rest, tn, tl) == 0 && rest[tl] == '-')
			return &j->tasks[t];
	}
	return NULL;
}

/* Fills the per-node state from the what-if world (the cycle's outcome). */
static void node_states(down_t *dn, const sc_decisions_t *d)
{
	sc_whatif_t *w = &dn->w;
	for (size_t i = 0; i < w->nnodes; i++) {
		dn->ns[i].pool = -1;
		for (size_t p = 0; p < dn->npools; p++)
			if (sc__node_has_label(&w->nodes[i], SC_POOL_LABEL, dn->pools[p].name)) {
				dn->ns[i].pool = (long)p;
				break;
			}
	}
	for (size_t j = 0; j < w->snap.njobs; j++) {
		const sc_job_spec_t *js = &w->jobs[j];
		bool movable = sc_job_preemptible(dn->s, j) && !js->topo_required;
		for (size_t k = 0; k < js->npods; k++) {
			const sc_pod_status_t *p = &js->pods[k];
			long n = p->node ? sc_strmap_get(&w->node_index, p->node) : -1;
			if (n < 0 || (p->phase != SC_POD_RUNNING && p->phase != SC_POD_RELEASING &&
			              p->phase != SC_POD_PIPELINED))
				continue;
			nstate_t *st = &dn->ns[n];
			st->pods++;
			/* A pod still leaving, or waiting for one that is: the
			 * node is in motion, not a candidate. */
			st->releasing += p->phase != SC_POD_RUNNING;
			st->immovable |= !movable;
			const sc_task_spec_t *t = task_of(js, p->name);
			if (t) {
				st->gpu_used += pod_gpu_milli(&t->req, p);
				st->cpu_used += t->req.cpu_milli;
			}
		}
	}
	for (size_t i = 0; d && i < d->npending; i++)
		for (size_t k = 0; k < d->pending[i].nreserved; k++) {
			long n = sc_strmap_get(&w->node_index, d->pending[i].reserved_nodes[k]);
			if (n >= 0)
				dn->ns[n].reserved = true;
		}
}

static void pool_allowances(down_t *dn)
{
	for (size_t i = 0; i < dn->w.nnodes; i++)
		if (dn->ns[i].pool >= 0)
			dn->allowed[dn->ns[i].pool]++;
	for (size_t p = 0; p < dn->npools; p++) {
		/* Members the caller is removing do not count; a member a person
		 * cordoned does (as for scale-up), but is never offered. */
		int live = dn->allowed[p] - dn->pools[p].removing + dn->pools[p].in_flight;
		int a = live - dn->pools[p].min_nodes;
		dn->allowed[p] = a > 0 ? a : 0;
	}
}

static double utilisation(const sc_node_spec_t *n, const nstate_t *st)
{
	if (n->gpu_count > 0)
		return (double)st->gpu_used / (1000.0 * n->gpu_count);
	return n->cpu_milli > 0 ? (double)st->cpu_used / (double)n->cpu_milli : 1.0;
}

typedef struct cand {
	size_t node;
	double util;
} cand_t;

static int cmp_cand(const void *a, const void *b)
{
	const cand_t *x = a, *y = b;
	if (x->util != y->util)
		return x->util < y->util ? -1 : 1;
	return x->node < y->node ? -1 : x->node > y->node;
}

/* Candidates: empty ones first (utilisation -1), then by utilisation. */
static cand_t *candidates(down_t *dn, size_t *nc)
{
	cand_t *c = sc_calloc(dn->w.nnodes + 1, sizeof(*c));
	*nc = 0;
	if (!c)
		return NULL;
	for (size_t i = 0; i < dn->w.nnodes; i++) {
		const nstate_t *st = &dn->ns[i];
		const sc_node_spec_t *n = &dn->s->nodes[i];
		if (st->pool < 0 || n->unschedulable || st->reserved || st->releasing)
			continue;
		if (st->pods == 0) {
			c[(*nc)++] = (cand_t){i, -1};
			continue;
		}
		double u = utilisation(n, st);
		if (dn->o->moves && !st->immovable && !n->not_ready && u <= dn->o->util_threshold)
			c[(*nc)++] = (cand_t){i, u};
	}
	qsort(c, *nc, sizeof(*c), cmp_cand);
	return c;
}

/* A pod taken off the node under test, to put back if it cannot move. */
typedef struct moved {
	size_t job;
	sc_pod_status_t st;
} moved_t;

/* Takes node i's pods out of the world; returns how many, or SC_ENOMEM. */
static long take_pods(down_t *dn, size_t i, moved_t **out)
{
	sc_whatif_t *w = &dn->w;
	const char *name = w->nodes[i].name;
	size_t n = 0, cap = (size_t)dn->ns[i].pods + 1;
	moved_t *m = sc_calloc(cap, sizeof(*m));
	if (!m)
		return SC_ENOMEM;
	for (size_t j = 0; j < w->snap.njobs; j++)
		for (size_t k = w->jobs[j].npods; k > 0; k--) {
			sc_pod_status_t *p = &w->pods[j][k - 1];
			if (p->phase != SC_POD_RUNNING || !p->node || strcmp(p->node, name) != 0 ||
			    n == cap)
				continue;
			m[n++] = (moved_t){j, *p};
			sc__whatif_set_pod(w, j, p->name, NULL, 0);
		}
	*out = m;
	return (long)n;
}

static void put_back(down_t *dn, const moved_t *m, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		const sc_pod_status_t *p = &m[k].st;
		sc_binding_t b = {.node = p->node,
		                  .gpus = (int *)p->gpus,
		                  .ngpus = p->ngpus,
		                  .gpu_milli = p->gpu_milli,
		                  .gpu_memory = p->gpu_memory,
		                  .mig_gpu = p->mig_gpu,
		                  .mig_start = p->mig_start,
		                  .mig_profile = p->mig_profile};
		sc__whatif_set_pod(&dn->w, m[k].job, p->name, &b, p->started_at);
	}
}

/* The what-if's binding of pod m, or NULL. */
static const sc_binding_t *binding_of(const sc_decisions_t *wd, const moved_t *m)
{
	for (size_t b = 0; b < wd->nbindings; b++)
		if (wd->bindings[b].job == m->job && strcmp(wd->bindings[b].pod, m->st.name) == 0)
			return &wd->bindings[b];
	return NULL;
}

/* Records the moved pods on their new nodes, with copies of what the
 * what-if's decisions (freed after this) own. */
static int settle(down_t *dn, const sc_decisions_t *wd, const moved_t *m, size_t n)
{
	sc_arena_t *a = dn->w.arena;
	for (size_t k = 0; k < n; k++) {
		sc_binding_t b = *binding_of(wd, &m[k]);
		long ni = sc_strmap_get(&dn->w.node_index, b.node);
		int *gpus = sc_arena_calloc(a, b.ngpus + 1, sizeof(int));
		if (ni < 0 || !gpus)
			return SC_ENOMEM;
		if (b.ngpus)
			memcpy(gpus, b.gpus, b.ngpus * sizeof(int));
		b.node = dn->w.nodes[ni].name;
		b.gpus = gpus;
		b.mig_profile = m[k].st.mig_profile;
		if (sc__whatif_set_pod(&dn->w, m[k].job, m[k].st.name, &b, m[k].st.started_at) < 0)
			return SC_ENOMEM;
		dn->ns[ni].pods++;
	}
	return 0;
}

/* Tries to empty node i by moving its pods: 1 when they all move (the
 * world then has them on their new nodes), 0 when not, or SC_E*. */
static int try_moves(down_t *dn, size_t i)
{
	moved_t *m = NULL;
	sc_decisions_t *wd = NULL;
	long n = take_pods(dn, i, &m);
	if (n < 0)
		return (int)n;
	dn->w.nodes[i].unschedulable = true;
	dn->out->checks++;
	int rc = sc__whatif_allocate(&dn->w, &wd, dn->msg, dn->msgsize), ok = rc == 0;
	for (long k = 0; ok && k < n; k++)
		ok = binding_of(wd, &m[k]) != NULL;
	if (ok)
		rc = settle(dn, wd, m, (size_t)n);
	if (!ok) {
		put_back(dn, m, (size_t)n);
		dn->w.nodes[i].unschedulable = false;
	}
	sc_decisions_free(wd);
	free(m);
	return rc < 0 ? rc : ok;
}

static int pick(down_t *dn)
{
	size_t nc;
	int rc = 0;
	cand_t *c = candidates(dn, &nc);
	if (!c)
		return SC_ENOMEM;
	for (size_t k = 0; k < nc && rc >= 0; k++) {
		size_t i = c[k].node;
		size_t p = (size_t)dn->ns[i].pool;
		if (dn->allowed[p] == 0)
			continue;
		int moves = dn->ns[i].pods;
		if (moves > 0) {
			if (dn->out->checks >= (size_t)dn->o->max_checks)
				continue;
			if ((rc = try_moves(dn, i)) <= 0)
				continue;
		}
		dn->w.nodes[i].unschedulable = true;
		dn->allowed[p]--;
		dn->out->nodes[dn->out->n++] =
		    (sc_scaledown_node_t){dn->s->nodes[i].name, p, moves};
	}
	free(c);
	return rc < 0 ? rc : 0;
}

int sc_scaledown_plan(const sc_snapshot_t *s, const sc_decisions_t *d, const sc_pool_t *pools,
                      size_t npools, const sc_scaledown_opts_t *opts, sc_scaledown_t **out,
                      char *msg, size_t msgsize)
{
	sc_scaledown_opts_t def;
	down_t dn = {.s = s, .pools = pools, .npools = npools, .msg = msg, .msgsize = msgsize};
	int rc = SC_ENOMEM;
	*out = NULL;
	if (msg && msgsize)
		msg[0] = '\0';
	if (!opts) {
		sc_scaledown_opts_default(&def);
		opts = &def;
	}
	dn.o = opts;
	for (size_t p = 0; p < npools; p++)
		if (!pools[p].name || pools[p].min_nodes < 0 || pools[p].in_flight < 0) {
			if (msg && msgsize)
				snprintf(msg, msgsize, "pool %zu: a name and non-negative counts",
				         p);
			return SC_EINVAL;
		}
	if (!(dn.out = sc_calloc(1, sizeof(*dn.out))) ||
	    !(dn.out->nodes = sc_calloc(s->nnodes + 1, sizeof(*dn.out->nodes))) ||
	    !(dn.ns = sc_calloc(s->nnodes + 1, sizeof(*dn.ns))) ||
	    !(dn.allowed = sc_calloc(npools + 1, sizeof(int))))
		goto out;
	if (sc__whatif_build(&dn.w, s, d, 0, false) < 0)
		goto out;
	node_states(&dn, d);
	pool_allowances(&dn);
	/* The what-ifs place the moved pods and nothing else. */
	for (size_t j = 0; j < dn.w.snap.njobs; j++)
		if (sc__whatif_freeze(&dn.w, j) < 0)
			goto out;
	rc = pick(&dn);
out:
	sc__whatif_free(&dn.w);
	free(dn.ns);
	free(dn.allowed);
	if (rc < 0) {
		sc_scaledown_free(dn.out);
		return rc;
	}
	*out = dn.out;
	return 0;
}
