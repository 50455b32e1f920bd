/* Unit tests for the manifest layer: every kind decodes into the core's
 * structs with the documented units and defaults, every kind of bad input
 * is refused with the field path and position, and a bad text changes
 * nothing. Also the `schedule -o json` shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "starcloud/manifest.h"

static const char *const cluster = "apiVersion: starcloud.dev/v1\n"
                                   "kind: Node\n"
                                   "metadata: {name: n1, labels: {zone: z1, rack: 12}}\n"
                                   "spec:\n"
                                   "  cpu: 128\n"
                                   "  memory: 1Ti\n"
                                   "  gpus: {count: 8, model: A100-80GB, memory: 80Gi}\n"
                                   "---\n"
                                   "apiVersion: starcloud.dev/v1\n"
                                   "kind: Queue\n"
                                   "metadata: {name: research}\n"
                                   "---\n"
                                   "apiVersion: starcloud.dev/v1\n"
                                   "kind: Queue\n"
                                   "metadata: {name: team-a}\n"
                                   "spec:\n"
                                   "  parentQueue: research\n"
                                   "  priority: 120\n"
                                   "  preemptMinRuntime: 10m\n"
                                   "  resources:\n"
                                   "    gpu: {quota: 8, overQuotaWeight: 2, limit: -1}\n"
                                   "    cpu: {quota: 500m}\n"
                                   "    memory: {quota: 16Gi, limit: -1}\n";

static sc_manifest_set_t *set_with(const char *text)
{
	sc_manifest_set_t *s = sc_manifest_set_new();
	sc_manifest_error_t err;
	assert_non_null(s);
	if (sc_manifest_add_text(s, "t.yaml", text, strlen(text), &err) < 0) {
		char buf[1400];
		fail_msg("%s", sc_manifest_error_format(&err, buf, sizeof(buf)));
	}
	return s;
}

/* Adds text that must fail; checks the code, path and message substring,
 * and that nothing was added. */
static void expect_bad(const char *text, int code, const char *path, const char *msg)
{
	sc_manifest_set_t *s = set_with(cluster);
	sc_manifest_error_t err;
	size_t before = sc_manifest_count(s, "Node") + sc_manifest_count(s, "Job");
	int rc = sc_manifest_add_text(s, "bad.yaml", text, strlen(text), &err);
	char buf[1400];
	sc_manifest_error_format(&err, buf, sizeof(buf));
	if (rc != code || strcmp(err.path, path) != 0 || !strstr(err.msg, msg))
		fail_msg("rc %d (want %d): %s (want path %s, msg %s)", rc, code, buf, path, msg);
	assert_string_equal(err.file, "bad.yaml");
	assert_int_equal(sc_manifest_count(s, "Node") + sc_manifest_count(s, "Job"), before);
	sc_manifest_set_free(s);
}

static void test_node_and_queues(void **state)
{
	sc_manifest_set_t *s = set_with(cluster);
	sc_snapshot_t snap;
	assert_int_equal(sc_manifest_snapshot(s, 1000, &snap, NULL), 0);
	assert_int_equal(snap.nnodes, 1);
	const sc_node_spec_t *n = &snap.nodes[0];
	assert_string_equal(n->name, "n1");
	assert_int_equal(n->cpu_milli, 128000);
	assert_int_equal(n->memory, 1LL << 40);
	assert_int_equal(n->gpu_count, 8);
	assert_string_equal(n->gpu_model, "A100-80GB");
	assert_int_equal(n->gpu_memory, 80LL << 30);
	assert_int_equal(n->nlabels, 2);
	assert_string_equal(n->labels[1].value, "12"); /* a number label becomes text */
	assert_int_equal(snap.nqueues, 2);
	const sc_queue_spec_t *r = &snap.queues[0], *q = &snap.queues[1];
	assert_null(r->parent);
	assert_int_equal(r->priority, 100);
	assert_true(r->res[SC_RES_GPU].quota == 0 && r->res[SC_RES_GPU].limit == -1 &&
	            r->res[SC_RES_GPU].weight == 1);
	assert_string_equal(q->parent, "research");
	assert_int_equal(q->priority, 120);
	assert_int_equal(q->preempt_min_runtime, 600);
	assert_true(q->res[SC_RES_GPU].quota == 8 && q->res[SC_RES_GPU].weight == 2);
	assert_true(q->res[SC_RES_CPU].quota == 500);
	assert_true(q->res[SC_RES_MEM].quota == (double)(16LL << 30));
	assert_int_equal(snap.now, 1000);
	assert_int_equal(snap.config.nactions, SC_ACT_COUNT);
	sc_manifest_set_free(s);
}

