/* HTTP/1.1 server: connections, parsing, timers, routing (output is in
 * http_out.c, connection caps in http_limits.c).
 *
 * Flow of one connection: libuv reads bytes into conn->in (bounded); the
 * parser runs over them until a request is complete, then pauses so that
 * exactly one request is in flight. The handler answers; once the answer is
 * queued, parsing resumes on the bytes that are left (pipelined requests).
 * Reading continues while a request is in flight, so a client that closes
 * a long-lived stream is noticed, but stops when the input buffer is full. */
#include "net/http.h"
#include "base/log.h"
#include "base/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <arpa/inet.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/httphead.h"
#include "net/http_int.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"

static void conn_close(conn_t *c);
static void process(conn_t *c);
static void linger(conn_t *c, uint64_t ms);
static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_idle(uv_timer_t *t);
static void idle_touch(conn_t *c);
static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

static void respond_error_close(conn_t *c, int status, const char *reason, const char *msg)
{
	sc__http_refuse(c, status, reason, msg, 5000);
}

/* ---------------------------------------------------------------------
 * Parser callbacks
 * ------------------------------------------------------------------- */

static void req_reset(sc_http_req_t *r)
{
	sc_buf_reset(&r->url);
	sc_buf_reset(&r->hdrs);
	sc_buf_reset(&r->body);
	r->query = NULL;
	r->nhdrs = 0;
	r->hdr_state = HDR_NONE;
	r->method[0] = '\0';
	r->route = NULL;
	r->streaming = 0;
	r->status = 0;
	r->on_close = NULL;
	r->on_drain = NULL;
	r->xhdrs[0] = '\0';
	r->xlen = 0;
	r->dep_rev = 0;
}

static int on_message_begin(http_parser *p)
{
	conn_t *c = p->data;
	req_reset(&c->req);
	/* Only the observer reads the start time: no clock read otherwise. */
	c->req.start_ns = c->srv->observer ? uv_hrtime() : 0;
	c->mid_message = 1;
	return 0;
}

/* Header bytes (url + fields + values) share one budget. */
static int header_budget_ok(conn_t *c, size_t more)
{
	size_t used = c->req.url.len + c->req.hdrs.len;
	if (used + more > c->srv->lim.max_header_bytes) {
		c->err = ERR_HEADERS;
		return 0;
	}
	return 1;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	conn_t *c = p->data;
	if (!header_budget_ok(c, len) || sc_buf_append(&c->req.url, at, len) < 0)
		return 1;
	return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
	conn_t *c = p->data;
	sc_http_req_t *r = &c->req;
	if (!header_budget_ok(c, len + 2))
		return 1;
	if (r->hdr_state != HDR_FIELD) {
		if (r->hdr_state == HDR_VALUE)
			sc_buf_append(&r->hdrs, "", 1); /* end the previous value */
		if (r->nhdrs == MAX_HEADERS) {
			c->err = ERR_HEADERS;
			return 1;
		}
		r->hdr_off[r->nhdrs][0] = r->hdrs.len;
		r->nhdrs++;
	}
	r->hdr_state = HDR_FIELD;
	return sc_buf_append(&r->hdrs, at, len) < 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
	conn_t *c = p->data;
	sc_http_req_t *r = &c->req;
	if (!header_budget_ok(c, len + 2))
		return 1;
	if (r->hdr_state != HDR_VALUE) {
		sc_buf_append(&r->hdrs, "", 1); /* end the field name */
		r->hdr_off[r->nhdrs - 1][1] = r->hdrs.len;
	}
	r->hdr_state = HDR_VALUE;
	return sc_buf_append(&r->hdrs, at, len) < 0;
}

