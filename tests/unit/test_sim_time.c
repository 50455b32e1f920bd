/* Time mode: a hand-made trace with known waits, and malformed lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sim/jobs.h"
#include "sim/timesim.h"

static sc_node_spec_t one_node = {.name = "n0",
                                  .cpu_milli = 64000,
                                  .memory = (int64_t)512 << 30,
                                  .gpu_count = 4,
                                  .gpu_model = "A100",
                                  .gpu_memory = (int64_t)80 << 30};

/* One node of 4 GPUs, one queue. Job 0 takes all 4 GPUs for 100 s; jobs 1
 * and 2 (2 GPUs each) wait until it finishes at 100 and then run side by
 * side; job 3 (1 GPU) arrives at 120 to a full node and starts when job 2
 * ends at 130. */
static void test_known_waits(void **state)
{
	const char *trace = "job_id,num_gpu,submit_time,duration\n"
	                    "0,4,0,100\n"
	                    "1,2,10,50\n"
	                    "2,2,20,30\n"
	                    "3,1,120,10\n";
	sc_tjobs_t jobs = {0};
	char msg[256] = "";
	assert_int_equal(sc_tjobs_parse_tiresias(trace, "t.csv", &jobs, msg, sizeof(msg)), 0);
	assert_int_equal(jobs.n, 4);
	sc_tsim_config_t c = {.nodes = &one_node, .nnodes = 1, .tick = 1};
	sc_tsim_result_t r;
	assert_int_equal(sc_tsim_run(&jobs, &c, &r, msg, sizeof(msg)), 0);
	const int64_t start[] = {0, 100, 100, 130}, finish[] = {100, 150, 130, 140};
	for (int i = 0; i < 4; i++) {
		assert_int_equal(r.job[i].start, start[i]);
		assert_int_equal(r.job[i].finish, finish[i]);
	}
	assert_int_equal(r.finished, 4);
	assert_int_equal(r.makespan, 150);
	/* Waits 0, 90, 80, 10. */
	assert_true(r.wait.mean == 45.0);
	assert_true(r.wait.p50 == 10.0);
	assert_true(r.wait.p99 == 90.0);
	/* JCTs 100, 140, 110, 20. */
	assert_true(r.jct.mean == 92.5);
	/* GPU-seconds: 400 + 100 + 60 + 10 = 570 over 150 s x 4 GPUs. */
	assert_true(r.util_mean > 94.99 && r.util_mean < 95.01);
	assert_int_equal(r.nqueues, 1);
	assert_true(r.jain == 1.0);
	sc_tsim_result_free(&r);
	sc_tjobs_free(&jobs);
}

/* Compaction in time mode: two nodes of 4 GPUs; A (n0) and B (n1) hold 2
 * GPUs each for 10,000 s, X left n0 at 100, so when C (4 GPUs on one node)
 * arrives at 1000 each node has 2 free. Without compaction C waits for A to
 * end (10,000); with it, B (the cheaper move: it ran one second less) goes
 * to n0, C starts on n1 at once, and B loses the 999 s it had run there. */
static void test_compaction_starts_big_job(void **state)
{
	const char *trace = "job_id,num_gpu,submit_time,duration\n"
	                    "0,2,0,10000\n"
	                    "1,2,0,100\n"
	                    "2,2,1,10000\n"
	                    "3,4,1000,100\n";
	static const sc_node_spec_t two[2] = {{.name = "n0",
	                                       .cpu_milli = 64000,
	                                       .memory = (int64_t)512 << 30,
	                                       .gpu_count = 4,
	                                       .gpu_model = "A100",
	                                       .gpu_memory = (int64_t)80 << 30},
	                                      {.name = "n1",
	                                       .cpu_milli = 64000,
	                                       .memory = (int64_t)512 << 30,
	                                       .gpu_count = 4,
	                                       .gpu_model = "A100",
	                                       .gpu_memory = (int64_t)80 << 30}};
	for (int on = 0; on <= 1; on++) {
		sc_tjobs_t jobs = {0};
		char msg[256] = "";
		assert_int_equal(sc_tjobs_parse_tiresias(trace, "t.csv", &jobs, msg, sizeof(msg)),
		                 0);
		sc_tjobs_one_node(&jobs, 4);
		assert_int_equal(jobs.v[3].pods, 1);
		assert_int_equal(jobs.v[3].gpus, 4);
		sc_tsim_config_t c = {
		    .nodes = two, .nnodes = 2, .tick = 1, .compaction = on, .large_gpus = 4};
		sc_tsim_result_t r;
		assert_int_equal(sc_tsim_run(&jobs, &c, &r, msg, sizeof(msg)), 0);
		assert_int_equal(r.finished, 4);
		assert_int_equal(r.large_finished, 1);
		if (on) {
			assert_int_equal(r.job[3].start, 1000);
			assert_int_equal(r.moves, 1);
			assert_int_equal(r.job[2].finish, 11000);
			assert_true(r.lost_gpu_seconds == 2.0 * 999);
			assert_true(r.wait_large.mean == 0.0);
		} else {
			assert_int_equal(r.job[3].start, 10000);
			assert_int_equal(r.moves, 0);
			assert_true(r.wait_large.mean == 9000.0);
		}
		assert_int_equal(r.preemptions, 0);
		sc_tsim_result_free(&r);
		sc_tjobs_free(&jobs);
	}
}