static void test_kai_queue(void **state)
{
	sc_manifest_set_t *s =
	    set_with("apiVersion: scheduling.run.ai/v2\nkind: Queue\n"
	             "metadata: {name: k, uid: x, resourceVersion: '7'}\n"
	             "spec:\n  displayName: K\n  resources:\n"
	             "    cpu: {quota: 2500}\n    memory: {quota: 1000, limit: -1}\n"
	             "status: {allocated: {}}\n");
	sc_snapshot_t snap;
	assert_int_equal(sc_manifest_snapshot(s, 0, &snap, NULL), 0);
	const sc_queue_spec_t *q = &snap.queues[0];
	assert_true(q->res[SC_RES_CPU].quota == 2500); /* millicores */
	assert_true(q->res[SC_RES_MEM].quota == 1e9);  /* MB */
	assert_true(q->res[SC_RES_MEM].limit == -1);
	assert_true(q->res[SC_RES_GPU].limit == 0); /* KAI default */
	assert_true(q->res[SC_RES_GPU].quota == 0);
	sc_manifest_set_free(s);
}

static const char *const job_text =
    "apiVersion: starcloud.dev/v1\n"
    "kind: PriorityClass\n"
    "metadata: {name: high}\n"
    "spec: {value: 150, preemptible: false}\n"
    "---\n"
    "apiVersion: starcloud.dev/v1\n"
    "kind: Job\n"
    "metadata: {name: llama, creationTimestamp: '2026-11-29T09:00:00Z'}\n"
    "spec:\n"
    "  queue: team-a\n"
    "  priorityClass: high\n"
    "  preemptible: true\n"
    "  minMember: 2\n"
    "  placement: spread\n"
    "  spreadFactor: 2\n"
    "  topology: {required: rack, preferred: zone}\n"
    "  restartPolicy: OnFailure\n"
    "  expectedRuntime: 2h\n"
    "  stalenessGracePeriod: 90s\n"
    "  tasks:\n"
    "  - name: worker\n"
    "    replicas: 3\n"
    "    command: [python3, train.py]\n"
    "    env: {EPOCHS: 3}\n"
    "    resources: {cpu: 8, memory: 64Gi, gpu: 1, gpuModels: [A100-80GB, H100-80GB]}\n"
    "    nodeSelector: {zone: z1}\n"
    "    probes:\n"
    "      liveness: {http: {path: /healthz, port: 8080}, periodSeconds: 10}\n"
    "      startup: {tcp: {port: 8080}, failureThreshold: 30}\n"
    "  - name: share\n"
    "    resources: {gpuFraction: 0.25}\n"
    "  - name: mem\n"
    "    resources: {gpuMemory: 20Gi}\n"
    "  - name: slice\n"
    "    resources: {mig: 1g.10gb}\n"
    "status:\n"
    "  staleSince: '2026-11-29T10:05:00Z'\n"
    "  pods:\n"
    "  - {name: llama-worker-0, phase: Running, node: n1, gpus: [0], "
    "startedAt: '2026-11-29T10:00:00Z'}\n"
    "  - {name: llama-worker-1, phase: Releasing, node: n1, gpus: [3]}\n"
    "  - {name: llama-worker-2, phase: Succeeded}\n"
    "  - {name: llama-share-0, phase: Running, node: n1, gpus: [1], gpuShare: 250}\n"
    "  - {name: llama-slice-0, phase: Pending}\n";

static void test_job(void **state)
{
	sc_manifest_set_t *s = set_with(cluster);
	sc_manifest_error_t err;
	sc_snapshot_t snap;
	assert_int_equal(sc_manifest_add_text(s, "jobs.yaml", job_text, strlen(job_text), &err), 2);
	assert_int_equal(sc_manifest_snapshot(s, 0, &snap, &err), 0);
	assert_int_equal(snap.njobs, 1);
	assert_int_equal(snap.nclasses, 1);
	assert_int_equal(snap.classes[0].value, 150);
	assert_int_equal(snap.classes[0].preemptible, 0);
	const sc_job_spec_t *j = &snap.jobs[0];
	assert_string_equal(j->queue, "team-a");
	assert_string_equal(j->priority_class, "high");
	assert_int_equal(j->preemptible, 1);
	assert_int_equal(j->min_member, 2);
	assert_int_equal(j->placement, SC_PLACE_SPREAD);
	assert_int_equal(j->spread_factor, 2);
	assert_string_equal(j->topo_required, "rack");
	assert_string_equal(j->topo_preferred, "zone");
	assert_int_equal(j->expected_runtime, 7200);
	assert_int_equal(j->staleness_grace, 90);
	assert_int_equal(j->created, 1795942800LL);
	assert_int_equal(j->stale_since, 1795946700LL);
	assert_false(j->serving);
	assert_int_equal(j->ntasks, 4);
	const sc_task_spec_t *t = &j->tasks[0];
	assert_string_equal(t->name, "worker");
	assert_int_equal(t->replicas, 3);
	assert_int_equal(t->req.cpu_milli, 8000);
	assert_int_equal(t->req.memory, 64LL << 30);
	assert_int_equal(t->req.gpus, 1);
	assert_int_equal(t->ngpu_models, 2);
	assert_int_equal(t->nselector, 1);
	assert_int_equal(j->tasks[1].replicas, 1);
	assert_int_equal(j->tasks[1].req.gpu_milli, 250);
	assert_int_equal(j->tasks[2].req.gpu_memory, 20LL << 30);
	assert_string_equal(j->tasks[3].req.mig, "1g.10gb");
	assert_int_equal(j->npods, 5);
	assert_int_equal(j->pods[0].phase, SC_POD_RUNNING);
	assert_int_equal(j->pods[0].started_at, 1795946400LL);
	assert_int_equal(j->pods[1].phase, SC_POD_RELEASING);
	assert_int_equal(j->pods[1].gpus[0], 3);
	assert_int_equal(j->pods[2].phase, SC_POD_SUCCEEDED);
	assert_int_equal(j->pods[3].gpu_milli, 250);
	assert_int_equal(j->pods[4].phase, SC_POD_PENDING);
	sc_manifest_set_free(s);
}

