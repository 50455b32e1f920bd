/* The packing bound (src/sim/bound.c) against exhaustive search: on small
 * random worlds every sequence of choices a placement policy could make
 * (each pod that fits goes to some node and device that fit) is tried, and
 *   - the bound is at least the best final allocation of all of them;
 *   - every pod the bound calls forced is placed in every one of them.
 * Plus worlds whose bound is known by hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim/bound.h"
#include "sim/packing.h"
#include "sim/packing_int.h"
#include "sim/rng.h"
#include "sim/trace.h"

#define MAXN 4
#define MAXP 9
#define MAXG 4

/* ---- exhaustive search over any-fit placements ------------------------- */

typedef struct world {
	int nnodes;
	int64_t cpu[MAXN], mem[MAXN];
	int gpus[MAXN];
	const char *model[MAXN];
	const sc__sim_pod_t **order;
	size_t npods;
	const sc_sim_workload_t *w;
} world_t;

typedef struct state {
	int64_t cpu[MAXN], mem[MAXN];
	int16_t free[MAXN][MAXG];
} state_t;

typedef struct search {
	const world_t *w;
	int64_t best; /* most milli placed by any sequence */
	bool rejected_somewhere[MAXP];
	long leaves;
} search_t;

static bool model_ok(const world_t *w, const sc__sim_pod_t *p, int n)
{
	const sc__sim_spec_t *s = &w->w->specs[p->spec];
	if (p->milli == 0 || s->nmodels == 0)
		return true;
	for (int k = 0; k < s->nmodels; k++)
		if (w->model[n] && strcmp(s->models[k], w->model[n]) == 0)
			return true;
	return false;
}

/* Calls back for every distinct way pod p can be placed on s; returns how
 * many there were. */
static int options(const world_t *w, const state_t *s, const sc__sim_pod_t *p, search_t *x,
                   size_t i, int64_t placed);

static void dfs(search_t *x, const state_t *s, size_t i, int64_t placed)
{
	const world_t *w = x->w;
	if (i == w->npods) {
		x->leaves++;
		if (placed > x->best)
			x->best = placed;
		return;
	}
	if (options(w, s, w->order[i], x, i, placed) == 0) {
		x->rejected_somewhere[i] = true;
		dfs(x, s, i + 1, placed);
	}
}

static int options(const world_t *w, const state_t *s, const sc__sim_pod_t *p, search_t *x,
                   size_t i, int64_t placed)
{
	int found = 0;
	for (int n = 0; n < w->nnodes; n++) {
		if (s->cpu[n] < p->req.cpu_milli || s->mem[n] < p->req.memory || !model_ok(w, p, n))
			continue;
		if (p->milli > 0 && w->gpus[n] == 0)
			continue;
		state_t t = *s;
		t.cpu[n] -= p->req.cpu_milli;
		t.mem[n] -= p->req.memory;
		if (p->milli == 0) {
			found++;
			dfs(x, &t, i + 1, placed);
		} else if (p->req.gpus > 0) {
			int need = p->req.gpus;
			for (int d = 0; d < w->gpus[n] && need > 0; d++)
				if (t.free[n][d] == SC_GPU_MILLI) {
					t.free[n][d] = 0;
					need--;
				}
			if (need == 0) {
				found++;
				dfs(x, &t, i + 1, placed + p->milli);
			}
		} else {
			/* One option per distinct free amount on this node. */
			for (int d = 0; d < w->gpus[n]; d++) {
				bool seen = false;
				for (int e = 0; e < d; e++)
					seen = seen || s->free[n][e] == s->free[n][d];
				if (seen || s->free[n][d] < p->req.gpu_milli)
					continue;
				state_t u = t;
				u.free[n][d] = (int16_t)(u.free[n][d] - p->req.gpu_milli);
				found++;
				dfs(x, &u, i + 1, placed + p->milli);
			}
		}
	}
	return found;
}

/* ---- worlds ------------------------------------------------------------ */

typedef struct built {
	sc_trace_node_t nodes[MAXN];
	sc_trace_pod_t pods[MAXP];
	char names[MAXN + MAXP][16];
	sc_trace_nodes_t tn;
	sc_trace_pods_t tp;
	sc_sim_workload_t *w;
	world_t world;
} built_t;

