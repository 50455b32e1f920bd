/* Validating JSON scanner: see src/base/jscan.h.
 *
 * A recursive-descent recogniser over a byte range. Recursion depth is the
 * JSON nesting depth, capped at SC_JSCAN_MAX_DEPTH, so a hostile body of
 * nested brackets costs a fixed amount of stack. */
#include "base/jscan.h"

#include <stdint.h>
#include <string.h>

#include "starcloud/error.h"

typedef struct scan {
	const unsigned char *p, *end;
	int depth;
} scan_t;

static int scan_value(scan_t *s, int *type);

static void skip_ws(scan_t *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

static int is_hex(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int hex_val(unsigned char c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* Length of a well-formed UTF-8 sequence at p (lead byte >= 0x80), 0 when
 * malformed (overlong forms, surrogates, past U+10FFFF, truncated). */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned char c = p[0];
	size_t n;
	unsigned char lo = 0x80, hi = 0xBF;
	if (c >= 0xC2 && c <= 0xDF)
		n = 2;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 3;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 4;
	else
		return 0;
	if ((size_t)(end - p) < n)
		return 0;
	if (c == 0xE0)
		lo = 0xA0;
	else if (c == 0xED)
		hi = 0x9F;
	else if (c == 0xF0)
		lo = 0x90;
	else if (c == 0xF4)
		hi = 0x8F;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((p[i] & 0xC0) != 0x80)
			return 0;
	return n;
}

static int scan_escape(scan_t *s)
{
	/* s->p is just past the backslash. */
	if (s->p >= s->end)
		return SC_EPARSE;
	unsigned char c = *s->p++;
	if (strchr("\"\\/bfnrt", c) && c)
		return 0;
	if (c != 'u' || s->end - s->p < 4)
		return SC_EPARSE;
	for (int i = 0; i < 4; i++)
		if (!is_hex(s->p[i]))
			return SC_EPARSE;
	s->p += 4;
	return 0;
}

static int scan_string(scan_t *s)
{
	if (s->p >= s->end || *s->p != '"')
		return SC_EPARSE;
	s->p++;
	while (s->p < s->end) {
		unsigned char c = *s->p;
		if (c == '"') {
			s->p++;
			return 0;
		}
		if (c < 0x20)
			return SC_EPARSE;
		if (c == '\\') {
			s->p++;
			if (scan_escape(s) < 0)
				return SC_EPARSE;
		} else if (c >= 0x80) {
			size_t n = utf8_len(s->p, s->end);
			if (!n)
				return SC_EPARSE;
			s->p += n;
		} else {
			s->p++;
		}
	}
	return SC_EPARSE;
}

static size_t digits(scan_t *s)
{
	const unsigned char *b = s->p;
	while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
		s->p++;
	return (size_t)(s->p - b);
}

static int scan_number(scan_t *s, int *type)
{
	*type = SC_JT_INT;
	if (s->p < s->end && *s->p == '-')
		s->p++;
	if (s->p < s->end && *s->p == '0')
		s->p++;
	else if (!digits(s))
		return SC_EPARSE;
	if (s->p < s->end && *s->p == '.') {
		s->p++;
		*type = SC_JT_REAL;
		if (!digits(s))
			return SC_EPARSE;
	}
	if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
		s->p++;
		*type = SC_JT_REAL;
		if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
			s->p++;
		if (!digits(s))
			return SC_EPARSE;
	}
	return 0;
}

static int scan_literal(scan_t *s, const char *word, int t, int *type)
{
	size_t n = strlen(word);
	if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
		return SC_EPARSE;
	s->p += n;
	*type = t;
	return 0;
}

/* Scans the members or elements of a container up to its closing bracket;
 * s->p is just past the opening one. */
static int scan_container(scan_t *s, int object)
{
	unsigned char close = object ? '}' : ']';
	int t;
	skip_ws(s);
	if (s->p < s->end && *s->p == close) {
		s->p++;
		return 0;
	}
	for (;;) {
		skip_ws(s);
		if (object) {
			if (scan_string(s) < 0)
				return SC_EPARSE;
			skip_ws(s);
			if (s->p >= s->end || *s->p++ != ':')
				return SC_EPARSE;
		}
		if (scan_value(s, &t) < 0)
			return SC_EPARSE;
		skip_ws(s);
		if (s->p >= s->end)
			return SC_EPARSE;
		unsigned char c = *s->p++;
		if (c == close)
			return 0;
		if (c != ',')
			return SC_EPARSE;
	}
}

static int scan_value(scan_t *s, int *type)
{
	skip_ws(s);
	if (s->p >= s->end)
		return SC_EPARSE;
	switch (*s->p) {
	case '{':
	case '[': {
		int object = *s->p == '{';
		if (++s->depth > SC_JSCAN_MAX_DEPTH)
			return SC_EPARSE;
		s->p++;
		int rc = scan_container(s, object);
		s->depth--;
		*type = object ? SC_JT_OBJECT : SC_JT_ARRAY;
		return rc;
	}
	case '"':
		*type = SC_JT_STRING;
		return scan_string(s);
	case 't':
		return scan_literal(s, "true", SC_JT_TRUE, type);
	case 'f':
		return scan_literal(s, "false", SC_JT_FALSE, type);
	case 'n':
		return scan_literal(s, "null", SC_JT_NULL, type);
	default:
		return scan_number(s, type);
	}
}

/* Which wanted key the raw key token [k, k+klen) (quotes excluded) is. */
static int key_index(const unsigned char *k, size_t klen, const char *const *keys, size_t nkeys)
{
	for (size_t i = 0; i < nkeys; i++)
		if (strlen(keys[i]) == klen && memcmp(keys[i], k, klen) == 0)
			return (int)i;
	return -1;
}

/* One top-level member; records it when wanted. */
static int scan_member(scan_t *s, const char *const *keys, size_t nkeys, sc_jval_t *out)
{
	skip_ws(s);
	const unsigned char *k = s->p;
	if (scan_string(s) < 0)
		return SC_EPARSE;
	int want = key_index(k + 1, (size_t)(s->p - k) - 2, keys, nkeys);
	skip_ws(s);
	if (s->p >= s->end || *s->p++ != ':')
		return SC_EPARSE;
	skip_ws(s);
	const unsigned char *v = s->p;
	int t;
	if (scan_value(s, &t) < 0)
		return SC_EPARSE;
	if (want < 0)
		return 0;
	if (out[want].type != SC_JT_ABSENT)
		return SC_EEXISTS;
	out[want] = (sc_jval_t){.type = t, .text = (const char *)v, .len = (size_t)(s->p - v)};
	return 0;
}

static int scan_top_object(scan_t *s, const char *const *keys, size_t nkeys, sc_jval_t *out)
{
	s->p++;
	s->depth = 1;
	skip_ws(s);
	if (s->p < s->end && *s->p == '}') {
		s->p++;
		return 0;
	}
	int dup = 0;
	for (;;) {
		int rc = scan_member(s, keys, nkeys, out);
		if (rc == SC_EEXISTS)
			dup = 1;
		else if (rc < 0)
			return rc;
		skip_ws(s);
		if (s->p >= s->end)
			return SC_EPARSE;
		unsigned char c = *s->p++;
		if (c == '}')
			return dup ? SC_EEXISTS : 0;
		if (c != ',')
			return SC_EPARSE;
	}
}

int sc_jscan_object(const char *text, size_t len, const char *const *keys, size_t nkeys,
                    sc_jval_t *out)
{
	scan_t s = {(const unsigned char *)text, (const unsigned char *)text + len, 0};
	for (size_t i = 0; i < nkeys; i++)
		out[i] = (sc_jval_t){SC_JT_ABSENT, NULL, 0};
	skip_ws(&s);
	int rc, type = SC_JT_OBJECT;
	if (s.p < s.end && *s.p == '{')
		rc = scan_top_object(&s, keys, nkeys, out);
	else
		rc = scan_value(&s, &type);
	if (rc == SC_EPARSE)
		return rc;
	skip_ws(&s);
	if (s.p != s.end)
		return SC_EPARSE;
	if (rc < 0)
		return rc;
	return type == SC_JT_OBJECT ? 0 : SC_EINVAL;
}

/* Appends code point cp as UTF-8; returns bytes written or 0 when full. */
static size_t put_utf8(char *o, size_t room, uint32_t cp)
{
	size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
	if (room < n)
		return 0;
	if (n == 1) {
		o[0] = (char)cp;
	} else if (n == 2) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
	} else if (n == 3) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
	} else {
		o[0] = (char)(0xF0 | (cp >> 18));
		o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[3] = (char)(0x80 | (cp & 0x3F));
	}
	return n;
}

