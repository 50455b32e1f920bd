/* The async HTTP client (net/hclient.h) over TLS against a server on the
 * loopback that controls its records and its timing (OpenSSL on memory
 * BIOs, in the test's own loop): an answer whose last read decrypts to more
 * than one read slab, session tickets and a KeyUpdate that arrive while the
 * connection sits idle in the pool, a close_notify ending a close-delimited
 * body, and every way a connection can die (a server that never finishes
 * the handshake, one that hangs up inside it, one that does not speak TLS,
 * a reset mid-answer, a close racing the next request). Each request must
 * end with exactly one on_done, with the answer or an error, in time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <uv.h>

#include "net/hclient.h"
#include "net/tls.h"
#include "starcloud/error.h"

/* ---- a certificate for 127.0.0.1, made here ---------------------------- */

static EVP_PKEY *key;
static X509 *cert;
static char ca_pem[4096];
static size_t ca_len;

static void add_ext(X509 *x, int nid, const char *value)
{
	X509V3_CTX v;
	X509V3_set_ctx_nodb(&v);
	X509V3_set_ctx(&v, x, x, NULL, NULL, 0);
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v, nid, value);
	assert_non_null(e);
	X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
}

static void make_cert(void)
{
	key = EVP_EC_gen("P-256");
	assert_non_null(key);
	cert = X509_new();
	X509_set_version(cert, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
	X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
	X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
	X509_set_pubkey(cert, key);
	X509_NAME *n = X509_get_subject_name(cert);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"127.0.0.1", -1,
	                           -1, 0);
	X509_set_issuer_name(cert, n);
	add_ext(cert, NID_basic_constraints, "critical,CA:TRUE");
	add_ext(cert, NID_subject_alt_name, "IP:127.0.0.1");
	assert_true(X509_sign(cert, key, EVP_sha256()) > 0);
	BIO *b = BIO_new(BIO_s_mem());
	PEM_write_bio_X509(b, cert);
	int n2 = BIO_read(b, ca_pem, sizeof(ca_pem) - 1);
	assert_true(n2 > 0);
	ca_len = (size_t)n2;
	BIO_free(b);
}

/* ---- the server ---------------------------------------------------------- */

enum {
	ANSWER,       /* "hello" for each request, keep-alive */
	BIG_TAIL,     /* 5 records of 15000 bytes: the last read decrypts to 75000 */
	LATE_TICKET,  /* as ANSWER, then a session ticket and a KeyUpdate while idle */
	CLOSE_NOTIFY, /* a close-delimited body ended by close_notify (TCP stays open) */
	NO_HANDSHAKE, /* takes the connection, never answers the ClientHello */
	HANG_UP,      /* closes the connection on the ClientHello */
	PLAIN_HTTP,   /* answers the ClientHello in plain HTTP */
	RESET_MID,    /* the head and part of the body, then a reset */
	CLOSE_AFTER,  /* answers, then closes at once (FIN) */
};

#define RECORD 15000
#define BIG_TOTAL (5 * RECORD)
#define BIG_HEAD 42 /* "HTTP/1.1 200 OK\r\nContent-Length: 74958\r\n\r\n" */

typedef struct server {
	int mode;
	uv_tcp_t tcp;
	int port;
	int accepted;
	int requests;
	int ticket_sent; /* LATE_TICKET: the ticket and KeyUpdate went out */
	SSL_CTX *ctx;
} server_t;

typedef struct tconn {
	uv_tcp_t tcp; /* first: the handle is the connection (on_walk_close) */
	uv_timer_t timer;
	server_t *srv;
	SSL *ssl;
	BIO *rb, *wb;
	char req[8192];
	size_t len;
	int handles; /* tcp and timer: freed when both have closed */
	char *tail;  /* BIG_TAIL: ciphertext held back for the timer */
	size_t tail_len;
} tconn_t;

static uv_loop_t loop;

static void on_tclosed(uv_handle_t *h)
{
	tconn_t *c = h->data;
	if (--c->handles > 0)
		return;
	SSL_free(c->ssl);
	free(c->tail);
	free(c);
}

