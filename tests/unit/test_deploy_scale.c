/* The replica autoscaler of Deployments (src/server/deploy_scale.c): the
 * count each target asks for, the limits, activation, stale reports, and
 * the scale-down window; the roles of a disaggregated Deployment, each on
 * its own key, signal, limits and window; and the plan's per-role counts
 * (deploy_view.c). Only s->scaler of the server is used. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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

static void report(sc_server_t *s, const char *gw, long long inflight, long long queued,
                   long long busy, long long requests, double ttft, int64_t now)
{
	sc_scale_signal_t sig = {inflight, queued, busy, requests, ttft, 0, 0};
	sc__scale_report(s, "d", gw, &sig, now);
}

/* A role's report: its requests in flight, the prompt tokens waiting for
 * or in prefill, the decode tokens per second (key "d/ROLE"). */
static void report_role(sc_server_t *s, const char *key, const char *gw, long long inflight,
                        long long prompt, double tps, int64_t now)
{
	sc_scale_signal_t sig = {inflight, 0, inflight > 0, 0, 0, prompt, tps};
	sc__scale_report(s, key, gw, &sig, now);
}

static int decide_key(sc_server_t *s, const char *key, const sc_autoscaling_t *as, int cur,
                      int64_t now, char *why, size_t whysz)
{
	sc_scale_signal_t sig;
	return sc__scale_decide(s, key, as, cur, now, &sig, why, whysz);
}

/* The count for the Deployment as a whole (key "d"). */
static int decide(sc_server_t *s, const sc_autoscaling_t *as, int cur, int64_t now)
{
	char why[256];
	return decide_key(s, "d", as, cur, now, why, sizeof(why));
}

/* Each scaler test gets a server of its own, zeroed: only s->scaler is
 * used, and sc__scale_free releases it. */
static int server_setup(void **state)
{
	sc_server_t *s = calloc(1, sizeof(*s));
	*state = s;
	return s ? 0 : -1;
}

static int server_teardown(void **state)
{
	sc__scale_free(*state);
	free(*state);
	return 0;
}

static void test_inflight_target_sums_gateways_and_clamps(void **state)
{
	sc_server_t *s = *state;
	sc_autoscaling_t as = as_of(SC_AS_INFLIGHT, 2, 1, 4, 60);
	report(s, "g1", 3, 0, 1, 10, 0, 1000);
	report(s, "g2", 2, 0, 1, 10, 0, 1000);
	assert_int_equal(decide(s, &as, 1, 1000), 3); /* ceil(5 / 2), up at once */
	report(s, "g1", 30, 0, 1, 10, 0, 1001);
	assert_int_equal(decide(s, &as, 3, 1001), 4); /* the maximum */
}

static void test_idle_goes_to_minimum_after_the_window(void **state)
{
	sc_server_t *s = *state;
	sc_autoscaling_t as = as_of(SC_AS_INFLIGHT, 1, 0, 5, 30);
	report(s, "g", 4, 0, 4, 8, 0, 1000);
	assert_int_equal(decide(s, &as, 1, 1000), 4);
	/* Idle from 1010: a server that saw 4 wanted at 1000 keeps 4 until
	 * every recommendation of the last 30 s is lower. */
	for (int64_t t = 1010; t < 1031; t++) {
		report(s, "g", 0, 0, 0, 0, 0, t);
		assert_int_equal(decide(s, &as, 4, t), 4);
	}
	report(s, "g", 0, 0, 0, 0, 0, 1031);
	assert_int_equal(decide(s, &as, 4, 1031), 0); /* parked */
}

static void test_new_server_waits_a_window_before_scaling_down(void **state)
{
	sc_server_t *s = *state;
	sc_autoscaling_t as = as_of(SC_AS_INFLIGHT, 1, 1, 5, 20);
	report(s, "g", 0, 0, 0, 0, 0, 500);
	assert_int_equal(decide(s, &as, 3, 500), 3);
	report(s, "g", 0, 0, 0, 0, 0, 519);
	assert_int_equal(decide(s, &as, 3, 519), 3);
	report(s, "g", 0, 0, 0, 0, 0, 521);
	assert_int_equal(decide(s, &as, 3, 521), 1);
}

static void test_held_request_activates(void **state)
{
	sc_server_t *s = *state;
	sc_autoscaling_t as = as_of(SC_AS_TTFT, 0.5, 0, 3, 60);
	report(s, "g", 0, 1, 0, 0, 0, 100);
	assert_int_equal(decide(s, &as, 0, 100), 1);
}