static void test_deployment_config_topology(void **state)
{
	const char *text =
	    "apiVersion: starcloud.dev/v1\nkind: Deployment\n"
	    "metadata: {name: chat}\n"
	    "spec:\n  queue: team-a\n  model: llama-3-8b\n  version: '2'\n"
	    "  replicas: 4\n  priorityClass: inference\n"
	    "  template: {command: [serve], resources: {gpu: 1}, probes: "
	    "{readiness: {http: {path: /ready, port: 8080}}}}\n"
	    "  rollout: {steps: [10, 50, 100], analysisWindow: 60s, maxErrorRate: 0.05}\n"
	    "---\n"
	    "apiVersion: starcloud.dev/v1\nkind: Deployment\nmetadata: {name: dis}\n"
	    "spec:\n  queue: team-a\n  model: m\n  version: 3\n"
	    "  template: {resources: {gpu: 1}}\n"
	    "  disaggregation:\n    prefill: {replicas: 2}\n"
	    "    decode: {replicas: 4, template: {resources: {gpu: 2}}}\n"
	    "---\n"
	    "apiVersion: starcloud.dev/v1\nkind: SchedulerConfig\nmetadata: {name: default}\n"
	    "spec:\n  actions: [reclaim, allocate]\n"
	    "  placement: {gpu: spread, cpu: binpack, device: spread}\n"
	    "  packThreshold: 0.5\n  spreadFactor: {serving: 3}\n"
	    "  reclaim: {tolerance: 0.1}\n  preempt: {utilizationThreshold: 0.9}\n"
	    "  consolidation: {maxPreemptees: 4}\n  reservations: {after: 1h}\n"
	    "---\n"
	    "apiVersion: starcloud.dev/v1\nkind: Topology\nmetadata: {name: default}\n"
	    "spec: {levels: [zone, rack]}\n";
	sc_manifest_set_t *s = set_with(cluster);
	sc_manifest_error_t err;
	sc_snapshot_t snap;
	char buf[1400];
	if (sc_manifest_add_text(s, "d.yaml", text, strlen(text), &err) != 4)
		fail_msg("%s", sc_manifest_error_format(&err, buf, sizeof(buf)));
	assert_int_equal(sc_manifest_snapshot(s, 0, &snap, &err), 0);
	const sc_job_spec_t *d = &snap.jobs[0];
	assert_true(d->serving);
	assert_int_equal(d->ntasks, 1);
	assert_string_equal(d->tasks[0].name, "main");
	assert_int_equal(d->tasks[0].replicas, 4);
	assert_int_equal(d->min_member, 1);
	const sc_job_spec_t *x = &snap.jobs[1];
	assert_int_equal(x->ntasks, 2);
	assert_string_equal(x->tasks[0].name, "prefill");
	assert_int_equal(x->tasks[0].req.gpus, 1); /* the shared template */
	assert_int_equal(x->tasks[1].replicas, 4);
	assert_int_equal(x->tasks[1].req.gpus, 2);
	const sc_config_t *c = &snap.config;
	assert_int_equal(c->nactions, 2);
	assert_int_equal(c->actions[0], SC_ACT_RECLAIM);
	assert_int_equal(c->gpu_placement, SC_PLACE_SPREAD);
	assert_int_equal(c->cpu_placement, SC_PLACE_BINPACK);
	assert_int_equal(c->device_placement, SC_PLACE_SPREAD);
	assert_true(c->pack_threshold == 0.5 && c->reclaim_tolerance == 0.1);
	assert_true(c->preempt_util_threshold == 0.9);
	assert_int_equal(c->serving_spread, 3);
	assert_int_equal(c->consolidation_max, 4);
	assert_int_equal(c->reservation_after, 3600);
	assert_int_equal(c->ntopology_levels, 2);
	assert_string_equal(c->topology_levels[1], "rack");
	sc_manifest_set_free(s);
}

