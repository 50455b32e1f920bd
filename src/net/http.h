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
 * Time: a request's head must arrive within header_timeout of its first
 * byte and its body within body_timeout of the head (else 408), whatever
 * the client trickles meanwhile (slowloris); a keep-alive connection idle
 * for idle_timeout closes. Connections: at most max_conns, and at most
 * max_conns_per_client from one source address; past a cap the oldest
 * idle connection (between requests, or still sending a request) closes
 * to make room, and when none can, the new one is answered 429 (its
 * address is over its cap) or 503 (the server is full) and closed.
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
typedef struct sc_tls_ctx sc_tls_ctx_t;
typedef struct sc_http_req sc_http_req_t;

/* Zero fields take their defaults. */
typedef struct sc_http_limits {
	size_t max_header_bytes;     /* request line + headers; default 16 KiB */
	size_t max_body_bytes;       /* default 1 MiB */
	size_t max_conns;            /* default 1024 */
	size_t max_conns_per_client; /* default: max_conns (no cap of its own) */
	uint64_t idle_timeout_ms;    /* keep-alive idle close; default 60 s, 0 = off */
	uint64_t header_timeout_ms;  /* request head; default 10 s */
	uint64_t body_timeout_ms;    /* request body after the head; default 30 s */
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
 * acknowledged. */
void sc_http_set_batching(sc_http_server_t *s, int on);
void sc_http_flush(sc_http_server_t *s);
/* The held output that may show revisions after `after` must not be sent
 * (those writes were lost, or may not be durable): each such answer becomes
 * an answer with status and body (copied) instead, and a connection holding
 * stream output is closed. They go with the next sc_http_release. */
void sc_http_fail_held(sc_http_server_t *s, int64_t after, int status, const char *body,
                       size_t len);
void sc_http_set_observer(sc_http_server_t *s, sc_http_observer_fn fn, void *ud);
/* With batching on, an answer waits until the revision it may show is
 * durable: current_rev(ud) is that revision for an answer written now (the
 * newest write the daemon took), unless the handler said better with
 * sc_http_answer_rev; sc_http_release(s, durable) sends the held output
 * that shows nothing newer than durable. Output already held on a
 * connection stays ahead of later output. NULL (the default): every answer
 * waits for sc_http_flush. */
void sc_http_set_hold_check(sc_http_server_t *s, int64_t (*current_rev)(void *ud), void *ud);
/* Every write up to revision durable is durable: send what waited for it. */
void sc_http_release(sc_http_server_t *s, int64_t durable);
/* r's answer shows data of revision rev at most (a GET of an object: its
 * revision), so it need not wait for newer writes to become durable. */
void sc_http_answer_rev(sc_http_req_t *r, int64_t rev);
/* Flow control: with a gate, every complete request goes to gate instead
 * of its route; the gate answers it, or keeps it and later calls
 * sc_http_dispatch (a connection that closes meanwhile calls the close
 * callback set with sc_http_on_close). NULL: requests go to their routes. */
void sc_http_set_gate(sc_http_server_t *s, sc_http_handler_fn gate, void *ud);
/* Runs r's route handler (from a gate). */
void sc_http_dispatch(sc_http_req_t *r);
/* Speaks TLS on every connection accepted from now on (net/tls.h); ctx is
 * borrowed and must outlive the server. */
void sc_http_set_tls(sc_http_server_t *s, sc_tls_ctx_t *ctx);
/* Binds and listens on host:port (port 0 picks a free one). */
int sc_http_listen(sc_http_server_t *s, const char *host, int port);
typedef struct sc_http_stats {
	size_t conns;                      /* open, counted against the caps */
	unsigned long long evicted;        /* closed to make room for a new one */
	unsigned long long refused_client; /* 429: the address was over its cap */
	unsigned long long refused_full;   /* 503: the server was full */
	unsigned long long timeouts;       /* 408: head or body too slow */
} sc_http_stats_t;
void sc_http_get_stats(const sc_http_server_t *s, sc_http_stats_t *out);
/* Why sc_http_listen failed, for a person: the system's reason and what
 * to do about it ("address already in use: another process has this port;
 * choose another with --listen HOST:PORT"). "" when it did not fail. */
const char *sc_http_listen_error(const sc_http_server_t *s);
/* The bound port after sc_http_listen. */
int sc_http_port(const sc_http_server_t *s);
/* A TCP port of 127.0.0.1 free when asked (bound to port 0, then closed),
 * for a child daemon about to listen on it (starcloud dev's server and
 * agents, the dev pool's nodes); -1 when none. Another process may take it
 * first: for loopback development set-ups only. */
int sc_http_free_loopback_port(void);
/* Closes the listener and every connection (streams get their close
 * callback); the server is freed once libuv has released the handles. */
void sc_http_server_close(sc_http_server_t *s);

/* ---- request accessors (borrowed strings, valid as the request) ---- */
const char *sc_http_method(const sc_http_req_t *r);
const char *sc_http_path(const sc_http_req_t *r); /* without the query */
/* Case-insensitive header lookup; NULL when absent. */
const char *sc_http_header(const sc_http_req_t *r, const char *name);
const char *sc_http_body(const sc_http_req_t *r, size_t *len);
/* The client's address as text ("127.0.0.1", "::1"); "" when unknown. */
const char *sc_http_peer(const sc_http_req_t *r);
/* The common name of the client's verified TLS certificate (mTLS), or "". */
void sc_http_peer_name(const sc_http_req_t *r, char *out, size_t outsz);
/* Serial and notAfter of that certificate (net/tls.h: sc_tls_peer_cert);
 * 0 on plain HTTP or without a verified one. */
int sc_http_peer_cert(const sc_http_req_t *r, char *serial, size_t serialsz, int64_t *not_after);
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
/* Ends the stream and closes the connection once the output already
 * queued is written, or after grace_ms at the latest (a client that does
 * not read is cut off and its output freed). The request is gone after. */
void sc_http_stream_cut(sc_http_req_t *r, uint64_t grace_ms);

/* Caps the kernel's send buffer of r's connection (SO_SNDBUF; Linux
 * otherwise grows it to megabytes for a client that does not read, and
 * copies that much into it). */
void sc_http_set_send_buffer(sc_http_req_t *r, int bytes);

/* Releases a shared buffer once the HTTP layer is done with it. */
typedef void (*sc_http_release_fn)(void *ref);
/* Sends one chunk made of head (copied, at most 64 bytes), data (shared:
 * not copied, it must stay unchanged until rel(ref) is called) and tail
 * (copied, at most 16 bytes): a watch event sent to many streams costs one
 * buffer, not one copy per stream. Takes the reference in every case (rel
 * runs at once on failure, or when the bytes had to be copied because
 * output is held). SC_EIO when the connection is closing or broken. */
int sc_http_stream_write_shared(sc_http_req_t *r, const char *head, size_t hlen, const void *data,
                                size_t len, const char *tail, size_t tlen, sc_http_release_fn rel,
                                void *ref);

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
/* The status of the answer given (or of the stream started) to r, 0 while
 * none; valid in the handler after it answered (for audit records). */
int sc_http_status(const sc_http_req_t *r);

#endif
