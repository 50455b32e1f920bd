/* Simulator pieces on hand-made tiny clusters: the PRNG, typical pods, the
 * fragmentation arithmetic, each policy's scoring and device choice, and a
 * whole seeded packing run (inflation and curve arithmetic). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim/frag.h"
#include "sim/packing.h"
#include "sim/policies.h"
#include "sim/rng.h"
#include "starcloud/cluster.h"

static void rng_deterministic_and_bounded(void **state)
{
	sc_rng_t a, b, c;
	sc_rng_seed(&a, 42, 1);
	sc_rng_seed(&b, 42, 1);
	sc_rng_seed(&c, 42, 2);
	int same = 0, hist[10] = {0};
	for (int i = 0; i < 1000; i++) {
		uint64_t x = sc_rng_next(&a);
		assert_true(x == sc_rng_next(&b));
		same += x == sc_rng_next(&c);
	}
	for (int i = 0; i < 10000; i++) {
		uint64_t k = sc_rng_below(&a, 10);
		assert_true(k < 10);
		hist[k]++;
		double d = sc_rng_double(&a);
		assert_true(d >= 0 && d < 1);
	}
	assert_int_equal(same, 0);
	for (int k = 0; k < 10; k++) /* ~1000 each; 5 sigma is ~150 */
		assert_true(hist[k] > 850 && hist[k] < 1150);
}

static sc_pod_shape_t shape(int64_t cpu, int milli, int num)
{
	sc_pod_shape_t s = {.cpu = cpu, .milli = milli, .num = num, .models = ~(uint64_t)0};
	return s;
}

static void typical_pods_cover_95(void **state)
{
	/* 60 x A, 30 x B, 6 x C, 4 x D: A+B = 90 % < 95 %, A+B+C = 96 %. */
	sc_pod_shape_t pods[100];
	for (int i = 0; i < 100; i++)
		pods[i] = i < 60   ? shape(1000, 500, 1)
		          : i < 90 ? shape(2000, 1000, 1)
		          : i < 96 ? shape(0, 0, 0)
		                   : shape(4000, 1000, 8);
	sc_typical_t *t;
	int n = sc_typical_pods(pods, 100, 0.95, &t);
	assert_int_equal(n, 3);
	assert_int_equal(t[0].shape.milli, 500);
	assert_int_equal(t[2].shape.cpu, 100); /* CPU 0 counts as 100 */
	assert_true(fabs(t[0].p - 60.0 / 96) < 1e-12);
	assert_true(fabs(t[0].p + t[1].p + t[2].p - 1) < 1e-12);
	free(t);
}

/* One share shape 500 (p=.5) and one CPU shape (p=.5). */
static void frag_arithmetic(void **state)
{
	sc_typical_t t[2] = {{shape(1000, 500, 1), 0.5}, {shape(1000, 0, 0), 0.5}};
	int16_t gpu[2] = {300, 1000};
	/* Share fits (device 1): device 0's 300 < 500 is fragmented (x .5);
	 * the CPU shape counts all 1300 idle (x .5). */
	assert_true(fabs(sc_frag_compute(t, 2, 0, 4000, gpu, 2) - (150 + 650)) < 1e-9);
	/* Not enough CPU: the share pod cannot use anything. */
	assert_true(fabs(sc_frag_compute(t, 2, 0, 500, gpu, 2) - 1300) < 1e-9);
	/* Model not accepted. */
	t[0].shape.models = 2; /* only model 1 */
	assert_true(fabs(sc_frag_compute(t, 2, 0, 4000, gpu, 2) - 1300) < 1e-9);
	/* Memo agrees with the direct value, and ignores device order. */
	t[0].shape.models = ~(uint64_t)0;
	sc_frag_t *f = sc_frag_new(t, 2, 1);
	int16_t rev[2] = {1000, 300};
	assert_true(fabs(sc_frag_state(f, 0, 4000, gpu, 2) - 800) < 1e-9);
	assert_true(fabs(sc_frag_state(f, 0, 4000, rev, 2) - 800) < 1e-9);
	assert_int_equal(sc_frag_memo_size(f), 1);
	sc_frag_free(f);
}

/* ---- policies on a two-node cluster ----------------------------------- */

