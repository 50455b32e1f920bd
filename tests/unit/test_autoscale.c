/* Node pools' what-ifs (src/core/scaleup.c, scaledown.c): what the scenario
 * files cannot express (nodes in flight, members on their way out, pods
 * still releasing, several nodes that cannot all be emptied at once) and
 * every allocation failed one by one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "starcloud/autoscale.h"
#include "starcloud/manifest.h"

/* A world from YAML text, scheduled once. */
typedef struct world {
	sc_manifest_set_t *set;
	sc_snapshot_t snap;
	sc_decisions_t *d;
	sc_pool_t pools[4];
	size_t npools;
} world_t;

static int world_load(world_t *w, const char *yaml)
{
	sc_manifest_error_t err;
	char msg[512];
	const sc_nodepool_t *np;
	memset(w, 0, sizeof(*w));
	if (!(w->set = sc_manifest_set_new()))
		return SC_ENOMEM;
	int rc = sc_manifest_add_text(w->set, "t.yaml", yaml, strlen(yaml), &err);
	if (rc >= 0)
		rc = sc_manifest_snapshot(w->set, 1700000000, &w->snap, &err);
	if (rc >= 0)
		rc = sc_schedule(&w->snap, &w->d, msg, sizeof(msg));
	if (rc < 0)
		return rc;
	w->npools = sc_manifest_nodepools(w->set, &np);
	if (!np)
		return SC_ENOMEM;
	for (size_t i = 0; i < w->npools && i < 4; i++)
		w->pools[i] = np[i].pool;
	return 0;
}

static void world_free(world_t *w)
{
	sc_decisions_free(w->d);
	sc_manifest_set_free(w->set);
}

/* The plans of w's one pool, which must succeed (the tests that want an
 * error or the message call sc_scale*_plan themselves). */
static sc_scaleup_t *plan_up(world_t *w)
{
	sc_scaleup_t *up = NULL;
	char msg[256];
	assert_int_equal(sc_scaleup_plan(&w->snap, w->d, w->pools, 1, &up, msg, sizeof(msg)), 0);
	return up;
}

static sc_scaledown_t *plan_down(world_t *w, const sc_scaledown_opts_t *o)
{
	sc_scaledown_t *down = NULL;
	char msg[256];
	assert_int_equal(sc_scaledown_plan(&w->snap, w->d, w->pools, 1, o, &down, msg, sizeof(msg)),
	                 0);
	return down;
}

#define POOL                                                                                       \
	"apiVersion: starcloud.dev/v1\nkind: NodePool\nmetadata: {name: a100}\n"                   \
	"spec: {minNodes: %d, maxNodes: 10, provider: {dev: {}},\n"                                \
	"  template: {cpu: 64, memory: 512Gi, gpus: {count: 8, model: A100}}}\n---\n"
#define NODE(name, pool)                                                                           \
	"apiVersion: starcloud.dev/v1\nkind: Node\nmetadata: {name: " name                         \
	", labels: {starcloud.dev/pool: " pool "}}\n"                                              \
	"spec: {cpu: 64, memory: 512Gi, gpus: {count: 8, model: A100}}\n---\n"
#define QUEUE "apiVersion: starcloud.dev/v1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n---\n"

static const char gang_world[] =
    "apiVersion: starcloud.dev/v1\nkind: NodePool\nmetadata: {name: a100}\n"
    "spec: {maxNodes: 10, provider: {dev: {}},\n"
    "  template: {cpu: 64, memory: 512Gi, gpus: {count: 8, model: A100}}}\n---\n" QUEUE
    "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: gang}\n"
    "spec: {queue: q, tasks: [{name: w, replicas: 4, resources: {gpu: 8}}]}\n";

/* Nodes already requested are used first and not asked for again. */
static void test_in_flight_nodes_are_used_first(void **state)
{
	world_t w;
	sc_scaleup_t *up;
	assert_int_equal(world_load(&w, gang_world), 0);
	int flights[] = {0, 2, 4, 6};
	int want_add[] = {4, 2, 0, 0};
	for (int k = 0; k < 4; k++) {
		w.pools[0].in_flight = flights[k];
		up = plan_up(&w);
		assert_int_equal(up->add[0], want_add[k]);
		assert_int_equal(up->nwaits, 1);
		assert_int_equal(up->waits[0].nodes, 4);
		assert_int_equal(up->waits[0].new_nodes, want_add[k]);
		sc_scaleup_free(up);
	}
	/* At the maximum with 10 in flight: no headroom, and none needed. */
	w.pools[0].in_flight = 10;
	up = plan_up(&w);
	assert_int_equal(up->add[0], 0);
	assert_int_equal(up->headroom[0], 0);
	sc_scaleup_free(up);
	world_free(&w);
}

