/* Kubernetes mode without a server: API objects (as the API server returns
 * them) decoded into the cache, turned into the core's snapshot, scheduled,
 * and the decisions mapped back to pods. Also the kubeconfig reader and the
 * leader-election state machine, which are pure too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <unistd.h>

#include "k8s/kcache.h"
#include "k8s/kconfig.h"
#include "k8s/klease.h"
#include "k8s/kmap.h"
#include "k8s/kobj.h"
#include "k8s/kworld.h"
#include "starcloud/error.h"

/* ---- helpers ------------------------------------------------------------ */

typedef struct world {
	sc_kcache_t c;
	sc_kmap_t local;
	sc_config_t config;
	sc_arena_t *a;
	sc_kworld_t w;
	sc_decisions_t *d;
} world_t;

static void world_init(world_t *t)
{
	memset(t, 0, sizeof(*t));
	sc_kcache_init(&t->c);
	sc_kmap_init(&t->local);
	sc_config_default(&t->config);
	t->a = sc_arena_new(0);
}

static void world_free(world_t *t)
{
	sc_decisions_free(t->d);
	sc_kworld_free(&t->w);
	sc_kcache_free(&t->c);
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&t->local, &it);)
		sc_klocal_free(it.val);
	sc_kmap_free(&t->local);
	sc_arena_free(t->a);
}

