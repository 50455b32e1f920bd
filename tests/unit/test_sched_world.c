/* The scheduling loop's kept snapshot (src/server/sched_world.c): changes
 * applied to it in batches, each changed object decoded once (or not at
 * all when what the decoder reads did not change), references checked
 * where they hold, objects that fail them left out with a reason instead
 * of stopping the loop, and the snapshot the core gets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/rtext.h"
#include "server/sched_int.h"
#include "starcloud/error.h"

static void add(sc_changes_t *c, int rank, const char *name, int64_t rev, const char *text)
{
	static const char *const plurals[SC_RANKS] = {
	    "nodes",       "queues",           "priorityclasses", "jobs",
	    "deployments", "schedulerconfigs", "topologies"};
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 16;
		c->v = realloc(c->v, c->cap * sizeof(*c->v));
	}
	sc_change_t *ch = &c->v[c->n++];
	memset(ch, 0, sizeof(*ch));
	char key[300];
	snprintf(key, sizeof(key), "/registry/%s/%s", plurals[rank], name);
	ch->rank = rank;
	ch->key = strdup(key);
	ch->mod_rev = rev;
	ch->text = sc_rtext_new(text);
}

static char *job(const char *name, const char *queue, const char *extra)
{
	static char buf[1024];
	snprintf(
	    buf, sizeof(buf),
	    "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"%s\"},"
	    "\"spec\":{\"queue\":\"%s\",\"tasks\":[{\"name\":\"w\",\"replicas\":1,"
	    "\"resources\":{\"gpu\":1}}]}%s}",
	    name, queue, extra ? extra : "");
	return buf;
}

static char *queue(const char *name, const char *parent)
{
	static char buf[512];
	snprintf(buf, sizeof(buf),
	         "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"Queue\",\"metadata\":{\"name\":"
	         "\"%s\"},\"spec\":{%s%s%s\"resources\":{\"gpu\":{\"quota\":8}}}}",
	         name, parent ? "\"parentQueue\":\"" : "", parent ? parent : "",
	         parent ? "\"," : "");
	return buf;
}

static const char *node =
    "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n0\"},"
    "\"spec\":{\"cpu\":64,\"memory\":\"512Gi\",\"gpus\":{\"count\":8,\"model\":\"A100\"}}}";

static sc_wobj_t *find(sc_world_t *w, int rank, const char *name)
{
	size_t n;
	sc_wobj_t *const *v = sc__world_objs(w, rank, &n);
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i]->name, name) == 0)
			return v[i];
	return NULL;
}

static size_t apply(sc_world_t *w, sc_changes_t *c)
{
	size_t decoded = 0;
	sc__world_apply(w, c, &decoded);
	sc__changes_free(c);
	return decoded;
}

static void references_and_refusals(void **state)
{
	sc_world_t *w = sc__world_new();
	sc_changes_t c = {.full = true};
	add(&c, SC_RANK_NODE, "n0", 1, node);
	add(&c, SC_RANK_QUEUE, "dept", 2, queue("dept", NULL));
	add(&c, SC_RANK_QUEUE, "team", 3, queue("team", "dept"));
	add(&c, SC_RANK_QUEUE, "orphan", 4, queue("orphan", "nowhere"));
	add(&c, SC_RANK_JOB, "ok", 5, job("ok", "team", NULL));
	add(&c, SC_RANK_JOB, "lost", 6, job("lost", "nowhere", NULL));
	add(&c, SC_RANK_JOB, "inner", 7, job("inner", "dept", NULL));
	add(&c, SC_RANK_JOB, "under-orphan", 8, job("under-orphan", "orphan", NULL));
	add(&c, SC_RANK_JOB, "bad", 9,
	    "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"bad\"},"
	    "\"spec\":{\"queue\":\"team\",\"tasks\":[{\"replicas\":\"two\"}]}}");
	assert_int_equal(apply(w, &c), 9);
	const sc_snapshot_t *s = sc__world_snapshot(w, 1000);
	assert_int_equal(s->nnodes, 1);
	assert_int_equal(s->nqueues, 2); /* orphan is left out */
	assert_int_equal(s->njobs, 1);
	assert_string_equal(s->jobs[0].name, "ok");
	assert_non_null(strstr(find(w, SC_RANK_QUEUE, "orphan")->ref_why,
	                       "parent queue \"nowhere\" does not exist"));
	assert_non_null(strstr(find(w, SC_RANK_JOB, "lost")->ref_why,
	                       "Job lost: spec.queue: queue \"nowhere\" does not exist"));
	assert_non_null(strstr(find(w, SC_RANK_JOB, "inner")->ref_why, "has child queues"));
	assert_non_null(find(w, SC_RANK_JOB, "under-orphan")->ref_why);
	assert_non_null(strstr(find(w, SC_RANK_JOB, "bad")->dec_why, "spec.tasks[0].replicas"));
	/* The missing parent arrives: orphan and its job join the snapshot;
	 * `lost` named it as its leaf, and now it has a child. */
	add(&c, SC_RANK_QUEUE, "nowhere", 10, queue("nowhere", NULL));
	assert_int_equal(apply(w, &c), 1);
	s = sc__world_snapshot(w, 1000);
	assert_int_equal(s->nqueues, 4);
	assert_int_equal(s->njobs, 2);
	assert_string_equal(s->jobs[0].name, "ok");
	assert_string_equal(s->jobs[1].name, "under-orphan");
	assert_null(find(w, SC_RANK_QUEUE, "orphan")->ref_why);
	assert_non_null(strstr(find(w, SC_RANK_JOB, "lost")->ref_why, "has child queues"));
	sc__world_free(w);
}

