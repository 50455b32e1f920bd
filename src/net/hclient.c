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
 * running has unwound (see conn_after_parse).
 *
 * Every request that started ends with exactly one on_done: req_done is
 * the only place that calls it, and its `done` flag makes a second call
 * (a cancel from inside on_done, a close after a cancel) a no-op. */
#include "net/hclient.h"
#include "net/hurl.h"
#include "net/tls.h"
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/httphead.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"

#include "net/hclient_int.h"

static void conn_close(hc_conn_t *k);
static void conn_arm(hc_conn_t *k);
static void req_fail(sc_hcli_req_t *r, int err);
static int req_send(sc_hcli_req_t *r, int fresh);
static void on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res);
static int conn_next_addr(hc_conn_t *k);

/* ---------------------------------------------------------------------
 * URLs and pools
 * ------------------------------------------------------------------- */

int sc_hcli_parse_url(const char *url, char *host, size_t hostsz, int *port, const char **path)
{
	sc_hurl_t u;
	if (sc_hurl_parse(url, &u) < 0 || strlen(u.host) >= hostsz)
		return SC_EINVAL;
	memcpy(host, u.host, strlen(u.host) + 1);
	*port = u.port;
	*path = u.path;
	return 0;
}

static hc_pool_t *pool_get(sc_hcli_t *c, const sc_hurl_t *u)
{
	for (hc_pool_t *p = c->pools; p; p = p->next)
		if (p->port == u->port && p->tls == u->tls && strcmp(p->host, u->host) == 0)
			return p;
	hc_pool_t *p = sc_xcalloc(1, sizeof(*p));
	memcpy(p->host, u->host, sizeof(p->host));
	sc_hurl_authority(u, p->authority, sizeof(p->authority));
	p->port = u->port;
	p->tls = u->tls;
	p->literal = u->literal;
	p->addr = u->addr;
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

/* One of the connection's handles (or its resolution) is over; the last
 * frees it, and the client too once it is closing and this was the last. */
static void conn_unref(hc_conn_t *k)
{
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

static void on_conn_handle_closed(uv_handle_t *h)
{
	conn_unref(h->data);
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
	if (k->resolving)
		uv_cancel((uv_req_t *)&k->gai); /* on_resolved still runs */
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
	k->tcp.data = k->timer.data = k->connect.data = k->gai.data = k;
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

/* Calls on_done once in the request's life (the flag is set first: a
 * cancel from inside on_done is then a no-op). */
static void req_done(sc_hcli_req_t *r, int err)
{
	if (r->done)
		return;
	r->done = 1;
	if (r->cbs.on_done)
		r->cbs.on_done(r, err, r->ud);
}

/* Ends a request with on_done(err) and frees it. The connection has been
 * detached (released or closed) by the caller. */
static void req_finish(sc_hcli_req_t *r, int err)
{
	req_done(r, r->cancelled ? SC_ECANCELED : err);
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
	/* The TLS handshake is part of connecting: a server that takes the
	 * connection and never finishes it is cut off at the connect limit
	 * even when the request has no limit of its own (a watch). */
	if (k->tls && !r->timeout_ms && !sc_tls_established(k->tls))
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
	if (!k->connected && conn_next_addr(k))
		return; /* no answer from that address (or no dial): the next one */
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
		req_finish(r, SC_ECANCELED); /* on_done ran already if cancelled by the API */
		return;
	}
	if (!r->complete)
		return;
	r->conn = NULL;
	conn_release(k, keep);
	req_finish(r, 0);
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
		sc__hc_keep_field(r, &h.fields[i]);
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

static int on_plain(hc_conn_t *k, sc_hcli_req_t *r, const char *data, size_t n);
static int tls_flush(hc_conn_t *k);

/* The server closed (clean: EOF, or TLS close_notify) or the connection
 * broke: a close-delimited body ends there, anything else failed. */
static void conn_eof(hc_conn_t *k, sc_hcli_req_t *r, int clean)
{
	if (clean && r->got_bytes) {
		r->in_parse = 1;
		http_parser_execute(&k->parser, &sc__hc_rp_settings, NULL, 0);
		r->in_parse = 0;
		if (r->complete && !r->cancelled) {
			r->conn = NULL;
			conn_release(k, 0);
			req_finish(r, 0);
			return;
		}
	}
	req_fail(r, SC_EIO);
}

/* https: ciphertext in; handshake answers out; plaintext to on_plain. A
 * server whose certificate the CA does not vouch for (or does not name
 * the host dialled) fails the request with SC_EIO.
 *
 * Everything the session can decrypt now is handed over before returning:
 * a feed may complete more plaintext than one slab holds (a record left
 * partial by the last read plus a whole slab of new ones), and what stayed
 * inside OpenSSL would only come out with the next socket read, which for
 * a finished answer never comes. */
static void tls_in(hc_conn_t *k, sc_hcli_req_t *r, const char *data, size_t n)
{
	static char plain[READ_SLAB];
	if (sc_tls_feed(k->tls, data, n) < 0 || tls_flush(k) < 0) {
		req_fail(r, SC_EIO);
		return;
	}
	for (;;) {
		size_t have = 0;
		ssize_t m = 0;
		while (have < sizeof(plain) &&
		       (m = sc_tls_read(k->tls, plain + have, sizeof(plain) - have)) > 0)
			have += (size_t)m;
		/* Reading may answer the server (a TLS 1.3 KeyUpdate). */
		if (tls_flush(k) < 0)
			m = SC_EIO;
		if (have && !on_plain(k, r, plain, have))
			return; /* the answer ended (or failed) with these bytes */
		if (m < 0) {
			conn_eof(k, r, sc_tls_closed(k->tls));
			return;
		}
		if (have < sizeof(plain))
			return; /* all read: the rest comes with the next bytes */
	}
}

/* An idle pooled connection has nothing to say: plaintext, EOF or an error
 * ends it. Over TLS a server may still send records that are not data (a
 * TLS 1.3 session ticket after the first answer, a KeyUpdate): those are
 * taken in (and answered) and the connection stays pooled. */
static void idle_in(hc_conn_t *k, ssize_t n, const uv_buf_t *buf)
{
	char one[1];
	if (n > 0 && k->tls && sc_tls_feed(k->tls, buf->base, (size_t)n) == 0 &&
	    tls_flush(k) == 0 && sc_tls_read(k->tls, one, sizeof(one)) == 0 && tls_flush(k) == 0)
		return;
	conn_close(k);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	hc_conn_t *k = st->data;
	sc_hcli_req_t *r = k->req;
	if (!r) {
		if (n != 0)
			idle_in(k, n, buf);
		return;
	}
	if (n == 0)
		return;
	if (n < 0) {
		conn_eof(k, r, n == UV_EOF);
		return;
	}
	if (k->tls) {
		tls_in(k, r, buf->base, (size_t)n);
		return;
	}
	on_plain(k, r, buf->base, (size_t)n);
}

/* Returns 1 while r goes on reading, 0 once it has ended (complete,
 * cancelled or failed: r may be freed, k pooled, closed or reused). */
static int on_plain(hc_conn_t *k, sc_hcli_req_t *r, const char *data, size_t n)
{
	if (read_simple(k, r, data, n))
		return 0;
	int first = !r->got_bytes;
	r->got_bytes = 1;
	r->last_io = uv_now(r->c->loop);
	/* The idle limit may be shorter than the first-byte one the timer is
	 * armed for: move it now, once per request. */
	if (first && r->idle_timeout_ms && (!r->timeout_ms || r->idle_timeout_ms < r->timeout_ms))
		conn_arm(k);
	r->in_parse = 1;
	size_t used = http_parser_execute(&k->parser, &sc__hc_rp_settings, data, n);
	enum http_errno e = HTTP_PARSER_ERRNO(&k->parser);
	if (r->cancelled || r->complete) {
		/* Bytes after a complete answer mean the server is confused:
		 * never reuse such a connection. */
		int extra = r->complete && used < n;
		conn_after_parse(k, r, !extra && http_should_keep_alive(&k->parser));
		return 0;
	}
	r->in_parse = 0;
	if (e == HPE_OK)
		return 1;
	req_fail(r, r->hdrs.len >= r->c->opts.max_header_bytes ? SC_ETOOBIG : SC_EPARSE);
	return 0;
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

/* Hands the request's bytes to the connection: 0, or SC_EIO when they
 * cannot go (a TLS session that failed, a hard socket error). */
static int conn_send(hc_conn_t *k, sc_hcli_req_t *r)
{
	if (k->pool->tls) {
		if (!k->tls || sc_tls_write(k->tls, r->out.data, r->out.len) < 0 ||
		    tls_flush(k) < 0)
			return SC_EIO;
		return 0;
	}
	/* Most requests fit the socket buffer: written here, no copy. */
	uv_buf_t b = uv_buf_init(r->out.data, (unsigned)r->out.len);
	int n = uv_try_write((uv_stream_t *)&k->tcp, &b, 1);
	size_t done = n > 0 ? (size_t)n : 0;
	/* A hard error (the peer reset a reused connection) fails the request
	 * now instead of queueing a write that cannot succeed. */
	if ((n < 0 && n != UV_EAGAIN) ||
	    (done < r->out.len && conn_write_rest(k, r->out.data + done, r->out.len - done) < 0))
		return SC_EIO;
	return 0;
}

static void conn_write_req(hc_conn_t *k, sc_hcli_req_t *r)
{
	http_parser_init(&k->parser, HTTP_RESPONSE);
	k->parser.data = k;
	if (conn_send(k, r) < 0) {
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
		if (!conn_next_addr(k))
			req_fail(r, SC_EIO);
		return;
	}
	k->connected = 1;
	if (!k->pool->literal)
		k->pool->good = k->addr;
	/* The connect timeout is over; the request's own inactivity limit (if
	 * any) is armed by the write. A watch without one stays open (the
	 * timer may still fire once for the connect limit and find nothing). */
	uv_tcp_nodelay(&k->tcp, 1);
	conn_write_req(k, r);
}

/* Connects a new connection to addr; a failure to start is reported from
 * the timer (callbacks never run inside sc_hcli_start). */
static void conn_dial(hc_conn_t *k, const struct sockaddr *addr)
{
	k->dialled = 1;
	if (uv_tcp_connect(&k->connect, &k->tcp, addr, on_connect) < 0)
		k->deferred_err = SC_EIO;
	conn_arm(k);
}

/* The connect limit of a new connection: it covers resolving a name too. */
static void conn_limit(hc_conn_t *k, const sc_hcli_req_t *r)
{
	uint64_t t = k->c->opts.connect_timeout_ms;
	if (r->timeout_ms && r->timeout_ms < t)
		t = r->timeout_ms;
	k->connect_until = uv_now(k->c->loop) + t;
}

/* Keeps a name's answer (up to HC_MAX_ADDRS stream addresses). */
static void pool_keep_addrs(hc_pool_t *p, sc_hcli_t *c, const struct addrinfo *res)
{
	p->naddrs = p->good = 0;
	for (; res && p->naddrs < HC_MAX_ADDRS; res = res->ai_next) {
		if (res->ai_addrlen > sizeof(p->addrs[0]))
			continue;
		memset(&p->addrs[p->naddrs], 0, sizeof(p->addrs[0]));
		memcpy(&p->addrs[p->naddrs++], res->ai_addr, res->ai_addrlen);
	}
	p->addrs_until = p->naddrs ? uv_now(c->loop) + c->opts.dns_ttl_ms : 0;
}

/* Dials the name's address i (of the pool's answer) for k. */
static void conn_dial_addr(hc_conn_t *k, size_t i)
{
	k->addr = i;
	conn_dial(k, (const struct sockaddr *)&k->pool->addrs[i]);
}

/* k's connect failed (refused, unreachable, no answer in time): its
 * request moves to a new connection to the name's next address, each
 * tried once. Returns 0 when there is none (then every address failed:
 * the next connection asks the resolver again). */
static int conn_next_addr(hc_conn_t *k)
{
	hc_pool_t *p = k->pool;
	sc_hcli_req_t *r = k->req;
	if (p->literal || !k->dialled || k->c->closing)
		return 0;
	if (k->tries + 1 >= p->naddrs) {
		p->addrs_until = 0;
		return 0;
	}
	hc_conn_t *n = conn_new(k->c, p);
	n->tries = k->tries + 1;
	r->conn = NULL;
	conn_close(k);
	n->req = r;
	r->conn = n;
	conn_limit(n, r);
	conn_dial_addr(n, (k->addr + 1) % p->naddrs);
	return 1;
}

/* A name resolved (or not): dial its first address. A resolver that does
 * not answer is cut off by the connect limit (the connection closes and
 * uv_cancel makes this run with UV_EAI_CANCELED). */
static void on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res)
{
	hc_conn_t *k = g->data;
	k->resolving = 0;
	if (k->closing || !k->req) {
		uv_freeaddrinfo(res);
		if (!k->closing)
			conn_close(k);
		conn_unref(k);
		return;
	}
	k->handles--; /* the tcp and timer handles still hold it */
	if (status == 0)
		pool_keep_addrs(k->pool, k->c, res);
	if (status < 0 || !k->pool->naddrs)
		req_fail(k->req, SC_EIO);
	else
		conn_dial_addr(k, 0);
	uv_freeaddrinfo(res);
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
	conn_limit(k, r);
	if (p->literal) {
		conn_dial(k, (const struct sockaddr *)&p->addr);
		return 0;
	}
	if (p->naddrs && uv_now(c->loop) < p->addrs_until) {
		conn_dial_addr(k, p->good < p->naddrs ? p->good : 0);
		return 0;
	}
	c->resolves++;
	char port[8];
	snprintf(port, sizeof(port), "%d", p->port);
	struct addrinfo hints = {
	    .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG};
	if (uv_getaddrinfo(c->loop, &k->gai, on_resolved, p->host, port, &hints) < 0) {
		k->deferred_err = SC_EIO;
		conn_arm(k);
		return 0;
	}
	k->resolving = 1;
	k->handles++;
	conn_arm(k);
	return 0;
}

static int build_request(sc_hcli_req_t *r, const sc_hcli_call_t *call, const hc_pool_t *p,
                         const char *path)
{
	/* Built piece by piece: this runs for every proxied request. */
	sc_buf_t *o = &r->out;
	int rc = 0;
	rc |= sc_buf_puts(o, call->method);
	rc |= sc_buf_append(o, " ", 1);
	rc |= sc_buf_puts(o, path);
	rc |= sc_buf_puts(o, " HTTP/1.1\r\nHost: ");
	rc |= sc_buf_puts(o, p->authority);
	rc |= sc_buf_append(o, "\r\n", 2);
	if (r->c->opts.user_agent) {
		rc |= sc_buf_puts(o, "User-Agent: ");
		rc |= sc_buf_puts(o, r->c->opts.user_agent);
		rc |= sc_buf_append(o, "\r\n", 2);
	}
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
	sc_hurl_t u;
	int rc = sc_hurl_parse(call->url, &u);
	if (rc < 0)
		return rc;
	if (u.tls && !c->tls)
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
	r->pool = pool_get(c, &u);
	rc = build_request(r, call, r->pool, u.path);
	if (rc < 0) {
		req_free(r);
		return rc;
	}
	if (out)
		*out = r;
	return req_send(r, 0);
}

void sc__hcli_resolved(sc_hcli_t *c, const char *url, const struct sockaddr_storage *addrs,
                       size_t n)
{
	sc_hurl_t u;
	if (sc_hurl_parse(url, &u) < 0 || u.literal)
		return;
	hc_pool_t *p = pool_get(c, &u);
	p->naddrs = p->good = 0;
	for (size_t i = 0; i < n && i < HC_MAX_ADDRS; i++)
		p->addrs[p->naddrs++] = addrs[i];
	p->addrs_until = uv_now(c->loop) + c->opts.dns_ttl_ms;
}

void sc_hcli_set_tls(sc_hcli_t *c, sc_tls_ctx_t *ctx)
{
	c->tls = ctx;
}

void sc_hcli_cancel(sc_hcli_req_t *r)
{
	if (!r || r->cancelled || r->done)
		return;
	r->cancelled = 1;
	if (!r->in_parse) {
		/* Inside a callback of r the connection stays attached until the
		 * parser unwinds (conn_after_parse releases it and frees r). */
		hc_conn_t *k = r->conn;
		r->conn = NULL;
		if (k) {
			k->req = NULL;
			conn_release(k, 0);
		}
	}
	req_done(r, SC_ECANCELED);
	if (!r->in_parse)
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
	c->opts.dns_ttl_ms = 10000;
	if (opts) {
		if (opts->max_idle_per_host)
			c->opts.max_idle_per_host = opts->max_idle_per_host;
		if (opts->max_header_bytes)
			c->opts.max_header_bytes = opts->max_header_bytes;
		if (opts->idle_close_ms)
			c->opts.idle_close_ms = opts->idle_close_ms;
		if (opts->connect_timeout_ms)
			c->opts.connect_timeout_ms = opts->connect_timeout_ms;
		if (opts->dns_ttl_ms)
			c->opts.dns_ttl_ms = opts->dns_ttl_ms;
		c->opts.user_agent = opts->user_agent;
	}
	return c;
}

void sc_hcli_close(sc_hcli_t *c)
{
	if (!c)
		return;
	c->closing = 1;
	pool_free_reqs(c);
	/* Every request in flight is attached to a connection: each ends with
	 * on_done(SC_ECANCELED). Those callbacks may cancel other requests
	 * (their connections leave the list) but cannot start new ones. */
	while (c->conns) {
		hc_conn_t *k = c->conns;
		sc_hcli_req_t *r = k->req;
		conn_close(k);
		if (!r)
			continue;
		r->cancelled = 1;
		r->conn = NULL;
		req_done(r, SC_ECANCELED);
		if (!r->in_parse)
			req_free(r);
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
