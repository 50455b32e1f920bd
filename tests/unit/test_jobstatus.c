/* The stored status of Jobs and Deployments (src/server/jobstatus.c): each
 * field of a pod entry decoded, absent and mistyped fields, entries that are
 * not objects, phases that this server does not write, finding, counting,
 * setting a phase, and the GPUs an entry holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/jobstatus.h"
#include "starcloud/error.h"

static json_t *load(const char *text)
{
	json_t *j = json_loads(text, 0, NULL);
	assert_non_null(j);
	return j;
}

static void test_entry_decoded_field_by_field(void **state)
{
	json_t *e = load("{\"name\":\"j-main-0\",\"phase\":\"Running\",\"node\":\"n1\","
	                 "\"startedAt\":\"2026-01-01T00:00:00Z\",\"generation\":42,"
	                 "\"ready\":true,\"port\":9000}");
	sc_jobst_pod_t p;
	assert_int_equal(sc__jobst_pod(e, &p), 0);
	assert_string_equal(p.name, "j-main-0");
	assert_int_equal(p.phase, SC_PP_RUNNING);
	assert_string_equal(p.node, "n1");
	assert_string_equal(p.started_at, "2026-01-01T00:00:00Z");
	assert_int_equal(json_integer_value(p.generation), 42);
	assert_true(p.ready);
	assert_int_equal(p.port, 9000);
	assert_true(sc__jobst_holds(&p));
	json_decref(e);
}

static void test_absent_and_mistyped_fields_read_as_none(void **state)
{
	/* A phase this server never writes, a node that is a number, ready
	 * as a string, a port that is text: none of them is taken. */
	json_t *e = load("{\"phase\":\"Bound\",\"node\":7,\"ready\":\"yes\",\"port\":\"80\"}");
	sc_jobst_pod_t p;
	assert_int_equal(sc__jobst_pod(e, &p), 0);
	assert_string_equal(p.name, "");
	assert_int_equal(p.phase, SC_PP_OTHER);
	assert_string_equal(p.node, "");
	assert_string_equal(p.started_at, "");
	assert_null(p.generation);
	assert_false(p.ready);
	assert_int_equal(p.port, 0);
	assert_false(sc__jobst_holds(&p));
	json_decref(e);
	/* Not an object at all: an error, and strings a caller may still use. */
	json_t *n = json_integer(3);
	assert_int_equal(sc__jobst_pod(n, &p), SC_EINVAL);
	assert_string_equal(p.name, "");
	assert_string_equal(p.node, "");
	assert_int_equal(sc__jobst_pod(NULL, &p), SC_EINVAL);
	json_decref(n);
}

static void test_phases_parse_exactly(void **state)
{
	assert_int_equal(sc__jobst_phase_parse("Running"), SC_PP_RUNNING);
	assert_int_equal(sc__jobst_phase_parse("Releasing"), SC_PP_RELEASING);
	assert_int_equal(sc__jobst_phase_parse("Succeeded"), SC_PP_SUCCEEDED);
	assert_int_equal(sc__jobst_phase_parse("Failed"), SC_PP_FAILED);
	assert_int_equal(sc__jobst_phase_parse("Pipelined"), SC_PP_PIPELINED);
	assert_int_equal(sc__jobst_phase_parse("running"), SC_PP_OTHER);
	assert_int_equal(sc__jobst_phase_parse("Running "), SC_PP_OTHER);
	assert_int_equal(sc__jobst_phase_parse(""), SC_PP_OTHER);
	assert_int_equal(sc__jobst_phase_parse(NULL), SC_PP_OTHER);
}

