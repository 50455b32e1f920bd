/* Protocol Buffers text format (Triton's config.pbtxt) into a JSON tree.
 *
 * The worker's model repository reads Triton's model configuration files;
 * the text format is generic, so this reads it without the schema:
 *
 *   name: "tiny"                       -> "name": "tiny"
 *   max_batch_size: 8                  -> "max_batch_size": 8
 *   version_policy: { latest { num_versions: 2 } }
 *                                      -> "version_policy": {"latest": {"num_versions": 2}}
 *   versions: [1, 3]   (or versions: 1 versions: 3)
 *                                      -> "versions": [1, 3]
 *   kind: KIND_CPU                     -> "kind": "KIND_CPU"  (enum values are names)
 *
 * A field written more than once becomes an array of its values, as a
 * repeated protobuf field; a list `[a, b]` is one too. Messages may be
 * written `name { }`, `name: { }` or with angle brackets; fields may end
 * with ',' or ';'. Strings take C escapes and adjacent strings join;
 * integers become JSON integers, other numbers reals, true/false booleans,
 * other identifiers strings. `#` starts a comment.
 *
 * Pure and bounded: nesting at most SC_PBTXT_MAX_DEPTH, input at most
 * SC_PBTXT_MAX_LEN bytes. Fuzzed by fuzz/fuzz_pbtxt.c. */
#ifndef SC_BASE_PBTXT_H
#define SC_BASE_PBTXT_H

#include <stddef.h>

#include <jansson.h>

#define SC_PBTXT_MAX_DEPTH 32
#define SC_PBTXT_MAX_LEN (1u << 20)

/* Parses len bytes of text (borrowed). Returns a new JSON object, or NULL
 * with "line N: what was expected" in err (out of memory says so too). */
json_t *sc_pbtxt_parse(const char *text, size_t len, char *err, size_t errsz);

#endif
