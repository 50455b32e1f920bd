/* Asynchronous HTTP/1.1 client: pools, connections, requests.
 *
 * A connection is in one of three places: attached to a request (active),
 * in its pool's idle list, or closing. A request owns its connection while
 * attached; when the answer is complete and both sides allow keep-alive, the
 * connection goes back to the idle list (reading, so that a server's close
 * is noticed at once), otherwise it is closed.
 *
 * User callbacks run from inside http_parser_execute(); a callback may
 * cancel its request or start new ones, so the parser callbacks check the
 * request's `cancelled` flag and stop the parser instead of touching freed
 * memory: a cancelled request is only freed once the read callback that is
 * running has unwound (see conn_after_parse). */
#include "net/hclient.h"
#include "net/tls.h"
#include "base/parse.h"
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "base/httphead.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"

#define MAX_HOST 64
#define MAX_RESP_HEADERS 64
#define READ_SLAB (64 * 1024)
#define REQ_POOL 512
#define REQ_KEEP_BYTES (64u << 10)

typedef struct hc_conn hc_conn_t;

typedef struct hc_pool {
	char host[MAX_HOST];
	int port;
	int tls;         /* https:// */
	hc_conn_t *idle; /* singly linked through next_idle */
	size_t nidle;
	struct hc_pool *next;
} hc_pool_t;

struct sc_hcli {
	uv_loop_t *loop;
	sc_hcli_opts_t opts;
	hc_pool_t *pools;
	hc_conn_t *conns; /* every open connection, for sc_hcli_close */
	size_t nconns;
	sc_hcli_req_t *pool; /* finished requests kept for reuse */
	size_t npool;
	int closing;
	sc_tls_ctx_t *tls; /* borrowed: for https:// URLs, or NULL */
};

enum { HDR_NONE, HDR_FIELD, HDR_VALUE };

struct sc_hcli_req {
	sc_hcli_t *c;
	hc_conn_t *conn;
	hc_pool_t *pool;
	sc_buf_t out; /* the serialized request, kept for one resend */
	sc_hcli_cbs_t cbs;
	void *ud;
	uint64_t timeout_ms, idle_timeout_ms;
	int status;
	sc_buf_t hdrs; /* "name\0value\0" */
	size_t hdr_off[MAX_RESP_HEADERS][2];
	size_t nhdrs;
	int hdr_state;
	int got_bytes; /* any byte of the answer arrived */
	int reached;   /* written on an open connection */
	int resent;    /* already resent after a stale connection */
	int cancelled;
	int complete;
	int in_parse;             /* inside the parser: free later */
	int no_body;              /* a HEAD request: the answer's length has no body */
	uint64_t last_io;         /* loop time of the last write or read (inactivity) */
	sc_hcli_req_t *next_free; /* in sc_hcli_t.pool */
};

struct hc_conn {
	uv_tcp_t tcp;
	uv_timer_t timer;
	uv_connect_t connect;
	sc_hcli_t *c;
	hc_pool_t *pool;
	sc_hcli_req_t *req;
	hc_conn_t *next_idle;
	hc_conn_t *prev, *next; /* all connections */
	http_parser parser;
	int connected;
	int reading; /* uv_read_start is in effect (it stays so) */
	int reused;
	int in_pool;
	int closing;
	int handles;
	int deferred_err;       /* error to deliver from the timer (sync failures) */
	uint64_t due;           /* loop time the timer is armed for; 0 = not armed */
	uint64_t connect_until; /* connect phase: give up then */
	uint64_t idle_until;    /* idle in its pool: close then */
	sc_tls_t *tls;          /* https: the session (net/tls.h) */
};

typedef struct hc_write {
	uv_write_t w;
	hc_conn_t *conn;
	char data[];
} hc_write_t;

static void conn_close(hc_conn_t *k);
static void conn_arm(hc_conn_t *k);
static void req_fail(sc_hcli_req_t *r, int err);
static int req_send(sc_hcli_req_t *r, int fresh);
static int parse_url(const char *url, char *host, size_t hostsz, int *port, const char **path,
                     int *tls);

/* ---------------------------------------------------------------------
 * URLs and pools
 * ------------------------------------------------------------------- */

