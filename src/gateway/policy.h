/* Pure policy arithmetic of the serving gateway, apart from its event loop
 * so that it is unit-tested without sockets (tests link libsc_gateway.a):
 * power-of-two-choices picking, the retry budget, ejection backoff, canary
 * analysis windows, server-sent event framing and W3C traceparent.
 *
 * Nothing here allocates, does I/O or keeps state between calls; random
 * numbers are passed in, so every decision is reproducible in a test. */
#ifndef SC_GATEWAY_POLICY_H
#define SC_GATEWAY_POLICY_H

#include <stddef.h>
#include <stdint.h>

/* ---- picking: least outstanding requests, power of two choices ---- */

/* Load of a replica: requests in flight (counting the one being placed)
 * per unit of weight; a weight <= 0 counts as 1. */
double sc_lb_load(int inflight, double weight);
/* Draws one index in [0, n) with probability weight[i] / total, leaving
 * out index skip (pass n to leave out none); total is the sum of the
 * weights drawn from. r is a random number. Returns n when nothing is left. */
size_t sc_lb_draw(const double *weight, size_t n, double total, size_t skip, uint64_t r);
/* Envoy's LEAST_REQUEST: draws two distinct candidates (weighted) with r1
 * and r2 and returns the index of the less loaded one (the first on a
 * tie). n must be at least 1. */
size_t sc_lb_p2c(const double *weight, const int *inflight, size_t n, uint64_t r1, uint64_t r2);

/* Strict least-loaded (for a retry, which must not wait behind the herd a
 * random draw may hit): the index of the lowest sc_lb_load, the first on a
 * tie. n must be at least 1. */
size_t sc_lb_least(const double *weight, const int *inflight, size_t n);

/* ---- retries and ejection ---- */

/* True when one more retry may start: retries in flight stay under
 * ratio x active requests, and at least min are always allowed. */
int sc_retry_budget_ok(uint64_t active, uint64_t retries_in_flight, double ratio, int min);
/* Prefill admission (docs/GATEWAY.md, "Prefill/decode"): the longest a
 * prefill replica's oldest unanswered attempt may have waited before the
 * replica takes no new one, half the attempt timeout. In a FIFO queue in a
 * steady state every request waits about as long as the one at its head,
 * so a request sent behind a head that has waited that long is likely to
 * time out: it is better refused at once (503 and Retry-After) than sent. */
uint64_t sc_prefill_wait_limit(uint64_t attempt_timeout_ms);
/* True when a replica whose oldest unanswered attempt started at oldest_ms
 * (0: none is waiting) has made it wait past limit_ms at now_ms. */
int sc_queue_late(uint64_t oldest_ms, uint64_t now_ms, uint64_t limit_ms);
/* The timeout of an attempt started at now_ms by a request due at
 * deadline_ms: the attempt timeout, or what is left of the request if that
 * is less, at least 1 ms (a retry never outlives its request). */
uint64_t sc_attempt_timeout(uint64_t attempt_ms, uint64_t now_ms, uint64_t deadline_ms);
/* How long the n-th ejection (n >= 1) of a replica lasts: base x n, at
 * most max. */
uint64_t sc_eject_ms(uint64_t base_ms, uint64_t max_ms, int ejections);
/* True when one more of total replicas may be ejected while ejected
 * already are: never more than half of them at once. */
int sc_eject_allowed(size_t ejected, size_t total);

/* ---- prompt tokens (the prefill autoscaler's signal) ---- */

/* Bytes of prompt text (UTF-8) per token when nothing better is known:
 * OpenAI's rule of thumb of about 4 characters per token of English text
 * for BPE tokenizers. A Deployment may set its own (spec.promptBytesPerToken:
 * 1 for a byte-level tokenizer such as the reference worker's). */
#define SC_BYTES_PER_TOKEN 4.0
/* The estimated tokens of a prompt of bytes bytes: bytes x seen_tokens /
 * seen_bytes once a backend has counted prompts of the model (seen_bytes >
 * 0: its own count wins), else bytes / bytes_per_token (<= 0: the
 * default); rounded to the nearest, at least 1 for a non-empty prompt. */
long long sc_prompt_tokens_estimate(size_t bytes, double bytes_per_token, double seen_tokens,
                                    double seen_bytes);
