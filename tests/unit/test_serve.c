/* The gateway's pure policy arithmetic (src/gateway/policy.h): picking,
 * retry budget, ejection backoff, canary windows, SSE framing, traceparent. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/policy.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t next_rand(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void test_draw_respects_weights_and_skip(void **state)
{
	double w[3] = {1, 3, 0};
	size_t hits[3] = {0};
	for (int i = 0; i < 40000; i++)
		hits[sc_lb_draw(w, 3, 4, 3, next_rand())]++;
	assert_int_equal(hits[2], 0); /* weight 0 is never drawn */
	/* 1:3 within a few percent */
	assert_true(hits[1] > 2.7 * (double)hits[0] && hits[1] < 3.3 * (double)hits[0]);
	/* Skipping index 1 leaves only index 0 with weight. */
	for (int i = 0; i < 100; i++)
		assert_int_equal(sc_lb_draw(w, 3, 1, 1, next_rand()), 0);
	/* Nothing left to draw. */
	double one[1] = {1};
	assert_int_equal(sc_lb_draw(one, 1, 0, 0, 7), 1);
}

static void test_p2c_prefers_less_loaded(void **state)
{
	double w[2] = {1, 1};
	int inflight[2] = {10, 0};
	/* Two candidates are always both drawn: the idle one wins every time. */
	for (int i = 0; i < 1000; i++)
		assert_int_equal(sc_lb_p2c(w, inflight, 2, next_rand(), next_rand()), 1);
	/* Load is per unit of weight: 10 in flight at weight 20 beats 1 at 1. */
	double w2[2] = {20, 1};
	int f2[2] = {10, 1};
	for (int i = 0; i < 1000; i++)
		assert_int_equal(sc_lb_p2c(w2, f2, 2, next_rand(), next_rand()), 0);
	assert_int_equal(sc_lb_p2c(w, inflight, 1, 1, 2), 0);
	/* Of four, the most loaded can only win a draw against itself, which
	 * P2C never makes: it is never chosen. */
	double w4[4] = {1, 1, 1, 1};
	int f4[4] = {1, 2, 3, 9};
	size_t hits[4] = {0};
	for (int i = 0; i < 4000; i++)
		hits[sc_lb_p2c(w4, f4, 4, next_rand(), next_rand())]++;
	assert_int_equal(hits[3], 0);
	assert_true(hits[0] > hits[1] && hits[1] > hits[2]);
	assert_float_equal(sc_lb_load(3, 0), 4.0, 1e-9);
	assert_float_equal(sc_lb_load(3, 2), 2.0, 1e-9);
}

static void test_retry_budget(void **state)
{
	/* 20 % of 100 active requests: 19 retries in flight may add one more. */
	assert_true(sc_retry_budget_ok(100, 19, 0.2, 3));
	assert_false(sc_retry_budget_ok(100, 20, 0.2, 3));
	/* At low load the minimum applies. */
	assert_true(sc_retry_budget_ok(1, 2, 0.2, 3));
	assert_false(sc_retry_budget_ok(1, 3, 0.2, 3));
	assert_true(sc_retry_budget_ok(0, 0, 0.2, 3));
	assert_false(sc_retry_budget_ok(0, 0, 0, 0));
}

/* A retry takes the least loaded replica (per unit of weight), the first
 * on a tie; prefill admission and the attempt timeout of a retry. */
static void test_retry_pick_and_prefill_admission(void **state)
{
	double w[3] = {1, 1, 2};
	int in[3] = {4, 2, 5};
	assert_int_equal(sc_lb_least(w, in, 3), 1); /* loads 5, 3, 3: the first 3 */
	in[1] = 3;                                  /* loads 5, 4, 3: the weighted one */
	assert_int_equal(sc_lb_least(w, in, 3), 2);
	assert_int_equal(sc_lb_least(w, in, 1), 0);
	/* Half the attempt timeout, never 0. */
	assert_int_equal(sc_prefill_wait_limit(3000), 1500);
	assert_int_equal(sc_prefill_wait_limit(1), 1);
	/* Late only when something waits, and past the limit. */
	assert_false(sc_queue_late(0, 10000, 1500));
	assert_false(sc_queue_late(5000, 6500, 1500));
	assert_true(sc_queue_late(5000, 6501, 1500));
	assert_false(sc_queue_late(7000, 6501, 1500)); /* a clock read before the start */
	/* A retry never outlives its request. */
	assert_int_equal(sc_attempt_timeout(3000, 1000, 60000), 3000);
	assert_int_equal(sc_attempt_timeout(3000, 59000, 60000), 1000);
	assert_int_equal(sc_attempt_timeout(3000, 61000, 60000), 1);
}

/* Prompt tokens: bytes / 4 by default, the Deployment's bytes per token,
 * and a backend's own counts once there are some. */
