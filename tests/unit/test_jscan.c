/* The validating JSON scanner (src/base/jscan.h) the gateway routes on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "starcloud/error.h"
#include "base/jscan.h"

static const char *const keys[] = {"model", "stream", "max_tokens", "messages"};

static int scan(const char *s, sc_jval_t *v)
{
	return sc_jscan_object(s, strlen(s), keys, 4, v);
}

static void test_members(void **state)
{
	sc_jval_t v[4];
	const char *b = " {\"x\":{\"model\":1},\"model\" : \"tiny:2\", \"stream\":true,"
	                "\"max_tokens\":-12,\"messages\":[{\"a\":[1,2]},{}]} ";
	assert_int_equal(scan(b, v), 0);
	assert_int_equal(v[0].type, SC_JT_STRING);
	char m[32];
	assert_int_equal(sc_jscan_string(&v[0], m, sizeof(m)), 6);
	assert_string_equal(m, "tiny:2");
	assert_int_equal(v[1].type, SC_JT_TRUE);
	long long n = 0;
	assert_int_equal(sc_jscan_int(&v[2], &n), 0);
	assert_int_equal(n, -12);
	size_t count;
	int same;
	assert_int_equal(sc_jscan_array(&v[3], &count, &same), 0);
	assert_int_equal(count, 2);
	assert_int_equal(same, SC_JT_OBJECT);
	/* Nested "model" keys are not top-level members. */
	assert_int_equal(scan("{\"x\":{\"model\":\"a\"}}", v), 0);
	assert_int_equal(v[0].type, SC_JT_ABSENT);
}

static void test_types_and_numbers(void **state)
{
	sc_jval_t v[4];
	assert_int_equal(scan("{\"max_tokens\":1.5,\"stream\":null}", v), 0);
	assert_int_equal(v[2].type, SC_JT_REAL);
	assert_int_equal(v[1].type, SC_JT_NULL);
	assert_int_equal(scan("{\"max_tokens\":1e3}", v), 0);
	assert_int_equal(v[2].type, SC_JT_REAL);
	long long n;
	assert_int_equal(scan("{\"max_tokens\":9223372036854775807}", v), 0);
	assert_int_equal(sc_jscan_int(&v[2], &n), 0);
	assert_true(n == INT64_MAX);
	assert_int_equal(scan("{\"max_tokens\":-9223372036854775808}", v), 0);
	assert_int_equal(sc_jscan_int(&v[2], &n), 0);
	assert_true(n == INT64_MIN);
	assert_int_equal(scan("{\"max_tokens\":9223372036854775808}", v), 0);
	assert_int_equal(sc_jscan_int(&v[2], &n), SC_ERANGE);
	size_t count;
	int same;
	assert_int_equal(scan("{\"messages\":[1,\"a\"]}", v), 0);
	assert_int_equal(sc_jscan_array(&v[3], &count, &same), 0);
	assert_int_equal(count, 2);
	assert_int_equal(same, SC_JT_ABSENT);
	assert_int_equal(scan("{\"messages\":[ ]}", v), 0);
	assert_int_equal(sc_jscan_array(&v[3], &count, &same), 0);
	assert_int_equal(count, 0);
	assert_int_equal(sc_jscan_array(&v[1], &count, &same), SC_EINVAL);
}

static void test_refusals(void **state)
{
	sc_jval_t v[4];
	const char *bad[] = {
	    "",
	    "{",
	    "{\"model\":}",
	    "{\"model\":\"a\",}",
	    "{\"a\" 1}",
	    "{a:1}",
	    "{\"a\":01}",
	    "{\"a\":1.}",
	    "{\"a\":-}",
	    "{\"a\":tru}",
	    "{\"a\":\"\\x\"}",
	    "{\"a\":\"\\u12g4\"}",
	    "{\"a\":\"\x01\"}",
	    "{} x",
	    "{\"a\":[1,]}",
	    "{\"a\":\"\xff\"}",
	    "{\"a\":\"\xc0\xaf\"}",
	    "{\"a\":\"\xed\xa0\x80\"}",
	    "{\"a\":\"abc",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(scan(bad[i], v), SC_EPARSE);
	/* Valid JSON that is not an object. */
	assert_int_equal(scan("[1,2]", v), SC_EINVAL);
	assert_int_equal(scan("\"x\"", v), SC_EINVAL);
	assert_int_equal(scan("3", v), SC_EINVAL);
	/* A wanted key twice: two parsers could disagree on which counts. */
	assert_int_equal(scan("{\"model\":\"a\",\"model\":\"b\"}", v), SC_EEXISTS);
	/* Other keys may repeat (only the routed ones matter here). */
	assert_int_equal(scan("{\"x\":1,\"x\":2}", v), 0);
	/* Valid UTF-8 passes. */
	assert_int_equal(scan("{\"model\":\"caf\xc3\xa9 \xf0\x9f\x98\x80\"}", v), 0);
}

/* {"a": followed by depth nested arrays, all closed. */
static int nested(int depth)
{
	char doc[2 * SC_JSCAN_MAX_DEPTH + 16];
	size_t n = 0;
	memcpy(doc, "{\"a\":", 5);
	n = 5;
	for (int i = 0; i < depth; i++)
		doc[n++] = '[';
	for (int i = 0; i < depth; i++)
		doc[n++] = ']';
	doc[n++] = '}';
	doc[n] = '\0';
	sc_jval_t v[4];
	return scan(doc, v);
}

static void test_depth_bound(void **state)
{
	/* The object is level 1: 63 nested arrays reach the limit of 64. */
	assert_int_equal(nested(SC_JSCAN_MAX_DEPTH - 1), 0);
	assert_int_equal(nested(SC_JSCAN_MAX_DEPTH), SC_EPARSE);
}

static void test_string_decoding(void **state)
{
	sc_jval_t v[4];
	char out[16];
	assert_int_equal(scan("{\"model\":\"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00\"}", v), 0);
	int n = sc_jscan_string(&v[0], out, sizeof(out));
	assert_int_equal(n, 12);
	assert_memory_equal(out, "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80", 12);
	/* Too long for the buffer: refused, buffer left empty. */
	assert_int_equal(scan("{\"model\":\"0123456789abcdef\"}", v), 0);
	assert_int_equal(sc_jscan_string(&v[0], out, sizeof(out)), SC_ETOOBIG);
	assert_string_equal(out, "");
	char exact[17]; /* 16 bytes and the NUL */
	assert_int_equal(sc_jscan_string(&v[0], exact, sizeof(exact)), 16);
	/* A lone surrogate becomes U+FFFD. */
	assert_int_equal(scan("{\"model\":\"\\ud800x\"}", v), 0);
	assert_int_equal(sc_jscan_string(&v[0], out, sizeof(out)), 4);
	assert_memory_equal(out, "\xef\xbf\xbdx", 4);
	assert_int_equal(scan("{\"stream\":1}", v), 0);
	assert_int_equal(sc_jscan_string(&v[1], out, sizeof(out)), SC_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_members),         cmocka_unit_test(test_types_and_numbers),
	    cmocka_unit_test(test_refusals),        cmocka_unit_test(test_depth_bound),
	    cmocka_unit_test(test_string_decoding),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
