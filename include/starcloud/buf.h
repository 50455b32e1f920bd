/* Growable byte buffer with a hard size limit (curl's dynbuf idea).
 *
 * All network input is collected in these so that a peer can never make a
 * daemon allocate more than the limit it was given. The data is always
 * NUL-terminated so text can be handed to parsers directly. */
#ifndef STARCLOUD_BUF_H
#define STARCLOUD_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct sc_buf {
	char *data; /* NULL until the first append; owned */
	size_t len;
	size_t cap;
	size_t max; /* appends beyond this fail with SC_ETOOBIG; 0 = no limit */
} sc_buf_t;

/* Starts an empty buffer that may grow to max bytes (0 = unbounded). */
void sc_buf_init(sc_buf_t *b, size_t max);
/* Frees the data; the buffer can be reused after sc_buf_init. */
void sc_buf_free(sc_buf_t *b);
/* Empties the buffer but keeps its memory. */
void sc_buf_reset(sc_buf_t *b);
/* Appends len bytes (borrowed). SC_ETOOBIG over the limit, SC_ENOMEM. */
int sc_buf_append(sc_buf_t *b, const void *data, size_t len);
int sc_buf_puts(sc_buf_t *b, const char *s);
int sc_buf_printf(sc_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int sc_buf_vprintf(sc_buf_t *b, const char *fmt, va_list ap);
/* Appends v in decimal (what printf's %llu would, without its cost on a
 * hot path). */
int sc_buf_putu(sc_buf_t *b, unsigned long long v);
/* Writes v's decimal digits at the end of t (no NUL) and returns their
 * count n: they start at t + SC_UDIGITS_MAX - n. For callers that copy
 * them elsewhere. */
#define SC_UDIGITS_MAX 24
size_t sc_udigits(unsigned long long v, char t[SC_UDIGITS_MAX]);
/* Drops the first n bytes (consumed input). */
void sc_buf_consume(sc_buf_t *b, size_t n);
/* Hands the data to the caller (free() it) and empties the buffer. */
char *sc_buf_steal(sc_buf_t *b, size_t *len);

#endif