int sc_hcli_parse_url(const char *url, char *host, size_t hostsz, int *port, const char **path)
{
	int tls;
	return parse_url(url, host, hostsz, port, path, &tls);
}

static int parse_url(const char *url, char *host, size_t hostsz, int *port, const char **path,
                     int *tls)
{
	*tls = strncmp(url, "https://", 8) == 0;
	if (!*tls && strncmp(url, "http://", 7) != 0)
		return SC_EINVAL;
	const char *h = url + (*tls ? 8 : 7);
	size_t hl = strcspn(h, ":/?");
	if (hl == 0 || hl >= hostsz)
		return SC_EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	const char *p = h + hl;
	*port = *tls ? 443 : 80;
	if (*p == ':') {
		uint64_t v;
		const char *end = p + 1;
		if (sc_parse_digits(&end, 65535, &v) < 0 || v < 1)
			return SC_EINVAL;
		*port = (int)v;
		p = end;
	}
	if (*p && *p != '/' && *p != '?')
		return SC_EINVAL;
	*path = *p ? p : "/";
	if (strcmp(host, "localhost") == 0)
		snprintf(host, hostsz, "127.0.0.1");
	struct sockaddr_in sa;
	if (uv_ip4_addr(host, *port, &sa) < 0)
		return SC_EINVAL;
	return 0;
}

static hc_pool_t *pool_get(sc_hcli_t *c, const char *host, int port, int tls)
{
	for (hc_pool_t *p = c->pools; p; p = p->next)
		if (p->port == port && p->tls == tls && strcmp(p->host, host) == 0)
			return p;
	hc_pool_t *p = sc_xcalloc(1, sizeof(*p));
	snprintf(p->host, sizeof(p->host), "%s", host);
	p->port = port;
	p->tls = tls;
	p->next = c->pools;
	c->pools = p;
	return p;
}

static void pool_remove_idle(hc_pool_t *p, hc_conn_t *k)
{
	for (hc_conn_t **pp = &p->idle; *pp; pp = &(*pp)->next_idle) {
		if (*pp == k) {
			*pp = k->next_idle;
			k->next_idle = NULL;
			k->in_pool = 0;
			p->nidle--;
			return;
		}
	}
}

/* ---------------------------------------------------------------------
 * Connections
 * ------------------------------------------------------------------- */

static void on_conn_handle_closed(uv_handle_t *h)
{
	hc_conn_t *k = h->data;
	if (--k->handles > 0)
		return;
	sc_hcli_t *c = k->c;
	sc_tls_free(k->tls);
	free(k);
	c->nconns--;
	if (c->closing && c->nconns == 0) {
		while (c->pools) {
			hc_pool_t *p = c->pools;
			c->pools = p->next;
			free(p);
		}
		free(c);
	}
}

/* Closes a connection wherever it is (idle in its pool or detached). */
static void conn_close(hc_conn_t *k)
{
	if (k->closing)
		return;
	k->closing = 1;
	if (k->in_pool)
		pool_remove_idle(k->pool, k);
	k->req = NULL;
	sc_hcli_t *c = k->c;
	if (k->prev)
		k->prev->next = k->next;
	else
		c->conns = k->next;
	if (k->next)
		k->next->prev = k->prev;
	k->prev = k->next = NULL;
	uv_close((uv_handle_t *)&k->tcp, on_conn_handle_closed);
	uv_close((uv_handle_t *)&k->timer, on_conn_handle_closed);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	static char slab[READ_SLAB]; /* one loop thread: the parser copies out */
	*buf = uv_buf_init(slab, sizeof(slab));
}

/* Returns a connection whose answer is complete to its pool, or closes it. */
static void conn_release(hc_conn_t *k, int keep)
{
	sc_hcli_t *c = k->c;
	k->req = NULL;
	if (!keep || c->closing || k->pool->nidle >= c->opts.max_idle_per_host) {
		conn_close(k);
		return;
	}
	k->reused = 1;
	k->in_pool = 1;
	k->next_idle = k->pool->idle;
	k->pool->idle = k;
	k->pool->nidle++;
	/* The connection keeps reading (on_read sees no request and closes it
	 * on any byte or EOF): stopping and restarting reads would cost two
	 * epoll_ctl calls per request. */
	k->idle_until = uv_now(c->loop) + c->opts.idle_close_ms;
	conn_arm(k);
}

