/* `-o jsonpath=TEMPLATE`: kubectl's JSONPath templates over what the
 * server returns.
 *
 * A template is text with expressions in braces, as kubectl has them:
 *   {.metadata.name}             a field (a leading $ is allowed)
 *   {.items[0]} {.items[-1]}     an element; {.items[1:3]} a slice
 *   {.items[*].metadata.name}    every element (results joined by spaces)
 *   {['a.b']} {.spec['x-y']}     a field whose name holds dots or dashes
 *   {..name}                     every field "name" at any depth
 *   {.items[?(@.status.phase=="Running")].metadata.name}
 *                                elements whose path compares (==, !=, <,
 *                                <=, >, >= with a number or a quoted
 *                                string) or exists ({[?(@.spec.x)]})
 *   {range .items[*]}...{end}    the body once per result, with @ (and a
 *                                leading .) meaning that result
 *   {"\n"} {"text"}              literal text; \n \t \\ \" in the template
 * Strings print as they are, other values as compact JSON; a path that
 * matches nothing prints nothing (kubectl's --allow-missing-template-keys).
 * Pure; bounded (template length, nesting, results); unit-tested
 * (tests/unit/test_cli_jsonpath.c) and fuzzed (fuzz/fuzz_jsonpath.c). */
#ifndef SC_CLI_JSONPATH_H
#define SC_CLI_JSONPATH_H

#include <stddef.h>

#include <jansson.h>

#include "starcloud/buf.h"

typedef struct sc_jsonpath sc_jsonpath_t;

#define SC_JSONPATH_MAX 4096 /* template length */

/* Parses a template. NULL on error, with the reason and the offending
 * position in err ("position 7: unclosed [ ..."). Free with
 * sc_jsonpath_free (NULL is fine). */
sc_jsonpath_t *sc_jsonpath_parse(const char *tmpl, char *err, size_t errsz);
void sc_jsonpath_free(sc_jsonpath_t *p);

/* Evaluates the template on doc (borrowed) and appends the text to out.
 * 0, or SC_ETOOBIG when the output passes out's limit. */
int sc_jsonpath_eval(const sc_jsonpath_t *p, json_t *doc, sc_buf_t *out);

#endif
