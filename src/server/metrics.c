/* /metrics, /healthz, /readyz. */
#include "server/metrics.h"
#include "server/deploy.h"
#include "server/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/quantity.h"
#include "base/version.h"
#include "net/promtext.h"
#include "net/tlsreload.h"
#include "server/cache.h"
#include "server/flow.h"
#include "server/ha.h"
#include "server/jobstatus.h"
#include "server/watch.h"
#include "starcloud/buf.h"
#include "starcloud/cluster.h"
#include "starcloud/core.h"
#include "starcloud/error.h"

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
	unsigned long long decodes;              /* objects the scheduling loop decoded itself */
	unsigned long long rollbacks[3];         /* by rollback_reasons */
	double compaction_gpus, compaction_lost; /* GPUs freed, GPU-seconds lost */
	size_t pending;
	sc_queue_metrics_t *queues;
	size_t nqueues;
	char *state; /* the last cycle's cluster gauges, exposition text */
	sc_queue_wait_t *waits;
	size_t nwaits;
	unsigned long long skipped, parts, deferred;
	int busy;
	size_t changes;
	double world_bytes;
};

static const double lat_bounds[NBUCKETS - 1] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                0.05,   0.1,   0.25,   0.5,   1};
/* Cycles: from 10 ms (a small cluster) to 30 s (far past any target; the
 * latency buckets ended at 1 s, so at 10,000 nodes every cycle was +Inf). */
static const double cycle_bounds[NBUCKETS - 1] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                  1,    2.5,   5,    10,  30};
static const double wait_bounds[NBUCKETS - 1] = {1,   5,   10,   30,   60,   120,
                                                 300, 600, 1800, 3600, 14400};

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
	sc_metrics_t *m = sc_calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->cycle.bounds = cycle_bounds;
	m->wait.bounds = wait_bounds;
	return m;
}

void sc__metrics_free(sc_metrics_t *m)
{
	if (!m)
		return;
	free(m->queues);
	free(m->state);
	free(m->waits);
	free(m);
}

void sc__metrics_state(sc_metrics_t *m, char *state, sc_queue_wait_t *queues, size_t nqueues)
{
	free(m->state);
	free(m->waits);
	m->state = state;
	m->waits = queues;
	m->nwaits = nqueues;
}

static void write_waits(sc_buf_t *b, const sc_metrics_t *m)
{
	int64_t now = (int64_t)time(NULL);
	sc_buf_puts(b, "# HELP starcloud_queue_oldest_pending_seconds Age of the queue's oldest "
	               "waiting job (0 when none waits).\n"
	               "# TYPE starcloud_queue_oldest_pending_seconds gauge\n");
	for (size_t i = 0; i < m->nwaits; i++)
		sc_buf_printf(b, "starcloud_queue_oldest_pending_seconds{queue=\"%s\"} %lld\n",
		              m->waits[i].name,
		              m->waits[i].since ? (long long)(now - m->waits[i].since) : 0LL);
}

void sc__metrics_loop(sc_metrics_t *m, int busy, size_t changes)
{
	m->busy = busy;
	m->changes = changes;
}