static hc_conn_t *conn_new(sc_hcli_t *c, hc_pool_t *p)
{
	hc_conn_t *k = sc_xcalloc(1, sizeof(*k));
	k->c = c;
	k->pool = p;
	uv_tcp_init(c->loop, &k->tcp);
	uv_timer_init(c->loop, &k->timer);
	k->tcp.data = k->timer.data = k->connect.data = k;
	k->handles = 2;
	if (p->tls)
		k->tls = sc_tls_new(c->tls, 0, p->host); /* NULL: fails at the write */
	k->next = c->conns;
	if (c->conns)
		c->conns->prev = k;
	c->conns = k;
	c->nconns++;
	return k;
}

/* ---------------------------------------------------------------------
 * Response parsing
 * ------------------------------------------------------------------- */

static int rp_header_field(http_parser *hp, const char *at, size_t len)
{
	sc_hcli_req_t *r = ((hc_conn_t *)hp->data)->req;
	if (!r || r->cancelled)
		return 1;
	if (r->hdrs.len + len + 2 > r->c->opts.max_header_bytes)
		return 1;
	if (r->hdr_state != HDR_FIELD) {
		if (r->hdr_state == HDR_VALUE)
			sc_buf_append(&r->hdrs, "", 1);
		if (r->nhdrs == MAX_RESP_HEADERS)
			return 1;
		r->hdr_off[r->nhdrs][0] = r->hdrs.len;
		r->nhdrs++;
	}
	r->hdr_state = HDR_FIELD;
	return sc_buf_append(&r->hdrs, at, len) < 0;
}

static int rp_header_value(http_parser *hp, const char *at, size_t len)
{
	sc_hcli_req_t *r = ((hc_conn_t *)hp->data)->req;
	if (!r || r->cancelled || r->nhdrs == 0)
		return 1;
	if (r->hdrs.len + len + 2 > r->c->opts.max_header_bytes)
		return 1;
	if (r->hdr_state != HDR_VALUE) {
		sc_buf_append(&r->hdrs, "", 1);
		r->hdr_off[r->nhdrs - 1][1] = r->hdrs.len;
	}
	r->hdr_state = HDR_VALUE;
	return sc_buf_append(&r->hdrs, at, len) < 0;
}

static int rp_headers_complete(http_parser *hp)
{
	sc_hcli_req_t *r = ((hc_conn_t *)hp->data)->req;
	if (!r || r->cancelled)
		return -1;
	if (r->hdr_state == HDR_VALUE)
		sc_buf_append(&r->hdrs, "", 1);
	else if (r->hdr_state == HDR_FIELD) {
		sc_buf_append(&r->hdrs, "", 1);
		r->hdr_off[r->nhdrs - 1][1] = r->hdrs.len;
		sc_buf_append(&r->hdrs, "", 1);
	}
	r->hdr_state = HDR_NONE;
	if (hp->status_code < 100 || hp->status_code > 599)
		return -1; /* "HTTP/1.1 2 OK" is no answer: a malformed one (SC_EPARSE) */
	r->status = hp->status_code;
	if (r->status == 100) /* interim answer: wait for the real one */
		return 0;
	if (r->cbs.on_head && r->cbs.on_head(r, r->status, r->ud))
		r->cancelled = 1;
	return r->cancelled ? -1 : 0;
}

static int rp_body(http_parser *hp, const char *at, size_t len)
{
	sc_hcli_req_t *r = ((hc_conn_t *)hp->data)->req;
	if (!r || r->cancelled)
		return 1;
	if (r->cbs.on_data && r->cbs.on_data(r, at, len, r->ud))
		r->cancelled = 1;
	return r->cancelled;
}

static int rp_message_complete(http_parser *hp)
{
	hc_conn_t *k = hp->data;
	sc_hcli_req_t *r = k->req;
	if (!r || r->cancelled)
		return 1;
	if (r->status == 100) {
		r->status = 0;
		r->nhdrs = 0;
		sc_buf_reset(&r->hdrs);
		return 0;
	}
	r->complete = 1;
	http_parser_pause(hp, 1);
	return 0;
}

