/* Emptying a cgroup whole (src/agent/cgkill.c) on the machine's real
 * hierarchies: a "pod" that forks a chain of children, each in a session of
 * its own (setsid) and ignoring SIGTERM, one every 2 ms, is killed to the
 * last process through the v1 freezer, through cgroup v2's cgroup.kill, and
 * through rounds of SIGKILL when the agent's own pid is in the cgroup (it
 * must not be frozen or killed). Needs root and a writable hierarchy (the
 * CI machine and `make test` run as root); skipped elsewhere. Each case
 * makes its own cgroup, starcloud-unit-PID-CASE, at the root of the
 * hierarchy, and removes it. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/cgkill.h"
#include "agent/cgv1.h"
#include "cgroup_fixture.h"

#define CHAIN_MAX 300 /* a bound, should the kill fail: no fork bomb here */

static void pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The hostile pod: each process leaves its session, ignores SIGTERM,
 * forks the next one 2 ms later and sleeps for ever. */
static void hostile(void)
{
	for (int depth = 0; depth < CHAIN_MAX; depth++) {
		setsid();
		signal(SIGTERM, SIG_IGN);
		pause_ms(2);
		if (fork() != 0)
			break;
	}
	for (;;)
		pause();
}

static int put_pid(const char *dir, int pid)
{
	char path[700], val[32];
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	snprintf(val, sizeof(val), "%d", pid);
	return sc__cgv1_write(path, val);
}

/* Makes root/starcloud-unit-PID-name; 0 (skip) when it cannot. */
static int make_cgroup(const char *root, const char *name, char *dir, size_t dirsz)
{
	snprintf(dir, dirsz, "%s/starcloud-unit-%d-%s", root, (int)getpid(), name);
	if (geteuid() != 0 || mkdir(dir, 0755) < 0)
		return 0;
	return 1;
}

/* Reaps every child that has ended (the test is their subreaper). */
static void reap(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* A pod in dir, released once it is inside; returns its pid once a dozen
 * of its chain have been born (it goes on forking). */
static int start_pod(const char *dir)
{
	int gate[2];
	char c;
	assert_int_equal(pipe(gate), 0);
	int pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(gate[1]);
		if (read(gate[0], &c, 1) != 1)
			_exit(1);
		hostile();
	}
	close(gate[0]);
	assert_int_equal(put_pid(dir, pid), 0);
	assert_int_equal(write(gate[1], "x", 1), 1);
	close(gate[1]);
	/* Signal 0 counts them. Generous: a loaded machine forks slowly. */
	for (int i = 0; i < 1000 && sc__cg_signal(dir, 0, 0) < 12; i++)
		pause_ms(5);
	assert_true(sc__cg_signal(dir, 0, 0) >= 12);
	return pid;
}

static void kill_case(const char *root, const char *name)
{
	char dir[600];
	if (!make_cgroup(root, name, dir, sizeof(dir)))
		skip();
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	int pod = start_pod(dir);
	assert_true(sc__cg_populated(dir, 0));
	assert_int_equal(sc__cg_kill_all(dir, 0), 1);
	assert_false(sc__cg_populated(dir, 0));
	int status = 0;
	assert_int_equal(waitpid(pod, &status, 0), pod);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	reap();
	assert_int_equal(rmdir(dir), 0);
}

static void test_v1_freezer_kills_a_forking_chain(void **state)
{
	char root[512];
	if (!sc__cgv1_mount("freezer", root, sizeof(root)))
		skip();
	kill_case(root, "freezer");
}

static void test_v2_cgroup_kill_kills_a_forking_chain(void **state)
{
	char root[512];
	if (!v2_mount(root, sizeof(root)))
		skip();
	kill_case(root, "v2");
}

/* The agent's own pid in the cgroup (its forking thread, for a moment):
 * never frozen nor killed; the rest still goes. */
static void test_the_skipped_pid_survives_and_the_rest_goes(void **state)
{
	char root[512], dir[600];
	if (!sc__cgv1_mount("freezer", root, sizeof(root)) && !v2_mount(root, sizeof(root)))
		skip();
	if (!make_cgroup(root, "skip", dir, sizeof(dir)))
		skip();
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	int agent = fork();
	assert_true(agent >= 0);
	if (agent == 0)
		for (;;)
			pause();
	assert_int_equal(put_pid(dir, agent), 0);
	int pod = start_pod(dir);
	assert_int_equal(sc__cg_kill_all(dir, agent), 1);
	assert_false(sc__cg_populated(dir, agent));
	assert_true(sc__cg_populated(dir, 0)); /* the agent is still there */
	assert_int_equal(kill(agent, 0), 0);
	char state_path[700], text[32] = "";
	snprintf(state_path, sizeof(state_path), "%s/freezer.state", dir);
	FILE *f = fopen(state_path, "re");
	if (f) {
		assert_non_null(fgets(text, sizeof(text), f));
		fclose(f);
		assert_string_equal(text, "THAWED\n");
	}
	assert_int_equal(waitpid(pod, NULL, 0), pod);
	kill(agent, SIGKILL);
	assert_int_equal(waitpid(agent, NULL, 0), agent);
	reap();
	/* Emptied now (the kernel moves a process out once it is reaped). */
	for (int i = 0; i < 200 && sc__cg_populated(dir, 0); i++)
		pause_ms(10);
	assert_int_equal(rmdir(dir), 0);
}

static void test_a_missing_cgroup_is_empty(void **state)
{
	assert_int_equal(sc__cg_kill_all("/nonexistent-cgroup/starcloud-x", 0), 1);
	assert_false(sc__cg_populated("/nonexistent-cgroup/starcloud-x", 0));
	assert_false(sc__cg_exists("/nonexistent-cgroup/starcloud-x"));
	assert_int_equal(sc__cg_signal("/nonexistent-cgroup/starcloud-x", SIGTERM, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_v1_freezer_kills_a_forking_chain),
	    cmocka_unit_test(test_v2_cgroup_kill_kills_a_forking_chain),
	    cmocka_unit_test(test_the_skipped_pid_survives_and_the_rest_goes),
	    cmocka_unit_test(test_a_missing_cgroup_is_empty),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