static void add(world_t *t, int kind, const char *fmt, ...)
{
	char text[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	json_error_t je;
	json_t *o = json_loads(text, 0, &je);
	if (!o)
		fail_msg("bad test JSON: %s: %s", je.text, text);
	assert_int_equal(sc_kcache_apply(&t->c, kind, false, o), 1);
	json_decref(o);
}

static void node(world_t *t, const char *name, int gpus, const char *extra_labels)
{
	add(t, SC_KK_NODE,
	    "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"kubernetes.io/hostname\":\"%s\"%s}},"
	    "\"status\":{\"allocatable\":{\"cpu\":\"64\",\"memory\":\"256Gi\","
	    "\"nvidia.com/"
	    "gpu\":\"%d\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
	    name, name, extra_labels ? extra_labels : "", gpus);
}

static void queue(world_t *t, const char *name, const char *spec)
{
	add(t, SC_KK_QUEUE,
	    "{\"apiVersion\":\"scheduling.run.ai/v2\",\"kind\":\"Queue\",\"metadata\":{\"name\":"
	    "\"%s\",\"uid\":\"u\",\"managedFields\":[{}]},\"spec\":%s,\"status\":{}}",
	    name, spec);
}

/* A pod of ours: extra_md goes into metadata, extra_spec into spec. */
static void pod(world_t *t, const char *name, int gpus, const char *node_name, const char *extra_md,
                const char *extra_spec)
{
	char nn[128] = "";
	if (node_name)
		snprintf(nn, sizeof(nn), "\"nodeName\":\"%s\",", node_name);
	add(t, SC_KK_POD,
	    "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"uid-%s\","
	    "\"creationTimestamp\":\"2026-01-01T00:00:00Z\"%s},"
	    "\"spec\":{%s\"schedulerName\":\"starcloud\",\"containers\":[{\"name\":\"c\","
	    "\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\",\"nvidia.com/gpu\":"
	    "\"%d\"}}}]%s},\"status\":{\"phase\":\"%s\"}}",
	    name, name, extra_md ? extra_md : "", nn, gpus, extra_spec ? extra_spec : "",
	    node_name ? "Running" : "Pending");
}

static void schedule(world_t *t)
{
	char msg[512] = "";
	sc_kworld_opts_t o = {.scheduler = "starcloud",
	                      .default_queue = "default",
	                      .config = &t->config,
	                      .now = 1800000000};
	sc_decisions_free(t->d);
	t->d = NULL;
	sc_kworld_free(&t->w);
	sc_arena_reset(t->a);
	assert_int_equal(sc_kworld_build(t->a, &t->c, &t->local, &o, &t->w), 0);
	int rc = sc_schedule(&t->w.snap, &t->d, msg, sizeof(msg));
	if (rc != 0)
		fail_msg("sc_schedule: %s: %s", sc_strerror(rc), msg);
}

/* The pod bound to node, by pod name ("ns/name"), or NULL. */
static const char *bound_to(world_t *t, const char *key)
{
	for (size_t i = 0; i < t->d->nbindings; i++) {
		sc_kpod_t *p = sc_kworld_pod(&t->w, t->d->bindings[i].pod);
		assert_non_null(p);
		if (strcmp(p->key, key) == 0)
			return t->d->bindings[i].node;
	}
	return NULL;
}

static const char *held_reason(world_t *t, const char *key)
{
	for (size_t i = 0; i < t->w.nheld; i++)
		if (strcmp(t->w.held[i].pod->key, key) == 0)
			return t->w.held[i].reason;
	return NULL;
}

static const char *pending_reason(world_t *t, const char *key)
{
	for (size_t i = 0; i < t->d->npending; i++) {
		const sc_pending_t *p = &t->d->pending[i];
		for (size_t j = t->w.first[p->job]; j < t->w.first[p->job + 1]; j++)
			if (strcmp(t->w.pods[j]->key, key) == 0)
				return p->reason;
	}
	return NULL;
}

/* ---- tests -------------------------------------------------------------- */

static void test_lone_pod_binds(void **state)
{
	world_t t;
	world_init(&t);
	node(&t, "n1", 8, NULL);
	pod(&t, "p", 2, NULL, NULL, NULL);
	schedule(&t);
	assert_int_equal(t.d->nbindings, 1);
	assert_string_equal(bound_to(&t, "ns/p"), "n1");
	assert_int_equal(t.d->bindings[0].ngpus, 2);
	world_free(&t);
}

static void test_gang_all_or_nothing(void **state)
{
	world_t t;
	world_init(&t);
	node(&t, "n1", 2, NULL);
	node(&t, "n2", 1, NULL);
	add(&t, SC_KK_GROUP,
	    "{\"metadata\":{\"name\":\"g\",\"namespace\":\"ns\"},\"spec\":{\"minMember\":4}}");
	for (int i = 0; i < 4; i++) {
		char name[16];
		snprintf(name, sizeof(name), "g-%d", i);
		pod(&t, name, 1, NULL, ",\"annotations\":{\"pod-group-name\":\"g\"}", NULL);
	}
	schedule(&t);
	assert_int_equal(t.d->nbindings, 0);
	assert_non_null(strstr(pending_reason(&t, "ns/g-0"), "gang needs 4 pods, only 3 fit"));
	/* One task of four replicas: the pods share a shape. */
	assert_int_equal(t.w.snap.njobs, 1);
	assert_int_equal(t.w.snap.jobs[0].ntasks, 1);
	node(&t, "n3", 1, NULL);
	schedule(&t);
	assert_int_equal(t.d->nbindings, 4);
	world_free(&t);
}

static void test_gang_topology_from_the_pod_group(void **state)
{
	world_t t;
	world_init(&t);
	node(&t, "n1", 4, ",\"rack\":\"a\"");
	node(&t, "n2", 4, ",\"rack\":\"b\"");
	node(&t, "n3", 8, ",\"rack\":\"b\"");
	add(&t, SC_KK_GROUP,
	    "{\"metadata\":{\"name\":\"g\",\"namespace\":\"ns\"},\"spec\":{\"minMember\":2,"
	    "\"topologyConstraint\":{\"requiredTopologyLevel\":\"rack\"}}}");
	pod(&t, "g-0", 4, NULL, ",\"annotations\":{\"pod-group-name\":\"g\"}", NULL);
	pod(&t, "g-1", 4, NULL, ",\"annotations\":{\"pod-group-name\":\"g\"}", NULL);
	schedule(&t);
	/* Bin-packing alone would take n1 and n2 (the fullest fits, ties to
	 * the first node), across two racks; the constraint keeps the gang in
	 * rack b. */
	assert_int_equal(t.d->nbindings, 2);
	assert_string_not_equal(bound_to(&t, "ns/g-0"), "n1");
	assert_string_not_equal(bound_to(&t, "ns/g-1"), "n1");
	/* Without the constraint it does split. */
	json_t *o = json_loads("{\"metadata\":{\"name\":\"g\",\"namespace\":\"ns\"},"
	                       "\"spec\":{\"minMember\":2}}",
	                       0, NULL);
	assert_int_equal(sc_kcache_apply(&t.c, SC_KK_GROUP, false, o), 1);
	json_decref(o);
	schedule(&t);
	assert_int_equal(t.d->nbindings, 2);
	assert_true(strcmp(bound_to(&t, "ns/g-0"), "n1") == 0 ||
	            strcmp(bound_to(&t, "ns/g-1"), "n1") == 0);
	world_free(&t);
}

/* A PodGroup or Queue whose status alone changed (what kstatus.c writes
 * back) is stored but counted as nothing to schedule again for (2); a
 * change of spec, labels or uid is a change (1). */
static int apply_text(sc_kcache_t *c, int kind, const char *text)
{
	json_t *o = json_loads(text, 0, NULL);
	assert_non_null(o);
	int rc = sc_kcache_apply(c, kind, false, o);
	json_decref(o);
	return rc;
}

static void test_status_only_changes(void **state)
{
	(void)state;
	sc_kcache_t c;
	sc_kcache_init(&c);
	const char *g1 = "{\"metadata\":{\"name\":\"g\",\"namespace\":\"ns\",\"uid\":\"u1\","
	                 "\"resourceVersion\":\"5\"},\"spec\":{\"minMember\":2}}";
	const char *g2 = "{\"metadata\":{\"name\":\"g\",\"namespace\":\"ns\",\"uid\":\"u1\","
	                 "\"resourceVersion\":\"6\"},\"spec\":{\"minMember\":2},"
	                 "\"status\":{\"phase\":\"Pending\"}}";
	const char *g3 = "{\"metadata\":{\"name\":\"g\",\"namespace\":\"ns\",\"uid\":\"u1\","
	                 "\"resourceVersion\":\"7\"},\"spec\":{\"minMember\":3},"
	                 "\"status\":{\"phase\":\"Pending\"}}";
	const char *g4 = "{\"metadata\":{\"name\":\"g\",\"namespace\":\"ns\",\"uid\":\"u2\","
	                 "\"resourceVersion\":\"8\"},\"spec\":{\"minMember\":3}}";
	assert_int_equal(apply_text(&c, SC_KK_GROUP, g1), 1);
	unsigned long changes = c.changes;
	assert_int_equal(apply_text(&c, SC_KK_GROUP, g2), 2);
	assert_int_equal(c.changes, changes);
	sc_kgroup_t *g = sc_kmap_get(&c.groups, "ns/g");
	assert_string_equal(g->meta.rv, "6");
	assert_string_equal(json_string_value(json_object_get(g->meta.status, "phase")), "Pending");
	assert_int_equal(apply_text(&c, SC_KK_GROUP, g3), 1);
	assert_int_equal(apply_text(&c, SC_KK_GROUP, g4), 1); /* deleted and made again */
	assert_int_equal(apply_text(&c, SC_KK_QUEUE,
	                            "{\"metadata\":{\"name\":\"q\",\"uid\":\"q1\"},\"spec\":{}}"),
	                 1);
	assert_int_equal(apply_text(&c, SC_KK_QUEUE,
	                            "{\"metadata\":{\"name\":\"q\",\"uid\":\"q1\"},\"spec\":{},"
	                            "\"status\":{\"allocated\":{\"cpu\":\"1\"}}}"),
	                 2);
	assert_int_equal(
	    apply_text(&c, SC_KK_QUEUE,
	               "{\"metadata\":{\"name\":\"q\",\"uid\":\"q1\",\"labels\":{\"a\":\"b\"}},"
	               "\"spec\":{}}"),
	    1);
	sc_kcache_free(&c);
}

static void test_parent_queue_holds_no_pods(void **state)
{
	world_t t;
	world_init(&t);
	node(&t, "n1", 8, NULL);
	queue(&t, "dept", "{}");
	queue(&t, "leaf", "{\"parentQueue\":\"dept\"}");
	pod(&t, "p", 1, NULL, ",\"labels\":{\"kai.scheduler/queue\":\"dept\"}", NULL);
	schedule(&t);
	assert_int_equal(t.d->nbindings, 0);
	assert_non_null(strstr(pending_reason(&t, "ns/p"), "parent queue"));
	world_free(&t);
}

static void test_bad_queues_hold_their_pods(void **state)
{
	world_t t;
	world_init(&t);
	node(&t, "n1", 8, NULL);
	queue(&t, "neg", "{\"resources\":{\"gpu\":{\"quota\":-5}}}");
	queue(&t, "orphan", "{\"parentQueue\":\"missing\"}");
	queue(&t, "child", "{\"parentQueue\":\"orphan\"}");
	queue(&t, "loop1", "{\"parentQueue\":\"loop2\"}");
	queue(&t, "loop2", "{\"parentQueue\":\"loop1\"}");
	pod(&t, "a", 1, NULL, ",\"labels\":{\"kai.scheduler/queue\":\"neg\"}", NULL);
	pod(&t, "b", 1, NULL, ",\"labels\":{\"kai.scheduler/queue\":\"child\"}", NULL);
	pod(&t, "c", 1, NULL, ",\"labels\":{\"kai.scheduler/queue\":\"loop1\"}", NULL);
	/* A running pod in a broken queue still holds its GPUs. */
	pod(&t, "d", 7, "n1", ",\"labels\":{\"kai.scheduler/queue\":\"neg\"}", NULL);
	pod(&t, "e", 2, NULL, NULL, NULL);
	schedule(&t);
	assert_non_null(strstr(held_reason(&t, "ns/a"), "spec.resources.gpu.quota"));
	assert_non_null(strstr(held_reason(&t, "ns/b"), "no queue named missing"));
	assert_non_null(strstr(held_reason(&t, "ns/c"), "cycle"));
	assert_null(bound_to(&t, "ns/e")); /* 7 of 8 GPUs are taken */
	assert_int_equal(t.d->nbindings, 0);
	world_free(&t);
}

static void test_bad_annotations(void **state)
{
	static const struct {
		const char *md, *spec, *words;
	} cases[] = {
	    {",\"annotations\":{\"gpu-fraction\":\"x\"}", NULL, "annotation gpu-fraction"},
	    {",\"annotations\":{\"gpu-fraction\":\"0\"}", NULL, "(0, 1]"},
	    {",\"annotations\":{\"gpu-fraction\":\"nan\"}", NULL, "(0, 1]"},
	    {",\"annotations\":{\"gpu-memory\":\"12x\"}", NULL, "annotation gpu-memory"},
	    {",\"annotations\":{\"gpu-fraction\":\"0.5\",\"gpu-memory\":\"100\"}", NULL,
	     "not both"},
	    {NULL,
	     ",\"affinity\":{\"podAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":[{"
	     "}]}}",
	     "spec.affinity"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		world_t t;
		world_init(&t);
		node(&t, "n1", 8, NULL);
		pod(&t, "p", 0, NULL, cases[i].md, cases[i].spec);
		schedule(&t);
		const char *r = held_reason(&t, "ns/p");
		if (!r || !strstr(r, cases[i].words))
			fail_msg("case %zu: %s", i, r ? r : "(not held)");
		assert_int_equal(t.d->nbindings, 0);
		world_free(&t);
	}
}

static void test_shares_pack_onto_one_device(void **state)
{
	world_t t;
	world_init(&t);
	node(&t, "n1", 2, ",\"nvidia.com/gpu.memory\":\"81920\"");
	pod(&t, "a", 0, NULL, ",\"annotations\":{\"gpu-fraction\":\"0.5\"}", NULL);
	pod(&t, "b", 0, NULL, ",\"annotations\":{\"gpu-fraction\":\"0.5\"}", NULL);
	pod(&t, "m", 0, NULL, ",\"annotations\":{\"gpu-memory\":\"40960\"}", NULL);
	schedule(&t);
	assert_int_equal(t.d->nbindings, 3);
	int dev[3];
	for (int i = 0; i < 3; i++) {
		assert_int_equal(t.d->bindings[i].ngpus, 1);
		assert_int_equal(t.d->bindings[i].gpu_milli, 500);
		dev[i] = t.d->bindings[i].gpus[0];
	}
	/* Two halves share a device, the third share takes the other. */
	assert_true(dev[0] == dev[1] || dev[0] == dev[2] || dev[1] == dev[2]);
	world_free(&t);
}

static void test_running_shares_keep_their_device(void **state)
{
	world_t t;
	world_init(&t);
	node(&t, "n1", 2, NULL);
	/* Device 1 holds a half (our annotation); a whole-GPU pod must go to
	 * device 0 and another half to device 1. */
	pod(&t, "half", 0, "n1",
	    ",\"annotations\":{\"gpu-fraction\":\"0.5\",\"starcloud.dev/gpus\":\"1\","
	    "\"starcloud.dev/gpu-share\":\"500\"}",
	    NULL);
	pod(&t, "whole", 1, NULL, NULL, NULL);
	pod(&t, "half2", 0, NULL, ",\"annotations\":{\"gpu-fraction\":\"0.5\"}", NULL);
	schedule(&t);
	assert_int_equal(t.d->nbindings, 2);
	for (size_t i = 0; i < 2; i++) {
		sc_kpod_t *p = sc_kworld_pod(&t.w, t.d->bindings[i].pod);
		assert_int_equal(t.d->bindings[i].gpus[0], strcmp(p->name, "whole") == 0 ? 0 : 1);
	}
	world_free(&t);
}

static void test_foreign_pods_hold_resources_and_are_never_victims(void **state)
{
	world_t t;
	world_init(&t);
	node(&t, "n1", 8, NULL);
	add(&t, SC_KK_POD,
	    "{\"metadata\":{\"name\":\"theirs\",\"namespace\":\"ns\",\"uid\":\"x\"},"
	    "\"spec\":{\"nodeName\":\"n1\",\"schedulerName\":\"default-scheduler\","
	    "\"containers\":[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"6\"}}}]},"
	    "\"status\":{\"phase\":\"Running\"}}");
	add(&t, SC_KK_CLASS, "{\"metadata\":{\"name\":\"top\"},\"value\":100000}");
	pod(&t, "mine", 4, NULL, NULL, ",\"priorityClassName\":\"top\",\"priority\":100000");
	queue(&t, "default", "{\"resources\":{\"gpu\":{\"quota\":8}}}");
	schedule(&t);
	assert_int_equal(t.d->nbindings, 0);
	assert_int_equal(t.d->nevictions, 0);
	assert_int_equal(t.w.nforeign, 1);
	assert_non_null(pending_reason(&t, "ns/mine"));
	world_free(&t);
}

static void test_taints_become_selectors(void **state)
{
	world_t t;
	world_init(&t);
	add(&t, SC_KK_NODE,
	    "{\"metadata\":{\"name\":\"tainted\"},\"spec\":{\"taints\":[{\"key\":\"k\","
	    "\"value\":\"v\",\"effect\":\"NoSchedule\"},{\"key\":\"soft\",\"effect\":"
	    "\"PreferNoSchedule\"}]},\"status\":{\"allocatable\":{\"cpu\":\"8\",\"memory\":"
	    "\"8Gi\",\"nvidia.com/gpu\":\"8\"},\"conditions\":[{\"type\":\"Ready\",\"status\":"
	    "\"True\"}]}}");
	pod(&t, "plain", 1, NULL, NULL, NULL);
	pod(&t, "equal", 1, NULL, NULL,
	    ",\"tolerations\":[{\"key\":\"k\",\"operator\":\"Equal\",\"value\":\"v\"}]");
	pod(&t, "wrongvalue", 1, NULL, NULL,
	    ",\"tolerations\":[{\"key\":\"k\",\"operator\":\"Equal\",\"value\":\"w\"}]");
	pod(&t, "exists", 1, NULL, NULL, ",\"tolerations\":[{\"operator\":\"Exists\"}]");
	pod(&t, "othereffect", 1, NULL, NULL,
	    ",\"tolerations\":[{\"key\":\"k\",\"operator\":\"Exists\",\"effect\":\"NoExecute\"}]");
	schedule(&t);
	assert_null(bound_to(&t, "ns/plain"));
	assert_non_null(bound_to(&t, "ns/equal"));
	assert_null(bound_to(&t, "ns/wrongvalue"));
	assert_non_null(bound_to(&t, "ns/exists"));
	assert_null(bound_to(&t, "ns/othereffect"));
	world_free(&t);
}

static void test_local_state_holds_the_node(void **state)
{
	world_t t;
	world_init(&t);
	node(&t, "n1", 4, NULL);
	pod(&t, "a", 4, NULL, NULL, NULL);
	pod(&t, "b", 4, NULL, NULL, NULL);
	/* A binding of a sent, not yet seen by the watch: b must not take n1. */
	sc_klocal_t *l = calloc(1, sizeof(*l));
	l->key = strdup("ns/a");
	l->uid = strdup("uid-a");
	l->node = strdup("n1");
	l->kind = SC_KL_BINDING;
	l->ngpus = 4;
	for (int i = 0; i < 4; i++)
		l->gpus[i] = i;
	sc_kmap_put(&t.local, l->key, l);
	schedule(&t);
	assert_int_equal(t.d->nbindings, 0);
	/* The same name with another uid (the pod was recreated): not held. */
	free(l->uid);
	l->uid = strdup("old");
	schedule(&t);
	assert_int_equal(t.d->nbindings, 1);
	world_free(&t);
}

static void test_relist_removes_what_was_not_listed(void **state)
{
	world_t t;
	world_init(&t);
	node(&t, "n1", 1, NULL);
	node(&t, "n2", 1, NULL);
	sc_kcache_begin_list(&t.c, SC_KK_NODE);
	node(&t, "n2", 2, NULL);
	assert_int_equal(sc_kcache_end_list(&t.c, SC_KK_NODE), 1);
	assert_null(sc_kmap_get(&t.c.nodes, "n1"));
	sc_knode_t *n = sc_kmap_get(&t.c.nodes, "n2");
	assert_int_equal(n->gpus, 2);
	/* Deleting what is not there changes nothing. */
	json_t *o = json_loads("{\"metadata\":{\"name\":\"zz\"}}", 0, NULL);
	assert_int_equal(sc_kcache_apply(&t.c, SC_KK_NODE, true, o), 0);
	json_decref(o);
	o = json_loads("{\"metadata\":{}}", 0, NULL);
	assert_int_equal(sc_kcache_apply(&t.c, SC_KK_POD, false, o), SC_EPARSE);
	json_decref(o);
	world_free(&t);
}

/* ---- kubeconfig --------------------------------------------------------- */

static int kc(const char *text, sc_kconfig_t *c, char *err)
{
	memset(c, 0, sizeof(*c));
	return sc_kconfig_parse(text, strlen(text), "kc", "/etc", NULL, c, err, 512);
}

static void test_kubeconfig(void **state)
{
	sc_kconfig_t c;
	char err[512];
	/* "hello" in base64 */
	assert_int_equal(kc("current-context: x\n"
	                    "contexts: [{name: x, context: {cluster: k, user: u, namespace: ns}}]\n"
	                    "clusters: [{name: k, cluster: {server: 'https://h:6443/', "
	                    "certificate-authority-data: aGVsbG8=}}]\n"
	                    "users: [{name: u, user: {token: abc}}]\n",
	                    &c, err),
	                 0);
	assert_string_equal(c.server, "https://h:6443");
	assert_string_equal(c.token, "abc");
	assert_string_equal(c.namespace, "ns");
	assert_int_equal(c.ca_len, 5);
	assert_memory_equal(c.ca_pem, "hello", 5);
	sc_kconfig_free(&c);
	assert_int_equal(kc("current-context: x\n"
	                    "contexts: [{name: x, context: {cluster: k, user: u}}]\n"
	                    "clusters: [{name: k, cluster: {server: 'https://h'}}]\n"
	                    "users: [{name: u, user: {exec: {command: sh}}}]\n",
	                    &c, err),
	                 SC_EINVAL);
	assert_non_null(strstr(err, "users[u].user.exec"));
	assert_int_equal(kc("current-context: x\ncontexts: []\n", &c, err), SC_EINVAL);
	assert_non_null(strstr(err, "no context named \"x\""));
	assert_int_equal(kc("contexts: []\n", &c, err), SC_EINVAL);
	assert_non_null(strstr(err, "current-context"));
	assert_int_equal(kc("current-context: x\n"
	                    "contexts: [{name: x, context: {cluster: k, user: u}}]\n"
	                    "clusters: [{name: k, cluster: {server: 'https://h', "
	                    "certificate-authority: no-such-file}}]\n"
	                    "users: [{name: u, user: {token: t}}]\n",
	                    &c, err),
	                 SC_EIO);
	assert_non_null(strstr(err, "/etc/no-such-file"));
	assert_int_equal(kc("[1, 2", &c, err), SC_EPARSE);
}

static void put_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_in_cluster_and_token_refresh(void **state)
{
	char dir[] = "/tmp/sc-k8s-sa-XXXXXX", err[512];
	sc_kconfig_t c;
	assert_non_null(mkdtemp(dir));
	unsetenv("KUBERNETES_SERVICE_HOST");
	assert_int_equal(sc_kconfig_in_cluster(dir, &c, err, sizeof(err)), SC_EINVAL);
	assert_non_null(strstr(err, "KUBERNETES_SERVICE_HOST"));
	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	/* No token file yet. */
	assert_int_equal(sc_kconfig_in_cluster(dir, &c, err, sizeof(err)), SC_EIO);
	assert_non_null(strstr(err, "token"));
	put_file(dir, "token", "tok-1\n");
	put_file(dir, "ca.crt", "-----BEGIN CERTIFICATE-----\n");
	put_file(dir, "namespace", "starcloud-system");
	assert_int_equal(sc_kconfig_in_cluster(dir, &c, err, sizeof(err)), 0);
	assert_string_equal(c.server, "https://[fd00::1]:443");
	assert_string_equal(c.token, "tok-1");
	assert_string_equal(c.namespace, "starcloud-system");
	/* The kubelet rotates the token: read again; a half-written (empty)
	 * file keeps the old one. */
	assert_int_equal(sc_kconfig_refresh_token(&c), 0);
	put_file(dir, "token", "tok-2");
	assert_int_equal(sc_kconfig_refresh_token(&c), 1);
	assert_string_equal(c.token, "tok-2");
	put_file(dir, "token", "");
	assert_int_equal(sc_kconfig_refresh_token(&c), SC_EINVAL);
	assert_string_equal(c.token, "tok-2");
	sc_kconfig_free(&c);
	const char *names[] = {"token", "ca.crt", "namespace"};
	for (int i = 0; i < 3; i++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
}

/* ---- leader election ------------------------------------------------------ */

static void test_lease_rules(void **state)
{
	sc_klease_t l = {.identity = "me", .duration = 15, .renew_deadline = 10};
	sc_klease_rec_t none = {0}, other = {.exists = true, .duration = 15};
	snprintf(other.holder, sizeof(other.holder), "them");
	snprintf(other.renew, sizeof(other.renew), "t1");
	snprintf(other.rv, sizeof(other.rv), "1");
	assert_int_equal(sc_klease_decide(&l, &none, 100), SC_KLEASE_CREATE);
	/* Someone else's, freshly seen: wait the whole duration, by our clock. */
	assert_int_equal(sc_klease_decide(&l, &other, 100), SC_KLEASE_WAIT);
	assert_int_equal(sc_klease_decide(&l, &other, 114.9), SC_KLEASE_WAIT);
	/* It changed (renewed): the wait starts again. */
	snprintf(other.renew, sizeof(other.renew), "t2");
	snprintf(other.rv, sizeof(other.rv), "2");
	assert_int_equal(sc_klease_decide(&l, &other, 114.9), SC_KLEASE_WAIT);
	assert_int_equal(sc_klease_decide(&l, &other, 129), SC_KLEASE_WAIT);
	assert_int_equal(sc_klease_decide(&l, &other, 130), SC_KLEASE_TAKE);
	/* Won at 130: writes are allowed until 140, not after. */
	sc_klease_won(&l, 130);
	assert_true(sc_klease_valid(&l, 139.9));
	assert_false(sc_klease_valid(&l, 140));
	/* Seeing another holder ends it at once. */
	sc_klease_won(&l, 141);
	snprintf(other.rv, sizeof(other.rv), "3");
	assert_int_equal(sc_klease_decide(&l, &other, 142), SC_KLEASE_WAIT);
	assert_false(sc_klease_valid(&l, 142));
	/* Released (no holder): take at once. */
	other.holder[0] = '\0';
	assert_int_equal(sc_klease_decide(&l, &other, 143), SC_KLEASE_TAKE);
	/* Ours: renew. The body keeps acquireTime and counts transitions. */
	snprintf(other.holder, sizeof(other.holder), "me");
	snprintf(other.acquire, sizeof(other.acquire), "a0");
	other.transitions = 4;
	assert_int_equal(sc_klease_decide(&l, &other, 144), SC_KLEASE_RENEW);
	json_t *b = sc_klease_body(&l, &other, SC_KLEASE_RENEW, "ns", "lease", "now", false);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(b, "spec"), "acquireTime")), "a0");
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(b, "spec"), "leaseTransitions")), 4);
	json_decref(b);
	b = sc_klease_body(&l, &other, SC_KLEASE_TAKE, "ns", "lease", "now", false);
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(b, "spec"), "leaseTransitions")), 5);
	json_decref(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lone_pod_binds),
	    cmocka_unit_test(test_gang_all_or_nothing),
	    cmocka_unit_test(test_gang_topology_from_the_pod_group),
	    cmocka_unit_test(test_parent_queue_holds_no_pods),
	    cmocka_unit_test(test_bad_queues_hold_their_pods),
	    cmocka_unit_test(test_bad_annotations),
	    cmocka_unit_test(test_shares_pack_onto_one_device),
	    cmocka_unit_test(test_running_shares_keep_their_device),
	    cmocka_unit_test(test_foreign_pods_hold_resources_and_are_never_victims),
	    cmocka_unit_test(test_taints_become_selectors),
	    cmocka_unit_test(test_local_state_holds_the_node),
	    cmocka_unit_test(test_relist_removes_what_was_not_listed),
	    cmocka_unit_test(test_status_only_changes),
	    cmocka_unit_test(test_kubeconfig),
	    cmocka_unit_test(test_in_cluster_and_token_refresh),
	    cmocka_unit_test(test_lease_rules),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