static void build(built_t *b, int nn, int np)
{
	char msg[256];
	b->tn = (sc_trace_nodes_t){b->nodes, (size_t)nn};
	b->tp = (sc_trace_pods_t){b->pods, (size_t)np};
	assert_int_equal(sc_sim_workload_new(&b->tn, &b->tp, "tiny", &b->w, msg, sizeof(msg)), 0);
	world_t *w = &b->world;
	memset(w, 0, sizeof(*w));
	w->w = b->w;
	w->nnodes = nn;
	for (int n = 0; n < nn; n++) {
		w->cpu[n] = b->nodes[n].cpu_milli;
		w->mem[n] = b->nodes[n].memory_mib << 20;
		w->gpus[n] = b->nodes[n].gpu;
		w->model[n] = b->nodes[n].gpu ? b->nodes[n].model : NULL;
	}
}

static search_t search(built_t *b, const sc_sim_config_t *c)
{
	world_t *w = &b->world;
	assert_int_equal(sc__sim_arrivals(b->w, c, &w->order, &w->npods), 0);
	state_t s;
	memset(&s, 0, sizeof(s));
	for (int n = 0; n < w->nnodes; n++) {
		s.cpu[n] = w->cpu[n];
		s.mem[n] = w->mem[n];
		for (int d = 0; d < w->gpus[n]; d++)
			s.free[n][d] = SC_GPU_MILLI;
	}
	search_t x = {.w = w, .best = 0};
	dfs(&x, &s, 0, 0);
	return x;
}

static void random_world(built_t *b, sc_rng_t *r, int *nn, int *np)
{
	static const char *const models[] = {"T4", "V100"};
	static const char *const specs[] = {"", "", "", "T4", "V100", "T4|V100"};
	static const int shares[] = {100, 160, 230, 320, 470, 500, 650, 810, 900};
	memset(b, 0, sizeof(*b));
	*nn = 2 + (int)sc_rng_below(r, 2);
	*np = 6 + (int)sc_rng_below(r, 3);
	for (int n = 0; n < *nn; n++) {
		snprintf(b->names[n], 16, "n%d", n);
		int g = 1 + (int)sc_rng_below(r, 3);
		/* Both models exist (a gpu_spec naming an absent model is a bad
		 * input); the third node's is random. */
		int m = n < 2 ? n : (int)sc_rng_below(r, 2);
		b->nodes[n] =
		    (sc_trace_node_t){b->names[n], 2000 + 2000 * (int64_t)sc_rng_below(r, 4), 4096,
		                      g, (char *)models[m]};
	}
	for (int i = 0; i < *np; i++) {
		snprintf(b->names[MAXN + i], 16, "p%d", i);
		/* The first pod always asks for a GPU: a list of CPU pods only
		 * is a bad input. */
		int kind = i == 0 ? 0 : (int)sc_rng_below(r, 10), num = 0, milli = 0;
		if (kind < 5) {
			num = 1;
			milli = shares[sc_rng_below(r, sizeof(shares) / sizeof(*shares))];
		} else if (kind < 8) {
			num = 1;
			milli = 1000;
		} else if (kind < 9) {
			num = 2;
			milli = 1000;
		}
		b->pods[i] = (sc_trace_pod_t){b->names[MAXN + i],
		                              500 * (int64_t)sc_rng_below(r, 6),
		                              (int64_t)sc_rng_below(r, 3) * 1024,
		                              num,
		                              milli,
		                              num ? (char *)specs[sc_rng_below(r, 6)] : "",
		                              "",
		                              "",
		                              0,
		                              0,
		                              0};
	}
}

/* The bound is at least what the best sequence of choices allocates, and
 * a forced pod is never turned away, on 150 random worlds. */
static void bound_holds_on_random_worlds(void **state)
{
	sc_rng_t r;
	sc_rng_seed(&r, 7, 3);
	int forced_total = 0, unforced_total = 0, tight = 0;
	for (int k = 0; k < 150; k++) {
		built_t b;
		int nn, np;
		random_world(&b, &r, &nn, &np);
		build(&b, nn, np);
		sc_sim_config_t c;
		sc_sim_config_default(&c);
		c.seed = (uint64_t)k;
		c.target = 0; /* the pods as they are, in a shuffled order */
		search_t x = search(&b, &c);
		sc_sim_bound_t bd;
		char msg[256] = "";
		int rc = sc_sim_bound(b.w, &c, &bd, msg, sizeof(msg));
		if (rc != 0)
			fail_msg("world %d: %s", k, msg);
		double cap = 0;
		for (int n = 0; n < nn; n++)
			cap += b.nodes[n].gpu * 1000.0;
		double best = 100.0 * (double)x.best / cap;
		if (bd.bound_pct + 1e-9 < best)
			fail_msg("world %d: bound %.2f %% below the best placement's %.2f %%", k,
			         bd.bound_pct, best);
		tight += bd.bound_pct < best + 0.01;
		bool *forced = calloc(np, sizeof(bool)), *fits = calloc(np, sizeof(bool));
		assert_int_equal(sc__sim_forced(b.w, &c, forced, fits, (size_t)np), 0);
		for (int i = 0; i < np; i++) {
			if (forced[i] && x.rejected_somewhere[i])
				fail_msg("world %d: pod %d is called forced but one sequence "
				         "rejects it",
				         k, i);
			forced_total += forced[i];
			unforced_total += !forced[i];
		}
		free(forced);
		free(fits);
		free(b.world.order);
		sc_sim_workload_free(b.w);
	}
	/* Not vacuous: both kinds occur, and the bound is often exact. */
	assert_true(forced_total > 200 && unforced_total > 100);
	assert_true(tight > 30);
}

