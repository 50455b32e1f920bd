/* Unit tests of the CLI's tables and queue trees (src/cli/table.c):
 * depth-first order with real indentation, columns sized to content, and
 * the number and duration formats the tables use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/table.h"

/* What a table prints, as one string (free it). */
static char *printed(sc_table_t *t, int no_header)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	sc_table_print(t, f, no_header);
	fclose(f);
	return buf;
}

/* ---- trees ------------------------------------------------------------- */

/* examples/cluster.yaml's queues in file order: the children come after
 * both parents, and llm/vision belong to research, not to the last root. */
static void test_tree_make_run_queues(void **state)
{
	const char *names[] = {"research", "product", "llm", "vision", "serving", "notebooks"};
	const char *parents[] = {NULL, NULL, "research", "research", "product", "product"};
	size_t order[6], depth[6];
	sc_tree_order(6, names, parents, order, depth);
	const char *want[] = {"research", "llm", "vision", "product", "serving", "notebooks"};
	const size_t wantd[] = {0, 1, 1, 0, 1, 1};
	for (int i = 0; i < 6; i++) {
		assert_string_equal(names[order[i]], want[i]);
		assert_int_equal(depth[i], wantd[i]);
	}
}

/* sc_tree_t, as the CLI's queue tables use it: "" (sc_obj_str's absent
 * parent) is a root even beside a node with no name; n == 0 allocates. */
static void test_tree_struct(void **state)
{
	sc_tree_t t;
	sc_tree_init(&t, 3);
	const char *names[] = {"", "child", "top"}, *parents[] = {"", "top", ""};
	for (int i = 0; i < 3; i++) {
		t.names[i] = names[i];
		t.parents[i] = parents[i];
	}
	sc_tree_sort(&t);
	assert_string_equal(t.names[t.order[0]], "");
	assert_int_equal(t.depth[0], 0);
	assert_string_equal(t.names[t.order[1]], "top");
	assert_int_equal(t.depth[1], 0);
	assert_string_equal(t.names[t.order[2]], "child");
	assert_int_equal(t.depth[2], 1);
	sc_tree_free(&t);
	sc_tree_init(&t, 0);
	assert_non_null(t.order);
	sc_tree_sort(&t);
	sc_tree_free(&t);
}

static void test_tree_deep_and_late_parent(void **state)
{
	/* A grandchild listed before its parent, which comes before its own. */
	const char *names[] = {"leaf", "mid", "top", "other"};
	const char *parents[] = {"mid", "top", NULL, NULL};
	size_t order[4], depth[4];
	sc_tree_order(4, names, parents, order, depth);
	assert_string_equal(names[order[0]], "top");
	assert_int_equal(depth[0], 0);
	assert_string_equal(names[order[1]], "mid");
	assert_int_equal(depth[1], 1);
	assert_string_equal(names[order[2]], "leaf");
	assert_int_equal(depth[2], 2);
	assert_string_equal(names[order[3]], "other");
	assert_int_equal(depth[3], 0);
}

/* Whatever the input, every node is printed exactly once: a missing parent
 * makes a root, as do its own parent and a cycle. */
static void test_tree_bad_input(void **state)
{
	const char *names[] = {"a", "b", "c", "self", "orphan", "d"};
	const char *parents[] = {"c", "a", "b", "self", "nowhere", "a"};
	size_t order[6], depth[6], seen[6] = {0};
	sc_tree_order(6, names, parents, order, depth);
	for (int i = 0; i < 6; i++) {
		assert_true(order[i] < 6);
		seen[order[i]]++;
	}
	for (int i = 0; i < 6; i++)
		assert_int_equal(seen[i], 1);
	/* d hangs below a (on the cycle, now a root) */
	for (int i = 0; i < 6; i++)
		if (strcmp(names[order[i]], "d") == 0)
			assert_true(depth[i] >= 1);
		else if (strcmp(names[order[i]], "self") == 0 ||
		         strcmp(names[order[i]], "orphan") == 0)
			assert_int_equal(depth[i], 0);
	sc_tree_order(0, NULL, NULL, order, depth); /* nothing to do, no crash */
}

/* ---- tables ------------------------------------------------------------ */

static void test_table_sized_to_content(void **state)
{
	const char *h[] = {"NAME", "QUEUE", "STATUS"};
	sc_table_t *t = sc_table_new(3, h);
	sc_table_addf(t, 0, "%s\t%s\t%s", "a", "research", "Running");
	sc_table_addf(t, 0, "%s\t%s\t%s", "a-much-longer-name", "q", "Pending");
	char *out = printed(t, 0);
	assert_string_equal(out, "NAME                 QUEUE      STATUS\n"
	                         "a                    research   Running\n"
	                         "a-much-longer-name   q          Pending\n");
	free(out);
	out = printed(t, 1); /* no header: widths from the rows only */
	assert_string_equal(out, "a                    research   Running\n"
	                         "a-much-longer-name   q          Pending\n");
	free(out);
	sc_table_free(t);
}

