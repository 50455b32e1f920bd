/* HTTP side of the etcd backend: endpoint lists with failover, JSON calls
 * to the gateway, base64 and the gateway's int64-as-string fields. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "starcloud/buf.h"
#include "base/parse.h"
#include "base/alloc.h"
#include "base/log.h"
#include "starcloud/error.h"
#include "store/etcd_int.h"

const double sc_etcd_lat_bounds[SC_ETCD_LAT_BUCKETS] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                                        0.05,   0.1,   0.25,  0.5,   1,    2.5};

static int add_endpoint(sc_etcd_conn_t *c, const char *s, size_t n)
{
	if (n == 0 || n > 200 || c->nep == SC_ETCD_MAX_ENDPOINTS)
		return SC_EINVAL;
	const char *colon = memchr(s, ':', n);
	if (!colon || colon == s || colon + 1 == s + n)
		return SC_EINVAL;
	for (const char *p = colon + 1; p < s + n; p++)
		if (*p < '0' || *p > '9')
			return SC_EINVAL;
	char *ep = sc_malloc(n + 8);
	if (!ep)
		return SC_ENOMEM;
	snprintf(ep, n + 8, "http://%.*s", (int)n, s);
	c->eps[c->nep++] = ep;
	return 0;
}

int sc__etcd_conn_init(sc_etcd_conn_t *c, const char *list, long timeout_ms)
{
	memset(c, 0, sizeof(*c));
	c->timeout_ms = timeout_ms;
	if (strncmp(list, "etcd://", 7) == 0)
		list += 7;
	int rc = 0;
	while (*list && rc == 0) {
		if (strncmp(list, "http://", 7) == 0)
			list += 7;
		size_t n = strcspn(list, ",");
		rc = add_endpoint(c, list, n);
		list += n;
		if (*list == ',')
			list++;
	}
	if (rc == 0 && c->nep == 0)
		rc = SC_EINVAL;
	if (rc == 0 && !(c->curl = curl_easy_init()))
		rc = SC_ENOMEM;
	if (rc < 0)
		sc__etcd_conn_free(c);
	return rc;
}

void sc__etcd_conn_free(sc_etcd_conn_t *c)
{
	for (size_t i = 0; i < c->nep; i++)
		free(c->eps[i]);
	c->nep = 0;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	c->curl = NULL;
}

static size_t on_body(char *data, size_t sz, size_t n, void *ud)
{
	sc_buf_t *b = ud;
	/* Over the limit the append fails and so does the transfer:
	 * bounded input. */
	return sc_buf_append(b, data, sz * n) < 0 ? 0 : sz * n;
}

static void record(sc_etcd_conn_t *c, double secs, int failed)
{
	sc_etcd_stats_t *st = c->stats;
	if (!st)
		return;
	if (c->stats_mu)
		pthread_mutex_lock(c->stats_mu);
	st->calls++;
	st->errors += failed != 0;
	st->lat_sum += secs;
	size_t i = 0;
	while (i < SC_ETCD_LAT_BUCKETS && secs > sc_etcd_lat_bounds[i])
		i++;
	st->lat[i]++;
	if (c->stats_mu)
		pthread_mutex_unlock(c->stats_mu);
}

static void count(sc_etcd_conn_t *c, uint64_t *field)
{
	if (c->stats_mu)
		pthread_mutex_lock(c->stats_mu);
	(*field)++;
	if (c->stats_mu)
		pthread_mutex_unlock(c->stats_mu);
}

/* etcd answers a request it cannot serve now (no leader, a member cut
 * off) with gRPC code 14 UNAVAILABLE (HTTP 503) or 4 DEADLINE_EXCEEDED;
 * another member may serve it. */
uint64_t sc__etcd_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* An answer that says the write was not proposed (so never applied):
 * every other failure of a write that reached a member leaves it open. */
static int refused_before_proposal(json_t *doc)
{
	static const char *const definite[] = {"proposal dropped", "no leader", "too many requests",
	                                       NULL};
	const char *msg = json_string_value(json_object_get(doc, "error"));
	for (size_t i = 0; msg && definite[i]; i++)
		if (strstr(msg, definite[i]))
			return 1;
	return 0;
}

