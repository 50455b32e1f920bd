/* Asynchronous HTTP/1.1 client on libuv + http_parser.
 *
 * One sc_hcli_t per event loop holds a keep-alive connection pool per
 * backend (host:port). A request borrows an idle connection or opens a new
 * one, writes the request, and reports the answer through three callbacks:
 * on_head once the status line and headers are in, on_data for each piece
 * of the body as it arrives (nothing is buffered here, so server-sent
 * events pass straight through), and on_done exactly once at the end.
 * After on_done returns the request object is gone.
 *
 * A connection taken from the pool may have been closed by the server while
 * idle; when such a connection fails before any byte of the answer came
 * back, the request is sent once more on a fresh connection (what nginx and
 * Envoy do), so callers never see a stale keep-alive as a backend failure.
 *
 * Only IPv4 literals and "localhost" are accepted as hosts: the platform's
 * daemons talk to each other by address, and no resolver runs on the loop.
 *
 * Errors given to on_done: 0 complete; SC_EIO connection refused, reset or
 * closed early; SC_ELIMIT the inactivity timeout fired; SC_ETOOBIG the
 * response headers passed the limit; SC_EPARSE a malformed response. */
#ifndef SC_NET_HCLIENT_H
#define SC_NET_HCLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

typedef struct sc_hcli sc_hcli_t;
typedef struct sc_tls_ctx sc_tls_ctx_t;
typedef struct sc_hcli_req sc_hcli_req_t;

typedef struct sc_hcli_opts {
	size_t max_idle_per_host;    /* idle keep-alive connections kept; default 64 */
	size_t max_header_bytes;     /* response status line + headers; default 16 KiB */
	uint64_t idle_close_ms;      /* idle pooled connection closed after; default 30 s */
	uint64_t connect_timeout_ms; /* default 2 s */
} sc_hcli_opts_t;

/* Return non-zero from on_head or on_data to stop reading (the request is
 * then cancelled: no further callback, on_done included). */
typedef struct sc_hcli_cbs {
	int (*on_head)(sc_hcli_req_t *r, int status, void *ud);
	int (*on_data)(sc_hcli_req_t *r, const char *data, size_t len, void *ud);
	void (*on_done)(sc_hcli_req_t *r, int err, void *ud);
} sc_hcli_cbs_t;

typedef struct sc_hcli_call {
	const char *method;  /* "GET", "POST", ... */
	const char *url;     /* http://HOST:PORT/path?query (borrowed, copied) */
	const char *headers; /* extra "Name: value\r\n" lines or NULL (copied) */
	const void *body;    /* copied; NULL for none */
	size_t body_len;
	const char *ctype;   /* Content-Type of body; default application/json */
	uint64_t timeout_ms; /* inactivity limit: connect, first byte, between reads; 0 = none */
	uint64_t idle_timeout_ms; /* once the answer has started: the limit between reads
	                             instead of timeout_ms (0 = timeout_ms) */
	sc_hcli_cbs_t cbs;
	void *ud;
} sc_hcli_call_t;

/* Creates a client on loop (borrowed); opts may be NULL for defaults. */
sc_hcli_t *sc_hcli_new(uv_loop_t *loop, const sc_hcli_opts_t *opts);
/* Cancels every request (without callbacks) and closes every connection;
 * memory is released once libuv has closed the handles. Accepts NULL. */
void sc_hcli_close(sc_hcli_t *c);

/* Starts a request. On success *out (may be NULL) is the request, valid
 * until on_done returns or sc_hcli_cancel. SC_EINVAL for a bad URL. The
 * callbacks never run before sc_hcli_start has returned. */
int sc_hcli_start(sc_hcli_t *c, const sc_hcli_call_t *call, sc_hcli_req_t **out);
/* https:// URLs go through TLS with ctx (a client context, net/tls.h;
 * borrowed, must outlive the client); without it they are SC_EINVAL. */
void sc_hcli_set_tls(sc_hcli_t *c, sc_tls_ctx_t *ctx);
/* Abandons a request: its connection is closed, no callback runs. */
void sc_hcli_cancel(sc_hcli_req_t *r);

/* The answer's status (0 before on_head) and a header (case-insensitive,
 * NULL when absent); borrowed, valid as the request. */
int sc_hcli_status(const sc_hcli_req_t *r);
/* True once the request was written on an open connection: a request that
 * failed without reaching the server (connection refused) is always safe
 * to send elsewhere, and costs that server nothing. */
int sc_hcli_reached(const sc_hcli_req_t *r);
const char *sc_hcli_header(const sc_hcli_req_t *r, const char *name);

/* Splits http(s)://HOST:PORT/path into its parts (port defaults to 80/443).
 * Returns SC_EINVAL for anything else. */
int sc_hcli_parse_url(const char *url, char *host, size_t hostsz, int *port, const char **path);

#endif