static const http_parser_settings rp_settings = {
    .on_header_field = rp_header_field,
    .on_header_value = rp_header_value,
    .on_headers_complete = rp_headers_complete,
    .on_body = rp_body,
    .on_message_complete = rp_message_complete,
};

/* ---------------------------------------------------------------------
 * Requests
 * ------------------------------------------------------------------- */

/* Finished requests are kept with their buffers for the next ones (up to
 * REQ_POOL): no allocation per request once the client is warm. */
static void req_free(sc_hcli_req_t *r)
{
	sc_hcli_t *c = r->c;
	if (c->closing || c->npool >= REQ_POOL || r->out.cap > REQ_KEEP_BYTES) {
		sc_buf_free(&r->out);
		sc_buf_free(&r->hdrs);
		free(r);
		return;
	}
	r->next_free = c->pool;
	c->pool = r;
	c->npool++;
}

static sc_hcli_req_t *req_alloc(sc_hcli_t *c)
{
	sc_hcli_req_t *r = c->pool;
	if (!r) {
		r = sc_xcalloc(1, sizeof(*r));
		sc_buf_init(&r->out, 0);
		sc_buf_init(&r->hdrs, c->opts.max_header_bytes + 64);
		return r;
	}
	c->pool = r->next_free;
	c->npool--;
	sc_buf_t out = r->out, hdrs = r->hdrs;
	memset(r, 0, sizeof(*r));
	r->out = out;
	r->hdrs = hdrs;
	sc_buf_reset(&r->out);
	sc_buf_reset(&r->hdrs);
	return r;
}

static void pool_free_reqs(sc_hcli_t *c)
{
	while (c->pool) {
		sc_hcli_req_t *r = c->pool;
		c->pool = r->next_free;
		sc_buf_free(&r->out);
		sc_buf_free(&r->hdrs);
		free(r);
	}
	c->npool = 0;
}

/* Ends a request with on_done(err) and frees it. The connection has been
 * detached (released or closed) by the caller. */
static void req_finish(sc_hcli_req_t *r, int err)
{
	if (!r->cancelled && r->cbs.on_done)
		r->cbs.on_done(r, err, r->ud);
	req_free(r);
}

static void req_fail(sc_hcli_req_t *r, int err)
{
	hc_conn_t *k = r->conn;
	int reused = k && k->reused;
	r->conn = NULL;
	if (k)
		conn_close(k);
	/* A pooled connection that died before answering was stale: send the
	 * request once more on a new connection. */
	if (err == SC_EIO && reused && !r->got_bytes && !r->resent && !r->cancelled) {
		r->resent = 1;
		if (req_send(r, 1) == 0)
			return;
	}
	req_finish(r, err);
}

/* ---------------------------------------------------------------------
 * The connection timer
 *
 * One timer per connection covers every limit it has: the connect timeout,
 * a request's inactivity limit, and the idle close in the pool. Starting
 * and stopping it around each request cost four operations on libuv's timer
 * heap per proxied request; instead the state says when the connection is
 * next due (conn_deadline), and the timer is only moved when that is
 * earlier than what it is armed for. A timer that fires early re-reads the
 * state and re-arms for what is left, so in steady traffic a connection
 * touches the heap about once per idle period, not per request.
 * ------------------------------------------------------------------- */

/* When the connection is next due, in loop time; 0 = nothing to watch. */
static uint64_t conn_deadline(const hc_conn_t *k)
{
	const sc_hcli_req_t *r = k->req;
	if (k->closing)
		return 0;
	if (!r)
		return k->in_pool ? k->idle_until : 0;
	if (k->deferred_err)
		return 1; /* at once: any time already passed */
	if (!k->connected)
		return k->connect_until;
	/* Reads and writes note r->last_io; the limit runs from the last: the
	 * first-byte limit until the answer starts, then the idle one. */
	uint64_t lim = r->got_bytes && r->idle_timeout_ms ? r->idle_timeout_ms : r->timeout_ms;
	if (lim && r->reached)
		return r->last_io + lim;
	return 0;
}

