/* Out of memory is an ordinary error: failing the scheduler's scratch
 * allocations one by one must give SC_ENOMEM (never a crash, a leak or a
 * half-made result), and the scheduler must work again afterwards. The
 * same holds from manifest text to decisions: every allocation of the
 * YAML/JSON reader, the manifest decoder, the cluster model and jansson
 * itself is failed in turn (base/alloc.h; under ASan a leak fails too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/alloc.h"
#include "fixture.h"
#include "starcloud/manifest.h"

static void build(void)
{
	fx_reset();
	fx_nodes(4, 4);
	fx_queue("a", NULL, 4, 1, -1);
	fx_queue("b", NULL, 4, 1, -1);
	for (int i = 0; i < 4; i++)
		fx_running(fx_job("a", 1, 2, 0), 0, i / 2, (i % 2) * 2);
	fx_job("b", 2, 4, 0);
	fx_job("b", 4, 1, 2)->priority_class = "build";
}

static void test_fail_each_block(void **state)
{
	build();
	sc_scheduler_t *sch = sc_scheduler_new();
	assert_non_null(sch);
	sc_decisions_t *ref;
	char msg[256];
	assert_int_equal(sc_scheduler_run(sch, &F.snap, &ref, msg, sizeof(msg)), 0);
	int failures = 0;
	/* The arena keeps its blocks between cycles, so make a fresh one each
	 * time so every block request of a cycle can be failed. */
	for (long n = 1; n < 64; n++) {
		sc_scheduler_free(sch);
		sch = sc_scheduler_new();
		assert_non_null(sch);
		sc_scheduler_fail_after(sch, n);
		sc_decisions_t *d = NULL;
		int rc = sc_scheduler_run(sch, &F.snap, &d, msg, sizeof(msg));
		if (rc == 0) {
			/* The failure point lies past this cycle: same result. */
			assert_int_equal(d->nbindings, ref->nbindings);
			assert_int_equal(d->nevictions, ref->nevictions);
			sc_decisions_free(d);
			break;
		}
		assert_int_equal(rc, SC_ENOMEM);
		assert_null(d);
		failures++;
	}
	assert_true(failures > 0);
	sc_scheduler_fail_after(sch, 0);
	sc_decisions_t *d;
	assert_int_equal(sc_scheduler_run(sch, &F.snap, &d, msg, sizeof(msg)), 0);
	assert_int_equal(d->nbindings, ref->nbindings);
	sc_decisions_free(d);
	sc_decisions_free(ref);
	sc_scheduler_free(sch);
}

/* The example cluster and jobs of `make run`, as text. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	static char buf[1 << 16];
	*len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	char *copy = malloc(*len + 1);
	assert_non_null(copy);
	memcpy(copy, buf, *len);
	copy[*len] = '\0';
	return copy;
}

/* Text to decisions; 0 with the bindings counted, or the first error. */
static size_t last_evictions; /* of the last text_to_decisions that succeeded */

static int text_to_decisions(const char *cluster, size_t clen, const char *jobs, size_t jlen,
                             size_t *nbindings)
{
	sc_manifest_error_t err;
	sc_snapshot_t snap;
	sc_decisions_t *d = NULL;
	char msg[256];
	sc_manifest_set_t *set = sc_manifest_set_new();
	if (!set)
		return SC_ENOMEM;
	int rc = sc_manifest_add_text(set, "cluster.yaml", cluster, clen, &err);
	if (rc >= 0)
		rc = sc_manifest_add_text(set, "jobs.yaml", jobs, jlen, &err);
	if (rc >= 0)
		rc = sc_manifest_snapshot(set, 1700000000, &snap, &err);
	if (rc >= 0)
		rc = sc_schedule(&snap, &d, msg, sizeof(msg));
	if (rc >= 0) {
		*nbindings = d->nbindings;
		last_evictions = d->nevictions;
		json_t *out = sc_decisions_to_json(&snap, d);
		rc = out ? 0 : SC_ENOMEM;
		json_decref(out);
	}
	sc_decisions_free(d);
	sc_manifest_set_free(set);
	return rc < 0 ? rc : 0;
}

static void *json_alloc(size_t n)
{
	return sc_malloc(n);
}

/* Fails the 1st, 2nd, ... allocation of the whole way from text to
 * decisions, jansson's included, until a run needs no more than were
 * allowed: each run is an error or the reference's ref decisions. */
