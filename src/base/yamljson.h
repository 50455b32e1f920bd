/* Loading YAML or JSON text into jansson documents, with positions.
 *
 * A text holds zero or more documents: YAML documents separated by `---`, or
 * one JSON value. Text whose first non-blank character is '{' or '[' is read
 * with jansson (exact JSON numbers, duplicate keys rejected); if jansson
 * rejects it, libyaml gets a chance (a YAML flow collection), and jansson's
 * error is reported when both fail. Everything else goes to libyaml.
 *
 * YAML scalars are resolved with the YAML 1.2 core schema, which is what a
 * Kubernetes user expects of `replicas: 2` and `preemptible: true`:
 *   plain null, Null, NULL, ~ and the empty scalar       -> null
 *   plain true/True/TRUE, false/False/FALSE              -> boolean
 *   plain [-+]?[0-9]+, 0x.., 0o..                        -> integer
 *   plain [-+]?(.[0-9]+|[0-9]+(.[0-9]*)?)([eE][-+]?[0-9]+)? -> real
 *   everything else, quoted scalars, block scalars, !!str -> string
 * so "2" in quotes stays a string, and YAML 1.1's yes/no/on/off stay strings
 * (a label `zone: no` is not a boolean). Aliases are expanded (counted in the
 * node budget, so a "billion laughs" text is refused); mapping keys must be
 * scalars and unique.
 *
 * Positions: each document keeps a table from a field path to the line and
 * column (1-based) where its value starts. Paths are written as the manifest
 * layer names fields: keys joined by '.', array elements as "[i]", e.g.
 * "spec.tasks[0].resources.gpu"; the document root is "". */
#ifndef STARCLOUD_YAMLJSON_H
#define STARCLOUD_YAMLJSON_H

#include <jansson.h>
#include <stddef.h>

typedef struct sc_yj_limits {
	size_t max_bytes;  /* whole text; default 64 MiB */
	size_t max_depth;  /* nesting of collections; default 64 */
	size_t max_string; /* one scalar or key, bytes; default 1 MiB */
	size_t max_nodes;  /* values over all documents; default 4 Mi */
} sc_yj_limits_t;

/* Fills l with the defaults above. */
void sc_yj_limits_default(sc_yj_limits_t *l);

typedef struct sc_yj_error {
	int line, col; /* 1-based; 0 when unknown */
	char msg[256];
} sc_yj_error_t;

typedef struct sc_yj_docs sc_yj_docs_t;

/* Parses len bytes of text (need not be NUL-terminated). limits may be NULL
 * for the defaults. On success returns 0 and *out owns every document; on
 * failure returns SC_EPARSE (malformed), SC_ETOOBIG (a limit was hit) or
 * SC_ENOMEM, fills err and leaves *out NULL. */
int sc_yj_load(const char *text, size_t len, const sc_yj_limits_t *limits, sc_yj_docs_t **out,
               sc_yj_error_t *err);
/* Frees the documents and their tables; accepts NULL. */
void sc_yj_free(sc_yj_docs_t *d);

/* Number of documents. Documents that are only null (an empty `---`
 * section) are dropped. */
size_t sc_yj_count(const sc_yj_docs_t *d);
/* Document i, borrowed: valid until sc_yj_free. */
json_t *sc_yj_doc(const sc_yj_docs_t *d, size_t i);
/* Where the value at path (see above) starts in document i. Returns 1 when
 * found; otherwise 0 and the position of the longest recorded prefix of the
 * path (the enclosing object, for a missing field). */
int sc_yj_pos(const sc_yj_docs_t *d, size_t i, const char *path, int *line, int *col);

#endif
