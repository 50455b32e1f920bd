/* The buffered form of the daemons' one HTTP client (net/hclient.h), for
 * control-plane calls: the agent's reports, lists and watches, the k8s
 * scheduler's API calls, the worker's KV pulls and OTLP exports.
 *
 * A fetch either buffers the whole answer (up to max_body) and hands it to
 * done, or, with on_data set, passes each piece of the body as it arrives
 * (watches, streams) and calls done with an empty body. done runs exactly
 * once for every fetch that started, whatever ends it (see hclient.h): a
 * cancel (sc_hcli_cancel on *out) or the client's close runs it with
 * SC_ECANCELED before they return.
 *
 * Ownership: every string of sc_hfetch_t is copied (or used) before
 * sc_hfetch returns. */
#ifndef SC_NET_HFETCH_H
#define SC_NET_HFETCH_H

#include <stddef.h>
#include <stdint.h>

#include "net/hclient.h"

/* status: the HTTP status (any, with its body), or a negative SC_E* code
 * when no whole answer came: SC_EIO (refused, reset, TLS or resolver
 * failure), SC_ELIMIT (a timeout), SC_ETOOBIG (body over max_body),
 * SC_ECANCELED (cancelled, client closed), or what on_data returned. */
typedef void (*sc_hfetch_done_fn)(int status, const char *body, size_t len, void *ud);
/* Returns 0 to go on, or a negative SC_E* code to stop: done gets it. */
typedef int (*sc_hfetch_data_fn)(const char *data, size_t len, void *ud);

typedef struct sc_hfetch {
	const char *method; /* "GET" when NULL */
	const char *url;
	const char *token; /* bearer token, or NULL */
	const char *body;  /* request body, or NULL */
	size_t body_len;
	const char *content_type; /* of the body; application/json when NULL */
	const char *accept;       /* Accept header, or NULL for none */
	uint64_t timeout_ms;      /* inactivity: connect, first byte, between reads
	                             (0 = none) */
	uint64_t idle_timeout_ms; /* once the answer started (0 = timeout_ms) */
	size_t max_body;          /* buffered answers; default 4 MiB */
	sc_hfetch_data_fn on_data;
	sc_hfetch_done_fn done; /* may be NULL */
	void *ud;
} sc_hfetch_t;

/* Starts a fetch on c; *out (may be NULL) is its request for sc_hcli_cancel,
 * valid until done has run. < 0 (SC_EINVAL a bad URL or headers, SC_EIO
 * the client is closing) when it did not start: then done never runs. */
int sc_hfetch(sc_hcli_t *c, const sc_hfetch_t *f, sc_hcli_req_t **out);

#endif
