/* Stop sequences. See stop.h. */
#include "worker/stop.h"

#include <string.h>

#include "starcloud/error.h"

/* Earliest complete sequence in h, or -1. */
static long first_match(const sc_stops_t *st, const char *h, size_t hn)
{
	long best = -1;
	for (int i = 0; i < st->n; i++) {
		size_t k = st->len[i];
		for (size_t at = 0; k && at + k <= hn && (best < 0 || (long)at < best); at++)
			if (memcmp(h + at, st->s[i], k) == 0) {
				best = (long)at;
				break;
			}
	}
	return best;
}

/* Length of the longest tail of h that is a proper prefix of a sequence:
 * the bytes that must wait for more text. */
static size_t open_tail(const sc_stops_t *st, const char *h, size_t hn)
{
	size_t keep = 0;
	for (int i = 0; i < st->n; i++) {
		size_t k = st->len[i];
		for (size_t t = k - 1 < hn ? k - 1 : hn; t > keep; t--)
			if (memcmp(h + hn - t, st->s[i], t) == 0) {
				keep = t;
				break;
			}
	}
	return keep;
}

int sc_stop_feed(const sc_stops_t *st, sc_buf_t *hold, const char *text, size_t n, size_t *release)
{
	if (n && sc_buf_append(hold, text, n) < 0)
		return SC_ENOMEM;
	const char *h = hold->data ? hold->data : "";
	long at = st->n ? first_match(st, h, hold->len) : -1;
	if (at >= 0) {
		*release = (size_t)at;
		return 1;
	}
	*release = hold->len - (st->n ? open_tail(st, h, hold->len) : 0);
	return 0;
}
