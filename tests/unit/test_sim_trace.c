/* Trace readers: every column, optional columns, and each kind of bad line
 * (error names file, line and column; nothing is returned). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sim/trace.h"
#include "starcloud/error.h"

static int parse_pods(const char *text, sc_trace_pods_t *out, char *msg, size_t n)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	assert_non_null(f);
	int rc = sc_trace_parse_pods(f, "pods.csv", out, msg, n);
	fclose(f);
	return rc;
}

static int parse_nodes(const char *text, sc_trace_nodes_t *out, char *msg, size_t n)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	assert_non_null(f);
	int rc = sc_trace_parse_nodes(f, "nodes.csv", out, msg, n);
	fclose(f);
	return rc;
}

static void nodes_every_column(void **state)
{
	sc_trace_nodes_t t = {0};
	char msg[256];
	assert_int_equal(parse_nodes("sn,cpu_milli,memory_mib,gpu,model\n"
	                             "n0,96000,393216,8,G2\nn1,8000,1024,0,\n",
	                             &t, msg, sizeof(msg)),
	                 0);
	assert_int_equal(t.n, 2);
	assert_string_equal(t.v[0].name, "n0");
	assert_int_equal(t.v[0].cpu_milli, 96000);
	assert_int_equal(t.v[0].memory_mib, 393216);
	assert_int_equal(t.v[0].gpu, 8);
	assert_string_equal(t.v[0].model, "G2");
	assert_string_equal(t.v[1].model, "");
	sc_trace_nodes_free(&t);
}

static void pods_every_column(void **state)
{
	sc_trace_pods_t t = {0};
	char msg[256];
	assert_int_equal(
	    parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
	               "creation_time,deletion_time,scheduled_time\r\n"
	               "p0,6000,12288,1,460,T4|P100,LS,Running,10,20,\r\n",
	               &t, msg, sizeof(msg)),
	    0);
	assert_int_equal(t.n, 1);
	sc_trace_pod_t *p = &t.v[0];
	assert_string_equal(p->name, "p0");
	assert_int_equal(p->cpu_milli, 6000);
	assert_int_equal(p->memory_mib, 12288);
	assert_int_equal(p->num_gpu, 1);
	assert_int_equal(p->gpu_milli, 460);
	assert_string_equal(p->gpu_spec, "T4|P100");
	assert_string_equal(p->qos, "LS");
	assert_string_equal(p->phase, "Running");
	assert_int_equal(p->creation_time, 10);
	assert_int_equal(p->deletion_time, 20);
	assert_true(p->scheduled_time == SC_TRACE_NOTIME);
	sc_trace_pods_free(&t);
}

/* The multigpu lists have only the first five columns. */
static void pods_five_columns(void **state)
{
	sc_trace_pods_t t = {0};
	char msg[256];
	assert_int_equal(parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
	                            "a,1000,10,8,1000\nb,1000,10,0,0\n",
	                            &t, msg, sizeof(msg)),
	                 0);
	assert_int_equal(t.n, 2);
	assert_string_equal(t.v[0].gpu_spec, "");
	assert_true(t.v[0].creation_time == SC_TRACE_NOTIME);
	sc_trace_pods_free(&t);
}

static void expect_error(const char *text, int rc, const char *where)
{
	sc_trace_pods_t t = {0};
	char msg[256] = "";
	assert_int_equal(parse_pods(text, &t, msg, sizeof(msg)), rc);
	assert_null(t.v);
	if (!strstr(msg, where))
		fail_msg("message \"%s\" lacks \"%s\"", msg, where);
}

#define HDR "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"

static void pods_bad_lines(void **state)
{
	expect_error("", SC_EPARSE, "pods.csv:0: empty file");
	expect_error("name,cpu_milli\n", SC_EPARSE, "lacks required column memory_mib");
	expect_error(HDR "a,12x,1,0,0\n", SC_EPARSE, "pods.csv:2:2: cpu_milli");
	expect_error(HDR "a,1,1,0,0\nb,1,1,0\n", SC_EPARSE, "pods.csv:3:4: expected 5 columns");
	expect_error(HDR "a,1,1,0,0,9\n", SC_EPARSE, "pods.csv:2:6: expected 5 columns");
	expect_error(HDR "a,1,1,0,1001\n", SC_EPARSE, "pods.csv:2:5: gpu_milli: 1001 out of range");
	expect_error(HDR "a,1,1,-1,0\n", SC_EPARSE, "pods.csv:2:4: num_gpu");
	expect_error(HDR "a,1,1,2,500\n", SC_EPARSE, "pods.csv:2:5: gpu_milli: 500 with num_gpu 2");
	expect_error(HDR "a,1,1,0,300\n", SC_EPARSE, "pods.csv:2:5");
	expect_error(HDR "a,1,1,1,0\n", SC_EPARSE, "pods.csv:2:5");
	expect_error(HDR ",1,1,0,0\n", SC_EPARSE, "pods.csv:2:1: name: empty");
	expect_error(HDR "a,,1,0,0\n", SC_EPARSE, "pods.csv:2:2: cpu_milli: empty");
	expect_error(HDR "a,99999999999999999999,1,0,0\n", SC_EPARSE, "pods.csv:2:2");
	expect_error("name,name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", SC_EPARSE,
	             "column name repeated");
}

static void pods_line_too_long(void **state)
{
	static char text[SC_TRACE_MAX_LINE * 2 + 64];
	snprintf(text, sizeof(text), "%s", HDR "a,1,1,0,0,");
	size_t len = strlen(text);
	memset(text + len, 'x', SC_TRACE_MAX_LINE + 10);
	text[len + SC_TRACE_MAX_LINE + 10] = '\n';
	expect_error(text, SC_ETOOBIG, "pods.csv:2: line longer than");
}

static void nodes_bad_lines(void **state)
{
	sc_trace_nodes_t t = {0};
	char msg[256];
	assert_int_equal(
	    parse_nodes("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,17,G\n", &t, msg, sizeof(msg)),
	    SC_EPARSE);
	assert_non_null(strstr(msg, "nodes.csv:2:4: gpu"));
	assert_int_equal(
	    parse_nodes("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,2,\n", &t, msg, sizeof(msg)),
	    SC_EPARSE);
	assert_non_null(strstr(msg, "nodes.csv:2:5: model: empty"));
	assert_int_equal(sc_trace_read_nodes("/nonexistent/x.csv", &t, msg, sizeof(msg)), SC_EIO);
	assert_non_null(strstr(msg, "/nonexistent/x.csv: cannot open"));
	sc_trace_nodes_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(nodes_every_column), cmocka_unit_test(pods_every_column),
	    cmocka_unit_test(pods_five_columns),  cmocka_unit_test(pods_bad_lines),
	    cmocka_unit_test(pods_line_too_long), cmocka_unit_test(nodes_bad_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