typedef struct fixture {
	sc_node_spec_t nodes[2];
	sc_cluster_t *c;
	sc_frag_t *f;
} fixture_t;

static int setup(void **state)
{
	fixture_t *x = calloc(1, sizeof(*x));
	x->nodes[0] = (sc_node_spec_t){
	    .name = "a", .cpu_milli = 64000, .memory = 1 << 30, .gpu_count = 2, .gpu_model = "T4"};
	x->nodes[1] = (sc_node_spec_t){
	    .name = "b", .cpu_milli = 96000, .memory = 1 << 30, .gpu_count = 8, .gpu_model = "G2"};
	x->c = sc_cluster_new(x->nodes, 2, NULL);
	sc_typical_t t[2] = {{shape(1000, 500, 1), 0.5}, {shape(1000, 1000, 1), 0.5}};
	x->f = sc_frag_new(t, 2, 2);
	for (size_t i = 0; i < 2; i++)
		sc_frag_update(x->f, sc_cluster_node(x->c, i));
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	fixture_t *x = *state;
	sc_frag_free(x->f);
	sc_cluster_free(x->c);
	free(x);
	return 0;
}

static void take(fixture_t *x, uint32_t node, int dev, int milli)
{
	sc_request_t r = {.cpu_milli = 1000, .gpu_milli = milli};
	sc_assign_t a = {.node = node, .ngpus = 1, .gpus = {dev}, .gpu_milli = milli};
	assert_int_equal(sc_cluster_take(x->c, &r, &a), 0);
	sc_frag_update(x->f, sc_cluster_node(x->c, node));
}

static double score(fixture_t *x, const char *name, uint32_t node, const sc_request_t *r,
                    sc_assign_t *a)
{
	sc_sim_env_t env = {.frag = x->f, .cluster = x->c, .seed = 1};
	sc_policy_t *p;
	assert_int_equal(sc_sim_policy_new(name, &env, &p), 0);
	memset(a, 0, sizeof(*a));
	double s = p->score(p->ctx, x->c, sc_cluster_node(x->c, node), r, a);
	sc_sim_policy_free(p);
	return s;
}

static void dotprod_and_bestfit(void **state)
{
	fixture_t *x = *state;
	sc_request_t r = {.cpu_milli = 8000, .gpus = 1};
	sc_assign_t a;
	/* dotprod: 1 - (64/128*8/128 + 2/8*1/8)/2 = 0.969 -> 96. */
	assert_true(score(x, "dotprod", 0, &r, &a) == 96);
	/* 1 - (96/128*8/128 + 8/8*1/8)/2 = 0.914 -> 91: the smaller node wins. */
	assert_true(score(x, "dotprod", 1, &r, &a) == 91);
	/* bestfit: 1 - (.5*56/128 + .5*1/8) = 0.719 -> 71; b: 1 - (.5*88/128 + .5*7/8) = 0.22. */
	assert_true(score(x, "bestfit", 0, &r, &a) == 71);
	assert_true(score(x, "bestfit", 1, &r, &a) == 21);
}

static void gpupacking_cases(void **state)
{
	fixture_t *x = *state;
	sc_request_t share = {.cpu_milli = 1000, .gpu_milli = 200};
	sc_assign_t a;
	/* Empty nodes: 33 - free GPUs, at least free GPUs. */
	assert_true(score(x, "gpupacking", 0, &share, &a) == 31);
	assert_true(score(x, "gpupacking", 1, &share, &a) == 25);
	take(x, 1, 3, 500);
	/* A shared device with 500 left: 100 - 50/10 = 95. */
	assert_true(score(x, "gpupacking", 1, &share, &a) == 95);
	/* A whole pod on a used node: 50 - 1. */
	sc_request_t whole = {.cpu_milli = 1000, .gpus = 1};
	assert_true(score(x, "gpupacking", 1, &whole, &a) == 49);
	sc_request_t cpu = {.cpu_milli = 1000};
	assert_true(score(x, "gpupacking", 1, &cpu, &a) == 0);
}