static void fail_each_allocation(const char *cluster, size_t clen, const char *jobs, size_t jlen,
                                 size_t ref)
{
	json_set_alloc_funcs(json_alloc, free);
	long n, failures = 0;
	for (n = 1; n < 200000; n++) {
		sc_alloc_fail_after(n);
		size_t got = 0;
		int rc = text_to_decisions(cluster, clen, jobs, jlen, &got);
		long calls = sc_alloc_calls();
		sc_alloc_fail_after(0);
		if (calls < n) {
			/* No allocation was failed: the whole way succeeded. */
			assert_int_equal(rc, 0);
			assert_int_equal(got, ref);
			break;
		}
		/* One allocation failed: an error, never a result that differs
		 * from the reference. */
		if (rc == 0)
			assert_int_equal(got, ref);
		else
			failures++;
	}
	json_set_alloc_funcs(malloc, free);
	assert_true(n < 200000);
	assert_true(failures > 100);
}

static void test_fail_each_allocation_from_text(void **state)
{
	size_t clen, jlen, ref = 0, got;
	char *cluster = slurp("examples/cluster.yaml", &clen);
	char *jobs = slurp("examples/jobs.yaml", &jlen);
	assert_int_equal(text_to_decisions(cluster, clen, jobs, jlen, &ref), 0);
	assert_true(ref > 0);
	fail_each_allocation(cluster, clen, jobs, jlen, ref);
	got = 0;
	assert_int_equal(text_to_decisions(cluster, clen, jobs, jlen, &got), 0);
	assert_int_equal(got, ref);
	free(cluster);
	free(jobs);
}

/* Compaction's paths (candidates, trial emptying, the moved pods placed
 * again, the commit) under every failed allocation: n2 (4 of 8 GPUs) is
 * emptied onto n1 and n3 for the waiting 8-GPU job, as in
 * tests/scenarios/compaction_frees_node_for_gang.yaml (times before the
 * snapshot's 2023-11-14). */
static void test_fail_each_allocation_compaction(void **state)
{
	static const char cluster[] =
	    "apiVersion: starcloud.dev/v1\nkind: Node\nmetadata: {name: n1}\n"
	    "spec: {cpu: 64, memory: 256Gi, gpus: {count: 8, model: H100-80GB}}\n---\n"
	    "apiVersion: starcloud.dev/v1\nkind: Node\nmetadata: {name: n2}\n"
	    "spec: {cpu: 64, memory: 256Gi, gpus: {count: 8, model: H100-80GB}}\n---\n"
	    "apiVersion: starcloud.dev/v1\nkind: Node\nmetadata: {name: n3}\n"
	    "spec: {cpu: 64, memory: 256Gi, gpus: {count: 8, model: H100-80GB}}\n---\n"
	    "apiVersion: starcloud.dev/v1\nkind: PriorityClass\nmetadata: {name: hi}\nspec: "
	    "{value: 100, preemptible: true}\n---\n"
	    "apiVersion: starcloud.dev/v1\nkind: Queue\nmetadata: {name: q}\nspec: {resources: "
	    "{gpu: {quota: 64}}}\n";
	static const char jobs[] =
	    "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: f1}\nspec: {queue: q, "
	    "priorityClass: build, tasks: "
	    "[{name: w, replicas: 1, resources: {gpu: 6}}]}\nstatus: {pods: [{name: f1-w-0, "
	    "phase: Running, node: n1, gpus: [0, 1, 2, 3, 4, 5]}]}\n---\n"
	    "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: f3}\nspec: {queue: q, "
	    "priorityClass: build, tasks: "
	    "[{name: w, replicas: 1, resources: {gpu: 6}}]}\nstatus: {pods: [{name: f3-w-0, "
	    "phase: Running, node: n3, gpus: [0, 1, 2, 3, 4, 5]}]}\n---\n"
	    "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: a}\nspec: {queue: q, "
	    "priorityClass: hi, tasks: "
	    "[{name: w, replicas: 1, resources: {gpu: 2}}]}\nstatus: {pods: [{name: a-w-0, "
	    "phase: Running, node: n2, gpus: [0, 1], startedAt: \"2023-11-14T00:00:00Z\"}]}\n---\n"
	    "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: b}\nspec: {queue: q, "
	    "priorityClass: hi, tasks: "
	    "[{name: w, replicas: 1, resources: {gpu: 2}}]}\nstatus: {pods: [{name: b-w-0, "
	    "phase: Running, node: n2, gpus: [2, 3], startedAt: \"2023-11-14T00:00:00Z\"}]}\n---\n"
	    "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: big}\nspec: {queue: q, "
	    "priorityClass: build, tasks: "
	    "[{name: w, replicas: 1, resources: {gpu: 8}}]}\n";
	size_t ref = 0;
	assert_int_equal(
	    text_to_decisions(cluster, sizeof(cluster) - 1, jobs, sizeof(jobs) - 1, &ref), 0);
	assert_int_equal(ref, 3); /* big, and a and b moved */
	assert_int_equal(last_evictions, 2);
	fail_each_allocation(cluster, sizeof(cluster) - 1, jobs, sizeof(jobs) - 1, ref);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fail_each_block),
	    cmocka_unit_test(test_fail_each_allocation_from_text),
	    cmocka_unit_test(test_fail_each_allocation_compaction),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