/* Adds a backend's count (tokens for a prompt of bytes bytes) to the sums
 * sc_prompt_tokens_estimate reads, the older counts fading by 0.9 per new
 * one (about the last ten weigh), so a changed tokenizer (a new version)
 * is followed. Counts of nothing (bytes or tokens <= 0) are left out. */
void sc_prompt_tokens_learn(double *seen_tokens, double *seen_bytes, size_t bytes,
                            long long tokens);

/* ---- canary analysis windows ---- */

#define SC_WINDOW_SAMPLES 1024

typedef struct sc_window {
	uint64_t requests, errors;
	double lat[SC_WINDOW_SAMPLES]; /* a reservoir of latencies (s) */
	size_t nlat;
	uint64_t seen; /* latencies offered to the reservoir */
} sc_window_t;

/* Counts one finished attempt; r is a random number (reservoir sampling
 * keeps the p99 estimate fair at any rate). */
void sc_window_add(sc_window_t *w, int error, double seconds, uint64_t r);
/* Errors / requests, 0 for an empty window. */
double sc_window_err(const sc_window_t *w);
/* The 99th percentile of the sampled latencies (nearest rank), 0 for an
 * empty window. Sorts the reservoir in place. */
double sc_window_p99(sc_window_t *w);

enum {
	SC_CANARY_HOLD,    /* too few canary requests: same step */
	SC_CANARY_ADVANCE, /* next step */
	SC_CANARY_PROMOTE, /* the last step passed */
	SC_CANARY_ROLLBACK_ERR,
	SC_CANARY_ROLLBACK_P99,
};
typedef struct sc_canary_limits {
	double max_error_rate;
	double max_p99;        /* seconds; 0 = not checked */
	uint64_t min_requests; /* requests a window needs to be judged by its rate */
	double confidence;     /* of an early rollback (sc_canary_proven_bad); 0 = off */
} sc_canary_limits_t;
/* The verdict on a finished window of the canary (requests, errors, p99
 * seconds): rolled back when its error rate is above the limit with at
 * least min_requests requests, or when its errors prove the rate above
 * the limit at lim->confidence with fewer; step is the index of the
 * current step among nsteps. */
int sc_canary_verdict(uint64_t requests, uint64_t errors, double p99, const sc_canary_limits_t *lim,
                      size_t step, size_t nsteps);
/* P(X >= k) for X ~ Binomial(n, p): the chance that k or more of n
 * attempts fail when each fails with probability p. */
double sc_binom_tail(uint64_t n, uint64_t k, double p);
/* 1 when k failures in n attempts prove, at confidence (0.5..1), that the
 * failure probability is above max: the exact one-sided binomial test
 * (the Clopper-Pearson lower bound of k/n above max), whatever n. 0 when
 * they do not, or confidence is 0 (off). Checked after every failure, a
 * canary failing at exactly max is rolled back by it before 100 requests
 * with probability 4 % at confidence 0.99 (the plain rule at
 * minRequests 20 does so with 26 %); one failing at a fifth of max, 0.04 %. */
int sc_canary_proven_bad(uint64_t n, uint64_t k, double max, double confidence);

/* ---- server-sent events ---- */

/* Length of the first complete event in buf (through its blank line,
 * "\n\n" or "\r\n\r\n"), 0 when none is complete yet. */
size_t sc_sse_next(const char *buf, size_t len);
/* The payload of an event's "data:" line (one optional space after the
 * colon, line end removed): 1 with data and dlen set, or 0 when the event has
 * no data line. */
int sc_sse_data(const char *ev, size_t len, const char **data, size_t *dlen);
/* True for the OpenAI end marker "[DONE]". */
int sc_sse_is_done(const char *data, size_t dlen);

/* ---- W3C trace context ---- */

/* Parses "00-<32 hex>-<16 hex>-<2 hex>" (a later version may append
 * "-..." fields). Returns 1 and fills the ids and the sampled flag, or 0
 * for version ff, all-zero ids, upper-case or bad hex, a wrong length. */
int sc_traceparent_parse(const char *tp, uint8_t trace_id[16], uint8_t parent_id[8], int *sampled);
/* Writes "00-<trace>-<span>-0x" and a NUL (56 bytes). */
void sc_traceparent_format(const uint8_t trace_id[16], const uint8_t span_id[8], int sampled,
                           char out[56]);

#endif
