/* Requests to the Kubernetes API server: the server URL, the bearer token
 * and TLS settings from the configuration (see k8s_int.h), over the
 * daemons' one HTTP client (net/hfetch.h): HTTP/1.1 with keep-alive, at
 * most --max-inflight writes at once (kapply.c), so as many pooled
 * connections. */
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "k8s/k8s_int.h"

#define MAX_URL 4096

sc_hcli_req_t *sc__k8s_request(sc_k8s_t *k, const char *method, const char *path, const char *ctype,
                               const char *body, size_t len, long timeout_ms, size_t max_body,
                               sc_hfetch_data_fn on_data, sc_hfetch_done_fn done, void *ud)
{
	char url[MAX_URL];
	if ((size_t)snprintf(url, sizeof(url), "%s%s", k->cfg.server, path) >= sizeof(url))
		return NULL;
	sc_hfetch_t o = {
	    .method = method,
	    .url = url,
	    .token = k->cfg.token,
	    .body = body,
	    .body_len = len,
	    .content_type = ctype,
	    .accept = "application/json",
	    .timeout_ms = timeout_ms > 0 ? (uint64_t)timeout_ms : 0,
	    .max_body = max_body,
	    .on_data = on_data,
	    .done = done,
	    .ud = ud,
	};
	sc_hcli_req_t *r;
	return sc_hfetch(k->http, &o, &r) == 0 ? r : NULL;
}

const char *sc__k8s_status_msg(const char *body, size_t len, char *buf, size_t size)
{
	json_t *st = json_loadb(body, len, 0, NULL);
	json_t *m = json_object_get(st, "message");
	if (json_is_string(m))
		snprintf(buf, size, "%s", json_string_value(m));
	else
		snprintf(buf, size, "%.*s", (int)(len > 200 ? 200 : len), body);
	json_decref(st);
	return buf;
}

void sc__k8s_microtime(char *buf, size_t size)
{
	struct timeval tv;
	struct tm tm;
	gettimeofday(&tv, NULL);
	time_t t = tv.tv_sec;
	gmtime_r(&t, &tm);
	char s[32];
	strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, size, "%s.%06ldZ", s, (long)tv.tv_usec);
}

void sc__k8s_time(char *buf, size_t size)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void sc__k8s_escape(const char *s, char *buf, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (; *s && o + 4 < size; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~') {
			buf[o++] = (char)c;
		} else {
			buf[o++] = '%';
			buf[o++] = hex[c >> 4];
			buf[o++] = hex[c & 15];
		}
	}
	buf[o] = '\0';
}
