/* HTTP/1.1 server: connections, parsing, routing, responses.
 *
 * Flow of one connection: libuv reads bytes into conn->in (bounded); the
 * parser runs over them until a request is complete, then pauses so that
 * exactly one request is in flight. The handler answers; once the answer is
 * queued, parsing resumes on the bytes that are left (pipelined requests).
 * Reading continues while a request is in flight, so a client that closes
 * a long-lived stream is noticed, but stops when the input buffer is full. */
#include "net/http.h"
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "base/httphead.h"
#include "net/http_int.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"

static void process(conn_t *c);
static void conn_close(conn_t *c);
static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_idle(uv_timer_t *t);
static void idle_touch(conn_t *c);
static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

/* ---------------------------------------------------------------------
 * Output
 * ------------------------------------------------------------------- */

/* Resumes a stream's producer waiting in sc_http_stream_on_drain once its
 * unsent output is low again; 1 when it ran. */
static int conn_drained(conn_t *c)
{
	sc_http_req_t *r = &c->req;
	if (c->closing || !c->busy || !r->streaming || !r->on_drain || c->pending_out > DRAIN_LOW)
		return 0;
	sc_http_drain_fn fn = r->on_drain;
	r->on_drain = NULL;
	fn(r, r->drain_ud);
	return 1;
}

static void on_write(uv_write_t *w, int status)
{
	write_req_t *wr = (write_req_t *)w;
	conn_t *c = wr->c;
	c->pending_out -= wr->len;
	free(wr);
	if (status < 0) {
		conn_close(c);
		return;
	}
	if (c->close_after && c->pending_out == 0) {
		conn_close(c);
		return;
	}
	conn_drained(c);
}

/* Queues parts (copied into one allocation) for writing; with try_first,
 * writes what the socket takes at once first. */
static int conn_send(conn_t *c, const uv_buf_t *parts, size_t nparts, int try_first);
static void on_idle(uv_timer_t *t);

/* A write failed because the peer is gone. Closing at once would run the
 * request's close callback inside the handler's own write call (a stream
 * producer would free itself under its caller); instead every further
 * write fails and the connection closes on the next loop turn, through
 * the lingering path of the idle timer. */
static void conn_break(conn_t *c)
{
	if (c->closing || c->broken)
		return;
	c->broken = 1;
	c->lingering = 1;
	uv_timer_start(&c->idle, on_idle, 0, 0);
}

/* With batching on, output waits in c->held (counted in pending_out, so a
 * close-after-answer waits for it too) until sc_http_flush: the daemon
 * makes the loop iteration's writes durable first, then answers them. */
static int conn_write(conn_t *c, const uv_buf_t *parts, size_t nparts)
{
	if (c->closing || c->broken)
		return SC_EIO;
	if (!c->srv->batching)
		return conn_send(c, parts, nparts, 1);
	for (size_t i = 0; i < nparts; i++) {
		if (sc_buf_append(&c->held, parts[i].base, parts[i].len) < 0)
			sc_oom();
		c->pending_out += parts[i].len;
	}
	if (!c->holding) {
		c->holding = 1;
		c->srv->nholding++;
	}
	return 0;
}

void sc_http_set_batching(sc_http_server_t *s, int on)
{
	s->batching = on;
}

size_t sc_http_holding(const sc_http_server_t *s)
{
	return s->nholding;
}

/* Sends c's held output; with try_first, what the socket takes at once
 * needs no write request. */
static void flush_conn(sc_http_server_t *s, conn_t *c, int try_first)
{
	c->holding = 0;
	s->nholding--;
	c->pending_out -= c->held.len;
	uv_buf_t b = uv_buf_init(c->held.data, (unsigned)c->held.len);
	if (c->held.len)
		conn_send(c, &b, 1, try_first);
	sc_buf_reset(&c->held);
	if (c->shutdown_after_flush && !c->closing) {
		c->shutdown_after_flush = 0;
		uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, NULL);
	}
	if (c->close_after && c->pending_out == 0 && !c->closing)
		conn_close(c);
}

/* A stream producer waiting for a drain (sc_http_stream_on_drain) is
 * resumed by on_write, or here when the socket took all the held output
 * at once (no write request, so no on_write): without that the stream
 * stalled for good. Resuming here is safe only while no pipelined request
 * is buffered on the connection: the stream's end would start it inside
 * this flush, after the store's sync, and its answer would leave before its
 * write is durable. Then the output goes as a queued write and on_write
 * resumes the producer in the next iteration (slower, and rare). */
