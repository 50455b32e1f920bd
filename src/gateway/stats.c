/* Per model and version figures, and the /metrics page (Prometheus text
 * format 0.0.4).
 *
 * Label sets are bounded: a model/version pair gets an entry only when a
 * backend for it exists or a request was routed to it (unknown names are
 * reported under model=""), and the table holds GW_MAX_STATS entries; past
 * that, figures go to one shared overflow entry rather than growing. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gw_int.h"
#include "base/alloc.h"
#include "net/promtext.h"

#define NBUCKETS 14
#define MAX_CODES 16

static const double bounds[NBUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                        0.1,    0.25,  0.5,    1,     2.5,  5,     10};

typedef struct hist {
	uint64_t b[NBUCKETS + 1];
	double sum;
	uint64_t count;
} hist_t;

struct gw_stats {
	char model[GW_MAX_NAME];
	char version[GW_MAX_VERSION];
	int codes[MAX_CODES];
	uint64_t code_n[MAX_CODES];
	size_t ncodes;
	hist_t total, ttft;
	uint64_t retries, ejections, rollbacks, shed;
	long long inflight;
	uint64_t tokens; /* generated tokens relayed (the decode autoscaler's rate) */
	uint64_t pf_retries[GW_PF_NREASONS], pf_denied[GW_DENY_N];
};

static const char *const pf_reasons[GW_PF_NREASONS] = {"timeout", "error", "busy", "kv_lost"};
static const char *const pf_denials[GW_DENY_N] = {NULL, "attempts", "budget", "overloaded",
                                                  "no_replica"};

static gw_stats_t overflow = {.model = "(overflow)"};

gw_stats_t *sc__gw_stats(sc_gw_t *gw, const char *model, const char *version)
{
	for (size_t i = 0; i < gw->nstats; i++) {
		gw_stats_t *s = gw->stats[i];
		if (strcmp(s->model, model) == 0 && strcmp(s->version, version) == 0)
			return s;
	}
	if (gw->nstats == GW_MAX_STATS)
		return &overflow;
	gw_stats_t *s = sc_xcalloc(1, sizeof(*s));
	snprintf(s->model, sizeof(s->model), "%s", model);
	snprintf(s->version, sizeof(s->version), "%s", version);
	gw->stats[gw->nstats++] = s;
	return s;
}

static void hist_add(hist_t *h, double v)
{
	size_t i = 0;
	while (i < NBUCKETS && v > bounds[i])
		i++;
	h->b[i]++;
	h->sum += v;
	h->count++;
}

void sc__gw_stats_done(gw_stats_t *s, int code, double total, double ttft)
{
	size_t i;
	for (i = 0; i < s->ncodes; i++)
		if (s->codes[i] == code)
			break;
	if (i == s->ncodes) {
		if (s->ncodes == MAX_CODES)
			i = MAX_CODES - 1; /* the last slot absorbs rare codes */
		else
			s->codes[s->ncodes++] = code;
	}
	s->code_n[i]++;
	hist_add(&s->total, total);
	hist_add(&s->ttft, ttft);
}

double sc__gw_stats_ttft(const sc_gw_t *gw, const char *model, uint64_t *buckets, size_t n,
                         uint64_t *count)
{
	memset(buckets, 0, n * sizeof(uint64_t));
	*count = 0;
	for (size_t i = 0; i < gw->nstats; i++) {
		const gw_stats_t *s = gw->stats[i];
		if (strcmp(s->model, model) != 0)
			continue;
		for (size_t b = 0; b <= NBUCKETS && b < n; b++)
			buckets[b] += s->ttft.b[b];
		*count += s->ttft.count;
	}
	return bounds[NBUCKETS - 1];
}

double sc__gw_stats_bucket_bound(size_t b)
{
	return b < NBUCKETS ? bounds[b] : bounds[NBUCKETS - 1];
}

void sc__gw_stats_inflight(gw_stats_t *s, int delta)
{
	s->inflight += delta;
}

void sc__gw_stats_retry(gw_stats_t *s)
{
	s->retries++;
}

void sc__gw_stats_prefill_retry(gw_stats_t *s, int reason)
{
	if (reason >= 0 && reason < GW_PF_NREASONS)
		s->pf_retries[reason]++;
}

void sc__gw_stats_prefill_denied(gw_stats_t *s, int deny)
{
	if (deny > 0 && deny < GW_DENY_N)
		s->pf_denied[deny]++;
}

void sc__gw_stats_ejection(gw_stats_t *s)
{
	s->ejections++;
}

void sc__gw_stats_rollback(gw_stats_t *s)
{
	s->rollbacks++;
}

void sc__gw_stats_shed(gw_stats_t *s)
{
	s->shed++;
}

/* ---------------------------------------------------------------------
 * Exposition
 * ------------------------------------------------------------------- */

static void hist_out(sc_buf_t *o, const char *name, const gw_stats_t *s, const hist_t *h)
{
	uint64_t cum = 0;
	for (size_t i = 0; i <= NBUCKETS; i++) {
		cum += h->b[i];
		if (i < NBUCKETS)
			sc_buf_printf(o, "%s_bucket{model=\"%s\",version=\"%s\",le=\"%g\"} %llu\n",
			              name, s->model, s->version, bounds[i],
			              (unsigned long long)cum);
		else
			sc_buf_printf(o,
			              "%s_bucket{model=\"%s\",version=\"%s\",le=\"+Inf\"} %llu\n",
			              name, s->model, s->version, (unsigned long long)cum);
	}
	sc_buf_printf(o, "%s_sum{model=\"%s\",version=\"%s\"} %.6f\n", name, s->model, s->version,
	              h->sum);
	sc_buf_printf(o, "%s_count{model=\"%s\",version=\"%s\"} %llu\n", name, s->model, s->version,
	              (unsigned long long)h->count);
}

