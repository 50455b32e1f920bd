/* Fair share and allocate on hand-built snapshots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"

static const sc_queue_report_t *queue(const sc_decisions_t *d, const char *name)
{
	const sc_queue_report_t *q = fx_qr(d, name);
	if (!q)
		fail_msg("no queue %s", name);
	return q;
}

/* KAI's own test vector: 100 GPUs, two queues with quota 10 and request
 * 100, weights 3 and 1 -> 70 and 30. */
static void test_kai_vector(void **state)
{
	fx_reset();
	fx_nodes(25, 4);
	fx_queue("a", NULL, 10, 3, -1);
	fx_queue("b", NULL, 10, 1, -1);
	for (int i = 0; i < 100; i++) {
		fx_job("a", 1, 1, 0);
		fx_job("b", 1, 1, 0);
	}
	sc_decisions_t *d;
	char msg[256];
	assert_int_equal(sc_schedule(&F.snap, &d, msg, sizeof(msg)), 0);
	assert_float_equal(queue(d, "a")->fair_share[SC_RES_GPU], 70, 1e-6);
	assert_float_equal(queue(d, "b")->fair_share[SC_RES_GPU], 30, 1e-6);
	/* Allocation follows the fair shares exactly when it fills the cluster. */
	assert_float_equal(queue(d, "a")->allocated[SC_RES_GPU], 70, 1e-6);
	assert_float_equal(queue(d, "b")->allocated[SC_RES_GPU], 30, 1e-6);
	assert_int_equal(d->nbindings, 100);
	assert_int_equal(d->npending, 100);
	sc_decisions_free(d);
}

/* Hierarchy: the parent's share is divided among its children. */
static void test_hierarchy(void **state)
{
	fx_reset();
	fx_nodes(10, 8);
	fx_queue("org", NULL, 40, 1, -1);
	fx_queue("other", NULL, 40, 1, -1);
	fx_queue("t1", "org", 10, 1, -1);
	fx_queue("t2", "org", 10, 3, -1);
	for (int i = 0; i < 30; i++) {
		fx_job("t1", 1, 2, 0);
		fx_job("t2", 1, 2, 0);
		fx_job("other", 1, 1, 0);
	}
	sc_decisions_t *d;
	char msg[256];
	assert_int_equal(sc_schedule(&F.snap, &d, msg, sizeof(msg)), 0);
	/* other asks 30 < 40 quota: org gets 50, split 10+10 then 30 by 1:3. */
	assert_float_equal(queue(d, "other")->fair_share[SC_RES_GPU], 30, 1e-6);
	assert_float_equal(queue(d, "org")->fair_share[SC_RES_GPU], 50, 1e-6);
	double t1 = queue(d, "t1")->fair_share[SC_RES_GPU];
	double t2 = queue(d, "t2")->fair_share[SC_RES_GPU];
	assert_float_equal(t1 + t2, 50, 1e-6);
	assert_true(t1 >= 17 && t1 <= 18);
	sc_decisions_free(d);
}

/* A gang that does not fit is rolled back whole. */
static void test_gang_rollback(void **state)
{
	fx_reset();
	fx_nodes(2, 4);
	fx_queue("a", NULL, -1, 1, -1);
	fx_job("a", 3, 4, 0); /* 12 GPUs on 8: nothing */
	fx_job("a", 2, 4, 0); /* fits exactly */
	sc_decisions_t *d;
	char msg[256];
	assert_int_equal(sc_schedule(&F.snap, &d, msg, sizeof(msg)), 0);
	assert_int_equal(d->nbindings, 2);
	assert_int_equal(d->bindings[0].job, 1);
	assert_int_equal(d->npending, 1);
	assert_non_null(strstr(d->pending[0].reason, "gang needs 3 pods, only 2 fit"));
	sc_decisions_free(d);
}

/* Limits are never exceeded. */
static void test_limit(void **state)
{
	fx_reset();
	fx_nodes(4, 8);
	fx_queue("a", NULL, 4, 1, 6);
	for (int i = 0; i < 10; i++)
		fx_job("a", 1, 1, 0);
	sc_decisions_t *d;
	char msg[256];
	assert_int_equal(sc_schedule(&F.snap, &d, msg, sizeof(msg)), 0);
	assert_int_equal(d->nbindings, 6);
	assert_non_null(strstr(d->pending[0].reason, "would exceed its gpu limit"));
	sc_decisions_free(d);
}

/* Jobs of one shape that failed are not placed and explained again in the
 * same cycle. A declared runtime does not split a shape while no node is
 * reserved (it only matters for backfill onto reserved nodes); a task name
 * does, since a reason quotes it. */
static void test_failure_cache(void **state)
{
	fx_reset();
	fx_nodes(2, 4);
	fx_queue("a", NULL, -1, 1, -1);
	for (int i = 0; i < 10; i++)
		fx_job("a", 3, 4, 0)->expected_runtime = 60 * (i + 1); /* 12 GPUs on 8 */
	fx_job("a", 1, 8, 0);
	fx_job("a", 1, 8, 0);
	F.tasks[11].name = "other";
	sc_decisions_t *d;
	char msg[256];
	assert_int_equal(sc_schedule(&F.snap, &d, msg, sizeof(msg)), 0);
	assert_int_equal(d->nbindings, 0);
	assert_int_equal(d->npending, 12);
	assert_int_equal(d->signature_skips, 9);
	for (size_t i = 0; i < d->npending; i++) {
		const char *r = d->pending[i].reason;
		if (d->pending[i].job < 10)
			assert_string_equal(r, d->pending[0].reason);
		else
			assert_non_null(
			    strstr(r, d->pending[i].job == 10 ? "task main" : "task other"));
	}
	sc_decisions_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kai_vector),    cmocka_unit_test(test_hierarchy),
	    cmocka_unit_test(test_gang_rollback), cmocka_unit_test(test_limit),
	    cmocka_unit_test(test_failure_cache),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