static void on_conn_timer(uv_timer_t *t)
{
	hc_conn_t *k = t->data;
	k->due = 0;
	uint64_t d = conn_deadline(k), now = uv_now(k->c->loop);
	if (!d)
		return;
	if (d > now) {
		conn_arm(k);
		return;
	}
	sc_hcli_req_t *r = k->req;
	if (!r) {
		conn_close(k); /* idle too long in its pool */
		return;
	}
	req_fail(r, k->deferred_err ? k->deferred_err : SC_ELIMIT);
}

/* Makes sure the timer fires no later than the connection is due. */
static void conn_arm(hc_conn_t *k)
{
	uint64_t d = conn_deadline(k);
	if (!d || (k->due && k->due <= d))
		return;
	uint64_t now = uv_now(k->c->loop);
	uv_timer_start(&k->timer, on_conn_timer, d > now ? d - now : 0, 0);
	k->due = d > now ? d : now;
}

static void arm_timer(sc_hcli_req_t *r)
{
	r->last_io = uv_now(r->c->loop);
	if (r->conn)
		conn_arm(r->conn);
}

/* After the parser ran: finish a complete answer, or a cancelled request.
 * keep: the connection may carry another request. */
static void conn_after_parse(hc_conn_t *k, sc_hcli_req_t *r, int keep)
{
	r->in_parse = 0;
	if (r->cancelled) {
		r->conn = NULL;
		k->req = NULL;
		conn_release(k, 0);
		req_free(r);
		return;
	}
	if (!r->complete)
		return;
	r->conn = NULL;
	conn_release(k, keep);
	req_finish(r, 0);
}

/* Stores a field the way the parser callbacks do ("name\0value\0"). */
static void keep_field(sc_hcli_req_t *r, const sc_hfield_t *f)
{
	r->hdr_off[r->nhdrs][0] = r->hdrs.len;
	sc_buf_append(&r->hdrs, f->name, f->nlen);
	sc_buf_append(&r->hdrs, "", 1);
	r->hdr_off[r->nhdrs][1] = r->hdrs.len;
	sc_buf_append(&r->hdrs, f->value, f->vlen);
	sc_buf_append(&r->hdrs, "", 1);
	r->nhdrs++;
}

/* The common answer, simple (base/httphead.h) and whole in its first read,
 * is taken without http_parser (the biggest user-space cost of a proxied
 * request). Returns 1 when it was handled, 0 to leave it to the parser. */
static int read_simple(hc_conn_t *k, sc_hcli_req_t *r, const char *buf, size_t n)
{
	sc_hhead_t h;
	if (r->got_bytes || r->no_body ||
	    !sc_hhead_response(buf, n, r->c->opts.max_header_bytes, &h) ||
	    h.head_len + h.body_len != n || h.nfields > MAX_RESP_HEADERS)
		return 0;
	for (size_t i = 0; i < h.nfields; i++)
		keep_field(r, &h.fields[i]);
	r->got_bytes = 1;
	r->last_io = uv_now(r->c->loop);
	r->status = h.status;
	/* The callbacks may cancel r: it is freed after they return. */
	r->in_parse = 1;
	if (r->cbs.on_head && r->cbs.on_head(r, r->status, r->ud))
		r->cancelled = 1;
	if (!r->cancelled && h.body_len && r->cbs.on_data &&
	    r->cbs.on_data(r, buf + h.head_len, h.body_len, r->ud))
		r->cancelled = 1;
	r->complete = !r->cancelled;
	conn_after_parse(k, r, 1); /* HTTP/1.1 without Connection: keep-alive */
	return 1;
}

static void on_plain(hc_conn_t *k, sc_hcli_req_t *r, const char *data, size_t n);
static int tls_flush(hc_conn_t *k);

/* https: ciphertext in; handshake answers out; plaintext to on_plain. A
 * server whose certificate the CA does not vouch for (or does not name
 * the host dialled) fails the request with SC_EIO. */