/* A pod still releasing frees its node a moment later, and its job (an
 * evicted one) waits again. The cycle pipelines "next" onto the releasing
 * GPUs; the what-if then sees "old" waiting, and one new node is asked for
 * (not two: the releasing pod's room is not counted twice). */
static void test_releasing_room_counted_once(void **state)
{
	char yaml[4096];
	world_t w;
	sc_scaleup_t *up;
	snprintf(yaml, sizeof(yaml),
	         POOL NODE("n1", "a100") QUEUE
	         "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: old}\n"
	         "spec: {queue: q, tasks: [{name: w, replicas: 1, resources: {gpu: 8}}]}\n"
	         "status: {pods: [{name: old-w-0, phase: Releasing, node: n1, gpus: "
	         "[0,1,2,3,4,5,6,7]}]}\n---\n"
	         "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: next}\n"
	         "spec: {queue: q, tasks: [{name: w, replicas: 1, resources: {gpu: 8}}]}\n",
	         1);
	assert_int_equal(world_load(&w, yaml), 0);
	assert_int_equal(w.d->nbindings, 1);
	assert_true(w.d->bindings[0].pipelined);
	up = plan_up(&w);
	assert_int_equal(up->add[0], 1);
	assert_int_equal(up->nwaits, 1);
	assert_int_equal(up->waits[0].job, 0); /* "old", evicted, waits again */
	sc_scaleup_free(up);
	world_free(&w);
}

/* Members on their way out do not count towards the minimum. */
static void test_removing_members_do_not_count(void **state)
{
	char yaml[4096];
	world_t w;
	sc_scaleup_t *up;
	sc_scaledown_t *down;
	snprintf(yaml, sizeof(yaml), POOL NODE("n1", "a100") NODE("n2", "a100") NODE("n3", "a100"),
	         2);
	assert_int_equal(world_load(&w, yaml), 0);
	down = plan_down(&w, NULL);
	assert_int_equal(down->n, 1);
	assert_string_equal(down->nodes[0].node, "n1");
	sc_scaledown_free(down);
	/* One of the three is being deleted (the caller says so): live is
	 * 2 = min, nothing more goes and nothing is added. */
	w.pools[0].removing = 1;
	down = plan_down(&w, NULL);
	assert_int_equal(down->n, 0);
	sc_scaledown_free(down);
	up = plan_up(&w);
	assert_int_equal(up->add[0], 0);
	sc_scaleup_free(up);
	w.pools[0].removing = 2;
	up = plan_up(&w);
	assert_int_equal(up->below_min[0], 1);
	assert_int_equal(up->add[0], 1);
	sc_scaleup_free(up);
	world_free(&w);
}

/* Two nodes that could each be emptied onto the same free room, but not
 * both: only the first goes. */
static void test_moves_are_taken_one_by_one(void **state)
{
	char yaml[8192];
	world_t w;
	sc_scaledown_t *down;
	snprintf(yaml, sizeof(yaml),
	         POOL NODE("p1", "a100") NODE("p2", "a100") QUEUE
	         "apiVersion: starcloud.dev/v1\nkind: Node\nmetadata: {name: static}\n"
	         "spec: {cpu: 64, memory: 512Gi, gpus: {count: 8, model: A100}}\n---\n"
	         "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: big}\n"
	         "spec: {queue: q, tasks: [{name: w, replicas: 1, resources: {gpu: 4}}]}\n"
	         "status: {pods: [{name: big-w-0, phase: Running, node: static, gpus: "
	         "[0,1,2,3]}]}\n---\n"
	         "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: a}\n"
	         "spec: {queue: q, tasks: [{name: w, replicas: 1, resources: {gpu: 3}}]}\n"
	         "status: {pods: [{name: a-w-0, phase: Running, node: p1, gpus: [0,1,2]}]}\n---\n"
	         "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: b}\n"
	         "spec: {queue: q, tasks: [{name: w, replicas: 1, resources: {gpu: 3}}]}\n"
	         "status: {pods: [{name: b-w-0, phase: Running, node: p2, gpus: [0,1,2]}]}\n",
	         0);
	assert_int_equal(world_load(&w, yaml), 0);
	down = plan_down(&w, NULL);
	/* p1's 3 GPUs move to static (4 free); p2's then find 1 free there,
	 * and p1 is gone: p2 stays. */
	assert_int_equal(down->n, 1);
	assert_string_equal(down->nodes[0].node, "p1");
	assert_int_equal(down->nodes[0].moves, 1);
	assert_true(down->checks >= 2);
	sc_scaledown_free(down);
	/* Without moves, busy nodes are never offered. */
	sc_scaledown_opts_t o;
	sc_scaledown_opts_default(&o);
	o.moves = false;
	down = plan_down(&w, &o);
	assert_int_equal(down->n, 0);
	assert_int_equal(down->checks, 0);
	sc_scaledown_free(down);
	world_free(&w);
}

