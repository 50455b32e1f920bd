/* /metrics, /healthz, /readyz. */
#include "server/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/ha.h"
#include "starcloud/buf.h"
#include "starcloud/core.h"

#define MAX_SERIES 256
#define NBUCKETS 12

typedef struct hist {
	const double *bounds; /* NBUCKETS - 1 finite bounds, then +Inf */
	unsigned long long counts[NBUCKETS];
	double sum;
	unsigned long long n;
} hist_t;

typedef struct api_series {
	char method[16];
	char route[64];
	int code;
	unsigned long long count;
} api_series_t;

typedef struct route_hist {
	char route[64];
	hist_t h;
} route_hist_t;

struct sc_metrics {
	api_series_t api[MAX_SERIES];
	size_t napi;
	route_hist_t lat[32];
	size_t nlat;
	hist_t cycle;
	hist_t wait;
	unsigned long long cycles, placements, evictions[SC_ACT_COUNT], drained;
	size_t pending;
	sc_queue_metrics_t *queues;
	size_t nqueues;
};

static const double lat_bounds[NBUCKETS - 1] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
						 0.05,   0.1,   0.25,   0.5,   1 };
static const double wait_bounds[NBUCKETS - 1] = { 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600,
						  14400 };

static void hist_observe(hist_t *h, double v)
{
	size_t i = 0;
	while (i < NBUCKETS - 1 && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->sum += v;
	h->n++;
}

sc_metrics_t *sc__metrics_new(void)
{
	sc_metrics_t *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->cycle.bounds = lat_bounds;
	m->wait.bounds = wait_bounds;
	return m;
}

void sc__metrics_free(sc_metrics_t *m)
{
	if (!m)
		return;
	free(m->queues);
	free(m);
}

void sc__metrics_observe_http(const char *method, const char *route, int status, double seconds,
			      void *ud)
{
	sc_metrics_t *m = ud;
	size_t i;
	for (i = 0; i < m->napi; i++)
		if (m->api[i].code == status && strcmp(m->api[i].method, method) == 0 &&
		    strcmp(m->api[i].route, route) == 0)
			break;
	if (i == m->napi && m->napi < MAX_SERIES) {
		snprintf(m->api[i].method, sizeof(m->api[i].method), "%s", method);
		snprintf(m->api[i].route, sizeof(m->api[i].route), "%s", route);
		m->api[i].code = status;
		m->napi++;
	}
	if (i < m->napi)
		m->api[i].count++;
	for (i = 0; i < m->nlat; i++)
		if (strcmp(m->lat[i].route, route) == 0)
			break;
	if (i == m->nlat && m->nlat < sizeof(m->lat) / sizeof(m->lat[0])) {
		snprintf(m->lat[i].route, sizeof(m->lat[i].route), "%s", route);
		m->lat[i].h.bounds = lat_bounds;
		m->nlat++;
	}
	if (i < m->nlat)
		hist_observe(&m->lat[i].h, seconds);
}

void sc__metrics_cycle(sc_metrics_t *m, double seconds, size_t placements,
		       const size_t *evictions, size_t nactions, size_t drained, size_t pending,
		       const sc_queue_metrics_t *queues, size_t nqueues)
{
	m->drained += drained;
	hist_observe(&m->cycle, seconds);
	m->cycles++;
	m->placements += placements;
	for (size_t a = 0; a < nactions && a < SC_ACT_COUNT; a++)
		m->evictions[a] += evictions[a];
	m->pending = pending;
	sc_queue_metrics_t *q = nqueues ? malloc(nqueues * sizeof(*q)) : NULL;
	if (nqueues && !q)
		abort();
	if (nqueues)
		memcpy(q, queues, nqueues * sizeof(*q));
	free(m->queues);
	m->queues = q;
	m->nqueues = nqueues;
}

void sc__metrics_wait(sc_metrics_t *m, double seconds)
{
	hist_observe(&m->wait, seconds);
}

static void hist_write(sc_buf_t *b, const char *name, const char *labels, const hist_t *h)
{
	unsigned long long cum = 0;
	const char *sep = labels[0] ? "," : "";
	for (size_t i = 0; i < NBUCKETS; i++) {
		cum += h->counts[i];
		if (i < NBUCKETS - 1)
			sc_buf_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep,
				      h->bounds[i], cum);
		else
			sc_buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, cum);
	}
	sc_buf_printf(b, "%s_sum{%s} %.6f\n%s_count{%s} %llu\n", name, labels, h->sum, name, labels,
		      h->n);
}

