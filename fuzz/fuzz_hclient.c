/* libFuzzer target: the async HTTP client's handling of responses
 * (net/hclient.c: the fast head scanner, http_parser, chunked and
 * length-delimited bodies, keep-alive reuse), fed through a real loopback
 * connection so the client runs exactly as in the gateway.
 *
 * A small server on 127.0.0.1 answers each request with the input bytes
 * and closes. Whatever they are, the request must end with exactly one
 * on_done (after a stop asked from a callback, SC_ECANCELED), never crash or
 * leak, and a complete answer has a status from 100 to 599 and no more
 * body bytes than were sent. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "net/hclient.h"
#include "starcloud/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uv_loop_t loop;
static uv_tcp_t server;
static int port;
static sc_hcli_t *hc;
static const uint8_t *answer;
static size_t answer_len;

typedef struct conn {
	uv_tcp_t tcp;
	uv_write_t w;
	int wrote;
} conn_t;

static void on_closed(uv_handle_t *h)
{
	free(h->data);
}

static void on_written(uv_write_t *w, int status)
{
	conn_t *c = w->data;
	uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_alloc(uv_handle_t *h, size_t sz, uv_buf_t *b)
{
	static char buf[65536];
	*b = uv_buf_init(buf, sizeof(buf));
}

/* Answers once the request's head has arrived (the client writes it whole). */
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	conn_t *c = s->data;
	if (n < 0) {
		if (!c->wrote)
			uv_close((uv_handle_t *)&c->tcp, on_closed);
		return;
	}
	if (n == 0 || c->wrote)
		return;
	c->wrote = 1;
	uv_read_stop(s);
	uv_buf_t out = uv_buf_init((char *)answer, (unsigned)answer_len);
	c->w.data = c;
	uv_write(&c->w, s, &out, 1, on_written);
}

static void on_conn(uv_stream_t *srv, int status)
{
	conn_t *c = calloc(1, sizeof(*c));
	uv_tcp_init(&loop, &c->tcp);
	c->tcp.data = c;
	if (uv_accept(srv, (uv_stream_t *)&c->tcp) < 0) {
		uv_close((uv_handle_t *)&c->tcp, on_closed);
		return;
	}
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

typedef struct result {
	int done, status, err, stop_at;
	size_t body, heads, datas;
} result_t;

static int on_head(sc_hcli_req_t *r, int status, void *ud)
{
	result_t *res = ud;
	res->heads++;
	res->status = status;
	return res->stop_at == 1;
}

static int on_data(sc_hcli_req_t *r, const char *d, size_t n, void *ud)
{
	result_t *res = ud;
	res->body += n;
	return res->stop_at == 2 && ++res->datas == 1;
}

static void on_done(sc_hcli_req_t *r, int err, void *ud)
{
	result_t *res = ud;
	res->done++;
	res->err = err;
}

static void setup(void)
{
	uv_loop_init(&loop);
	uv_tcp_init(&loop, &server);
	struct sockaddr_in a;
	uv_ip4_addr("127.0.0.1", 0, &a);
	if (uv_tcp_bind(&server, (const struct sockaddr *)&a, 0) < 0 ||
	    uv_listen((uv_stream_t *)&server, 128, on_conn) < 0)
		abort();
	struct sockaddr_storage got;
	int len = sizeof(got);
	uv_tcp_getsockname(&server, (struct sockaddr *)&got, &len);
	port = ntohs(((struct sockaddr_in *)&got)->sin_port);
	sc_hcli_opts_t o = {.max_idle_per_host = 4, .connect_timeout_ms = 1000};
	hc = sc_hcli_new(&loop, &o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!hc)
		setup();
	if (size < 1 || size > 65536)
		return 0;
	/* The first byte: stop from on_head, from the first on_data, or never. */
	result_t res = {.stop_at = data[0] % 3};
	answer = data + 1;
	answer_len = size - 1;
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/x", port);
	sc_hcli_call_t call = {.method = "GET",
	                       .url = url,
	                       .timeout_ms = 2000,
	                       .cbs = {on_head, on_data, on_done},
	                       .ud = &res};
	if (sc_hcli_start(hc, &call, NULL) < 0)
		abort();
	int stopped = 0;
	while (!res.done) {
		uv_run(&loop, UV_RUN_ONCE);
		stopped = (res.stop_at == 1 && res.heads) || (res.stop_at == 2 && res.datas);
	}
	/* Let the server's side of the connection close. */
	for (int i = 0; i < 4; i++)
		uv_run(&loop, UV_RUN_NOWAIT);
	if (res.done != 1 || (stopped && res.err != SC_ECANCELED))
		abort();
	if (res.done && res.err == 0 && (res.status < 100 || res.status > 599))
		abort();
	if (res.body > answer_len)
		abort();
	return 0;
}
