/* HTTP/1.1 server on libuv + http_parser, shared by every daemon.
 *
 * One sc_http_server_t per listening address. Handlers are chosen by method
 * and path prefix (longest prefix wins). A connection carries one request at
 * a time: when a request is complete the parser is paused, so pipelined
 * requests queue up in the (bounded) input buffer and are answered in order.
 * A handler either answers at once (sc_http_respond) or opens a chunked
 * stream (sc_http_stream_start / _write / _end) that may stay open as long
 * as the client does (watch, server-sent events).
 *
 * Limits: header bytes and body bytes are bounded; a bigger request is
 * answered 431 or 413 and the connection closed, before any handler runs.
 *
 * Ownership: the request object belongs to its connection. It is valid from
 * the handler call until the response is complete, or, for a stream, until
 * sc_http_stream_end() or the close callback, whichever comes first. */
#ifndef SC_NET_HTTP_H
#define SC_NET_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

typedef struct sc_http_server sc_http_server_t;
typedef struct sc_http_req sc_http_req_t;

typedef struct sc_http_limits {
	size_t max_header_bytes;  /* request line + headers; default 16 KiB */
	size_t max_body_bytes;    /* default 1 MiB */
	size_t max_conns;         /* default 1024; more are closed at accept */
	uint64_t idle_timeout_ms; /* keep-alive idle close; default 60 s, 0 = off */
} sc_http_limits_t;

typedef void (*sc_http_handler_fn)(sc_http_req_t *req, void *ud);
/* Called once for every finished response (for metrics and logs). route is
 * the matched prefix ("" when none matched). */
typedef void (*sc_http_observer_fn)(const char *method, const char *route, int status,
                                    double seconds, void *ud);
/* Called when a streaming request's connection goes away before the handler
 * ended the stream; after it returns the request is gone. */
typedef void (*sc_http_close_fn)(sc_http_req_t *req, void *ud);

/* Creates a server on loop (borrowed); lim may be NULL for defaults. */
sc_http_server_t *sc_http_server_new(uv_loop_t *loop, const sc_http_limits_t *lim);
/* Adds a route. method NULL matches every method. prefix is copied. */
int sc_http_route(sc_http_server_t *s, const char *method, const char *prefix,
                  sc_http_handler_fn fn, void *ud);
/* Group commit support: with batching on, every answer is held until
 * sc_http_flush() (per connection, in order), so a daemon can make all the
 * writes of one loop iteration durable with one fsync before any of them is
 * acknowledged. sc_http_holding() counts connections with held output. */
void sc_http_set_batching(sc_http_server_t *s, int on);
size_t sc_http_holding(const sc_http_server_t *s);
void sc_http_flush(sc_http_server_t *s);
void sc_http_set_observer(sc_http_server_t *s, sc_http_observer_fn fn, void *ud);
/* Binds and listens on host:port (port 0 picks a free one). */
int sc_http_listen(sc_http_server_t *s, const char *host, int port);
/* The bound port after sc_http_listen. */
int sc_http_port(const sc_http_server_t *s);
/* Closes the listener and every connection (streams get their close
 * callback); the server is freed once libuv has released the handles. */
void sc_http_server_close(sc_http_server_t *s);

/* ---- request accessors (borrowed strings, valid as the request) ---- */
const char *sc_http_method(const sc_http_req_t *r);
const char *sc_http_path(const sc_http_req_t *r); /* without the query */
/* Case-insensitive header lookup; NULL when absent. */
const char *sc_http_header(const sc_http_req_t *r, const char *name);
const char *sc_http_body(const sc_http_req_t *r, size_t *len);
/* Copies the percent-decoded value of query parameter key into out.
 * Returns its length, -1 when absent, SC_ETOOBIG when it does not fit. */
int sc_http_query_param(const sc_http_req_t *r, const char *key, char *out, size_t outsz);

/* ---- responses ---- */
/* Sends a complete response; body (borrowed) is copied. */
void sc_http_respond(sc_http_req_t *r, int status, const char *ctype, const void *body, size_t len);
/* Starts a chunked response. */
void sc_http_stream_start(sc_http_req_t *r, int status, const char *ctype,
                          sc_http_close_fn on_close, void *ud);
/* Sends one chunk (copied). SC_EIO when the peer cannot keep up (its
 * unsent output passed the limit); the caller should then end the stream. */
int sc_http_stream_write(sc_http_req_t *r, const void *data, size_t len);
/* Flow control for a producer of a large stream (a list): bytes of this
 * connection's output not yet written to the socket (held or in flight). */
size_t sc_http_pending_out(const sc_http_req_t *r);
typedef void (*sc_http_drain_fn)(sc_http_req_t *req, void *ud);
/* Calls fn once, when the stream's unsent output falls to 256 KiB or less
 * (after a write completes). If the connection closes first, only the
 * stream's close callback runs. */
void sc_http_stream_on_drain(sc_http_req_t *r, sc_http_drain_fn fn, void *ud);
/* Sends the last chunk; the request is gone after this. */
void sc_http_stream_end(sc_http_req_t *r);

/* Adds a response header (copied) to the answer of r; call before
 * sc_http_respond or sc_http_stream_start. SC_EINVAL for a name or value
 * holding CR/LF, SC_ETOOBIG past 512 bytes of extra headers in all. */
int sc_http_set_header(sc_http_req_t *r, const char *name, const char *value);
/* For a handler that answers later (after a timer or a thread): on_close is
 * called if the connection goes away first; the request is gone after it
 * returns. A later sc_http_stream_start replaces it. */
void sc_http_on_close(sc_http_req_t *r, sc_http_close_fn on_close, void *ud);
/* Closes the connection at once without finishing the answer (fault
 * injection: a reply cut mid-stream). No close callback runs; the request
 * is gone after this. */
void sc_http_abort(sc_http_req_t *r);

const char *sc_http_status_text(int status);

#endif
