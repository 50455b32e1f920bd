/* Unit tests for the pure parts of the node agent, kept in src/base:
 * GPU declarations (gpudecl.c), restart back-off and probe thresholds
 * (backoff.c), retention of old pod folders (retention.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "agent/backoff.h"
#include "agent/gpudecl.h"
#include "agent/retention.h"
#include "starcloud/error.h"

#define GIB (1ull << 30)

/* ---- GPU declarations -------------------------------------------------- */

static void test_decl_ok(void **state)
{
	sc_gpu_decl_t d;
	assert_int_equal(sc_gpu_decl_parse("8xA100-80GB", &d), 0);
	assert_int_equal(d.count, 8);
	assert_string_equal(d.model, "A100-80GB");
	assert_true(d.memory == 80 * GIB);
	assert_int_equal(d.mig, 0);
	assert_int_equal(sc_gpu_decl_parse("2xH100-80GB:mig", &d), 0);
	assert_int_equal(d.count, 2);
	assert_int_equal(d.mig, 1);
	assert_int_equal(sc_gpu_decl_parse("0xT4", &d), 0);
	assert_int_equal(d.count, 0);
	assert_true(d.memory == 0); /* no "-NNGB" suffix: unknown */
	assert_int_equal(sc_gpu_decl_parse("64xL4_v2.1-24G", &d), 0);
	assert_true(d.memory == 24 * GIB);
}

static void test_decl_bad(void **state)
{
	static const char *const bad[] = {
	    "",
	    "x",
	    "8",
	    "8A100",
	    "-1xA100",
	    "65xA100",
	    "8x",
	    "8xA100:MIG",
	    "8xA100:mig:",
	    "8xA 100",
	    "8xA100/80",
	    " 8xA100",
	    "8xA100;rm",
	    "99999999999999999999xA",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sc_gpu_decl_t d;
		memset(&d, 0x55, sizeof(d));
		assert_int_equal(sc_gpu_decl_parse(bad[i], &d), SC_EINVAL);
		assert_int_equal(d.count, 0); /* zeroed on failure */
	}
	sc_gpu_decl_t d;
	assert_int_equal(sc_gpu_decl_parse(NULL, &d), SC_EINVAL);
	char longm[200];
	memset(longm, 'A', sizeof(longm));
	memcpy(longm, "1x", 2);
	longm[sizeof(longm) - 1] = '\0';
	assert_int_equal(sc_gpu_decl_parse(longm, &d), SC_EINVAL);
}

static void test_model_memory(void **state)
{
	assert_true(sc_gpu_model_memory("A100-40GB") == 40 * GIB);
	assert_true(sc_gpu_model_memory("A100") == 0);
	assert_true(sc_gpu_model_memory("A100-GB") == 0);
	assert_true(sc_gpu_model_memory("A100-80TB") == 0);
	assert_true(sc_gpu_model_memory("X-5000GB") == 0);     /* over 4096 */
	assert_true(sc_gpu_model_memory("X--5GB") == 5 * GIB); /* the last dash counts */
	assert_true(sc_gpu_model_memory("X-+5GB") == 0);
	assert_true(sc_gpu_model_memory("X- 5GB") == 0);
}

/* ---- back-off ---------------------------------------------------------- */

static void test_backoff_doubles_to_max(void **state)
{
	uint64_t d = 0, want[] = {10, 20, 40, 80, 160, 300, 300};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		d = sc_backoff_next(d, 1, 10, 300, 600);
		assert_true(d == want[i]);
	}
}

static void test_backoff_resets_after_healthy_run(void **state)
{
	assert_true(sc_backoff_next(160, 599, 10, 300, 600) == 300);
	assert_true(sc_backoff_next(160, 600, 10, 300, 600) == 10);
	assert_true(sc_backoff_next(0, 0, 10, 300, 600) == 10);
}

static void test_backoff_edges(void **state)
{
	/* Never overflows, never exceeds max, base above max is capped. */
	assert_true(sc_backoff_next(UINT64_MAX - 1, 0, 1, UINT64_MAX, UINT64_MAX) == UINT64_MAX);
	assert_true(sc_backoff_next(UINT64_MAX / 2 + 1, 0, 1, UINT64_MAX, 10) == UINT64_MAX);
	assert_true(sc_backoff_next(0, 0, 500, 300, 600) == 300);
	assert_true(sc_backoff_next(1, 0, 1, 1, 600) == 1);
}