#define JOB(spec) "apiVersion: starcloud.dev/v1\nkind: Job\nmetadata: {name: j}\nspec:\n" spec
#define TASK(res) JOB("  queue: team-a\n  tasks:\n  - name: w\n    resources: " res "\n")

/* A running pod as the agent reports it, with nothing to say (message ""):
 * the job decodes and its pod holds its GPU. Refused before, the job left
 * the scheduler's snapshot and its GPUs were given again (issue 23). */
static void test_pod_report_empty_message(void **state)
{
	sc_manifest_set_t *s = set_with(cluster);
	const char *job =
	    JOB("  queue: team-a\n  tasks: [{name: w, resources: {gpu: 1}}]\n"
	        "status:\n  pods: [{name: j-w-0, phase: Running, node: n1, "
	        "gpus: [3], ready: true, restarts: 0, message: '', generation: 4}]\n");
	sc_manifest_error_t err;
	char buf[1400];
	if (sc_manifest_add_text(s, "j.yaml", job, strlen(job), &err) < 0)
		fail_msg("%s", sc_manifest_error_format(&err, buf, sizeof(buf)));
	sc_snapshot_t snap;
	assert_int_equal(sc_manifest_snapshot(s, 1000, &snap, NULL), 0);
	assert_int_equal(snap.njobs, 1);
	assert_int_equal(snap.jobs[0].npods, 1);
	assert_int_equal(snap.jobs[0].pods[0].ngpus, 1);
	assert_int_equal(snap.jobs[0].pods[0].gpus[0], 3);
	sc_manifest_set_free(s);
	/* A message that is not a string is still refused. */
	expect_bad(JOB("  queue: team-a\n  tasks: [{name: w}]\nstatus:\n  pods: [{name: j-w-0, "
	               "phase: Running, node: n1, message: 7}]\n"),
	           SC_EINVAL, "status.pods[0].message", "string");
}

/* A move's old place (server/sched_write.c): read, and checked. */
static void test_pod_from(void **state)
{
	sc_manifest_set_t *s = set_with(cluster);
	const char *job = JOB("  queue: team-a\n  tasks: [{name: w, resources: {gpu: 1}}]\n"
	                      "status:\n  pods: [{name: j-w-0, phase: Pipelined, node: n1, "
	                      "gpus: [3], from: {node: n2, seen: 7}}]\n");
	sc_manifest_error_t err;
	char buf[1400];
	if (sc_manifest_add_text(s, "j.yaml", job, strlen(job), &err) < 0)
		fail_msg("%s", sc_manifest_error_format(&err, buf, sizeof(buf)));
	sc_manifest_set_free(s);
#define FROM(f)                                                                                    \
	JOB("  queue: team-a\n  tasks: [{name: w}]\nstatus:\n  pods: [{name: j-w-0, "              \
	    "phase: Pipelined, node: n1, from: " f "}]\n")
	expect_bad(FROM("n2"), SC_EINVAL, "status.pods[0].from", "object");
	expect_bad(FROM("{seen: 1}"), SC_EINVAL, "status.pods[0].from.node", "required");
	expect_bad(FROM("{node: n2, at: 1}"), SC_EINVAL, "status.pods[0].from.at", "unknown field");
	expect_bad(FROM("{node: n2, seen: -1}"), SC_EINVAL, "status.pods[0].from.seen", "");
	expect_bad(FROM("{node: n2, seen: x}"), SC_EINVAL, "status.pods[0].from.seen", "");
#undef FROM
}

