/* Device rules on cgroup v2 (src/agent/devbpf.c): the BPF program is
 * attached to a real v2 cgroup, a child moved into it opens fake NVIDIA
 * nodes (mknod 195:N in a folder of the test, no driver behind them: an
 * allowed node gives ENXIO, a denied one EPERM). Then the rules change (a
 * pod started again with another GPU): attaching again replaces them.
 * Needs root, a cgroup2 mount and bpf(2) (the CI machine: its unified
 * hierarchy holds no controller, and device programs need none); skipped
 * elsewhere. The cgroup and the nodes are removed. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/cgv1.h"
#include "agent/devbpf.h"
#include "cgroup_fixture.h"
#include "starcloud/error.h"

typedef struct fx {
	char cg[600];
	char dev[64];
	char node[2][128];
} fx_t;

static int setup(void **state)
{
	char root[512];
	*state = NULL;
	if (geteuid() != 0 || !v2_mount(root, sizeof(root)) || !sc__devbpf_usable())
		return 0;
	fx_t *x = calloc(1, sizeof(*x));
	snprintf(x->cg, sizeof(x->cg), "%s/starcloud-unit-%d-devbpf", root, (int)getpid());
	snprintf(x->dev, sizeof(x->dev), "/tmp/starcloud-devbpf-XXXXXX");
	if (mkdir(x->cg, 0755) < 0 || !mkdtemp(x->dev)) {
		rmdir(x->cg);
		free(x);
		return 0;
	}
	for (int i = 0; i < 2; i++) {
		snprintf(x->node[i], sizeof(x->node[i]), "%s/nvidia%d", x->dev, i);
		assert_int_equal(mknod(x->node[i], S_IFCHR | 0666, makedev(195, (unsigned)i)), 0);
	}
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	fx_t *x = *state;
	if (!x)
		return 0;
	for (int i = 0; i < 2; i++)
		unlink(x->node[i]);
	rmdir(x->dev);
	rmdir(x->cg); /* detaches the program */
	free(x);
	return 0;
}

/* errno of open(path) (0: it opened) for a child inside the cgroup. */
static void opens_in_cgroup(const fx_t *x, int *errs, const char *const *paths, int n)
{
	int gate[2], out[2];
	char c, procs[700], pid[32];
	assert_int_equal(pipe(gate), 0);
	assert_int_equal(pipe(out), 0);
	int child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		close(gate[1]);
		close(out[0]);
		if (read(gate[0], &c, 1) != 1)
			_exit(1);
		for (int i = 0; i < n; i++) {
			int fd = open(paths[i], O_RDWR | O_CLOEXEC);
			int e = fd >= 0 ? 0 : errno;
			if (fd >= 0)
				close(fd);
			if (write(out[1], &e, sizeof(e)) != (ssize_t)sizeof(e))
				_exit(1);
		}
		_exit(0);
	}
	close(gate[0]);
	close(out[1]);
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", x->cg);
	snprintf(pid, sizeof(pid), "%d", child);
	assert_int_equal(sc__cgv1_write(procs, pid), 0);
	assert_int_equal(write(gate[1], "x", 1), 1);
	close(gate[1]);
	for (int i = 0; i < n; i++)
		assert_int_equal(read(out[0], &errs[i], sizeof(errs[i])), (ssize_t)sizeof(errs[i]));
	close(out[0]);
	int status;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_denied_nodes_are_refused_and_rules_replaced(void **state)
{
	fx_t *x = *state;
	int errs[3];
	if (!x)
		skip();
	const char *paths[] = {x->node[0], x->node[1], "/dev/null"};
	/* Outside the program: no driver behind the fake nodes. */
	int fd = open(x->node[0], O_RDWR | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	assert_true(fd < 0 && (errno == ENXIO || errno == ENODEV));
	int nodev = errno;
	/* A pod with GPU 1: GPU 0's node is hidden. */
	sc_devrule_t deny0[] = {{'c', 195, 0}};
	assert_int_equal(sc__devbpf_attach(x->cg, deny0, 1), 0);
	opens_in_cgroup(x, errs, paths, 3);
	assert_int_equal(errs[0], EPERM);
	assert_int_equal(errs[1], nodev);
	assert_int_equal(errs[2], 0);
	/* Started again with GPU 0 only: the rules are replaced, not added. */
	sc_devrule_t deny1[] = {{'b', 195, 1}, {'c', 195, 1}};
	assert_int_equal(sc__devbpf_attach(x->cg, deny1, 2), 0);
	opens_in_cgroup(x, errs, paths, 3);
	assert_int_equal(errs[0], nodev);
	assert_int_equal(errs[1], EPERM);
	assert_int_equal(errs[2], 0);
}

static void test_bad_input(void **state)
{
	sc_devrule_t r = {'c', 195, 0};
	assert_int_equal(sc__devbpf_attach("/nonexistent-cgroup-x", &r, 1), SC_EIO);
	assert_int_equal(sc__devbpf_attach("/tmp", &r, SC_DEVBPF_MAX + 1), SC_EINVAL);
	assert_int_equal(sc__devbpf_attach("/tmp", &r, -1), SC_EINVAL);
	if (geteuid() == 0 && sc__devbpf_usable())
		/* A folder that is no cgroup: the kernel refuses the attach. */
		assert_int_equal(sc__devbpf_attach("/tmp", &r, 1), SC_EIO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_denied_nodes_are_refused_and_rules_replaced, setup,
	                                    teardown),
	    cmocka_unit_test(test_bad_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
