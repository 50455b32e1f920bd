/* Scarce capacity (src/sim/scarce.c) and the `default` policy's use of it,
 * on hand-made clusters: which shapes are restricted, the level of a
 * placement, the cost of opening a fresh device, and the resulting choices. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim/frag.h"
#include "sim/policies.h"
#include "sim/scarce.h"
#include "starcloud/cluster.h"

static sc_pod_shape_t shape(int64_t cpu, int milli, int num, uint64_t models)
{
	sc_pod_shape_t s = {.cpu = cpu, .milli = milli, .num = num, .models = models};
	return s;
}

/* Four "G2" nodes (96 cores, 8 GPUs) and one "G3" (128 cores, 8 GPUs), plus
 * a 2-GPU "P100" node: 42 GPUs. */
typedef struct world {
	sc_node_spec_t nodes[6];
	sc_cluster_t *c;
} world_t;

static void world_init(world_t *w)
{
	static const char *const names[] = {"g2a", "g2b", "g2c", "g2d", "g3", "p100"};
	for (int i = 0; i < 6; i++)
		w->nodes[i] = (sc_node_spec_t){.name = names[i],
		                               .cpu_milli = i < 4    ? 96000
		                                            : i == 4 ? 128000
		                                                     : 16000,
		                               .memory = (int64_t)1 << 36,
		                               .gpu_count = i < 5 ? 8 : 2,
		                               .gpu_model = i < 4    ? "G2"
		                                            : i == 4 ? "G3"
		                                                     : "P100"};
	w->c = sc_cluster_new(w->nodes, 6, NULL);
	assert_non_null(w->c);
}

static void take(world_t *w, uint32_t node, const sc_request_t *r, int dev)
{
	sc_assign_t a;
	memset(&a, 0, sizeof(a));
	a.node = node;
	if (r->gpus > 0) {
		const sc_node_view_t *n = sc_cluster_node(w->c, node);
		for (int d = 0; d < n->gpu_count && a.ngpus < r->gpus; d++)
			if (n->gpu_free[d] == SC_GPU_MILLI)
				a.gpus[a.ngpus++] = d;
	} else if (r->gpu_milli > 0) {
		a.gpus[0] = dev;
		a.ngpus = 1;
		a.gpu_milli = r->gpu_milli;
	}
	assert_int_equal(sc_cluster_take(w->c, r, &a), 0);
}

static int level_of(sc_scarce_t *s, const sc_node_view_t *n, const sc_request_t *r)
{
	int16_t left[SC_MAX_GPUS];
	memcpy(left, n->gpu_free, sizeof(left));
	int need = r->gpus;
	for (int d = 0; d < n->gpu_count && need > 0; d++)
		if (left[d] == SC_GPU_MILLI) {
			left[d] = 0;
			need--;
		}
	return sc_scarce_level(s, n, left, n->cpu_free - r->cpu_milli);
}

/* 8 GPUs with 120 cores fit only the G3 node (8 of 42 GPUs): restricted.
 * A 1-GPU pod there loses that slot; on a G2 node, or on the G3 node once
 * something is on it, it loses nothing. */
static void restricted_big_pod(void **state)
{
	world_t w;
	world_init(&w);
	uint64_t any = ~(uint64_t)0;
	sc_typical_t shapes[2] = {{shape(12000, 1000, 1, any), 0.9},
	                          {shape(120000, 1000, 8, any), 0.1}};
	sc_scarce_t *s = sc_scarce_new(shapes, 2, shapes, 2, w.c);
	assert_non_null(s);
	assert_int_equal(sc_scarce_nrestricted(s), 1);
	sc_request_t one = {.cpu_milli = 12000, .gpus = 1};
	/* w = 0.1 x 8 x 8 / 8 = 0.8 per slot; step = 0.5 x (0.9 + 0.8) / 42.
	 * Under pressure too: 0.1 x 42,000 / 1,700 milli per pod over its one
	 * slot is 2.47, a full ramp: 8 GPUs x 3 levels more. */
	int expect = (int)floor(0.8 / (0.5 * 1.7 / 42) + 24);
	assert_int_equal(level_of(s, sc_cluster_node(w.c, 4), &one), expect);
	assert_int_equal(level_of(s, sc_cluster_node(w.c, 0), &one), 0);
	take(&w, 4, &one, 0);
	sc_scarce_update(s, sc_cluster_node(w.c, 4));
	assert_int_equal(level_of(s, sc_cluster_node(w.c, 4), &one), 0);
	sc_scarce_free(s);
	sc_cluster_free(w.c);
}

