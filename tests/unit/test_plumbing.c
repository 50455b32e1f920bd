/* Unit tests for the daemons' plumbing in src/base: the strict parsers
 * (parse.c), the flag tables (flags.c), the allocator's injected failures
 * (alloc.c) and the log's levels (log.c). The refusals are the point:
 * NaN, fractions where whole numbers are meant, trailing junk, bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/cmdline.h"
#include "base/log.h"
#include "base/parse.h"
#include "starcloud/error.h"

/* ---------------------------------------------------------------------
 * parse.c
 * ------------------------------------------------------------------- */

static void test_whole_numbers(void **state)
{
	int64_t v = 7;
	assert_int_equal(sc_parse_i64("42", 0, 100, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(sc_parse_i64("-5", -10, 10, &v), 0);
	assert_int_equal(v, -5);
	assert_int_equal(sc_parse_i64("+5", -10, 10, &v), 0);
	assert_int_equal(sc_parse_i64("-9223372036854775808", INT64_MIN, 0, &v), 0);
	assert_true(v == INT64_MIN);
	/* Refused: fractions, junk, spaces, empty, NaN, out of range. */
	const char *bad[] = {"2.7", "2.", "1e3", "12abc", " 1",  "1 ", "",
	                     "-",   "+",  "nan", "0x10",  "inf", "١"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 7;
		assert_int_equal(sc_parse_i64(bad[i], INT64_MIN, INT64_MAX, &v), SC_EPARSE);
		assert_int_equal(v, 7);
	}
	assert_int_equal(sc_parse_i64(NULL, 0, 1, &v), SC_EPARSE);
	assert_int_equal(sc_parse_i64("101", 0, 100, &v), SC_ERANGE);
	assert_int_equal(sc_parse_i64("-1", 0, 100, &v), SC_ERANGE);
	assert_int_equal(sc_parse_i64("9223372036854775808", INT64_MIN, INT64_MAX, &v), SC_ERANGE);
	assert_int_equal(sc_parse_i64("99999999999999999999999", INT64_MIN, INT64_MAX, &v),
	                 SC_ERANGE);
	uint64_t u;
	assert_int_equal(sc_parse_u64("18446744073709551615", 0, UINT64_MAX, &u), 0);
	assert_true(u == UINT64_MAX);
	assert_int_equal(sc_parse_u64("18446744073709551616", 0, UINT64_MAX, &u), SC_ERANGE);
	assert_int_equal(sc_parse_u64("-1", 0, UINT64_MAX, &u), SC_ERANGE);
	assert_int_equal(sc_parse_u64("-0", 0, UINT64_MAX, &u), 0);
	int x;
	assert_int_equal(sc_parse_int("2147483648", INT32_MIN, INT32_MAX, &x), SC_ERANGE);
	assert_int_equal(sc_parse_int("2147483647", INT32_MIN, INT32_MAX, &x), 0);
}

static void test_numbers(void **state)
{
	double d = 9;
	assert_int_equal(sc_parse_num("0.05", 0, 1, &d), 0);
	assert_true(d == 0.05);
	assert_int_equal(sc_parse_num(".5", 0, 1, &d), 0);
	assert_int_equal(sc_parse_num("5.", 0, 10, &d), 0);
	assert_int_equal(sc_parse_num("1e-3", 0, 1, &d), 0);
	assert_int_equal(sc_parse_num("-2.5E+1", -100, 0, &d), 0);
	assert_true(d == -25);
	const char *bad[] = {"nan", "NaN", "inf", "-inf", "infinity", "0x1p3", " 1",  "1 ",
	                     "",    ".",   "e5",  "1e",   "1e+",      "0.5x",  "1,5", "--1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		d = 9;
		assert_int_equal(sc_parse_num(bad[i], -1e308, 1e308, &d), SC_EPARSE);
		assert_true(d == 9);
	}
	assert_int_equal(sc_parse_num("1e999", -1e308, 1e308, &d), SC_ERANGE);
	assert_int_equal(sc_parse_num("1.01", 0, 1, &d), SC_ERANGE);
	assert_int_equal(sc_parse_num("-0.01", 0, 1, &d), SC_ERANGE);
}

static void test_durations(void **state)
{
	uint64_t ms = 0;
	struct {
		const char *s;
		uint64_t ms;
	} ok[] = {
	    {"250ms", 250},  {"30s", 30000},   {"30", 30000},      {"1.5m", 90000},
	    {"2h", 7200000}, {"1d", 86400000}, {"1h30m", 5400000}, {"0.0001s", 1},
	    {"0", 0},        {"0.5ms", 1},     {"500ms", 500},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(sc_parse_duration_ms(ok[i].s, 0, UINT64_MAX, &ms), 0);
		assert_true(ms == ok[i].ms);
	}
	const char *bad[] = {"nan", "inf", "soon", "-1s",  "1x", "s",
	                     "",    " 1s", "1s ",  "1e3s", "1 s"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ms = 77;
		assert_true(sc_parse_duration_ms(bad[i], 0, UINT64_MAX, &ms) < 0);
		assert_true(ms == 77);
	}
	assert_int_equal(sc_parse_duration_ms("8d", 0, 7 * 86400000ull, &ms), SC_ERANGE);
	assert_int_equal(sc_parse_duration_ms("10ms", 50, 1000, &ms), SC_ERANGE);
}

static void test_sizes(void **state)
{
	uint64_t b = 0;
	assert_int_equal(sc_parse_size("1048576", 0, UINT64_MAX, &b), 0);
	assert_true(b == 1048576);
	assert_int_equal(sc_parse_size("4Mi", 0, UINT64_MAX, &b), 0);
	assert_true(b == 4u << 20);
	assert_int_equal(sc_parse_size("1.5Ki", 0, UINT64_MAX, &b), 0);
	assert_true(b == 1536);
	assert_int_equal(sc_parse_size("80G", 0, UINT64_MAX, &b), 0);
	const char *bad[] = {"1.5", "0.3Ki", "100m", "nan", "-1", "4Mb", "", "4 Mi", "1e-1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b = 5;
		assert_true(sc_parse_size(bad[i], 0, UINT64_MAX, &b) < 0);
		assert_true(b == 5);
	}
	assert_int_equal(sc_parse_size("1023", 1024, 2048, &b), SC_ERANGE);
}

static void test_hostport(void **state)
{
	sc_hostport_t hp;
	assert_int_equal(sc_parse_hostport("127.0.0.1:8080", &hp), 0);
	assert_string_equal(hp.host, "127.0.0.1");
	assert_int_equal(hp.port, 8080);
	assert_int_equal(sc_parse_hostport("0.0.0.0:0", &hp), 0);
	assert_int_equal(hp.port, 0);
	const char *bad[] = {"nope", ":80",   "h:",    "h:80x", "h:-1",
	                     "h:+1", "h:8.0", "h: 80", "h:nan"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(sc_parse_hostport(bad[i], &hp), SC_EPARSE);
	assert_int_equal(sc_parse_hostport("h:65536", &hp), SC_ERANGE);
	char longhost[SC_HOST_MAX + 8];
	memset(longhost, 'a', SC_HOST_MAX);
	snprintf(longhost + SC_HOST_MAX, 8, ":80");
	assert_int_equal(sc_parse_hostport(longhost, &hp), SC_ERANGE);
}

/* ---------------------------------------------------------------------
 * flags.c
 * ------------------------------------------------------------------- */

typedef struct topts {
	sc_hostport_t listen;
	uint64_t timeout_ms;
	int inflight;
	double rate;
	size_t body;
	int mode;
	int verbose;
	const char *token;
	char name[8];
	int nitems;
	int64_t big;
	uint64_t seed;
} topts_t;

static int add_item(void *opts, const char *v, char *err, size_t errsz)
{
	topts_t *o = opts;
	if (strcmp(v, "bad") == 0) {
		snprintf(err, errsz, "not that one");
		return SC_EINVAL;
	}
	o->nitems++;
	return 0;
}

static const sc_flag_t tflags[] = {
    {.name = "--listen",
     SC_FLAG_AT(ADDR, topts_t, listen),
     .def = "127.0.0.1:8080",
     .help = "where to serve"},
    {.name = "--timeout",
     SC_FLAG_AT(DURATION, topts_t, timeout_ms),
     .min = 1,
     .max = 604800000,
     .def = "60s",
     .help = "whole request"},
    {.name = "--max-inflight",
     SC_FLAG_AT(INT, topts_t, inflight),
     .min = 1,
     .max = 1000000,
     .def = "128",
     .help = "per replica"},
    {.name = "--max-error-rate",
     SC_FLAG_AT(NUM, topts_t, rate),
     .min = 0,
     .max = 1,
     .def = "0.05",
     .help = "threshold"},
    {.name = "--max-body",
     SC_FLAG_AT(SIZE, topts_t, body),
     .min = 1024,
     .max = 64 << 20,
     .def = "4194304",
     .help = "largest body"},
    {.kind = SC_FLAG_SECTION, .help = "more:"},
    {.name = "--mode",
     SC_FLAG_AT(CHOICE, topts_t, mode),
     .choices = "fail|retry|ask",
     .def = "retry",
     .help = "what to do"},
    {.name = "--verbose", .alias = "-v", SC_FLAG_AT(BOOL, topts_t, verbose), .help = "talk"},
    {.name = "--token", SC_FLAG_AT(STR, topts_t, token), .env = "SC_TEST_TOKEN", .help = "secret"},
    {.name = "--name", SC_FLAG_TEXT_AT(topts_t, name), .help = "short"},
    {.name = "--item",
     .kind = SC_FLAG_FUNC,
     .fn = add_item,
     .flags = SC_FLAG_REPEAT,
     .help = "one item"},
    {.name = "--big", SC_FLAG_AT(I64, topts_t, big), .help = "any"},
    {.name = "--seed",
     SC_FLAG_AT(U64, topts_t, seed),
     .def = "1",
     .help = "seed",
     .flags = SC_FLAG_HIDDEN},
};

static const sc_command_t tcmd = {
    .name = "test",
    .args = "[options] FILE",
    .about = "A test command.",
    .flags = tflags,
    .nflags = sizeof(tflags) / sizeof(tflags[0]),
    .max_args = 1,
};

/* Runs sc_flags_parse on a NULL-terminated list; captures stderr. */
static int run(topts_t *o, char *errout, size_t errsz, int *nargs, ...)
{
	char *argv[32];
	int argc = 0;
	argv[argc++] = "test";
	va_list ap;
	va_start(ap, nargs);
	for (char *a; (a = va_arg(ap, char *));)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	memset(o, 0, sizeof(*o));
	fflush(stderr);
	FILE *tmp = tmpfile();
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	int rc = sc_flags_parse(&tcmd, o, argc, argv, nargs);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	size_t n = fread(errout, 1, errsz - 1, tmp);
	errout[n] = '\0';
	fclose(tmp);
	return rc;
}

static void test_flags_defaults_and_values(void **state)
{
	topts_t o;
	char err[512];
	int nargs = -1;
	unsetenv("SC_TEST_TOKEN");
	assert_int_equal(run(&o, err, sizeof(err), &nargs, NULL), 0);
	assert_int_equal(nargs, 0);
	assert_string_equal(o.listen.host, "127.0.0.1");
	assert_int_equal(o.listen.port, 8080);
	assert_true(o.timeout_ms == 60000);
	assert_int_equal(o.inflight, 128);
	assert_true(o.rate == 0.05);
	assert_int_equal(o.body, 4194304);
	assert_int_equal(o.mode, 1);
	assert_true(o.seed == 1);
	assert_null(o.token);
	assert_int_equal(run(&o, err, sizeof(err), &nargs, "--listen", "0.0.0.0:0", "--timeout",
	                     "500ms", "--max-inflight", "7", "--max-error-rate=0.5", "-v", "file",
	                     "--mode", "ask", "--token", "t", "--name", "abcdefg", "--item", "a",
	                     "--item", "b", "--big", "-3", "--max-body", "1Mi", NULL),
	                 0);
	assert_int_equal(nargs, 1);
	assert_int_equal(o.listen.port, 0);
	assert_true(o.timeout_ms == 500);
	assert_int_equal(o.inflight, 7);
	assert_true(o.rate == 0.5);
	assert_int_equal(o.verbose, 1);
	assert_int_equal(o.mode, 2);
	assert_string_equal(o.token, "t");
	assert_string_equal(o.name, "abcdefg");
	assert_int_equal(o.nitems, 2);
	assert_true(o.big == -3);
	assert_int_equal(o.body, 1 << 20);
	/* The environment fills a flag that argv leaves out; argv wins. */
	setenv("SC_TEST_TOKEN", "from-env", 1);
	assert_int_equal(run(&o, err, sizeof(err), NULL, NULL), 0);
	assert_string_equal(o.token, "from-env");
	assert_int_equal(run(&o, err, sizeof(err), NULL, "--token", "flag", NULL), 0);
	assert_string_equal(o.token, "flag");
	unsetenv("SC_TEST_TOKEN");
}

static void test_flags_refused(void **state)
{
	struct {
		const char *flag, *value, *needle;
	} bad[] = {
	    {"--max-inflight", "2.7", "--max-inflight: expected a whole number from 1 to 1000000"},
	    {"--max-inflight", "nan", "got \"nan\""},
	    {"--max-inflight", "0", "--max-inflight"},
	    {"--max-inflight", "7x", "--max-inflight"},
	    {"--max-error-rate", "nan", "--max-error-rate: expected a number from 0 to 1"},
	    {"--max-error-rate", "1.5", "--max-error-rate"},
	    {"--timeout", "nan", "--timeout: expected a duration"},
	    {"--timeout", "soon", "--timeout"},
	    {"--timeout", "0", "--timeout"},
	    {"--timeout", "8d", "--timeout"},
	    {"--listen", "nope", "--listen: expected HOST:PORT"},
	    {"--max-body", "2048.5", "--max-body"},
	    {"--max-body", "100", "--max-body"},
	    {"--mode", "sideways", "--mode: expected fail, retry or ask, got \"sideways\""},
	    {"--name", "abcdefgh", "--name: expected at most 7 bytes"},
	    {"--item", "bad", "--item: not that one"},
	    {"--seed", "-1", "--seed"},
	    {"--big", "1.0", "--big"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		topts_t o;
		char err[512];
		int rc = run(&o, err, sizeof(err), NULL, bad[i].flag, bad[i].value, NULL);
		if (rc != SC_EINVAL || !strstr(err, bad[i].needle) ||
		    strncmp(err, "starcloud test: ", 16) != 0)
			fail_msg("%s %s: %s", bad[i].flag, bad[i].value, err);
	}
	topts_t o;
	char err[512];
	assert_int_equal(run(&o, err, sizeof(err), NULL, "--bogus", "1", NULL), SC_EINVAL);
	assert_non_null(strstr(err, "unknown option \"--bogus\""));
	assert_int_equal(run(&o, err, sizeof(err), NULL, "--timeout", NULL), SC_EINVAL);
	assert_non_null(strstr(err, "--timeout needs a value"));
	assert_int_equal(run(&o, err, sizeof(err), NULL, "--verbose=1", NULL), SC_EINVAL);
	assert_non_null(strstr(err, "takes no value"));
	int nargs;
	assert_int_equal(run(&o, err, sizeof(err), &nargs, "a", "b", NULL), SC_EINVAL);
	assert_non_null(strstr(err, "unexpected argument \"b\""));
	/* After "--" a dash is an argument. */
	assert_int_equal(run(&o, err, sizeof(err), &nargs, "--", "-x", NULL), 0);
	assert_int_equal(nargs, 1);
	setenv("SC_TEST_TOKEN", "", 1);
	assert_int_equal(run(&o, err, sizeof(err), NULL, NULL), 0);
	assert_null(o.token);
	unsetenv("SC_TEST_TOKEN");
}

static void test_flags_help(void **state)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	sc_flags_usage(&tcmd, f);
	fclose(f);
	assert_non_null(strstr(text, "usage: starcloud test [options] FILE\n"));
	assert_non_null(strstr(text, "A test command."));
	assert_non_null(strstr(text, "--listen HOST:PORT"));
	assert_non_null(strstr(text, "where to serve (default 127.0.0.1:8080)"));
	assert_non_null(strstr(text, "--mode fail|retry|ask"));
	assert_non_null(strstr(text, "-v, --verbose"));
	assert_non_null(strstr(text, "[$SC_TEST_TOKEN]"));
	assert_non_null(strstr(text, "(repeatable)"));
	assert_non_null(strstr(text, "more:\n"));
	assert_null(strstr(text, "--seed"));
	free(text);
	/* --help anywhere prints and returns 1 without applying anything. */
	topts_t o;
	char err[64];
	fflush(stdout);
	int saved = dup(1);
	FILE *null = fopen("/dev/null", "w");
	dup2(fileno(null), 1);
	int rc = run(&o, err, sizeof(err), NULL, "--bogus", "--help", NULL);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	fclose(null);
	assert_int_equal(rc, 1);
	assert_string_equal(sc_flag_key(&tflags[1]), "timeout");
	assert_ptr_equal(sc_flags_find(&tcmd, "timeout"), &tflags[1]);
	assert_ptr_equal(sc_flags_find(&tcmd, "-v"), &tflags[7]);
	assert_null(sc_flags_find(&tcmd, "more:"));
}

/* Another source of values (a configuration file, later) goes through
 * sc_flags_set with the same checks and messages, by key. */
static void test_flags_set_by_key(void **state)
{
	topts_t o;
	memset(&o, 0, sizeof(o));
	char err[256];
	assert_int_equal(sc_flags_defaults(&tcmd, &o), 0);
	const sc_flag_t *f = sc_flags_find(&tcmd, "max-error-rate");
	assert_non_null(f);
	assert_int_equal(sc_flags_set(&tcmd, f, &o, "0.25", err, sizeof(err)), 0);
	assert_true(o.rate == 0.25);
	assert_int_equal(sc_flags_set(&tcmd, f, &o, "nan", err, sizeof(err)), SC_EINVAL);
	assert_string_equal(err, "--max-error-rate: expected a number from 0 to 1, got \"nan\"");
	assert_true(o.rate == 0.25);
	f = sc_flags_find(&tcmd, "timeout");
	assert_int_equal(sc_flags_set(&tcmd, f, &o, NULL, err, sizeof(err)), SC_EINVAL);
	assert_string_equal(err, "--timeout needs a value");
	f = sc_flags_find(&tcmd, "verbose");
	assert_int_equal(sc_flags_set(&tcmd, f, &o, NULL, err, sizeof(err)), 0);
	assert_int_equal(o.verbose, 1);
}

/* A default that its own flag refuses is caught (each daemon's table test
 * relies on this). */
static void test_flags_bad_default(void **state)
{
	static const sc_flag_t bad[] = {
	    {.name = "--n", SC_FLAG_AT(INT, topts_t, inflight), .min = 1, .max = 3, .def = "4"},
	};
	sc_command_t c = {.name = "bad", .flags = bad, .nflags = 1};
	topts_t o;
	FILE *null = fopen("/dev/null", "w");
	int saved = dup(2);
	dup2(fileno(null), 2);
	int rc = sc_flags_defaults(&c, &o);
	dup2(saved, 2);
	close(saved);
	fclose(null);
	assert_int_equal(rc, SC_EINVAL);
}

/* ---------------------------------------------------------------------
 * alloc.c and log.c
 * ------------------------------------------------------------------- */

static void test_alloc_failures(void **state)
{
	sc_alloc_fail_after(3);
	void *a = sc_malloc(8), *b = sc_strdup("x"), *c = sc_calloc(2, 4), *d = sc_malloc(8);
	assert_non_null(a);
	assert_non_null(b);
	assert_null(c);
	assert_non_null(d);
	assert_int_equal(sc_alloc_calls(), 3);
	sc_alloc_fail_after(0);
	free(a);
	free(b);
	free(d);
	assert_null(sc_reallocarray(NULL, SIZE_MAX / 2, 4));
	char *s = sc_xstrndup("hello", 3);
	assert_string_equal(s, "hel");
	free(s);
	s = sc_strndup("hi", 10);
	assert_string_equal(s, "hi");
	free(s);
	sc_alloc_fail_after(1);
	assert_null(sc_strndup("hi", 10));
	sc_alloc_fail_after(0);
	assert_null(sc_xstrdup(NULL));
	int *v = sc_xreallocarray(NULL, 10, sizeof(int));
	v[9] = 1;
	free(v);
}

static void test_log_levels(void **state)
{
	sc_log_level_t l;
	assert_int_equal(sc_log_level_parse("warn", &l), 0);
	assert_int_equal(l, SC_LOG_WARN);
	assert_int_equal(sc_log_level_parse("loud", &l), SC_EPARSE);
	setenv("STARCLOUD_LOG", "error", 1);
	sc_log_open("tester");
	unsetenv("STARCLOUD_LOG");
	assert_false(sc_log_enabled(SC_LOG_WARN));
	assert_true(sc_log_enabled(SC_LOG_ERROR));
	sc_log_set_level(SC_LOG_DEBUG);
	/* One line, with the time, the speaker and the level. */
	FILE *tmp = tmpfile();
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	sc_log_warn("disk %d%% full", 93);
	char big[SC_LOG_LINE_MAX * 2];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	sc_log_info("%s", big);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	char line[SC_LOG_LINE_MAX + 16];
	assert_non_null(fgets(line, sizeof(line), tmp));
	assert_non_null(strstr(line, "Z tester: warning: disk 93% full\n"));
	assert_int_equal(line[4], '-');
	assert_non_null(fgets(line, sizeof(line), tmp));
	assert_int_equal(strlen(line), SC_LOG_LINE_MAX - 1);
	assert_int_equal(line[strlen(line) - 1], '\n');
	fclose(tmp);
	sc_log_set_level(SC_LOG_INFO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_whole_numbers),
	    cmocka_unit_test(test_numbers),
	    cmocka_unit_test(test_durations),
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_hostport),
	    cmocka_unit_test(test_flags_defaults_and_values),
	    cmocka_unit_test(test_flags_refused),
	    cmocka_unit_test(test_flags_help),
	    cmocka_unit_test(test_flags_set_by_key),
	    cmocka_unit_test(test_flags_bad_default),
	    cmocka_unit_test(test_alloc_failures),
	    cmocka_unit_test(test_log_levels),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