static void test_ttft_is_proportional_with_tolerance(void **state)
{
	sc_server_t *s = *state;
	sc_autoscaling_t as = as_of(SC_AS_TTFT, 0.5, 1, 10, 0);
	report(s, "g", 2, 0, 2, 50, 0.52, 100); /* within 10 %: no change */
	assert_int_equal(decide(s, &as, 2, 100), 2);
	report(s, "g", 2, 0, 2, 50, 1.0, 101); /* twice the target: twice */
	assert_int_equal(decide(s, &as, 2, 101), 4);
	report(s, "g", 2, 0, 2, 50, 0.25, 102); /* half: half (window 0) */
	assert_int_equal(decide(s, &as, 4, 102), 2);
}

static void test_queue_depth_adds_to_busy(void **state)
{
	sc_server_t *s = *state;
	sc_autoscaling_t as = as_of(SC_AS_QUEUE, 2, 1, 10, 0);
	report(s, "g", 6, 5, 2, 9, 0, 100);
	assert_int_equal(decide(s, &as, 2, 100), 5); /* 2 busy + ceil(5 / 2) */
	report(s, "g", 6, 0, 2, 9, 0, 101);
	assert_int_equal(decide(s, &as, 5, 101), 2);
}

static void test_stale_reports_keep_the_count(void **state)
{
	sc_server_t *s = *state;
	sc_autoscaling_t as = as_of(SC_AS_INFLIGHT, 1, 1, 8, 0);
	report(s, "g", 6, 0, 6, 6, 0, 100);
	assert_int_equal(decide(s, &as, 2, 106), 2); /* 6 s old: ignored */
	assert_int_equal(decide(s, &as, 9, 106), 8); /* only the limits */
}

static void test_prompt_tokens_target_sums_gateways(void **state)
{
	sc_server_t *s = *state;
	char why[256];
	sc_autoscaling_t as = as_of(SC_AS_PROMPT_TOKENS, 1000, 1, 6, 30);
	report_role(s, "d/prefill", "g1", 2, 1500, 0, 100);
	report_role(s, "d/prefill", "g2", 1, 1000, 0, 100);
	/* ceil(2500 / 1000) = 3, at once, and the reason says the tokens. */
	assert_int_equal(decide_key(s, "d/prefill", &as, 1, 100, why, sizeof(why)), 3);
	assert_non_null(strstr(why, "prompt tokens 2500"));
	report_role(s, "d/prefill", "g1", 9, 90000, 0, 101);
	assert_int_equal(decide_key(s, "d/prefill", &as, 3, 101, why, sizeof(why)), 6);
	/* Exactly at the target: one replica per 1000, not one more. */
	report_role(s, "d/prefill", "g1", 1, 1000, 0, 102);
	report_role(s, "d/prefill", "g2", 1, 1000, 0, 102);
	assert_int_equal(decide_key(s, "d/prefill", &as, 6, 102, why, sizeof(why)), 6);
}

static void test_tokens_per_second_target(void **state)
{
	sc_server_t *s = *state;
	char why[256];
	sc_autoscaling_t as = as_of(SC_AS_TPS, 100, 2, 8, 0);
	report_role(s, "d/decode", "g", 4, 0, 450, 100);
	assert_int_equal(decide_key(s, "d/decode", &as, 2, 100, why, sizeof(why)), 5);
	assert_non_null(strstr(why, "450.0 tokens/s"));
	report_role(s, "d/decode", "g", 4, 0, 300.0, 101); /* exactly 3 x 100 */
	assert_int_equal(decide_key(s, "d/decode", &as, 5, 101, why, sizeof(why)), 3);
	report_role(s, "d/decode", "g", 0, 0, 10, 102); /* never below min */
	assert_int_equal(decide_key(s, "d/decode", &as, 3, 102, why, sizeof(why)), 2);
	report_role(s, "d/decode", "g", 0, 0, 0, 103); /* idle: the minimum */
	assert_int_equal(decide_key(s, "d/decode", &as, 2, 103, why, sizeof(why)), 2);
}

/* Prefill and decode of one Deployment: separate signals, limits and
 * windows; a busy decode side does not hold prefill up, nor the reverse. */