/* The FCFS baseline (a stock Kubernetes scheduler) on one node of 4 GPUs:
 * job 0 takes 3 GPUs for 100 s; job 1 (2 pods) arrives at 10, places one pod
 * on the free GPU and holds it idle until job 0 ends; job 2 (1 GPU, 20)
 * finds nothing free and waits too. At 100 both start. The core instead
 * keeps job 1 whole (pending, nothing held) and runs job 2 at once. */
static void test_fcfs_holds_part_of_a_gang(void **state)
{
	const char *trace = "job_id,num_gpu,submit_time,duration\n"
	                    "0,3,0,100\n"
	                    "1,2,10,50\n"
	                    "2,1,20,30\n";
	sc_tjobs_t jobs = {0};
	char msg[256] = "";
	assert_int_equal(sc_tjobs_parse_tiresias(trace, "t.csv", &jobs, msg, sizeof(msg)), 0);
	sc_tsim_config_t c = {.nodes = &one_node, .nnodes = 1, .tick = 1, .policy = SC_TSIM_FCFS};
	sc_tsim_result_t r;
	assert_int_equal(sc_tsim_run(&jobs, &c, &r, msg, sizeof(msg)), 0);
	const int64_t start[] = {0, 100, 100}, finish[] = {100, 150, 130};
	for (int i = 0; i < 3; i++) {
		assert_int_equal(r.job[i].start, start[i]);
		assert_int_equal(r.job[i].finish, finish[i]);
	}
	assert_int_equal(r.finished, 3);
	assert_int_equal(r.stuck, 0);
	assert_int_equal(r.preemptions, 0);
	/* Allocated GPU-seconds 30 + 360 + 90 + 40 = 520 of 600; held by running
	 * jobs 30 + 270 + 90 + 40 = 430 (job 1's first pod idles 90 s). */
	assert_true(r.util_mean > 86.66 && r.util_mean < 86.67);
	assert_true(r.busy_mean > 71.66 && r.busy_mean < 71.67);
	assert_true(r.jain == -1);
	assert_true(r.wait.p95 == 90.0);
	sc_tsim_result_free(&r);

	c.policy = SC_TSIM_STARCLOUD;
	assert_int_equal(sc_tsim_run(&jobs, &c, &r, msg, sizeof(msg)), 0);
	assert_int_equal(r.job[1].start, 100);
	assert_int_equal(r.job[2].start, 20);
	assert_true(r.util_mean == r.busy_mean);
	sc_tsim_result_free(&r);
	sc_tjobs_free(&jobs);
}

/* FCFS places each pod on the node with the most free GPUs (spread): on
 * two 4-GPU nodes a 1-GPU pod leaves n0 with 3 free, a 3-GPU pod goes to
 * the emptier n1, a 2-GPU pod to n0, and the next 2-GPU pod finds 1 GPU
 * free on each node and waits until 100, where binpack had left room. */
static void test_fcfs_spreads(void **state)
{
	char msg[256] = "";
	/* Tiresias jobs are 1-GPU workers; make single pods of 1, 3 and 2 GPUs. */
	sc_tjobs_t three = {0};
	const char *t3 = "job_id,num_gpu,submit_time,duration\n"
	                 "0,1,0,100\n"
	                 "1,1,1,100\n"
	                 "2,1,2,100\n"
	                 "3,1,3,100\n";
	assert_int_equal(sc_tjobs_parse_tiresias(t3, "t.csv", &three, msg, sizeof(msg)), 0);
	three.v[0].gpus = 1; /* 1 GPU on n0 (lowest index among equals) */
	three.v[1].gpus = 3; /* the emptier node: n1 */
	three.v[2].gpus = 2; /* n0 has 3 free, n1 1: n0 (the most free) */
	three.v[3].gpus = 2; /* n0 1 free, n1 1 free: waits until 100 */
	sc_node_spec_t nodes[2] = {one_node, one_node};
	nodes[1].name = "n1";
	sc_tsim_config_t c = {.nodes = nodes, .nnodes = 2, .tick = 1, .policy = SC_TSIM_FCFS};
	sc_tsim_result_t r;
	assert_int_equal(sc_tsim_run(&three, &c, &r, msg, sizeof(msg)), 0);
	const int64_t start[] = {0, 1, 2, 100};
	for (int i = 0; i < 4; i++)
		assert_int_equal(r.job[i].start, start[i]);
	sc_tsim_result_free(&r);
	/* Binpack (the core's default) puts the 3-GPU pod next to the first one
	 * on n0, which leaves n1 empty for both 2-GPU pods: no wait at all. */
	c.policy = SC_TSIM_STARCLOUD;
	assert_int_equal(sc_tsim_run(&three, &c, &r, msg, sizeof(msg)), 0);
	assert_int_equal(r.job[3].start, 3);
	sc_tsim_result_free(&r);
	sc_tjobs_free(&three);
}

