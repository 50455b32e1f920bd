/* Pipelined HTTP/1.1 over one libcurl connection (hpipe.h).
 *
 * Requests live in one array in the order they were queued: [done, ans)
 * is freed, [ans, sent) is on the wire waiting for answers, [sent, n) is
 * queued. The loop below tries to read (answers free window room), then
 * to write, and polls the socket only when neither moved; the poll has a
 * short timeout because TLS may hold decrypted bytes the socket no longer
 * signals. */
#include "cli/hpipe.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <http_parser.h>

#include "base/alloc.h"
#include "base/version.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"

#define MAX_ANSWER (64u << 20)
#define WINDOW_BYTES (1u << 20) /* request bytes on the wire, unanswered */
#define STALL_MS 60000          /* no byte moved for this long: give up */
#define RECONNECTS 3            /* in a row without an answer in between */

typedef struct preq {
	uint64_t tag;
	char *bytes; /* the whole request; freed once answered */
	size_t len;
} preq_t;

struct sc_hpipe {
	CURL *h;
	curl_socket_t fd;
	char base[512];
	char host[300];
	char auth[600];
	char ca[1024]; /* "" for the system's CAs */
	sc_hpipe_fn fn;
	void *ud;
	preq_t *v;
	size_t n, cap;
	size_t ans;     /* first unanswered */
	size_t sent;    /* first not completely sent */
	size_t off;     /* bytes of v[sent] already sent */
	size_t wire;    /* bytes of [ans, sent) plus off */
	http_parser hp; /* answers */
	sc_buf_t body;
	char hdr[32]; /* the header being read, lower case, truncated */
	int in_retry_after;
	int retry_after;
	int fails; /* reconnects since the last answer */
	int dead;
};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- answers ---- */

static int on_field(http_parser *hp, const char *at, size_t len)
{
	sc_hpipe_t *p = hp->data;
	size_t n = strlen(p->hdr);
	for (size_t i = 0; i < len && n + 1 < sizeof(p->hdr); i++)
		p->hdr[n++] = (char)(at[i] >= 'A' && at[i] <= 'Z' ? at[i] + 32 : at[i]);
	p->hdr[n] = '\0';
	p->in_retry_after = strcmp(p->hdr, "retry-after") == 0;
	return 0;
}

static int on_value(http_parser *hp, const char *at, size_t len)
{
	sc_hpipe_t *p = hp->data;
	p->hdr[0] = '\0';
	if (p->in_retry_after) {
		int v = 0;
		for (size_t i = 0; i < len && at[i] >= '0' && at[i] <= '9' && v < 3600; i++)
			v = v * 10 + (at[i] - '0');
		p->retry_after = v;
	}
	return 0;
}

static int on_body(http_parser *hp, const char *at, size_t len)
{
	sc_hpipe_t *p = hp->data;
	return sc_buf_append(&p->body, at, len) < 0;
}

static void answer(sc_hpipe_t *p, long status, const char *body, size_t len, int retry_after)
{
	preq_t r = p->v[p->ans];
	free(r.bytes);
	p->v[p->ans].bytes = NULL;
	p->ans++;
	p->fails = 0;
	sc_hpipe_reply_t rep = {status, body ? body : "", len, retry_after};
	p->fn(p->ud, r.tag, &rep);
}

static int on_complete(http_parser *hp)
{
	sc_hpipe_t *p = hp->data;
	if (p->ans >= p->sent)
		return 1;                       /* an answer to nothing: the server is confused */
	if (sc_buf_append(&p->body, "", 0) < 0) /* a NUL even for no body */
		return 1;
	p->wire -= p->v[p->ans].len;
	answer(p, (long)hp->status_code, p->body.data, p->body.len, p->retry_after);
	p->body.len = 0;
	p->retry_after = -1;
	p->hdr[0] = '\0';
	return 0;
}

static const http_parser_settings settings = {
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_body = on_body,
    .on_message_complete = on_complete,
};

/* ---- the connection ---- */

static int connect_pipe(sc_hpipe_t *p, char *err, size_t errsz)
{
	if (p->h)
		curl_easy_cleanup(p->h);
	p->h = curl_easy_init();
	if (!p->h) {
		snprintf(err, errsz, "out of memory");
		return SC_ENOMEM;
	}
	curl_easy_setopt(p->h, CURLOPT_URL, p->base);
	curl_easy_setopt(p->h, CURLOPT_CONNECT_ONLY, 1L);
	if (p->ca[0])
		curl_easy_setopt(p->h, CURLOPT_CAINFO, p->ca);
	curl_easy_setopt(p->h, CURLOPT_CONNECTTIMEOUT, 10L);
	CURLcode rc = curl_easy_perform(p->h);
	if (rc != CURLE_OK) {
		snprintf(err, errsz, "%s: %s", p->base, curl_easy_strerror(rc));
		return SC_EIO;
	}
	curl_easy_getinfo(p->h, CURLINFO_ACTIVESOCKET, &p->fd);
	http_parser_init(&p->hp, HTTP_RESPONSE);
	p->hp.data = p;
	p->body.len = 0;
	p->hdr[0] = '\0';
	p->retry_after = -1;
	/* Everything unanswered goes again, in order. */
	p->sent = p->ans;
	p->off = 0;
	p->wire = 0;
	return 0;
}