static void test_prompt_token_estimate(void **state)
{
	assert_int_equal(sc_prompt_tokens_estimate(400, 0, 0, 0), 100);
	assert_int_equal(sc_prompt_tokens_estimate(401, 0, 0, 0), 100);
	assert_int_equal(sc_prompt_tokens_estimate(402, 0, 0, 0), 101); /* 100.5 rounds up */
	assert_int_equal(sc_prompt_tokens_estimate(400, 1, 0, 0), 400);
	assert_int_equal(sc_prompt_tokens_estimate(400, 2.5, 0, 0), 160);
	assert_int_equal(sc_prompt_tokens_estimate(0, 4, 0, 0), 0);
	assert_int_equal(sc_prompt_tokens_estimate(1, 4, 0, 0), 1); /* never 0 for text */
	double t = 0, b = 0;
	sc_prompt_tokens_learn(&t, &b, 0, 5);  /* nothing counted: left out */
	sc_prompt_tokens_learn(&t, &b, 10, 0); /* likewise */
	assert_true(t == 0 && b == 0);
	/* The reference worker: a byte a token, plus BOS. */
	sc_prompt_tokens_learn(&t, &b, 400, 401);
	assert_int_equal(sc_prompt_tokens_estimate(400, 4, t, b), 401); /* the count wins */
	assert_int_equal(sc_prompt_tokens_estimate(800, 4, t, b), 802);
	/* A new tokenizer (4 bytes a token) takes over within a few dozen. */
	for (int i = 0; i < 40; i++)
		sc_prompt_tokens_learn(&t, &b, 400, 100);
	long long n = sc_prompt_tokens_estimate(400, 4, t, b);
	assert_true(n >= 100 && n <= 102);
}

static void test_eject_backoff(void **state)
{
	assert_int_equal(sc_eject_ms(30000, 300000, 1), 30000);
	assert_int_equal(sc_eject_ms(30000, 300000, 3), 90000);
	assert_int_equal(sc_eject_ms(30000, 300000, 10), 300000);
	assert_int_equal(sc_eject_ms(30000, 300000, 11), 300000);
	assert_int_equal(sc_eject_ms(30000, 300000, 0), 30000);
	/* No overflow with a huge count. */
	assert_int_equal(sc_eject_ms(UINT64_MAX / 2, UINT64_MAX - 1, 1000), UINT64_MAX - 1);
	/* Never more than half of the replicas. */
	assert_true(sc_eject_allowed(0, 2));
	assert_false(sc_eject_allowed(1, 2));
	assert_false(sc_eject_allowed(0, 1));
	assert_true(sc_eject_allowed(1, 4));
	assert_false(sc_eject_allowed(2, 4));
	assert_true(sc_eject_allowed(2, 5) == 0);
}

static void test_window_math(void **state)
{
	static sc_window_t w;
	memset(&w, 0, sizeof(w));
	assert_float_equal(sc_window_err(&w), 0, 0);
	assert_float_equal(sc_window_p99(&w), 0, 0);
	for (int i = 1; i <= 100; i++)
		sc_window_add(&w, i % 10 == 0, i / 1000.0, next_rand());
	assert_int_equal(w.requests, 100);
	assert_int_equal(w.errors, 10);
	assert_float_equal(sc_window_err(&w), 0.1, 1e-9);
	assert_float_equal(sc_window_p99(&w), 0.099, 1e-9); /* nearest rank 99 of 100 */
	/* Past the reservoir the sample stays bounded and representative. */
	memset(&w, 0, sizeof(w));
	for (int i = 0; i < 100000; i++)
		sc_window_add(&w, 0, (i % 100) / 100.0, next_rand());
	assert_int_equal(w.nlat, SC_WINDOW_SAMPLES);
	assert_int_equal(w.seen, 100000);
	double p99 = sc_window_p99(&w);
	assert_true(p99 >= 0.97 && p99 <= 0.99);
}