static void tls_in(hc_conn_t *k, sc_hcli_req_t *r, const char *data, size_t n)
{
	/* Plaintext is never longer than the ciphertext it came in: one read
	 * slab's worth, handed to the parser in one call as without TLS. */
	static char plain[READ_SLAB];
	size_t have = 0;
	ssize_t m;
	if (sc_tls_feed(k->tls, data, n) < 0 || tls_flush(k) < 0) {
		req_fail(r, SC_EIO);
		return;
	}
	while (have < sizeof(plain) &&
	       (m = sc_tls_read(k->tls, plain + have, sizeof(plain) - have)) != 0) {
		if (m < 0) {
			if (have)
				break; /* hand over what came first; EOF follows */
			req_fail(r, SC_EIO);
			return;
		}
		have += (size_t)m;
	}
	if (have)
		on_plain(k, r, plain, have);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	hc_conn_t *k = st->data;
	sc_hcli_req_t *r = k->req;
	if (!r) {
		/* An idle connection has nothing to say: any byte or EOF ends it. */
		if (n != 0)
			conn_close(k);
		return;
	}
	if (n == 0)
		return;
	if (n < 0) {
		if (n == UV_EOF && r->got_bytes) {
			/* A close-delimited body ends at EOF. */
			r->in_parse = 1;
			http_parser_execute(&k->parser, &rp_settings, NULL, 0);
			r->in_parse = 0;
			if (r->complete && !r->cancelled) {
				r->conn = NULL;
				conn_release(k, 0);
				req_finish(r, 0);
				return;
			}
		}
		req_fail(r, SC_EIO);
		return;
	}
	if (k->tls) {
		tls_in(k, r, buf->base, (size_t)n);
		return;
	}
	on_plain(k, r, buf->base, (size_t)n);
}

static void on_plain(hc_conn_t *k, sc_hcli_req_t *r, const char *data, size_t n)
{
	if (read_simple(k, r, data, n))
		return;
	int first = !r->got_bytes;
	r->got_bytes = 1;
	r->last_io = uv_now(r->c->loop);
	/* The idle limit may be shorter than the first-byte one the timer is
	 * armed for: move it now, once per request. */
	if (first && r->idle_timeout_ms && (!r->timeout_ms || r->idle_timeout_ms < r->timeout_ms))
		conn_arm(k);
	r->in_parse = 1;
	size_t used = http_parser_execute(&k->parser, &rp_settings, data, n);
	enum http_errno e = HTTP_PARSER_ERRNO(&k->parser);
	if (r->cancelled || r->complete) {
		/* Bytes after a complete answer mean the server is confused:
		 * never reuse such a connection. */
		int extra = r->complete && used < n;
		conn_after_parse(k, r, !extra && http_should_keep_alive(&k->parser));
		return;
	}
	r->in_parse = 0;
	if (e != HPE_OK)
		req_fail(r, r->hdrs.len >= r->c->opts.max_header_bytes ? SC_ETOOBIG : SC_EPARSE);
}

static void on_write(uv_write_t *w, int status)
{
	hc_write_t *hw = (hc_write_t *)w;
	hc_conn_t *k = hw->conn;
	free(hw);
	if (status < 0 && status != UV_ECANCELED && k->req && !k->closing)
		req_fail(k->req, SC_EIO);
}

/* Queues what uv_try_write did not take (a copy: r->out may be resent). */
static int conn_write_rest(hc_conn_t *k, const char *data, size_t len)
{
	hc_write_t *hw = sc_xmalloc(sizeof(*hw) + len);
	hw->conn = k;
	memcpy(hw->data, data, len);
	uv_buf_t b = uv_buf_init(hw->data, (unsigned)len);
	if (uv_write(&hw->w, (uv_stream_t *)&k->tcp, &b, 1, on_write) < 0) {
		free(hw);
		return SC_EIO;
	}
	return 0;
}

/* Sends the ciphertext the session has ready. */
static int tls_flush(hc_conn_t *k)
{
	char buf[16 * 1024 + 512];
	size_t n;
	while ((n = sc_tls_take(k->tls, buf, sizeof(buf))) > 0) {
		uv_buf_t b = uv_buf_init(buf, (unsigned)n);
		int w = uv_try_write((uv_stream_t *)&k->tcp, &b, 1);
		size_t done = w > 0 ? (size_t)w : 0;
		if ((w < 0 && w != UV_EAGAIN) ||
		    (done < n && conn_write_rest(k, buf + done, n - done) < 0))
			return SC_EIO;
	}
	return 0;
}