static void test_roles_scale_independently(void **state)
{
	sc_server_t *s = *state;
	char why[256];
	sc_autoscaling_t pf = as_of(SC_AS_PROMPT_TOKENS, 500, 1, 4, 5);
	sc_autoscaling_t dc = as_of(SC_AS_INFLIGHT, 2, 1, 8, 20);
	report_role(s, "d/prefill", "g", 3, 2000, 0, 100);
	report_role(s, "d/decode", "g", 12, 0, 600, 100);
	assert_int_equal(decide_key(s, "d/prefill", &pf, 1, 100, why, sizeof(why)), 4);
	assert_int_equal(decide_key(s, "d/decode", &dc, 1, 100, why, sizeof(why)), 6);
	/* Prompts done, streams go on: prefill goes back to 1 after its 5 s,
	 * decode keeps its 6 (streams still in flight). */
	int p = 4, d = 6;
	for (int64_t t = 101; t <= 110; t++) {
		report_role(s, "d/prefill", "g", 0, 0, 0, t);
		report_role(s, "d/decode", "g", 12, 0, 600, t);
		p = decide_key(s, "d/prefill", &pf, p, t, why, sizeof(why));
		d = decide_key(s, "d/decode", &dc, d, t, why, sizeof(why));
		assert_int_equal(p, t < 106 ? 4 : 1);
		assert_int_equal(d, 6);
	}
	/* Decode idle from 111: its own 20 s window, then its minimum. */
	for (int64_t t = 111; t <= 131; t++) {
		report_role(s, "d/decode", "g", 0, 0, 0, t);
		d = decide_key(s, "d/decode", &dc, d, t, why, sizeof(why));
		assert_int_equal(d, t < 131 ? 6 : 1);
	}
	/* A report for the Deployment as a whole is another key: no effect. */
	report(s, "g", 50, 0, 5, 9, 0, 132);
	assert_int_equal(decide_key(s, "d/decode", &dc, 1, 132, why, sizeof(why)), 1);
}

/* The plan: each task of a disaggregated Deployment runs its role's
 * autoscaled count (status.autoscaling.ROLE.replicas, minReplicas before
 * the first decision, limits that moved holding at once); a role without
 * autoscaling keeps its spec.replicas. */
