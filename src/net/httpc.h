/* Asynchronous HTTP client on a libuv loop: libcurl's multi interface driven
 * by uv_poll and uv_timer handles (curl_multi_socket_action).
 *
 * Why libcurl and not a hand-written client on http_parser: the agent needs
 * long-lived chunked streams (watch), request timeouts, connection reuse and
 * keep-alive probing; libcurl is already linked for the CLI and does all of
 * these correctly, so the only new code is the loop glue below.
 *
 * A request either buffers its whole response (bounded by max_body, then
 * done() with the body) or, with on_data set, hands each received piece to
 * on_data as it arrives (for streams) and calls done() with an empty body.
 *
 * Ownership: every string in sc_httpc_opts_t is copied; the request belongs
 * to the client until done() has returned or sc_httpc_cancel() is called. */
#ifndef SC_NET_HTTPC_H
#define SC_NET_HTTPC_H

#include <stddef.h>

#include <uv.h>

typedef struct sc_httpc sc_httpc_t;
typedef struct sc_httpc_req sc_httpc_req_t;

/* status: the HTTP status, or a negative SC_E* code when no response came
 * (SC_EIO: connection failed or timed out; SC_ETOOBIG: body over max_body). */
typedef void (*sc_httpc_done_fn)(int status, const char *body, size_t len, void *ud);
/* Returns 0 to go on, < 0 to abort the transfer (done() then gets SC_EIO). */
typedef int (*sc_httpc_data_fn)(const char *data, size_t len, void *ud);

/* TLS settings of a request to an https URL (the Kubernetes API: a CA and
 * client certificate usually come inline from a kubeconfig). PEM blobs are
 * copied by libcurl for each request; the struct itself is borrowed. */
typedef struct sc_httpc_tls {
	const char *ca_pem; /* CA bundle, PEM text, or NULL */
	size_t ca_len;
	const char *ca_file;  /* or a CA bundle file; neither = system CAs */
	const char *cert_pem; /* client certificate, PEM, or NULL */
	size_t cert_len;
	const char *key_pem; /* its private key, PEM */
	size_t key_len;
	int insecure; /* skip server verification (explicit opt-in) */
} sc_httpc_tls_t;

typedef struct sc_httpc_opts {
	const char *method; /* "GET" when NULL */
	const char *url;
	const char *token; /* bearer token, or NULL */
	const char *body;  /* request body (JSON), or NULL */
	size_t body_len;
	const char *content_type;  /* of the body; "application/json" when NULL */
	const char *accept;        /* Accept header, or NULL for none */
	const sc_httpc_tls_t *tls; /* borrowed until done(); NULL = defaults */
	int multiplex;             /* wait for an HTTP/2 connection to share
	                              rather than open another (many small calls) */
	long timeout_ms;           /* whole transfer; 0 = none (streams) */
	long connect_timeout_ms;   /* default 2000 */
	long stall_s;              /* no byte either way this long ends it; 0 = no limit */
	size_t max_body;           /* buffered responses; default 4 MiB */
	sc_httpc_data_fn on_data;
	sc_httpc_done_fn done; /* may be NULL */
	void *ud;
} sc_httpc_opts_t;

/* Creates a client on loop (borrowed). NULL when out of memory. */
sc_httpc_t *sc_httpc_new(uv_loop_t *loop);
/* Caps the connections the client opens to one host (0 = no cap); with
 * HTTP/2 and `multiplex` requests share them as streams. */
void sc_httpc_set_max_host_connections(sc_httpc_t *c, long n);
/* Cancels every request (without callbacks) and frees the client once its
 * handles are closed; accepts NULL. */
void sc_httpc_free(sc_httpc_t *c);
/* Sends ua (borrowed for the client's life: a literal such as
 * SC_USER_AGENT("agent")) as the User-Agent of every later request. */
void sc_httpc_set_user_agent(sc_httpc_t *c, const char *ua);
/* For https:// URLs: trust ca (NULL: the system's CAs) and present
 * cert/key (both or neither: mTLS). Strings borrowed for the client's
 * life; applies to later requests. */
void sc_httpc_set_tls(sc_httpc_t *c, const char *ca, const char *cert, const char *key);
/* Starts a request; NULL when it could not be created. */
sc_httpc_req_t *sc_httpc_start(sc_httpc_t *c, const sc_httpc_opts_t *o);
/* Stops a request; its done() is not called. Accepts NULL. */
void sc_httpc_cancel(sc_httpc_req_t *r);

#endif
