/* Whether a pod's user can reach its program (src/agent/podreach.c): a
 * real fork that takes a pod's uid, against real folders under /tmp. The
 * cases that switch users need root (the CI machine and `make test` run as
 * root) and are skipped elsewhere. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/podreach.h"
#include "starcloud/error.h"

#define POD_UID 200777

typedef struct fx {
	char top[64];    /* 0700, root's */
	char bin[128];   /* top/bin, 0755 */
	char prog[160];  /* top/bin/prog, an executable script */
	char open[64];   /* 0755 */
	char oprog[160]; /* open/prog */
	sc_podsec_t pod;
} fx_t;

static void write_prog(const char *path, mode_t mode)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("#!/bin/sh\nexit 0\n", f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static int setup(void **state)
{
	if (geteuid() != 0)
		return 0;
	fx_t *x = calloc(1, sizeof(*x));
	snprintf(x->top, sizeof(x->top), "/tmp/sc-podreach-XXXXXX");
	snprintf(x->open, sizeof(x->open), "/tmp/sc-podreach-open-XXXXXX");
	if (!mkdtemp(x->top) || !mkdtemp(x->open) || chmod(x->top, 0700) < 0 ||
	    chmod(x->open, 0755) < 0)
		return -1;
	snprintf(x->bin, sizeof(x->bin), "%s/bin", x->top);
	snprintf(x->prog, sizeof(x->prog), "%s/prog", x->bin);
	snprintf(x->oprog, sizeof(x->oprog), "%s/prog", x->open);
	if (mkdir(x->bin, 0755) < 0 || chmod(x->bin, 0755) < 0)
		return -1;
	write_prog(x->prog, 0755);
	write_prog(x->oprog, 0755);
	x->pod = (sc_podsec_t){.set = 1, .uid = POD_UID, .gid = POD_UID};
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	fx_t *x = *state;
	if (!x)
		return 0;
	unlink(x->prog);
	unlink(x->oprog);
	rmdir(x->bin);
	rmdir(x->top);
	rmdir(x->open);
	free(x);
	return 0;
}

static char *const ENV[] = {"PATH=/usr/bin:/bin", NULL};

/* The check's answer and why for argv run in cwd with env. */
static int check(const fx_t *x, char *const *argv, char *const *env, const char *cwd, char *why)
{
	return sc__podreach_check(&x->pod, argv, env, cwd, 1, why, 512);
}

static void test_command_below_a_closed_folder(void **state)
{
	fx_t *x = *state;
	char why[512], want[512];
	if (!x)
		skip();
	char *argv[] = {x->prog, NULL};
	assert_int_equal(check(x, argv, ENV, "/", why), SC_EINVAL);
	snprintf(want, sizeof(want),
	         "command %s: %s is 0700 owned by root; the pod runs as uid %d gid %d", x->prog,
	         x->top, POD_UID, POD_UID);
	assert_string_equal(why, want);
	/* As root (no switch), the same is reachable: the answer is the
	 * pod's user's, not the caller's. */
	sc_podsec_t self = {0};
	assert_int_equal(sc__podreach_check(&self, argv, ENV, "/", 1, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	/* Opened: reachable. */
	assert_int_equal(chmod(x->top, 0755), 0);
	assert_int_equal(check(x, argv, ENV, "/", why), 0);
	assert_int_equal(chmod(x->top, 0700), 0);
}

static void test_script_argument_and_working_dir(void **state)
{
	fx_t *x = *state;
	char why[512], want[512];
	if (!x)
		skip();
	char *interp[] = {"/bin/sh", x->prog, NULL};
	assert_int_equal(check(x, interp, ENV, "/", why), SC_EINVAL);
	snprintf(want, sizeof(want), "argument 1 %s: %s is 0700 owned by root;", x->prog, x->top);
	assert_memory_equal(why, want, strlen(want));
	/* Relative arguments and flags are not paths it can judge. */
	char *flags[] = {"/bin/sh", "-c", "exit 0", "--out=/nonexistent/x", "rel/path", NULL};
	assert_int_equal(check(x, flags, ENV, "/", why), 0);
	/* A working dir it cannot enter, and one that does not exist. */
	char *argv[] = {"true", NULL};
	assert_int_equal(check(x, argv, ENV, x->bin, why), SC_EINVAL);
	snprintf(want, sizeof(want), "working dir %s: %s is 0700 owned by root;", x->bin, x->top);
	assert_memory_equal(why, want, strlen(want));
	/* One that does not exist: the spawn says so. */
	assert_int_equal(check(x, argv, ENV, "/nonexistent-podreach", why), 0);
	assert_string_equal(why, "");
}

/* The pod's own folder (not named by the task) is entered as root before
 * the switch, as libuv's child does: a closed folder above it does not stop
 * the pod, and a relative command resolves from there without passing
 * through it. */
static void test_own_folder_entered_as_root(void **state)
{
	fx_t *x = *state;
	char why[512];
	if (!x)
		skip();
	char *rel[] = {"./prog", NULL};
	assert_int_equal(sc__podreach_check(&x->pod, rel, ENV, x->bin, 0, why, sizeof(why)), 0);
	char *const here[] = {"PATH=.:/usr/bin", NULL};
	char *prog[] = {"prog", NULL};
	assert_int_equal(sc__podreach_check(&x->pod, prog, here, x->bin, 0, why, sizeof(why)), 0);
	/* An absolute path to the same file passes through the closed folder. */
	char *abs[] = {x->prog, NULL};
	assert_int_equal(sc__podreach_check(&x->pod, abs, ENV, x->bin, 0, why, sizeof(why)),
	                 SC_EINVAL);
}

static void test_path_search_as_execvp(void **state)
{
	fx_t *x = *state;
	char why[512], want[512], path[400];
	if (!x)
		skip();
	snprintf(path, sizeof(path), "PATH=%s:/usr/bin:/bin", x->bin);
	char *const env[] = {path, NULL};
	char *prog[] = {"prog", NULL};
	assert_int_equal(check(x, prog, env, "/", why), SC_EINVAL);
	snprintf(want, sizeof(want),
	         "command prog: in none of the PATH folders open to the pod's user; %s is closed "
	         "to it: %s is 0700 owned by root; the pod runs as uid %d gid %d",
	         x->bin, x->top, POD_UID, POD_UID);
	assert_string_equal(why, want);
	/* Found in a later folder: execvp skips the closed one. */
	char *sh[] = {"sh", "-c", "exit 0", NULL};
	assert_int_equal(check(x, sh, env, "/", why), 0);
	/* Nowhere: not found. */
	char *none[] = {"no-such-program-podreach", NULL};
	assert_int_equal(check(x, none, ENV, "/", why), SC_ENOTFOUND);
	assert_string_equal(why,
	                    "command no-such-program-podreach: not found in PATH /usr/bin:/bin");
	/* An empty PATH entry is the working dir; a relative command is
	 * taken from the working dir too. */
	char *const cwdpath[] = {"PATH=:/usr/bin", NULL};
	assert_int_equal(check(x, prog, cwdpath, x->open, why), 0);
	char *rel[] = {"./prog", NULL};
	assert_int_equal(check(x, rel, ENV, x->open, why), 0);
	/* A file it may not run, in an open folder. */
	assert_int_equal(chmod(x->oprog, 0644), 0);
	char *abs[] = {x->oprog, NULL};
	assert_int_equal(check(x, abs, ENV, "/", why), SC_EINVAL);
	snprintf(want, sizeof(want), "command %s: not executable by it (0644 owned by root);",
	         x->oprog);
	assert_memory_equal(why, want, strlen(want));
	assert_int_equal(chmod(x->oprog, 0755), 0);
	/* A path that does not exist is the spawn's to report. */
	char *missing[] = {"/nonexistent-podreach/prog", NULL};
	assert_int_equal(check(x, missing, ENV, "/", why), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_command_below_a_closed_folder, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_script_argument_and_working_dir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_path_search_as_execvp, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_own_folder_entered_as_root, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
