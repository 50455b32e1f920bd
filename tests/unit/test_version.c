/* Release versions and the skew rule (src/base/version.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/version.h"
#include "starcloud/error.h"

static void test_parse(void **state)
{
	sc_version_t v;
	assert_int_equal(sc_version_parse("0.2.0", &v), 0);
	assert_int_equal(v.major * 10000 + v.minor * 100 + v.patch, 200);
	assert_int_equal(sc_version_parse("9999.0.12", &v), 0);
	assert_int_equal(v.major, 9999);
	const char *bad[] = {"",       "1",      "1.2",       "1.2.",    ".1.2",
	                     "1..2",   "1.2.3.", "1.2.3 ",    "1.2.3x",  "-1.2.3",
	                     "+1.2.3", "1.2.-3", "10000.0.0", "1.2.3.4", "a.b.c"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(sc_version_parse(bad[i], &v), SC_EINVAL);
	assert_int_equal(sc_version_parse(NULL, &v), SC_EINVAL);
	/* The build's own versions parse. */
	assert_int_equal(sc_version_parse(SC_VERSION, &v), 0);
	assert_int_equal(sc_version_parse(SC_MIN_PEER_VERSION, &v), 0);
}

static void test_cmp(void **state)
{
	sc_version_t a = {1, 2, 3}, b = {1, 10, 0}, c = {2, 0, 0}, d = {1, 2, 3};
	assert_true(sc_version_cmp(&a, &b) < 0);
	assert_true(sc_version_cmp(&b, &a) > 0);
	assert_true(sc_version_cmp(&b, &c) < 0);
	assert_int_equal(sc_version_cmp(&a, &d), 0);
	sc_version_t cur, min;
	sc_version_parse(SC_VERSION, &cur);
	sc_version_parse(SC_MIN_PEER_VERSION, &min);
	assert_true(sc_version_cmp(&min, &cur) <= 0);
}

static void test_user_agent(void **state)
{
	char comp[16];
	sc_version_t v;
	assert_int_equal(sc_version_from_user_agent(SC_USER_AGENT("agent"), comp, sizeof(comp), &v),
	                 1);
	assert_string_equal(comp, "agent");
	assert_int_equal(sc_version_from_user_agent("starcloud-gateway/1.2.3 (linux; x)", comp,
	                                            sizeof(comp), &v),
	                 1);
	assert_string_equal(comp, "gateway");
	assert_int_equal(v.patch, 3);
	/* Not Starcloud's: not checked. */
	assert_int_equal(sc_version_from_user_agent(NULL, comp, sizeof(comp), &v), 0);
	assert_int_equal(sc_version_from_user_agent("curl/7.88.1", comp, sizeof(comp), &v), 0);
	assert_int_equal(sc_version_from_user_agent("Starcloud-cli/1.0.0", comp, sizeof(comp), &v),
	                 0);
	/* Claims to be, without a readable version. */
	const char *bad[] = {"starcloud-",        "starcloud-cli",         "starcloud-cli/",
	                     "starcloud-/1.0.0",  "starcloud-CLI/1.0.0",   "starcloud-c i/1.0.0",
	                     "starcloud-cli/1.0", "starcloud-cli/1.0.0(x)"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(sc_version_from_user_agent(bad[i], comp, sizeof(comp), &v),
		                 SC_EINVAL);
	/* A long component name is cut to fit, never overflows. */
	char tiny[4];
	assert_int_equal(
	    sc_version_from_user_agent("starcloud-abcdefgh/1.0.0", tiny, sizeof(tiny), &v), 1);
	assert_string_equal(tiny, "abc");
}

static void test_check(void **state)
{
	char msg[512] = "";
	assert_int_equal(sc_version_check(NULL, msg, sizeof(msg)), 0);
	assert_int_equal(sc_version_check("python-requests/2.28", msg, sizeof(msg)), 0);
	assert_int_equal(sc_version_check(SC_USER_AGENT("cli"), msg, sizeof(msg)), 0);
	assert_int_equal(sc_version_check("starcloud-cli/" SC_MIN_PEER_VERSION, msg, sizeof(msg)),
	                 0);
	assert_int_equal(sc_version_check("starcloud-cli/9999.0.0", msg, sizeof(msg)), 0);
	assert_int_equal(sc_version_check("starcloud-agent/0.0.0", msg, sizeof(msg)), SC_ERANGE);
	assert_non_null(strstr(msg, "starcloud-agent 0.0.0 is too old"));
	assert_non_null(strstr(msg, SC_MIN_PEER_VERSION));
	assert_int_equal(sc_version_check("starcloud-agent/zz", msg, sizeof(msg)), SC_ERANGE);
	assert_non_null(strstr(msg, "without a readable version"));
	/* A small buffer gets a cut message, not an overflow. */
	char small[8];
	assert_int_equal(sc_version_check("starcloud-agent/0.0.0", small, sizeof(small)),
	                 SC_ERANGE);
	assert_int_equal(strlen(small), 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_cmp),
	    cmocka_unit_test(test_user_agent),
	    cmocka_unit_test(test_check),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
