/* libFuzzer target: the fast HTTP head scanner against http_parser.
 *
 * The scanner may decline anything, but what it accepts must read the same
 * to http_parser: same method, target, status, fields (name and value) and
 * body length, and http_parser must reach the end of the head without an
 * error and see keep-alive. The first input byte picks request or
 * response. */
#include <stddef.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "base/httphead.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct seen {
	char url[4096];
	size_t ulen;
	char name[SC_HHEAD_MAX_FIELDS][256], value[SC_HHEAD_MAX_FIELDS][1024];
	size_t nlen[SC_HHEAD_MAX_FIELDS], vlen[SC_HHEAD_MAX_FIELDS];
	size_t n;
	int in_value;
	int done;
} seen_t;

static void add(char *dst, size_t *dl, size_t cap, const char *at, size_t len)
{
	if (*dl + len > cap)
		abort(); /* the scanner bounds heads below these sizes */
	memcpy(dst + *dl, at, len);
	*dl += len;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	seen_t *s = p->data;
	add(s->url, &s->ulen, sizeof(s->url), at, len);
	return 0;
}

static int on_field(http_parser *p, const char *at, size_t len)
{
	seen_t *s = p->data;
	if (s->in_value || s->n == 0) {
		if (s->n == SC_HHEAD_MAX_FIELDS)
			abort();
		s->n++;
		s->in_value = 0;
	}
	add(s->name[s->n - 1], &s->nlen[s->n - 1], sizeof(s->name[0]), at, len);
	return 0;
}

static int on_value(http_parser *p, const char *at, size_t len)
{
	seen_t *s = p->data;
	s->in_value = 1;
	add(s->value[s->n - 1], &s->vlen[s->n - 1], sizeof(s->value[0]), at, len);
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	seen_t *s = p->data;
	s->done = 1;
	return 1; /* skip the body: only the head is compared */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 3000)
		return 0;
	int response = data[0] & 1;
	const char *buf = (const char *)data + 1;
	size_t len = size - 1;
	static sc_hhead_t h;
	int ok =
	    response ? sc_hhead_response(buf, len, 2048, &h) : sc_hhead_request(buf, len, 2048, &h);
	if (!ok)
		return 0;
	if (h.head_len > len || h.head_len > 2048)
		abort();
	static seen_t s;
	memset(&s, 0, sizeof(s));
	http_parser_settings st = {
	    .on_url = on_url,
	    .on_header_field = on_field,
	    .on_header_value = on_value,
	    .on_headers_complete = on_headers_complete,
	};
	http_parser p;
	http_parser_init(&p, response ? HTTP_RESPONSE : HTTP_REQUEST);
	p.data = &s;
	http_parser_execute(&p, &st, buf, h.head_len);
	if (!s.done || !http_should_keep_alive(&p))
		abort();
	if (response && (int)p.status_code != h.status)
		abort();
	if (!response) {
		const char *m = http_method_str(p.method);
		if (strlen(m) != h.mlen || memcmp(m, h.method, h.mlen) != 0)
			abort();
		if (s.ulen != h.tlen || memcmp(s.url, h.target, h.tlen) != 0)
			abort();
	}
	if (s.n != h.nfields)
		abort();
	for (size_t i = 0; i < s.n; i++) {
		const sc_hfield_t *f = &h.fields[i];
		if (s.nlen[i] != f->nlen || memcmp(s.name[i], f->name, f->nlen) != 0 ||
		    s.vlen[i] != f->vlen || memcmp(s.value[i], f->value, f->vlen) != 0)
			abort();
	}
	/* http_parser's body length for a request without Content-Length is
	 * 0 here (ULLONG_MAX means "none"). */
	unsigned long long cl = p.content_length == ULLONG_MAX ? 0 : p.content_length;
	if ((p.flags & F_CONTENTLENGTH) ? cl != h.body_len : h.body_len != 0)
		abort();
	return 0;
}