static void test_canary_verdict(void **state)
{
	sc_canary_limits_t lim = {0.05, 0, 1, 0}, p99 = {0.05, 1.0, 1, 0};
	/* 6 % errors over a 5 % limit: rolled back whatever the step. */
	assert_int_equal(sc_canary_verdict(100, 6, 0.1, &lim, 0, 3), SC_CANARY_ROLLBACK_ERR);
	/* Exactly at the limit passes. */
	assert_int_equal(sc_canary_verdict(100, 5, 0.1, &lim, 0, 3), SC_CANARY_ADVANCE);
	assert_int_equal(sc_canary_verdict(100, 0, 2.0, &p99, 0, 3), SC_CANARY_ROLLBACK_P99);
	assert_int_equal(sc_canary_verdict(100, 0, 2.0, &lim, 0, 3), SC_CANARY_ADVANCE);
	/* No canary traffic, or too little: hold. */
	assert_int_equal(sc_canary_verdict(0, 0, 0, &lim, 1, 3), SC_CANARY_HOLD);
	lim.min_requests = 5;
	assert_int_equal(sc_canary_verdict(4, 0, 0, &lim, 1, 3), SC_CANARY_HOLD);
	/* A good window at the last step promotes. */
	lim.min_requests = 1;
	assert_int_equal(sc_canary_verdict(10, 0, 0, &lim, 2, 3), SC_CANARY_PROMOTE);
	/* Under minRequests one failure in a few proves nothing: the old
	 * gateway rolled back on 1 of 5 (20 % > 5 %). */
	lim.min_requests = 20;
	assert_int_equal(sc_canary_verdict(5, 1, 0, &lim, 0, 3), SC_CANARY_HOLD);
	lim.confidence = 0.99;
	assert_int_equal(sc_canary_verdict(5, 1, 0, &lim, 0, 3), SC_CANARY_HOLD);
	/* ... but 3 of 5 do, at 99 %: P(>= 3 of 5 | 5 %) = 0.1 %. */
	assert_int_equal(sc_canary_verdict(5, 3, 0, &lim, 0, 3), SC_CANARY_ROLLBACK_ERR);
	/* With minRequests the plain rate rule: 2 of 20 is 10 % > 5 %. */
	assert_int_equal(sc_canary_verdict(20, 2, 0, &lim, 0, 3), SC_CANARY_ROLLBACK_ERR);
	assert_int_equal(sc_canary_verdict(20, 1, 0, &lim, 0, 3), SC_CANARY_ADVANCE);
}

static void test_binom_tail(void **state)
{
	/* Against values worked by hand and with exact sums elsewhere. */
	assert_true(fabs(sc_binom_tail(1, 1, 0.05) - 0.05) < 1e-12);
	assert_true(fabs(sc_binom_tail(2, 2, 0.05) - 0.0025) < 1e-12);
	assert_true(fabs(sc_binom_tail(10, 2, 0.05) - (1 - pow(0.95, 10) - 0.5 * pow(0.95, 9))) <
	            1e-12);
	assert_true(fabs(sc_binom_tail(20, 0, 0.3) - 1) < 1e-12);
	assert_true(sc_binom_tail(3, 4, 0.5) == 0);
	assert_true(fabs(sc_binom_tail(4, 2, 0.5) - 11.0 / 16) < 1e-12);
	/* Large n: the whole tail above the mean is about one half, and a
	 * far tail is tiny but not 0. */
	double mid = sc_binom_tail(1000000, 50000, 0.05);
	assert_true(mid > 0.49 && mid < 0.51);
	double far = sc_binom_tail(1000000, 51000, 0.05);
	assert_true(far > 0 && far < 1e-5);
}

static void test_canary_proven_bad(void **state)
{
	/* One failure never proves more than 5 % at 95 %: P(1 of 1 | 5 %) = 5 %. */
	assert_false(sc_canary_proven_bad(1, 1, 0.05, 0.95));
	assert_false(sc_canary_proven_bad(1, 1, 0.05, 0.99));
	/* 2 of 2: P = 0.25 % < 1 %. */
	assert_true(sc_canary_proven_bad(2, 2, 0.05, 0.99));
	/* 2 failures prove it at 95 % within 7 requests, not 8
	 * (P = 4.4 % and 5.7 %), at 99 % within 3, not 4. */
	assert_true(sc_canary_proven_bad(7, 2, 0.05, 0.95));
	assert_false(sc_canary_proven_bad(8, 2, 0.05, 0.95));
	assert_true(sc_canary_proven_bad(3, 2, 0.05, 0.99));
	assert_false(sc_canary_proven_bad(4, 2, 0.05, 0.99));
	/* At or under the limit's share never, however many requests. */
	assert_false(sc_canary_proven_bad(1000, 50, 0.05, 0.99));
	assert_false(sc_canary_proven_bad(1000, 10, 0.05, 0.5));
	/* A clear excess over many requests does. */
	assert_true(sc_canary_proven_bad(1000, 90, 0.05, 0.99));
	/* Off, no failures, or a limit of 100 %: never. */
	assert_false(sc_canary_proven_bad(10, 10, 0.05, 0));
	assert_false(sc_canary_proven_bad(10, 0, 0.05, 0.99));
	assert_false(sc_canary_proven_bad(10, 10, 1.0, 0.99));
	/* A limit of 0: any failure is above it. */
	assert_true(sc_canary_proven_bad(10, 1, 0, 0.99));
}

