/* Protocol Buffers text format -> JSON (see pbtxt.h): a tokenizer and a
 * recursive descent over messages, bounded in depth. */
#include "base/pbtxt.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "starcloud/buf.h"

typedef struct pb {
	const char *p, *end;
	int line;
	char *err;
	size_t errsz;
	int failed;
} pb_t;

static int fail(pb_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(pb_t *s, const char *fmt, ...)
{
	if (s->failed)
		return -1;
	s->failed = 1;
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(s->err, s->errsz, "line %d: %s", s->line, msg);
	return -1;
}

/* Skips blanks and comments; returns the next character or 0 at the end. */
static int peek(pb_t *s)
{
	while (s->p < s->end) {
		char c = *s->p;
		if (c == '\n') {
			s->line++;
			s->p++;
		} else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
			s->p++;
		} else if (c == '#') {
			while (s->p < s->end && *s->p != '\n')
				s->p++;
		} else {
			return (unsigned char)c;
		}
	}
	return 0;
}

static int is_ident_start(int c)
{
	return isalpha(c) || c == '_';
}

static int is_ident(int c)
{
	return isalnum(c) || c == '_' || c == '.';
}

/* An identifier at s->p into out (NUL-terminated). */
static int ident(pb_t *s, char *out, size_t outsz)
{
	size_t n = 0;
	if (!is_ident_start(peek(s)))
		return fail(s, "expected a field name");
	while (s->p < s->end && is_ident((unsigned char)*s->p)) {
		if (n + 1 >= outsz)
			return fail(s, "a name longer than %zu bytes", outsz - 1);
		out[n++] = *s->p++;
	}
	out[n] = '\0';
	return 0;
}

static int hexval(int c)
{
	return isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
}

/* One quoted string (either quote) with C escapes, appended to b. */
static int quoted(pb_t *s, sc_buf_t *b)
{
	char q = *s->p++;
	while (s->p < s->end && *s->p != q) {
		char c = *s->p++;
		if (c == '\n')
			return fail(s, "a string may not span lines");
		if (c != '\\') {
			sc_buf_append(b, &c, 1);
			continue;
		}
		if (s->p >= s->end)
			break;
		c = *s->p++;
		static const char from[] = "nrtabfv\\'\"?", to[] = "\n\r\t\a\b\f\v\\'\"?";
		const char *at = strchr(from, c);
		if (c && at) {
			sc_buf_append(b, &to[at - from], 1);
		} else if (c == 'x' && s->p < s->end && hexval((unsigned char)*s->p) >= 0) {
			int v = 0;
			for (int k = 0; k < 2 && s->p < s->end && hexval((unsigned char)*s->p) >= 0;
			     k++)
				v = v * 16 + hexval((unsigned char)*s->p++);
			char ch = (char)v;
			sc_buf_append(b, &ch, 1);
		} else if (c >= '0' && c <= '7') {
			int v = c - '0';
			for (int k = 0; k < 2 && s->p < s->end && *s->p >= '0' && *s->p <= '7'; k++)
				v = v * 8 + (*s->p++ - '0');
			char ch = (char)v;
			sc_buf_append(b, &ch, 1);
		} else {
			return fail(s, "unknown escape \\%c in a string", c);
		}
	}
	if (s->p >= s->end)
		return fail(s, "a string without its closing quote");
	s->p++;
	return 0;
}

/* A scalar: string(s), number or identifier. */
static json_t *scalar(pb_t *s)
{
	int c = peek(s);
	if (c == '"' || c == '\'') {
		sc_buf_t b;
		sc_buf_init(&b, SC_PBTXT_MAX_LEN);
		while ((c = peek(s)) == '"' || c == '\'')
			if (quoted(s, &b) < 0) {
				sc_buf_free(&b);
				return NULL;
			}
		json_t *v = json_stringn(b.data ? b.data : "", b.len);
		sc_buf_free(&b);
		if (!v)
			fail(s, "a string that is not valid UTF-8");
		return v;
	}
	if (c == '-' || c == '+' || c == '.' || isdigit(c)) {
		char num[64];
		size_t n = 0;
		while (s->p < s->end && (isalnum((unsigned char)*s->p) || strchr("+-.", *s->p))) {
			if (n + 1 >= sizeof(num)) {
				fail(s, "a number too long");
				return NULL;
			}
			num[n++] = *s->p++;
		}
		num[n] = '\0';
		int64_t i;
		double d;
		if (sc_parse_i64(num, INT64_MIN, INT64_MAX, &i) == 0)
			return json_integer(i);
		if (sc_parse_num(num, -1e308, 1e308, &d) == 0)
			return json_real(d);
		fail(s, "\"%s\" is not a number", num);
		return NULL;
	}
	char id[128];
	if (ident(s, id, sizeof(id)) < 0)
		return NULL;
	if (strcmp(id, "true") == 0 || strcmp(id, "True") == 0)
		return json_true();
	if (strcmp(id, "false") == 0 || strcmp(id, "False") == 0)
		return json_false();
	return json_string(id);
}