void sc__metrics_loop_counts(sc_metrics_t *m, size_t skipped, size_t parts, size_t deferred,
                             double world_bytes)
{
	m->skipped += skipped;
	m->parts += parts;
	m->deferred += deferred;
	if (world_bytes >= 0)
		m->world_bytes = world_bytes;
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

void sc__metrics_compaction(sc_metrics_t *m, double gpus, double lost_gpu_seconds)
{
	m->compaction_gpus += gpus;
	m->compaction_lost += lost_gpu_seconds;
}

void sc__metrics_decodes(sc_metrics_t *m, size_t decoded)
{
	m->decodes += decoded;
}

void sc__metrics_cycle(sc_metrics_t *m, double seconds, size_t placements, const size_t *evictions,
                       size_t nactions, size_t drained, size_t pending,
                       const sc_queue_metrics_t *queues, size_t nqueues)
{
	m->drained += drained;
	hist_observe(&m->cycle, seconds);
	m->cycles++;
	m->placements += placements;
	for (size_t a = 0; a < nactions && a < SC_ACT_COUNT; a++)
		m->evictions[a] += evictions[a];
	m->pending = pending;
	sc_queue_metrics_t *q = nqueues ? sc_xreallocarray(NULL, nqueues, sizeof(*q)) : NULL;
	if (nqueues)
		memcpy(q, queues, nqueues * sizeof(*q));
	free(m->queues);
	m->queues = q;
	m->nqueues = nqueues;
}

/* Why a canary was rolled back: the server's analysis of the gateway's
 * reports, the gateway's own analysis, or a user's abort. */
static const char *const rollback_reasons[3] = {"error_rate", "gateway", "abort"};

void sc__metrics_rollback(sc_metrics_t *m, const char *reason)
{
	for (int i = 0; i < 3; i++)
		if (strcmp(rollback_reasons[i], reason) == 0)
			m->rollbacks[i]++;
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
			sc_buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
			              cum);
	}
	sc_buf_printf(b, "%s_sum{%s} %.6f\n%s_count{%s} %llu\n", name, labels, h->sum, name, labels,
	              h->n);
}

static void write_queues(sc_buf_t *b, const sc_metrics_t *m)
{
	static const char *const names[] = {"quota", "fair_share", "allocated", "requested"};
	for (size_t k = 0; k < 4; k++) {
		sc_buf_printf(b, "# HELP starcloud_queue_%s_gpus Queue %s in GPU devices.\n",
		              names[k], names[k]);
		sc_buf_printf(b, "# TYPE starcloud_queue_%s_gpus gauge\n", names[k]);
		for (size_t i = 0; i < m->nqueues; i++) {
			const sc_queue_metrics_t *q = &m->queues[i];
			double v = k == 0   ? q->quota
			           : k == 1 ? q->fair_share
			           : k == 2 ? q->allocated
			                    : q->requested;
			sc_buf_printf(b, "starcloud_queue_%s_gpus{queue=\"%s\"} %g\n", names[k],
			              q->name, v);
		}
	}
}

