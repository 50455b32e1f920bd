/* The replica autoscaler of Deployments (src/server/deploy_scale.c): the
 * count each target asks for, the limits, activation, stale reports, and
 * the scale-down window. Only s->scaler of the server is used. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/deploy.h"

static sc_autoscaling_t as_of(int target, double value, int min, int max, int64_t window)
{
	return (sc_autoscaling_t){.target = target,
	                          .value = value,
	                          .min_replicas = min,
	                          .max_replicas = max,
	                          .stabilization = window};
}

static int decide(sc_server_t *s, const sc_autoscaling_t *as, int cur, int64_t now)
{
	sc_scale_signal_t sig;
	char why[256];
	return sc__scale_decide(s, "d", as, cur, now, &sig, why, sizeof(why));
}

static void report(sc_server_t *s, const char *gw, long long inflight, long long queued,
                   long long busy, long long requests, double ttft, int64_t now)
{
	sc_scale_signal_t sig = {inflight, queued, busy, requests, ttft};
	sc__scale_report(s, "d", gw, &sig, now);
}

static void test_inflight_target_sums_gateways_and_clamps(void **state)
{
	sc_server_t s;
	memset(&s, 0, sizeof(s));
	sc_autoscaling_t as = as_of(SC_AS_INFLIGHT, 2, 1, 4, 60);
	report(&s, "g1", 3, 0, 1, 10, 0, 1000);
	report(&s, "g2", 2, 0, 1, 10, 0, 1000);
	assert_int_equal(decide(&s, &as, 1, 1000), 3); /* ceil(5 / 2), up at once */
	report(&s, "g1", 30, 0, 1, 10, 0, 1001);
	assert_int_equal(decide(&s, &as, 3, 1001), 4); /* the maximum */
	sc__scale_free(&s);
}

static void test_idle_goes_to_minimum_after_the_window(void **state)
{
	sc_server_t s;
	memset(&s, 0, sizeof(s));
	sc_autoscaling_t as = as_of(SC_AS_INFLIGHT, 1, 0, 5, 30);
	report(&s, "g", 4, 0, 4, 8, 0, 1000);
	assert_int_equal(decide(&s, &as, 1, 1000), 4);
	/* Idle from 1010: a server that saw 4 wanted at 1000 keeps 4 until
	 * every recommendation of the last 30 s is lower. */
	for (int64_t t = 1010; t < 1031; t++) {
		report(&s, "g", 0, 0, 0, 0, 0, t);
		assert_int_equal(decide(&s, &as, 4, t), 4);
	}
	report(&s, "g", 0, 0, 0, 0, 0, 1031);
	assert_int_equal(decide(&s, &as, 4, 1031), 0); /* parked */
	sc__scale_free(&s);
}

static void test_new_server_waits_a_window_before_scaling_down(void **state)
{
	sc_server_t s;
	memset(&s, 0, sizeof(s));
	sc_autoscaling_t as = as_of(SC_AS_INFLIGHT, 1, 1, 5, 20);
	report(&s, "g", 0, 0, 0, 0, 0, 500);
	assert_int_equal(decide(&s, &as, 3, 500), 3);
	report(&s, "g", 0, 0, 0, 0, 0, 519);
	assert_int_equal(decide(&s, &as, 3, 519), 3);
	report(&s, "g", 0, 0, 0, 0, 0, 521);
	assert_int_equal(decide(&s, &as, 3, 521), 1);
	sc__scale_free(&s);
}

static void test_held_request_activates(void **state)
{
	sc_server_t s;
	memset(&s, 0, sizeof(s));
	sc_autoscaling_t as = as_of(SC_AS_TTFT, 0.5, 0, 3, 60);
	report(&s, "g", 0, 1, 0, 0, 0, 100);
	assert_int_equal(decide(&s, &as, 0, 100), 1);
	sc__scale_free(&s);
}

static void test_ttft_is_proportional_with_tolerance(void **state)
{
	sc_server_t s;
	memset(&s, 0, sizeof(s));
	sc_autoscaling_t as = as_of(SC_AS_TTFT, 0.5, 1, 10, 0);
	report(&s, "g", 2, 0, 2, 50, 0.52, 100); /* within 10 %: no change */
	assert_int_equal(decide(&s, &as, 2, 100), 2);
	report(&s, "g", 2, 0, 2, 50, 1.0, 101); /* twice the target: twice */
	assert_int_equal(decide(&s, &as, 2, 101), 4);
	report(&s, "g", 2, 0, 2, 50, 0.25, 102); /* half: half (window 0) */
	assert_int_equal(decide(&s, &as, 4, 102), 2);
	sc__scale_free(&s);
}

static void test_queue_depth_adds_to_busy(void **state)
{
	sc_server_t s;
	memset(&s, 0, sizeof(s));
	sc_autoscaling_t as = as_of(SC_AS_QUEUE, 2, 1, 10, 0);
	report(&s, "g", 6, 5, 2, 9, 0, 100);
	assert_int_equal(decide(&s, &as, 2, 100), 5); /* 2 busy + ceil(5 / 2) */
	report(&s, "g", 6, 0, 2, 9, 0, 101);
	assert_int_equal(decide(&s, &as, 5, 101), 2);
	sc__scale_free(&s);
}

static void test_stale_reports_keep_the_count(void **state)
{
	sc_server_t s;
	memset(&s, 0, sizeof(s));
	sc_autoscaling_t as = as_of(SC_AS_INFLIGHT, 1, 1, 8, 0);
	report(&s, "g", 6, 0, 6, 6, 0, 100);
	assert_int_equal(decide(&s, &as, 2, 106), 2); /* 6 s old: ignored */
	assert_int_equal(decide(&s, &as, 9, 106), 8); /* only the limits */
	sc__scale_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_inflight_target_sums_gateways_and_clamps),
	    cmocka_unit_test(test_idle_goes_to_minimum_after_the_window),
	    cmocka_unit_test(test_new_server_waits_a_window_before_scaling_down),
	    cmocka_unit_test(test_held_request_activates),
	    cmocka_unit_test(test_ttft_is_proportional_with_tolerance),
	    cmocka_unit_test(test_queue_depth_adds_to_busy),
	    cmocka_unit_test(test_stale_reports_keep_the_count),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
