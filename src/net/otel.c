/* OpenTelemetry HTTP conventions for our spans (see otel.h). */
#include "net/otel.h"

#include <stdio.h>
#include <string.h>

#include "base/version.h"

/* A path segment that is a name, not a route: KServe's model and version
 * (/v2/models/{model}/versions/{version}/infer), the repository's model. */
void sc_otel_route(const char *path, char *out, size_t outsz)
{
	size_t n = strcspn(path ? path : "", "?#");
	char p[512];
	snprintf(p, sizeof(p), "%.*s", (int)(n < sizeof(p) ? n : sizeof(p) - 1), path ? path : "");
	static const char *const prefixes[] = {"/v2/models/", "/v2/repository/models/",
	                                       "/v1/models/", NULL};
	for (size_t i = 0; prefixes[i]; i++) {
		size_t pl = strlen(prefixes[i]);
		if (strncmp(p, prefixes[i], pl) != 0 || !p[pl])
			continue;
		const char *rest = p + pl + strcspn(p + pl, "/"); /* after {model} */
		char tail[256] = "";
		if (strncmp(rest, "/versions/", 10) == 0 && rest[10]) {
			const char *after = rest + 10 + strcspn(rest + 10, "/");
			snprintf(tail, sizeof(tail), "/versions/{version}%s", after);
		} else {
			snprintf(tail, sizeof(tail), "%s", rest);
		}
		snprintf(out, outsz, "%s{model}%s", prefixes[i], tail);
		return;
	}
	snprintf(out, outsz, "%s", p[0] ? p : "/");
}

int sc_otel_is_probe(const char *path)
{
	static const char *const probes[] = {"/healthz",    "/readyz", "/livez", "/metrics",
	                                     "/v2/health/", "/debug/", NULL};
	for (size_t i = 0; path && probes[i]; i++) {
		size_t l = strlen(probes[i]);
		if (strncmp(path, probes[i], l) == 0 &&
		    (probes[i][l - 1] == '/' || path[l] == '\0' || path[l] == '?'))
			return 1;
	}
	return 0;
}

void sc_otel_str(json_t *attrs, const char *key, const char *value)
{
	if (!value || !value[0])
		return;
	json_array_append_new(attrs, json_pack("{s:s,s:{s:s%}}", "key", key, "value", "stringValue",
	                                       value, strlen(value)));
}

void sc_otel_int(json_t *attrs, const char *key, long long value)
{
	char s[32];
	snprintf(s, sizeof(s), "%lld", value); /* OTLP JSON: 64-bit integers as strings */
	json_array_append_new(attrs,
	                      json_pack("{s:s,s:{s:s}}", "key", key, "value", "intValue", s));
}

static int failed(int kind, int http_status)
{
	return http_status <= 0 || http_status >= 500 ||
	       (kind == SC_OTEL_CLIENT && http_status >= 400);
}

json_t *sc_otel_status(int kind, int http_status, const char *why)
{
	if (!failed(kind, http_status))
		return json_object(); /* Unset */
	char msg[160];
	if (http_status > 0)
		snprintf(msg, sizeof(msg), "HTTP %d%s%s", http_status, why && why[0] ? ": " : "",
		         why ? why : "");
	else
		snprintf(msg, sizeof(msg), "%s", why && why[0] ? why : "no answer");
	return json_pack("{s:i,s:s}", "code", 2, "message", msg);
}

const char *sc_otel_error_type(int kind, int http_status, const char *why, char *buf, size_t bufsz)
{
	if (!failed(kind, http_status))
		return NULL;
	if (http_status > 0) {
		snprintf(buf, bufsz, "%d", http_status);
		return buf;
	}
	return why && why[0] ? why : "_OTHER";
}

json_t *sc_otel_resource(const char *service, const char *instance)
{
	json_t *a = json_array();
	sc_otel_str(a, "service.name", service);
	sc_otel_str(a, "service.version", SC_VERSION);
	sc_otel_str(a, "service.instance.id", instance);
	sc_otel_str(a, "telemetry.sdk.language", "c");
	return json_pack("{s:o}", "attributes", a);
}
