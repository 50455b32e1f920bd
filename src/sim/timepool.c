/* The time-mode simulator's nodes and node pools. See timepool.h. */
#include "sim/timepool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

static int add_node(sc_tnodes_t *t, const sc_node_spec_t *spec, int pool, const char *name,
                    int state, int64_t join_at)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		sc_tnode_t *v = sc_realloc(t->v, cap * sizeof(*v));
		if (!v)
			return SC_ENOMEM;
		t->v = v;
		t->cap = cap;
	}
	char *nm = sc_strdup(name);
	if (!nm)
		return SC_ENOMEM;
	sc_tnode_t *n = &t->v[t->n];
	*n = (sc_tnode_t){
	    .spec = *spec, .pool = pool, .state = state, .join_at = join_at, .idle_since = -1};
	n->spec.name = nm;
	n->spec.not_ready = n->spec.unschedulable = false;
	if (sc_strmap_put(&t->by_name, nm, (uint32_t)t->n) < 0) {
		free(nm);
		return SC_ENOMEM;
	}
	t->n++;
	t->gpus_billed += spec->gpu_count;
	if (state == SC_TN_UP)
		t->gpus_up += spec->gpu_count;
	return 0;
}

/* A new node of pool p: "<pool>-<k>", the template's labels. */
static int add_pool_node(sc_tnodes_t *t, size_t p, int state, int64_t join_at)
{
	char name[96];
	snprintf(name, sizeof(name), "%s-%d", t->pools[p].pool.name, t->made[p]++);
	return add_node(t, &t->pools[p].pool.tmpl, (int)p, name, state, join_at);
}

int sc__tnodes_init(sc_tnodes_t *t, const sc_tsim_config_t *c, int64_t now)
{
	memset(t, 0, sizeof(*t));
	t->pools = c->pools;
	t->npools = c->npools;
	t->delay = c->provision_delay;
	if (sc_strmap_init(&t->by_name, c->nnodes + 64) < 0 ||
	    !(t->plan_pools = sc_calloc(c->npools + 1, sizeof(*t->plan_pools))) ||
	    !(t->made = sc_calloc(c->npools + 1, sizeof(int))))
		return SC_ENOMEM;
	for (size_t i = 0; i < c->nnodes; i++)
		if (add_node(t, &c->nodes[i], -1, c->nodes[i].name, SC_TN_UP, now) < 0)
			return SC_ENOMEM;
	for (size_t p = 0; p < c->npools; p++)
		for (int k = 0; k < c->pools[p].pool.min_nodes; k++)
			if (add_pool_node(t, p, SC_TN_UP, now) < 0)
				return SC_ENOMEM;
	return 0;
}

void sc__tnodes_free(sc_tnodes_t *t)
{
	for (size_t i = 0; i < t->n; i++)
		free((char *)t->v[i].spec.name);
	free(t->v);
	sc_strmap_free(&t->by_name);
	free(t->plan_pools);
	free(t->made);
	free(t->snap);
	memset(t, 0, sizeof(*t));
}

void sc__tnodes_join(sc_tnodes_t *t, int64_t now)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].state == SC_TN_PROVISIONING && t->v[i].join_at <= now) {
			t->v[i].state = SC_TN_UP;
			t->gpus_up += t->v[i].spec.gpu_count;
		}
}

int sc__tnodes_snapshot(sc_tnodes_t *t)
{
	free(t->snap);
	t->nsnap = 0;
	if (!(t->snap = sc_calloc(t->n + 1, sizeof(*t->snap))))
		return SC_ENOMEM;
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].state == SC_TN_UP)
			t->snap[t->nsnap++] = t->v[i].spec;
	return 0;
}

long sc__tnodes_find(const sc_tnodes_t *t, const char *name)
{
	return sc_strmap_get(&t->by_name, name);
}

static void remove_node(sc_tnodes_t *t, sc_tnode_t *n)
{
	n->state = SC_TN_GONE;
	t->gpus_up -= n->spec.gpu_count;
	t->gpus_billed -= n->spec.gpu_count;
	t->removed++;
}

/* The scale-down plan's nodes start (or keep) their timer; the others
 * stop it; a node listed for its pool's whole delay goes. */