/* Closes the connection (reset: with a TCP reset instead of a FIN). */
static void tclose_how(tconn_t *c, int reset)
{
	if (!uv_is_closing((uv_handle_t *)&c->timer))
		uv_close((uv_handle_t *)&c->timer, on_tclosed);
	if (uv_is_closing((uv_handle_t *)&c->tcp))
		return;
	if (reset)
		uv_tcp_close_reset(&c->tcp, on_tclosed);
	else
		uv_close((uv_handle_t *)&c->tcp, on_tclosed);
}

static void tclose(tconn_t *c)
{
	tclose_how(c, 0);
}

static void on_twritten(uv_write_t *w, int status)
{
	free(w);
}

static void traw(tconn_t *c, const char *data, size_t n)
{
	uv_write_t *w = malloc(sizeof(*w) + n);
	char *copy = (char *)(w + 1);
	memcpy(copy, data, n);
	uv_buf_t b = uv_buf_init(copy, (unsigned)n);
	uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, on_twritten);
}

/* Takes the ciphertext waiting in the write BIO (caller frees). */
static char *take(tconn_t *c, size_t *len)
{
	size_t n = (size_t)BIO_pending(c->wb);
	char *p = malloc(n + 1);
	*len = n ? (size_t)BIO_read(c->wb, p, (int)n) : 0;
	return p;
}

static void tflush(tconn_t *c)
{
	size_t n;
	char *p = take(c, &n);
	if (n)
		traw(c, p, n);
	free(p);
}

/* One SSL_write, one record (each is below the 16 KiB record limit). */
static void tput(tconn_t *c, const char *s, size_t n)
{
	assert_int_equal(SSL_write(c->ssl, s, (int)n), (int)n);
}

static void on_ttimer(uv_timer_t *t)
{
	tconn_t *c = t->data;
	if (c->srv->mode == BIG_TAIL) {
		traw(c, c->tail, c->tail_len);
		return;
	}
	/* LATE_TICKET: both arrive while the client's connection is idle. */
	assert_int_equal(SSL_new_session_ticket(c->ssl), 1);
	assert_int_equal(SSL_do_handshake(c->ssl), 1);
	assert_int_equal(SSL_key_update(c->ssl, SSL_KEY_UPDATE_REQUESTED), 1);
	assert_int_equal(SSL_do_handshake(c->ssl), 1);
	c->srv->ticket_sent = 1;
	tflush(c);
}