static int on_headers_complete(http_parser *p)
{
	conn_t *c = p->data;
	sc_http_req_t *r = &c->req;
	if (r->hdr_state == HDR_VALUE)
		sc_buf_append(&r->hdrs, "", 1);
	else if (r->hdr_state == HDR_FIELD) { /* a field without a value */
		sc_buf_append(&r->hdrs, "", 1);
		r->hdr_off[r->nhdrs - 1][1] = r->hdrs.len;
		sc_buf_append(&r->hdrs, "", 1);
	}
	r->hdr_state = HDR_NONE;
	c->head_at = uv_now(c->srv->loop); /* the body deadline runs from here */
	/* Refuse a declared oversized body before reading any of it. */
	if ((p->flags & F_CONTENTLENGTH) && p->content_length > c->srv->lim.max_body_bytes) {
		c->err = ERR_BODY;
		return -1;
	}
	/* Method names are short constants (the longest, MKCALENDAR, is 10). */
	const char *m = http_method_str(p->method);
	size_t ml = strnlen(m, sizeof(r->method) - 1);
	memcpy(r->method, m, ml);
	r->method[ml] = '\0';
	const char *expect = sc_http_header(r, "Expect");
	if (expect && strcasecmp(expect, "100-continue") == 0) {
		uv_buf_t part = uv_buf_init("HTTP/1.1 100 Continue\r\n\r\n", 25);
		sc__http_write(c, &part, 1);
	}
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	conn_t *c = p->data;
	int rc = sc_buf_append(&c->req.body, at, len);
	if (rc == SC_ETOOBIG)
		c->err = ERR_BODY;
	return rc < 0;
}

