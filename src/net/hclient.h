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
 * Exactly once means every way a request can end: complete, failed, timed
 * out, cancelled with sc_hcli_cancel, stopped by a callback's non-zero
 * return, or cut off by sc_hcli_close. The last three give SC_ECANCELED.
 * This is the one async HTTP client of the daemons (docs/ARCHITECTURE.md);
 * net/hfetch.h is its buffered form for control-plane calls.
 *
 * A connection taken from the pool may have been closed by the server while
 * idle; when such a connection fails before any byte of the answer came
 * back, the request is sent once more on a fresh connection (what nginx and
 * Envoy do), so callers never see a stale keep-alive as a backend failure.
 *
 * Hosts (net/hurl.h): IPv4 literals, IPv6 literals in brackets, and names,
 * resolved with uv_getaddrinfo (libuv's thread pool) when a new connection
 * is opened and the last answer is older than dns_ttl_ms; keep-alive makes
 * that rare. A name's addresses (up to 8) are tried in turn when a connect
 * fails (refused, unreachable, or no answer within the connect limit, each
 * address getting the whole limit), starting with the one that last
 * worked; when all failed the next connection asks the resolver again. https:// goes through
 * OpenSSL (net/tls.h) with the context given to sc_hcli_set_tls. A pooled TLS connection stays
 * pooled when the server sends records that are not data (TLS 1.3 session tickets after the
 * handshake, a KeyUpdate, which is answered); data, EOF or close_notify while idle close it.
 * close_notify ends a close-delimited body as EOF does.
 *
 * Errors given to on_done: 0 complete; SC_EIO connection refused, reset or
 * closed early, a name that does not resolve, a TLS failure; SC_ELIMIT the
 * connect or inactivity timeout fired; SC_ETOOBIG the response headers
 * passed the limit; SC_EPARSE a malformed response; SC_ECANCELED see
 * above. */
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
	uint64_t connect_timeout_ms; /* default 2 s; covers resolving a name, and the
	                                TLS handshake of a request without a timeout_ms
	                                (with one, that limit covers the handshake) */
	uint64_t dns_ttl_ms;         /* a name's addresses are kept; default 10 s */
	const char *user_agent;      /* sent with every request when set (borrowed: a
	                                literal such as SC_USER_AGENT("agent")) */
} sc_hcli_opts_t;

/* Return non-zero from on_head or on_data to stop reading: the request is
 * then cancelled, and on_done(SC_ECANCELED) follows once the callback has
 * returned (the connection is closed, never reused). */
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
/* Ends every request in flight with on_done(SC_ECANCELED) and closes every
 * connection; memory is released once libuv has closed the handles. Those
 * on_done calls may cancel requests but not start any (sc_hcli_start says
 * SC_EIO from now on). Accepts NULL. */
void sc_hcli_close(sc_hcli_t *c);

/* Starts a request. On success *out (may be NULL) is the request, valid
 * until on_done returns. SC_EINVAL for a bad URL, SC_EIO once the client
 * is closing: a request that did not start gets no callback. The callbacks
 * never run before sc_hcli_start has returned. */
int sc_hcli_start(sc_hcli_t *c, const sc_hcli_call_t *call, sc_hcli_req_t **out);
/* https:// URLs go through TLS with ctx (a client context, net/tls.h;
 * borrowed, must outlive the client); without it they are SC_EINVAL. */
void sc_hcli_set_tls(sc_hcli_t *c, sc_tls_ctx_t *ctx);
/* Abandons a request: its connection is closed and on_done(SC_ECANCELED)
 * runs before this returns (nothing when on_done already ran or is
 * running: a cancel from inside on_done is harmless). Called from inside
 * r's own on_head/on_data, on_done runs at once too; the callback's
 * return value then no longer matters. Accepts NULL. */
void sc_hcli_cancel(sc_hcli_req_t *r);

/* The answer's status (0 before on_head) and a header (case-insensitive,
 * NULL when absent); borrowed, valid as the request. */
int sc_hcli_status(const sc_hcli_req_t *r);
/* True once the request was written on an open connection: a request that
 * failed without reaching the server (connection refused) is always safe
 * to send elsewhere, and costs that server nothing. */
int sc_hcli_reached(const sc_hcli_req_t *r);
const char *sc_hcli_header(const sc_hcli_req_t *r, const char *name);

/* Splits http(s)://HOST:PORT/path into its parts (port defaults to 80/443;
 * an IPv6 host comes without its brackets). Returns SC_EINVAL for anything
 * else (net/hurl.h). */
int sc_hcli_parse_url(const char *url, char *host, size_t hostsz, int *port, const char **path);

#endif