/* ---- probe thresholds -------------------------------------------------- */

static void test_threshold_failures_in_a_row(void **state)
{
	sc_threshold_t t;
	sc_threshold_init(&t);
	assert_int_equal(sc_threshold_add(&t, 0, 3, 1), -1);
	assert_int_equal(sc_threshold_add(&t, 0, 3, 1), -1);
	assert_int_equal(sc_threshold_add(&t, 1, 3, 1), 1); /* a success resets the count */
	assert_int_equal(sc_threshold_add(&t, 0, 3, 1), -1);
	assert_int_equal(sc_threshold_add(&t, 0, 3, 1), -1);
	assert_int_equal(sc_threshold_add(&t, 0, 3, 1), 0);
	/* The same verdict is not given twice. */
	assert_int_equal(sc_threshold_add(&t, 0, 3, 1), -1);
}

static void test_threshold_successes_in_a_row(void **state)
{
	sc_threshold_t t;
	sc_threshold_init(&t);
	assert_int_equal(sc_threshold_add(&t, 0, 1, 2), 0);
	assert_int_equal(sc_threshold_add(&t, 1, 1, 2), -1);
	assert_int_equal(sc_threshold_add(&t, 0, 1, 2), -1); /* already failed */
	assert_int_equal(sc_threshold_add(&t, 1, 1, 2), -1);
	assert_int_equal(sc_threshold_add(&t, 1, 1, 2), 1);
	assert_int_equal(sc_threshold_add(&t, 1, 1, 2), -1);
	sc_threshold_init(&t);
	assert_int_equal(t.verdict, -1);
	assert_int_equal(sc_threshold_add(&t, 1, 1, 1), 1);
}

/* ---- retention --------------------------------------------------------- */

static void test_retention_age(void **state)
{
	int64_t mt[] = {100, 50, 990, 10};
	unsigned char rm[4];
	assert_int_equal(sc_retention_select(mt, 4, 1000, 100, 10, rm), 3);
	assert_int_equal(rm[0], 1);
	assert_int_equal(rm[1], 1);
	assert_int_equal(rm[2], 0);
	assert_int_equal(rm[3], 1);
	/* Exactly max_age old is kept. */
	int64_t edge[] = {900};
	assert_int_equal(sc_retention_select(edge, 1, 1000, 100, 10, rm), 0);
}

static void test_retention_count_oldest_first(void **state)
{
	int64_t mt[] = {5, 3, 9, 3, 7};
	unsigned char rm[5];
	assert_int_equal(sc_retention_select(mt, 5, 10, -1, 2, rm), 3);
	/* Kept: the two newest (9 and 7); ties (3, 3) both go. */
	unsigned char want[] = {1, 1, 0, 1, 0};
	assert_memory_equal(rm, want, 5);
	assert_int_equal(sc_retention_select(mt, 5, 10, -1, 0, rm), 5);
	assert_int_equal(sc_retention_select(mt, 5, 10, -1, 5, rm), 0);
	assert_int_equal(sc_retention_select(NULL, 0, 10, 1, 0, NULL), 0);
}

static void test_retention_age_then_count(void **state)
{
	int64_t mt[] = {0, 980, 990, 995};
	unsigned char rm[4];
	assert_int_equal(sc_retention_select(mt, 4, 1000, 100, 2, rm), 2);
	unsigned char want[] = {1, 1, 0, 0};
	assert_memory_equal(rm, want, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_decl_ok),
	    cmocka_unit_test(test_decl_bad),
	    cmocka_unit_test(test_model_memory),
	    cmocka_unit_test(test_backoff_doubles_to_max),
	    cmocka_unit_test(test_backoff_resets_after_healthy_run),
	    cmocka_unit_test(test_backoff_edges),
	    cmocka_unit_test(test_threshold_failures_in_a_row),
	    cmocka_unit_test(test_threshold_successes_in_a_row),
	    cmocka_unit_test(test_retention_age),
	    cmocka_unit_test(test_retention_count_oldest_first),
	    cmocka_unit_test(test_retention_age_then_count),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
