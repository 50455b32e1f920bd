/* The cluster model and its index, against brute force: after any sequence
 * of takes and gives, the indexed search finds a node exactly when some
 * node fits, binpack picks a node with the fewest whole GPUs left among
 * those that fit, and usage sums match a recount. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "starcloud/cluster.h"

#define N 40

static uint64_t rng = 7;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static sc_node_spec_t nodes[N];
static char names[N][16];

static void make_nodes(void)
{
	static const char *models[] = {"A100", "H100", "T4"};
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "n%d", i);
		int g = (int)(next() % 3) * 4; /* 0, 4 or 8 GPUs */
		nodes[i] = (sc_node_spec_t){.name = names[i],
		                            .cpu_milli = 32000,
		                            .memory = (int64_t)256 << 30,
		                            .gpu_count = g,
		                            .gpu_model = g ? models[next() % 3] : NULL,
		                            .gpu_memory = (int64_t)40 << 30};
	}
}

static sc_request_t random_req(void)
{
	sc_request_t r = {.cpu_milli = 1000 * (int64_t)(1 + next() % 8),
	                  .memory = (int64_t)1 << 30};
	switch (next() % 4) {
	case 0:
		r.gpus = 1 + (int)(next() % 8);
		break;
	case 1:
		r.gpu_milli = 100 * (1 + (int)(next() % 9));
		break;
	case 2:
		r.gpu_memory = (int64_t)(1 + next() % 40) << 30;
		break;
	default:
		break;
	}
	return r;
}

static int whole_left(const sc_node_view_t *n, const sc_request_t *r)
{
	return n->whole_free - r->gpus;
}

static void test_index_matches_brute_force(void **state)
{
	make_nodes();
	int err = 0;
	sc_cluster_t *c = sc_cluster_new(nodes, N, &err);
	assert_non_null(c);
	sc_request_t reqs[400];
	sc_assign_t held[400];
	int nheld = 0;
	for (int step = 0; step < 3000; step++) {
		sc_request_t r = random_req();
		bool any = false;
		int best_left = 1 << 30;
		for (size_t i = 0; i < N; i++) {
			const sc_node_view_t *n = sc_cluster_node(c, i);
			if (sc_node_fits(n, &r)) {
				any = true;
				if (r.gpus && whole_left(n, &r) < best_left)
					best_left = whole_left(n, &r);
			}
		}
		sc_assign_t a;
		int rc = sc_cluster_best_indexed(c, &r, NULL, false, SC_DEV_PACK, &a);
		assert_int_equal(rc == 0, any);
		if (rc == 0) {
			const sc_node_view_t *n = sc_cluster_node(c, a.node);
			assert_true(sc_node_fits(n, &r));
			if (r.gpus)
				assert_int_equal(whole_left(n, &r), best_left);
			if (nheld < 400 && sc_cluster_take(c, &r, &a) == 0) {
				reqs[nheld] = r;
				held[nheld++] = a;
			}
		}
		if (nheld > 0 && next() % 3 == 0) {
			int k = (int)(next() % (uint64_t)nheld);
			sc_cluster_give(c, &reqs[k], &held[k]);
			reqs[k] = reqs[--nheld];
			held[k] = held[nheld];
		}
	}
	/* Usage sums agree with a recount from what is held. */
	int64_t g = 0, cpu = 0, used_g, used_cpu;
	for (int k = 0; k < nheld; k++) {
		g += sc_request_gpu_milli(&reqs[k], sc_cluster_node(c, held[k].node));
		cpu += reqs[k].cpu_milli;
	}
	sc_cluster_used(c, &used_g, &used_cpu, NULL);
	assert_int_equal(used_cpu, cpu);
	assert_int_equal(used_g, g);
	sc_cluster_free(c);
}

static void test_shared_device_not_whole(void **state)
{
	sc_node_spec_t n = {.name = "n",
	                    .cpu_milli = 8000,
	                    .memory = 1 << 30,
	                    .gpu_count = 1,
	                    .gpu_model = "A100",
	                    .gpu_memory = (int64_t)40 << 30};
	sc_cluster_t *c = sc_cluster_new(&n, 1, NULL);
	sc_request_t share = {.gpu_milli = 300}, whole = {.gpus = 1};
	sc_assign_t a;
	assert_int_equal(sc_cluster_best_indexed(c, &share, NULL, false, SC_DEV_PACK, &a), 0);
	assert_int_equal(sc_cluster_take(c, &share, &a), 0);
	assert_int_equal(sc_cluster_best_indexed(c, &whole, NULL, false, SC_DEV_PACK, &a),
	                 SC_ENOFIT);
	/* A forged assignment of the shared device is refused too. */
	sc_assign_t forged = {.node = 0, .ngpus = 1, .gpus = {0}};
	assert_int_equal(sc_cluster_take(c, &whole, &forged), SC_ENOFIT);
	sc_cluster_free(c);
}

static void test_duplicate_and_oversized_nodes(void **state)
{
	sc_node_spec_t two[2] = {{.name = "x", .cpu_milli = 1}, {.name = "x", .cpu_milli = 1}};
	int err = 0;
	assert_null(sc_cluster_new(two, 2, &err));
	assert_int_equal(err, SC_EINVAL);
	sc_node_spec_t big = {.name = "b", .gpu_count = SC_MAX_GPUS + 1, .gpu_model = "A"};
	assert_null(sc_cluster_new(&big, 1, &err));
	assert_int_equal(err, SC_ERANGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_index_matches_brute_force),
	    cmocka_unit_test(test_shared_device_not_whole),
	    cmocka_unit_test(test_duplicate_and_oversized_nodes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
