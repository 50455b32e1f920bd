/* Loading a cycle's input: the cached objects (cache.h: parsed once per
 * revision), decoded by the manifest decoder into one snapshot. Collecting
 * runs on the loop thread (references only); decoding and the snapshot run
 * on the cycle's worker thread, touching nothing shared but the immutable
 * cached objects.
 *
 * The decoder checks references between objects (a job's queue exists and
 * is a leaf, a priority class exists) only when the snapshot is built, and
 * then refuses the whole set. A control plane cannot stop scheduling
 * because one tenant's job names a queue that does not exist yet, so a
 * refused object is left out, with the decoder's message kept as the reason
 * the job shows, and the snapshot is built again without it. Each retry
 * removes one object, so the loop ends; in a healthy cluster there is none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strmap.h"
#include "base/alloc.h"
#include "base/log.h"
#include "server/cache.h"
#include "server/sched_int.h"
#include "starcloud/error.h"

/* The kinds the scheduler reads, in the order they are added (the
 * decoder keeps input order, which breaks ties between equal jobs). The
 * cluster's SchedulerConfig and Topology (at most one each, "default")
 * come first: actions, placement policies and topology levels for the
 * cycle, as `schedule -f` reads them from a file. */
static const char *const plurals[] = {"schedulerconfigs", "topologies", "nodes",      "queues",
                                      "priorityclasses",  "jobs",       "deployments"};
#define NPLURALS (sizeof(plurals) / sizeof(plurals[0]))

/* A new, zeroed input object of kind k at the end of in->objs (capacity
 * *cap, doubled as needed), not yet paired with a job. */
static sc_sobj_t *add_obj(sc_cycle_in_t *in, size_t *cap, const sc_kind_t *k)
{
	if (in->nobjs == *cap) {
		*cap = *cap ? *cap * 2 : 256;
		in->objs = sc_xreallocarray(in->objs, *cap, sizeof(*in->objs));
	}
	sc_sobj_t *o = &in->objs[in->nobjs++];
	memset(o, 0, sizeof(*o));
	o->kind = k;
	o->job = -1;
	return o;
}

/* Appends the cached objects of one kind: references, not copies, so
 * taking a snapshot's input costs no parsing on the loop thread. */
static void collect_kind(sc_server_t *s, const sc_kind_t *k, sc_cycle_in_t *in, size_t *cap)
{
	size_t n;
	sc_cobj_t *const *v = sc__cache_items(s->cache, k, &n);
	for (size_t i = 0; i < n; i++) {
		json_t *obj = sc__cache_obj(v[i]);
		if (!obj)
			continue; /* not JSON: never written by this server */
		sc_sobj_t *o = add_obj(in, cap, k);
		o->key = sc_xstrdup(v[i]->key);
		o->obj = json_incref(obj);
		o->mod_rev = v[i]->mod_rev;
		o->pre = sc__cache_take_decoded(v[i]);
	}
}

static const char *sobj_name(const sc_sobj_t *o)
{
	const char *n =
	    json_string_value(json_object_get(json_object_get(o->obj, "metadata"), "name"));
	return n ? n : "";
}

static void exclude(sc_sobj_t *o, const sc_manifest_error_t *err)
{
	char msg[1400];
	sc_manifest_error_t e = *err;
	e.file[0] = '\0';
	free(o->why);
	o->why = sc_xstrdup(sc_manifest_error_format(&e, msg, sizeof(msg)));
}

/* Adds every object still included to a fresh set, from the decoded
 * forms (no decoding here). */
static int fill_set(sc_cycle_in_t *in, const sc_decode_cache_t *dc)
{
	in->set = sc_manifest_set_new();
	if (!in->set)
		return SC_ENOMEM;
	for (size_t i = 0; i < in->nobjs; i++) {
		sc_sobj_t *o = &in->objs[i];
		const sc_decoded_t *d = sc__decoded(dc, i);
		sc_manifest_error_t err;
		if (o->why)
			continue;
		if (d->why) {
			o->why = sc_xstrdup(d->why);
			continue;
		}
		int rc = sc_manifest_add_set(in->set, d->one, &err);
		if (rc == SC_ENOMEM)
			return rc;
		if (rc < 0)
			exclude(o, &err);
	}
	return 0;
}