void sc_http_flush(sc_http_server_t *s)
{
	conn_t *c = s->conns, *next;
	for (; c && s->nholding; c = next) {
		next = c->next; /* a failed write closes (unlinks) c */
		if (!c->holding)
			continue;
		sc_http_req_t *r = &c->req;
		int waiting = c->busy && r->streaming && r->on_drain;
		flush_conn(s, c, !waiting || c->in.len == 0);
		while (c->in.len == 0 && conn_drained(c) && c->holding)
			flush_conn(s, c, 1);
	}
}

/* Writes parts at once when the socket takes them (the common case: one
 * writev, no copy, no write request, no epoll change); whatever is left is
 * copied into one allocation and queued. */
static int conn_send(conn_t *c, const uv_buf_t *parts, size_t nparts, int try_first)
{
	size_t len = 0;
	for (size_t i = 0; i < nparts; i++)
		len += parts[i].len;
	size_t skip = 0;
	int n = try_first ? uv_try_write((uv_stream_t *)&c->tcp, parts, (unsigned)nparts) : 0;
	if (n > 0)
		skip = (size_t)n;
	else if (n < 0 && n != UV_EAGAIN) {
		/* The peer is gone (EPIPE, ECONNRESET): queueing the rest would
		 * only fail again later. This connection closes, nothing else. */
		conn_break(c);
		return SC_EIO;
	}
	if (skip == len)
		return 0;
	write_req_t *wr = sc_xmalloc(sizeof(*wr) + (len - skip));
	wr->c = c;
	wr->len = len - skip;
	size_t off = 0;
	for (size_t i = 0; i < nparts; i++) {
		size_t pl = parts[i].len, from = skip < pl ? skip : pl;
		skip -= from;
		memcpy(wr->data + off, parts[i].base + from, pl - from);
		off += pl - from;
	}
	uv_buf_t b = uv_buf_init(wr->data, (unsigned)wr->len);
	c->pending_out += wr->len;
	if (uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, on_write) < 0) {
		c->pending_out -= wr->len;
		free(wr);
		conn_break(c);
		return SC_EIO;
	}
	return 0;
}

/* A fixed-size text builder: the response head is built on every answer,
 * so without printf. Output past cap is dropped (and the head cut short,
 * which the 512-byte bound on extra headers rules out). */
typedef struct head {
	char *p;
	size_t cap, len;
} head_t;

static void head_put(head_t *h, const char *s, size_t n)
{
	if (h->len + n >= h->cap)
		n = h->cap - 1 - h->len;
	memcpy(h->p + h->len, s, n);
	h->len += n;
}

static void head_str(head_t *h, const char *s)
{
	head_put(h, s, strlen(s));
}

static void head_num(head_t *h, unsigned long long v)
{
	char t[SC_UDIGITS_MAX];
	size_t n = sc_udigits(v, t);
	head_put(h, t + SC_UDIGITS_MAX - n, n);
}

