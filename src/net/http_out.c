/* HTTP/1.1 server: output. Answers, chunked streams (copied, or shared
 * buffers for watch events), the output held for group commit
 * (sc_http_set_batching) and its flush. Split from http.c, which holds
 * connections, parsing, timers and dispatch (http_int.h has the objects
 * both share). */
#include "net/http.h"
#include "base/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/http_int.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"

static int conn_send(conn_t *c, const uv_buf_t *parts, size_t nparts, int try_first);

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
	if (wr->rel)
		wr->rel(wr->ref);
	free(wr);
	if (status < 0) {
		c->srv->conn_close(c);
		return;
	}
	if (c->close_after && c->pending_out == 0) {
		c->srv->conn_close(c);
		return;
	}
	conn_drained(c);
}

/* Queues parts (copied into one allocation) for writing; with try_first,
 * writes what the socket takes at once first. */
static int conn_send(conn_t *c, const uv_buf_t *parts, size_t nparts, int try_first);

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
	c->srv->conn_linger(c, 0);
}

/* With batching, whether output on c must wait: always behind output
 * already held there, otherwise while the revision it may show (the
 * request's sc_http_answer_rev, else the newest write taken) is not durable
 * yet (sc_http_release). *dep receives that revision. */
static int must_hold(const conn_t *c, int64_t *dep)
{
	const sc_http_server_t *s = c->srv;
	if (!s->batching)
		return 0;
	if (c->req.dep_rev > 0)
		*dep = c->req.dep_rev;
	else
		*dep = s->current_rev ? s->current_rev(s->rev_ud) : INT64_MAX;
	return c->holding || *dep > s->durable;
}

/* With batching on, output waits in c->held (counted in pending_out, so a
 * close-after-answer waits for it too) until sc_http_flush: the daemon
 * makes the loop iteration's writes durable first, then answers them. */
int sc__http_write(conn_t *c, const uv_buf_t *parts, size_t nparts)
{
	int64_t dep = 0;
	if (c->closing || c->broken)
		return SC_EIO;
	if (!must_hold(c, &dep))
		return conn_send(c, parts, nparts, 1);
	if (dep > c->held_rev)
		c->held_rev = dep;
	for (size_t i = 0; i < nparts; i++) {
		if (sc_buf_append(&c->held, parts[i].base, parts[i].len) < 0)
			sc_oom();
		c->pending_out += parts[i].len;
	}
	c->held_writes++;
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

void sc_http_set_hold_check(sc_http_server_t *s, int64_t (*current_rev)(void *ud), void *ud)
{
	s->current_rev = current_rev;
	s->rev_ud = ud;
}

void sc_http_answer_rev(sc_http_req_t *r, int64_t rev)
{
	r->dep_rev = rev;
}

void sc_http_set_gate(sc_http_server_t *s, sc_http_handler_fn gate, void *ud)
{
	s->gate = gate;
	s->gate_ud = ud;
}

/* Sends c's held output; with try_first, what the socket takes at once
 * needs no write request. */
static void flush_conn(sc_http_server_t *s, conn_t *c, int try_first)
{
	c->holding = 0;
	s->nholding--;
	c->held_writes = c->held_answers = 0;
	c->held_rev = 0;
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
		c->srv->conn_close(c);
}

/* A stream producer waiting for a drain (sc_http_stream_on_drain) is
 * resumed by on_write, or here when the socket took all the held output
 * at once (no write request, so no on_write): without that the stream
 * stalled for good. Resuming here is safe only while no pipelined request
 * is buffered on the connection: the stream's end would start it inside
 * this flush, after the store's sync, and its answer would leave before its
 * write is durable. Then the output goes as a queued write and on_write
 * resumes the producer in the next iteration (slower, and rare). */
static void release(sc_http_server_t *s, int64_t upto)
{
	conn_t *c = s->conns, *next;
	for (; c && s->nholding; c = next) {
		next = c->next; /* a failed write closes (unlinks) c */
		if (!c->holding || c->held_rev > upto)
			continue;
		sc_http_req_t *r = &c->req;
		int waiting = c->busy && r->streaming && r->on_drain;
		flush_conn(s, c, !waiting || c->in.len == 0);
		while (c->in.len == 0 && conn_drained(c) && c->holding)
			flush_conn(s, c, 1);
	}
}

void sc_http_flush(sc_http_server_t *s)
{
	release(s, INT64_MAX);
}

void sc_http_release(sc_http_server_t *s, int64_t durable)
{
	s->durable = durable;
	release(s, durable);
}

/* Writes parts at once when the socket takes them (the common case: one
 * writev, no copy, no write request, no epoll change); whatever is left is
 * copied into one allocation and queued. */
static int raw_send(conn_t *c, const uv_buf_t *parts, size_t nparts, int try_first)
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
	wr->rel = NULL;
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

int sc__http_tls_flush(conn_t *c)
{
	char buf[16 * 1024 + 512];
	size_t n;
	while ((n = sc_tls_take(c->tls, buf, sizeof(buf))) > 0) {
		uv_buf_t b = uv_buf_init(buf, (unsigned)n);
		if (raw_send(c, &b, 1, 1) < 0)
			return SC_EIO;
	}
	return 0;
}

/* Plaintext through the connection's TLS session when it has one (the
 * records come out of sc__http_tls_flush), else straight to the socket. */
static int conn_send(conn_t *c, const uv_buf_t *parts, size_t nparts, int try_first)
{
	if (!c->tls)
		return raw_send(c, parts, nparts, try_first);
	for (size_t i = 0; i < nparts; i++)
		if (parts[i].len && sc_tls_write(c->tls, parts[i].base, parts[i].len) < 0) {
			conn_break(c);
			return SC_EIO;
		}
	return sc__http_tls_flush(c);
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
			c->srv->conn_close(c);
		return;
	}
	if (!c->processing)
		c->srv->conn_process(c);
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
	sc__http_write(c, parts, len ? 2 : 1);
	if (c->holding)
		c->held_answers++;
	req_finish(r);
}