/* The object an error names ("Job train-1"), or NULL. */
static sc_sobj_t *blamed(sc_cycle_in_t *in, const sc_manifest_error_t *err)
{
	const char *sp = strchr(err->object, ' ');
	if (!sp)
		return NULL;
	size_t klen = (size_t)(sp - err->object);
	for (size_t i = 0; i < in->nobjs; i++) {
		sc_sobj_t *o = &in->objs[i];
		if (!o->why && strlen(o->kind->kind) == klen &&
		    strncmp(o->kind->kind, err->object, klen) == 0 &&
		    strcmp(sobj_name(o), sp + 1) == 0)
			return o;
	}
	/* A deployment is decoded into a job of the same name. */
	for (size_t i = 0; i < in->nobjs; i++) {
		sc_sobj_t *o = &in->objs[i];
		if (!o->why && o->kind->queue_scoped && strcmp(sobj_name(o), sp + 1) == 0)
			return o;
	}
	return NULL;
}

/* The name in o's key (/registry/<plural>/<name>): the API stores every
 * object under its metadata.name, so this is the name without a lookup. */
static const char *key_name(const sc_sobj_t *o)
{
	const char *slash = strrchr(o->key, '/');
	return slash ? slash + 1 : o->key;
}

/* Pairs snapshot jobs with objects in order: the decoder keeps input order,
 * so job j is the j-th included job or deployment. 0 when every pair's
 * names agree (checked), else the caller maps by name. */
static int map_jobs_in_order(sc_cycle_in_t *in)
{
	size_t j = 0;
	for (size_t i = 0; i < in->nobjs && j <= in->snap.njobs; i++) {
		sc_sobj_t *o = &in->objs[i];
		if (!o->kind->queue_scoped || o->why)
			continue;
		if (j == in->snap.njobs || strcmp(in->snap.jobs[j].name, key_name(o)) != 0)
			return SC_EINVAL;
		in->job_obj[j] = o;
		o->job = (long)j++;
	}
	return j == in->snap.njobs ? 0 : SC_EINVAL;
}

/* Maps each snapshot job to its object by name (jobs and deployments share
 * one name space in the decoder). */
static int map_jobs(sc_cycle_in_t *in)
{
	sc_strmap_t m;
	in->job_obj = sc_xcalloc(in->snap.njobs + 1, sizeof(*in->job_obj));
	if (map_jobs_in_order(in) == 0)
		return 0;
	for (size_t i = 0; i < in->nobjs; i++)
		in->objs[i].job = -1;
	int rc = sc_strmap_init(&m, in->nobjs);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < in->nobjs; i++)
		if (in->objs[i].kind->queue_scoped && !in->objs[i].why)
			sc_strmap_put(&m, sobj_name(&in->objs[i]), (uint32_t)i);
	for (size_t j = 0; j < in->snap.njobs; j++) {
		long i = sc_strmap_get(&m, in->snap.jobs[j].name);
		if (i < 0) {
			rc = SC_EINVAL; /* cannot happen: every job came from an object */
			break;
		}
		in->job_obj[j] = &in->objs[i];
		in->objs[i].job = (long)j;
	}
	sc_strmap_free(&m);
	return rc;
}

static const char *spec_str(const sc_sobj_t *o, const char *key)
{
	return json_string_value(json_object_get(json_object_get(o->obj, "spec"), key));
}

/* The commonest refusal, a job whose queue is missing or not a leaf, is
 * found here in one pass: left to the snapshot, n such jobs would cost n
 * rebuilds of the whole set. Messages are the decoder's. */