static int retryable(long status, json_t *doc)
{
	int64_t code = sc__etcd_int(doc, "code");
	/* A member between leaders drops a write (raft refuses the proposal)
	 * and etcd 3.4 answers it as an unknown error: it was not applied,
	 * and another member, or this one once it has a leader, takes it. */
	const char *msg = json_string_value(json_object_get(doc, "error"));
	return status == 503 || status == 504 || code == 14 || code == 4 ||
	       (msg && strstr(msg, "proposal dropped"));
}

/* Ends an attempt that has received nothing by the call's deadline (a
 * member without quorum holds the request); a transfer that has begun
 * (a large list) runs on to the attempt's own timeout. */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
	const uint64_t *deadline = ud;
	(void)dltotal, (void)ultotal, (void)ulnow;
	return dlnow == 0 && sc__etcd_mono_ms() >= *deadline;
}

/* One attempt on the current endpoint: 0, SC_EUNAVAIL (try another) or
 * SC_EIO (etcd refused the request). *reached: on SC_EUNAVAIL, 1 when the
 * request was sent (some of it) and no answer said it was not proposed. */
static int call_once(sc_etcd_conn_t *c, const char *path, const char *body, json_t **resp,
                     uint64_t *deadline, int *reached)
{
	char url[512];
	sc_buf_t b;
	sc_buf_init(&b, SC_ETCD_MAX_RESPONSE);
	snprintf(url, sizeof(url), "%s%s", c->eps[c->cur], path);
	CURL *h = c->curl;
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 500L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, deadline);
	CURLcode cc = curl_easy_perform(h);
	long status = 0, sent = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &sent);
	*reached = sent > 0;
	int rc = cc == CURLE_OK ? 0 : SC_EUNAVAIL;
	json_t *doc = NULL;
	if (rc == 0 && !(doc = json_loadb(b.data ? b.data : "", b.len, 0, NULL)))
		rc = SC_EIO;
	if (rc == 0 && status != 200) {
		rc = retryable(status, doc) ? SC_EUNAVAIL : SC_EIO;
		*reached = !refused_before_proposal(doc);
		sc_log_error("store: etcd %s %s: HTTP %ld: %s", c->eps[c->cur], path, status,
		             json_string_value(json_object_get(doc, "error")) ?: "?");
	}
	if (rc == 0)
		*resp = doc;
	else
		json_decref(doc);
	sc_buf_free(&b);
	return rc;
}

/* The breaker is opened on the calls thread and read (and closed, by the
 * probe's verdict) on the loop thread. */
void sc__etcd_breaker_close(sc_etcd_conn_t *c)
{
	__atomic_store_n(&c->open_until, 0, __ATOMIC_RELAXED);
}

int sc__etcd_breaker_open(sc_etcd_conn_t *c)
{
	return __atomic_load_n(&c->open_until, __ATOMIC_RELAXED) > sc__etcd_mono_ms();
}

/* The deadline of one attempt: the call's, or SC_ETCD_ATTEMPT_MS from now
 * if sooner. A member that lost its leader holds a write it forwarded to
 * the dead leader until etcd's own request timeout (seconds) even after a
 * new leader is elected; giving up on it early leaves time to send the
 * call again, to the next member, within the call's deadline. */
static uint64_t attempt_deadline(uint64_t call_deadline)
{
	uint64_t d = sc__etcd_mono_ms() + SC_ETCD_ATTEMPT_MS;
	return d < call_deadline ? d : call_deadline;
}

/* Waits up to ms, not past the deadline: between rounds in which every
 * member refused at once (an election under way). */