/* Replaces c's held answers with error answers (same count, same order);
 * a connection holding anything else (a stream's chunks) is closed. */
static void fail_conn(conn_t *c, int status, const char *body, size_t blen)
{
	if (c->held_writes != c->held_answers) {
		c->srv->conn_close(c);
		return;
	}
	size_t n = c->held_answers;
	c->pending_out -= c->held.len;
	sc_buf_reset(&c->held);
	c->held_writes = c->held_answers = 0;
	for (size_t i = 0; i < n; i++) {
		char head[512];
		int h = head_printf(head, sizeof(head), status, "application/json", (long long)blen,
		                    c->keep_alive, "");
		uv_buf_t parts[2] = {uv_buf_init(head, (unsigned)h),
		                     uv_buf_init((char *)body, (unsigned)blen)};
		sc__http_write(c, parts, 2);
		c->held_answers++;
	}
	c->held_rev = 0; /* the error answers show nothing: they go with the next release */
}

void sc_http_fail_held(sc_http_server_t *s, int64_t after, int status, const char *body, size_t len)
{
	for (conn_t *c = s->conns, *next; c; c = next) {
		next = c->next; /* fail_conn may close (unlink) c */
		if (c->holding && !c->closing && c->held_rev > after)
			fail_conn(c, status, body, len);
	}
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
	sc__http_write(r->conn, &part, 1);
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
	return sc__http_write(c, parts, 3);
}

/* Writes parts[] at once as far as the socket takes them, then queues the
 * rest pointing into the shared middle part (no copy of it); the small
 * parts around it are copied into the write request. rel(ref) runs when
 * the write completes, or now when nothing had to be queued. */
static int send_shared(conn_t *c, const uv_buf_t parts[3], sc_http_release_fn rel, void *ref)
{
	size_t all = parts[0].len + parts[1].len + parts[2].len, skip = 0;
	int n = uv_try_write((uv_stream_t *)&c->tcp, parts, 3);
	if (n < 0 && n != UV_EAGAIN) {
		rel(ref);
		conn_break(c);
		return SC_EIO;
	}
	if (n > 0)
		skip = (size_t)n;
	if (skip == all) {
		rel(ref);
		return 0;
	}
	write_req_t *wr = sc_xmalloc(sizeof(*wr) + parts[0].len + parts[2].len);
	wr->c = c;
	wr->len = all - skip;
	wr->rel = rel;
	wr->ref = ref;
	memcpy(wr->data, parts[0].base, parts[0].len);
	memcpy(wr->data + parts[0].len, parts[2].base, parts[2].len);
	const char *bases[3] = {wr->data, parts[1].base, wr->data + parts[0].len};
	uv_buf_t rest[3];
	unsigned nrest = 0;
	for (int i = 0; i < 3; i++) {
		if (skip >= parts[i].len) {
			skip -= parts[i].len;
			continue;
		}
		rest[nrest++] =
		    uv_buf_init((char *)bases[i] + skip, (unsigned)(parts[i].len - skip));
		skip = 0;
	}
	c->pending_out += wr->len;
	if (uv_write(&wr->w, (uv_stream_t *)&c->tcp, rest, nrest, on_write) < 0) {
		c->pending_out -= wr->len;
		free(wr);
		rel(ref);
		conn_break(c);
		return SC_EIO;
	}
	return 0;
}