static void precheck_queues(sc_cycle_in_t *in, const sc_decode_cache_t *dc)
{
	sc_strmap_t queues, parents;
	if (sc_strmap_init(&queues, in->nobjs) < 0 || sc_strmap_init(&parents, in->nobjs) < 0)
		sc_oom();
	const sc_kind_t *queue = sc__kind_by_name("Queue");
	for (size_t i = 0; i < in->nobjs; i++) {
		const sc_sobj_t *o = &in->objs[i];
		if (o->kind != queue)
			continue;
		const char *parent = spec_str(o, "parentQueue");
		sc_strmap_put(&queues, sobj_name(o), 1);
		if (parent)
			sc_strmap_put(&parents, parent, 1);
	}
	for (size_t i = 0; i < in->nobjs; i++) {
		sc_sobj_t *o = &in->objs[i];
		const char *q = o->kind->queue_scoped && !o->why ? sc__decoded(dc, i)->queue : NULL;
		if (!q)
			continue;
		int missing = sc_strmap_get(&queues, q) < 0;
		if (!missing && sc_strmap_get(&parents, q) < 0)
			continue; /* a leaf queue: the common case, no message built */
		sc_manifest_error_t err = {.code = SC_EINVAL};
		snprintf(err.object, sizeof(err.object), "%s %s", o->kind->kind, sobj_name(o));
		snprintf(err.path, sizeof(err.path), "spec.queue");
		if (missing)
			snprintf(err.msg, sizeof(err.msg), "queue \"%.200s\" does not exist", q);
		else
			snprintf(err.msg, sizeof(err.msg),
			         "queue \"%.200s\" has child queues; jobs go to leaf queues", q);
		exclude(o, &err);
	}
	sc_strmap_free(&queues);
	sc_strmap_free(&parents);
}

void sc__cycle_collect(sc_server_t *s, int64_t now, sc_cycle_in_t *in)
{
	size_t cap = 0;
	memset(in, 0, sizeof(*in));
	in->now = now;
	in->agent_pods = s->agent_pods ? json_deep_copy(s->agent_pods) : NULL;
	for (size_t k = 0; k < NPLURALS; k++) {
		const sc_kind_t *kind = sc__kind_by_plural(plurals[k], strlen(plurals[k]));
		collect_kind(s, kind, in, &cap);
	}
}

/* The place of each object's kind in the cycle's order. */
static int *kind_ranks(const sc_cycle_in_t *in)
{
	int *r = sc_xcalloc(in->nobjs + 1, sizeof(*r));
	for (size_t i = 0; i < in->nobjs; i++)
		for (size_t k = 0; k < NPLURALS; k++)
			if (strcmp(in->objs[i].kind->plural, plurals[k]) == 0)
				r[i] = (int)k;
	return r;
}

int sc__cycle_build(sc_cycle_in_t *in, sc_decode_cache_t *dc)
{
	int *ranks = kind_ranks(in);
	int rc = sc__decode_refresh(dc, in, ranks, &in->decoded);
	free(ranks);
	if (rc < 0)
		return rc;
	precheck_queues(in, dc);
	for (size_t attempt = 0; attempt <= in->nobjs; attempt++) {
		sc_manifest_error_t err;
		if ((rc = fill_set(in, dc)) < 0)
			break;
		rc = sc_manifest_snapshot(in->set, in->now, &in->snap, &err);
		if (rc == 0)
			return map_jobs(in);
		sc_sobj_t *o = blamed(in, &err);
		if (!o) {
			char msg[1400];
			sc_log_error("snapshot refused: %s",
			             sc_manifest_error_format(&err, msg, sizeof(msg)));
			break;
		}
		exclude(o, &err);
		sc_manifest_set_free(in->set);
		in->set = NULL;
		rc = 0;
	}
	return rc < 0 ? rc : SC_EINVAL;
}

void sc__cycle_in_free(sc_cycle_in_t *in)
{
	for (size_t i = 0; i < in->nobjs; i++) {
		free(in->objs[i].key);
		free(in->objs[i].why);
		json_decref(in->objs[i].obj);
		sc_manifest_set_free(in->objs[i].pre);
	}
	free(in->objs);
	free(in->job_obj);
	sc_manifest_set_free(in->set);
	json_decref(in->agent_pods);
	memset(in, 0, sizeof(*in));
}