static int head_printf(char *out, size_t outsz, int status, const char *ctype, long long clen,
                       int keep_alive, const char *xhdrs)
{
	head_t h = {out, outsz, 0};
	head_str(&h, "HTTP/1.1 ");
	head_num(&h, (unsigned long long)status);
	head_str(&h, " ");
	head_str(&h, sc_http_status_text(status));
	head_str(&h, "\r\nContent-Type: ");
	head_str(&h, ctype);
	if (clen >= 0) {
		head_str(&h, "\r\nContent-Length: ");
		head_num(&h, (unsigned long long)clen);
		head_str(&h, "\r\n");
	} else {
		head_str(&h, "\r\nTransfer-Encoding: chunked\r\nCache-Control: no-cache\r\n");
	}
	head_str(&h, xhdrs);
	head_str(&h, keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n");
	out[h.len] = '\0';
	return (int)h.len;
}

/* Marks the request finished: reports it, and lets the connection move on
 * to the next pipelined request (or close). */
static void req_finish(sc_http_req_t *r)
{
	conn_t *c = r->conn;
	sc_http_server_t *s = c->srv;
	if (s->observer) {
		double secs = (double)(uv_hrtime() - r->start_ns) / 1e9;
		s->observer(r->method, r->route ? r->route : "", r->status, secs, s->observer_ud);
	}
	r->streaming = 0;
	r->on_close = NULL;
	r->on_drain = NULL;
	c->busy = 0;
	if (!c->keep_alive) {
		c->close_after = 1;
		if (c->pending_out == 0)
			conn_close(c);
		return;
	}
	if (!c->processing)
		process(c);
}

void sc_http_respond(sc_http_req_t *r, int status, const char *ctype, const void *body, size_t len)
{
	conn_t *c = r->conn;
	char head[1024];
	r->status = status;
	int n = head_printf(head, sizeof(head), status, ctype ? ctype : "application/json",
	                    (long long)len, c->keep_alive, r->xhdrs);
	uv_buf_t parts[2] = {uv_buf_init(head, (unsigned)n),
	                     uv_buf_init((char *)body, (unsigned)len)};
	conn_write(c, parts, len ? 2 : 1);
	req_finish(r);
}

void sc_http_stream_start(sc_http_req_t *r, int status, const char *ctype,
                          sc_http_close_fn on_close, void *ud)
{
	char head[1024];
	r->status = status;
	r->streaming = 1;
	r->on_close = on_close;
	r->close_ud = ud;
	int n = head_printf(head, sizeof(head), status, ctype, -1, r->conn->keep_alive, r->xhdrs);
	uv_buf_t part = uv_buf_init(head, (unsigned)n);
	conn_write(r->conn, &part, 1);
	/* A stream has no idle timeout: it is idle by design. */
	uv_timer_stop(&r->conn->idle);
}

int sc_http_stream_write(sc_http_req_t *r, const void *data, size_t len)
{
	conn_t *c = r->conn;
	if (c->closing || c->broken)
		return SC_EIO;
	if (len == 0)
		return 0;
	if (c->pending_out > MAX_PENDING_OUT)
		return SC_EIO;
	char size[32];
	int n = snprintf(size, sizeof(size), "%zx\r\n", len);
	uv_buf_t parts[3] = {uv_buf_init(size, (unsigned)n),
	                     uv_buf_init((char *)data, (unsigned)len), uv_buf_init("\r\n", 2)};
	return conn_write(c, parts, 3);
}

int sc_http_set_header(sc_http_req_t *r, const char *name, const char *value)
{
	/* Header injection guard: names and values come from our own code,
	 * but a value echoed from a request must not smuggle a new line. */
	if (strpbrk(name, "\r\n:") || strpbrk(value, "\r\n"))
		return SC_EINVAL;
	size_t nl = strlen(name), vl = strlen(value);
	if (r->xlen + nl + vl + 4 >= sizeof(r->xhdrs))
		return SC_ETOOBIG;
	char *o = r->xhdrs + r->xlen;
	memcpy(o, name, nl);
	memcpy(o + nl, ": ", 2);
	memcpy(o + nl + 2, value, vl);
	memcpy(o + nl + 2 + vl, "\r\n", 3); /* with the NUL */
	r->xlen += nl + vl + 4;
	return 0;
}

void sc_http_stream_on_drain(sc_http_req_t *r, sc_http_drain_fn fn, void *ud)
{
	r->on_drain = fn;
	r->drain_ud = ud;
}

size_t sc_http_pending_out(const sc_http_req_t *r)
{
	return r->conn->pending_out;
}

void sc_http_on_close(sc_http_req_t *r, sc_http_close_fn on_close, void *ud)
{
	r->on_close = on_close;
	r->close_ud = ud;
}

void sc_http_abort(sc_http_req_t *r)
{
	conn_t *c = r->conn;
	r->on_close = NULL;
	if (c->srv->observer) {
		double secs = (double)(uv_hrtime() - r->start_ns) / 1e9;
		c->srv->observer(r->method, r->route ? r->route : "", r->status ? r->status : 499,
		                 secs, c->srv->observer_ud);
	}
	conn_close(c);
}

void sc_http_stream_end(sc_http_req_t *r)
{
	uv_buf_t part = uv_buf_init("0\r\n\r\n", 5);
	conn_write(r->conn, &part, 1);
	req_finish(r);
}

/* Answers a request the parser refused and closes the connection. */
static void respond_error_close(conn_t *c, int status, const char *reason, const char *msg)
{
	char body[256];
	int n = snprintf(
	    body, sizeof(body),
	    "{\"error\":{\"code\":%d,\"reason\":\"%s\",\"message\":\"%s\",\"field\":\"\"}}", status,
	    reason, msg);
	char head[512];
	int h = head_printf(head, sizeof(head), status, "application/json", n, 0, "");
	uv_buf_t parts[2] = {uv_buf_init(head, (unsigned)h), uv_buf_init(body, (unsigned)n)};
	conn_write(c, parts, 2);
	if (c->srv->observer)
		c->srv->observer(c->req.method, "", status, 0, c->srv->observer_ud);
	/* Lingering close: a client still sending its (oversized) body would
	 * get a reset instead of the answer if we closed now. Send the answer,
	 * shut our side, discard what still comes, close at EOF or after 5 s. */
	c->lingering = 1;
	if (c->holding)
		c->shutdown_after_flush = 1; /* the answer is held: shut after it */
	else
		uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, NULL);
	uv_timer_start(&c->idle, on_idle, 5000, 0);
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
		conn_write(c, &part, 1);
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
	if (c->in.len < h.head_len + h.body_len)
		return -1;
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
	if (!c->busy && !c->closing && c->srv->lim.idle_timeout_ms)
		idle_touch(c);
	if (!c->closing && !c->close_after && !c->reading) {
		c->reading = 1;
		uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
	}
}

