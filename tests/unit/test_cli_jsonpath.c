/* Unit tests of `-o jsonpath=` (src/cli/jsonpath.c): kubectl's templates
 * as its users write them, and malformed ones refused with a position. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "cli/jsonpath.h"

static const char *list_json =
    "{\"kind\":\"JobList\",\"metadata\":{\"resourceVersion\":\"42\"},\"items\":["
    "{\"metadata\":{\"name\":\"a\",\"labels\":{\"team\":\"x\",\"app.kubernetes.io/name\":\"t\"}},"
    " \"spec\":{\"queue\":\"q1\",\"tasks\":[{\"replicas\":2}]},"
    " \"status\":{\"phase\":\"Running\",\"pods\":[{\"name\":\"a-0\",\"gpus\":[0,1]}]}},"
    "{\"metadata\":{\"name\":\"b\"},\"spec\":{\"queue\":\"q2\",\"tasks\":[{\"replicas\":8}]},"
    " \"status\":{\"phase\":\"Pending\"}},"
    "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"queue\":\"q1\",\"tasks\":[{\"replicas\":1}]},"
    " \"status\":{\"phase\":\"Succeeded\"}}]}";

/* The text a template makes of the list (free it), or NULL if refused. */
static char *run(const char *tmpl)
{
	char err[256];
	json_t *doc = json_loads(list_json, 0, NULL);
	assert_non_null(doc);
	sc_jsonpath_t *p = sc_jsonpath_parse(tmpl, err, sizeof(err));
	char *out = NULL;
	if (p) {
		sc_buf_t b;
		sc_buf_init(&b, 1 << 20);
		assert_int_equal(sc_jsonpath_eval(p, doc, &b), 0);
		sc_buf_append(&b, "", 0);
		out = sc_buf_steal(&b, NULL);
	}
	sc_jsonpath_free(p);
	json_decref(doc);
	return out;
}

static void expect(const char *tmpl, const char *want)
{
	char *got = run(tmpl);
	if (!got)
		fail_msg("template %s refused", tmpl);
	if (strcmp(got, want) != 0)
		fail_msg("template %s: got \"%s\", want \"%s\"", tmpl, got, want);
	free(got);
}

static void test_fields_and_indexes(void **state)
{
	expect("{.kind}", "JobList");
	expect("{$.metadata.resourceVersion}", "42");
	expect("{.items[0].metadata.name}", "a");
	expect("{.items[-1].metadata.name}", "c");
	expect("{.items[5].metadata.name}", ""); /* missing: nothing */
	expect("{.items[*].metadata.name}", "a b c");
	expect("{.items[1:].metadata.name}", "b c");
	expect("{.items[:2].metadata.name}", "a b");
	expect("{.items[0].status.pods[0].gpus}", "[0,1]");
	expect("{.items[0].spec.tasks[0].replicas}", "2");
	expect("{.items[0].metadata.labels['app.kubernetes.io/name']}", "t");
	expect("{metadata.resourceVersion}", "42"); /* no leading dot */
	expect("name: {.items[0].metadata.name}\\n", "name: a\n");
}

static void test_filters(void **state)
{
	expect("{.items[?(@.status.phase==\"Running\")].metadata.name}", "a");
	expect("{.items[?(@.spec.queue == 'q1')].metadata.name}", "a c");
	expect("{.items[?(@.spec.queue!='q1')].metadata.name}", "b");
	expect("{.items[?(@.spec.tasks[0].replicas>1)].metadata.name}", "a b");
	expect("{.items[?(@.spec.tasks[0].replicas<=1)].metadata.name}", "c");
	expect("{.items[?(@.metadata.labels)].metadata.name}", "a"); /* exists */
	expect("{.items[?(@.status.phase=='Nope')].metadata.name}", "");
}

static void test_range_and_literals(void **state)
{
	expect("{range .items[*]}{.metadata.name}{\"\\t\"}{.status.phase}{\"\\n\"}{end}",
	       "a\tRunning\nb\tPending\nc\tSucceeded\n");
	expect("{range .items[*]}[{@.metadata.name}]{end}", "[a][b][c]");
	/* $ inside a range still means the document */
	expect("{range .items[0:2]}{.metadata.name}@{$.metadata.resourceVersion} {end}",
	       "a@42 b@42 ");
	/* nested ranges */
	expect("{range .items[*]}{range .status.pods[*]}{.name}{end}{end}", "a-0");
	expect("{..phase}", "Running Pending Succeeded");
	expect("{'literal'}", "literal");
	expect("{.metadata}", "{\"resourceVersion\":\"42\"}");
	expect("{range .items[1].spec.tasks[*]}{@}{end}", "{\"replicas\":8}");
}

static void test_refused(void **state)
{
	static const char *const bad[] = {
	    "{.items[0}",
	    "{.items[}",
	    "{range .items[*]}{.x}",
	    "{end}",
	    "{.a",
	    "{}",
	    "{.items[?(@.a==)]}",
	    "{.items[?(x)]}",
	    "{'unclosed}",
	    "{.items[abc]}",
	    "{.a b}",
	    "{..}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[256] = "";
		sc_jsonpath_t *p = sc_jsonpath_parse(bad[i], err, sizeof(err));
		if (p)
			fail_msg("template %s accepted", bad[i]);
		assert_non_null(strstr(err, "jsonpath: position "));
	}
	/* too long */
	char *big = malloc(SC_JSONPATH_MAX + 2);
	memset(big, 'x', SC_JSONPATH_MAX + 1);
	big[SC_JSONPATH_MAX + 1] = '\0';
	char err[256];
	assert_null(sc_jsonpath_parse(big, err, sizeof(err)));
	free(big);
}

/* A bounded output: a template that would write more fails cleanly. */
static void test_output_limit(void **state)
{
	char err[256];
	json_t *doc = json_loads(list_json, 0, NULL);
	sc_jsonpath_t *p = sc_jsonpath_parse("{range .items[*]}{.metadata}{end}", err, sizeof(err));
	assert_non_null(p);
	sc_buf_t b;
	sc_buf_init(&b, 16);
	assert_int_not_equal(sc_jsonpath_eval(p, doc, &b), 0);
	sc_buf_free(&b);
	sc_jsonpath_free(p);
	json_decref(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fields_and_indexes), cmocka_unit_test(test_filters),
	    cmocka_unit_test(test_range_and_literals), cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_output_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