/* A gpu_spec of the 2-GPU P100 node only (2 of 42 GPUs) is restricted; a
 * pod that fits everywhere is not, and neither is one that fits no node. */
static void restricted_by_model(void **state)
{
	world_t w;
	world_init(&w);
	int p100 = sc_cluster_model_id(w.c, "P100");
	uint64_t any = ~(uint64_t)0, only = (uint64_t)1 << p100;
	sc_typical_t shapes[3] = {{shape(4000, 500, 1, only), 0.2},
	                          {shape(4000, 1000, 1, any), 0.7},
	                          {shape(200000, 1000, 1, any), 0.1}};
	sc_scarce_t *s = sc_scarce_new(shapes, 3, shapes, 3, w.c);
	assert_int_equal(sc_scarce_nrestricted(s), 1);
	/* A whole GPU on the P100 node takes two of its four 500-slots; the
	 * shape is under full pressure (0.2 x 42,000 / 900 milli per pod over
	 * 4 slots: 2.3), so each also costs 0.5 GPU x 3 levels. */
	sc_request_t one = {.cpu_milli = 4000, .gpus = 1};
	double wgt = 0.2 * 0.5 * 0.5 / 2, step = 0.5 * (0.2 * 0.5 + 0.7 + 0.1) / 42;
	assert_int_equal(level_of(s, sc_cluster_node(w.c, 5), &one),
	                 (int)floor(2 * wgt / step + 2 * 0.5 * 3));
	assert_int_equal(level_of(s, sc_cluster_node(w.c, 1), &one), 0);
	sc_scarce_free(s);
	sc_cluster_free(w.c);
}

/* A restricted shape too rare for a level of its own (its weight is below
 * a step) still keeps its room once its pods to come press on its slots:
 * 2 % of 42 pods still to come against the P100 node's 2 slots is
 * pressure 0.42 (full ramp): a 1-GPU pod there costs 1 slot x 1 GPU x 3
 * levels. As the other nodes fill, fewer of its pods are still to come:
 * pressure 0.02 x 10 / 2 = 0.1, under the ramp, and the level is 0. */
static void restricted_room_under_pressure(void **state)
{
	world_t w;
	world_init(&w);
	int p100 = sc_cluster_model_id(w.c, "P100");
	uint64_t any = ~(uint64_t)0, only = (uint64_t)1 << p100;
	sc_typical_t shapes[2] = {{shape(4000, 1000, 1, any), 0.98},
	                          {shape(4000, 1000, 1, only), 0.02}};
	sc_scarce_t *s = sc_scarce_new(shapes, 2, shapes, 2, w.c);
	assert_non_null(s);
	assert_int_equal(sc_scarce_nrestricted(s), 1);
	sc_request_t one = {.cpu_milli = 4000, .gpus = 1};
	assert_int_equal(level_of(s, sc_cluster_node(w.c, 5), &one), 3);
	assert_int_equal(level_of(s, sc_cluster_node(w.c, 0), &one), 0);
	sc_request_t eight = {.cpu_milli = 1000, .gpus = 8};
	for (uint32_t i = 0; i < 4; i++) {
		take(&w, i, &eight, 0);
		sc_scarce_update(s, sc_cluster_node(w.c, i));
	}
	assert_int_equal(level_of(s, sc_cluster_node(w.c, 5), &one), 0);
	sc_scarce_free(s);

	/* Rarer still (0.5 %: pressure 0.105 on the empty cluster): no cost. */
	world_t w2;
	world_init(&w2);
	shapes[0].p = 0.995;
	shapes[1].p = 0.005;
	s = sc_scarce_new(shapes, 2, shapes, 2, w2.c);
	assert_int_equal(level_of(s, sc_cluster_node(w2.c, 5), &one), 0);
	sc_scarce_free(s);
	sc_cluster_free(w2.c);
	sc_cluster_free(w.c);
}

/* Opening a device costs nothing while untouched devices are plentiful and
 * rises to a whole device as the free capacity moves into partial ones. */