static void test_status_pods_find_and_count(void **state)
{
	json_t *job = load("{\"status\":{\"phase\":\"Running\",\"pods\":["
	                   "{\"name\":\"a-main-0\",\"phase\":\"Running\"},"
	                   "{\"name\":\"a-main-1\",\"phase\":\"Releasing\"},"
	                   "{\"name\":\"a-main-10\",\"phase\":\"Failed\"},"
	                   "5,"
	                   "{\"name\":\"a-main-2\",\"phase\":\"Succeeded\"},"
	                   "{\"name\":\"a-main-3\",\"phase\":\"Pipelined\"}]}}");
	json_t *pods = sc__jobst_pods(job);
	size_t at = 99;
	assert_non_null(pods);
	assert_string_equal(sc__jobst_phase(job), "Running");
	/* Names are matched whole: a-main-1 is not a-main-10. */
	assert_ptr_equal(sc__jobst_find(pods, "a-main-10", &at), json_array_get(pods, 2));
	assert_int_equal(at, 2);
	assert_ptr_equal(sc__jobst_find(pods, "a-main-1", NULL), json_array_get(pods, 1));
	assert_null(sc__jobst_find(pods, "a-main", NULL));
	sc_jobst_counts_t c = sc__jobst_count(pods);
	assert_int_equal(c.running, 1);
	assert_int_equal(c.releasing, 1);
	assert_int_equal(c.failed, 1);
	assert_int_equal(c.succeeded, 1);
	assert_int_equal(c.pipelined, 1);
	sc_jobst_pod_t p;
	sc__jobst_pod(sc__jobst_find(pods, "a-main-3", NULL), &p);
	assert_true(sc__jobst_holds(&p));
	sc__jobst_pod(sc__jobst_find(pods, "a-main-2", NULL), &p);
	assert_false(sc__jobst_holds(&p));
	json_decref(job);
	/* No status, a status without pods, pods that are not an array. */
	json_t *none = load("{\"spec\":{}}"), *odd = load("{\"status\":{\"pods\":{}}}");
	assert_null(sc__jobst_pods(none));
	assert_null(sc__jobst_pods(odd));
	assert_null(sc__jobst_pods(NULL));
	assert_string_equal(sc__jobst_phase(none), "");
	c = sc__jobst_count(NULL);
	assert_int_equal(c.running + c.releasing + c.failed + c.succeeded, 0);
	json_decref(none);
	json_decref(odd);
}

static void test_set_phase_keeps_or_sets_the_message(void **state)
{
	json_t *e = load("{\"name\":\"p\",\"phase\":\"Running\",\"message\":\"started\"}");
	sc__jobst_set_phase(e, SC_PP_RELEASING, NULL);
	assert_string_equal(json_string_value(json_object_get(e, "phase")), "Releasing");
	assert_string_equal(json_string_value(json_object_get(e, "message")), "started");
	sc__jobst_set_phase(e, SC_PP_FAILED, "gang failed");
	sc_jobst_pod_t p;
	sc__jobst_pod(e, &p);
	assert_int_equal(p.phase, SC_PP_FAILED);
	assert_string_equal(json_string_value(json_object_get(e, "message")), "gang failed");
	json_decref(e);
}

static void test_gpus_held(void **state)
{
	json_t *whole = load("{\"gpus\":[0,1,2]}"),
	       *share = load("{\"gpus\":[3],\"gpuShare\":250}");
	json_t *mig =
	    load("{\"gpus\":[0],\"mig\":{\"gpu\":0,\"profile\":\"3g.40gb\",\"start\":0}}");
	json_t *badmig = load("{\"mig\":{\"profile\":\"9g.80gb\"}}"), *none = load("{}");
	assert_true(sc__jobst_gpus(whole) == 3.0);
	assert_true(sc__jobst_gpus(share) == 0.25);
	assert_true(sc__jobst_gpus(mig) == 3.0 / 7.0);
	assert_true(sc__jobst_gpus(badmig) == 0.0);
	assert_true(sc__jobst_gpus(none) == 0.0);
	json_decref(whole);
	json_decref(share);
	json_decref(mig);
	json_decref(badmig);
	json_decref(none);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_entry_decoded_field_by_field),
	    cmocka_unit_test(test_absent_and_mistyped_fields_read_as_none),
	    cmocka_unit_test(test_phases_parse_exactly),
	    cmocka_unit_test(test_status_pods_find_and_count),
	    cmocka_unit_test(test_set_phase_keeps_or_sets_the_message),
	    cmocka_unit_test(test_gpus_held),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
