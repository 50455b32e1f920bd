/* The async HTTP client (net/hclient.h) against a small server on the
 * loopback: every request that started gets exactly one on_done, whatever
 * ends it (an answer, a refused connection, a timeout, sc_hcli_cancel from
 * outside or from its own callbacks, a callback's stop, sc_hcli_close with
 * requests in flight); keep-alive reuse; IPv6 literals and names through
 * the resolver; URL parsing. Run under ASan too (make SAN=1 test-unit):
 * a request freed twice or left behind shows there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include <sys/socket.h>
#include <unistd.h>

#include "net/hclient.h"
#include "net/hclient_int.h" /* sc__hcli_resolved, resolves */
#include "starcloud/error.h"

/* ---- the server ---------------------------------------------------------- */

enum { ANSWER, SILENT, STREAM };

typedef struct server {
	int mode; /* first: a listener is not its own data (on_walk_close) */
	uv_tcp_t tcp;
	int port;
	int accepted; /* connections taken */
	int requests; /* request heads seen */
} server_t;

typedef struct sconn {
	uv_tcp_t tcp;
	server_t *srv;
	char buf[8192];
	size_t len;
} sconn_t;

static uv_loop_t loop;

static void on_sclosed(uv_handle_t *h)
{
	free(h->data);
}

static void on_swritten(uv_write_t *w, int status)
{
	free(w);
}

static void swrite(sconn_t *c, const char *s)
{
	size_t n = strlen(s);
	uv_write_t *w = malloc(sizeof(*w) + n);
	char *copy = (char *)(w + 1);
	memcpy(copy, s, n);
	uv_buf_t b = uv_buf_init(copy, (unsigned)n);
	uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, on_swritten);
}

static void on_salloc(uv_handle_t *h, size_t sz, uv_buf_t *b)
{
	sconn_t *c = h->data;
	*b = uv_buf_init(c->buf + c->len, (unsigned)(sizeof(c->buf) - c->len - 1));
}

/* Answers each complete request head (the tests send no bodies). */
static void on_sread(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	sconn_t *c = s->data;
	if (n < 0) {
		uv_close((uv_handle_t *)&c->tcp, on_sclosed);
		return;
	}
	c->len += (size_t)n;
	c->buf[c->len] = '\0';
	char *end;
	while ((end = strstr(c->buf, "\r\n\r\n"))) {
		size_t used = (size_t)(end + 4 - c->buf);
		memmove(c->buf, c->buf + used, c->len - used + 1);
		c->len -= used;
		c->srv->requests++;
		if (c->srv->mode == ANSWER)
			swrite(c,
			       "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Test: yes\r\n\r\nhello");
		else if (c->srv->mode == STREAM)
			swrite(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
			          "Transfer-Encoding: chunked\r\n\r\n"
			          "b\r\ndata: one\n\n\r\n");
	}
	if (c->len + 1 >= sizeof(c->buf))
		c->len = 0;
}

static void on_sconn(uv_stream_t *l, int status)
{
	server_t *srv = l->data;
	sconn_t *c = calloc(1, sizeof(*c));
	c->srv = srv;
	uv_tcp_init(&loop, &c->tcp);
	c->tcp.data = c;
	if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0) {
		uv_close((uv_handle_t *)&c->tcp, on_sclosed);
		return;
	}
	srv->accepted++;
	uv_read_start((uv_stream_t *)&c->tcp, on_salloc, on_sread);
}

/* Listens on addr ("127.0.0.1" or "::1") at a free port; -1 when the
 * address family is not available here. */
static int server_start(server_t *srv, const char *addr, int mode)
{
	memset(srv, 0, sizeof(*srv));
	srv->mode = mode;
	struct sockaddr_storage a;
	if (strchr(addr, ':'))
		uv_ip6_addr(addr, 0, (struct sockaddr_in6 *)&a);
	else
		uv_ip4_addr(addr, 0, (struct sockaddr_in *)&a);
	uv_tcp_init(&loop, &srv->tcp);
	srv->tcp.data = srv;
	if (uv_tcp_bind(&srv->tcp, (const struct sockaddr *)&a, 0) < 0 ||
	    uv_listen((uv_stream_t *)&srv->tcp, 64, on_sconn) < 0) {
		uv_close((uv_handle_t *)&srv->tcp, NULL);
		return -1;
	}
	struct sockaddr_storage got;
	int len = sizeof(got);
	uv_tcp_getsockname(&srv->tcp, (struct sockaddr *)&got, &len);
	srv->port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
	                                            : ((struct sockaddr_in *)&got)->sin_port);
	return 0;
}

