/* A fast scanner for simple HTTP/1.1 message heads (see httphead.h).
 *
 * Every test declines rather than guesses: a caller that gets 0 hands the
 * bytes to the full parser, so the only way to be wrong here is to accept a
 * head that the full parser would read differently. The fuzz target
 * (fuzz/fuzz_httphead.c) checks exactly that against http_parser. */
#include "base/httphead.h"

#include <string.h>
#include <strings.h>

/* RFC 9110 token characters (field names). */
static int is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	switch (c) {
	case '!':
	case '#':
	case '$':
	case '%':
	case '&':
	case '\'':
	case '*':
	case '+':
	case '-':
	case '.':
	case '^':
	case '_':
	case '`':
	case '|':
	case '~':
		return 1;
	default:
		return 0;
	}
}

/* Bytes a simple field value may hold: visible ASCII, space, tab. */
static int is_vbyte(unsigned char c)
{
	return (c >= 0x20 && c <= 0x7e) || c == '\t';
}

/* Does the field's name begin with name? Framing fields are matched on
 * their prefix: http_parser 2.9 takes "Transfer-EncodingX" for the real
 * one (it sets its chunked flags on the prefix), so any such name is left
 * to it rather than read two ways. */
static int name_starts(const sc_hfield_t *f, const char *name, size_t n)
{
	return f->nlen >= n && strncasecmp(f->name, name, n) == 0;
}

/* Scans the fields from p (just after the start line) to the blank line.
 * Returns 1 with h->head_len and h->body_len set, 0 to decline. need_cl:
 * a Content-Length is required (responses). */
static int scan_fields(const char *buf, size_t len, const char *p, sc_hhead_t *h, int need_cl)
{
	const char *end = buf + len;
	int ncl = 0;
	h->nfields = 0;
	h->body_len = 0;
	for (;;) {
		if (end - p < 2)
			return 0; /* incomplete */
		if (p[0] == '\r') {
			if (p[1] != '\n')
				return 0;
			p += 2;
			break;
		}
		if (h->nfields == SC_HHEAD_MAX_FIELDS)
			return 0;
		sc_hfield_t *f = &h->fields[h->nfields];
		f->name = p;
		while (p < end && is_tchar((unsigned char)*p))
			p++;
		if (p == end || *p != ':' || p == f->name)
			return 0; /* incomplete, obs-fold, or a space before ':' */
		f->nlen = (size_t)(p - f->name);
		p++;
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		f->value = p;
		while (p < end && is_vbyte((unsigned char)*p))
			p++;
		if (end - p < 2)
			return 0;
		if (p[0] != '\r' || p[1] != '\n')
			return 0; /* a bare CR or LF, a control byte, obs-text */
		f->vlen = (size_t)(p - f->value);
		/* Trailing spaces: parsers differ on keeping them; decline. */
		if (f->vlen && (p[-1] == ' ' || p[-1] == '\t'))
			return 0;
		p += 2;
		h->nfields++;
		if (name_starts(f, "content-length", 14)) {
			if (f->nlen != 14 || ++ncl > 1 || f->vlen == 0 || f->vlen > 15)
				return 0;
			size_t v = 0;
			for (size_t i = 0; i < f->vlen; i++) {
				if (f->value[i] < '0' || f->value[i] > '9')
					return 0;
				v = v * 10 + (size_t)(f->value[i] - '0');
			}
			h->body_len = v;
		} else if (name_starts(f, "connection", 10)) {
			/* "keep-alive" is what HTTP/1.1 means anyway (nginx
			 * sends it on every answer); any other value declines. */
			if (f->nlen != 10 || f->vlen != 10 ||
			    strncasecmp(f->value, "keep-alive", 10) != 0)
				return 0;
		} else if (name_starts(f, "transfer-encoding", 17) ||
		           name_starts(f, "upgrade", 7) || name_starts(f, "expect", 6) ||
		           name_starts(f, "proxy-connection", 16)) {
			return 0;
		}
	}
	if (need_cl && ncl == 0)
		return 0;
	h->head_len = (size_t)(p - buf);
	return 1;
}

/* The methods a request may have on the fast path: the ones our daemons
 * route on. Another (valid or not) is left to the full parser, which knows
 * which to refuse. */
static int simple_method(const char *m, size_t n)
{
	static const char *const known[] = {"GET",   "POST", "PUT",    "DELETE",
	                                    "PATCH", "HEAD", "OPTIONS"};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strlen(known[i]) == n && memcmp(known[i], m, n) == 0)
			return 1;
	return 0;
}

int sc_hhead_request(const char *buf, size_t len, size_t max_head, sc_hhead_t *h)
{
	/* A head longer than max_head is incomplete within it: declined, and
	 * the full parser answers it as too large. */
	if (len > max_head)
		len = max_head;
	const char *p = buf, *end = buf + len;
	h->method = p;
	while (p < end && *p >= 'A' && *p <= 'Z')
		p++;
	h->mlen = (size_t)(p - h->method);
	if (p == end || *p != ' ' || !simple_method(h->method, h->mlen))
		return 0;
	h->target = ++p;
	while (p<end && * p> 0x20 && *p < 0x7f)
		p++;
	h->tlen = (size_t)(p - h->target);
	/* Origin form only: "/..." (an absolute URL or "*" goes to the parser). */
	if (h->tlen == 0 || h->target[0] != '/' || end - p < 11 ||
	    memcmp(p, " HTTP/1.1\r\n", 11) != 0)
		return 0;
	h->status = 0;
	return scan_fields(buf, len, p + 11, h, 0);
}

int sc_hhead_response(const char *buf, size_t len, size_t max_head, sc_hhead_t *h)
{
	if (len > max_head)
		len = max_head;
	if (len < 13 || memcmp(buf, "HTTP/1.1 ", 9) != 0)
		return 0;
	const char *p = buf + 9, *end = buf + len;
	if (p[0] < '2' || p[0] > '5' || p[1] < '0' || p[1] > '9' || p[2] < '0' || p[2] > '9' ||
	    p[3] != ' ')
		return 0;
	h->status = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
	if (h->status == 204 || h->status == 304)
		return 0;
	p += 4;
	while (p < end && is_vbyte((unsigned char)*p))
		p++;
	if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
		return 0;
	h->method = h->target = NULL;
	h->mlen = h->tlen = 0;
	return scan_fields(buf, len, p + 2, h, 1);
}

const char *sc_hhead_lookup(const char *data, const size_t (*off)[2], size_t n, const char *name)
{
	/* The name's NUL sits right before the value: compare lengths first,
	 * most lookups then skip the string compare. */
	size_t nl = strlen(name);
	for (size_t i = 0; i < n; i++)
		if (off[i][1] - off[i][0] == nl + 1 && strncasecmp(data + off[i][0], name, nl) == 0)
			return data + off[i][1];
	return NULL;
}
