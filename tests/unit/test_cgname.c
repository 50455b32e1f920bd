/* Unit tests for the agent's cgroup folder name (src/agent/cgname.h):
 * starcloud-NODE-HASH, unique per data folder, the same for every path to
 * it, within 255 bytes. The earlier layout's name (a pod still running in
 * it) is tested end to end: tests/e2e/test_guard_cgroups.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/cgname.h"

static void name_of(const char *node, const char *dir, char *out, size_t outsz)
{
	sc_agent_t *a = calloc(1, sizeof(*a));
	assert_non_null(a);
	a->o.name = node;
	a->o.data_dir = dir;
	sc__cgname_init(a);
	snprintf(out, outsz, "%s", a->cgroup_name);
	free(a);
}

static void test_name_is_node_and_hash(void **state)
{
	char n[300];
	/* FNV-1a over "n1\0/\0" (tests/e2e/agent_util.py computes the same). */
	name_of("n1", "/", n, sizeof(n));
	assert_string_equal(n, "starcloud-n1-870fed47");
}

static void test_name_per_data_folder_same_for_every_path(void **state)
{
	char one[] = "/tmp/sc-cgname-XXXXXX", two[] = "/tmp/sc-cgname-XXXXXX";
	char a[300], b[300], c[300], d[300], link[300], dotted[300];
	assert_non_null(mkdtemp(one));
	assert_non_null(mkdtemp(two));
	snprintf(link, sizeof(link), "%s.link", one);
	snprintf(dotted, sizeof(dotted), "%s/./", one);
	assert_int_equal(symlink(one, link), 0);
	name_of("n1", one, a, sizeof(a));
	name_of("n1", two, b, sizeof(b));
	name_of("n1", link, c, sizeof(c));
	name_of("n1", dotted, d, sizeof(d));
	assert_string_not_equal(a, b); /* same node name, other folder */
	assert_string_equal(a, c);     /* the same folder by a symlink */
	assert_string_equal(a, d);
	assert_int_equal(strncmp(a, "starcloud-n1-", 13), 0);
	assert_int_equal(strlen(a), 13 + 8);
	name_of("n2", one, c, sizeof(c));
	assert_string_not_equal(a, c); /* another node, same folder */
	unlink(link);
	rmdir(one);
	rmdir(two);
}

static void test_long_node_name_cut_to_255(void **state)
{
	char node[254], n1[300], n2[300];
	memset(node, 'x', sizeof(node) - 1);
	node[sizeof(node) - 1] = '\0';
	name_of(node, "/", n1, sizeof(n1));
	assert_int_equal(strlen(n1), 255);
	assert_int_equal(strncmp(n1, "starcloud-xxxxxxxx", 18), 0);
	node[252] = 'y'; /* differs past the cut: the hash tells them apart */
	name_of(node, "/", n2, sizeof(n2));
	assert_int_equal(strlen(n2), 255);
	assert_string_not_equal(n1, n2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_name_is_node_and_hash),
	    cmocka_unit_test(test_name_per_data_folder_same_for_every_path),
	    cmocka_unit_test(test_long_node_name_cut_to_255),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
