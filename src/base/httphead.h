/* A fast scanner for simple HTTP/1.1 message heads.
 *
 * The gateway parses two heads per proxied request (the client's request and
 * the replica's answer); with http_parser's byte-by-byte state machine and a
 * callback per piece that was the biggest user-space cost left on the path.
 * Nearly every head it sees is simple: HTTP/1.1, a Content-Length, a dozen
 * plain fields. sc_hhead_request() and sc_hhead_response() recognise exactly
 * those, in one pass over the bytes, and say "not simple" for anything else,
 * so the caller falls back to the full parser: they never refuse a message,
 * they only decline it.
 *
 * What is simple (everything else is declined):
 *   - the start line: a request "METHOD SP target SP HTTP/1.1 CRLF" (METHOD
 *     in upper-case letters, target printable ASCII without spaces), or a
 *     response "HTTP/1.1 SP 3DIGIT SP reason CRLF" with a status from 200 to
 *     599 other than 204 and 304 (their bodies follow other rules);
 *   - fields "name: value CRLF": name of token characters, value of visible
 *     ASCII, spaces and tabs (no obs-fold, no bare CR or LF, no bytes over
 *     0x7e), at most SC_HHEAD_MAX_FIELDS;
 *   - exactly one Content-Length of at most 15 digits (a request without one
 *     has no body; a response must have one);
 *   - no Transfer-Encoding, Upgrade or Expect field, and no Connection
 *     field other than "Connection: keep-alive": they change how the message
 *     is framed or what follows, and are left to the full parser (HTTP/1.1
 *     is keep-alive). Names that merely begin with one of these are
 *     declined too.
 *
 * Pure: no allocation; fields point into the caller's buffer. */
#ifndef SC_BASE_HTTPHEAD_H
#define SC_BASE_HTTPHEAD_H

#include <stddef.h>

#define SC_HHEAD_MAX_FIELDS 64

typedef struct sc_hfield {
	const char *name; /* borrowed from the scanned buffer */
	size_t nlen;
	const char *value; /* without surrounding spaces and tabs */
	size_t vlen;
} sc_hfield_t;

typedef struct sc_hhead {
	const char *method; /* requests: borrowed, not NUL-terminated */
	size_t mlen;
	const char *target; /* requests: path and query as sent */
	size_t tlen;
	int status;      /* responses */
	size_t head_len; /* bytes up to and including the blank line */
	size_t body_len; /* the Content-Length (0 for a request without) */
	size_t nfields;
	sc_hfield_t fields[SC_HHEAD_MAX_FIELDS];
} sc_hhead_t;

/* Scans buf[0..len) for a simple head. Returns 1 and fills *h when one is
 * complete there (the body, if any, may not have arrived yet: see
 * h->head_len + h->body_len), 0 when the bytes are not a complete simple
 * head: incomplete, longer than max_head bytes, or not simple. */
int sc_hhead_request(const char *buf, size_t len, size_t max_head, sc_hhead_t *h);
int sc_hhead_response(const char *buf, size_t len, size_t max_head, sc_hhead_t *h);

/* Looks up a header (case-insensitive) among n stored "name\0value\0"
 * pairs in data, where off[i] = {start of name, start of value}. Returns
 * the value inside data, or NULL. Shared by the server's requests and the
 * client's responses, which store headers this way. */
const char *sc_hhead_lookup(const char *data, const size_t (*off)[2], size_t n, const char *name);

#endif