/* Closes every handle left (server, its connections, the client's) and
 * runs the loop until they are gone: nothing may be left to leak. */
static void on_walk_close(uv_handle_t *h, void *arg)
{
	/* A server connection is its own data (tcp is sconn_t's first member). */
	if (!uv_is_closing(h))
		uv_close(h, h->data == (void *)h ? on_sclosed : NULL);
}

static void loop_end(void)
{
	uv_walk(&loop, on_walk_close, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- a request's record -------------------------------------------------- */

typedef struct rec {
	int heads, done, err, status;
	char body[256];
	size_t blen;
	int stop_in_head;         /* on_head returns 1 */
	int cancel_in_data;       /* on_data cancels its own request */
	int cancel_in_done;       /* on_done cancels its own request (must be harmless) */
	sc_hcli_t *close_in_done; /* on_done closes the client */
	sc_hcli_req_t *req;
} rec_t;

static int on_head(sc_hcli_req_t *r, int status, void *ud)
{
	rec_t *x = ud;
	x->heads++;
	x->status = status;
	return x->stop_in_head;
}

static int on_data(sc_hcli_req_t *r, const char *d, size_t n, void *ud)
{
	rec_t *x = ud;
	if (x->blen + n < sizeof(x->body)) {
		memcpy(x->body + x->blen, d, n);
		x->blen += n;
	}
	if (x->cancel_in_data) {
		sc_hcli_cancel(r);
		assert_int_equal(x->done, 1); /* on_done ran inside the cancel */
		return 0;                     /* ignored: the request is cancelled */
	}
	return 0;
}

static void on_done(sc_hcli_req_t *r, int err, void *ud)
{
	rec_t *x = ud;
	x->done++;
	x->err = err;
	if (x->cancel_in_done)
		sc_hcli_cancel(r);
	if (x->close_in_done) {
		sc_hcli_t *c = x->close_in_done;
		x->close_in_done = NULL;
		sc_hcli_close(c);
	}
}

static int start(sc_hcli_t *c, const char *url, uint64_t timeout_ms, rec_t *x)
{
	sc_hcli_call_t call = {.method = "GET",
	                       .url = url,
	                       .timeout_ms = timeout_ms,
	                       .cbs = {on_head, on_data, on_done},
	                       .ud = x};
	return sc_hcli_start(c, &call, &x->req);
}

/* Runs the loop until every record is done (or a generous deadline: a
 * loaded machine may take its time, a hang fails the test). */
static void run_until_done(rec_t *xs, int n)
{
	uint64_t until = uv_now(&loop) + 30000;
	for (;;) {
		int all = 1;
		for (int i = 0; i < n; i++)
			all &= xs[i].done > 0;
		if (all)
			return;
		assert_true(uv_now(&loop) < until);
		uv_run(&loop, UV_RUN_ONCE);
	}
}

/* Runs the loop until cond(srv) holds. */
static void run_until(server_t *srv, int (*cond)(const server_t *))
{
	uint64_t until = uv_now(&loop) + 30000;
	while (!cond(srv)) {
		assert_true(uv_now(&loop) < until);
		uv_run(&loop, UV_RUN_ONCE);
	}
}

static int three_requests(const server_t *s)
{
	return s->requests >= 3;
}

static int one_request(const server_t *s)
{
	return s->requests >= 1;
}

static char *url_of(char *buf, size_t sz, const char *host, int port)
{
	snprintf(buf, sz, "http://%s:%d/x", host, port);
	return buf;
}

/* ---- tests --------------------------------------------------------------- */

static void test_answer_and_keep_alive(void **state)
{
	uv_loop_init(&loop);
	server_t srv;
	assert_int_equal(server_start(&srv, "127.0.0.1", ANSWER), 0);
	sc_hcli_t *c = sc_hcli_new(&loop, NULL);
	char url[64];
	for (int i = 0; i < 3; i++) {
		rec_t x = {0};
		assert_int_equal(
		    start(c, url_of(url, sizeof(url), "127.0.0.1", srv.port), 5000, &x), 0);
		run_until_done(&x, 1);
		assert_int_equal(x.done, 1);
		assert_int_equal(x.err, 0);
		assert_int_equal(x.status, 200);
		assert_int_equal(x.blen, 5);
		assert_memory_equal(x.body, "hello", 5);
	}
	/* One connection carried all three. */
	assert_int_equal(srv.accepted, 1);
	assert_int_equal(srv.requests, 3);
	sc_hcli_close(c);
	loop_end();
}

/* The known defect: requests in flight when the client closed got no
 * callback, and whatever their callers held leaked or waited forever. */
static void test_close_ends_every_request(void **state)
{
	uv_loop_init(&loop);
	server_t srv;
	assert_int_equal(server_start(&srv, "127.0.0.1", SILENT), 0);
	sc_hcli_t *c = sc_hcli_new(&loop, NULL);
	char url[64];
	rec_t x[4] = {{0}};
	for (int i = 0; i < 3; i++)
		assert_int_equal(
		    start(c, url_of(url, sizeof(url), "127.0.0.1", srv.port), 0, &x[i]), 0);
	run_until(&srv, three_requests); /* all three written and waiting */
	/* A fourth still connecting. */
	assert_int_equal(start(c, url_of(url, sizeof(url), "127.0.0.1", srv.port), 0, &x[3]), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(x[i].done, 0);
	sc_hcli_close(c);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(x[i].done, 1);
		assert_int_equal(x[i].err, SC_ECANCELED);
	}
	loop_end();
	for (int i = 0; i < 4; i++)
		assert_int_equal(x[i].done, 1);
}

static void test_cancel_calls_done_once(void **state)
{
	uv_loop_init(&loop);
	server_t srv;
	assert_int_equal(server_start(&srv, "127.0.0.1", SILENT), 0);
	sc_hcli_t *c = sc_hcli_new(&loop, NULL);
	char url[64];
	rec_t a = {.cancel_in_done = 1}, b = {0};
	assert_int_equal(start(c, url_of(url, sizeof(url), "127.0.0.1", srv.port), 0, &a), 0);
	assert_int_equal(start(c, url_of(url, sizeof(url), "127.0.0.1", srv.port), 0, &b), 0);
	/* Before it is even connected, and once it waits for its answer. */
	sc_hcli_cancel(a.req);
	assert_int_equal(a.done, 1);
	assert_int_equal(a.err, SC_ECANCELED);
	run_until(&srv, one_request);
	sc_hcli_cancel(b.req);
	assert_int_equal(b.done, 1);
	assert_int_equal(b.err, SC_ECANCELED);
	sc_hcli_cancel(NULL);
	sc_hcli_close(c);
	loop_end();
	assert_int_equal(a.done, 1);
	assert_int_equal(b.done, 1);
}

static void test_stop_from_callbacks(void **state)
{
	uv_loop_init(&loop);
	server_t srv;
	assert_int_equal(server_start(&srv, "127.0.0.1", STREAM), 0);
	sc_hcli_t *c = sc_hcli_new(&loop, NULL);
	char url[64];
	rec_t h = {.stop_in_head = 1}, d = {.cancel_in_data = 1};
	assert_int_equal(start(c, url_of(url, sizeof(url), "127.0.0.1", srv.port), 5000, &h), 0);
	assert_int_equal(start(c, url_of(url, sizeof(url), "127.0.0.1", srv.port), 5000, &d), 0);
	rec_t both[2];
	run_until_done(&h, 1);
	run_until_done(&d, 1);
	both[0] = h;
	both[1] = d;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(both[i].done, 1);
		assert_int_equal(both[i].err, SC_ECANCELED);
		assert_int_equal(both[i].heads, 1);
	}
	assert_int_equal(h.blen, 0);
	assert_true(d.blen > 0); /* the event arrived before the cancel */
	sc_hcli_close(c);
	loop_end();
	assert_int_equal(h.done, 1);
	assert_int_equal(d.done, 1);
}

/* A stream (SSE) stays open: its events arrive as they come, and a cancel
 * ends it with one on_done. */
static void test_stream_then_cancel(void **state)
{
	uv_loop_init(&loop);
	server_t srv;
	assert_int_equal(server_start(&srv, "127.0.0.1", STREAM), 0);
	sc_hcli_t *c = sc_hcli_new(&loop, NULL);
	char url[64];
	rec_t x = {0};
	assert_int_equal(start(c, url_of(url, sizeof(url), "127.0.0.1", srv.port), 0, &x), 0);
	uint64_t until = uv_now(&loop) + 30000;
	while (x.blen < 11) {
		assert_true(uv_now(&loop) < until);
		uv_run(&loop, UV_RUN_ONCE);
	}
	assert_memory_equal(x.body, "data: one\n\n", 11);
	assert_int_equal(x.done, 0);
	assert_string_equal(sc_hcli_header(x.req, "content-type"), "text/event-stream");
	sc_hcli_cancel(x.req);
	assert_int_equal(x.done, 1);
	assert_int_equal(x.err, SC_ECANCELED);
	sc_hcli_close(c);
	loop_end();
}

static void test_timeout_and_refused(void **state)
{
	uv_loop_init(&loop);
	server_t srv;
	assert_int_equal(server_start(&srv, "127.0.0.1", SILENT), 0);
	/* A port nothing listens on: bind one, note it, close it. */
	server_t gone;
	assert_int_equal(server_start(&gone, "127.0.0.1", SILENT), 0);
	int dead_port = gone.port;
	uv_close((uv_handle_t *)&gone.tcp, NULL);
	sc_hcli_t *c = sc_hcli_new(&loop, NULL);
	char url[64];
	rec_t t = {0}, r = {0};
	assert_int_equal(start(c, url_of(url, sizeof(url), "127.0.0.1", srv.port), 200, &t), 0);
	assert_int_equal(start(c, url_of(url, sizeof(url), "127.0.0.1", dead_port), 5000, &r), 0);
	run_until_done(&t, 1);
	run_until_done(&r, 1);
	assert_int_equal(t.err, SC_ELIMIT);
	assert_int_equal(r.err, SC_EIO);
	sc_hcli_close(c);
	loop_end();
	assert_int_equal(t.done, 1);
	assert_int_equal(r.done, 1);
}

/* on_done may close the client that called it; the other request in
 * flight still gets its one on_done. */
static void test_close_from_done(void **state)
{
	uv_loop_init(&loop);
	server_t srv;
	assert_int_equal(server_start(&srv, "127.0.0.1", SILENT), 0);
	sc_hcli_t *c = sc_hcli_new(&loop, NULL);
	char url[64];
	rec_t a = {0}, b = {0};
	a.close_in_done = c;
	assert_int_equal(start(c, url_of(url, sizeof(url), "127.0.0.1", srv.port), 100, &a), 0);
	assert_int_equal(start(c, url_of(url, sizeof(url), "127.0.0.1", srv.port), 0, &b), 0);
	run_until_done(&a, 1);
	assert_int_equal(a.err, SC_ELIMIT);
	assert_int_equal(b.done, 1);
	assert_int_equal(b.err, SC_ECANCELED);
	loop_end();
	assert_int_equal(a.done, 1);
	assert_int_equal(b.done, 1);
}

static void test_ipv6_and_names(void **state)
{
	uv_loop_init(&loop);
	server_t v6, v4;
	int have6 = server_start(&v6, "::1", ANSWER) == 0;
	assert_int_equal(server_start(&v4, "127.0.0.1", ANSWER), 0);
	sc_hcli_t *c = sc_hcli_new(&loop, NULL);
	char url[80];
	if (have6) {
		rec_t x = {0};
		assert_int_equal(start(c, url_of(url, sizeof(url), "[::1]", v6.port), 5000, &x), 0);
		run_until_done(&x, 1);
		assert_int_equal(x.err, 0);
		assert_int_equal(x.status, 200);
		assert_int_equal(v6.requests, 1);
	}
	/* "LOCALHOST" is not short-cut to 127.0.0.1: it goes through the
	 * resolver (/etc/hosts matches names without regard to case). */
	rec_t n = {0};
	assert_int_equal(start(c, url_of(url, sizeof(url), "LOCALHOST", v4.port), 5000, &n), 0);
	run_until_done(&n, 1);
	assert_int_equal(n.err, 0);
	assert_int_equal(n.status, 200);
	assert_int_equal(v4.requests, 1);
	sc_hcli_close(c);
	loop_end();
}

/* A name being resolved when the client closes: one on_done, and the
 * resolution's late return touches nothing freed. */
static void test_close_while_resolving(void **state)
{
	uv_loop_init(&loop);
	server_t srv;
	assert_int_equal(server_start(&srv, "127.0.0.1", ANSWER), 0);
	sc_hcli_t *c = sc_hcli_new(&loop, NULL);
	char url[80];
	rec_t x = {0};
	assert_int_equal(start(c, url_of(url, sizeof(url), "LOCALHOST", srv.port), 5000, &x), 0);
	sc_hcli_close(c);
	assert_int_equal(x.done, 1);
	assert_int_equal(x.err, SC_ECANCELED);
	loop_end();
	assert_int_equal(x.done, 1);
}

/* ---- a name's addresses -------------------------------------------------- */

/* "127.1" is a name to hurl (not a dotted quad) that getaddrinfo answers
 * without asking any server (inet_aton): 127.0.0.1. */
static void addr4(struct sockaddr_storage *a, const char *ip, int port)
{
	memset(a, 0, sizeof(*a));
	uv_ip4_addr(ip, port, (struct sockaddr_in *)a);
}

static void on_tick(uv_timer_t *t)
{
	*(int *)t->data = 1;
}

static void run_for(uint64_t ms)
{
	uv_timer_t t;
	int over = 0;
	uv_timer_init(&loop, &t);
	t.data = &over;
	uv_timer_start(&t, on_tick, ms, 0);
	while (!over)
		uv_run(&loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(&loop, UV_RUN_NOWAIT);
}

/* A name whose first address refuses: the second is dialled and answers;
 * one whose addresses all refuse: SC_EIO once, and the next connection
 * asks the resolver again (which gives the live one). */
static void test_name_tries_each_address(void **state)
{
	uv_loop_init(&loop);
	server_t srv;
	assert_int_equal(server_start(&srv, "127.0.0.1", ANSWER), 0);
	sc_hcli_t *c = sc_hcli_new(&loop, NULL);
	char url[64];
	url_of(url, sizeof(url), "127.1", srv.port);
	struct sockaddr_storage a[2];
	addr4(&a[0], "127.0.0.2", srv.port); /* nothing listens there: refused */
	addr4(&a[1], "127.0.0.1", srv.port);
	sc__hcli_resolved(c, url, a, 2);
	rec_t x = {0};
	assert_int_equal(start(c, url, 5000, &x), 0);
	run_until_done(&x, 1);
	assert_int_equal(x.err, 0);
	assert_int_equal(x.status, 200);
	assert_int_equal(c->resolves, 0);
	sc_hcli_close(c);

	c = sc_hcli_new(&loop, NULL);
	addr4(&a[1], "127.0.0.3", srv.port);
	sc__hcli_resolved(c, url, a, 2);
	rec_t d = {0}, y = {0};
	assert_int_equal(start(c, url, 5000, &d), 0);
	run_until_done(&d, 1);
	assert_int_equal(d.err, SC_EIO);
	assert_int_equal(start(c, url, 5000, &y), 0);
	run_until_done(&y, 1);
	assert_int_equal(y.err, 0);
	assert_int_equal(c->resolves, 1);
	assert_int_equal(srv.requests, 2);
	sc_hcli_close(c);
	loop_end();
	assert_int_equal(d.done, 1);
}

/* A first address that never answers the SYN (a listener whose accept
 * queue is full drops it): after the connect limit, the next one. */
static void test_name_silent_address(void **state)
{
	uv_loop_init(&loop);
	server_t srv;
	assert_int_equal(server_start(&srv, "127.0.0.1", ANSWER), 0);
	struct sockaddr_storage a[2];
	addr4(&a[0], "127.0.0.2", srv.port);
	addr4(&a[1], "127.0.0.1", srv.port);
	int l = socket(AF_INET, SOCK_STREAM, 0), f = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(l, (struct sockaddr *)&a[0], sizeof(struct sockaddr_in)), 0);
	assert_int_equal(listen(l, 0), 0);
	assert_int_equal(connect(f, (struct sockaddr *)&a[0], sizeof(struct sockaddr_in)), 0);
	sc_hcli_opts_t o = {.connect_timeout_ms = 1500};
	sc_hcli_t *c = sc_hcli_new(&loop, &o);
	char url[64];
	url_of(url, sizeof(url), "127.1", srv.port);
	sc__hcli_resolved(c, url, a, 2);
	rec_t x = {0};
	assert_int_equal(start(c, url, 0, &x), 0);
	run_until_done(&x, 1);
	assert_int_equal(x.err, 0);
	assert_int_equal(x.status, 200);
	sc_hcli_close(c);
	loop_end();
	close(f);
	close(l);
}

/* A name is resolved once for the connections opened within the TTL,
 * and again after it. */
static void test_name_cache(void **state)
{
	uv_loop_init(&loop);
	server_t srv;
	assert_int_equal(server_start(&srv, "127.0.0.1", ANSWER), 0);
	sc_hcli_t *c = sc_hcli_new(&loop, NULL); /* 10 s */
	sc_hcli_opts_t o = {.dns_ttl_ms = 1};
	sc_hcli_t *brief = sc_hcli_new(&loop, &o);
	char url[64];
	url_of(url, sizeof(url), "127.1", srv.port);
	rec_t x[3] = {0}, y[3] = {0};
	assert_int_equal(start(c, url, 5000, &x[0]), 0);
	assert_int_equal(start(brief, url, 5000, &y[0]), 0);
	run_until_done(x, 1);
	run_until_done(y, 1);
	run_for(20); /* brief's answer is now too old; c's is not */
	/* One pooled connection and one new one each. */
	for (int i = 1; i < 3; i++) {
		assert_int_equal(start(c, url, 5000, &x[i]), 0);
		assert_int_equal(start(brief, url, 5000, &y[i]), 0);
	}
	run_until_done(x, 3);
	run_until_done(y, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(x[i].err, 0);
		assert_int_equal(y[i].err, 0);
	}
	assert_int_equal(srv.accepted, 4);
	assert_int_equal(c->resolves, 1);
	assert_int_equal(brief->resolves, 2);
	sc_hcli_close(c);
	sc_hcli_close(brief);
	loop_end();
}

static void test_urls(void **state)
{
	char host[256];
	int port;
	const char *path;
	assert_int_equal(
	    sc_hcli_parse_url("http://[::1]:8080/a?b", host, sizeof(host), &port, &path), 0);
	assert_string_equal(host, "::1");
	assert_int_equal(port, 8080);
	assert_string_equal(path, "/a?b");
	assert_int_equal(
	    sc_hcli_parse_url("https://api.example.com", host, sizeof(host), &port, &path), 0);
	assert_string_equal(host, "api.example.com");
	assert_int_equal(port, 443);
	assert_string_equal(path, "/");
	assert_int_equal(
	    sc_hcli_parse_url("http://localhost:9/x", host, sizeof(host), &port, &path), 0);
	assert_string_equal(host, "127.0.0.1");
	static const char *const bad[] = {
	    "ftp://h/",          "http://",         "http:///x",
	    "http://[::1/x",     "http://[zz]:80/", "http://::1:80/",
	    "http://h:0/",       "http://h:65536/", "http://h:80x/",
	    "http://h:/",        "http://a b/",     "http://h:-1/",
	    "http://[::1]x:80/", "http://h%41/",    "",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(sc_hcli_parse_url(bad[i], host, sizeof(host), &port, &path),
		                 SC_EINVAL);
	char longname[300];
	snprintf(longname, sizeof(longname), "http://%0260d/", 0);
	assert_int_equal(sc_hcli_parse_url(longname, host, sizeof(host), &port, &path), SC_EINVAL);
	/* A bad URL starts nothing and calls nothing. */
	uv_loop_init(&loop);
	sc_hcli_t *c = sc_hcli_new(&loop, NULL);
	rec_t x = {0};
	assert_int_equal(start(c, "http://[::1/x", 0, &x), SC_EINVAL);
	assert_int_equal(start(c, "https://127.0.0.1/x", 0, &x), SC_EINVAL); /* no TLS context */
	sc_hcli_close(c);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(x.done, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_answer_and_keep_alive),
	    cmocka_unit_test(test_close_ends_every_request),
	    cmocka_unit_test(test_cancel_calls_done_once),
	    cmocka_unit_test(test_stop_from_callbacks),
	    cmocka_unit_test(test_stream_then_cancel),
	    cmocka_unit_test(test_timeout_and_refused),
	    cmocka_unit_test(test_close_from_done),
	    cmocka_unit_test(test_ipv6_and_names),
	    cmocka_unit_test(test_close_while_resolving),
	    cmocka_unit_test(test_name_tries_each_address),
	    cmocka_unit_test(test_name_silent_address),
	    cmocka_unit_test(test_name_cache),
	    cmocka_unit_test(test_urls),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
