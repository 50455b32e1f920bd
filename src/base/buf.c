#include "starcloud/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starcloud/error.h"
#include "base/alloc.h"

void sc_buf_init(sc_buf_t *b, size_t max)
{
	b->data = NULL;
	b->len = b->cap = 0;
	b->max = max;
}

void sc_buf_free(sc_buf_t *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void sc_buf_reset(sc_buf_t *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

/* Makes room for extra bytes plus the terminating NUL, doubling so that a
 * long series of small appends stays linear. */
static int reserve(sc_buf_t *b, size_t extra)
{
	if (b->max && (extra > b->max || b->len > b->max - extra))
		return SC_ETOOBIG;
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	char *p = sc_realloc(b->data, cap);
	if (!p)
		return SC_ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int sc_buf_append(sc_buf_t *b, const void *data, size_t len)
{
	int rc = reserve(b, len);
	if (rc < 0)
		return rc;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int sc_buf_puts(sc_buf_t *b, const char *s)
{
	return sc_buf_append(b, s, strlen(s));
}

size_t sc_udigits(unsigned long long v, char t[SC_UDIGITS_MAX])
{
	size_t i = SC_UDIGITS_MAX;
	do {
		t[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return SC_UDIGITS_MAX - i;
}

int sc_buf_putu(sc_buf_t *b, unsigned long long v)
{
	char t[SC_UDIGITS_MAX];
	size_t n = sc_udigits(v, t);
	return sc_buf_append(b, t + SC_UDIGITS_MAX - n, n);
}

int sc_buf_vprintf(sc_buf_t *b, const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return SC_EINVAL;
	int rc = reserve(b, (size_t)n);
	if (rc < 0)
		return rc;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int sc_buf_printf(sc_buf_t *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = sc_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

void sc_buf_consume(sc_buf_t *b, size_t n)
{
	if (n >= b->len) {
		sc_buf_reset(b);
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = '\0';
}

char *sc_buf_steal(sc_buf_t *b, size_t *len)
{
	char *p = b->data;
	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}