/* A tree's indentation counts in the first column's width, and the other
 * columns stay aligned however deep a row is. */
static void test_table_indent(void **state)
{
	const char *h[] = {"QUEUE", "QUOTA"};
	sc_table_t *t = sc_table_new(2, h);
	sc_table_addf(t, 0, "research\t80");
	sc_table_addf(t, 1, "llm\t56");
	sc_table_addf(t, 2, "llm-team-x\t8");
	char *out = printed(t, 0);
	assert_string_equal(out, "QUEUE            QUOTA\n"
	                         "research         80\n"
	                         "  llm            56\n"
	                         "    llm-team-x   8\n");
	free(out);
	sc_table_free(t);
}

static void test_table_missing_and_utf8(void **state)
{
	const char *h[] = {"A", "B", "C"};
	sc_table_t *t = sc_table_new(3, h);
	const char *cells[] = {"∞", NULL, "x"};
	sc_table_add(t, 0, cells);
	sc_table_addf(t, 0, "only-one"); /* missing cells are empty */
	char *out = printed(t, 0);
	assert_string_equal(out, "A          B        C\n"
	                         "∞          <none>   x\n"
	                         "only-one\n"); /* no trailing blanks */
	free(out);
	assert_int_equal(sc_table_rows(t), 2);
	sc_table_free(t);
}

/* Rows printed after the table (get -w) keep the widths chosen first; a
 * wider cell pushes its line right but never swallows the gap. */
static void test_table_late_rows(void **state)
{
	const char *h[] = {"NAME", "STATUS"};
	sc_table_t *t = sc_table_new(2, h);
	sc_table_addf(t, 0, "j1\tRunning");
	free(printed(t, 0));
	sc_table_addf(t, 0, "j2\tPending");
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	sc_table_print_row(t, f);
	sc_table_addf(t, 0, "a-long-job\tFailed");
	sc_table_print_row(t, f);
	fclose(f);
	assert_string_equal(buf, "j2     Pending\n"
	                         "a-long-job Failed\n");
	free(buf);
	sc_table_free(t);
}

/* ---- formats ----------------------------------------------------------- */

static void test_fmt_num(void **state)
{
	char b[32];
	sc_fmt_num(b, sizeof(b), 6.4615, 0);
	assert_string_equal(b, "6.46");
	sc_fmt_num(b, sizeof(b), 84, 0);
	assert_string_equal(b, "84");
	sc_fmt_num(b, sizeof(b), 0.5, 0);
	assert_string_equal(b, "0.5");
	sc_fmt_num(b, sizeof(b), -1, 1);
	assert_string_equal(b, "-");
	sc_fmt_num(b, sizeof(b), -0.001, 0);
	assert_string_equal(b, "0");
	sc_fmt_num(b, sizeof(b), 3.0 / 7, 0);
	assert_string_equal(b, "0.43");
}

static void test_fmt_age(void **state)
{
	static const struct {
		double s;
		const char *want;
	} cases[] = {
	    {0, "0s"},
	    {59, "59s"},
	    {119, "119s"},
	    {200, "3m20s"},
	    {600, "10m"},
	    {7199, "119m"},
	    {3 * 3600 + 60 * 5, "3h5m"},
	    {8 * 3600, "8h"},
	    {47 * 3600, "47h"},
	    {3 * 86400 + 3600, "3d1h"},
	    {9 * 86400, "9d"},
	    {800 * 86400.0, "2y70d"},
	    {-5, "<unknown>"},
	};
	char b[32];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sc_fmt_age(b, sizeof(b), cases[i].s);
		assert_string_equal(b, cases[i].want);
	}
}

static void test_fmt_hms(void **state)
{
	char b[32];
	sc_fmt_hms(b, sizeof(b), 653211.0); /* the Gavel trace's makespan */
	assert_string_equal(b, "181h 26m 51s");
	sc_fmt_hms(b, sizeof(b), 245);
	assert_string_equal(b, "4m 05s");
	sc_fmt_hms(b, sizeof(b), 7.234);
	assert_string_equal(b, "7.23s");
	sc_fmt_hms(b, sizeof(b), 42.25);
	assert_string_equal(b, "42.2s");
	sc_fmt_hms(b, sizeof(b), 3600);
	assert_string_equal(b, "1h 00m 00s");
	sc_fmt_hms(b, sizeof(b), -1);
	assert_string_equal(b, "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tree_make_run_queues),
	    cmocka_unit_test(test_tree_struct),
	    cmocka_unit_test(test_tree_deep_and_late_parent),
	    cmocka_unit_test(test_tree_bad_input),
	    cmocka_unit_test(test_table_sized_to_content),
	    cmocka_unit_test(test_table_indent),
	    cmocka_unit_test(test_table_missing_and_utf8),
	    cmocka_unit_test(test_table_late_rows),
	    cmocka_unit_test(test_fmt_num),
	    cmocka_unit_test(test_fmt_age),
	    cmocka_unit_test(test_fmt_hms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