static void pause_until(uint64_t deadline, uint64_t ms)
{
	uint64_t now = sc__etcd_mono_ms();
	if (now >= deadline)
		return;
	if (ms > deadline - now)
		ms = deadline - now;
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int sc__etcd_call_here(sc_etcd_conn_t *c, const char *path, json_t *req, json_t **resp)
{
	uint64_t now = sc__etcd_mono_ms(), deadline = now + SC_ETCD_ANSWER_MS;
	if (c->breaker && sc__etcd_breaker_open(c)) {
		if (c->stats)
			count(c, &c->stats->refused);
		return SC_EUNAVAIL;
	}
	char *body = json_dumps(req, JSON_COMPACT);
	if (!body)
		return SC_ENOMEM;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = SC_EUNAVAIL, unsure = 0;
	int write = strcmp(path, "/v3/kv/txn") == 0 || strcmp(path, "/v3/kv/put") == 0 ||
	            strcmp(path, "/v3/kv/deleterange") == 0;
	/* Every member in turn, round after round, until one answers or the
	 * call's deadline: with one member of three dead, the others answer
	 * once they have elected a leader, which may take more than one round
	 * (each member tried once would open the breaker mid-election). */
	for (size_t i = 0; rc == SC_EUNAVAIL && sc__etcd_mono_ms() < deadline; i++) {
		if (i > 0 && i % c->nep == 0)
			pause_until(deadline, SC_ETCD_ROUND_PAUSE_MS);
		uint64_t attempt = attempt_deadline(deadline);
		int reached = 0;
		rc = call_once(c, path, body, resp, &attempt, &reached);
		unsure |= rc == SC_EUNAVAIL && write && reached;
		if (rc == SC_EUNAVAIL && c->nep > 1) {
			c->cur = (c->cur + 1) % c->nep;
			if (c->stats)
				count(c, &c->stats->failovers);
		}
	}
	if (rc == SC_EUNAVAIL && c->breaker) {
		if (!__atomic_load_n(&c->open_until, __ATOMIC_RELAXED))
			sc_log_error(
			    "store: no etcd endpoint answers (no quorum?): the API answers "
			    "503 at once until one does");
		__atomic_store_n(&c->open_until, sc__etcd_mono_ms() + SC_ETCD_BREAKER_MS,
		                 __ATOMIC_RELAXED);
	}
	if (rc == SC_EUNAVAIL && unsure)
		rc = SC_EUNSURE;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	record(c, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, rc);
	free(body);
	return rc;
}

/* ---------------------------------------------------------------------
 * base64 and fields
 * ------------------------------------------------------------------- */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* base64 of n bytes, malloc'd. */
static char *sc__b64_enc(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	char *out = sc_xmalloc((n + 2) / 3 * 4 + 1), *o = out;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		*o++ = B64[(v >> 18) & 63];
		*o++ = B64[(v >> 12) & 63];
		*o++ = i + 1 < n ? B64[(v >> 6) & 63] : '=';
		*o++ = i + 2 < n ? B64[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

static int b64_val(char c)
{
	const char *p = c ? strchr(B64, c) : NULL;
	return p ? (int)(p - B64) : -1;
}

int sc__b64_dec(const char *s, char **out, size_t *n)
{
	size_t len = strlen(s);
	char *o = sc_xmalloc(len / 4 * 3 + 4);
	size_t k = 0;
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < len && s[i] != '='; i++) {
		int v = b64_val(s[i]);
		if (v < 0) {
			free(o);
			return SC_EPARSE;
		}
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			o[k++] = (char)((acc >> bits) & 0xff);
		}
	}
	o[k] = '\0';
	*out = o;
	if (n)
		*n = k;
	return 0;
}

int64_t sc__etcd_int(json_t *obj, const char *field)
{
	json_t *v = json_object_get(obj, field);
	if (json_is_integer(v))
		return json_integer_value(v);
	int64_t n = 0;
	if (json_is_string(v))
		sc_parse_i64(json_string_value(v), INT64_MIN, INT64_MAX, &n);
	return n;
}

void sc__etcd_set_b64(json_t *obj, const char *field, const char *s)
{
	char *b = sc__b64_enc(s, strlen(s));
	json_object_set_new(obj, field, json_string(b));
	free(b);
}

void sc__etcd_set_int(json_t *obj, const char *field, int64_t v)
{
	char num[32];
	snprintf(num, sizeof(num), "%lld", (long long)v);
	json_object_set_new(obj, field, json_string(num));
}

int sc__etcd_is_meta(const char *prefix, const char *key)
{
	size_t plen = strlen(prefix);
	return strncmp(key, prefix, plen) == 0 && !strchr(key + plen, '/');
}