static void a_status_change_keeps_the_decoding(void **state)
{
	sc_world_t *w = sc__world_new();
	sc_changes_t c = {.full = true};
	add(&c, SC_RANK_NODE, "n0", 1, node);
	add(&c, SC_RANK_QUEUE, "q", 2, queue("q", NULL));
	add(&c, SC_RANK_JOB, "j", 3, job("j", "q", NULL));
	assert_int_equal(apply(w, &c), 3);
	/* What the decoder reads is unchanged (only the pending reason): the
	 * digest of the old view is made from its text, no new decoding. */
	add(&c, SC_RANK_JOB, "j", 4,
	    job("j", "q", ",\"status\":{\"phase\":\"Pending\",\"reason\":\"no room\"}"));
	assert_int_equal(apply(w, &c), 0);
	assert_int_equal(find(w, SC_RANK_JOB, "j")->mod_rev, 4);
	/* A pod: the decoder reads it, so it decodes, and the snapshot holds it. */
	add(&c, SC_RANK_JOB, "j", 5,
	    job("j", "q",
	        ",\"status\":{\"pods\":[{\"name\":\"j-w-0\",\"phase\":\"Running\",\"node\":\"n0\","
	        "\"gpus\":[3]}]}"));
	assert_int_equal(apply(w, &c), 1);
	const sc_snapshot_t *s = sc__world_snapshot(w, 1000);
	assert_int_equal(s->njobs, 1);
	assert_int_equal(s->jobs[0].npods, 1);
	assert_string_equal(s->jobs[0].pods[0].node, "n0");
	/* Deleted: gone from the snapshot. */
	add(&c, SC_RANK_JOB, "j", 0, NULL);
	assert_int_equal(apply(w, &c), 0);
	assert_int_equal(sc__world_snapshot(w, 1000)->njobs, 0);
	assert_null(find(w, SC_RANK_JOB, "j"));
	sc__world_free(w);
}

static void a_full_load_drops_what_is_gone(void **state)
{
	sc_world_t *w = sc__world_new();
	sc_changes_t c = {.full = true};
	add(&c, SC_RANK_QUEUE, "q", 1, queue("q", NULL));
	add(&c, SC_RANK_JOB, "a", 2, job("a", "q", NULL));
	add(&c, SC_RANK_JOB, "b", 3, job("b", "q", NULL));
	apply(w, &c);
	assert_int_equal(sc__world_snapshot(w, 1)->njobs, 2);
	/* The cache read whole again: b is not in it any more. */
	c.full = true;
	add(&c, SC_RANK_QUEUE, "q", 1, queue("q", NULL));
	add(&c, SC_RANK_JOB, "a", 2, job("a", "q", NULL));
	apply(w, &c);
	assert_int_equal(sc__world_snapshot(w, 1)->njobs, 1);
	assert_null(find(w, SC_RANK_JOB, "b"));
	/* A core refusal naming a queue leaves it (and its jobs) out. */
	assert_int_equal(sc__world_exclude(w, "queue q: spec.parentQueue: something new"), 1);
	assert_int_equal(sc__world_snapshot(w, 1)->nqueues, 0);
	assert_int_equal(sc__world_snapshot(w, 1)->njobs, 0);
	assert_int_equal(sc__world_exclude(w, "nodes: something else"), 0);
	sc__world_free(w);
}

