/* Reclaim, preempt, consolidation and stale-gang eviction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fixture.h"

static sc_decisions_t *run(void)
{
	sc_decisions_t *d = NULL;
	char msg[256];
	int rc = sc_schedule(&F.snap, &d, msg, sizeof(msg));
	if (rc < 0)
		fail_msg("sc_schedule: %s", msg);
	return d;
}

static void test_preempt_lower_priority(void **state)
{
	fx_reset();
	fx_nodes(1, 4);
	fx_queue("a", NULL, 4, 1, -1);
	sc_job_spec_t *low = fx_job("a", 1, 4, 0);
	low->priority_class = "train";
	fx_running(low, 0, 0, 0);
	sc_job_spec_t *high = fx_job("a", 1, 4, 0);
	high->priority_class = "build"; /* 100: non-preemptible, within quota 4 */
	sc_decisions_t *d = run();
	assert_int_equal(d->nevictions, 1);
	assert_int_equal(d->evictions[0].job, 0);
	assert_int_equal(d->evictions[0].action, SC_ACT_PREEMPT);
	assert_string_equal(d->evictions[0].by, "j001");
	assert_int_equal(fx_bound_of(d, 1), 1);
	assert_true(d->bindings[0].pipelined);
	sc_decisions_free(d);
}

static void test_no_preempt_equal_priority(void **state)
{
	fx_reset();
	fx_nodes(1, 4);
	fx_queue("a", NULL, 4, 1, -1);
	sc_job_spec_t *low = fx_job("a", 1, 4, 0);
	fx_running(low, 0, 0, 0);
	fx_job("a", 1, 4, 0);
	sc_decisions_t *d = run();
	assert_int_equal(d->nevictions, 0);
	assert_int_equal(d->npending, 1);
	sc_decisions_free(d);
}

static void test_preempt_min_runtime(void **state)
{
	fx_reset();
	fx_nodes(1, 4);
	sc_queue_spec_t *q = fx_queue("a", NULL, 4, 1, -1);
	q->preempt_min_runtime = 7200; /* victims run for 3600 s */
	sc_job_spec_t *low = fx_job("a", 1, 4, 0);
	low->priority_class = "train";
	fx_running(low, 0, 0, 0);
	fx_job("a", 1, 4, 0)->priority_class = "build";
	sc_decisions_t *d = run();
	assert_int_equal(d->nevictions, 0);
	sc_decisions_free(d);
}

static void test_reclaim_to_fair_share(void **state)
{
	fx_reset();
	fx_nodes(1, 4);
	fx_queue("a", NULL, 2, 1, -1);
	fx_queue("b", NULL, 2, 1, -1);
	for (int i = 0; i < 4; i++)
		fx_running(fx_job("a", 1, 1, 0), 0, 0, i);
	fx_job("b", 1, 1, 0);
	fx_job("b", 1, 1, 0);
	sc_decisions_t *d = run();
	assert_int_equal(d->nevictions, 2);
	for (size_t i = 0; i < d->nevictions; i++)
		assert_int_equal(d->evictions[i].action, SC_ACT_RECLAIM);
	assert_int_equal(fx_bound_of(d, 4) + fx_bound_of(d, 5), 2);
	/* a keeps its quota. */
	assert_true(fx_qr(d, "a")->allocated[SC_RES_GPU] >= 2 - 1e-9);
	sc_decisions_free(d);
}

static void test_reclaim_never_below_quota(void **state)
{
	fx_reset();
	fx_nodes(1, 4);
	fx_queue("a", NULL, 4, 1, -1);
	fx_queue("b", NULL, 0, 1, -1);
	for (int i = 0; i < 4; i++)
		fx_running(fx_job("a", 1, 1, 0), 0, 0, i);
	fx_job("b", 1, 1, 0);
	sc_decisions_t *d = run();
	assert_int_equal(d->nevictions, 0);
	sc_decisions_free(d);
}

static void test_stale_gang(void **state)
{
	fx_reset();
	fx_nodes(2, 4);
	fx_queue("a", NULL, -1, 1, -1);
	fx_nodes(0, 0);
	sc_job_spec_t *j = fx_job("a", 4, 4, 4);
	fx_running(j, 0, 0, 0);
	fx_running(j, 1, 1, 0);
	j->stale_since = F.snap.now - 120;
	sc_decisions_t *d = run();
	assert_int_equal(d->nevictions, 2);
	assert_int_equal(d->evictions[0].action, SC_ACT_STALE_GANG);
	sc_decisions_free(d);
	j->stale_since = F.snap.now - 30; /* within the 60 s grace */
	d = run();
	assert_int_equal(d->nevictions, 0);
	sc_decisions_free(d);
}

static void test_consolidation_moves_a_pod(void **state)
{
	fx_reset();
	fx_nodes(2, 4);
	fx_queue("a", NULL, -1, 1, -1);
	fx_running(fx_job("a", 1, 2, 0), 0, 0, 0);
	fx_running(fx_job("a", 1, 2, 0), 0, 1, 0);
	fx_job("a", 1, 4, 0);
	sc_decisions_t *d = run();
	assert_int_equal(d->nevictions, 1);
	assert_int_equal(d->evictions[0].action, SC_ACT_CONSOLIDATE);
	assert_non_null(d->evictions[0].to);
	assert_int_equal(fx_bound_of(d, 2), 1);
	/* The moved pod is bound again on its new node. */
	assert_int_equal(fx_bound_of(d, d->evictions[0].job), 1);
	sc_decisions_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_preempt_lower_priority),
	    cmocka_unit_test(test_no_preempt_equal_priority),
	    cmocka_unit_test(test_preempt_min_runtime),
	    cmocka_unit_test(test_reclaim_to_fair_share),
	    cmocka_unit_test(test_reclaim_never_below_quota),
	    cmocka_unit_test(test_stale_gang),
	    cmocka_unit_test(test_consolidation_moves_a_pod),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
