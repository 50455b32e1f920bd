/* Configuration files through a flag table (src/base/flagfile.c): the order
 * defaults < file < environment < argv, switches set and cleared, lists
 * for repeatable flags, the command's hook for other keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/flagfile.h"
#include "base/cmdline.h"
#include "starcloud/error.h"

typedef struct opts {
	sc_hostport_t listen;
	const char *name;
	int n;
	int on, off;
	uint64_t wait_ms;
	int reps;
	char seen[64];
	int extra;
	const char *config;
	int check_config;
} opts_t;

static int rep(void *o, const char *v, char *err, size_t errsz)
{
	opts_t *p = o;
	p->reps++;
	snprintf(p->seen + strlen(p->seen), sizeof(p->seen) - strlen(p->seen), "%s;", v);
	return 0;
}

static int other(void *o, const char *key, json_t *v, char *err, size_t errsz)
{
	if (strcmp(key, "extras") != 0)
		return SC_ENOTFOUND;
	if (v && !json_is_integer(v)) {
		snprintf(err, errsz, "expected a whole number");
		return SC_EINVAL;
	}
	((opts_t *)o)->extra += v ? (int)json_integer_value(v) : 0;
	return 0;
}

static const sc_flag_t flags[] = {
    {.name = "--listen", SC_FLAG_AT(ADDR, opts_t, listen), .def = "127.0.0.1:1"},
    {.name = "--name", SC_FLAG_AT(STR, opts_t, name), .def = "dflt", .env = "SC_TEST_NAME"},
    {.name = "--n", SC_FLAG_AT(INT, opts_t, n), .min = 0, .max = 10, .def = "1"},
    {.name = "--on", SC_FLAG_AT(BOOL, opts_t, on)},
    {.name = "--off", SC_FLAG_AT(BOOL, opts_t, off), .def = "1"},
    {.name = "--wait", SC_FLAG_AT(DURATION, opts_t, wait_ms), .def = "1s"},
    {.name = "--rep", .kind = SC_FLAG_FUNC, .fn = rep, .flags = SC_FLAG_REPEAT},
    SC_FLAGS_CONFIG(opts_t),
};

static const sc_command_t cmd = {
    .name = "test",
    .flags = flags,
    .nflags = sizeof(flags) / sizeof(flags[0]),
    .file_key = other,
};

static char path[64];

static void write_file(const char *text)
{
	snprintf(path, sizeof(path), "/tmp/sc-flagfile-%d.yaml", (int)getpid());
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int parse(opts_t *o, int argc, char **argv)
{
	memset(o, 0, sizeof(*o));
	return sc_flags_parse(&cmd, o, argc, argv, NULL);
}

static void test_order(void **state)
{
	opts_t o;
	write_file("name: from-file\nn: 5\nwait: 250ms\nlisten: 10.0.0.1:80\n");
	char *argv[] = {"test", "--config", path, "--n", "7", NULL};
	unsetenv("SC_TEST_NAME");
	assert_int_equal(parse(&o, 5, argv), 0);
	assert_string_equal(o.name, "from-file"); /* file over default */
	assert_int_equal(o.n, 7);                 /* argv over file */
	assert_int_equal(o.wait_ms, 250);
	assert_string_equal(o.listen.host, "10.0.0.1");
	assert_string_equal(o.config, path);
	setenv("SC_TEST_NAME", "from-env", 1); /* environment over file */
	char *argv2[] = {"test", "--config=" /* the = form */, NULL};
	char arg[128];
	snprintf(arg, sizeof(arg), "--config=%s", path);
	argv2[1] = arg;
	assert_int_equal(parse(&o, 2, argv2), 0);
	assert_string_equal(o.name, "from-env");
	assert_int_equal(o.n, 5);
	unsetenv("SC_TEST_NAME");
	/* Without --config the file is not read. */
	char *argv3[] = {"test", NULL};
	assert_int_equal(parse(&o, 1, argv3), 0);
	assert_string_equal(o.name, "dflt");
	assert_int_equal(o.n, 1);
}

static void test_switches_lists_hook(void **state)
{
	opts_t o;
	write_file("on: true\noff: false\nrep: [a, b]\nextras: [1, 2, 3]\n");
	char *argv[] = {"test", "--config", path, "--rep", "c", NULL};
	assert_int_equal(parse(&o, 5, argv), 0);
	assert_int_equal(o.on, 1);
	assert_int_equal(o.off, 0); /* a default of 1 cleared by the file */
	assert_int_equal(o.reps, 3);
	assert_string_equal(o.seen, "a;b;c;"); /* file's list, then the flags */
	assert_int_equal(o.extra, 6);
	write_file("rep: single\nextras: []\n");
	char *argv2[] = {"test", "--config", path, NULL};
	assert_int_equal(parse(&o, 3, argv2), 0);
	assert_string_equal(o.seen, "single;");
	assert_int_equal(o.extra, 0);
}

static void test_refusals(void **state)
{
	const char *bad[] = {
	    "n: 11\n",
	    "n: x\n",
	    "unknown: 1\n",
	    "on: 1\n",
	    "name: [a]\n",
	    "name: 1.5\n",
	    "name:\n",
	    "n: [1]\n",
	    "extras: [x]\n",
	    "config: y\n",
	    "check-config: true\n",
	    "- a\n",
	    "a: b\n---\nc: d\n",
	    "{\n",
	    "--n: 1\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		opts_t o;
		write_file(bad[i]);
		char *argv[] = {"test", "--config", path, NULL};
		int rc = parse(&o, 3, argv);
		if (rc != SC_EINVAL)
			fail_msg("accepted: %s", bad[i]);
	}
	/* check-config is a flag, not a key: a file cannot turn a start into a
	 * check (nor the reverse). */
	opts_t o;
	char *argv[] = {"test", "--config", "/nonexistent/x.yaml", NULL};
	assert_int_equal(parse(&o, 3, argv), SC_EINVAL);
	/* A whole number is fine for a text flag; an empty file is the defaults. */
	write_file("name: 12\n");
	char *argv2[] = {"test", "--config", path, NULL};
	assert_int_equal(parse(&o, 3, argv2), 0);
	assert_string_equal(o.name, "12");
	write_file("# nothing\n");
	char *argv3[] = {"test", "--config", path, NULL}; /* parsing rewrites argv */
	assert_int_equal(parse(&o, 3, argv3), 0);
	assert_string_equal(o.name, "dflt");
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_order),
	    cmocka_unit_test(test_switches_lists_hook),
	    cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