/* The sequential risk the header states: checked after every failure at
 * 99 %, over the first 100 requests, a canary failing at exactly the
 * limit is rolled back with probability under 5 %, one at a fifth of it
 * under 0.1 %; one failing 20 % of requests almost surely (> 99 %). The
 * exact probabilities, by dynamic programming over the failure count. */
static double early_rollback_chance(double p, double max, double conf, int n)
{
	double alive[101] = {1}, stopped = 0;
	for (int i = 1; i <= n; i++) {
		double next[101] = {0};
		for (int k = 0; k < i; k++) {
			if (alive[k] == 0)
				continue;
			next[k] += alive[k] * (1 - p);
			if (sc_canary_proven_bad((uint64_t)i, (uint64_t)k + 1, max, conf))
				stopped += alive[k] * p;
			else
				next[k + 1] += alive[k] * p;
		}
		memcpy(alive, next, sizeof(alive));
	}
	return stopped;
}

static void test_canary_early_rollback_risk(void **state)
{
	assert_true(early_rollback_chance(0.05, 0.05, 0.99, 100) < 0.05);
	assert_true(early_rollback_chance(0.01, 0.05, 0.99, 100) < 0.001);
	assert_true(early_rollback_chance(0.2, 0.05, 0.99, 100) > 0.99);
	/* 0.95 is looser. */
	assert_true(early_rollback_chance(0.01, 0.05, 0.95, 100) >
	            2 * early_rollback_chance(0.01, 0.05, 0.99, 100));
}

static void test_sse_framing(void **state)
{
	const char *s = "data: {\"a\":1}\n\ndata: [DONE]\n\n";
	size_t n = sc_sse_next(s, strlen(s));
	assert_int_equal(n, 15);
	const char *d;
	size_t dl;
	assert_true(sc_sse_data(s, n, &d, &dl));
	assert_int_equal(dl, 7);
	assert_memory_equal(d, "{\"a\":1}", 7);
	assert_false(sc_sse_is_done(d, dl));
	size_t m = sc_sse_next(s + n, strlen(s) - n);
	assert_true(sc_sse_data(s + n, m, &d, &dl));
	assert_true(sc_sse_is_done(d, dl));
	/* Incomplete: no blank line yet, or only half of one. */
	assert_int_equal(sc_sse_next("data: x\n", 8), 0);
	assert_int_equal(sc_sse_next("data: x", 7), 0);
	assert_int_equal(sc_sse_next("", 0), 0);
	/* CRLF line ends, a comment line first, no space after the colon. */
	const char *c = ": ping\r\ndata:{}\r\n\r\n";
	n = sc_sse_next(c, strlen(c));
	assert_int_equal(n, strlen(c));
	assert_true(sc_sse_data(c, n, &d, &dl));
	assert_int_equal(dl, 2);
	assert_memory_equal(d, "{}", 2);
	/* An event without data. */
	assert_false(sc_sse_data("event: x\n\n", 10, &d, &dl));
}

static void test_traceparent(void **state)
{
	uint8_t t[16], p[8];
	int sampled = -1;
	const char *ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	assert_int_equal(sc_traceparent_parse(ok, t, p, &sampled), 1);
	assert_int_equal(sampled, 1);
	assert_int_equal(t[0], 0x4b);
	assert_int_equal(p[7], 0xb7);
	char out[56];
	sc_traceparent_format(t, p, 1, out);
	assert_string_equal(out, ok);
	sc_traceparent_format(t, p, 0, out);
	assert_string_equal(out + 53, "00");
	/* Unsampled flag. */
	assert_int_equal(
	    sc_traceparent_parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", t, p,
	                         &sampled),
	    1);
	assert_int_equal(sampled, 0);
	/* Refused: version ff, zero ids, upper case, short, trailing data on 00. */
	const char *bad[] = {
	    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
	    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
	    "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	    "",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(sc_traceparent_parse(bad[i], t, p, &sampled), 0);
	/* A later version may carry more fields. */
	assert_int_equal(
	    sc_traceparent_parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-ext", t,
	                         p, &sampled),
	    1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_draw_respects_weights_and_skip),
	    cmocka_unit_test(test_p2c_prefers_less_loaded),
	    cmocka_unit_test(test_retry_budget),
	    cmocka_unit_test(test_retry_pick_and_prefill_admission),
	    cmocka_unit_test(test_prompt_token_estimate),
	    cmocka_unit_test(test_eject_backoff),
	    cmocka_unit_test(test_window_math),
	    cmocka_unit_test(test_canary_verdict),
	    cmocka_unit_test(test_binom_tail),
	    cmocka_unit_test(test_canary_proven_bad),
	    cmocka_unit_test(test_canary_early_rollback_risk),
	    cmocka_unit_test(test_sse_framing),
	    cmocka_unit_test(test_traceparent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
