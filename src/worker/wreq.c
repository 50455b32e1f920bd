/* The request context: replies and errors, W3C trace context, a log line
 * and an OTLP/HTTP JSON span per request. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "starcloud/error.h"
#include "base/log.h"
#include "base/version.h"
#include "net/otel.h"
#include "worker/worker_int.h"

uint64_t sc__now_ms(void)
{
	return uv_hrtime() / 1000000u;
}

static uint64_t unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void rand_hex(char *out, int nbytes)
{
	static uint64_t st;
	if (!st)
		st = uv_hrtime() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < nbytes; i++) {
		st ^= st << 13, st ^= st >> 7, st ^= st << 17;
		snprintf(out + 2 * i, 3, "%02x", (unsigned)(st & 0xff));
	}
}

static int is_hex(const char *s, size_t n)
{
	int nonzero = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
		nonzero |= c != '0';
	}
	return nonzero;
}

/* "00-<32 hex>-<16 hex>-<2 hex>"; all-zero ids and version ff are invalid,
 * and an invalid header is ignored (a new trace starts). */
static int parse_traceparent(const char *h, char trace[33], char parent[17])
{
	if (!h || strlen(h) < 55 || h[2] != '-' || h[35] != '-' || h[52] != '-')
		return 0;
	if (!is_hex(h, 2) && memcmp(h, "00", 2) != 0)
		return 0;
	if (memcmp(h, "ff", 2) == 0 || !is_hex(h + 3, 32) || !is_hex(h + 36, 16))
		return 0;
	memcpy(trace, h + 3, 32);
	trace[32] = '\0';
	memcpy(parent, h + 36, 16);
	parent[16] = '\0';
	return 1;
}

void sc__wreq_begin(wreq_t *q, sc_worker_t *w, sc_http_req_t *r)
{
	memset(q, 0, sizeof(*q));
	q->w = w;
	q->req = r;
	q->start_ns = uv_hrtime();
	q->start_unix_ns = unix_ns();
	sc_otel_route(sc_http_path(r), q->route, sizeof(q->route));
	snprintf(q->name, sizeof(q->name), "%s %s", sc_http_method(r), q->route);
	q->probe = sc_otel_is_probe(sc_http_path(r));
	const char *ua = sc_http_header(r, "User-Agent");
	snprintf(q->method, sizeof(q->method), "%s", sc_http_method(r));
	snprintf(q->path, sizeof(q->path), "%s", sc_http_path(r));
	snprintf(q->ua, sizeof(q->ua), "%s", ua ? ua : "");
	if (!parse_traceparent(sc_http_header(r, "traceparent"), q->trace_id, q->parent_id)) {
		rand_hex(q->trace_id, 16);
		q->parent_id[0] = '\0';
	}
	rand_hex(q->span_id, 8);
	char tp[64];
	snprintf(tp, sizeof(tp), "00-%s-%s-01", q->trace_id, q->span_id);
	sc_http_set_header(r, "x-starcloud-replica", w->id);
	sc_http_set_header(r, "traceparent", tp);
	w->c.requests_received++;
}

/* ---------------------------------------------------------------------
 * OTLP export
 * ------------------------------------------------------------------- */

static void otlp_done(int status, const char *body, size_t len, void *ud)
{
	sc_worker_t *w = ud;
	w->otlp_inflight--;
	if (status >= 200 && status < 300)
		w->c.spans_exported++;
	else
		w->c.spans_dropped++;
}

/* One server span by OpenTelemetry's HTTP conventions (net/otel.h). */
static json_t *span_json(const wreq_t *q, int status, uint64_t end_ns)
{
	char st[24], en[24], et[16];
	snprintf(st, sizeof(st), "%llu", (unsigned long long)q->start_unix_ns);
	snprintf(en, sizeof(en), "%llu", (unsigned long long)end_ns);
	json_t *attrs = json_array();
	sc_otel_str(attrs, "http.request.method", q->method);
	sc_otel_str(attrs, "http.route", q->route);
	sc_otel_str(attrs, "url.path", q->path);
	sc_otel_str(attrs, "url.scheme", "http");
	sc_otel_int(attrs, "http.response.status_code", status);
	sc_otel_str(attrs, "network.protocol.version", "1.1");
	sc_otel_str(attrs, "server.address", q->w->host);
	sc_otel_int(attrs, "server.port", q->w->port);
	sc_otel_str(attrs, "user_agent.original", q->ua);
	sc_otel_str(attrs, "gen_ai.request.model", q->m ? q->m->name : NULL);
	sc_otel_str(attrs, "starcloud.replica", q->w->id);
	sc_otel_str(attrs, "error.type",
	            sc_otel_error_type(SC_OTEL_SERVER, status, NULL, et, sizeof(et)));
	json_t *span = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:o, s:o}", "traceId", q->trace_id,
	                         "spanId", q->span_id, "name", q->name, "kind", SC_OTEL_SERVER,
	                         "startTimeUnixNano", st, "endTimeUnixNano", en, "attributes",
	                         attrs, "status", sc_otel_status(SC_OTEL_SERVER, status, NULL));
	if (q->parent_id[0])
		json_object_set_new(span, "parentSpanId", json_string(q->parent_id));
	return json_pack("{s:[{s:o, s:[{s:{s:s,s:s}, s:[o]}]}]}", "resourceSpans", "resource",
	                 sc_otel_resource("starcloud-worker", q->w->id), "scopeSpans", "scope",
	                 "name", "starcloud.worker", "version", SC_VERSION, "spans", span);
}