static void conn_write_req(hc_conn_t *k, sc_hcli_req_t *r)
{
	http_parser_init(&k->parser, HTTP_RESPONSE);
	k->parser.data = k;
	if (k->pool->tls) {
		if (!k->tls || sc_tls_write(k->tls, r->out.data, r->out.len) < 0 ||
		    tls_flush(k) < 0) {
			k->deferred_err = SC_EIO;
			conn_arm(k);
			return;
		}
		if (!k->reading) {
			k->reading = 1;
			uv_read_start((uv_stream_t *)&k->tcp, on_alloc, on_read);
		}
		r->reached = 1;
		arm_timer(r);
		return;
	}
	/* Most requests fit the socket buffer: written here, no copy. */
	uv_buf_t b = uv_buf_init(r->out.data, (unsigned)r->out.len);
	int n = uv_try_write((uv_stream_t *)&k->tcp, &b, 1);
	size_t done = n > 0 ? (size_t)n : 0;
	/* A hard error (the peer reset a reused connection) fails the request
	 * now instead of queueing a write that cannot succeed. */
	if ((n < 0 && n != UV_EAGAIN) ||
	    (done < r->out.len && conn_write_rest(k, r->out.data + done, r->out.len - done) < 0)) {
		k->deferred_err = SC_EIO;
		conn_arm(k);
		return;
	}
	if (!k->reading) {
		k->reading = 1;
		uv_read_start((uv_stream_t *)&k->tcp, on_alloc, on_read);
	}
	r->reached = 1;
	arm_timer(r);
}

static void on_connect(uv_connect_t *cr, int status)
{
	hc_conn_t *k = cr->data;
	if (k->closing)
		return;
	sc_hcli_req_t *r = k->req;
	if (!r) {
		conn_close(k);
		return;
	}
	if (status < 0) {
		req_fail(r, SC_EIO);
		return;
	}
	k->connected = 1;
	/* The connect timeout is over; the request's own inactivity limit (if
	 * any) is armed by the write. A watch without one stays open (the
	 * timer may still fire once for the connect limit and find nothing). */
	uv_tcp_nodelay(&k->tcp, 1);
	conn_write_req(k, r);
}

/* Sends r on an idle pooled connection, or on a new one when fresh is set
 * or none is idle. */
static int req_send(sc_hcli_req_t *r, int fresh)
{
	sc_hcli_t *c = r->c;
	hc_pool_t *p = r->pool;
	r->status = 0;
	r->nhdrs = 0;
	r->reached = 0;
	r->hdr_state = HDR_NONE;
	sc_buf_reset(&r->hdrs);
	hc_conn_t *k = fresh ? NULL : p->idle;
	if (k) {
		pool_remove_idle(p, k);
		k->req = r;
		r->conn = k;
		conn_write_req(k, r);
		return 0;
	}
	k = conn_new(c, p);
	k->req = r;
	r->conn = k;
	struct sockaddr_in sa;
	uv_ip4_addr(p->host, p->port, &sa);
	if (uv_tcp_connect(&k->connect, &k->tcp, (const struct sockaddr *)&sa, on_connect) < 0) {
		k->deferred_err = SC_EIO;
		conn_arm(k);
		return 0;
	}
	uint64_t t = c->opts.connect_timeout_ms;
	if (r->timeout_ms && r->timeout_ms < t)
		t = r->timeout_ms;
	k->connect_until = uv_now(c->loop) + t;
	conn_arm(k);
	return 0;
}

static int build_request(sc_hcli_req_t *r, const sc_hcli_call_t *call, const char *host, int port,
                         const char *path)
{
	/* Built piece by piece: this runs for every proxied request. */
	sc_buf_t *o = &r->out;
	int rc = 0;
	rc |= sc_buf_puts(o, call->method);
	rc |= sc_buf_append(o, " ", 1);
	rc |= sc_buf_puts(o, path);
	rc |= sc_buf_puts(o, " HTTP/1.1\r\nHost: ");
	rc |= sc_buf_puts(o, host);
	rc |= sc_buf_append(o, ":", 1);
	rc |= sc_buf_putu(o, (unsigned long long)port);
	rc |= sc_buf_append(o, "\r\n", 2);
	if (rc == 0 && call->headers)
		rc = sc_buf_puts(o, call->headers);
	if (rc == 0 && (call->body || strcmp(call->method, "POST") == 0 ||
	                strcmp(call->method, "PUT") == 0 || strcmp(call->method, "PATCH") == 0)) {
		rc |= sc_buf_puts(o, "Content-Type: ");
		rc |= sc_buf_puts(o, call->ctype ? call->ctype : "application/json");
		rc |= sc_buf_puts(o, "\r\nContent-Length: ");
		rc |= sc_buf_putu(o, (unsigned long long)call->body_len);
		rc |= sc_buf_append(o, "\r\n", 2);
	}
	rc = rc ? SC_ETOOBIG : 0;
	if (rc == 0)
		rc = sc_buf_puts(&r->out, "\r\n");
	if (rc == 0 && call->body_len)
		rc = sc_buf_append(&r->out, call->body, call->body_len);
	return rc;
}