/* A gang that needs more GPUs than exist is set aside, not left pending. */
static void test_never_fits(void **state)
{
	const char *trace = "job_id,num_gpu,submit_time,duration\n"
	                    "0,8,0,10\n"
	                    "1,1,0,10\n";
	sc_tjobs_t jobs = {0};
	char msg[256] = "";
	assert_int_equal(sc_tjobs_parse_tiresias(trace, "t.csv", &jobs, msg, sizeof(msg)), 0);
	sc_tsim_config_t c = {.nodes = &one_node, .nnodes = 1, .tick = 1};
	sc_tsim_result_t r;
	assert_int_equal(sc_tsim_run(&jobs, &c, &r, msg, sizeof(msg)), 0);
	assert_int_equal(r.never_fit, 1);
	assert_int_equal(r.finished, 1);
	assert_int_equal(r.job[0].finish, -1);
	sc_tsim_result_free(&r);
	sc_tjobs_free(&jobs);
}

/* OpenB's gpu_spec in time mode: two 1-GPU nodes, models A and B. p0 takes
 * B for 100 s; p1 may use only B, so it waits for p0 although A is free;
 * p2 may use A or B and starts at once on A; p3 asks for a model no node
 * has and is set aside. */
static void test_openb_gpu_spec(void **state)
{
	const char *csv = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
	                  "creation_time,deletion_time,scheduled_time\n"
	                  "p0,1000,1024,1,1000,B,LS,Running,0,100,0\n"
	                  "p1,1000,1024,1,500,B,LS,Running,10,60,10\n"
	                  "p2,1000,1024,1,1000,A|B,LS,Running,20,70,20\n"
	                  "p3,1000,1024,1,1000,C,LS,Running,30,80,30\n";
	FILE *f = fmemopen((void *)csv, strlen(csv), "r");
	assert_non_null(f);
	sc_trace_pods_t pods = {0};
	char msg[256] = "";
	assert_int_equal(sc_trace_parse_pods(f, "p.csv", &pods, msg, sizeof(msg)), 0);
	fclose(f);
	sc_tjobs_t jobs = {0};
	assert_int_equal(sc_tjobs_from_openb(&pods, "p.csv", true, &jobs, msg, sizeof(msg)), 0);
	assert_int_equal(jobs.n, 4);
	assert_int_equal(jobs.v[2].nmodels, 2);
	assert_string_equal(jobs.v[2].models[1], "B");
	sc_node_spec_t nodes[2] = {one_node, one_node};
	nodes[0].name = "a", nodes[0].gpu_model = "A", nodes[0].gpu_count = 1;
	nodes[1].name = "b", nodes[1].gpu_model = "B", nodes[1].gpu_count = 1;
	sc_tsim_config_t c = {.nodes = nodes, .nnodes = 2, .tick = 1};
	sc_tsim_result_t r;
	assert_int_equal(sc_tsim_run(&jobs, &c, &r, msg, sizeof(msg)), 0);
	assert_int_equal(r.job[0].start, 0);
	assert_int_equal(r.job[1].start, 100);
	assert_int_equal(r.job[2].start, 20);
	assert_int_equal(r.never_fit, 1);
	assert_int_equal(r.finished, 3);
	sc_tsim_result_free(&r);
	sc_tjobs_free(&jobs);
	sc_trace_pods_free(&pods);
}

/* Two queues with equal demand on a full node: the core's fair share gives
 * each half of the GPUs, so both get x_q = 1 and Jain's index is 1. */