static void write_metrics(sc_buf_t *b, const sc_metrics_t *m)
{
	sc_buf_puts(b,
	            "# HELP starcloud_api_requests_total API requests by method, route and code.\n"
	            "# TYPE starcloud_api_requests_total counter\n");
	for (size_t i = 0; i < m->napi; i++)
		sc_buf_printf(
		    b,
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
	              "# HELP starcloud_schedule_decodes_total Objects the scheduling loop decoded "
	              "itself (new or changed specs the API had not decoded already).\n"
	              "# TYPE starcloud_schedule_decodes_total counter\n"
	              "starcloud_schedule_decodes_total %llu\n"
	              "# HELP starcloud_pending_jobs Jobs pending after the last cycle.\n"
	              "# TYPE starcloud_pending_jobs gauge\n"
	              "starcloud_pending_jobs %zu\n"
	              "# HELP starcloud_schedule_busy 1 while a cycle runs or changes wait for "
	              "one, else 0.\n"
	              "# TYPE starcloud_schedule_busy gauge\n"
	              "starcloud_schedule_busy %d\n"
	              "# HELP starcloud_schedule_changes Objects changed since the last cycle "
	              "took its input.\n"
	              "# TYPE starcloud_schedule_changes gauge\n"
	              "starcloud_schedule_changes %zu\n"
	              "# HELP starcloud_schedule_cycles_skipped_total Periodic cycles skipped: "
	              "nothing changed and no time rule was due.\n"
	              "# TYPE starcloud_schedule_cycles_skipped_total counter\n"
	              "starcloud_schedule_cycles_skipped_total %llu\n"
	              "# HELP starcloud_schedule_commit_parts_total Store transactions the "
	              "cycles' writes were committed in.\n"
	              "# TYPE starcloud_schedule_commit_parts_total counter\n"
	              "starcloud_schedule_commit_parts_total %llu\n"
	              "# HELP starcloud_schedule_reasons_deferred_total Pending-reason updates "
	              "left for a later cycle (at most one per job every 10 s).\n"
	              "# TYPE starcloud_schedule_reasons_deferred_total counter\n"
	              "starcloud_schedule_reasons_deferred_total %llu\n"
	              "# HELP starcloud_schedule_world_bytes Memory of the scheduling loop's kept "
	              "snapshot (texts and arrays, not decodings).\n"
	              "# TYPE starcloud_schedule_world_bytes gauge\n"
	              "starcloud_schedule_world_bytes %.0f\n"
	              "# HELP starcloud_evictions_total Pods evicted, by reason.\n"
	              "# TYPE starcloud_evictions_total counter\n",
	              m->cycles, m->placements, m->decodes, m->pending, m->busy, m->changes,
	              m->skipped, m->parts, m->deferred, m->world_bytes);
	/* Reasons are the action names of manifests (sc_action_name), plus
	 * "drain" for pods moved off a drained node. */
	for (int a = 0; a < SC_ACT_COUNT; a++)
		sc_buf_printf(b, "starcloud_evictions_total{reason=\"%s\"} %llu\n",
		              sc_action_name(a), m->evictions[a]);
	sc_buf_printf(b, "starcloud_evictions_total{reason=\"drain\"} %llu\n", m->drained);
	sc_buf_printf(
	    b,
	    "# HELP starcloud_compaction_gpus_freed_total GPUs released by compaction's "
	    "moves on the nodes they emptied.\n"
	    "# TYPE starcloud_compaction_gpus_freed_total counter\n"
	    "starcloud_compaction_gpus_freed_total %.3f\n"
	    "# HELP starcloud_compaction_lost_gpu_seconds_total Run time compaction's moves "
	    "cost (each pod's GPUs x its run time, at most checkpointEvery).\n"
	    "# TYPE starcloud_compaction_lost_gpu_seconds_total counter\n"
	    "starcloud_compaction_lost_gpu_seconds_total %.3f\n",
	    m->compaction_gpus, m->compaction_lost);
	sc_buf_printf(b,
	              "# HELP starcloud_rollbacks_total Canary rollouts rolled back, by reason.\n"
	              "# TYPE starcloud_rollbacks_total counter\n");
	for (int i = 0; i < 3; i++)
		sc_buf_printf(b, "starcloud_rollbacks_total{reason=\"%s\"} %llu\n",
		              rollback_reasons[i], m->rollbacks[i]);
	write_queues(b, m);
}

/* Connections, flow control, watches and storage (issue 16: the control
 * plane under abuse and faults; docs/CONTROL_PLANE.md). */