static int on_message_complete(http_parser *p)
{
	conn_t *c = p->data;
	c->keep_alive = http_should_keep_alive(p);
	c->mid_message = 0;
	/* One request at a time: the rest of the input waits. */
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---------------------------------------------------------------------
 * Dispatch
 * ------------------------------------------------------------------- */

static const route_t *find_route(const sc_http_server_t *s, const char *method, const char *path)
{
	const route_t *best = NULL;
	for (size_t i = 0; i < s->nroutes; i++) {
		const route_t *rt = &s->routes[i];
		/* First bytes first: most routes differ there, and a daemon
		 * has a dozen routes to try for every request. */
		if (rt->method && (rt->method[0] != method[0] || strcmp(rt->method, method) != 0))
			continue;
		if ((rt->plen > 1 && path[0] && path[1] != rt->prefix[1]) ||
		    strncmp(path, rt->prefix, rt->plen) != 0)
			continue;
		if (!best || rt->plen > best->plen)
			best = rt;
	}
	return best;
}

static void dispatch(conn_t *c)
{
	sc_http_req_t *r = &c->req;
	char *q = strchr(r->url.data ? r->url.data : "", '?');
	if (!r->url.data)
		sc_buf_append(&r->url, "/", 1);
	if (q) {
		*q = '\0';
		r->query = q + 1;
	} else {
		r->query = "";
	}
	c->busy = 1;
	c->req_begin = c->head_at = 0; /* complete: no deadline while it is handled */
	if (c->srv->gate) {
		c->srv->gate(r, c->srv->gate_ud);
		return;
	}
	sc_http_dispatch(r);
}

void sc_http_dispatch(sc_http_req_t *r)
{
	conn_t *c = r->conn;
	r->on_close = NULL; /* the gate's, while the request waited */
	const route_t *rt = find_route(c->srv, r->method, r->url.data);
	if (!rt) {
		static const char nf[] = "{\"error\":{\"code\":404,\"reason\":\"NotFound\","
		                         "\"message\":\"no such path\",\"field\":\"\"}}";
		sc_http_respond(r, 404, "application/json", nf, sizeof(nf) - 1);
		return;
	}
	r->route = rt->prefix;
	rt->fn(r, rt->ud);
}

/* The common request, simple (base/httphead.h) and at the start of the
 * input, is taken without http_parser: the parser's byte-by-byte state
 * machine and a callback per piece were the biggest user-space cost of a
 * proxied request. Anything else (other framing, a head too big, a body
 * over the limit, odd syntax) goes to the parser, which answers errors as
 * before. Returns 1 when a request was dispatched, 0 to use the parser,
 * -1 when a simple request's body has not all arrived yet. */
static int take_simple(conn_t *c)
{
	sc_http_server_t *s = c->srv;
	sc_hhead_t h;
	if (c->mid_message ||
	    !sc_hhead_request(c->in.data, c->in.len, s->lim.max_header_bytes, &h) ||
	    h.body_len > s->lim.max_body_bytes || h.nfields > MAX_HEADERS)
		return 0;
	if (c->in.len < h.head_len + h.body_len) {
		if (!c->head_at)
			c->head_at = uv_now(s->loop); /* the body deadline runs from here */
		return -1;
	}
	sc_http_req_t *r = &c->req;
	req_reset(r);
	r->start_ns = s->observer ? uv_hrtime() : 0;
	memcpy(r->method, h.method, h.mlen); /* at most 7 bytes: a known method */
	r->method[h.mlen] = '\0';
	int rc = sc_buf_append(&r->url, h.target, h.tlen);
	for (size_t i = 0; i < h.nfields; i++) {
		const sc_hfield_t *f = &h.fields[i];
		r->hdr_off[i][0] = r->hdrs.len;
		rc |= sc_buf_append(&r->hdrs, f->name, f->nlen);
		rc |= sc_buf_append(&r->hdrs, "", 1);
		r->hdr_off[i][1] = r->hdrs.len;
		rc |= sc_buf_append(&r->hdrs, f->value, f->vlen);
		rc |= sc_buf_append(&r->hdrs, "", 1);
	}
	r->nhdrs = h.nfields;
	rc |= sc_buf_append(&r->body, c->in.data + h.head_len, h.body_len);
	if (rc)
		sc_oom();  /* within the limits checked above: only out of memory */
	c->keep_alive = 1; /* HTTP/1.1 without Connection */
	sc_buf_consume(&c->in, h.head_len + h.body_len);
	dispatch(c);
	return 1;
}

/* Parses buffered input, one request at a time, until input runs out or a
 * request is waiting for its handler. */
static void process(conn_t *c)
{
	c->processing = 1;
	while (!c->busy && !c->closing && !c->close_after && !c->lingering && c->in.len > 0) {
		int t = take_simple(c);
		if (t > 0)
			continue;
		if (t < 0)
			break;
		size_t n = http_parser_execute(&c->parser, &settings, c->in.data, c->in.len);
		sc_buf_consume(&c->in, n);
		enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
		if (e == HPE_PAUSED) {
			http_parser_pause(&c->parser, 0);
			dispatch(c);
			continue;
		}
		if (e != HPE_OK) {
			if (c->err == ERR_BODY)
				respond_error_close(c, 413, "TooLarge", "request body too large");
			else if (c->err == ERR_HEADERS)
				respond_error_close(c, 431, "TooLarge",
				                    "request headers too large");
			else
				respond_error_close(c, 400, "BadRequest", "malformed HTTP request");
			break;
		}
	}
	c->processing = 0;
	if (c->lingering)
		return;
	/* Bytes of the next request wait (pipelined, or the start of one):
	 * its deadline runs from now. */
	if (!c->busy && c->in.len > 0 && !c->req_begin)
		c->req_begin = uv_now(c->srv->loop);
	if (!c->busy && !c->closing)
		idle_touch(c);
	if (!c->closing && !c->close_after && !c->reading) {
		c->reading = 1;
		uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
	}
}

/* ---------------------------------------------------------------------
 * Connections
 * ------------------------------------------------------------------- */

static void server_free(sc_http_server_t *s)
{
	sc__http_clients_free(s);
	free(s);
}

static void on_handle_closed(uv_handle_t *h)
{
	conn_t *c = h->data;
	if (--c->handles_open > 0)
		return;
	sc_http_server_t *s = c->srv;
	sc_tls_free(c->tls);
	sc_buf_free(&c->in);
	sc_buf_free(&c->req.url);
	sc_buf_free(&c->req.hdrs);
	sc_buf_free(&c->req.body);
	free(c);
	s->nconns--;
	if (s->closing && s->nconns == 0 && !s->listener_open)
		server_free(s);
}

static void conn_close(conn_t *c)
{
	if (c->closing)
		return;
	c->closing = 1;
	sc_http_req_t *r = &c->req;
	/* A stream's close callback, or one a deferred answer registered. */
	if (c->busy && r->on_close) {
		sc_http_close_fn fn = r->on_close;
		r->on_close = NULL;
		fn(r, r->close_ud);
	}
	sc_http_server_t *s = c->srv;
	if (c->holding) {
		c->holding = 0;
		s->nholding--;
	}
	sc__http_uncount(c);
	sc_buf_free(&c->held);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
	uv_close((uv_handle_t *)&c->idle, on_handle_closed);
}

/* Connection timers. One libuv timer per connection covers every limit:
 * the request head's deadline, the body's, the keep-alive idle limit, and
 * the lingering close after an error answer. Restarting a timer for each
 * request (a stop and a start in libuv's timer heap) cost more than the
 * rest of a request's bookkeeping, so the timer is never set further away
 * than the server's tick (the shorter of the head and body limits): a
 * request that begins on an idle connection is looked at in time, and
 * when the timer fires it acts on the deadline of the connection's state
 * or sleeps until it. The deadlines run from when a request began, not
 * from its last byte, so a client trickling a header line now and then
 * (slowloris) is cut off like a silent one. */
enum { DL_NONE, DL_IDLE, DL_HEAD, DL_BODY };

static int conn_deadline(const conn_t *c, uint64_t *at)
{
	const sc_http_limits_t *l = &c->srv->lim;
	if (c->busy)
		return DL_NONE;
	if (c->req_begin) {
		if (c->head_at) {
			*at = c->head_at + l->body_timeout_ms;
			return DL_BODY;
		}
		*at = c->req_begin + l->header_timeout_ms;
		return DL_HEAD;
	}
	if (!l->idle_timeout_ms)
		return DL_NONE;
	*at = c->last_active + l->idle_timeout_ms;
	return DL_IDLE;
}

static void timer_sleep(conn_t *c, uint64_t ms)
{
	uint64_t tick = c->srv->tick_ms;
	uv_timer_start(&c->idle, on_idle, ms < tick ? ms : tick, 0);
}

/* A request ended (or the connection began): the idle limit runs from now. */
static void idle_touch(conn_t *c)
{
	c->last_active = uv_now(c->srv->loop);
	if (!uv_is_active((uv_handle_t *)&c->idle))
		timer_sleep(c, c->srv->tick_ms);
}

/* Stops counting c against the caps and closes it after ms (at EOF from
 * the client, sooner), discarding its input meanwhile. */
static void linger(conn_t *c, uint64_t ms)
{
	if (!c->lingering) {
		c->lingering = 1;
		sc__http_uncount(c);
	}
	uv_timer_start(&c->idle, on_idle, ms, 0);
}

static void on_idle(uv_timer_t *t)
{
	conn_t *c = t->data;
	const sc_http_limits_t *l = &c->srv->lim;
	char msg[128];
	uint64_t at = 0, now = uv_now(c->srv->loop);
	if (c->lingering) {
		conn_close(c); /* the grace after an error answer is over */
		return;
	}
	int kind = conn_deadline(c, &at);
	if (kind == DL_NONE) {
		/* A stream stops the timer; process() restarts it when the
		 * stream ends. Any other request with its handler is looked at
		 * again later. */
		if (!(c->busy && c->req.streaming))
			timer_sleep(c, c->srv->tick_ms);
		return;
	}
	if (at > now) {
		timer_sleep(c, at - now);
		return;
	}
	if (kind == DL_IDLE || !c->got_bytes) {
		conn_close(c); /* idle, or never said anything: nothing to answer */
		return;
	}
	if (kind == DL_HEAD)
		snprintf(msg, sizeof(msg), "request head not received within %llu ms",
		         (unsigned long long)l->header_timeout_ms);
	else
		snprintf(msg, sizeof(msg), "request body not received within %llu ms",
		         (unsigned long long)l->body_timeout_ms);
	c->srv->st.timeouts++;
	respond_error_close(c, 408, "Timeout", msg);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	static char slab[64 * 1024]; /* one loop thread: data is copied out at once */
	(void)h;
	(void)hint;
	*buf = uv_buf_init(slab, sizeof(slab));
}

/* Input cap: a full request (headers and body) plus one read's worth, so a
 * pipelining client is throttled instead of buffered without limit. */
static size_t in_cap(const sc_http_server_t *s)
{
	return s->lim.max_header_bytes + s->lim.max_body_bytes + 64 * 1024;
}

/* TLS: ciphertext in, the handshake's answers out, plaintext into c->in as
 * if it had come from the socket. A session that fails (a client that
 * does not trust our certificate, a plain-HTTP client, a client without
 * the certificate mTLS requires) closes the connection. */
static void tls_input(conn_t *c, const char *data, size_t len)
{
	char plain[16 * 1024];
	ssize_t n;
	int bad = sc_tls_feed(c->tls, data, len) < 0;
	if (sc__http_tls_flush(c) < 0 || bad) {
		sc_log_debug("TLS session refused: %s", sc_tls_error(c->tls));
		conn_close(c);
		return;
	}
	while ((n = sc_tls_read(c->tls, plain, sizeof(plain))) > 0) {
		if (sc_buf_append(&c->in, plain, (size_t)n) < 0) {
			/* Past the input cap (see on_read): the client sends far
			 * ahead of a busy request. */
			conn_close(c);
			return;
		}
	}
	if (n < 0 && !c->busy) {
		conn_close(c); /* closed by the peer, or a bad record */
		return;
	}
	if (c->busy && c->in.len + 64 * 1024 > in_cap(c->srv)) {
		uv_read_stop((uv_stream_t *)&c->tcp);
		c->reading = 0;
	}
	if (!c->processing)
		process(c);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
	conn_t *c = st->data;
	if (c->lingering) {
		if (nread < 0)
			conn_close(c);
		return;
	}
	if (nread == UV_EOF && !c->busy) {
		/* A half-closed client still gets the answers already queued. */
		uv_read_stop(st);
		c->reading = 0;
		c->close_after = 1;
		if (c->pending_out == 0)
			conn_close(c);
		return;
	}
	if (nread < 0) {
		conn_close(c);
		return;
	}
	if (nread == 0)
		return;
	c->got_bytes = 1;
	if (c->tls) {
		tls_input(c, buf->base, (size_t)nread);
		return;
	}
	if (sc_buf_append(&c->in, buf->base, (size_t)nread) < 0) {
		/* Only reachable while a request is busy (process() drains
		 * otherwise): the client sends far ahead; stop reading. */
		uv_read_stop(st);
		c->reading = 0;
		return;
	}
	if (c->busy && c->in.len + 64 * 1024 > in_cap(c->srv)) {
		uv_read_stop(st);
		c->reading = 0;
	}
	if (!c->processing)
		process(c);
}

static void on_connection(uv_stream_t *ls, int status)
{
	sc_http_server_t *s = ls->data;
	if (status < 0)
		return;
	conn_t *c = sc_xcalloc(1, sizeof(*c));
	c->srv = s;
	uv_tcp_init(s->loop, &c->tcp);
	uv_timer_init(s->loop, &c->idle);
	c->tcp.data = c->idle.data = c;
	c->handles_open = 2;
	c->req.conn = c;
	sc_buf_init(&c->in, in_cap(s));
	sc_buf_init(&c->held, 0);
	sc_buf_init(&c->req.url, 0);
	sc_buf_init(&c->req.hdrs, 0);
	sc_buf_init(&c->req.body, s->lim.max_body_bytes);
	http_parser_init(&c->parser, HTTP_REQUEST);
	c->parser.data = c;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0) {
		conn_close(c);
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	if (s->tls && !(c->tls = sc_tls_new(s->tls, 1, NULL))) {
		conn_close(c);
		return;
	}
	c->reading = 1;
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
	/* The first request's head is due within the head limit too. */
	c->req_begin = uv_now(s->loop);
	conn_t *victims[2];
	char msg[160];
	int refuse = sc__http_admit(s, c, victims, msg, sizeof(msg));
	if (refuse) {
		sc__http_refuse(c, refuse,
		                refuse == 429 ? "TooManyConnections" : "ServiceUnavailable", msg,
		                1000);
		return;
	}
	for (int i = 0; i < 2; i++)
		if (victims[i])
			conn_close(victims[i]); /* made room: the longest idle one */
	idle_touch(c);
}

/* ---------------------------------------------------------------------
 * Server
 * ------------------------------------------------------------------- */

sc_http_server_t *sc_http_server_new(uv_loop_t *loop, const sc_http_limits_t *lim)
{
	sc_http_server_t *s = sc_calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->loop = loop;
	s->lim.max_header_bytes = 16 * 1024;
	s->lim.max_body_bytes = 1024 * 1024;
	s->lim.max_conns = 1024;
	s->lim.idle_timeout_ms = 60000;
	s->lim.header_timeout_ms = 10000;
	s->lim.body_timeout_ms = 30000;
	if (lim) {
		if (lim->max_header_bytes)
			s->lim.max_header_bytes = lim->max_header_bytes;
		if (lim->max_body_bytes)
			s->lim.max_body_bytes = lim->max_body_bytes;
		if (lim->max_conns)
			s->lim.max_conns = lim->max_conns;
		s->lim.max_conns_per_client = lim->max_conns_per_client;
		s->lim.idle_timeout_ms = lim->idle_timeout_ms;
		if (lim->header_timeout_ms)
			s->lim.header_timeout_ms = lim->header_timeout_ms;
		if (lim->body_timeout_ms)
			s->lim.body_timeout_ms = lim->body_timeout_ms;
	}
	if (!s->lim.max_conns_per_client || s->lim.max_conns_per_client > s->lim.max_conns)
		s->lim.max_conns_per_client = s->lim.max_conns;
	/* What the output side (http_out.c) does to a connection. */
	s->conn_close = conn_close;
	s->conn_linger = linger;
	s->conn_process = process;
	s->tick_ms = s->lim.header_timeout_ms < s->lim.body_timeout_ms ? s->lim.header_timeout_ms
	                                                               : s->lim.body_timeout_ms;
	return s;
}

int sc_http_route(sc_http_server_t *s, const char *method, const char *prefix,
                  sc_http_handler_fn fn, void *ud)
{
	if (s->nroutes == MAX_ROUTES)
		return SC_ELIMIT;
	route_t *rt = &s->routes[s->nroutes];
	rt->method = method ? sc_strdup(method) : NULL;
	rt->prefix = sc_strdup(prefix);
	if ((method && !rt->method) || !rt->prefix) {
		free(rt->method);
		free(rt->prefix);
		return SC_ENOMEM;
	}
	rt->plen = strlen(prefix);
	rt->fn = fn;
	rt->ud = ud;
	s->nroutes++;
	return 0;
}

void sc_http_set_observer(sc_http_server_t *s, sc_http_observer_fn fn, void *ud)
{
	s->observer = fn;
	s->observer_ud = ud;
}

void sc_http_set_tls(sc_http_server_t *s, sc_tls_ctx_t *ctx)
{
	s->tls = ctx;
}

int sc_http_listen(sc_http_server_t *s, const char *host, int port)
{
	struct sockaddr_in addr;
	int e;
	if ((e = uv_ip4_addr(host, port, &addr)) < 0) {
		s->listen_err = e;
		return SC_EINVAL;
	}
	uv_tcp_init(s->loop, &s->listener);
	s->listener.data = s;
	s->listener_open = 1;
	/* A port in use is often only reported by listen(), not bind(). */
	if ((e = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0)) < 0 ||
	    (e = uv_listen((uv_stream_t *)&s->listener, 511, on_connection)) < 0) {
		s->listen_err = e;
		return SC_EIO;
	}
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len);
	s->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

