/* A validating JSON scanner that allocates nothing.
 *
 * A proxy that only routes on one or two top-level fields of a request (the
 * gateway reads `model` and `stream`) need not build a tree of the whole
 * body: sc_jscan_object() checks in one pass that the text is one JSON value
 * (RFC 8259 grammar, UTF-8, depth at most SC_JSCAN_MAX_DEPTH) and reports
 * where the wanted top-level members' values are. The values stay in the
 * caller's text; the helpers below read them.
 *
 * Everything is bounded by the input length: no allocation, no recursion
 * deeper than SC_JSCAN_MAX_DEPTH. */
#ifndef SC_BASE_JSCAN_H
#define SC_BASE_JSCAN_H

#include <stddef.h>

#define SC_JSCAN_MAX_DEPTH 64

enum {
	SC_JT_ABSENT = 0,
	SC_JT_NULL,
	SC_JT_FALSE,
	SC_JT_TRUE,
	SC_JT_INT, /* a number without fraction or exponent */
	SC_JT_REAL,
	SC_JT_STRING,
	SC_JT_ARRAY,
	SC_JT_OBJECT,
};

/* One value: its type and its text (a string token includes its quotes). */
typedef struct sc_jval {
	int type;
	const char *text; /* borrowed from the scanned input */
	size_t len;
} sc_jval_t;

/* Scans text[0..len) as one JSON value. When it is an object, out[i] is
 * the value of top-level member keys[i] (type SC_JT_ABSENT when missing);
 * keys are matched on their raw text (members written with escapes do not
 * match). Returns 0 for an object, SC_EINVAL for valid JSON that is not an
 * object, SC_EPARSE for invalid JSON, SC_EEXISTS when a wanted key appears
 * twice (a body two parsers could read differently). */
int sc_jscan_object(const char *text, size_t len, const char *const *keys, size_t nkeys,
                    sc_jval_t *out);

/* Decodes a string value (with its escapes) into out, NUL-terminated.
 * Returns the decoded length, SC_EINVAL when v is not a string,
 * SC_ETOOBIG when it does not fit (out then holds ""). */
int sc_jscan_string(const sc_jval_t *v, char *out, size_t outsz);

/* The value of an SC_JT_INT; SC_ERANGE past the range of long long. */
int sc_jscan_int(const sc_jval_t *v, long long *out);

/* Counts the elements of an array value; *same_type is the type every
 * element shares, or SC_JT_ABSENT when they differ or there are none.
 * SC_EINVAL when v is not an array. */
int sc_jscan_array(const sc_jval_t *v, size_t *count, int *same_type);

#endif
