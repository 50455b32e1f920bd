/* OpenTelemetry's HTTP semantic conventions for the spans the gateway and
 * the worker export (OTLP/HTTP JSON), written once for both so their spans
 * read alike in any tracing UI:
 *
 *   name        "METHOD route": "POST /v1/chat/completions", with the
 *               model of a KServe path templated ("/v2/models/{model}/infer")
 *               so names stay few
 *   attributes  http.request.method, http.route, url.path, url.scheme,
 *               http.response.status_code, network.protocol.version,
 *               server.address/server.port, user_agent.original (server
 *               spans); url.full, server.address/port and
 *               http.request.resend_count (client spans); error.type when
 *               the span failed; gen_ai.request.model, and starcloud.*
 *               for what the conventions have no name for
 *   status      a server span is Error only for a 5xx answer (a 4xx is the
 *               client's mistake, and stays Unset); a client span is Error
 *               for a 4xx, a 5xx or no answer; otherwise Unset, never Ok
 *               (that is for a user's explicit verdict)
 *
 * Health checks, readiness probes and scrapes (/healthz, /readyz,
 * /v2/health/..., /metrics, /debug/...) make no spans: a probe every few
 * seconds would bury the traces people look for. */
#ifndef SC_NET_OTEL_H
#define SC_NET_OTEL_H

#include <stddef.h>

#include <jansson.h>

enum { SC_OTEL_SERVER = 2, SC_OTEL_CLIENT = 3 }; /* OTLP span kinds */

/* The route template of a request path (the query is ignored). */
void sc_otel_route(const char *path, char *out, size_t outsz);
/* 1 when a path is a probe or scrape that gets no span. */
int sc_otel_is_probe(const char *path);

/* Appends one OTLP attribute to attrs (a JSON array); a NULL or empty
 * string value is left out. */
void sc_otel_str(json_t *attrs, const char *key, const char *value);
void sc_otel_int(json_t *attrs, const char *key, long long value);

/* The span status for kind and the HTTP status answered (<= 0: none came,
 * why says what happened instead). New reference. */
json_t *sc_otel_status(int kind, int http_status, const char *why);
/* error.type for a failed span: the status code ("503"), or why when no
 * answer came ("timeout"); NULL when the span did not fail. Points into buf
 * or why. */
const char *sc_otel_error_type(int kind, int http_status, const char *why, char *buf, size_t bufsz);

/* The resource of a process's spans: service.name, service.version,
 * service.instance.id (instance may be NULL). New reference (an object
 * with "attributes"). */
json_t *sc_otel_resource(const char *service, const char *instance);

#endif