const char *sc_http_listen_error(const sc_http_server_t *s)
{
	switch (s ? s->listen_err : 0) {
	case 0:
		return "";
	case UV_EADDRINUSE:
		return "address already in use: another process has this port (another "
		       "Starcloud daemon?); stop it or choose another with --listen HOST:PORT";
	case UV_EACCES:
		return "permission denied: ports below 1024 need root or "
		       "CAP_NET_BIND_SERVICE";
	case UV_EADDRNOTAVAIL:
		return "address not available: the host is not an address of this machine";
	case UV_EINVAL:
		return "not an IPv4 address and port";
	default:
		return uv_strerror(s->listen_err);
	}
}

int sc_http_port(const sc_http_server_t *s)
{
	return s->port;
}

static void on_listener_closed(uv_handle_t *h)
{
	sc_http_server_t *s = h->data;
	s->listener_open = 0;
	if (s->nconns == 0)
		server_free(s);
}

void sc_http_server_close(sc_http_server_t *s)
{
	if (!s)
		return;
	s->closing = 1;
	for (size_t i = 0; i < s->nroutes; i++) {
		free(s->routes[i].method);
		free(s->routes[i].prefix);
	}
	s->nroutes = 0;
	while (s->conns)
		conn_close(s->conns);
	if (s->listener_open)
		uv_close((uv_handle_t *)&s->listener, on_listener_closed);
	else if (s->nconns == 0)
		server_free(s);
}

int sc_http_free_loopback_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}
