/* Pure policy arithmetic of the serving gateway: see
 * src/gateway/policy.h. */
#include "gateway/policy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------
 * Picking
 * ------------------------------------------------------------------- */

double sc_lb_load(int inflight, double weight)
{
	return (double)(inflight + 1) / (weight > 0 ? weight : 1);
}

size_t sc_lb_draw(const double *weight, size_t n, double total, size_t skip, uint64_t r)
{
	double x = (double)(r % 1000000) / 1e6 * total;
	size_t last = n;
	for (size_t i = 0; i < n; i++) {
		if (i == skip)
			continue;
		last = i;
		if (x < weight[i])
			return i;
		x -= weight[i];
	}
	return last; /* rounding left x past the end: the last candidate */
}

size_t sc_lb_p2c(const double *weight, const int *inflight, size_t n, uint64_t r1, uint64_t r2)
{
	if (n <= 1)
		return 0;
	double total = 0;
	for (size_t i = 0; i < n; i++)
		total += weight[i];
	size_t a = sc_lb_draw(weight, n, total, n, r1);
	size_t b = sc_lb_draw(weight, n, total - weight[a], a, r2);
	if (b == n)
		return a;
	return sc_lb_load(inflight[b], weight[b]) < sc_lb_load(inflight[a], weight[a]) ? b : a;
}

size_t sc_lb_least(const double *weight, const int *inflight, size_t n)
{
	size_t best = 0;
	for (size_t i = 1; i < n; i++)
		if (sc_lb_load(inflight[i], weight[i]) < sc_lb_load(inflight[best], weight[best]))
			best = i;
	return best;
}

/* ---------------------------------------------------------------------
 * Retries and ejection
 * ------------------------------------------------------------------- */

int sc_retry_budget_ok(uint64_t active, uint64_t retries_in_flight, double ratio, int min)
{
	double budget = ratio * (double)active;
	if (budget < min)
		budget = min;
	return (double)retries_in_flight < budget;
}

uint64_t sc_prefill_wait_limit(uint64_t attempt_timeout_ms)
{
	uint64_t l = attempt_timeout_ms / 2;
	return l ? l : 1;
}

int sc_queue_late(uint64_t oldest_ms, uint64_t now_ms, uint64_t limit_ms)
{
	return oldest_ms && now_ms > oldest_ms && now_ms - oldest_ms > limit_ms;
}

uint64_t sc_attempt_timeout(uint64_t attempt_ms, uint64_t now_ms, uint64_t deadline_ms)
{
	uint64_t left = deadline_ms > now_ms ? deadline_ms - now_ms : 1;
	uint64_t t = attempt_ms < left ? attempt_ms : left;
	return t ? t : 1;
}

uint64_t sc_eject_ms(uint64_t base_ms, uint64_t max_ms, int ejections)
{
	if (ejections < 1)
		ejections = 1;
	/* base x n without overflow: past max the answer is max anyway. */
	if (base_ms && (uint64_t)ejections > max_ms / base_ms)
		return max_ms;
	uint64_t d = base_ms * (uint64_t)ejections;
	return d > max_ms ? max_ms : d;
}

int sc_eject_allowed(size_t ejected, size_t total)
{
	return (ejected + 1) * 2 <= total;
}

/* ---------------------------------------------------------------------
 * Prompt tokens
 * ------------------------------------------------------------------- */

long long sc_prompt_tokens_estimate(size_t bytes, double bytes_per_token, double seen_tokens,
                                    double seen_bytes)
{
	if (bytes == 0)
		return 0;
	double t = seen_bytes > 0 ? (double)bytes * seen_tokens / seen_bytes
	                          : (double)bytes / (bytes_per_token > 0 ? bytes_per_token
	                                                                 : SC_BYTES_PER_TOKEN);
	long long n = (long long)llround(t);
	return n < 1 ? 1 : n;
}

void sc_prompt_tokens_learn(double *seen_tokens, double *seen_bytes, size_t bytes, long long tokens)
{
	if (bytes == 0 || tokens <= 0)
		return;
	*seen_tokens = *seen_tokens * 0.9 + (double)tokens;
	*seen_bytes = *seen_bytes * 0.9 + (double)bytes;
}

/* ---------------------------------------------------------------------
 * Canary windows
 * ------------------------------------------------------------------- */

void sc_window_add(sc_window_t *w, int error, double seconds, uint64_t r)
{
	w->requests++;
	if (error)
		w->errors++;
	w->seen++;
	if (w->nlat < SC_WINDOW_SAMPLES) {
		w->lat[w->nlat++] = seconds;
		return;
	}
	uint64_t j = r % w->seen;
	if (j < SC_WINDOW_SAMPLES)
		w->lat[j] = seconds;
}