static uint32_t hex4(const unsigned char *p)
{
	return (uint32_t)(hex_val(p[0]) << 12 | hex_val(p[1]) << 8 | hex_val(p[2]) << 4 |
	                  hex_val(p[3]));
}

/* Decodes the escape at *pp (just past the backslash) into a code point;
 * the scanner already checked its shape. */
static uint32_t unescape(const unsigned char **pp, const unsigned char *end)
{
	const unsigned char *p = *pp;
	static const char from[] = "bfnrt", to[] = "\b\f\n\r\t";
	unsigned char c = *p++;
	uint32_t cp = c;
	if (c == 'u') {
		cp = hex4(p);
		p += 4;
		/* A surrogate pair is one code point; a lone half becomes U+FFFD. */
		if (cp >= 0xD800 && cp <= 0xDBFF && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
			uint32_t lo = hex4(p + 2);
			if (lo >= 0xDC00 && lo <= 0xDFFF) {
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
				p += 6;
			}
		}
		if (cp >= 0xD800 && cp <= 0xDFFF)
			cp = 0xFFFD;
	} else if (strchr(from, c)) {
		cp = (unsigned char)to[strchr(from, c) - from];
	}
	*pp = p;
	return cp;
}

int sc_jscan_string(const sc_jval_t *v, char *out, size_t outsz)
{
	if (v->type != SC_JT_STRING || v->len < 2 || outsz == 0)
		return SC_EINVAL;
	const unsigned char *p = (const unsigned char *)v->text + 1;
	const unsigned char *end = (const unsigned char *)v->text + v->len - 1;
	size_t o = 0;
	while (p < end) {
		size_t n = 1;
		if (*p == '\\') {
			p++;
			n = put_utf8(out + o, outsz - 1 - o, unescape(&p, end));
		} else if (o + 1 < outsz) {
			out[o] = (char)*p++;
		} else {
			n = 0;
		}
		if (!n) {
			out[0] = '\0';
			return SC_ETOOBIG;
		}
		o += n;
	}
	out[o] = '\0';
	return (int)o;
}

