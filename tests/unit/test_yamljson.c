/* Unit tests for src/base/yamljson.c: YAML and JSON documents, scalar
 * resolution, positions, limits and every kind of malformed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "base/yamljson.h"
#include "starcloud/error.h"

static sc_yj_docs_t *load_ok(const char *text)
{
	sc_yj_docs_t *d = NULL;
	sc_yj_error_t err;
	int rc = sc_yj_load(text, strlen(text), NULL, &d, &err);
	if (rc)
		fail_msg("load failed: %d:%d: %s", err.line, err.col, err.msg);
	return d;
}

static int load_bad(const char *text, const sc_yj_limits_t *lim, sc_yj_error_t *err)
{
	sc_yj_docs_t *d = (sc_yj_docs_t *)1;
	int rc = sc_yj_load(text, strlen(text), lim, &d, err);
	assert_true(rc < 0);
	assert_null(d);
	assert_true(err->msg[0] != '\0');
	return rc;
}

static void test_empty(void **state)
{
	sc_yj_docs_t *d = load_ok("");
	assert_int_equal(sc_yj_count(d), 0);
	sc_yj_free(d);
	d = load_ok("# only a comment\n---\n---\n");
	assert_int_equal(sc_yj_count(d), 0);
	sc_yj_free(d);
	sc_yj_free(NULL);
}

static void test_yaml_scalars(void **state)
{
	sc_yj_docs_t *d = load_ok("a: 2\nb: \"2\"\nc: '2'\nd: 0.5\ne: true\nf: ~\ng: null\n"
	                          "h: no\ni: 500m\nj: 1e3\nk: -7\nl: 0x10\nm: !!str 3\n"
	                          "n: |\n  text\no: .inf\np: FALSE\nq: 16Gi\nr:\n");
	json_t *o = sc_yj_doc(d, 0);
	assert_int_equal(sc_yj_count(d), 1);
	assert_true(json_is_integer(json_object_get(o, "a")));
	assert_int_equal(json_integer_value(json_object_get(o, "a")), 2);
	assert_string_equal(json_string_value(json_object_get(o, "b")), "2");
	assert_string_equal(json_string_value(json_object_get(o, "c")), "2");
	assert_true(json_is_real(json_object_get(o, "d")));
	assert_true(json_is_true(json_object_get(o, "e")));
	assert_true(json_is_null(json_object_get(o, "f")));
	assert_true(json_is_null(json_object_get(o, "g")));
	assert_string_equal(json_string_value(json_object_get(o, "h")), "no");
	assert_string_equal(json_string_value(json_object_get(o, "i")), "500m");
	assert_true(json_real_value(json_object_get(o, "j")) == 1000.0);
	assert_int_equal(json_integer_value(json_object_get(o, "k")), -7);
	assert_int_equal(json_integer_value(json_object_get(o, "l")), 16);
	assert_string_equal(json_string_value(json_object_get(o, "m")), "3");
	assert_string_equal(json_string_value(json_object_get(o, "n")), "text\n");
	assert_string_equal(json_string_value(json_object_get(o, "o")), ".inf");
	assert_true(json_is_false(json_object_get(o, "p")));
	assert_string_equal(json_string_value(json_object_get(o, "q")), "16Gi");
	assert_true(json_is_null(json_object_get(o, "r")));
	sc_yj_free(d);
}

static void test_yaml_multi_and_positions(void **state)
{
	const char *text = "kind: Node\nmetadata: {name: a}\n---\n"
	                   "kind: Job\nspec:\n  tasks:\n  - name: w\n    resources:\n"
	                   "      gpu: 1\n";
	sc_yj_docs_t *d = load_ok(text);
	int line, col;
	assert_int_equal(sc_yj_count(d), 2);
	assert_int_equal(sc_yj_pos(d, 0, "metadata.name", &line, &col), 1);
	assert_int_equal(line, 2);
	assert_int_equal(col, 18);
	assert_int_equal(sc_yj_pos(d, 1, "spec.tasks[0].resources.gpu", &line, &col), 1);
	assert_int_equal(line, 9);
	assert_int_equal(col, 12);
	assert_int_equal(sc_yj_pos(d, 1, "spec.tasks[0].name", &line, &col), 1);
	assert_int_equal(line, 7);
	assert_int_equal(col, 11);
	/* A missing field falls back to its nearest ancestor. */
	assert_int_equal(sc_yj_pos(d, 1, "spec.tasks[0].resources.cpu", &line, &col), 0);
	assert_int_equal(line, 9);
	assert_int_equal(col, 7);
	assert_int_equal(sc_yj_pos(d, 1, "spec.queue", &line, &col), 0);
	assert_int_equal(line, 6);
	assert_int_equal(sc_yj_pos(d, 5, "spec", &line, &col), 0);
	assert_int_equal(line, 0);
	sc_yj_free(d);
}

static void test_yaml_alias(void **state)
{
	sc_yj_docs_t *d = load_ok("base: &r {cpu: 1, gpu: 2}\ncopy: *r\n");
	json_t *o = sc_yj_doc(d, 0);
	assert_true(json_equal(json_object_get(o, "base"), json_object_get(o, "copy")));
	sc_yj_free(d);
}