static void write_guards(sc_buf_t *b, sc_server_t *s)
{
	sc_http_stats_t h;
	sc_http_get_stats(s->http, &h);
	const sc_flow_stats_t *f = sc__flow_stats(s->flow);
	const sc_watch_stats_t *w = sc__watch_stats(s->watch);
	sc_buf_printf(
	    b,
	    "# HELP starcloud_http_connections Open API connections.\n"
	    "# TYPE starcloud_http_connections gauge\nstarcloud_http_connections %zu\n"
	    "# HELP starcloud_http_connections_closed_total Connections closed or refused by "
	    "the server's guards, by reason.\n"
	    "# TYPE starcloud_http_connections_closed_total counter\n"
	    "starcloud_http_connections_closed_total{reason=\"evicted\"} %llu\n"
	    "starcloud_http_connections_closed_total{reason=\"client_cap\"} %llu\n"
	    "starcloud_http_connections_closed_total{reason=\"server_cap\"} %llu\n"
	    "starcloud_http_connections_closed_total{reason=\"timeout\"} %llu\n"
	    "# HELP starcloud_flow_requests_total API requests by flow-control lane and outcome.\n"
	    "# TYPE starcloud_flow_requests_total counter\n"
	    "starcloud_flow_requests_total{outcome=\"immediate\"} %llu\n"
	    "starcloud_flow_requests_total{outcome=\"queued\"} %llu\n"
	    "starcloud_flow_requests_total{outcome=\"rejected_queue_full\"} %llu\n"
	    "starcloud_flow_requests_total{outcome=\"rejected_wait\"} %llu\n"
	    "# HELP starcloud_flow_waiting Tenant requests waiting for their share.\n"
	    "# TYPE starcloud_flow_waiting gauge\nstarcloud_flow_waiting %zu\n"
	    "# HELP starcloud_watchers Open watch streams.\n"
	    "# TYPE starcloud_watchers gauge\nstarcloud_watchers %zu\n"
	    "# HELP starcloud_watch_events_total Events queued to watch streams.\n"
	    "# TYPE starcloud_watch_events_total counter\nstarcloud_watch_events_total %llu\n"
	    "# HELP starcloud_watch_queued_bytes Bytes of watch events queued, not yet sent.\n"
	    "# TYPE starcloud_watch_queued_bytes gauge\nstarcloud_watch_queued_bytes %zu\n"
	    "# HELP starcloud_watch_cut_total Watch streams cut off, by reason.\n"
	    "# TYPE starcloud_watch_cut_total counter\n"
	    "starcloud_watch_cut_total{reason=\"slow\"} %llu\n"
	    "starcloud_watch_cut_total{reason=\"lost_writes\"} %llu\n"
	    "# HELP starcloud_store_commit_failures_total Group commits that failed (full disk, "
	    "I/O "
	    "error).\n"
	    "# TYPE starcloud_store_commit_failures_total counter\n"
	    "starcloud_store_commit_failures_total %llu\n"
	    "# HELP starcloud_store_writes_refused 1 while writes are refused after a storage "
	    "failure.\n"
	    "# TYPE starcloud_store_writes_refused gauge\nstarcloud_store_writes_refused %d\n",
	    h.conns, h.evicted, h.refused_client, h.refused_full, h.timeouts, f->immediate,
	    f->queued, f->rejected_full, f->rejected_wait, f->waiting, w->watchers, w->events,
	    w->queued_bytes, w->cut_slow, w->cut_lost, s->commit_failures, s->storage_error < 0);
}

/* /metrics names every queue and its usage, so it takes a token unless the
 * server runs with --metrics-public: admins and viewers (and Prometheus,
 * with a viewer token from a file: deploy/prometheus) read it whole; a
 * tenant reads the series of its own queues and the cluster-wide ones (the
 * dashboard shows them); agents none. 0 with *who filled (role NONE when
 * public), or answered and < 0. */
static int metrics_allowed(sc_server_t *s, sc_http_req_t *r, sc_principal_t *who)
{
	memset(who, 0, sizeof(*who));
	if (s->sec.metrics_public)
		return 0;
	if (sc__auth_request(s, r, who) < 0) {
		sc__audit_request(s, r, NULL, sc_http_status(r));
		return SC_EINVAL;
	}
	if (who->role != SC_ROLE_AGENT)
		return 0;
	sc__api_error(r, 403, "Forbidden", NULL, "/metrics is not for agent tokens");
	sc__audit_request(s, r, who, 403);
	return SC_EINVAL;
}

/* For a tenant: drops the lines of series labelled with another queue. */
static void tenant_view(sc_buf_t *b, const sc_principal_t *who)
{
	size_t out = 0;
	char *p = b->data, *end = b->data + b->len;
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		char *q = p[0] == '#' ? NULL : memmem(p, n, "queue=\"", 7);
		int keep = 1;
		if (q) {
			char name[SC_MAX_NAME + 1];
			char *v = q + 7, *close = memchr(v, '"', (size_t)(p + n - v));
			size_t vl = close ? (size_t)(close - v) : 0;
			snprintf(name, sizeof(name), "%.*s",
			         (int)(vl < SC_MAX_NAME ? vl : SC_MAX_NAME), v);
			keep = close && sc__auth_has_queue(who, name);
		}
		if (keep) {
			memmove(b->data + out, p, n);
			out += n;
		}
		p += n;
	}
	b->len = out;
}