static void test_two_queues_fair(void **state)
{
	sc_tjob_t v[8];
	char names[8][16];
	for (int i = 0; i < 8; i++) {
		snprintf(names[i], sizeof(names[i]), "j%d", i);
		v[i] = (sc_tjob_t){.name = names[i],
		                   .queue = i % 2 ? "b" : "a",
		                   .arrival = 0,
		                   .duration = 100,
		                   .pods = 1,
		                   .gpus = 1,
		                   .cpu_milli = 1000,
		                   .memory = 1 << 30};
	}
	sc_tjobs_t jobs = {.v = v, .n = 8};
	sc_tsim_config_t c = {.nodes = &one_node, .nnodes = 1, .tick = 1};
	sc_tsim_result_t r;
	char msg[256] = "";
	assert_int_equal(sc_tsim_run(&jobs, &c, &r, msg, sizeof(msg)), 0);
	assert_int_equal(r.nqueues, 2);
	assert_int_equal(r.finished, 8);
	assert_int_equal(r.makespan, 200);
	assert_true(r.queues[0].wait.mean == 50.0 && r.queues[1].wait.mean == 50.0);
	assert_true(r.jain > 0.999);
	sc_tsim_result_free(&r);
}

static void test_tiresias_errors(void **state)
{
	sc_tjobs_t jobs = {0};
	char msg[256] = "";
	const char *bad_gpu = "job_id,num_gpu,submit_time,duration\n0,4,0,100\n1,x,10,50\n";
	assert_int_equal(sc_tjobs_parse_tiresias(bad_gpu, "t.csv", &jobs, msg, sizeof(msg)),
	                 SC_EPARSE);
	assert_string_equal(msg, "t.csv:3:3: num_gpu: expected 1..4096");
	assert_int_equal(jobs.n, 0);
	const char *bad_dur = "job_id,num_gpu,submit_time,duration\n0,4,0,-5\n";
	assert_int_equal(sc_tjobs_parse_tiresias(bad_dur, "t.csv", &jobs, msg, sizeof(msg)),
	                 SC_EPARSE);
	assert_string_equal(msg, "t.csv:2:7: duration: expected seconds > 0");
	const char *no_header = "a,b\n";
	assert_int_equal(sc_tjobs_parse_tiresias(no_header, "t.csv", &jobs, msg, sizeof(msg)),
	                 SC_EPARSE);
	assert_non_null(strstr(msg, "t.csv:1:1: header"));
}

static const char *tput = "{\"v100\": {\"('ResNet-18 (batch size 16)', 1)\": {\"null\": 2.0},"
                          " \"('ResNet-18 (batch size 16)', 2)\": {\"null\": 4.0}}}";

static void test_gavel(void **state)
{
	sc_tjobs_t jobs = {0};
	char msg[256] = "";
	const char *ok = "ResNet-18 (batch size 16)\tcmd\t-n\t1\t100\t6.5\t1\n"
	                 "ResNet-18 (batch size 16)\tcmd\t-n\t1\t100\t7\t2\n";
	assert_int_equal(
	    sc_tjobs_parse_gavel(ok, "vc.trace", "vc", tput, "v100", &jobs, msg, sizeof(msg)), 0);
	assert_int_equal(jobs.n, 2);
	assert_int_equal(jobs.v[0].duration, 50); /* 100 steps at 2 steps/s */
	assert_int_equal(jobs.v[1].duration, 25);
	assert_int_equal(jobs.v[1].pods, 2);
	assert_string_equal(jobs.v[0].queue, "vc");
	sc_tjobs_free(&jobs);
	const char *bad = "ResNet-18 (batch size 16)\tcmd\t-n\t1\t100\tsoon\t1\n";
	assert_int_equal(
	    sc_tjobs_parse_gavel(bad, "vc.trace", "vc", tput, "v100", &jobs, msg, sizeof(msg)),
	    SC_EPARSE);
	assert_string_equal(msg, "vc.trace:1:40: arrival_time: expected seconds >= 0");
	const char *unknown = "GPT (batch size 1)\tcmd\t-n\t1\t100\t0\t1\n";
	assert_int_equal(
	    sc_tjobs_parse_gavel(unknown, "vc.trace", "vc", tput, "v100", &jobs, msg, sizeof(msg)),
	    SC_EPARSE);
	assert_non_null(strstr(msg, "vc.trace:1:1: job_type"));
	const char *short_row = "a\tb\n";
	assert_int_equal(sc_tjobs_parse_gavel(short_row, "vc.trace", "vc", tput, "v100", &jobs, msg,
	                                      sizeof(msg)),
	                 SC_EPARSE);
	assert_non_null(strstr(msg, "vc.trace:1:3: expected 7"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_known_waits),
	    cmocka_unit_test(test_never_fits),
	    cmocka_unit_test(test_two_queues_fair),
	    cmocka_unit_test(test_openb_gpu_spec),
	    cmocka_unit_test(test_tiresias_errors),
	    cmocka_unit_test(test_gavel),
	    cmocka_unit_test(test_fcfs_holds_part_of_a_gang),
	    cmocka_unit_test(test_compaction_starts_big_job),
	    cmocka_unit_test(test_fcfs_spreads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