int sc_jscan_int(const sc_jval_t *v, long long *out)
{
	if (v->type != SC_JT_INT)
		return SC_EINVAL;
	const char *p = v->text;
	int neg = *p == '-';
	p += neg;
	unsigned long long acc = 0, lim = neg ? (unsigned long long)INT64_MAX + 1 : INT64_MAX;
	for (; p < v->text + v->len; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (acc > (lim - d) / 10)
			return SC_ERANGE;
		acc = acc * 10 + d;
	}
	*out = neg ? (long long)(0 - acc) : (long long)acc;
	return 0;
}

int sc_jscan_array(const sc_jval_t *v, size_t *count, int *same_type)
{
	if (v->type != SC_JT_ARRAY)
		return SC_EINVAL;
	scan_t s = {(const unsigned char *)v->text + 1, (const unsigned char *)v->text + v->len, 1};
	*count = 0;
	*same_type = SC_JT_ABSENT;
	skip_ws(&s);
	if (*s.p == ']')
		return 0;
	for (;;) {
		int t;
		if (scan_value(&s, &t) < 0)
			return SC_EPARSE;
		*same_type = (*count == 0 || *same_type == t) ? t : SC_JT_ABSENT;
		if (*count == 0)
			*same_type = t;
		(*count)++;
		skip_ws(&s);
		if (s.p >= s.end || *s.p == ']')
			return 0;
		s.p++; /* ',' (the text was validated) */
	}
}
