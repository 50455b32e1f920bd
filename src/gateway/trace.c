/* Tracing: W3C traceparent in and out, spans exported as OTLP/HTTP JSON.
 *
 * The gateway joins the caller's trace when a valid traceparent comes in
 * (version 00..fe, non-zero ids, lower-case hex) and starts a new one
 * otherwise. Each upstream attempt is a child span whose id goes to the
 * worker in the traceparent header, so the worker's spans hang below the
 * attempt that caused them. Names, attributes and statuses follow
 * OpenTelemetry's HTTP conventions (net/otel.h). Finished spans are batched and POSTed to
 * {--otlp}/v1/traces once a second (or at 512 spans); at most 8192 wait,
 * later ones are dropped and counted, so a dead collector costs bounded
 * memory. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/alloc.h"
#include "base/version.h"
#include "gateway/gw_int.h"
#include "net/otel.h"
#include "starcloud/error.h"

#define MAX_PENDING 8192
#define BATCH 512

typedef struct tracer {
	json_t *spans; /* array of OTLP span objects */
	uv_timer_t timer;
	uint64_t dropped, exported;
} tracer_t;

static uint64_t unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void rand_bytes(sc_gw_t *gw, uint8_t *out, size_t n)
{
	int nonzero = 0;
	while (!nonzero) {
		for (size_t i = 0; i < n; i++) {
			out[i] = (uint8_t)(sc__gw_rand(gw) >> 24);
			nonzero |= out[i];
		}
	}
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

static int parse_traceparent(const char *tp, gw_span_t *s)
{
	if (!sc_traceparent_parse(tp, s->trace_id, s->parent_id, &s->sampled))
		return 0;
	s->has_parent = 1;
	return 1;
}

void sc__gw_span_root(sc_gw_t *gw, gw_span_t *s, const char *traceparent)
{
	memset(s, 0, sizeof(*s));
	if (!traceparent || !parse_traceparent(traceparent, s)) {
		memset(s, 0, sizeof(*s));
		rand_bytes(gw, s->trace_id, 16);
		s->sampled = 1;
	}
	rand_bytes(gw, s->span_id, 8);
	/* Start times are only read when a span is exported: no clock read
	 * per request without --otlp. */
	s->start_ns = gw->trace ? unix_ns() : 0;
}

void sc__gw_span_child(sc_gw_t *gw, const gw_span_t *parent, gw_span_t *child)
{
	memcpy(child->trace_id, parent->trace_id, 16);
	memcpy(child->parent_id, parent->span_id, 8);
	child->has_parent = 1;
	child->sampled = parent->sampled;
	rand_bytes(gw, child->span_id, 8);
	child->start_ns = gw->trace ? unix_ns() : 0;
}

void sc__gw_traceparent(const gw_span_t *s, char out[56])
{
	sc_traceparent_format(s->trace_id, s->span_id, s->sampled, out);
}

/* ---------------------------------------------------------------------
 * Export
 * ------------------------------------------------------------------- */

int sc__gw_span_wanted(const sc_gw_t *gw, const gw_span_t *s)
{
	return gw->trace != NULL && s->sampled;
}

void sc__gw_span_end(sc_gw_t *gw, const gw_span_t *s, const char *name, int kind, json_t *status,
                     json_t *attrs)
{
	tracer_t *t = gw->trace;
	if (!t || !s->sampled || json_array_size(t->spans) >= MAX_PENDING) {
		if (t && s->sampled)
			t->dropped++;
		json_decref(attrs);
		json_decref(status);
		return;
	}
	char tid[33], sid[17], pid[17], st[24], en[24];
	hex(s->trace_id, 16, tid);
	hex(s->span_id, 8, sid);
	hex(s->parent_id, 8, pid);
	snprintf(st, sizeof(st), "%llu", (unsigned long long)s->start_ns);
	snprintf(en, sizeof(en), "%llu", (unsigned long long)unix_ns());
	json_t *span = json_pack("{s:s,s:s,s:s,s:i,s:s,s:s,s:o,s:o}", "traceId", tid, "spanId", sid,
	                         "name", name, "kind", kind, "startTimeUnixNano", st,
	                         "endTimeUnixNano", en, "attributes", attrs, "status", status);
	if (s->has_parent)
		json_object_set_new(span, "parentSpanId", json_string(pid));
	json_array_append_new(t->spans, span);
}

static void export_done(sc_hcli_req_t *r, int err, void *ud)
{
	if (err == SC_ECANCELED)
		return; /* shutting down */
	if (err < 0 || sc_hcli_status(r) >= 300)
		sc_log_warn("otlp export failed: %s", err < 0 ? "connection error" : "HTTP error");
}

static void flush(sc_gw_t *gw)
{
	tracer_t *t = gw->trace;
	size_t n = json_array_size(t->spans);
	if (n == 0)
		return;
	json_t *batch = json_array();
	for (size_t i = 0; i < n && i < BATCH; i++)
		json_array_append(batch, json_array_get(t->spans, i));
	for (size_t i = 0; i < json_array_size(batch); i++)
		json_array_remove(t->spans, 0);
	char id[80];
	snprintf(id, sizeof(id), "%s:%d", gw->o.listen.host, gw->o.listen.port);
	json_t *doc = json_pack("{s:[{s:o,s:[{s:{s:s,s:s},s:o}]}]}", "resourceSpans", "resource",
	                        sc_otel_resource("starcloud-gateway", id), "scopeSpans", "scope",
	                        "name", "starcloud.gateway", "version", SC_VERSION, "spans", batch);
	char *body = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	char url[GW_MAX_URL + 16];
	snprintf(url, sizeof(url), "%s/v1/traces", gw->o.otlp);
	sc_hcli_call_t call = {.method = "POST",
	                       .url = url,
	                       .body = body,
	                       .body_len = strlen(body),
	                       .timeout_ms = 5000,
	                       .cbs = {.on_done = export_done}};
	if (sc_hcli_start(gw->hc, &call, NULL) < 0)
		sc_log_error("otlp export: bad collector URL %s", gw->o.otlp);
	t->exported += json_array_size(batch);
	free(body);
}

static void on_flush(uv_timer_t *tm)
{
	sc_gw_t *gw = tm->data;
	tracer_t *t = gw->trace;
	do
		flush(gw);
	while (json_array_size(t->spans) >= BATCH);
}

int sc__gw_trace_init(sc_gw_t *gw)
{
	if (!gw->o.otlp[0])
		return 0;
	tracer_t *t = sc_xcalloc(1, sizeof(*t));
	t->spans = json_array();
	uv_timer_init(gw->loop, &t->timer);
	t->timer.data = gw;
	uv_timer_start(&t->timer, on_flush, 1000, 1000);
	gw->trace = t;
	return 0;
}

static void on_trace_timer_closed(uv_handle_t *h)
{
	sc_gw_t *gw = h->data;
	tracer_t *t = gw->trace;
	json_decref(t->spans);
	free(t);
	gw->trace = NULL;
}

void sc__gw_trace_close(sc_gw_t *gw)
{
	tracer_t *t = gw->trace;
	if (!t)
		return;
	flush(gw);
	uv_close((uv_handle_t *)&t->timer, on_trace_timer_closed);
}