static void gpuclustering_classes(void **state)
{
	fixture_t *x = *state;
	sc_sim_env_t env = {.frag = x->f, .cluster = x->c, .seed = 1};
	sc_policy_t *p;
	assert_int_equal(sc_sim_policy_new("gpuclustering", &env, &p), 0);
	sc_request_t share = {.cpu_milli = 1000, .gpu_milli = 500};
	sc_request_t whole = {.cpu_milli = 1000, .gpus = 1};
	sc_assign_t a = {.node = 1, .ngpus = 1, .gpus = {0}, .gpu_milli = 500};
	/* Idle node: 25 + 25 * (8000 - 8000) / 8000. */
	assert_true(p->score(p->ctx, x->c, sc_cluster_node(x->c, 1), &share, &a) == 25);
	assert_int_equal(sc_cluster_take(x->c, &share, &a), 0);
	p->taken(p->ctx, x->c, sc_cluster_node(x->c, 1), &share, &a);
	/* Only shares there: 75 + 25 * 500 / 8000 = 75 + 1. */
	assert_true(p->score(p->ctx, x->c, sc_cluster_node(x->c, 1), &share, &a) == 76);
	/* A whole pod sees a node of another class: 0 + 1. */
	assert_true(p->score(p->ctx, x->c, sc_cluster_node(x->c, 1), &whole, &a) == 1);
	sc_sim_policy_free(p);
}

/* FGD puts a share where the device is already partly used, when that
 * leaves whole devices for whole-GPU typical pods. */
static void fgd_device_choice(void **state)
{
	fixture_t *x = *state;
	take(x, 0, 1, 500);
	sc_request_t r = {.cpu_milli = 1000, .gpu_milli = 500};
	sc_assign_t a;
	double s = score(x, "fgd", 0, &r, &a);
	assert_int_equal(a.ngpus, 1);
	assert_int_equal(a.gpus[0], 1);
	assert_int_equal(a.gpu_milli, 500);
	/* Frag before: .5*500 (device 1's 500 < 1000 for the whole shape).
	 * After: 0. sigmoid(250/1000) * 100 = 56.2 -> 56. */
	assert_true(s == 56);
	s = score(x, "default", 0, &r, &a);
	assert_int_equal(a.gpus[0], 1);
	assert_true(s > 50);
}

/* The lookahead counts the CPU the next CPU pod takes: one GPU; typical
 * pods a 1-GPU pod needing 4 cores and a CPU pod of 2 cores (p .5 each).
 * With 7 cores: now the GPU pod fits (0) and the CPU pod counts the idle
 * 1000 (x .5) = 500; after the GPU pod lands nothing is idle (0); after the
 * CPU pod lands 5 cores are left and the GPU pod still fits (500). So
 * 500 + .5 * 0 + .5 * 500 = 750. With 5 cores the CPU pod leaves 3 and
 * strands the GPU: 500 + .5 * 0 + .5 * 1000 = 1000. */
static void lookahead_counts_cpu_pods(void **state)
{
	sc_typical_t t[2] = {{shape(4000, 1000, 1), 0.5}, {shape(2000, 0, 0), 0.5}};
	sc_frag_t *f = sc_frag_new(t, 2, 1);
	int16_t gpu[1] = {1000};
	assert_true(fabs(sc_frag_lookahead(f, 0, 7000, gpu, 1) - 750) < 1e-9);
	assert_true(fabs(sc_frag_lookahead(f, 0, 5000, gpu, 1) - 1000) < 1e-9);
	/* Memoised apart from sc_frag_state's values for the same states. */
	assert_true(fabs(sc_frag_state(f, 0, 7000, gpu, 1) - 500) < 1e-9);
	assert_true(fabs(sc_frag_lookahead(f, 0, 7000, gpu, 1) - 750) < 1e-9);
	sc_frag_free(f);
}

/* sc_gap_waste on one share shape of 500 (p .5) and a 1-GPU shape (p .5,
 * which fills no gap). Below 500 nothing fits: the gap is all waste. At
 * 500 and 1000 a 500 arrives with probability 1 - exp(-rate * .5). */