static void answer(tconn_t *c)
{
	server_t *srv = c->srv;
	static const char hello[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
	switch (srv->mode) {
	case BIG_TAIL: {
		static char plain[BIG_TOTAL + 1];
		int h =
		    snprintf(plain, sizeof(plain), "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n",
		             BIG_TOTAL - BIG_HEAD);
		assert_int_equal(h, BIG_HEAD);
		memset(plain + h, 'x', BIG_TOTAL - (size_t)h);
		for (size_t off = 0; off < BIG_TOTAL; off += RECORD)
			tput(c, plain + off, RECORD);
		/* Most of the first record now; the rest (its end and four whole
		 * records, < 64 KiB: one read) once the client has read that. */
		size_t n;
		char *p = take(c, &n);
		traw(c, p, 14000);
		c->tail_len = n - 14000;
		c->tail = malloc(c->tail_len);
		memcpy(c->tail, p + 14000, c->tail_len);
		free(p);
		uv_timer_start(&c->timer, on_ttimer, 100, 0);
		return;
	}
	case CLOSE_NOTIFY: {
		static const char head[] =
		    "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end";
		tput(c, head, sizeof(head) - 1);
		SSL_shutdown(c->ssl);
		tflush(c);
		return;
	}
	case RESET_MID: {
		static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart";
		tput(c, head, sizeof(head) - 1);
		tflush(c);
		tclose_how(c, 1);
		return;
	}
	default:
		tput(c, hello, sizeof(hello) - 1);
		tflush(c);
		if (srv->mode == LATE_TICKET && srv->requests == 1)
			uv_timer_start(&c->timer, on_ttimer, 100, 0);
		if (srv->mode == CLOSE_AFTER)
			tclose(c);
	}
}

static void on_talloc(uv_handle_t *h, size_t sz, uv_buf_t *b)
{
	static char slab[65536];
	*b = uv_buf_init(slab, sizeof(slab));
}

static void on_tread(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	tconn_t *c = s->data;
	server_t *srv = c->srv;
	if (n < 0) {
		tclose(c);
		return;
	}
	if (srv->mode == HANG_UP) {
		tclose(c);
		return;
	}
	if (srv->mode == PLAIN_HTTP) {
		static const char no[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
		traw(c, no, sizeof(no) - 1);
		return;
	}
	BIO_write(c->rb, b->base, (int)n);
	if (!SSL_is_init_finished(c->ssl) && SSL_do_handshake(c->ssl) != 1) {
		tflush(c);
		return;
	}
	tflush(c);
	int m;
	while ((m = SSL_read(c->ssl, c->req + c->len, (int)(sizeof(c->req) - c->len - 1))) > 0) {
		c->len += (size_t)m;
		c->req[c->len] = '\0';
	}
	tflush(c); /* our answer to the client's KeyUpdate, if any */
	char *end;
	while ((end = strstr(c->req, "\r\n\r\n"))) {
		size_t used = (size_t)(end + 4 - c->req);
		memmove(c->req, c->req + used, c->len - used + 1);
		c->len -= used;
		srv->requests++;
		answer(c);
		if (uv_is_closing((uv_handle_t *)&c->tcp))
			return;
	}
}

static void on_tconn(uv_stream_t *l, int status)
{
	server_t *srv = l->data;
	tconn_t *c = calloc(1, sizeof(*c));
	c->srv = srv;
	uv_tcp_init(&loop, &c->tcp);
	uv_timer_init(&loop, &c->timer);
	c->tcp.data = c->timer.data = c;
	c->handles = 2;
	c->ssl = SSL_new(srv->ctx);
	c->rb = BIO_new(BIO_s_mem());
	c->wb = BIO_new(BIO_s_mem());
	SSL_set_bio(c->ssl, c->rb, c->wb);
	SSL_set_accept_state(c->ssl);
	if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0) {
		tclose(c);
		return;
	}
	srv->accepted++;
	if (srv->mode != NO_HANDSHAKE)
		uv_read_start((uv_stream_t *)&c->tcp, on_talloc, on_tread);
}

static void server_start(server_t *srv, int mode)
{
	memset(srv, 0, sizeof(*srv));
	srv->mode = mode;
	srv->ctx = SSL_CTX_new(TLS_server_method());
	SSL_CTX_use_certificate(srv->ctx, cert);
	SSL_CTX_use_PrivateKey(srv->ctx, key);
	SSL_CTX_set_min_proto_version(srv->ctx, TLS1_3_VERSION);
	if (mode == LATE_TICKET)
		SSL_CTX_set_num_tickets(srv->ctx, 0); /* none in the handshake: later */
	struct sockaddr_in a;
	uv_ip4_addr("127.0.0.1", 0, &a);
	uv_tcp_init(&loop, &srv->tcp);
	srv->tcp.data = srv;
	assert_int_equal(uv_tcp_bind(&srv->tcp, (const struct sockaddr *)&a, 0), 0);
	assert_int_equal(uv_listen((uv_stream_t *)&srv->tcp, 64, on_tconn), 0);
	struct sockaddr_storage got;
	int len = sizeof(got);
	uv_tcp_getsockname(&srv->tcp, (struct sockaddr *)&got, &len);
	srv->port = ntohs(((struct sockaddr_in *)&got)->sin_port);
}

/* Closes what is left once the client is closed (its handles are all
 * closing by then): the listener, and the server's connections. */
static void on_walk_close(uv_handle_t *h, void *srv)
{
	if (uv_is_closing(h))
		return;
	if (h == (uv_handle_t *)&((server_t *)srv)->tcp)
		uv_close(h, NULL);
	else
		tclose(h->data);
}

static void loop_end(server_t *srv)
{
	uv_walk(&loop, on_walk_close, srv);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	SSL_CTX_free(srv->ctx);
}

/* ---- the client ---------------------------------------------------------- */

typedef struct rec {
	int done, err, status;
	size_t blen;
	char body[64];
	sc_hcli_t *c;
	const char *then; /* a URL to start from on_done (the race with a close) */
	struct rec *next;
} rec_t;

static int on_head(sc_hcli_req_t *r, int status, void *ud)
{
	((rec_t *)ud)->status = status;
	return 0;
}

static int on_data(sc_hcli_req_t *r, const char *d, size_t n, void *ud)
{
	rec_t *x = ud;
	if (x->blen + n < sizeof(x->body))
		memcpy(x->body + x->blen, d, n);
	x->blen += n;
	return 0;
}

static int start(sc_hcli_t *c, const char *url, uint64_t timeout_ms, rec_t *x);

static void on_done(sc_hcli_req_t *r, int err, void *ud)
{
	rec_t *x = ud;
	x->done++;
	x->err = err;
	if (x->then && x->next)
		assert_int_equal(start(x->c, x->then, 10000, x->next), 0);
}

static int start(sc_hcli_t *c, const char *url, uint64_t timeout_ms, rec_t *x)
{
	x->c = c;
	sc_hcli_call_t call = {.method = "GET",
	                       .url = url,
	                       .timeout_ms = timeout_ms,
	                       .cbs = {on_head, on_data, on_done},
	                       .ud = x};
	return sc_hcli_start(c, &call, NULL);
}

/* Runs the loop until x is done; fails after limit_ms (a hang). */
static void run_until_done(rec_t *x, uint64_t limit_ms)
{
	uv_update_time(&loop);
	uint64_t until = uv_now(&loop) + limit_ms;
	while (!x->done) {
		assert_true(uv_now(&loop) < until);
		uv_run(&loop, UV_RUN_ONCE);
	}
}

static void on_wait(uv_timer_t *t)
{
	*(int *)t->data = 1;
}

/* Runs the loop for ms of loop time. */
static void run_for(uint64_t ms)
{
	uv_timer_t t;
	int over = 0;
	uv_timer_init(&loop, &t);
	t.data = &over;
	uv_timer_start(&t, on_wait, ms, 0);
	while (!over)
		uv_run(&loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(&loop, UV_RUN_NOWAIT);
}

static sc_tls_ctx_t *client_ctx(void)
{
	sc_tls_pem_t p = {.ca = ca_pem, .ca_len = ca_len};
	sc_tls_ctx_t *ctx = NULL;
	char err[256];
	assert_int_equal(sc_tls_client_ctx_pem(&p, &ctx, err, sizeof(err)), 0);
	return ctx;
}

typedef struct fixture {
	server_t srv;
	sc_tls_ctx_t *ctx;
	sc_hcli_t *c;
	char url[64];
} fixture_t;

static void setup(fixture_t *f, int mode, uint64_t connect_ms)
{
	uv_loop_init(&loop);
	server_start(&f->srv, mode);
	f->ctx = client_ctx();
	sc_hcli_opts_t o = {.connect_timeout_ms = connect_ms};
	f->c = sc_hcli_new(&loop, &o);
	sc_hcli_set_tls(f->c, f->ctx);
	snprintf(f->url, sizeof(f->url), "https://127.0.0.1:%d/x", f->srv.port);
}

static void teardown(fixture_t *f)
{
	sc_hcli_close(f->c);
	loop_end(&f->srv);
	sc_tls_ctx_free(f->ctx);
}

/* One request on f (limit_ms: its own time limit, 0 for none), run until
 * it is done; the deadline only bounds a failing test. */
static void request(fixture_t *f, uint64_t limit_ms, rec_t *x)
{
	assert_int_equal(start(f->c, f->url, limit_ms, x), 0);
	run_until_done(x, 30000);
}

/* A request with no limit of its own against a server in mode ends once,
 * with err. */
static void expect_failure(int mode, uint64_t connect_ms, int err)
{
	fixture_t f;
	setup(&f, mode, connect_ms);
	rec_t x = {0};
	request(&f, 0, &x);
	assert_int_equal(x.err, err);
	assert_int_equal(x.done, 1);
	teardown(&f);
}

/* ---- tests --------------------------------------------------------------- */

/* The answer's last read completes five records (75000 bytes of plaintext,
 * more than the 64 KiB read slab): all of it reaches the parser. */
static void test_big_last_read(void **state)
{
	fixture_t f;
	setup(&f, BIG_TAIL, 5000);
	rec_t x = {0};
	request(&f, 20000, &x);
	assert_int_equal(x.err, 0);
	assert_int_equal(x.status, 200);
	assert_int_equal(x.blen, BIG_TOTAL - BIG_HEAD);
	teardown(&f);
}

/* A session ticket and a KeyUpdate reach the pooled connection while it is
 * idle: it answers the KeyUpdate, stays pooled, and carries the next
 * request under the new keys. */
static void test_late_ticket_keeps_connection(void **state)
{
	fixture_t f;
	setup(&f, LATE_TICKET, 5000);
	rec_t a = {0}, b = {0};
	request(&f, 10000, &a);
	assert_int_equal(a.err, 0);
	/* Once the server has sent them, the client reads them at once (the
	 * same loop, the loopback): 300 ms is far more than needed, and too
	 * short a wait could only make the test miss a regression, never fail. */
	uv_update_time(&loop);
	uint64_t until = uv_now(&loop) + 30000;
	while (!f.srv.ticket_sent) {
		assert_true(uv_now(&loop) < until);
		uv_run(&loop, UV_RUN_ONCE);
	}
	run_for(300);
	request(&f, 10000, &b);
	assert_int_equal(b.err, 0);
	assert_int_equal(b.status, 200);
	assert_memory_equal(b.body, "hello", 5);
	assert_int_equal(f.srv.accepted, 1); /* the same connection */
	assert_int_equal(f.srv.requests, 2);
	teardown(&f);
}

/* close_notify ends a close-delimited body, the socket still open. */
static void test_close_notify_ends_body(void **state)
{
	fixture_t f;
	setup(&f, CLOSE_NOTIFY, 5000);
	rec_t x = {0};
	request(&f, 20000, &x);
	assert_int_equal(x.err, 0);
	assert_int_equal(x.blen, strlen("until the end"));
	assert_memory_equal(x.body, "until the end", x.blen);
	teardown(&f);
}

/* A server that takes the connection and never finishes the handshake:
 * a request with no limit of its own (a watch) still ends, at the connect
 * limit. */
static void test_handshake_never_finishes(void **state)
{
	expect_failure(NO_HANDSHAKE, 300, SC_ELIMIT);
}

/* Hung up on inside the handshake, or answered in plain HTTP: SC_EIO. */
static void test_handshake_failures(void **state)
{
	expect_failure(HANG_UP, 5000, SC_EIO);
	expect_failure(PLAIN_HTTP, 5000, SC_EIO);
}

/* A reset in the middle of the body: SC_EIO, once. */
static void test_reset_mid_answer(void **state)
{
	expect_failure(RESET_MID, 5000, SC_EIO);
}

/* The server closes each connection right after its answer; the next
 * request is started from on_done, before that close is read, on the
 * pooled connection: it is sent again on a new one and answered. */
static void test_close_races_next_request(void **state)
{
	fixture_t f;
	setup(&f, CLOSE_AFTER, 5000);
	rec_t b = {0}, a = {.then = f.url, .next = &b};
	request(&f, 10000, &a);
	run_until_done(&b, 30000);
	assert_int_equal(a.err, 0);
	assert_int_equal(b.err, 0);
	assert_int_equal(b.status, 200);
	assert_int_equal(b.done, 1);
	assert_int_equal(f.srv.accepted, 2);
	teardown(&f);
}

int main(void)
{
	make_cert();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_big_last_read),
	    cmocka_unit_test(test_late_ticket_keeps_connection),
	    cmocka_unit_test(test_close_notify_ends_body),
	    cmocka_unit_test(test_handshake_never_finishes),
	    cmocka_unit_test(test_handshake_failures),
	    cmocka_unit_test(test_reset_mid_answer),
	    cmocka_unit_test(test_close_races_next_request),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	X509_free(cert);
	EVP_PKEY_free(key);
	return rc;
}