static void test_bad_objects(void **state)
{
	expect_bad("apiVersion: starcloud.dev/v1\nkind: CronJob\nmetadata: {name: x}\n", SC_EINVAL,
	           "kind", "unknown kind");
	expect_bad("apiVersion: v9\nkind: Job\nmetadata: {name: x}\n", SC_EINVAL, "apiVersion",
	           "unsupported apiVersion");
	expect_bad("kind: Job\nmetadata: {name: x}\n", SC_EINVAL, "apiVersion", "required");
	expect_bad("- 1\n", SC_EINVAL, "", "expected an object");
	expect_bad(TASK("{gpu: 1, gpus: 1}"), SC_EINVAL, "spec.tasks[0].resources.gpus",
	           "unknown field");
	expect_bad(TASK("{gpu: -1}"), SC_EINVAL, "spec.tasks[0].resources.gpu", "0..");
	expect_bad(TASK("{gpu: 1.5}"), SC_EINVAL, "spec.tasks[0].resources.gpu", "gpuFraction");
	expect_bad(TASK("{gpu: '2'}"), SC_EINVAL, "spec.tasks[0].resources.gpu", "got a string");
	expect_bad(TASK("{gpu: 1, gpuFraction: 0.5}"), SC_EINVAL,
	           "spec.tasks[0].resources.gpuFraction", "only one of");
	expect_bad(TASK("{gpuFraction: 1.0}"), SC_EINVAL, "spec.tasks[0].resources.gpuFraction",
	           "strictly between");
	expect_bad(TASK("{gpuMemory: 0}"), SC_EINVAL, "spec.tasks[0].resources.gpuMemory",
	           "positive");
	expect_bad(TASK("{mig: 10gb}"), SC_EINVAL, "spec.tasks[0].resources.mig", "MIG profile");
	expect_bad(TASK("{cpu: -2}"), SC_EINVAL, "spec.tasks[0].resources.cpu", "out of range");
	expect_bad(TASK("{memory: 16GB}"), SC_EINVAL, "spec.tasks[0].resources.memory",
	           "memory quantity");
	expect_bad(TASK("{memory: 99999999Ei}"), SC_EINVAL, "spec.tasks[0].resources.memory",
	           "out of range");
	expect_bad(JOB("  tasks: [{name: w}]\n"), SC_EINVAL, "spec.queue", "required");
	expect_bad(JOB("  queue: team-a\n  tasks: []\n"), SC_EINVAL, "spec.tasks", "1 to 64");
	expect_bad(JOB("  queue: team-a\n  tasks: [{name: w}, {name: w}]\n"), SC_EINVAL,
	           "spec.tasks[1].name", "used twice");
	expect_bad(JOB("  queue: team-a\n  minMember: 3\n  tasks: [{replicas: 2}]\n"), SC_EINVAL,
	           "spec.minMember", "more than");
	expect_bad(JOB("  queue: team-a\n  placement: pack\n  tasks: [{}]\n"), SC_EINVAL,
	           "spec.placement", "expected one of");
	expect_bad(JOB("  queue: team-a\n  expectedRuntime: soon\n  tasks: [{}]\n"), SC_EINVAL,
	           "spec.expectedRuntime", "duration");
	expect_bad(JOB("  queue: team-a\n  topology: {}\n  tasks: [{}]\n"), SC_EINVAL,
	           "spec.topology", "required, preferred");
	expect_bad(JOB("  queue: team-a\n  tasks: [{probes: {liveness: {periodSeconds: 5}}}]\n"),
	           SC_EINVAL, "spec.tasks[0].probes.liveness", "one of http");
	expect_bad(JOB("  queue: team-a\n  tasks: [{probes: {liveness: {http: {port: 0}}}}]\n"),
	           SC_EINVAL, "spec.tasks[0].probes.liveness.http.port", "1..65535");
	expect_bad(JOB("  queue: team-a\n  tasks: [{name: w}]\nstatus:\n  pods: [{name: j-w-0, "
	               "phase: Running}]\n"),
	           SC_EINVAL, "status.pods[0].node", "required");
	expect_bad(JOB("  queue: team-a\n  tasks: [{name: w}]\nstatus:\n  pods: [{name: j-x-0, "
	               "phase: Pending}]\n"),
	           SC_EINVAL, "status.pods[0].name", "not a pod of this job");
	expect_bad(JOB("  queue: team-a\n  tasks: [{name: w}]\nstatus:\n  pods: [{name: j-w-0, "
	               "phase: Lost}]\n"),
	           SC_EINVAL, "status.pods[0].phase", "Running");
	expect_bad(JOB("  queue: team-a\n  tasks: [{name: w}]\nstatus:\n  staleSince: noon\n"),
	           SC_EINVAL, "status.staleSince", "RFC 3339");
	expect_bad("apiVersion: starcloud.dev/v1\nkind: Node\nmetadata: {name: 'a b'}\nspec: "
	           "{cpu: 1, memory: 1}\n",
	           SC_EINVAL, "metadata.name", "not a valid name");
	expect_bad("apiVersion: starcloud.dev/v1\nkind: Node\nmetadata: {name: n2}\nspec: "
	           "{cpu: 1, memory: 1, gpus: {count: 17, model: x}}\n",
	           SC_EINVAL, "spec.gpus.count", "0..16");
	expect_bad("apiVersion: starcloud.dev/v1\nkind: Node\nmetadata: {name: n2}\nspec: "
	           "{cpu: 1, memory: 1, gpus: {count: 2, model: x, mig: {layout: [[1g.5gb]]}}}\n",
	           SC_EINVAL, "spec.gpus.mig.layout", "one list of instances per device");
	expect_bad("apiVersion: starcloud.dev/v1\nkind: Queue\nmetadata: {name: q}\nspec: "
	           "{resources: {gpu: {quota: -2}}}\n",
	           SC_EINVAL, "spec.resources.gpu.quota", "-1");
	expect_bad("apiVersion: starcloud.dev/v1\nkind: PriorityClass\nmetadata: {name: p}\n"
	           "spec: {value: high}\n",
	           SC_EINVAL, "spec.value", "whole number");
	expect_bad("apiVersion: starcloud.dev/v1\nkind: SchedulerConfig\nmetadata: {name: c}\n"
	           "spec: {actions: [allocate, dance]}\n",
	           SC_EINVAL, "spec.actions[1]", "unknown action");
	expect_bad("apiVersion: starcloud.dev/v1\nkind: Topology\nmetadata: {name: t}\n"
	           "spec: {levels: [rack, rack]}\n",
	           SC_EINVAL, "spec.levels[1]", "twice");
	expect_bad("apiVersion: starcloud.dev/v1\nkind: Deployment\nmetadata: {name: d}\n"
	           "spec: {queue: team-a, model: m}\n",
	           SC_EINVAL, "spec.template", "required");
	expect_bad("apiVersion: starcloud.dev/v1\nkind: Node\nmetadata: {name: n1}\nspec: "
	           "{cpu: 1, memory: 1}\n",
	           SC_EEXISTS, "metadata.name", "already exists");
}

