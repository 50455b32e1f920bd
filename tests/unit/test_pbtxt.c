/* Protocol Buffers text format reader (src/base/pbtxt.c), on Triton-style
 * model configurations and on the malformed texts it must refuse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/pbtxt.h"

static json_t *parse(const char *t)
{
	char err[200];
	json_t *o = sc_pbtxt_parse(t, strlen(t), err, sizeof(err));
	if (!o)
		print_message("%s\n", err);
	return o;
}

static void test_triton_config(void **state)
{
	const char *t = "# a model\n"
	                "name: \"tiny\"\n"
	                "backend: 'starcloud' \"_llama2c\"\n"
	                "max_batch_size: 8\n"
	                "version_policy: { latest { num_versions: 2 } }\n"
	                "input [ { name: \"text_input\" data_type: TYPE_STRING dims: [ -1 ] } ]\n"
	                "instance_group < count: 1, kind: KIND_CPU >;\n"
	                "parameters { key: \"tokenizer\" value: { string_value: \"t.bin\" } }\n"
	                "parameters { key: \"x\" value: { string_value: \"\\x41\\101\\n\" } }\n"
	                "rate: 0.5 flag: true\n";
	json_t *o = parse(t);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "name")), "tiny");
	assert_string_equal(json_string_value(json_object_get(o, "backend")), "starcloud_llama2c");
	assert_int_equal(json_integer_value(json_object_get(o, "max_batch_size")), 8);
	json_t *lat = json_object_get(json_object_get(o, "version_policy"), "latest");
	assert_int_equal(json_integer_value(json_object_get(lat, "num_versions")), 2);
	json_t *in = json_object_get(o, "input");
	assert_true(json_is_array(in) && json_array_size(in) == 1);
	json_t *dims = json_object_get(json_array_get(in, 0), "dims");
	assert_int_equal(json_integer_value(json_array_get(dims, 0)), -1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(in, 0), "data_type")),
	                    "TYPE_STRING");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(o, "instance_group"), "kind")),
	    "KIND_CPU");
	/* A repeated message field is a list of its values. */
	json_t *ps = json_object_get(o, "parameters");
	assert_true(json_is_array(ps) && json_array_size(ps) == 2);
	json_t *v =
	    json_object_get(json_object_get(json_array_get(ps, 1), "value"), "string_value");
	assert_string_equal(json_string_value(v), "AA\n");
	assert_true(json_is_real(json_object_get(o, "rate")));
	assert_true(json_is_true(json_object_get(o, "flag")));
	json_decref(o);
	/* versions: [1, 3] and versions: 1 versions: 3 read the same. */
	json_t *a = parse("specific { versions: [1, 3] }"),
	       *b = parse("specific { versions: 1 versions: 3 }");
	assert_true(json_equal(a, b));
	json_decref(a);
	json_decref(b);
	json_t *e = parse("");
	assert_int_equal(json_object_size(e), 0);
	json_decref(e);
}

static void test_refused(void **state)
{
	const char *bad[] = {
	    "name \"x\"",           /* no colon before a scalar */
	    "name: \"unterminated", /* string */
	    "a { b: 1",             /* message not closed */
	    "a: [1, 2",             /* list not closed */
	    "a: [1 2]",             /* list without commas */
	    "a: 1 a: [2]",          /* a value and a list */
	    "a: \"\\q\"",           /* unknown escape */
	    "a: 1.2.3",             /* not a number */
	    "1: 2",                 /* a field name that is a number */
	    "a: }",                 /* a value that is not one */
	    "a: \"\xff\"",          /* not UTF-8 */
	};
	char err[200];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *o = sc_pbtxt_parse(bad[i], strlen(bad[i]), err, sizeof(err));
		if (o)
			print_message("accepted: %s\n", bad[i]);
		assert_null(o);
		assert_true(strncmp(err, "line 1: ", 8) == 0);
	}
	/* Depth is bounded. */
	char deep[400];
	for (int i = 0; i < 40; i++)
		memcpy(deep + 2 * i, "a{", 3);
	assert_null(sc_pbtxt_parse(deep, strlen(deep), err, sizeof(err)));
	assert_non_null(strstr(err, "deeper"));
	assert_null(sc_pbtxt_parse("a: 1\n\nb c", 9, err, sizeof(err)));
	assert_true(strncmp(err, "line 3: ", 8) == 0);
	assert_null(sc_pbtxt_parse("a: 1\0b: 2", 9, err, sizeof(err)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_triton_config),
	    cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