static void test_json(void **state)
{
	const char *text = "  [\n  {\"kind\": \"Node\", \"metadata\": {\"name\": \"a\"}},\n"
	                   "  {\"kind\": \"Job\", \"spec\": {\"tasks\": [{\"r\\u00e9\": 1, "
	                   "\"x\": [1, 2.5, \"s\"]}]}}\n]\n";
	sc_yj_docs_t *d = load_ok(text);
	int line, col;
	assert_int_equal(sc_yj_count(d), 1);
	json_t *a = sc_yj_doc(d, 0);
	assert_true(json_is_array(a));
	assert_int_equal(json_array_size(a), 2);
	assert_int_equal(sc_yj_pos(d, 0, "[1].spec.tasks[0].x[2]", &line, &col), 1);
	assert_int_equal(line, 3);
	assert_int_equal(col, 67);
	assert_int_equal(sc_yj_pos(d, 0, "[1].spec.tasks[0].r\xc3\xa9", &line, &col), 1);
	assert_int_equal(col, 50);
	assert_int_equal(sc_yj_pos(d, 0, "[0].metadata.name", &line, &col), 1);
	assert_int_equal(line, 2);
	sc_yj_free(d);
}

static void test_yaml_flow_fallback(void **state)
{
	/* Not JSON (unquoted words) but valid YAML flow. */
	sc_yj_docs_t *d = load_ok("{kind: Node, metadata: {name: a}}");
	assert_string_equal(json_string_value(json_object_get(sc_yj_doc(d, 0), "kind")), "Node");
	sc_yj_free(d);
}

static void test_malformed(void **state)
{
	sc_yj_error_t err;
	assert_int_equal(load_bad("a: [1, 2\n", NULL, &err), SC_EPARSE);
	assert_int_equal(load_bad("a: 1\n a: 2\n  - x\n", NULL, &err), SC_EPARSE);
	assert_true(err.line > 0);
	assert_int_equal(load_bad("a: 1\na: 2\n", NULL, &err), SC_EPARSE);
	assert_non_null(strstr(err.msg, "duplicate key"));
	assert_int_equal(err.line, 2);
	assert_int_equal(load_bad("{\"a\": 1, \"a\": 2}", NULL, &err), SC_EPARSE);
	assert_int_equal(load_bad("{\"a\": 1,, }", NULL, &err), SC_EPARSE);
	assert_int_equal(err.line, 1);
	assert_int_equal(load_bad("? [a]\n: 1\n", NULL, &err), SC_EPARSE);
	assert_non_null(strstr(err.msg, "key must be a scalar"));
	assert_int_equal(load_bad("a: *nope\n", NULL, &err), SC_EPARSE);
	assert_int_equal(load_bad("a: 99999999999999999999\n", NULL, &err), SC_EPARSE);
	assert_non_null(strstr(err.msg, "out of range"));
	assert_int_equal(load_bad("a: \xff\n", NULL, &err), SC_EPARSE); /* bad UTF-8 */
	assert_int_equal(load_bad("\t- a: 1\n", NULL, &err), SC_EPARSE);
}

static void test_limits(void **state)
{
	sc_yj_error_t err;
	sc_yj_limits_t lim;
	sc_yj_limits_default(&lim);
	assert_int_equal(lim.max_depth, 64);

	char deep[400] = "";
	memset(deep, '[', 70);
	load_bad(deep, NULL, &err); /* unclosed: JSON and YAML both reject */
	memset(deep + 70, ']', 70);
	assert_int_equal(load_bad(deep, NULL, &err), SC_ETOOBIG);
	assert_non_null(strstr(err.msg, "deeper"));
	char ydeep[400] = "a: ";
	memset(ydeep + 3, '[', 70);
	memset(ydeep + 73, ']', 70);
	assert_int_equal(load_bad(ydeep, NULL, &err), SC_ETOOBIG);

	lim.max_bytes = 10;
	assert_int_equal(load_bad("a: 1234567890\n", &lim, &err), SC_ETOOBIG);
	sc_yj_limits_default(&lim);
	lim.max_string = 4;
	assert_int_equal(load_bad("a: hello\n", &lim, &err), SC_ETOOBIG);
	assert_int_equal(load_bad("{\"a\": \"hello\"}", &lim, &err), SC_ETOOBIG);
	sc_yj_limits_default(&lim);
	lim.max_nodes = 5;
	assert_int_equal(load_bad("[1, 2, 3, 4, 5, 6]", &lim, &err), SC_ETOOBIG);
	assert_int_equal(load_bad("a: 1\nb: 2\nc: 3\nd: 4\ne: 5\nf: 6\n", &lim, &err), SC_ETOOBIG);
	/* Billion laughs: each level doubles; the budget stops it. */
	sc_yj_limits_default(&lim);
	lim.max_nodes = 1000;
	assert_int_equal(load_bad("a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\n"
	                          "c: &c [*b, *b, *b, *b]\nd: &d [*c, *c, *c, *c]\n"
	                          "e: &e [*d, *d, *d, *d]\n",
	                          &lim, &err),
	                 SC_ETOOBIG);
	assert_non_null(strstr(err.msg, "alias"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_empty),
	    cmocka_unit_test(test_yaml_scalars),
	    cmocka_unit_test(test_yaml_multi_and_positions),
	    cmocka_unit_test(test_yaml_alias),
	    cmocka_unit_test(test_json),
	    cmocka_unit_test(test_yaml_flow_fallback),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
