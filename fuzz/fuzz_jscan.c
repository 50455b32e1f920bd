/* libFuzzer target: the gateway's request-body scanner (base/jscan.c)
 * against jansson.
 *
 * What the scanner calls valid JSON (an object, or another value) jansson
 * must load too, and what jansson loads within the scanner's depth limit
 * the scanner must accept, unless a wanted key appears twice (refused on
 * purpose) or a number is beyond what jansson holds. For an object the
 * wanted members must read the same through both: type, and for strings,
 * integers and arrays their value. Inputs with a NUL byte are only
 * scanned (jansson reads NUL as the end of some tokens). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/jscan.h"
#include "starcloud/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Deepest nesting of [ and { outside strings. */
static size_t depth_of(const char *s, size_t n)
{
	size_t d = 0, max = 0;
	int in_str = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
		} else if (c == '[' || c == '{') {
			if (++d > max)
				max = d;
		} else if ((c == ']' || c == '}') && d) {
			d--;
		}
	}
	return max;
}

static void compare(const sc_jval_t *v, json_t *j)
{
	if (v->type == SC_JT_ABSENT)
		return;
	if (!j)
		abort();
	switch (v->type) {
	case SC_JT_STRING: {
		char buf[8192];
		int n = sc_jscan_string(v, buf, sizeof(buf));
		if (!json_is_string(j))
			abort();
		if (n >= 0 && ((size_t)n != json_string_length(j) ||
		               memcmp(buf, json_string_value(j), (size_t)n) != 0))
			abort();
		break;
	}
	case SC_JT_INT: {
		long long x;
		if (!json_is_integer(j) && !json_is_real(j))
			abort();
		if (sc_jscan_int(v, &x) == 0 && json_is_integer(j) && x != json_integer_value(j))
			abort();
		break;
	}
	case SC_JT_ARRAY: {
		size_t count;
		int same;
		if (!json_is_array(j) || sc_jscan_array(v, &count, &same) < 0 ||
		    count != json_array_size(j))
			abort();
		break;
	}
	case SC_JT_OBJECT:
		if (!json_is_object(j))
			abort();
		break;
	case SC_JT_TRUE:
	case SC_JT_FALSE:
		if (!json_is_boolean(j))
			abort();
		break;
	case SC_JT_NULL:
		if (!json_is_null(j))
			abort();
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const keys[] = {"model", "stream", "prompt", "messages", "max_tokens"};
	const char *text = (const char *)data;
	sc_jval_t out[5];
	int rc = sc_jscan_object(text, size, keys, 5, out);
	/* jansson takes a NUL byte for the end of some tokens ("7\0" loads):
	 * with one in the input only the scanner's safety is checked. */
	if (memchr(text, '\0', size))
		return 0;
	json_error_t jerr;
	json_t *j = json_loadb(text, size, JSON_DECODE_ANY, &jerr);
	/* jansson holds integers in 64 bits and reals in doubles. */
	int overflow = !j && (strstr(jerr.text, "overflow") || strstr(jerr.text, "too big"));
	if ((rc == 0 || rc == SC_EINVAL) && !j && !overflow)
		abort(); /* the scanner let through what a parser refuses */
	if (rc == SC_EPARSE && j && depth_of(text, size) <= SC_JSCAN_MAX_DEPTH)
		abort(); /* the scanner refused valid JSON */
	if (rc == 0 && j) {
		if (!json_is_object(j))
			abort();
		/* Members written with escapes do not match the scanner's raw keys:
		 * compare only bodies without any. */
		if (!memchr(text, '\\', size))
			for (size_t i = 0; i < 5; i++)
				compare(&out[i], json_object_get(j, keys[i]));
	}
	json_decref(j);
	return 0;
}