static void test_plan_counts_per_role(void **state)
{
	json_t *dep =
	    json_loads("{\"metadata\": {\"name\": \"llm\"}, \"spec\": {\"model\": \"m\", "
	               "\"version\": \"1\", \"template\": {\"command\": [\"x\"]}, "
	               "\"disaggregation\": {\"prefill\": {\"autoscaling\": {\"minReplicas\": 2, "
	               "\"maxReplicas\": 4, \"target\": {\"promptTokensPerReplica\": 100}}}, "
	               "\"decode\": {\"replicas\": 3}}}}",
	               0, NULL);
	assert_non_null(dep);
	sc_deploy_plan_t p;
	const char *roles[2];
	assert_int_equal(sc__deploy_scaled_roles(dep, roles), 1);
	assert_string_equal(roles[0], "prefill");
	assert_int_equal(sc__deploy_autoscaled(dep), -1);
	assert_int_equal(sc__deploy_role_autoscaled(dep, "decode"), -1);
	assert_int_equal(sc__deploy_role_autoscaled(dep, "prefill"), 2); /* the minimum */
	assert_int_equal(sc__deploy_plan(dep, &p), 0);
	assert_int_equal(p.n, 2);
	for (size_t i = 0; i < p.n; i++)
		assert_int_equal(p.t[i].replicas, strcmp(p.t[i].role, "prefill") == 0 ? 2 : 3);
	json_object_set_new(dep, "status",
	                    json_pack("{s:{s:{s:i}}}", "autoscaling", "prefill", "replicas", 9));
	assert_int_equal(sc__deploy_role_autoscaled(dep, "prefill"), 4); /* the maximum */
	json_object_set_new(dep, "status",
	                    json_pack("{s:{s:{s:i}}}", "autoscaling", "prefill", "replicas", 3));
	assert_int_equal(sc__deploy_plan(dep, &p), 0);
	for (size_t i = 0; i < p.n; i++)
		assert_int_equal(p.t[i].replicas, strcmp(p.t[i].role, "prefill") == 0 ? 3 : 3);
	/* A scale-down 4 -> 2 drains: pods 2 and 3 leave the endpoints (serving
	 * 2) but stay in the plan and in the scheduler's view with their GPUs
	 * (replicas 4) until the drain is over; never above the maximum. */
	json_object_set_new(
	    dep, "status",
	    json_pack("{s:{s:{s:i,s:{s:i,s:i}}},s:[{s:s,s:s,s:s},{s:s,s:s,s:s},{s:s,s:s,s:s},"
	              "{s:s,s:s,s:s}]}",
	              "autoscaling", "prefill", "replicas", 2, "drain", "from", 4, "until", 99,
	              "pods", "name", "llm-prefill-v1-0", "phase", "Running", "node", "n", "name",
	              "llm-prefill-v1-1", "phase", "Running", "node", "n", "name",
	              "llm-prefill-v1-2", "phase", "Running", "node", "n", "name",
	              "llm-prefill-v1-3", "phase", "Running", "node", "n"));
	assert_int_equal(sc__deploy_role_autoscaled(dep, "prefill"), 2);
	assert_int_equal(sc__deploy_role_held(dep, "prefill"), 4);
	assert_int_equal(sc__deploy_plan(dep, &p), 0);
	for (size_t i = 0; i < p.n; i++)
		if (strcmp(p.t[i].role, "prefill") == 0) {
			assert_int_equal(p.t[i].replicas, 4);
			assert_int_equal(p.t[i].serving, 2);
		}
	json_t *view = sc__deploy_view(dep);
	assert_int_equal(json_array_size(json_object_get(json_object_get(view, "status"), "pods")),
	                 4);
	json_decref(view);
	json_object_set_new(
	    json_object_get(json_object_get(json_object_get(dep, "status"), "autoscaling"),
	                    "prefill"),
	    "drain", json_pack("{s:i,s:i}", "from", 9, "until", 99));
	assert_int_equal(sc__deploy_role_held(dep, "prefill"), 4); /* the maximum */
	/* Decode autoscaled too: both roles. A target of the other role is
	 * not read back (the decoder refuses it). */
	json_t *dis = json_object_get(json_object_get(dep, "spec"), "disaggregation");
	json_object_set_new(json_object_get(dis, "decode"), "autoscaling",
	                    json_pack("{s:i,s:{s:i}}", "maxReplicas", 8, "target",
	                              "tokensPerSecondPerReplica", 50));
	assert_int_equal(sc__deploy_scaled_roles(dep, roles), 2);
	assert_int_equal(sc__deploy_role_autoscaled(dep, "decode"), 1);
	json_object_set_new(
	    json_object_get(dis, "decode"), "autoscaling",
	    json_pack("{s:i,s:{s:i}}", "maxReplicas", 8, "target", "promptTokensPerReplica", 50));
	assert_int_equal(sc__deploy_role_autoscaled(dep, "decode"), -1);
	/* spec.autoscaling beside disaggregation is not read either. */
	json_object_set_new(
	    json_object_get(dep, "spec"), "autoscaling",
	    json_pack("{s:i,s:{s:i}}", "maxReplicas", 8, "target", "inflightPerReplica", 1));
	assert_int_equal(sc__deploy_autoscaled(dep), -1);
	json_decref(dep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_inflight_target_sums_gateways_and_clamps,
	                                    server_setup, server_teardown),
	    cmocka_unit_test_setup_teardown(test_idle_goes_to_minimum_after_the_window,
	                                    server_setup, server_teardown),
	    cmocka_unit_test_setup_teardown(test_new_server_waits_a_window_before_scaling_down,
	                                    server_setup, server_teardown),
	    cmocka_unit_test_setup_teardown(test_held_request_activates, server_setup,
	                                    server_teardown),
	    cmocka_unit_test_setup_teardown(test_ttft_is_proportional_with_tolerance, server_setup,
	                                    server_teardown),
	    cmocka_unit_test_setup_teardown(test_queue_depth_adds_to_busy, server_setup,
	                                    server_teardown),
	    cmocka_unit_test_setup_teardown(test_stale_reports_keep_the_count, server_setup,
	                                    server_teardown),
	    cmocka_unit_test_setup_teardown(test_prompt_tokens_target_sums_gateways, server_setup,
	                                    server_teardown),
	    cmocka_unit_test_setup_teardown(test_tokens_per_second_target, server_setup,
	                                    server_teardown),
	    cmocka_unit_test_setup_teardown(test_roles_scale_independently, server_setup,
	                                    server_teardown),
	    cmocka_unit_test(test_plan_counts_per_role),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
