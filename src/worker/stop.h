/* Stop sequences (OpenAI's "stop"): generation ends where the text first
 * contains one of them, and the answer is cut before it.
 *
 * Text is released as it is generated except for a tail that may still
 * grow into a stop sequence; that tail is held until the next token shows
 * whether it does. So a streamed answer never sends bytes a non-streamed
 * one would cut, and the two stay equal (as in vLLM). */
#ifndef SC_WORKER_STOP_H
#define SC_WORKER_STOP_H

#include <stddef.h>

#include "starcloud/buf.h"

#define SC_STOP_MAX 4  /* sequences per request, OpenAI's limit */
#define SC_STOP_LEN 64 /* bytes per sequence */

typedef struct sc_stops {
	char s[SC_STOP_MAX][SC_STOP_LEN + 1];
	size_t len[SC_STOP_MAX];
	int n;
} sc_stops_t;

/* Appends n bytes of text to *hold (text held back so far) and sets
 * *release to how many bytes at the start of *hold may be sent now; the
 * caller sends them and consumes them from *hold. Returns 1 when a stop
 * sequence is complete: *release is then the text before it, and the rest
 * of *hold is to be dropped. 0 otherwise; SC_ENOMEM. With no sequences
 * everything is released. */
int sc_stop_feed(const sc_stops_t *st, sc_buf_t *hold, const char *text, size_t n, size_t *release);

#endif
