/* Unit tests of what the CLI reads out of server objects (src/cli/objinfo.c):
 * which pods hold resources, as describe node, top nodes, get and the GPU
 * sums count them alike. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "cli/objinfo.h"

/* Running, Releasing (being evicted) and Pipelined (bound to resources
 * being freed) hold their node's resources; other phases and none do not. */
static void test_pod_holds(void **state)
{
	static const struct {
		const char *phase;
		int holds;
	} cases[] = {{"Running", 1},   {"Releasing", 1}, {"Pipelined", 1}, {"Pending", 0},
	             {"Succeeded", 0}, {"Failed", 0},    {"running", 0},   {"", 0}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *p = json_pack("{s:s}", "phase", cases[i].phase);
		assert_int_equal(sc_pod_holds(p), cases[i].holds);
		json_decref(p);
	}
	json_t *none = json_object();
	assert_int_equal(sc_pod_holds(none), 0);
	json_decref(none);
}

/* An absent field reads "" and shows the placeholder; a value shows. */
static void test_str_or(void **state)
{
	json_t *o = json_pack("{s:s, s:s, s:i}", "node", "n1", "empty", "", "num", 3);
	assert_string_equal(sc_str_or(sc_obj_str(o, "node", NULL, NULL), "-"), "n1");
	assert_string_equal(sc_str_or(sc_obj_str(o, "empty", NULL, NULL), "-"), "-");
	assert_string_equal(sc_str_or(sc_obj_str(o, "num", NULL, NULL), "-"), "-");
	assert_string_equal(sc_str_or(sc_obj_str(o, "none", "deeper", NULL), "?"), "?");
	assert_string_equal(sc_str_or(NULL, "x"), "x");
	json_decref(o);
}

/* sc_job_pods(NULL) and sc_job_gpus count the same pods. */
static void test_job_counts_agree(void **state)
{
	json_t *job = json_loads("{\"status\": {\"pods\": ["
	                         "{\"phase\": \"Running\", \"gpus\": [0, 1]},"
	                         "{\"phase\": \"Pipelined\", \"gpus\": [2]},"
	                         "{\"phase\": \"Releasing\", \"gpus\": [3]},"
	                         "{\"phase\": \"Pending\"},"
	                         "{\"phase\": \"Succeeded\", \"gpus\": [4]}]}}",
	                         0, NULL);
	assert_non_null(job);
	assert_int_equal(sc_job_pods(job, NULL), 3);
	assert_int_equal(sc_job_pods(job, "Pending"), 1);
	assert_int_equal(sc_job_pods(job, "Running"), 1);
	assert_true(sc_job_gpus(job, 0) == 4.0);
	json_decref(job);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pod_holds),
	    cmocka_unit_test(test_job_counts_agree),
	    cmocka_unit_test(test_str_or),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