/* One 1-GPU node: an 810 share arrives first (forced: the node is
 * empty), so a whole-GPU pod cannot fit afterwards; a 160 share fits the
 * 190 left. Best: 970 milli, and the bound finds exactly that, while the
 * offline relaxation (any subset) could take the whole GPU. */
static void bound_known_by_hand(void **state)
{
	built_t b;
	memset(&b, 0, sizeof(b));
	b.nodes[0] = (sc_trace_node_t){"n0", 8000, 4096, 1, "T4"};
	b.pods[0] = (sc_trace_pod_t){"a", 1000, 0, 1, 810, "", "", "", 0, 0, 0};
	b.pods[1] = (sc_trace_pod_t){"b", 1000, 0, 1, 1000, "", "", "", 0, 0, 0};
	b.pods[2] = (sc_trace_pod_t){"c", 1000, 0, 1, 160, "", "", "", 0, 0, 0};
	build(&b, 1, 3);
	/* Find a seed whose order puts the 810 first. */
	sc_sim_config_t c;
	sc_sim_config_default(&c);
	c.target = 0;
	for (c.seed = 0;; c.seed++) {
		const sc__sim_pod_t **o;
		size_t n;
		assert_int_equal(sc__sim_arrivals(b.w, &c, &o, &n), 0);
		bool first = o[0]->milli == 810;
		free(o);
		if (first)
			break;
	}
	sc_sim_bound_t bd;
	char msg[256];
	assert_int_equal(sc_sim_bound(b.w, &c, &bd, msg, sizeof(msg)), 0);
	assert_true(fabs(bd.bound_pct - 97.0) < 1e-9);
	assert_true(fabs(bd.offline_pct - 100.0) < 1e-9);
	assert_true(bd.forced_pods >= 1);
	sc_sim_workload_free(b.w);
}

/* A cluster far larger than the demand: every pod is forced and the bound
 * is the arrived demand. */
static void bound_is_demand_when_everything_fits(void **state)
{
	built_t b;
	memset(&b, 0, sizeof(b));
	for (int n = 0; n < 3; n++) {
		snprintf(b.names[n], 16, "n%d", n);
		b.nodes[n] = (sc_trace_node_t){b.names[n], 96000, 393216, 4, "G2"};
	}
	b.pods[0] = (sc_trace_pod_t){"a", 4000, 1024, 1, 470, "", "", "", 0, 0, 0};
	b.pods[1] = (sc_trace_pod_t){"b", 4000, 1024, 2, 1000, "", "", "", 0, 0, 0};
	b.pods[2] = (sc_trace_pod_t){"c", 4000, 1024, 0, 0, "", "", "", 0, 0, 0};
	build(&b, 3, 3);
	sc_sim_config_t c;
	sc_sim_config_default(&c);
	c.target = 0;
	sc_sim_bound_t bd;
	char msg[256];
	assert_int_equal(sc_sim_bound(b.w, &c, &bd, msg, sizeof(msg)), 0);
	assert_int_equal(bd.forced_pods, 3);
	/* 2470 of 12000 milli: 20.583 %, printed rounded up. */
	assert_true(fabs(bd.bound_pct - 20.59) < 1e-9);
	assert_true(fabs(bd.arrived_pct - 100 * 2470.0 / 12000) < 1e-9);
	sc_sim_workload_free(b.w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(bound_known_by_hand),
	    cmocka_unit_test(bound_is_demand_when_everything_fits),
	    cmocka_unit_test(bound_holds_on_random_worlds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