static void write_queues(sc_buf_t *b, const sc_metrics_t *m)
{
	static const char *const names[] = { "quota", "fair_share", "allocated", "requested" };
	for (size_t k = 0; k < 4; k++) {
		sc_buf_printf(b, "# HELP starcloud_queue_%s_gpus Queue %s in GPU devices.\n",
			      names[k], names[k]);
		sc_buf_printf(b, "# TYPE starcloud_queue_%s_gpus gauge\n", names[k]);
		for (size_t i = 0; i < m->nqueues; i++) {
			const sc_queue_metrics_t *q = &m->queues[i];
			double v = k == 0 ? q->quota : k == 1 ? q->fair_share
					   : k == 2 ? q->allocated : q->requested;
			sc_buf_printf(b, "starcloud_queue_%s_gpus{queue=\"%s\"} %g\n", names[k],
				      q->name, v);
		}
	}
}

static void write_metrics(sc_buf_t *b, const sc_metrics_t *m)
{
	sc_buf_puts(b, "# HELP starcloud_api_requests_total API requests by method, route and code.\n"
		       "# TYPE starcloud_api_requests_total counter\n");
	for (size_t i = 0; i < m->napi; i++)
		sc_buf_printf(b,
			      "starcloud_api_requests_total{method=\"%s\",route=\"%s\",code=\"%d\"} "
			      "%llu\n",
			      m->api[i].method, m->api[i].route, m->api[i].code, m->api[i].count);
	sc_buf_puts(b, "# HELP starcloud_api_request_duration_seconds API latency by route.\n"
		       "# TYPE starcloud_api_request_duration_seconds histogram\n");
	for (size_t i = 0; i < m->nlat; i++) {
		char labels[96];
		snprintf(labels, sizeof(labels), "route=\"%s\"", m->lat[i].route);
		hist_write(b, "starcloud_api_request_duration_seconds", labels, &m->lat[i].h);
	}
	sc_buf_puts(b, "# HELP starcloud_schedule_cycle_duration_seconds Scheduling cycle time.\n"
		       "# TYPE starcloud_schedule_cycle_duration_seconds histogram\n");
	hist_write(b, "starcloud_schedule_cycle_duration_seconds", "", &m->cycle);
	sc_buf_puts(b, "# HELP starcloud_job_wait_seconds Time from job creation to placement.\n"
		       "# TYPE starcloud_job_wait_seconds histogram\n");
	hist_write(b, "starcloud_job_wait_seconds", "", &m->wait);
	sc_buf_printf(b,
		      "# HELP starcloud_schedule_cycles_total Scheduling cycles run.\n"
		      "# TYPE starcloud_schedule_cycles_total counter\n"
		      "starcloud_schedule_cycles_total %llu\n"
		      "# HELP starcloud_placements_total Pods bound to nodes.\n"
		      "# TYPE starcloud_placements_total counter\n"
		      "starcloud_placements_total %llu\n"
		      "# HELP starcloud_pending_jobs Jobs pending after the last cycle.\n"
		      "# TYPE starcloud_pending_jobs gauge\n"
		      "starcloud_pending_jobs %zu\n"
		      "# HELP starcloud_evictions_total Pods evicted, by reason.\n"
		      "# TYPE starcloud_evictions_total counter\n",
		      m->cycles, m->placements, m->pending);
	/* Reasons are the action names of manifests (sc_action_name), plus
	 * "drain" for pods moved off a drained node. */
	for (int a = 0; a < SC_ACT_COUNT; a++)
		sc_buf_printf(b, "starcloud_evictions_total{reason=\"%s\"} %llu\n",
			      sc_action_name(a), m->evictions[a]);
	sc_buf_printf(b, "starcloud_evictions_total{reason=\"drain\"} %llu\n", m->drained);
	write_queues(b, m);
}

static void handle_metrics(sc_http_req_t *r, void *ud)
{
	sc_server_t *s = ud;
	sc_buf_t b;
	sc_buf_init(&b, 0);
	write_metrics(&b, s->metrics);
	sc__ha_metrics(s, &b);
	sc_http_respond(r, 200, "text/plain; version=0.0.4", b.data, b.len);
	sc_buf_free(&b);
}

static void handle_healthz(sc_http_req_t *r, void *ud)
{
	sc_http_respond(r, 200, "text/plain", "ok\n", 3);
}

/* Ready once the store is open and the first scheduling cycle has run,
 * so a load balancer never sends traffic to a server with stale state. */
static void handle_readyz(sc_http_req_t *r, void *ud)
{
	sc__ha_readyz(ud, r);
}

int sc__metrics_register(sc_server_t *s)
{
	int rc = sc_http_route(s->http, "GET", "/metrics", handle_metrics, s);
	if (rc == 0)
		rc = sc_http_route(s->http, "GET", "/healthz", handle_healthz, s);
	if (rc == 0)
		rc = sc_http_route(s->http, "GET", "/readyz", handle_readyz, s);
	return rc;
}