static void otlp_export(wreq_t *q, int status)
{
	sc_worker_t *w = q->w;
	if (w->otlp_inflight >= SC_WORKER_MAX_OTLP_INFLIGHT) {
		w->c.spans_dropped++; /* a slow collector must not pile up memory */
		return;
	}
	json_t *doc = span_json(q, status, unix_ns());
	char *body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	sc_hfetch_t o = {.method = "POST",
	                 .url = w->otlp_url,
	                 .body = body,
	                 .body_len = body ? strlen(body) : 0,
	                 .timeout_ms = 5000,
	                 .max_body = 64 * 1024,
	                 .done = otlp_done,
	                 .ud = w};
	if (body && sc_hfetch(w->hcli, &o, NULL) == 0)
		w->otlp_inflight++;
	else
		w->c.spans_dropped++;
	free(body);
}

static void on_exit_timer(uv_timer_t *t)
{
	sc_worker_t *w = t->data;
	sc_log_warn("--crash-after %ld reached, exiting", w->crash_after);
	exit(3);
}

/* Counts a finished model request (for --crash-after). */
static void sc__worker_request_done(sc_worker_t *w)
{
	static long done;
	if (w->crash_after > 0 && ++done == w->crash_after) {
		/* A short delay lets the last answer reach its client. */
		uv_timer_start(&w->exit_timer, on_exit_timer, 20, 0);
	}
}

void sc__span_end(wreq_t *q, int status)
{
	if (q->ended)
		return;
	q->ended = 1;
	double ms = (double)(uv_hrtime() - q->start_ns) / 1e6;
	sc_log_info("%s %d %.2fms trace=%s span=%s%s%s", q->name, status, ms, q->trace_id,
	            q->span_id, q->parent_id[0] ? " parent=" : "", q->parent_id);
	if (q->w->otlp_url[0] && !q->probe) /* no trace for every health check */
		otlp_export(q, status);
	if (q->model_req)
		sc__worker_request_done(q->w);
}

/* ---------------------------------------------------------------------
 * Replies
 * ------------------------------------------------------------------- */

void sc__reply_raw(wreq_t *q, int status, const char *ctype, const void *body, size_t len)
{
	if (q->req)
		sc_http_respond(q->req, status, ctype, body, len);
	q->req = NULL;
	sc__span_end(q, status);
}

void sc__reply_json(wreq_t *q, int status, json_t *obj)
{
	char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	if (!s) {
		static const char oom[] =
		    "{\"error\":{\"message\":\"out of memory\","
		    "\"type\":\"server_error\",\"param\":null,\"code\":null}}";
		sc__reply_raw(q, 500, "application/json", oom, sizeof(oom) - 1);
		return;
	}
	sc__reply_raw(q, status, "application/json", s, strlen(s));
	free(s);
}

/* OpenAI's error types by status (the SDKs raise a typed error per status;
 * type and code tell the cause). */
static const char *err_type(int status)
{
	return status == 401   ? "authentication_error"
	       : status == 403 ? "permission_error"
	       : status == 429 ? "rate_limit_error"
	       : status >= 500 ? "server_error"
	                       : "invalid_request_error";
}

void sc__reply_error(wreq_t *q, int status, const char *field, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *err;
	if (q->err_shape == ERR_KSERVE) {
		err = json_pack("{s:s}", "error", msg);
	} else {
		const char *code = status == 404 && field && strcmp(field, "model") == 0
		                       ? "model_not_found"
		                       : NULL;
		err = json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message", msg, "type",
		                err_type(status), "param", field, "code", code);
	}
	sc__reply_json(q, status, err);
}