static void test_bad_pools(void **state)
{
	world_t w;
	sc_scaleup_t *up = (sc_scaleup_t *)1;
	char msg[256];
	assert_int_equal(world_load(&w, gang_world), 0);
	sc_pool_t two[2] = {w.pools[0], w.pools[0]};
	assert_int_equal(sc_scaleup_plan(&w.snap, w.d, two, 2, &up, msg, sizeof(msg)), SC_EINVAL);
	assert_null(up);
	assert_non_null(strstr(msg, "two pools of that name"));
	two[0].min_nodes = 20;
	two[0].max_nodes = 10;
	assert_int_equal(sc_scaleup_plan(&w.snap, w.d, two, 1, &up, msg, sizeof(msg)), SC_EINVAL);
	assert_non_null(strstr(msg, "minNodes above maxNodes"));
	world_free(&w);
}

static void test_preemptible_from_class(void **state)
{
	world_t w;
	assert_int_equal(
	    world_load(&w,
	               QUEUE "apiVersion: starcloud.dev/v1\nkind: PriorityClass\n"
	                     "metadata: {name: normal}\nspec: {value: 50, preemptible: false}\n"
	                     "---\napiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: a}\n"
	                     "spec: {queue: q, tasks: [{name: w}]}\n---\n"
	                     "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: b}\n"
	                     "spec: {queue: q, priorityClass: critical, preemptible: true,\n"
	                     "  tasks: [{name: w}]}\n---\n"
	                     "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: c}\n"
	                     "spec: {queue: q, priorityClass: train, tasks: [{name: w}]}\n"),
	    0);
	assert_false(sc_job_preemptible(&w.snap, 0)); /* "normal" overridden */
	assert_true(sc_job_preemptible(&w.snap, 1));  /* the job's own setting */
	assert_true(sc_job_preemptible(&w.snap, 2));  /* built-in train, 50 */
	world_free(&w);
}

/* Every allocation of both plans failed in turn: SC_ENOMEM, or the same
 * answer as without failures. */
static void test_fail_each_allocation(void **state)
{
	char yaml[8192];
	world_t w;
	char msg[256];
	snprintf(yaml, sizeof(yaml),
	         POOL NODE("p1", "a100") NODE("p2", "a100") QUEUE
	         "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: a}\n"
	         "spec: {queue: q, tasks: [{name: w, replicas: 1, resources: {gpu: 3}}]}\n"
	         "status: {pods: [{name: a-w-0, phase: Running, node: p1, gpus: [0,1,2]}]}\n---\n"
	         "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: gang}\n"
	         "spec: {queue: q, tasks: [{name: w, replicas: 3, resources: {gpu: 8}}]}\n",
	         0);
	assert_int_equal(world_load(&w, yaml), 0);
	sc_scaleup_t *ref_up;
	sc_scaledown_t *ref_down;
	ref_up = plan_up(&w);
	ref_down = plan_down(&w, NULL);
	assert_int_equal(ref_up->add[0], 2);
	long n, failures = 0;
	for (n = 1; n < 100000; n++) {
		sc_scaleup_t *up = NULL;
		sc_scaledown_t *down = NULL;
		sc_alloc_fail_after(n);
		int rc = sc_scaleup_plan(&w.snap, w.d, w.pools, 1, &up, msg, sizeof(msg));
		if (rc == 0)
			rc = sc_scaledown_plan(&w.snap, w.d, w.pools, 1, NULL, &down, msg,
			                       sizeof(msg));
		long calls = sc_alloc_calls();
		sc_alloc_fail_after(0);
		if (rc == 0) {
			assert_int_equal(up->add[0], ref_up->add[0]);
			assert_int_equal(up->nwaits, ref_up->nwaits);
			assert_int_equal(down->n, ref_down->n);
		} else {
			assert_int_equal(rc, SC_ENOMEM);
			failures++;
		}
		sc_scaleup_free(up);
		sc_scaledown_free(down);
		if (calls < n)
			break;
	}
	assert_true(n < 100000);
	assert_true(failures > 10);
	sc_scaleup_free(ref_up);
	sc_scaledown_free(ref_down);
	world_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_in_flight_nodes_are_used_first),
	    cmocka_unit_test(test_releasing_room_counted_once),
	    cmocka_unit_test(test_removing_members_do_not_count),
	    cmocka_unit_test(test_moves_are_taken_one_by_one),
	    cmocka_unit_test(test_bad_pools),
	    cmocka_unit_test(test_preemptible_from_class),
	    cmocka_unit_test(test_fail_each_allocation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