int sc_http_stream_write_shared(sc_http_req_t *r, const char *head, size_t hlen, const void *data,
                                size_t len, const char *tail, size_t tlen, sc_http_release_fn rel,
                                void *ref)
{
	conn_t *c = r->conn;
	char pre[96], post[24];
	if (c->closing || c->broken || hlen > 64 || tlen > 16) {
		rel(ref);
		return SC_EIO;
	}
	if (hlen + len + tlen == 0) {
		rel(ref);
		return 0;
	}
	int n = snprintf(pre, sizeof(pre), "%zx\r\n", hlen + len + tlen);
	memcpy(pre + n, head, hlen);
	memcpy(post, tail, tlen);
	memcpy(post + tlen, "\r\n", 2);
	uv_buf_t parts[3] = {uv_buf_init(pre, (unsigned)(n + (int)hlen)),
	                     uv_buf_init((char *)data, (unsigned)len),
	                     uv_buf_init(post, (unsigned)(tlen + 2))};
	int64_t dep;
	if (must_hold(c, &dep) || c->tls) {
		/* Held output is one buffer per connection: copy (rare: a
		 * stream's own first bytes are still held). TLS encrypts a
		 * copy anyway: the shared buffer is read once, now. */
		int rc = sc__http_write(c, parts, 3);
		rel(ref);
		return rc;
	}
	return send_shared(c, parts, rel, ref);
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

void sc_http_set_send_buffer(sc_http_req_t *r, int bytes)
{
	int v = bytes;
	uv_send_buffer_size((uv_handle_t *)&r->conn->tcp, &v);
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
	c->srv->conn_close(c);
}

void sc_http_stream_end(sc_http_req_t *r)
{
	uv_buf_t part = uv_buf_init("0\r\n\r\n", 5);
	sc__http_write(r->conn, &part, 1);
	req_finish(r);
}

void sc_http_stream_cut(sc_http_req_t *r, uint64_t grace_ms)
{
	conn_t *c = r->conn;
	c->keep_alive = 0; /* req_finish closes once the output is written */
	sc_http_stream_end(r);
	if (!c->closing)
		c->srv->conn_linger(c, grace_ms);
}

/* Answers a request the parser refused (or a connection refused at
 * accept, or too slow) and closes the connection after linger_ms. */
void sc__http_refuse(conn_t *c, int status, const char *reason, const char *msg, uint64_t linger_ms)
{
	char body[512];
	int n = snprintf(
	    body, sizeof(body),
	    "{\"error\":{\"code\":%d,\"reason\":\"%s\",\"message\":\"%s\",\"field\":\"\"}}", status,
	    reason, msg);
	if (n < 0 || (size_t)n >= sizeof(body))
		n = (int)strlen(body);
	char head[512];
	int h = head_printf(head, sizeof(head), status, "application/json", n, 0, "");
	uv_buf_t parts[2] = {uv_buf_init(head, (unsigned)h), uv_buf_init(body, (unsigned)n)};
	sc__http_write(c, parts, 2);
	if (c->srv->observer)
		c->srv->observer(c->req.method, "", status, 0, c->srv->observer_ud);
	/* Lingering close: a client still sending its (oversized) body would
	 * get a reset instead of the answer if we closed now. Send the answer,
	 * shut our side, discard what still comes, close at EOF or after 5 s. */
	if (c->holding)
		c->shutdown_after_flush = 1; /* the answer is held: shut after it */
	else
		uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, NULL);
	c->srv->conn_linger(c, linger_ms);
}