int sc_hcli_start(sc_hcli_t *c, const sc_hcli_call_t *call, sc_hcli_req_t **out)
{
	char host[MAX_HOST];
	int port;
	const char *path;
	int tls;
	int rc = parse_url(call->url, host, sizeof(host), &port, &path, &tls);
	if (rc < 0)
		return rc;
	if (tls && !c->tls)
		return SC_EINVAL; /* https:// without sc_hcli_set_tls */
	if (c->closing)
		return SC_EIO;
	sc_hcli_req_t *r = req_alloc(c);
	r->c = c;
	r->cbs = call->cbs;
	r->ud = call->ud;
	r->timeout_ms = call->timeout_ms;
	r->idle_timeout_ms = call->idle_timeout_ms;
	r->no_body = strcmp(call->method, "HEAD") == 0;
	rc = build_request(r, call, host, port, path);
	if (rc < 0) {
		req_free(r);
		return rc;
	}
	r->pool = pool_get(c, host, port, tls);
	if (out)
		*out = r;
	return req_send(r, 0);
}

void sc_hcli_set_tls(sc_hcli_t *c, sc_tls_ctx_t *ctx)
{
	c->tls = ctx;
}

void sc_hcli_cancel(sc_hcli_req_t *r)
{
	if (!r || r->cancelled)
		return;
	r->cancelled = 1;
	if (r->in_parse)
		return; /* conn_after_parse frees it */
	hc_conn_t *k = r->conn;
	r->conn = NULL;
	if (k) {
		k->req = NULL;
		conn_release(k, 0);
	}
	req_free(r);
}

int sc_hcli_reached(const sc_hcli_req_t *r)
{
	return r->reached;
}

int sc_hcli_status(const sc_hcli_req_t *r)
{
	return r->status;
}

const char *sc_hcli_header(const sc_hcli_req_t *r, const char *name)
{
	return sc_hhead_lookup(r->hdrs.data, (const size_t(*)[2])r->hdr_off, r->nhdrs, name);
}

/* ---------------------------------------------------------------------
 * Client
 * ------------------------------------------------------------------- */

sc_hcli_t *sc_hcli_new(uv_loop_t *loop, const sc_hcli_opts_t *opts)
{
	sc_hcli_t *c = sc_calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->loop = loop;
	c->opts.max_idle_per_host = 64;
	c->opts.max_header_bytes = 16 * 1024;
	c->opts.idle_close_ms = 30000;
	c->opts.connect_timeout_ms = 2000;
	if (opts) {
		if (opts->max_idle_per_host)
			c->opts.max_idle_per_host = opts->max_idle_per_host;
		if (opts->max_header_bytes)
			c->opts.max_header_bytes = opts->max_header_bytes;
		if (opts->idle_close_ms)
			c->opts.idle_close_ms = opts->idle_close_ms;
		if (opts->connect_timeout_ms)
			c->opts.connect_timeout_ms = opts->connect_timeout_ms;
	}
	return c;
}

void sc_hcli_close(sc_hcli_t *c)
{
	if (!c)
		return;
	c->closing = 1;
	pool_free_reqs(c);
	while (c->conns) {
		hc_conn_t *k = c->conns;
		sc_hcli_req_t *r = k->req;
		if (r) {
			r->cancelled = 1;
			r->conn = NULL;
			if (!r->in_parse)
				req_free(r);
		}
		conn_close(k);
	}
	if (c->nconns == 0) {
		while (c->pools) {
			hc_pool_t *p = c->pools;
			c->pools = p->next;
			free(p);
		}
		free(c);
	}
}