/* A Job and a Deployment share the decoder's job names: the Deployment
 * that takes a Job's name is left out, with the reason. */
static void a_deployment_may_not_take_a_jobs_name(void **state)
{
	sc_world_t *w = sc__world_new();
	sc_changes_t c = {.full = true};
	add(&c, SC_RANK_QUEUE, "q", 1, queue("q", NULL));
	add(&c, SC_RANK_JOB, "same", 2, job("same", "q", NULL));
	add(&c, SC_RANK_DEPLOY, "same", 3,
	    "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":"
	    "\"same\"},\"spec\":{\"queue\":\"q\",\"model\":\"m\",\"replicas\":1,\"template\":{"
	    "\"resources\":{\"gpu\":1},\"command\":[\"x\"]}}}");
	apply(w, &c);
	assert_int_equal(sc__world_snapshot(w, 1)->njobs, 1);
	sc_wobj_t *d = find(w, SC_RANK_DEPLOY, "same");
	assert_non_null(d);
	assert_null(d->dec_why);
	assert_non_null(strstr(d->ref_why, "a Job named \"same\" already exists"));
	sc__world_free(w);
}

/* The cluster's SchedulerConfig and Topology are read into the snapshot's
 * config when either changes; gone, or refused, the defaults hold. */
static void the_cluster_config_reaches_the_snapshot(void **state)
{
	sc_world_t *w = sc__world_new();
	sc_changes_t c = {.full = true};
	sc_config_t def;
	sc_config_default(&def);
	add(&c, SC_RANK_NODE, "n0", 1, node);
	add(&c, SC_RANK_CONFIG, "default", 2,
	    "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"SchedulerConfig\",\"metadata\":{"
	    "\"name\":\"default\"},\"spec\":{\"compaction\":{\"targetGpus\":8},"
	    "\"reservations\":{\"after\":0}}}");
	add(&c, SC_RANK_TOPOLOGY, "default", 3,
	    "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"Topology\",\"metadata\":{"
	    "\"name\":\"default\"},\"spec\":{\"levels\":[\"k8s.io/zone\",\"k8s.io/rack\"]}}");
	apply(w, &c);
	const sc_snapshot_t *s = sc__world_snapshot(w, 1);
	assert_int_equal(s->nnodes, 1);
	assert_int_equal(s->config.compaction.target_gpus, 8);
	assert_int_equal(s->config.reservation_after, 0);
	assert_int_equal(s->config.ntopology_levels, 2);
	assert_string_equal(s->config.topology_levels[1], "k8s.io/rack");
	/* Another object's change keeps the config as it was. */
	add(&c, SC_RANK_QUEUE, "q", 4, queue("q", NULL));
	apply(w, &c);
	s = sc__world_snapshot(w, 1);
	assert_int_equal(s->config.compaction.target_gpus, 8);
	assert_int_equal(s->config.ntopology_levels, 2);
	/* The SchedulerConfig deleted: its settings go, the Topology stays. */
	add(&c, SC_RANK_CONFIG, "default", 5, NULL);
	apply(w, &c);
	s = sc__world_snapshot(w, 1);
	assert_int_equal(s->config.compaction.target_gpus, def.compaction.target_gpus);
	assert_int_equal(s->config.reservation_after, def.reservation_after);
	assert_int_equal(s->config.ntopology_levels, 2);
	/* One the decoder refuses (stored by an older release, say): its
	 * defaults, not a stopped loop; the Topology still applies. */
	add(&c, SC_RANK_CONFIG, "default", 6,
	    "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"SchedulerConfig\",\"metadata\":{"
	    "\"name\":\"default\"},\"spec\":{\"noSuchField\":1}}");
	apply(w, &c);
	s = sc__world_snapshot(w, 1);
	assert_int_equal(s->config.reservation_after, def.reservation_after);
	assert_int_equal(s->config.ntopology_levels, 2);
	assert_int_equal(s->nnodes, 1);
	sc__world_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(references_and_refusals),
	    cmocka_unit_test(a_status_change_keeps_the_decoding),
	    cmocka_unit_test(a_full_load_drops_what_is_gone),
	    cmocka_unit_test(a_deployment_may_not_take_a_jobs_name),
	    cmocka_unit_test(the_cluster_config_reaches_the_snapshot),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