/* ---------------------------------------------------------------------
 * Connections
 * ------------------------------------------------------------------- */

static void on_handle_closed(uv_handle_t *h)
{
	conn_t *c = h->data;
	if (--c->handles_open > 0)
		return;
	sc_http_server_t *s = c->srv;
	sc_buf_free(&c->in);
	sc_buf_free(&c->req.url);
	sc_buf_free(&c->req.hdrs);
	sc_buf_free(&c->req.body);
	free(c);
	s->nconns--;
	if (s->closing && s->nconns == 0 && !s->listener_open)
		free(s);
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

/* The keep-alive idle limit. Restarting the timer after every request (a
 * stop and a start in libuv's timer heap) cost more than the rest of the
 * bookkeeping of a request; instead the connection notes when it was last
 * active, and the timer, when it fires, closes the connection only if the
 * limit has really passed, else re-arms for what is left. */
static void idle_touch(conn_t *c)
{
	c->last_active = uv_now(c->srv->loop);
	if (!uv_is_active((uv_handle_t *)&c->idle))
		uv_timer_start(&c->idle, on_idle, c->srv->lim.idle_timeout_ms, 0);
}

static void on_idle(uv_timer_t *t)
{
	conn_t *c = t->data;
	uint64_t lim = c->srv->lim.idle_timeout_ms;
	if (c->lingering) {
		conn_close(c); /* the 5 s after an error answer are over */
		return;
	}
	if (c->busy) {
		/* A request with its handler is not idle; a stream stops the
		 * timer and process() restarts it when the stream ends. */
		uv_timer_start(&c->idle, on_idle, lim, 0);
		return;
	}
	uint64_t quiet = uv_now(c->srv->loop) - c->last_active;
	if (quiet < lim) {
		uv_timer_start(&c->idle, on_idle, lim - quiet, 0);
		return;
	}
	conn_close(c);
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
	if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0 || s->nconns > s->lim.max_conns) {
		conn_close(c);
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	if (s->lim.idle_timeout_ms)
		idle_touch(c);
	c->reading = 1;
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
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
	if (lim) {
		if (lim->max_header_bytes)
			s->lim.max_header_bytes = lim->max_header_bytes;
		if (lim->max_body_bytes)
			s->lim.max_body_bytes = lim->max_body_bytes;
		if (lim->max_conns)
			s->lim.max_conns = lim->max_conns;
		s->lim.idle_timeout_ms = lim->idle_timeout_ms;
	}
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

int sc_http_listen(sc_http_server_t *s, const char *host, int port)
{
	struct sockaddr_in addr;
	if (uv_ip4_addr(host, port, &addr) < 0)
		return SC_EINVAL;
	uv_tcp_init(s->loop, &s->listener);
	s->listener.data = s;
	s->listener_open = 1;
	if (uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0) < 0)
		return SC_EIO;
	if (uv_listen((uv_stream_t *)&s->listener, 511, on_connection) < 0)
		return SC_EIO;
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len);
	s->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return 0;
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
		free(s);
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
		free(s);
}