static void test_all_or_nothing_and_positions(void **state)
{
	/* The first object is fine, the second is not: neither is added. */
	const char *text = "apiVersion: starcloud.dev/v1\nkind: Node\nmetadata: {name: ok}\n"
	                   "spec: {cpu: 1, memory: 1}\n---\n" TASK("{gpu: x}");
	sc_manifest_set_t *s = set_with(cluster);
	sc_manifest_error_t err;
	char buf[1400];
	assert_int_equal(sc_manifest_add_text(s, "f.yaml", text, strlen(text), &err), SC_EINVAL);
	assert_int_equal(sc_manifest_count(s, "Node"), 1);
	assert_int_equal(err.line, 13);
	assert_int_equal(err.col, 22);
	assert_string_equal(sc_manifest_error_format(&err, buf, sizeof(buf)),
	                    "f.yaml:13:22: Job j: spec.tasks[0].resources.gpu: expected a whole "
	                    "number, got a string");
	/* Malformed text. */
	assert_int_equal(sc_manifest_add_text(s, "m.yaml", "a: [", 4, &err), SC_EPARSE);
	assert_true(err.line >= 1);
	assert_string_equal(err.file, "m.yaml");
	/* An empty text is valid and adds nothing. */
	assert_int_equal(sc_manifest_add_text(s, "e.yaml", "", 0, &err), 0);
	/* A JSON array of objects. */
	const char *arr =
	    "[{\"apiVersion\": \"starcloud.dev/v1\", \"kind\": \"Node\", "
	    "\"metadata\": {\"name\": \"j1\"}, \"spec\": {\"cpu\": 1, \"memory\": 1}},\n"
	    " {\"apiVersion\": \"starcloud.dev/v1\", \"kind\": \"Node\", "
	    "\"metadata\": {\"name\": \"j2\"}, \"spec\": {\"cpu\": -1, \"memory\": 1}}]";
	assert_int_equal(sc_manifest_add_text(s, "a.json", arr, strlen(arr), &err), SC_EINVAL);
	assert_string_equal(err.path, "spec.cpu");
	assert_int_equal(err.line, 2);
	assert_int_equal(sc_manifest_count(s, "Node"), 1);
	sc_manifest_set_free(s);
}

static void test_references(void **state)
{
	sc_manifest_set_t *s = set_with(cluster);
	sc_manifest_error_t err;
	sc_snapshot_t snap;
	const char *t1 = JOB("  queue: nope\n  tasks: [{}]\n");
	assert_int_equal(sc_manifest_add_text(s, "j.yaml", t1, strlen(t1), &err), 1);
	assert_int_equal(sc_manifest_snapshot(s, 0, &snap, &err), SC_ENOTFOUND);
	assert_string_equal(err.path, "spec.queue");
	assert_string_equal(err.file, "j.yaml");
	assert_int_equal(err.line, 5);
	sc_manifest_set_free(s);

	s = set_with(cluster);
	const char *t2 = JOB("  queue: research\n  tasks: [{}]\n");
	sc_manifest_add_text(s, "j.yaml", t2, strlen(t2), &err);
	assert_int_equal(sc_manifest_snapshot(s, 0, &snap, &err), SC_EINVAL);
	assert_non_null(strstr(err.msg, "leaf"));
	sc_manifest_set_free(s);

	s = set_with(cluster);
	const char *t3 = JOB("  queue: team-a\n  priorityClass: vip\n  tasks: [{}]\n");
	sc_manifest_add_text(s, "j.yaml", t3, strlen(t3), &err);
	assert_int_equal(sc_manifest_snapshot(s, 0, &snap, &err), SC_ENOTFOUND);
	assert_string_equal(err.path, "spec.priorityClass");
	sc_manifest_set_free(s);

	s = set_with("apiVersion: starcloud.dev/v1\nkind: Queue\nmetadata: {name: q}\n"
	             "spec: {parentQueue: missing}\n");
	assert_int_equal(sc_manifest_snapshot(s, 0, &snap, &err), SC_ENOTFOUND);
	assert_string_equal(err.path, "spec.parentQueue");
	sc_manifest_set_free(s);
}