static void gap_waste_arithmetic(void **state)
{
	sc_typical_t t[2] = {{shape(1000, 500, 1), 0.5}, {shape(1000, 1000, 1), 0.5}};
	double w[SC_GPU_MILLI + 1];
	sc_gap_waste(t, 2, 2.0, w);
	double filled = 1 - exp(-1.0);
	assert_true(w[0] == 0 && w[499] == 499);
	assert_true(fabs(w[500] - (1 - filled) * 500) < 1e-9);
	assert_true(fabs(w[700] - (filled * 200 + (1 - filled) * 700)) < 1e-9);
	assert_true(fabs(w[1000] - (filled * w[500] + (1 - filled) * 1000)) < 1e-9);
	/* OpenB-like: many 470s, few 160s. A 210 (only a 160 fits) keeps
	 * more than half its milli; a 530 (a 470 fits) ends near 60. */
	sc_typical_t o[3] = {{shape(8000, 470, 1), 0.45},
	                     {shape(4000, 160, 1), 0.01},
	                     {shape(12000, 1000, 1), 0.54}};
	sc_gap_waste(o, 3, 50.0, w);
	double f160 = 1 - exp(-0.5);
	assert_true(fabs(w[210] - (f160 * 50 + (1 - f160) * 210)) < 1e-9);
	assert_true(w[210] > 105 && w[530] < 70 && w[530] > 50);
}

/* `default` places a 320 where it adds the least expected waste: next to
 * a 650 (leaving 30, which nothing fills but which is small), not next to
 * a 470 (leaving 210, which only the rare 160s fill; the 470's 530 would
 * take another 470); with no 650 around it opens a fresh device, which a
 * 650 can join later. */
static void default_share_goes_where_gaps_get_filled(void **state)
{
	sc_node_spec_t nodes[1] = {{.name = "n",
	                            .cpu_milli = 96000,
	                            .memory = 1 << 30,
	                            .gpu_count = 8,
	                            .gpu_model = "G2"}};
	sc_cluster_t *c = sc_cluster_new(nodes, 1, NULL);
	sc_typical_t t[5] = {{shape(8000, 470, 1), 0.3},
	                     {shape(4000, 650, 1), 0.1},
	                     {shape(4000, 320, 1), 0.1},
	                     {shape(4000, 160, 1), 0.01},
	                     {shape(12000, 1000, 1), 0.49}};
	sc_frag_t *f = sc_frag_new(t, 5, 1);
	sc_sim_env_t env = {.frag = f, .cluster = c, .seed = 1};
	sc_policy_t *p;
	assert_int_equal(sc_sim_policy_new("default", &env, &p), 0);
	sc_request_t r470 = {.cpu_milli = 8000, .gpu_milli = 470};
	sc_request_t r650 = {.cpu_milli = 4000, .gpu_milli = 650};
	sc_request_t r320 = {.cpu_milli = 4000, .gpu_milli = 320};
	sc_assign_t a470 = {.node = 0, .ngpus = 1, .gpus = {0}, .gpu_milli = 470};
	assert_int_equal(sc_cluster_take(c, &r470, &a470), 0);
	sc_frag_update(f, sc_cluster_node(c, 0));
	sc_assign_t a;
	memset(&a, 0, sizeof(a));
	p->score(p->ctx, c, sc_cluster_node(c, 0), &r320, &a);
	assert_int_equal(a.ngpus, 1);
	assert_int_not_equal(a.gpus[0], 0); /* a fresh device, not the 470's */
	sc_assign_t a650 = {.node = 0, .ngpus = 1, .gpus = {5}, .gpu_milli = 650};
	assert_int_equal(sc_cluster_take(c, &r650, &a650), 0);
	sc_frag_update(f, sc_cluster_node(c, 0));
	memset(&a, 0, sizeof(a));
	p->score(p->ctx, c, sc_cluster_node(c, 0), &r320, &a);
	assert_int_equal(a.gpus[0], 5);
	/* And a 470 joins the 470. */
	memset(&a, 0, sizeof(a));
	p->score(p->ctx, c, sc_cluster_node(c, 0), &r470, &a);
	assert_int_equal(a.gpus[0], 0);
	sc_sim_policy_free(p);
	sc_frag_free(f);
	sc_cluster_free(c);
}

/* Stranding: the typical GPU pod needs 8 cores per GPU. Node a has 8 free
 * GPUs and 64 cores, node b 8 GPUs and 128 cores. A 1-GPU pod asking 24
 * cores leaves a's 7 GPUs only 40 cores (5 GPUs' worth: 2 GPUs stranded),
 * b's 104 (all 7 fed), so `default` puts it on b, whatever the lookahead
 * says. A pod at the typical rate (8 cores) strands nothing anywhere. */
