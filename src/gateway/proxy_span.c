/*
 * proxy_span.c - the OpenTelemetry spans of a proxied request: the
 * request's server span and each upstream attempt's client span, by the
 * HTTP semantic conventions (docs/GATEWAY.md). Apart from proxy.c so the
 * request path reads without the attribute lists.
 */
#include <stdio.h>
#include <string.h>

#include "gateway/proxy.h"
#include "net/otel.h"

/* The request's server span, by OpenTelemetry's HTTP conventions. */
void sc__gw_root_span(gw_req_t *q, const char *ver, int status)
{
	char route[256], name[300], et[16], path[512];
	const char *method = q->method ? q->method : "POST";
	snprintf(path, sizeof(path), "%.*s", (int)strcspn(q->path, "?"), q->path);
	sc_otel_route(path, route, sizeof(route));
	snprintf(name, sizeof(name), "%s %s", method, route);
	json_t *a = json_array();
	sc_otel_str(a, "http.request.method", method);
	sc_otel_str(a, "http.route", route);
	sc_otel_str(a, "url.path", path);
	sc_otel_str(a, "url.scheme", "http");
	sc_otel_int(a, "http.response.status_code", status);
	sc_otel_str(a, "network.protocol.version", "1.1");
	sc_otel_str(a, "server.address", q->gw->o.listen.host);
	sc_otel_int(a, "server.port", q->gw->o.listen.port);
	sc_otel_str(a, "user_agent.original", q->ua);
	sc_otel_str(a, "gen_ai.request.model", q->model);
	sc_otel_str(a, "starcloud.model.version", ver);
	sc_otel_int(a, "starcloud.attempts", q->attempts);
	sc_otel_str(a, "error.type",
	            sc_otel_error_type(SC_OTEL_SERVER, status, NULL, et, sizeof(et)));
	sc__gw_span_end(q->gw, &q->root, name, SC_OTEL_SERVER,
	                sc_otel_status(SC_OTEL_SERVER, status, NULL), a);
}

/* An upstream attempt's client span: Error for a 4xx or 5xx answer, for no
 * answer, or for an answer that broke off (error.type "incomplete"). */
void sc__gw_attempt_span(gw_req_t *q, gw_backend_t *b, int failed)
{
	static const char *const roles[] = {"both", "prefill", "decode"};
	char route[256], name[300], url[GW_MAX_URL + sizeof(q->path)], host[256], et[16];
	const char *method = q->method ? q->method : "POST";
	int st = q->up_status;
	sc_otel_route(q->path, route, sizeof(route));
	snprintf(name, sizeof(name), "%s %s", method, route);
	snprintf(url, sizeof(url), "%s%s", b->url, q->path);
	const char *h = strstr(b->url, "://");
	h = h ? h + 3 : b->url;
	snprintf(host, sizeof(host), "%.*s", (int)strcspn(h, ":/"), h);
	json_t *a = json_array();
	sc_otel_str(a, "http.request.method", method);
	sc_otel_str(a, "url.full", url);
	sc_otel_str(a, "server.address", host);
	if (h[strcspn(h, ":/")] == ':') {
		const char *port = h + strcspn(h, ":/") + 1;
		int pn = 0;
		while (*port >= '0' && *port <= '9' && pn < 70000)
			pn = pn * 10 + (*port++ - '0');
		sc_otel_int(a, "server.port", pn);
	}
	if (st > 0)
		sc_otel_int(a, "http.response.status_code", st);
	if (q->attempts > 1)
		sc_otel_int(a, "http.request.resend_count", q->attempts - 1);
	sc_otel_str(a, "gen_ai.request.model", q->model);
	sc_otel_str(a, "starcloud.replica", b->id);
	sc_otel_str(a, "starcloud.model.version", b->version);
	sc_otel_str(a, "starcloud.role", roles[b->role]);
	json_t *status;
	if (failed && st > 0 && st < 400) { /* the answer began, then broke off */
		sc_otel_str(a, "error.type", "incomplete");
		status = json_pack("{s:i,s:s}", "code", 2, "message", "the answer broke off");
	} else {
		const char *why = failed ? "no answer" : NULL;
		sc_otel_str(
		    a, "error.type",
		    failed || st >= 400
		        ? sc_otel_error_type(SC_OTEL_CLIENT, st > 0 ? st : 0, why, et, sizeof(et))
		        : NULL);
		status = sc_otel_status(SC_OTEL_CLIENT, failed && st < 400 ? 0 : st, why);
	}
	sc__gw_span_end(q->gw, &q->att, name, SC_OTEL_CLIENT, status, a);
}