static void test_add_json(void **state)
{
	sc_manifest_set_t *s = sc_manifest_set_new();
	sc_manifest_error_t err;
	json_error_t jerr;
	/* A node without a GPU model is accepted (KAI's nodes carry none);
	 * an empty model name is refused, naming the field. */
	json_t *o = json_loads("{\"apiVersion\": \"starcloud.dev/v1\", \"kind\": \"Node\", "
	                       "\"metadata\": {\"name\": \"x\"}, \"spec\": {\"cpu\": \"500m\", "
	                       "\"memory\": \"1Gi\", \"gpus\": {\"count\": 2, \"model\": \"\"}}}",
	                       0, &jerr);
	assert_int_equal(sc_manifest_add_json(s, o, &err), SC_EINVAL);
	assert_string_equal(err.path, "spec.gpus.model");
	assert_int_equal(err.line, 0);
	json_t *nomodel = json_deep_copy(o);
	json_object_del(json_object_get(json_object_get(nomodel, "spec"), "gpus"), "model");
	json_object_set_new(json_object_get(nomodel, "metadata"), "name", json_string("y"));
	assert_int_equal(sc_manifest_add_json(s, nomodel, &err), 1);
	json_decref(nomodel);
	json_object_set_new(json_object_get(json_object_get(o, "spec"), "gpus"), "model",
	                    json_string("L4"));
	assert_int_equal(sc_manifest_add_json(s, o, &err), 1);
	json_t *num = json_integer(1);
	assert_int_equal(sc_manifest_add_json(s, num, &err), SC_EINVAL);
	json_decref(num);
	json_decref(o);
	sc_manifest_set_free(s);
	sc_manifest_set_free(NULL);
}

/* Objects decoded once, each in a set of its own, assemble into as many
 * snapshots as needed (the server's scheduling loop); a name clash is
 * refused and changes nothing. */
static void test_add_set(void **state)
{
	const char *job =
	    "apiVersion: starcloud.dev/v1\n"
	    "kind: Job\n"
	    "metadata: {name: j1}\n"
	    "spec:\n"
	    "  queue: team-a\n"
	    "  tasks: [{name: w, replicas: 2, resources: {cpu: 1, memory: 1Gi, gpu: 1}}]\n";
	sc_manifest_set_t *base = set_with(cluster), *one = set_with(job);
	sc_manifest_error_t err;
	sc_snapshot_t snap;
	for (int round = 0; round < 3; round++) {
		sc_manifest_set_t *s = sc_manifest_set_new();
		assert_int_equal(sc_manifest_add_set(s, base, &err), 3);
		assert_int_equal(sc_manifest_add_set(s, one, &err), 1);
		assert_int_equal(sc_manifest_add_set(s, one, &err), SC_EEXISTS);
		assert_string_equal(err.object, "Job j1");
		assert_int_equal(sc_manifest_snapshot(s, 100, &snap, &err), 0);
		assert_int_equal(snap.nnodes, 1);
		assert_int_equal(snap.nqueues, 2);
		assert_int_equal(snap.njobs, 1);
		assert_string_equal(snap.jobs[0].name, "j1");
		assert_int_equal(snap.jobs[0].tasks[0].replicas, 2);
		sc_manifest_set_free(s);
	}
	/* The sources are untouched and still usable on their own. */
	assert_int_equal(sc_manifest_snapshot(one, 100, &snap, &err), SC_ENOTFOUND);
	assert_int_equal(sc_manifest_count(base, "Node"), 1);
	sc_manifest_set_free(one);
	sc_manifest_set_free(base);
}