double sc_window_err(const sc_window_t *w)
{
	return w->requests ? (double)w->errors / (double)w->requests : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double sc_window_p99(sc_window_t *w)
{
	if (w->nlat == 0)
		return 0;
	qsort(w->lat, w->nlat, sizeof(double), cmp_double);
	size_t i = (size_t)ceil(0.99 * (double)w->nlat);
	return w->lat[i ? i - 1 : 0];
}

double sc_binom_tail(uint64_t n, uint64_t k, double p)
{
	if (k == 0)
		return 1;
	if (k > n || p <= 0)
		return 0;
	if (p >= 1)
		return 1;
	/* Terms in log space (n may be large); past the mode they shrink
	 * geometrically, so the sum stops once they no longer count. */
	double lp = log(p), lq = log1p(-p), lgn = lgamma((double)n + 1), sum = 0;
	for (uint64_t i = k; i <= n; i++) {
		double t = exp(lgn - lgamma((double)i + 1) - lgamma((double)(n - i) + 1) +
		               (double)i * lp + (double)(n - i) * lq);
		sum += t;
		if ((double)i > (double)n * p && t < sum * 1e-12)
			break;
	}
	return sum < 1 ? sum : 1;
}

int sc_canary_proven_bad(uint64_t n, uint64_t k, double max, double confidence)
{
	if (confidence <= 0 || k == 0 || k > n || max >= 1)
		return 0;
	/* At or below the expected count the tail is about one half or more:
	 * proves nothing, and saves the sum. */
	if ((double)k <= (double)n * max)
		return 0;
	/* Strictly below, past rounding: 1 of 1 at 5 % is exactly 5 %. */
	return sc_binom_tail(n, k, max) < 1 - confidence - 1e-9;
}

int sc_canary_verdict(uint64_t requests, uint64_t errors, double p99, const sc_canary_limits_t *lim,
                      size_t step, size_t nsteps)
{
	double err = requests ? (double)errors / (double)requests : 0;
	if (requests > 0 &&
	    ((requests >= lim->min_requests && err > lim->max_error_rate) ||
	     sc_canary_proven_bad(requests, errors, lim->max_error_rate, lim->confidence)))
		return SC_CANARY_ROLLBACK_ERR;
	if (requests > 0 && lim->max_p99 > 0 && p99 > lim->max_p99)
		return SC_CANARY_ROLLBACK_P99;
	if (requests == 0 || requests < lim->min_requests)
		return SC_CANARY_HOLD;
	return step + 1 >= nsteps ? SC_CANARY_PROMOTE : SC_CANARY_ADVANCE;
}

/* ---------------------------------------------------------------------
 * Server-sent events
 * ------------------------------------------------------------------- */

size_t sc_sse_next(const char *buf, size_t len)
{
	for (size_t i = 0; i + 1 < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (buf[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

int sc_sse_data(const char *ev, size_t len, const char **data, size_t *dlen)
{
	size_t i = 0;
	while (i < len) {
		const char *nl = memchr(ev + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - ev) : len;
		if (end - i >= 5 && memcmp(ev + i, "data:", 5) == 0) {
			size_t b = i + 5;
			if (b < end && ev[b] == ' ')
				b++;
			size_t e = end;
			if (e > b && ev[e - 1] == '\r')
				e--;
			*data = ev + b;
			*dlen = e - b;
			return 1;
		}
		i = end + 1;
	}
	return 0;
}

int sc_sse_is_done(const char *data, size_t dlen)
{
	return dlen == 6 && memcmp(data, "[DONE]", 6) == 0;
}

/* ---------------------------------------------------------------------
 * Trace context
 * ------------------------------------------------------------------- */

/* Lower-case hex only, as the W3C spec requires. Returns 1 when any byte
 * is non-zero, 0 for all zeros, -1 for a bad digit. */
static int unhex(const char *s, uint8_t *out, size_t n)
{
	int nonzero = 0;
	for (size_t i = 0; i < 2 * n; i++) {
		char c = s[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (v < 0)
			return -1;
		if (i % 2 == 0)
			out[i / 2] = (uint8_t)(v << 4);
		else
			out[i / 2] |= (uint8_t)v;
		nonzero |= v;
	}
	return nonzero != 0;
}

int sc_traceparent_parse(const char *tp, uint8_t trace_id[16], uint8_t parent_id[8], int *sampled)
{
	size_t len = strnlen(tp, 512);
	if (len < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-')
		return 0;
	uint8_t ver, flags;
	if (unhex(tp, &ver, 1) < 0 || ver == 0xff)
		return 0;
	/* Version 00 is exactly 55 characters; a later one may add fields. */
	if ((ver == 0 && len != 55) || (ver != 0 && len > 55 && tp[55] != '-'))
		return 0;
	if (unhex(tp + 3, trace_id, 16) != 1 || unhex(tp + 36, parent_id, 8) != 1)
		return 0;
	if (unhex(tp + 53, &flags, 1) < 0)
		return 0;
	*sampled = flags & 1;
	return 1;
}

static char *put_hex(char *o, const uint8_t *b, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		*o++ = digits[b[i] >> 4];
		*o++ = digits[b[i] & 15];
	}
	return o;
}

void sc_traceparent_format(const uint8_t trace_id[16], const uint8_t span_id[8], int sampled,
                           char out[56])
{
	char *o = out;
	memcpy(o, "00-", 3);
	o = put_hex(o + 3, trace_id, 16);
	*o++ = '-';
	o = put_hex(o, span_id, 8);
	memcpy(o, sampled ? "-01" : "-00", 4);
}
