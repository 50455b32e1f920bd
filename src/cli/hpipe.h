/* A pipelined HTTP/1.1 client for the CLI's bulk verbs (`apply -f`,
 * `delete -f`, `bench server`): many requests over one keep-alive
 * connection, sent ahead of their answers, answered in order.
 *
 * libcurl makes the connection (so https:// and its TLS options work as
 * for every other verb) and then only carries bytes (CURLOPT_CONNECT_ONLY:
 * libcurl itself no longer pipelines); http_parser reads the answers.
 * A request's bytes are kept until its answer arrives: when the server
 * closes the connection (its idle timeout, a restart), the pipe connects
 * again and sends every unanswered request once more, in order, so a
 * caller sees each request answered exactly once (a request the server
 * had carried out before the connection dropped may be carried out twice:
 * callers send only requests for which that is harmless, such as apply).
 *
 * Not thread-safe: one pipe per thread. Blocking calls, bounded by a
 * timeout without progress. */
#ifndef SC_CLI_HPIPE_H
#define SC_CLI_HPIPE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sc_hpipe sc_hpipe_t;

/* One answer. body (len bytes, NUL-terminated) is borrowed for the call.
 * status is -1 when the request could not be delivered (the server is
 * unreachable); retry_after is the Retry-After header in seconds, or -1. */
typedef struct sc_hpipe_reply {
	long status;
	const char *body;
	size_t len;
	int retry_after;
} sc_hpipe_reply_t;

/* Called once per request, in the order they were sent, from inside
 * sc__hpipe_drain. It may queue new requests (sc__hpipe_send). */
typedef void (*sc_hpipe_fn)(void *ud, uint64_t tag, const sc_hpipe_reply_t *r);

/* Connects to base (len bytes of "http[s]://host:port", no path) with
 * the bearer token (borrowed; "" for none), checking an https:// server's
 * certificate against ca (a CA file; NULL or "": the system's CAs).
 * Returns NULL and writes why into err when the server cannot be reached. */
sc_hpipe_t *sc__hpipe_open(const char *base, size_t len, const char *token, const char *ca,
                           sc_hpipe_fn fn, void *ud, char *err, size_t errsz);
/* Queues a request (body may be NULL; copied). No I/O happens here: the
 * caller calls sc__hpipe_drain to bound what is in flight. */
void sc__hpipe_send(sc_hpipe_t *p, const char *method, const char *path, const char *body,
                    size_t len, uint64_t tag);
/* Sends and reads until at most `keep` requests are unanswered (0: all
 * answered). Returns 0, or SC_EIO when the connection failed for good
 * (every unanswered request was then answered with status -1). */
int sc__hpipe_drain(sc_hpipe_t *p, size_t keep);
/* Requests queued or in flight, not yet answered. */
size_t sc__hpipe_pending(const sc_hpipe_t *p);
/* Closes the connection; accepts NULL. Unanswered requests are dropped
 * without a callback. */
void sc__hpipe_close(sc_hpipe_t *p);

#endif