static void fresh_cost_rises_near_saturation(void **state)
{
	world_t w;
	world_init(&w);
	uint64_t any = ~(uint64_t)0;
	/* Typical pods: half 1-GPU (one fresh device each), half 300-milli
	 * shares: 0.5 fresh devices per pod, 650 milli per pod. */
	sc_typical_t t[2] = {{shape(1000, 1000, 1, any), 0.5}, {shape(1000, 300, 1, any), 0.5}};
	sc_scarce_t *s = sc_scarce_new(t, 2, t, 2, w.c);
	/* Empty: 42,000 free, 42 fresh: pressure 42000 / 650 x 0.5 / 42 < 1.5. */
	assert_true(sc_scarce_fresh_cost(s) == 0);
	/* Fill the G2 nodes and the P100 node with whole GPUs and leave the
	 * G3 node's devices with 300 taken: 8 x 700 free, no fresh device. */
	sc_request_t eight = {.cpu_milli = 1000, .gpus = 8}, two = {.cpu_milli = 1000, .gpus = 2};
	sc_request_t share = {.cpu_milli = 1000, .gpu_milli = 300};
	for (uint32_t i = 0; i < 4; i++) {
		take(&w, i, &eight, 0);
		sc_scarce_update(s, sc_cluster_node(w.c, i));
	}
	take(&w, 5, &two, 0);
	sc_scarce_update(s, sc_cluster_node(w.c, 5));
	for (int d = 0; d < 6; d++)
		take(&w, 4, &share, d);
	sc_scarce_update(s, sc_cluster_node(w.c, 4));
	/* 6 x 700 + 2 x 1000 = 6,200 free, 2 fresh: pressure
	 * 6200 / 650 x 0.5 / 2 = 2.385; cost 1000 x (2.385 - 1.5) / 1.5. */
	double pressure = 6200.0 / 650 * 0.5 / 2;
	assert_true(sc_scarce_fresh_cost(s) == floor(1000 * (pressure - 1.5) / 1.5));
	/* One fresh device left: above 3, a whole device. */
	take(&w, 4, &share, 6);
	sc_scarce_update(s, sc_cluster_node(w.c, 4));
	assert_true(sc_scarce_fresh_cost(s) == 1000);
	sc_scarce_free(s);
	sc_cluster_free(w.c);
}

/* `default` itself: a 1-GPU pod leaves the G3 node alone when 120-core
 * 8-GPU pods are in the workload, and, with none, still prefers a touched
 * G2 node over an untouched one; a CPU pod prefers a node with a GPU in
 * use over one whose GPUs are all free. */
static void default_keeps_scarce_room(void **state)
{
	world_t w;
	world_init(&w);
	uint64_t any = ~(uint64_t)0;
	sc_typical_t t[3] = {{shape(12000, 1000, 1, any), 0.8},
	                     {shape(4000, 0, 0, any), 0.1},
	                     {shape(120000, 1000, 8, any), 0.1}};
	sc_frag_t *f = sc_frag_new(t, 2, 6);
	for (size_t i = 0; i < 6; i++)
		sc_frag_update(f, sc_cluster_node(w.c, i));
	sc_sim_env_t env = {.frag = f, .cluster = w.c, .seed = 1, .shapes = t, .nshapes = 3};
	sc_policy_t *p;
	assert_int_equal(sc_sim_policy_new("default", &env, &p), 0);
	sc_request_t one = {.cpu_milli = 12000, .gpus = 1};
	sc_assign_t a;
	memset(&a, 0, sizeof(a));
	double on_g3 = p->score(p->ctx, w.c, sc_cluster_node(w.c, 4), &one, &a);
	double on_g2 = p->score(p->ctx, w.c, sc_cluster_node(w.c, 0), &one, &a);
	assert_true(on_g2 - on_g3 >= 1e13);
	/* Touch g2b with a 1-GPU pod: the next goes there, not to g2a. */
	take(&w, 1, &one, 0);
	p->taken(p->ctx, w.c, sc_cluster_node(w.c, 1), &one, &a);
	sc_frag_update(f, sc_cluster_node(w.c, 1));
	assert_int_equal(sc_cluster_best(w.c, &one, NULL, p, &a), 0);
	assert_int_equal(a.node, 1);
	/* A CPU pod: g2b (a GPU in use) before g2a (all free). */
	sc_request_t cpu = {.cpu_milli = 4000};
	double touched = p->score(p->ctx, w.c, sc_cluster_node(w.c, 1), &cpu, &a);
	double idle = p->score(p->ctx, w.c, sc_cluster_node(w.c, 0), &cpu, &a);
	assert_true(touched > idle);
	sc_sim_policy_free(p);
	sc_frag_free(f);
	sc_cluster_free(w.c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(restricted_big_pod),
	    cmocka_unit_test(restricted_by_model),
	    cmocka_unit_test(restricted_room_under_pressure),
	    cmocka_unit_test(fresh_cost_rises_near_saturation),
	    cmocka_unit_test(default_keeps_scarce_room),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