static int apply_down(sc_tnodes_t *t, const sc_scaledown_t *down, int64_t now)
{
	bool *listed = sc_calloc(t->n + 1, sizeof(bool));
	if (!listed)
		return SC_ENOMEM;
	for (size_t k = 0; k < down->n; k++) {
		long i = sc__tnodes_find(t, down->nodes[k].node);
		if (i >= 0)
			listed[i] = true;
	}
	for (size_t i = 0; i < t->n; i++) {
		sc_tnode_t *n = &t->v[i];
		if (n->state != SC_TN_UP || n->pool < 0)
			continue;
		if (!listed[i]) {
			n->idle_since = -1;
			continue;
		}
		if (n->idle_since < 0)
			n->idle_since = now;
		if (now - n->idle_since >= t->pools[n->pool].scale_down_after)
			remove_node(t, n);
	}
	free(listed);
	return 0;
}

int sc__tnodes_plan(sc_tnodes_t *t, const sc_snapshot_t *snap, const sc_decisions_t *d, int64_t now,
                    char *msg, size_t msgsize)
{
	sc_scaleup_t *up = NULL;
	sc_scaledown_t *down = NULL;
	sc_scaledown_opts_t o;
	if (t->npools == 0)
		return 0;
	for (size_t p = 0; p < t->npools; p++) {
		t->plan_pools[p] = t->pools[p].pool;
		t->plan_pools[p].in_flight = 0;
		t->plan_pools[p].removing = 0;
	}
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].state == SC_TN_PROVISIONING)
			t->plan_pools[t->v[i].pool].in_flight++;
	/* Pods do not move in this replay (no model of a restart's cost), so
	 * only empty nodes go. */
	sc_scaledown_opts_default(&o);
	o.moves = false;
	int rc = sc_scaleup_plan(snap, d, t->plan_pools, t->npools, &up, msg, msgsize);
	if (rc == 0)
		rc = sc_scaledown_plan(snap, d, t->plan_pools, t->npools, &o, &down, msg, msgsize);
	/* A delay of 0 joins at the next second: the cycle that places work
	 * on the node needs an event of its own. */
	int64_t join_at = now + (t->delay > 0 ? t->delay : 1);
	for (size_t p = 0; rc == 0 && p < t->npools; p++)
		for (int k = 0; k < up->add[p] && rc == 0; k++) {
			rc = add_pool_node(t, p, SC_TN_PROVISIONING, join_at);
			t->requested++;
		}
	if (rc == 0)
		rc = apply_down(t, down, now);
	sc_scaleup_free(up);
	sc_scaledown_free(down);
	return rc;
}

int64_t sc__tnodes_next(const sc_tnodes_t *t)
{
	int64_t next = INT64_MAX;
	for (size_t i = 0; i < t->n; i++) {
		const sc_tnode_t *n = &t->v[i];
		int64_t at = INT64_MAX;
		if (n->state == SC_TN_PROVISIONING)
			at = n->join_at;
		else if (n->state == SC_TN_UP && n->idle_since >= 0)
			at = n->idle_since + t->pools[n->pool].scale_down_after;
		next = at < next ? at : next;
	}
	return next;
}

/* Nodes a pool may have at most. */
static int64_t pool_cap(const sc_pool_t *p)
{
	int64_t cap = p->max_nodes >= 0 ? p->max_nodes : INT32_MAX;
	if (p->max_gpus >= 0 && p->tmpl.gpu_count > 0 && p->max_gpus / p->tmpl.gpu_count < cap)
		cap = p->max_gpus / p->tmpl.gpu_count;
	return cap;
}

static bool holds(const sc_node_spec_t *n, const sc_request_t *r)
{
	return n->gpu_count >= r->gpus && n->cpu_milli >= r->cpu_milli && n->memory >= r->memory;
}

int64_t sc__tnodes_capacity(const sc_tnodes_t *t, const sc_request_t *r,
                            bool (*ok)(const void *, const char *), const void *ctx, bool *one)
{
	int64_t gpus = 0;
	bool gpu_pod = r->gpus > 0 || r->gpu_milli > 0;
	*one = false;
	for (size_t i = 0; i < t->n; i++) {
		const sc_node_spec_t *n = &t->v[i].spec;
		if (t->v[i].pool >= 0 || (gpu_pod && !ok(ctx, n->gpu_model)))
			continue;
		gpus += n->gpu_count;
		*one |= holds(n, r);
	}
	for (size_t p = 0; p < t->npools; p++) {
		const sc_node_spec_t *n = &t->pools[p].pool.tmpl;
		if (gpu_pod && !ok(ctx, n->gpu_model))
			continue;
		gpus += pool_cap(&t->pools[p].pool) * n->gpu_count;
		*one |= holds(n, r) && pool_cap(&t->pools[p].pool) > 0;
	}
	return gpus;
}