sc_hpipe_t *sc__hpipe_open(const char *base, size_t len, const char *token, const char *ca,
                           sc_hpipe_fn fn, void *ud, char *err, size_t errsz)
{
	sc_hpipe_t *p = sc_xcalloc(1, sizeof(*p));
	snprintf(p->ca, sizeof(p->ca), "%s", ca ? ca : "");
	snprintf(p->base, sizeof(p->base), "%.*s/", (int)len, base);
	const char *h = strstr(p->base, "://");
	h = h ? h + 3 : p->base;
	snprintf(p->host, sizeof(p->host), "%.*s", (int)strcspn(h, "/"), h);
	if (token && token[0])
		snprintf(p->auth, sizeof(p->auth), "Authorization: Bearer %s\r\n", token);
	p->fn = fn;
	p->ud = ud;
	sc_buf_init(&p->body, MAX_ANSWER);
	if (connect_pipe(p, err, errsz) < 0) {
		sc__hpipe_close(p);
		return NULL;
	}
	return p;
}

void sc__hpipe_send(sc_hpipe_t *p, const char *method, const char *path, const char *body,
                    size_t len, uint64_t tag)
{
	sc_buf_t b;
	sc_buf_init(&b, 0);
	sc_buf_printf(&b,
	              "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n%s"
	              "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
	              method, path, p->host, SC_USER_AGENT("cli"), p->auth, body ? len : 0);
	if (body)
		sc_buf_append(&b, body, len);
	if (p->n == p->cap) {
		/* Answered requests at the front are dropped before growing. */
		if (p->ans > p->n / 2) {
			memmove(p->v, p->v + p->ans, (p->n - p->ans) * sizeof(*p->v));
			p->n -= p->ans;
			p->sent -= p->ans;
			p->ans = 0;
		} else {
			p->cap = p->cap ? p->cap * 2 : 256;
			p->v = sc_xreallocarray(p->v, p->cap, sizeof(*p->v));
		}
	}
	preq_t *r = &p->v[p->n++];
	r->tag = tag;
	r->bytes = sc_buf_steal(&b, &r->len);
}

size_t sc__hpipe_pending(const sc_hpipe_t *p)
{
	return p ? p->n - p->ans : 0;
}

/* Answers every unanswered request with -1 (the server is gone). */
static void fail_all(sc_hpipe_t *p)
{
	p->dead = 1;
	p->sent = p->n;
	while (p->ans < p->n)
		answer(p, -1, NULL, 0, -1);
}

/* Reads what has arrived; 1 when bytes came, 0 when none, < 0 on EOF or
 * a broken answer stream. */
static int pump_in(sc_hpipe_t *p)
{
	char buf[65536];
	size_t got = 0;
	CURLcode rc = curl_easy_recv(p->h, buf, sizeof(buf), &got);
	if (rc == CURLE_AGAIN)
		return 0;
	if (rc != CURLE_OK || got == 0)
		return SC_EIO;
	size_t used = http_parser_execute(&p->hp, &settings, buf, got);
	if (used != got || HTTP_PARSER_ERRNO(&p->hp) != HPE_OK)
		return SC_EIO;
	return 1;
}

/* Writes queued bytes while the window allows; 1 when some went. */
static int pump_out(sc_hpipe_t *p)
{
	int moved = 0;
	while (p->sent < p->n && p->wire < WINDOW_BYTES) {
		preq_t *r = &p->v[p->sent];
		size_t n = 0;
		CURLcode rc = curl_easy_send(p->h, r->bytes + p->off, r->len - p->off, &n);
		if (rc == CURLE_AGAIN)
			break;
		if (rc != CURLE_OK)
			return SC_EIO;
		p->off += n;
		p->wire += n;
		moved = 1;
		if (p->off == r->len) {
			p->sent++;
			p->off = 0;
		}
	}
	return moved;
}

static int reconnect(sc_hpipe_t *p)
{
	char err[600];
	while (p->fails++ < RECONNECTS) {
		if (connect_pipe(p, err, sizeof(err)) == 0)
			return 0;
	}
	fprintf(stderr, "starcloud: %s\n", err);
	fail_all(p);
	return SC_EIO;
}

int sc__hpipe_drain(sc_hpipe_t *p, size_t keep)
{
	double last = now_ms();
	while (!p->dead && p->n - p->ans > keep) {
		int in = pump_in(p);
		int out = in < 0 ? 0 : pump_out(p);
		if (in < 0 || out < 0) {
			if (reconnect(p) < 0)
				return SC_EIO;
			last = now_ms();
			continue;
		}
		if (in > 0 || out > 0) {
			last = now_ms();
			continue;
		}
		if (now_ms() - last > STALL_MS) {
			fprintf(stderr, "starcloud: %s: no answer for %d s\n", p->base,
			        STALL_MS / 1000);
			fail_all(p);
			return SC_EIO;
		}
		int more = p->sent < p->n && p->wire < WINDOW_BYTES;
		struct pollfd pfd = {.fd = p->fd, .events = (short)(POLLIN | (more ? POLLOUT : 0))};
		poll(&pfd, 1, 50);
	}
	return p->dead ? SC_EIO : 0;
}

void sc__hpipe_close(sc_hpipe_t *p)
{
	if (!p)
		return;
	for (size_t i = p->ans; i < p->n; i++)
		free(p->v[i].bytes);
	free(p->v);
	if (p->h)
		curl_easy_cleanup(p->h);
	sc_buf_free(&p->body);
	free(p);
}