static void default_avoids_stranding_gpus(void **state)
{
	sc_node_spec_t nodes[2] = {
	    {.name = "a", .cpu_milli = 64000, .memory = 1 << 30, .gpu_count = 8, .gpu_model = "G2"},
	    {.name = "b",
	     .cpu_milli = 128000,
	     .memory = 1 << 30,
	     .gpu_count = 8,
	     .gpu_model = "G2"}};
	sc_cluster_t *c = sc_cluster_new(nodes, 2, NULL);
	sc_typical_t t[2] = {{shape(8000, 1000, 1), 0.6}, {shape(2000, 0, 0), 0.4}};
	sc_frag_t *f = sc_frag_new(t, 2, 2);
	sc_sim_env_t env = {.frag = f, .cluster = c, .seed = 1};
	sc_policy_t *p;
	assert_int_equal(sc_sim_policy_new("default", &env, &p), 0);
	sc_frag_update(f, sc_cluster_node(c, 0));
	sc_frag_update(f, sc_cluster_node(c, 1));
	sc_request_t hungry = {.cpu_milli = 24000, .gpus = 1};
	sc_assign_t a;
	memset(&a, 0, sizeof(a));
	double on_a = p->score(p->ctx, c, sc_cluster_node(c, 0), &hungry, &a);
	memset(&a, 0, sizeof(a));
	double on_b = p->score(p->ctx, c, sc_cluster_node(c, 1), &hungry, &a);
	assert_true(on_b - on_a >= 20 * 1e6 - 1e5); /* 20 tenths, beyond any lookahead */
	sc_request_t typical = {.cpu_milli = 8000, .gpus = 1};
	memset(&a, 0, sizeof(a));
	on_a = p->score(p->ctx, c, sc_cluster_node(c, 0), &typical, &a);
	memset(&a, 0, sizeof(a));
	on_b = p->score(p->ctx, c, sc_cluster_node(c, 1), &typical, &a);
	assert_true(fabs(on_a - on_b) < 1e6); /* only lookahead and FGD points differ */
	sc_sim_policy_free(p);
	sc_frag_free(f);
	sc_cluster_free(c);
}

/* A CPU pod: FGD gives both nodes the same points when the CPU left still
 * fits every typical pod; `default` then prefers the node with less free
 * GPU, whose CPU no GPU pod can use, and among equal free GPU the one with
 * more CPU left. */
static void default_cpu_pod_tiebreak(void **state)
{
	fixture_t *x = *state;
	sc_request_t r = {.cpu_milli = 2000};
	sc_assign_t a;
	double fa = score(x, "fgd", 0, &r, &a), fb = score(x, "fgd", 1, &r, &a);
	assert_true(fa == fb);
	/* Node a has 2 free GPUs, node b 8: a wins. */
	assert_true(score(x, "default", 0, &r, &a) > score(x, "default", 1, &r, &a));
	/* Fill all but two of b's devices: equal free GPU, b has more CPU. */
	for (int d = 0; d < 6; d++)
		take(x, 1, d, 1000);
	assert_true(score(x, "default", 1, &r, &a) > score(x, "default", 0, &r, &a));
	/* The key never crosses a whole point. */
	assert_true(fabs(score(x, "default", 1, &r, &a) - score(x, "fgd", 1, &r, &a)) < 0.01);
}

static void random_picks_fitting_device(void **state)
{
	fixture_t *x = *state;
	take(x, 0, 0, 800);
	sc_request_t r = {.cpu_milli = 1000, .gpu_milli = 500};
	for (int i = 0; i < 20; i++) {
		sc_assign_t a;
		double s = score(x, "random", 0, &r, &a);
		assert_true(s >= 0 && s < 1);
		assert_int_equal(a.gpus[0], 1); /* device 0 has only 200 left */
	}
	sc_sim_env_t env = {.frag = NULL, .cluster = x->c, .seed = 1};
	sc_policy_t *p;
	assert_int_equal(sc_sim_policy_new("nope", &env, &p), SC_EINVAL);
	assert_int_equal(sc_sim_policy_new("fgd", &env, &p), SC_EINVAL); /* needs frag */
}

/* ---- a whole run ---------------------------------------------------------- */