static void test_decisions_json(void **state)
{
	sc_job_spec_t jobs[2] = {{.name = "a"}, {.name = "b"}};
	sc_snapshot_t snap = {.jobs = jobs, .njobs = 2};
	int gpus[2] = {0, 3};
	sc_binding_t b[2] = {{.job = 0, .pod = "a-main-0", .node = "n1", .gpus = gpus, .ngpus = 2},
	                     {.job = 1,
	                      .pod = "b-main-0",
	                      .node = "n2",
	                      .gpus = gpus,
	                      .ngpus = 1,
	                      .gpu_milli = 500,
	                      .pipelined = true}};
	sc_eviction_t e = {.job = 1,
	                   .pod = "b-x-0",
	                   .node = "n2",
	                   .action = SC_ACT_CONSOLIDATE,
	                   .by = "a",
	                   .reason = "room",
	                   .to = "n3"};
	sc_pending_t p = {.job = 1, .reason = "gang"};
	sc_queue_report_t q = {.name = "t",
	                       .parent = "root",
	                       .leaf = true,
	                       .fair_share = {70, 1500, 1024},
	                       .limit = {-1, -1, -1}};
	sc_decisions_t d = {.bindings = b,
	                    .nbindings = 2,
	                    .evictions = &e,
	                    .nevictions = 1,
	                    .pending = &p,
	                    .npending = 1,
	                    .queues = &q,
	                    .nqueues = 1};
	json_t *out = sc_decisions_to_json(&snap, &d);
	char *s = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
	assert_string_equal(
	    s, "{\"bindings\":[{\"job\":\"a\",\"pod\":\"a-main-0\",\"node\":\"n1\",\"gpus\":[0,3],"
	       "\"gpuShare\":null,\"mig\":null},{\"job\":\"b\",\"pod\":\"b-main-0\",\"node\":"
	       "\"n2\",\"gpus\":[0],\"gpuShare\":500,\"mig\":null,\"pipelined\":true}],"
	       "\"evictions\":[{\"job\":\"b\",\"pod\":\"b-x-0\",\"node\":\"n2\",\"action\":"
	       "\"consolidate\",\"by\":\"a\",\"reason\":\"room\",\"to\":\"n3\"}],\"pending\":"
	       "[{\"job\":\"b\",\"reason\":\"gang\"}],\"queues\":[{\"name\":\"t\",\"parent\":"
	       "\"root\",\"leaf\":true,\"fairShare\":{\"gpu\":70,\"cpu\":1.5,\"memory\":1024},"
	       "\"allocated\":{\"gpu\":0,\"cpu\":0,\"memory\":0},\"requested\":{\"gpu\":0,"
	       "\"cpu\":0,\"memory\":0},\"quota\":{\"gpu\":0,\"cpu\":0,\"memory\":0},\"limit\":"
	       "{\"gpu\":-1,\"cpu\":-1,\"memory\":-1}}]}");
	free(s);
	json_decref(out);
	assert_string_equal(sc_eviction_action_name(SC_ACT_STALE_GANG), "stale-gang");
	assert_string_equal(sc_eviction_action_name(SC_ACT_RECLAIM), "reclaim");
}

/* The run-time settings the server and agents read back: the decoder's
 * defaults, per kind, and what a value the decoder refuses reads as. */
static void test_job_runtime(void **state)
{
	sc_job_runtime_t rt;
	sc_job_runtime("Job", NULL, &rt);
	assert_int_equal(rt.restart_policy, SC_RESTART_ONFAILURE);
	assert_int_equal(rt.gang_restart, 0);
	assert_int_equal(rt.backoff_limit, SC_BACKOFF_LIMIT_DEFAULT);
	assert_int_equal(rt.grace_seconds, -1);
	sc_job_runtime("Deployment", NULL, &rt);
	assert_int_equal(rt.restart_policy, SC_RESTART_ALWAYS);
	json_t *spec =
	    json_pack("{s:s,s:s,s:i,s:i}", "restartPolicy", "Never", "gangPolicy", "RestartGang",
	              "backoffLimit", 2, "terminationGracePeriodSeconds", 5);
	sc_job_runtime("Job", spec, &rt);
	assert_int_equal(rt.restart_policy, SC_RESTART_NEVER);
	assert_int_equal(rt.gang_restart, 1);
	assert_int_equal(rt.backoff_limit, 2);
	assert_int_equal(rt.grace_seconds, 5);
	json_decref(spec);
	spec = json_pack("{s:s,s:i,s:s}", "restartPolicy", "Sometimes", "backoffLimit", 5000,
	                 "terminationGracePeriodSeconds", "5");
	sc_job_runtime("Job", spec, &rt);
	assert_int_equal(rt.restart_policy, SC_RESTART_ONFAILURE);
	assert_int_equal(rt.backoff_limit, SC_BACKOFF_LIMIT_DEFAULT);
	assert_int_equal(rt.grace_seconds, -1);
	json_decref(spec);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_node_and_queues),
	    cmocka_unit_test(test_kai_queue),
	    cmocka_unit_test(test_job),
	    cmocka_unit_test(test_deployment_config_topology),
	    cmocka_unit_test(test_bad_objects),
	    cmocka_unit_test(test_pod_report_empty_message),
	    cmocka_unit_test(test_pod_from),
	    cmocka_unit_test(test_all_or_nothing_and_positions),
	    cmocka_unit_test(test_references),
	    cmocka_unit_test(test_add_json),
	    cmocka_unit_test(test_add_set),
	    cmocka_unit_test(test_decisions_json),
	    cmocka_unit_test(test_job_runtime),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