#define FOR_STATS(gw, s) for (size_t _i = 0; _i < (gw)->nstats && ((s) = (gw)->stats[_i]); _i++)

static void counter_out(sc_buf_t *o, sc_gw_t *gw, const char *name, const char *help, size_t off,
                        int gauge)
{
	gw_stats_t *s;
	sc_prom_family(o, name, gauge ? "gauge" : "counter", help);
	FOR_STATS(gw, s)
	{
		long long v = gauge ? *(const long long *)((const char *)s + off)
		                    : (long long)*(const uint64_t *)((const char *)s + off);
		sc_buf_printf(o, "%s{model=\"%s\",version=\"%s\"} %lld\n", name, s->model,
		              s->version, v);
	}
}

/* A counter with a "reason" label: an array of n counters at off in each
 * entry, named by names (NULL: no such reason). Only non-zero samples are
 * written, so an idle model adds no series. */
static void labelled_out(sc_buf_t *o, sc_gw_t *gw, const char *name, const char *help, size_t off,
                         const char *const *names, size_t n)
{
	gw_stats_t *s;
	sc_prom_family(o, name, "counter", help);
	FOR_STATS(gw, s)
	for (size_t i = 0; i < n; i++) {
		uint64_t v = ((const uint64_t *)((const char *)s + off))[i];
		if (names[i] && v)
			sc_buf_printf(o, "%s{model=\"%s\",version=\"%s\",reason=\"%s\"} %llu\n",
			              name, s->model, s->version, names[i], (unsigned long long)v);
	}
}

void sc__gw_stats_out(sc_buf_t *o, sc_gw_t *gw)
{
	gw_stats_t *s;
	sc_prom_family(o, "starcloud_gateway_requests_total", "counter",
	               "Client requests by model, version and final status code.");
	FOR_STATS(gw, s)
	for (size_t i = 0; i < s->ncodes; i++)
		sc_buf_printf(o,
		              "starcloud_gateway_requests_total{model=\"%s\",version=\"%s\",code="
		              "\"%d\"} %llu\n",
		              s->model, s->version, s->codes[i], (unsigned long long)s->code_n[i]);
	sc_prom_family(o, "starcloud_gateway_request_duration_seconds", "histogram",
	               "Whole client request time, in seconds.");
	FOR_STATS(gw, s)
	hist_out(o, "starcloud_gateway_request_duration_seconds", s, &s->total);
	sc_prom_family(o, "starcloud_gateway_time_to_first_token_seconds", "histogram",
	               "Time to the first forwarded token (first byte of the answer), in "
	               "seconds.");
	FOR_STATS(gw, s)
	hist_out(o, "starcloud_gateway_time_to_first_token_seconds", s, &s->ttft);
	counter_out(o, gw, "starcloud_gateway_retries_total", "Upstream attempts after the first.",
	            offsetof(gw_stats_t, retries), 0);
	counter_out(o, gw, "starcloud_gateway_ejections_total", "Replicas ejected after failures.",
	            offsetof(gw_stats_t, ejections), 0);
	counter_out(o, gw, "starcloud_gateway_rollbacks_total",
	            "Canaries rolled back (version is the canary's).",
	            offsetof(gw_stats_t, rollbacks), 0);
	counter_out(o, gw, "starcloud_gateway_shed_requests_total",
	            "Requests refused by load shedding (429, or 503 for an overloaded prefill "
	            "pool).",
	            offsetof(gw_stats_t, shed), 0);
	labelled_out(o, gw, "starcloud_gateway_prefill_retries_total",
	             "Prefills retried on another prefill replica, by why the attempt failed.",
	             offsetof(gw_stats_t, pf_retries), pf_reasons, GW_PF_NREASONS);
	labelled_out(o, gw, "starcloud_gateway_prefill_retries_denied_total",
	             "Failed prefills not retried, by why not (budget: the retry budget "
	             "was spent).",
	             offsetof(gw_stats_t, pf_denied), pf_denials, GW_DENY_N);
	counter_out(o, gw, "starcloud_gateway_upstream_requests_in_flight",
	            "Upstream attempts in flight.", offsetof(gw_stats_t, inflight), 1);
	sc_prom_family(o, "starcloud_gateway_requests_in_flight", "gauge",
	               "Client requests being answered.");
	sc_buf_printf(o, "starcloud_gateway_requests_in_flight %llu\n",
	              (unsigned long long)gw->active);
	sc_prom_family(o, "starcloud_gateway_retry_budget_exhausted_total", "counter",
	               "Retries not made because the retry budget was spent.");
	sc_buf_printf(o, "starcloud_gateway_retry_budget_exhausted_total %llu\n",
	              (unsigned long long)gw->budget_exhausted);
}

void sc__gw_stats_tokens_add(gw_stats_t *s, uint64_t n)
{
	s->tokens += n;
}

void sc__gw_stats_answer_tokens(gw_stats_t *s, const char *body, size_t len)
{
	json_t *j = json_loadb(body, len, 0, NULL);
	json_t *n = json_object_get(json_object_get(j, "usage"), "completion_tokens");
	if (json_is_integer(n) && json_integer_value(n) > 0)
		s->tokens += (uint64_t)json_integer_value(n);
	json_decref(j);
}

uint64_t sc__gw_stats_tokens(const sc_gw_t *gw, const char *model)
{
	uint64_t n = 0;
	for (size_t i = 0; i < gw->nstats; i++)
		if (strcmp(gw->stats[i]->model, model) == 0)
			n += gw->stats[i]->tokens;
	return n;
}
