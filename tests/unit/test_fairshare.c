/* Fair share and allocate on hand-built snapshots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "starcloud/core.h"

#define MAXN 64

typedef struct fixture {
	sc_node_spec_t nodes[MAXN];
	char names[MAXN][16];
	sc_queue_spec_t queues[8];
	sc_job_spec_t jobs[512];
	sc_task_spec_t tasks[512];
	char jnames[512][16];
	sc_snapshot_t snap;
} fixture_t;

static fixture_t F;

static void reset(void)
{
	memset(&F, 0, sizeof(F));
	sc_config_default(&F.snap.config);
	F.snap.nodes = F.nodes;
	F.snap.queues = F.queues;
	F.snap.jobs = F.jobs;
}

static void add_nodes(int n, int gpus)
{
	for (int i = 0; i < n; i++) {
		size_t k = F.snap.nnodes++;
		snprintf(F.names[k], sizeof(F.names[k]), "n%02zu", k);
		F.nodes[k] = (sc_node_spec_t){.name = F.names[k], .cpu_milli = 64000,
					      .memory = (int64_t)512 << 30, .gpu_count = gpus,
					      .gpu_model = "A100", .gpu_memory = (int64_t)80 << 30};
	}
}

static void add_queue(const char *name, const char *parent, double quota, double weight,
		      double limit)
{
	sc_queue_spec_t *q = &F.queues[F.snap.nqueues++];
	q->name = name;
	q->parent = parent;
	q->priority = 100;
	q->res[SC_RES_GPU] = (sc_queue_res_t){quota, limit, weight};
	q->res[SC_RES_CPU] = (sc_queue_res_t){-1, -1, 1};
	q->res[SC_RES_MEM] = (sc_queue_res_t){-1, -1, 1};
}

static void add_job(const char *queue, int replicas, int gpus, int min_member)
{
	size_t k = F.snap.njobs++;
	snprintf(F.jnames[k], sizeof(F.jnames[k]), "j%03zu", k);
	F.tasks[k] = (sc_task_spec_t){.name = "main", .replicas = replicas,
				      .req = {.cpu_milli = 1000, .memory = 1 << 30, .gpus = gpus}};
	F.jobs[k] = (sc_job_spec_t){.name = F.jnames[k], .queue = queue, .preemptible = -1,
				    .min_member = min_member, .tasks = &F.tasks[k], .ntasks = 1,
				    .created = (int64_t)k, .staleness_grace = -1};
}

static const sc_queue_report_t *queue(const sc_decisions_t *d, const char *name)
{
	for (size_t i = 0; i < d->nqueues; i++)
		if (strcmp(d->queues[i].name, name) == 0)
			return &d->queues[i];
	fail_msg("no queue %s", name);
	return NULL;
}

/* KAI's own test vector: 100 GPUs, two queues with quota 10 and request
 * 100, weights 3 and 1 -> 70 and 30. */
static void test_kai_vector(void **state)
{
	reset();
	add_nodes(25, 4);
	add_queue("a", NULL, 10, 3, -1);
	add_queue("b", NULL, 10, 1, -1);
	for (int i = 0; i < 100; i++) {
		add_job("a", 1, 1, 0);
		add_job("b", 1, 1, 0);
	}
	sc_decisions_t *d;
	char msg[256];
	assert_int_equal(sc_schedule(&F.snap, &d, msg, sizeof(msg)), 0);
	assert_float_equal(queue(d, "a")->fair_share[SC_RES_GPU], 70, 1e-6);
	assert_float_equal(queue(d, "b")->fair_share[SC_RES_GPU], 30, 1e-6);
	/* Allocation follows the fair shares exactly when it fills the cluster. */
	assert_float_equal(queue(d, "a")->allocated[SC_RES_GPU], 70, 1e-6);
	assert_float_equal(queue(d, "b")->allocated[SC_RES_GPU], 30, 1e-6);
	assert_int_equal(d->nbindings, 100);
	assert_int_equal(d->npending, 100);
	sc_decisions_free(d);
}

/* Hierarchy: the parent's share is divided among its children. */
static void test_hierarchy(void **state)
{
	reset();
	add_nodes(10, 8);
	add_queue("org", NULL, 40, 1, -1);
	add_queue("other", NULL, 40, 1, -1);
	add_queue("t1", "org", 10, 1, -1);
	add_queue("t2", "org", 10, 3, -1);
	for (int i = 0; i < 30; i++) {
		add_job("t1", 1, 2, 0);
		add_job("t2", 1, 2, 0);
		add_job("other", 1, 1, 0);
	}
	sc_decisions_t *d;
	char msg[256];
	assert_int_equal(sc_schedule(&F.snap, &d, msg, sizeof(msg)), 0);
	/* other asks 30 < 40 quota: org gets 50, split 10+10 then 30 by 1:3. */
	assert_float_equal(queue(d, "other")->fair_share[SC_RES_GPU], 30, 1e-6);
	assert_float_equal(queue(d, "org")->fair_share[SC_RES_GPU], 50, 1e-6);
	double t1 = queue(d, "t1")->fair_share[SC_RES_GPU];
	double t2 = queue(d, "t2")->fair_share[SC_RES_GPU];
	assert_float_equal(t1 + t2, 50, 1e-6);
	assert_true(t1 >= 17 && t1 <= 18);
	sc_decisions_free(d);
}

/* A gang that does not fit is rolled back whole. */
static void test_gang_rollback(void **state)
{
	reset();
	add_nodes(2, 4);
	add_queue("a", NULL, -1, 1, -1);
	add_job("a", 3, 4, 0); /* 12 GPUs on 8: nothing */
	add_job("a", 2, 4, 0); /* fits exactly */
	sc_decisions_t *d;
	char msg[256];
	assert_int_equal(sc_schedule(&F.snap, &d, msg, sizeof(msg)), 0);
	assert_int_equal(d->nbindings, 2);
	assert_int_equal(d->bindings[0].job, 1);
	assert_int_equal(d->npending, 1);
	assert_non_null(strstr(d->pending[0].reason, "gang needs 3 pods, only 2 fit"));
	sc_decisions_free(d);
}

/* Limits are never exceeded. */
static void test_limit(void **state)
{
	reset();
	add_nodes(4, 8);
	add_queue("a", NULL, 4, 1, 6);
	for (int i = 0; i < 10; i++)
		add_job("a", 1, 1, 0);
	sc_decisions_t *d;
	char msg[256];
	assert_int_equal(sc_schedule(&F.snap, &d, msg, sizeof(msg)), 0);
	assert_int_equal(d->nbindings, 6);
	assert_non_null(strstr(d->pending[0].reason, "would exceed its gpu limit"));
	sc_decisions_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kai_vector),
		cmocka_unit_test(test_hierarchy),
		cmocka_unit_test(test_gang_rollback),
		cmocka_unit_test(test_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