/* The store's upkeep: how big its live data and change log are, and what
 * compacting the log costs (docs/CONTROL_PLANE.md). */
static void write_store(sc_buf_t *b, sc_store_t *st)
{
	sc_store_stats_t x;
	if (!st || sc_store_stats(st, &x) < 0)
		return;
	sc_buf_printf(b,
	              "# HELP starcloud_store_live_bytes Bytes of the stored objects' current "
	              "values.\n# TYPE starcloud_store_live_bytes gauge\n"
	              "starcloud_store_live_bytes %lld\n"
	              "# HELP starcloud_store_log_bytes Bytes of the change log kept for "
	              "watchers (bounded by a quarter of the live bytes, at least 1 MiB).\n"
	              "# TYPE starcloud_store_log_bytes gauge\nstarcloud_store_log_bytes %lld\n"
	              "# HELP starcloud_store_compacted_revision The oldest revision a watch "
	              "can resume from, less one.\n"
	              "# TYPE starcloud_store_compacted_revision gauge\n"
	              "starcloud_store_compacted_revision %lld\n"
	              "# HELP starcloud_store_compactions_total Compactions of the change log.\n"
	              "# TYPE starcloud_store_compactions_total counter\n"
	              "starcloud_store_compactions_total %llu\n"
	              "# HELP starcloud_store_compacted_rows_total Change-log rows compaction "
	              "dropped.\n# TYPE starcloud_store_compacted_rows_total counter\n"
	              "starcloud_store_compacted_rows_total %llu\n"
	              "# HELP starcloud_store_compaction_seconds_total Time spent compacting "
	              "(on the event loop).\n"
	              "# TYPE starcloud_store_compaction_seconds_total counter\n"
	              "starcloud_store_compaction_seconds_total %.6f\n",
	              (long long)x.live_bytes, (long long)x.log_bytes, (long long)x.compacted,
	              (unsigned long long)x.compactions, (unsigned long long)x.compacted_rows,
	              x.compaction_seconds);
}

static void handle_metrics(sc_http_req_t *r, void *ud)
{
	sc_server_t *s = ud;
	sc_principal_t who;
	sc_buf_t b;
	if (metrics_allowed(s, r, &who) < 0)
		return;
	sc_buf_init(&b, 0);
	write_metrics(&b, s->metrics);
	if (s->metrics->state) {
		sc_buf_puts(&b, s->metrics->state);
		write_waits(&b, s->metrics);
	}
	write_guards(&b, s);
	write_store(&b, s->store);
	sc__pool_metrics(s, &b);
	sc__scale_metrics(s, &b);
	sc__ha_metrics(s, &b);
	char schema[32];
	snprintf(schema, sizeof(schema), "store_schema=\"%d\"", s->store->schema);
	sc_prom_build_info(&b, "server", schema);
	sc_prom_process(&b);
	sc_tls_reload_metrics(&b);
	if (who.role == SC_ROLE_TENANT)
		tenant_view(&b, &who);
	sc_http_respond(r, 200, "text/plain; version=0.0.4", b.data, b.len);
	sc_buf_free(&b);
}

/* The release, the oldest client release it serves and the store's schema,
 * for an operator following a rolling upgrade (docs/DEPLOY.md). No token,
 * like Kubernetes' /version: it says nothing about the cluster's objects. */
static void handle_version(sc_http_req_t *r, void *ud)
{
	sc_server_t *s = ud;
	sc__api_json(r, 200,
	             json_pack("{s:s,s:s,s:{s:s,s:i}}", "version", SC_VERSION, "minPeerVersion",
	                       SC_MIN_PEER_VERSION, "store", "backend", s->store->ops->name,
	                       "schema", s->store->schema));
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
	if (rc == 0)
		rc = sc_http_route(s->http, "GET", "/version", handle_version, s);
	return rc;
}