static json_t *message(pb_t *s, int depth, int close);

static json_t *value(pb_t *s, int depth)
{
	int c = peek(s);
	if (c == '{' || c == '<') {
		s->p++;
		return message(s, depth + 1, c == '{' ? '}' : '>');
	}
	return scalar(s);
}

/* message() in three parts: the loop over fields there, and the two ways a
 * field's values arrive here. obj is the message being built; lists names
 * its fields whose value is already a list, so that "a: 1 a: 2" and
 * "a: [1, 2]" make the same list and "a: 1 a: [2]" is refused. */

/* name: [v, v, ...], the '[' read: appended to name's list. 0 or -1. */
static int list_field(pb_t *s, int depth, json_t *obj, json_t *lists, const char *name)
{
	json_t *arr = json_object_get(obj, name);
	if (arr && !json_object_get(lists, name))
		return fail(s, "%s given as a value and as a list", name);
	if (!arr) {
		arr = json_array();
		if (!arr || json_object_set_new(obj, name, arr) < 0 ||
		    json_object_set_new(lists, name, json_true()) < 0)
			return fail(s, "out of memory");
	}
	while (peek(s) != ']') {
		json_t *v = value(s, depth);
		if (!v || json_array_append_new(arr, v) < 0)
			return fail(s, "out of memory");
		if (peek(s) == ',')
			s->p++;
		else if (peek(s) != ']')
			return fail(s, "expected ',' or ']' in the list of %s", name);
	}
	s->p++;
	return 0;
}

/* name: v or name { ... }: the field's value, or one more of a repeated
 * field's values (which become a list). 0 or -1. */
static int one_field(pb_t *s, int depth, json_t *obj, json_t *lists, const char *name)
{
	json_t *v = value(s, depth);
	if (!v)
		return -1;
	json_t *have = json_object_get(obj, name);
	if (!have)
		return json_object_set_new(obj, name, v) < 0 ? fail(s, "out of memory") : 0;
	if (!json_object_get(lists, name)) {
		json_t *arr = json_array();
		if (!arr || json_array_append(arr, have) < 0 ||
		    json_object_set_new(obj, name, arr) < 0 ||
		    json_object_set_new(lists, name, json_true()) < 0) {
			json_decref(v);
			return fail(s, "out of memory");
		}
		have = arr;
	}
	return json_array_append_new(have, v) < 0 ? fail(s, "out of memory") : 0;
}

/* The fields up to close ('}', '>', or 0 for the end of the input). */
static json_t *message(pb_t *s, int depth, int close)
{
	if (depth > SC_PBTXT_MAX_DEPTH) {
		fail(s, "messages nested deeper than %d", SC_PBTXT_MAX_DEPTH);
		return NULL;
	}
	json_t *obj = json_object();
	json_t *lists = json_object(); /* names whose value is already a list */
	if (!obj || !lists) {
		fail(s, "out of memory");
		goto bad;
	}
	for (;;) {
		int c = peek(s);
		if (c == close && close) {
			s->p++;
			break;
		}
		if (c == 0) {
			if (close) {
				fail(s, "a message without its closing '%c'", close);
				goto bad;
			}
			break;
		}
		char name[128];
		if (ident(s, name, sizeof(name)) < 0)
			goto bad;
		c = peek(s);
		int colon = c == ':';
		if (colon) {
			s->p++;
			c = peek(s);
		}
		if (!colon && c != '{' && c != '<' && c != '[') {
			fail(s, "expected ':' or '{' after %s", name);
			goto bad;
		}
		if (c == '[') {
			s->p++;
			if (list_field(s, depth, obj, lists, name) < 0)
				goto bad;
		} else if (one_field(s, depth, obj, lists, name) < 0) {
			goto bad;
		}
		c = peek(s);
		if (c == ',' || c == ';')
			s->p++;
	}
	json_decref(lists);
	return obj;
bad:
	json_decref(lists);
	json_decref(obj);
	return NULL;
}

json_t *sc_pbtxt_parse(const char *text, size_t len, char *err, size_t errsz)
{
	char dummy[8];
	pb_t s = {.p = text,
	          .end = text + len,
	          .line = 1,
	          .err = err ? err : dummy,
	          .errsz = err ? errsz : sizeof(dummy)};
	if (len > SC_PBTXT_MAX_LEN) {
		fail(&s, "longer than %u bytes", SC_PBTXT_MAX_LEN);
		return NULL;
	}
	if (memchr(text, '\0', len)) {
		fail(&s, "a NUL byte in the text");
		return NULL;
	}
	json_t *o = message(&s, 0, 0);
	if (!o && !s.failed)
		fail(&s, "out of memory");
	return o;
}
