/* JSON merge patch against the examples of RFC 7386, appendix A. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "starcloud/json_merge.h"

static void check(const char *target, const char *patch, const char *want)
{
	json_t *t = json_loads(target, JSON_DECODE_ANY, NULL);
	json_t *p = json_loads(patch, JSON_DECODE_ANY, NULL);
	json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);
	assert_non_null(t);
	assert_non_null(p);
	assert_non_null(w);
	json_t *got = sc_json_merge_patch(t, p);
	assert_non_null(got);
	if (!json_equal(got, w)) {
		char *s = json_dumps(got, JSON_ENCODE_ANY);
		fail_msg("patch %s on %s gave %s, want %s", patch, target, s, want);
	}
	json_decref(t);
	json_decref(p);
	json_decref(w);
	json_decref(got);
}

static void test_rfc_examples(void **state)
{
	check("{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
	check("{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}");
	check("{\"a\":\"b\"}", "{\"a\":null}", "{}");
	check("{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}");
	check("{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
	check("{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}");
	check("{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}", "{\"a\":{\"b\":\"d\"}}");
	check("{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}");
	check("[\"a\",\"b\"]", "[\"c\",\"d\"]", "[\"c\",\"d\"]");
	check("{\"a\":\"b\"}", "[\"c\"]", "[\"c\"]");
	check("{\"a\":\"foo\"}", "null", "null");
	check("{\"a\":\"foo\"}", "\"bar\"", "\"bar\"");
	check("{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}");
	check("[1,2]", "{\"a\":\"b\",\"c\":null}", "{\"a\":\"b\"}");
	check("{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rfc_examples),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