static void packing_run_inflates_and_records(void **state)
{
	sc_trace_node_t nodes[2] = {{"n0", 32000, 65536, 4, "T4"}, {"n1", 32000, 65536, 4, "T4"}};
	sc_trace_pod_t pods[3] = {
	    {"p0", 1000, 1024, 1, 500, "", "", "", 0, 0, 0},
	    {"p1", 1000, 1024, 1, 1000, "", "", "", 0, 0, 0},
	    {"p2", 1000, 1024, 8, 1000, "T4", "", "", 0, 0, 0},
	};
	sc_trace_nodes_t tn = {nodes, 2};
	sc_trace_pods_t tp = {pods, 3};
	sc_sim_workload_t *w;
	char msg[256];
	/* A model no node has is a bad input, not a pod that never fits. */
	pods[2].gpu_spec = "T4|P100";
	assert_int_equal(sc_sim_workload_new(&tn, &tp, "tiny", &w, msg, sizeof(msg)), SC_EINVAL);
	assert_non_null(
	    strstr(msg, "pod p2: gpu_spec \"T4|P100\": no node has GPU model \"P100\""));
	pods[2].gpu_spec = "T4";
	/* Nor is a list without GPU pods something to pack. */
	tp.n = 0;
	assert_int_equal(sc_sim_workload_new(&tn, &tp, "tiny", &w, msg, sizeof(msg)), SC_EINVAL);
	assert_non_null(strstr(msg, "no GPU pods"));
	tp.n = 3;
	assert_int_equal(sc_sim_workload_new(&tn, &tp, "tiny", &w, msg, sizeof(msg)), 0);
	assert_int_equal(sc_sim_workload_gpus(w), 8);
	sc_sim_config_t c;
	sc_sim_config_default(&c);
	c.policy = "bestfit";
	sc_sim_result_t r1, r2;
	assert_int_equal(sc_sim_packing_run(w, &c, &r1, msg, sizeof(msg)), 0);
	assert_int_equal(sc_sim_packing_run(w, &c, &r2, msg, sizeof(msg)), 0);
	/* Inflated to about 1.3 x 8 GPUs; same seed, same run. */
	assert_true(r1.arrived_pct <= 130.0 + 1e-9 && r1.arrived_pct > 100);
	assert_int_equal(r1.pods, r2.pods);
	assert_int_equal(r1.failed_pods, r2.failed_pods);
	assert_memory_equal(r1.alloc, r2.alloc, sizeof(r1.alloc));
	/* p2 asks for 8 GPUs on one node; nodes have 4: every copy fails. */
	assert_true(r1.failed_pods >= 1);
	/* Allocation never exceeds arrivals or capacity. */
	for (int k = 0; k <= SC_SIM_CURVE_MAX; k++)
		if (!isnan(r1.alloc[k]))
			assert_true(r1.alloc[k] <= k + 1 + 1e-9 && r1.alloc[k] <= 100);
	c.policy = "nope";
	assert_int_equal(sc_sim_packing_run(w, &c, &r1, msg, sizeof(msg)), SC_EINVAL);
	assert_non_null(strstr(msg, "unknown policy"));
	sc_sim_workload_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(rng_deterministic_and_bounded),
	    cmocka_unit_test(typical_pods_cover_95),
	    cmocka_unit_test(frag_arithmetic),
	    cmocka_unit_test_setup_teardown(dotprod_and_bestfit, setup, teardown),
	    cmocka_unit_test_setup_teardown(gpupacking_cases, setup, teardown),
	    cmocka_unit_test_setup_teardown(gpuclustering_classes, setup, teardown),
	    cmocka_unit_test_setup_teardown(fgd_device_choice, setup, teardown),
	    cmocka_unit_test_setup_teardown(random_picks_fitting_device, setup, teardown),
	    cmocka_unit_test(lookahead_counts_cpu_pods),
	    cmocka_unit_test(gap_waste_arithmetic),
	    cmocka_unit_test(default_share_goes_where_gaps_get_filled),
	    cmocka_unit_test(default_avoids_stranding_gpus),
	    cmocka_unit_test_setup_teardown(default_cpu_pod_tiebreak, setup, teardown),
	    cmocka_unit_test(packing_run_inflates_and_records),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
