/* The world: the core's snapshot kept between cycles and brought up to
 * date from changes (sched_int.h). Owned by the cycle's worker thread, one
 * cycle at a time (libuv's work queue orders one cycle's end before the
 * next one's start).
 *
 * Each kind is an array of objects sorted by key, so a batch of changes
 * (sorted the same way) is applied in one merge walk. An object is
 * decoded once per change of what the decoder reads of it (its view): a
 * new revision whose view has the digest of the old one keeps its
 * decoding, so the loop's own status writes (a pending reason) and an
 * agent's report that changes no pod cost no decoding; a revision the API
 * validated comes decoded already; a status the last plan wrote comes
 * back as the promise it made (its text compared byte for byte), decoded
 * when the plan built it.
 *
 * References between objects are checked here, once per change of what
 * they depend on: a queue's parent exists and forms no cycle; a job's
 * queue exists and is a leaf, its priority class exists, its name is not
 * a Deployment's too. An object that fails is left out of the snapshot
 * with the reason its status shows, so one bad object never stops the
 * loop; the core then gets a snapshot it accepts, and builds it once. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/rtext.h"
#include "base/strmap.h"
#include "server/deploy.h"
#include "server/sched_int.h"
#include "starcloud/error.h"

struct sc_world {
	sc_wobj_t **v[SC_RANKS]; /* sorted by key */
	size_t n[SC_RANKS], cap[SC_RANKS];
	/* The snapshot's arrays, rebuilt when anything they hold changed. */
	sc_node_spec_t *nodes;
	sc_queue_spec_t *queues;
	sc_prio_class_t *classes;
	sc_job_spec_t *jobs;
	sc_wobj_t **job_obj;
	size_t nnodes, nqueues, nclasses, njobs;
	bool dirty;
	uint64_t gen; /* counts rebuilds of the arrays or the config */
	uint64_t drain_hash;
	/* The SchedulerConfig and Topology read into a config (the set owns
	 * the strings and arrays it points to), redone when either changes. */
	sc_config_t config;
	sc_manifest_set_t *config_set;
	bool config_dirty;
	sc_snapshot_t snap;
};

sc_world_t *sc__world_new(void)
{
	sc_world_t *w = sc_xcalloc(1, sizeof(*w));
	w->dirty = true;
	sc_config_default(&w->config);
	return w;
}

static void clear_settled(sc_wobj_t *o)
{
	o->settled = false;
	free(o->settled_why);
	free(o->settled_reason);
	o->settled_why = o->settled_reason = NULL;
}

static void clear_promise(sc_wobj_t *o)
{
	free(o->promise);
	sc_manifest_obj_free(o->pdec);
	o->promise = NULL;
	o->pdec = NULL;
}

static void wobj_free(sc_wobj_t *o)
{
	if (!o)
		return;
	free(o->key);
	sc_rtext_unref(o->text);
	sc_manifest_obj_free(o->dec);
	free(o->dec_why);
	free(o->ref_why);
	free(o->address);
	clear_promise(o);
	clear_settled(o);
	free(o);
}

void sc__world_free(sc_world_t *w)
{
	if (!w)
		return;
	for (int r = 0; r < SC_RANKS; r++) {
		for (size_t i = 0; i < w->n[r]; i++)
			wobj_free(w->v[r][i]);
		free(w->v[r]);
	}
	free(w->nodes);
	free(w->queues);
	free(w->classes);
	free(w->jobs);
	free(w->job_obj);
	sc_manifest_set_free(w->config_set);
	free(w);
}

/* ---------------------------------------------------------------------
 * One change
 * ------------------------------------------------------------------- */

json_t *sc__world_view(int rank, json_t *obj)
{
	static const char *const plurals[SC_RANKS] = {
	    "nodes",       "queues",           "priorityclasses", "jobs",
	    "deployments", "schedulerconfigs", "topologies"};
	if (rank == SC_RANK_DEPLOY)
		return sc__deploy_view(obj);
	return sc__decoder_view(sc__kind_by_plural(plurals[rank], strlen(plurals[rank])), obj);
}

static char *format_err(const sc_manifest_error_t *err)
{
	char msg[1400];
	sc_manifest_error_t e = *err;
	e.file[0] = '\0';
	return sc_xstrdup(sc_manifest_error_format(&e, msg, sizeof(msg)));
}

static void set_dec(sc_wobj_t *o, sc_manifest_obj_t *dec, char *why)
{
	sc_manifest_obj_free(o->dec);
	free(o->dec_why);
	o->dec = dec;
	o->dec_why = why;
}

/* What a node tells the loop beyond its decoding: where its agent is (a
 * deployment pod's port is unique per host) and whether it is drained or
 * being emptied by its node pool (SC_DRAINED_*). */
static void node_extras(json_t *obj, char **address, int *drained)
{
	json_t *ann = json_object_get(json_object_get(obj, "metadata"), "annotations");
	const char *d = json_string_value(json_object_get(ann, SC_DRAIN_ANNOTATION));
	const char *sd = json_string_value(json_object_get(ann, SC_SCALEDOWN_ANNOTATION));
	const char *addr =
	    json_string_value(json_object_get(json_object_get(obj, "status"), "address"));
	*drained = d && strcmp(d, "true") == 0     ? SC_DRAINED_DRAIN
	           : sd && strcmp(sd, "true") == 0 ? SC_DRAINED_SCALEDOWN
	                                           : SC_DRAINED_NO;
	free(*address);
	*address = addr && addr[0] ? sc_xstrdup(addr) : NULL;
}

/* Decodes a view; the refusal as the message the job shows. */
static void decode_view(json_t *view, sc_manifest_obj_t **dec, char **why)
{
	sc_manifest_error_t err;
	*dec = NULL;
	*why = NULL;
	int rc = view ? sc_manifest_decode(view, dec, &err) : SC_EINVAL;
	if (rc == SC_ENOMEM)
		sc_oom();
	if (!view)
		snprintf(err.msg, sizeof(err.msg), "the stored value is not a JSON object");
	if (rc < 0)
		*why = format_err(&err);
}

/* The digest of what the decoder reads of text. */
static void text_digest(int rank, const char *text, uint64_t vh[2])
{
	json_t *obj = json_loads(text, 0, NULL);
	json_t *view = json_is_object(obj) ? sc__world_view(rank, obj) : NULL;
	vh[0] = vh[1] = 0;
	if (view)
		sc__view_digest(view, vh);
	json_decref(view);
	json_decref(obj);
}

/* Brings o to the change's revision; 1 when its decoding changed. */
static int update(sc_wobj_t *o, sc_change_t *ch, size_t *decoded)
{
	o->mod_rev = ch->mod_rev;
	clear_settled(o);
	/* The cluster's configuration: its text only (read whole by
	 * build_config). */
	if (o->rank >= SC_RANK_CONFIG) {
		sc_rtext_unref(o->text);
		o->text = ch->text;
		ch->text = NULL;
		return 1;
	}
	/* The plan's own status write coming back: taken as promised. */
	if (o->promise && strcmp(o->promise, ch->text) == 0 && o->rank != SC_RANK_NODE) {
		int changed = o->pdec != NULL;
		sc_rtext_unref(o->text);
		o->text = ch->text;
		ch->text = NULL;
		free(o->promise);
		o->promise = NULL;
		memcpy(o->vh, o->pvh, sizeof(o->vh));
		o->vh_ok = o->pvh_ok;
		if (o->pdec) {
			set_dec(o, o->pdec, NULL);
			o->pdec = NULL;
		}
		return changed;
	}
	clear_promise(o);
	/* Decoded ahead (a full load): nothing left to do but take it. */
	if (ch->prepared) {
		sc_rtext_unref(o->text);
		o->text = ch->text;
		ch->text = NULL;
		set_dec(o, ch->pre, ch->why);
		ch->pre = NULL;
		ch->why = NULL;
		o->vh_ok = false;
		free(o->address);
		o->address = ch->address;
		ch->address = NULL;
		o->drained = ch->drained;
		/* Settled from what is stored; finished in build_arrays, where
		 * the job's own refusal (a missing queue) is known. */
		o->settled_reason = ch->plain_reason;
		ch->plain_reason = NULL;
		return 1;
	}
	/* Decoded by the API's validation: nothing to parse (a node is, for
	 * what its decoding does not hold). */
	if (ch->pre && o->rank != SC_RANK_NODE) {
		sc_rtext_unref(o->text);
		o->text = ch->text;
		ch->text = NULL;
		set_dec(o, ch->pre, NULL);
		ch->pre = NULL;
		memcpy(o->vh, ch->pre_vh, sizeof(o->vh));
		o->vh_ok = true;
		return 1;
	}
	/* The old view's digest is made when first needed: now, from the old
	 * text, before it goes (a full load decodes without digests). */
	if (!o->vh_ok && o->text && (o->dec || o->dec_why)) {
		text_digest(o->rank, o->text, o->vh);
		o->vh_ok = true;
	}
	sc_rtext_unref(o->text);
	o->text = ch->text;
	ch->text = NULL;
	json_t *obj = json_loads(o->text, 0, NULL);
	json_t *view = json_is_object(obj) ? sc__world_view(o->rank, obj) : NULL;
	uint64_t vh[2] = {0, 0};
	int changed = 0;
	if (view)
		sc__view_digest(view, vh);
	if (o->rank == SC_RANK_NODE)
		node_extras(obj, &o->address, &o->drained);
	if (ch->pre) {
		set_dec(o, ch->pre, NULL);
		ch->pre = NULL;
		changed = 1;
	} else if (!view || !o->vh_ok || vh[0] != o->vh[0] || vh[1] != o->vh[1] ||
	           (!o->dec && !o->dec_why)) {
		sc_manifest_obj_t *dec;
		char *why;
		decode_view(view, &dec, &why);
		set_dec(o, dec, why);
		(*decoded)++;
		changed = 1;
	}
	memcpy(o->vh, vh, sizeof(vh));
	o->vh_ok = view != NULL;
	json_decref(view);
	json_decref(obj);
	return changed;
}

/* ---------------------------------------------------------------------
 * A full load decoded ahead, on as many threads as there are cores
 * ------------------------------------------------------------------- */

/* The reason of a plain pending status, as the plan writes one for a job
 * without pods and without a reservation; NULL for anything else. */
static int is(json_t *o, const char *key, const char *want)
{
	const char *v = json_string_value(json_object_get(o, key));
	return v && strcmp(v, want) == 0;
}

static char *plain_pending(json_t *obj)
{
	json_t *st = json_object_get(obj, "status"), *c, *v;
	const char *key, *reason = json_string_value(json_object_get(st, "reason"));
	if (!reason || !is(st, "phase", "Pending"))
		return NULL;
	json_object_foreach(st, key, v)
	{
		if (strcmp(key, "phase") && strcmp(key, "reason") && strcmp(key, "conditions") &&
		    !(strcmp(key, "pods") == 0 && json_is_array(v) && json_array_size(v) == 0))
			return NULL;
	}
	c = json_array_get(json_object_get(st, "conditions"), 0);
	if (json_array_size(json_object_get(st, "conditions")) != 1 || !is(c, "status", "False") ||
	    !is(c, "reason", "Unschedulable") || !is(c, "message", reason))
		return NULL;
	return sc_xstrdup(reason);
}

typedef struct prep {
	sc_change_t *v;
	size_t from, to;
	size_t decoded;
} prep_t;

static void *prepare(void *ud)
{
	prep_t *p = ud;
	for (size_t i = p->from; i < p->to; i++) {
		sc_change_t *ch = &p->v[i];
		if (!ch->text || ch->pre || ch->rank >= SC_RANK_CONFIG)
			continue;
		json_t *obj = json_loads(ch->text, 0, NULL);
		json_t *view = json_is_object(obj) ? sc__world_view(ch->rank, obj) : NULL;
		decode_view(view, &ch->pre, &ch->why);
		if (ch->rank == SC_RANK_NODE && obj)
			node_extras(obj, &ch->address, &ch->drained);
		if (ch->rank == SC_RANK_JOB && obj)
			ch->plain_reason = plain_pending(obj);
		ch->prepared = true;
		p->decoded++;
		json_decref(view);
		json_decref(obj);
	}
	return NULL;
}

/* Decodes every change of a full load, split over the cores: at restart
 * every object is decoded once, the longest part of getting ready. */
static size_t prepare_all(sc_changes_t *c)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nt = ncpu < 1 ? 1 : ncpu > 4 ? 4 : (size_t)ncpu, decoded = 0;
	if (c->n < 1000)
		nt = 1;
	prep_t parts[4];
	pthread_t th[4];
	bool started[4] = {false};
	for (size_t t = 0; t < nt; t++) {
		parts[t] = (prep_t){c->v, c->n * t / nt, c->n * (t + 1) / nt, 0};
		if (t > 0)
			started[t] = pthread_create(&th[t], NULL, prepare, &parts[t]) == 0;
	}
	prepare(&parts[0]);
	for (size_t t = 1; t < nt; t++) {
		if (started[t])
			pthread_join(th[t], NULL);
		else
			prepare(&parts[t]);
	}
	for (size_t t = 0; t < nt; t++)
		decoded += parts[t].decoded;
	return decoded;
}

static sc_wobj_t *wobj_new(sc_change_t *ch)
{
	sc_wobj_t *o = sc_xcalloc(1, sizeof(*o));
	o->rank = ch->rank;
	o->key = ch->key;
	ch->key = NULL;
	const char *slash = strrchr(o->key, '/');
	o->name = slash ? slash + 1 : o->key;
	o->slot = -1;
	return o;
}

/* ---------------------------------------------------------------------
 * A batch of changes: one merge walk per kind
 * ------------------------------------------------------------------- */

static int cmp_change(const void *a, const void *b)
{
	const sc_change_t *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return strcmp(x->key, y->key);
}

static void push(sc_wobj_t ***nv, size_t *nn, size_t *ncap, sc_wobj_t *o)
{
	if (*nn == *ncap) {
		*ncap = *ncap ? *ncap * 2 : 256;
		*nv = sc_xreallocarray(*nv, *ncap, sizeof(**nv));
	}
	(*nv)[(*nn)++] = o;
}

/* Applies changes [a, b) of rank r (sorted). */
static void apply_rank(sc_world_t *w, int r, sc_change_t *ch, size_t nch, bool full,
                       size_t *decoded)
{
	sc_wobj_t **old = w->v[r], **nv = NULL;
	size_t nold = w->n[r], nn = 0, ncap = 0, i = 0, k = 0;
	while (i < nold || k < nch) {
		int c = i == nold ? 1 : k == nch ? -1 : strcmp(old[i]->key, ch[k].key);
		if (c < 0) {
			/* Not in a full listing: it is gone. */
			if (full) {
				wobj_free(old[i++]);
				w->dirty = true;
			} else {
				push(&nv, &nn, &ncap, old[i++]);
			}
			continue;
		}
		sc_change_t *x = &ch[k++];
		sc_wobj_t *o = c == 0 ? old[i++] : NULL;
		if (!x->text) { /* deleted */
			if (o) {
				wobj_free(o);
				w->dirty = true;
			}
			continue;
		}
		if (!o) {
			o = wobj_new(x);
			w->dirty = true;
		}
		if (update(o, x, decoded))
			w->dirty = true;
		push(&nv, &nn, &ncap, o);
	}
	free(old);
	w->v[r] = nv;
	w->n[r] = nn;
	w->cap[r] = ncap;
}

/* ---------------------------------------------------------------------
 * References and the snapshot's arrays
 * ------------------------------------------------------------------- */

static void set_ref(sc_wobj_t *o, char *why)
{
	free(o->ref_why);
	o->ref_why = why;
}

static char *ref_msg(const char *kind, const char *name, const char *path, const char *fmt,
                     const char *arg)
{
	char msg[800], what[400];
	snprintf(what, sizeof(what), fmt, arg);
	snprintf(msg, sizeof(msg), "%s %s: %s: %s", kind, name, path, what);
	return sc_xstrdup(msg);
}

/* Valid queues: decoded, with a parent that is valid itself (so a queue
 * below a missing or refused one is left out too) and no cycle. Queues
 * are few; the walk repeats until nothing more is excluded. */
static void check_queues(sc_world_t *w, sc_strmap_t *names, bool *has_child)
{
	sc_wobj_t **q = w->v[SC_RANK_QUEUE];
	size_t n = w->n[SC_RANK_QUEUE];
	for (size_t i = 0; i < n; i++)
		set_ref(q[i], NULL);
	for (bool again = true; again;) {
		again = false;
		sc_strmap_free(names);
		if (sc_strmap_init(names, n + 1) < 0)
			sc_oom();
		for (size_t i = 0; i < n; i++)
			if (q[i]->dec && !q[i]->ref_why)
				sc_strmap_put(names, sc_manifest_obj_queue(q[i]->dec)->name,
				              (uint32_t)i);
		for (size_t i = 0; i < n; i++) {
			const sc_queue_spec_t *qs =
			    q[i]->dec ? sc_manifest_obj_queue(q[i]->dec) : NULL;
			if (!qs || q[i]->ref_why || !qs->parent)
				continue;
			long p = sc_strmap_get(names, qs->parent);
			size_t steps = 0;
			for (long at = p; at >= 0 && steps <= n; steps++) {
				const sc_queue_spec_t *as = sc_manifest_obj_queue(q[at]->dec);
				at = as->parent ? sc_strmap_get(names, as->parent) : -1;
				if (at == (long)i)
					steps = n + 1;
			}
			if (p < 0)
				set_ref(q[i],
				        ref_msg("Queue", qs->name, "spec.parentQueue",
				                "parent queue \"%s\" does not exist", qs->parent));
			else if (steps > n)
				set_ref(q[i],
				        ref_msg("Queue", qs->name, "spec.parentQueue",
				                "queue \"%s\" is its own ancestor", qs->name));
			again |= q[i]->ref_why != NULL;
		}
	}
	for (size_t i = 0; i < n; i++) {
		const sc_queue_spec_t *qs = q[i]->dec ? sc_manifest_obj_queue(q[i]->dec) : NULL;
		long p = qs && !q[i]->ref_why && qs->parent ? sc_strmap_get(names, qs->parent) : -1;
		if (p >= 0)
			has_child[p] = true;
	}
}

/* A job's (or deployment's) references; why stays NULL when they hold. */
static char *job_refs(const sc_wobj_t *o, const sc_job_spec_t *j, const sc_strmap_t *queues,
                      const bool *has_child, const sc_strmap_t *classes,
                      const sc_strmap_t *job_names)
{
	const char *kind = o->rank == SC_RANK_DEPLOY ? "Deployment" : "Job";
	long q = j->queue ? sc_strmap_get(queues, j->queue) : -1;
	if (q < 0)
		return ref_msg(kind, o->name, "spec.queue", "queue \"%s\" does not exist",
		               j->queue ? j->queue : "");
	if (has_child[q])
		return ref_msg(kind, o->name, "spec.queue",
		               "queue \"%s\" has child queues; jobs go to leaf queues", j->queue);
	if (j->priority_class && sc_strmap_get(classes, j->priority_class) < 0 &&
	    !sc_manifest_builtin_class(j->priority_class))
		return ref_msg(kind, o->name, "spec.priorityClass",
		               "priority class \"%s\" does not exist", j->priority_class);
	if (o->rank == SC_RANK_DEPLOY && sc_strmap_get(job_names, j->name) >= 0)
		return ref_msg(kind, o->name, "metadata.name", "a Job named \"%s\" already exists",
		               j->name);
	return NULL;
}

#define GROW(arr, n, type) (arr = sc_xreallocarray(arr, (n) + 1, sizeof(type)))

static void build_arrays(sc_world_t *w)
{
	sc_strmap_t queues = {0}, classes = {0}, job_names = {0};
	size_t nq = w->n[SC_RANK_QUEUE];
	bool *has_child = sc_xcalloc(nq + 1, sizeof(bool));
	check_queues(w, &queues, has_child);
	/* Jobs' names are looked up only for deployments (job_refs): without
	 * any, 100,000 inserts per rebuild at 10k nodes are saved. */
	bool deps = w->n[SC_RANK_DEPLOY] > 0;
	if (sc_strmap_init(&classes, w->n[SC_RANK_CLASS] + 1) < 0 ||
	    sc_strmap_init(&job_names, deps ? w->n[SC_RANK_JOB] + 1 : 1) < 0)
		sc_oom();
	/* Nodes. */
	GROW(w->nodes, w->n[SC_RANK_NODE], sc_node_spec_t);
	w->nnodes = 0;
	w->drain_hash = 0;
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < w->n[SC_RANK_NODE]; i++) {
		sc_wobj_t *o = w->v[SC_RANK_NODE][i];
		o->slot = -1;
		if (o->drained) {
			for (const char *p = o->name; *p; p++)
				h = (h ^ (unsigned char)*p) * 1099511628211ULL;
			/* separator, and the kind of mark */
			h = (h ^ (o->drained == SC_DRAINED_DRAIN ? 0xff : 0xfe)) * 1099511628211ULL;
			w->drain_hash = h;
		}
		if (!o->dec)
			continue;
		o->slot = (long)w->nnodes;
		w->nodes[w->nnodes++] = *sc_manifest_obj_node(o->dec);
	}
	/* Queues. */
	GROW(w->queues, nq, sc_queue_spec_t);
	w->nqueues = 0;
	for (size_t i = 0; i < nq; i++) {
		sc_wobj_t *o = w->v[SC_RANK_QUEUE][i];
		o->slot = -1;
		if (!o->dec || o->ref_why)
			continue;
		o->slot = (long)w->nqueues;
		w->queues[w->nqueues++] = *sc_manifest_obj_queue(o->dec);
	}
	/* Priority classes. */
	GROW(w->classes, w->n[SC_RANK_CLASS], sc_prio_class_t);
	w->nclasses = 0;
	for (size_t i = 0; i < w->n[SC_RANK_CLASS]; i++) {
		sc_wobj_t *o = w->v[SC_RANK_CLASS][i];
		o->slot = -1;
		if (!o->dec)
			continue;
		o->slot = (long)w->nclasses;
		w->classes[w->nclasses] = *sc_manifest_obj_class(o->dec);
		sc_strmap_put(&classes, w->classes[w->nclasses].name, 1);
		w->nclasses++;
	}
	/* Jobs, then deployments (which decode into serving jobs). */
	size_t nj = w->n[SC_RANK_JOB] + w->n[SC_RANK_DEPLOY];
	GROW(w->jobs, nj, sc_job_spec_t);
	GROW(w->job_obj, nj, sc_wobj_t *);
	w->njobs = 0;
	for (int r = SC_RANK_JOB; r <= SC_RANK_DEPLOY; r++)
		for (size_t i = 0; i < w->n[r]; i++) {
			sc_wobj_t *o = w->v[r][i];
			const sc_job_spec_t *j = o->dec ? sc_manifest_obj_job(o->dec) : NULL;
			o->slot = -1;
			if (!j) {
				set_ref(o, NULL);
				continue;
			}
			set_ref(o, job_refs(o, j, &queues, has_child, &classes, &job_names));
			if (o->ref_why)
				continue;
			if (r == SC_RANK_JOB && deps)
				sc_strmap_put(&job_names, o->name, 1);
			o->slot = (long)w->njobs;
			w->job_obj[w->njobs] = o;
			w->jobs[w->njobs++] = *j;
		}
	/* Jobs loaded with a plain pending status: settled on that reason
	 * (the plan compares it with the next cycle's). */
	for (int r = SC_RANK_JOB; r <= SC_RANK_DEPLOY; r++)
		for (size_t i = 0; i < w->n[r]; i++) {
			sc_wobj_t *o = w->v[r][i];
			if (o->settled || !o->settled_reason)
				continue;
			const char *why = o->dec_why ? o->dec_why : o->ref_why;
			free(o->settled_why);
			o->settled_why = why ? sc_xstrdup(why) : NULL;
			o->settled_drain = w->drain_hash;
			o->settled_pending = true;
			o->settled = true;
		}
	sc_strmap_free(&queues);
	sc_strmap_free(&classes);
	sc_strmap_free(&job_names);
	free(has_child);
	w->dirty = false;
	w->gen++;
}

/* The snapshot's config: the defaults with the cluster's SchedulerConfig
 * and Topology applied (the API let each in only after the decoder took
 * it); read together, as `schedule -f` reads them from a file. One that the
 * decoder refuses now (stored by an older release, say) is left out, said
 * in the log, and its defaults apply: the loop never stops for it. */
static void build_config(sc_world_t *w)
{
	sc_manifest_error_t err;
	sc_manifest_set_t *set = sc_manifest_set_new();
	sc_snapshot_t snap;
	char msg[1400];
	if (!set)
		sc_oom();
	for (int r = SC_RANK_CONFIG; r <= SC_RANK_TOPOLOGY; r++)
		for (size_t i = 0; i < w->n[r]; i++) {
			json_t *obj = json_loads(w->v[r][i]->text, 0, NULL);
			memset(&err, 0, sizeof(err));
			snprintf(err.msg, sizeof(err.msg), "the stored value is not a JSON object");
			int rc = obj ? sc_manifest_add_json(set, obj, &err) : SC_EINVAL;
			json_decref(obj);
			if (rc == SC_ENOMEM)
				sc_oom();
			if (rc < 0)
				sc_log_error("%s is left out of the scheduler's config: %s",
				             w->v[r][i]->key,
				             sc_manifest_error_format(&err, msg, sizeof(msg)));
		}
	int rc = sc_manifest_snapshot(set, 0, &snap, &err);
	if (rc == SC_ENOMEM)
		sc_oom();
	sc_manifest_set_free(w->config_set);
	w->config_set = NULL;
	sc_config_default(&w->config);
	if (rc < 0) {
		sc_log_error("the scheduler's config is refused, defaults apply: %s",
		             sc_manifest_error_format(&err, msg, sizeof(msg)));
		sc_manifest_set_free(set);
	} else {
		w->config = snap.config;
		w->config_set = set;
	}
	w->config_dirty = false;
	w->gen++;
}

void sc__world_apply(sc_world_t *w, sc_changes_t *c, size_t *decoded)
{
	*decoded = 0;
	if (c->full)
		*decoded += prepare_all(c);
	if (c->n > 1) /* qsort's array may not be NULL, even empty */
		qsort(c->v, c->n, sizeof(*c->v), cmp_change);
	size_t a = 0;
	for (int r = 0; r < SC_RANKS; r++) {
		size_t b = a;
		while (b < c->n && c->v[b].rank == r)
			b++;
		if (b > a || c->full)
			apply_rank(w, r, c->v + a, b - a, c->full, decoded);
		if ((b > a || c->full) && r >= SC_RANK_CONFIG)
			w->config_dirty = true;
		a = b;
	}
	if (w->dirty)
		build_arrays(w);
	if (w->config_dirty)
		build_config(w);
}

const sc_snapshot_t *sc__world_snapshot(sc_world_t *w, int64_t now)
{
	w->snap = (sc_snapshot_t){
	    .nodes = w->nodes,
	    .nnodes = w->nnodes,
	    .queues = w->queues,
	    .nqueues = w->nqueues,
	    .classes = w->classes,
	    .nclasses = w->nclasses,
	    .jobs = w->jobs,
	    .njobs = w->njobs,
	    .now = now,
	    .config = w->config,
	};
	return &w->snap;
}

/* The object a core message names: "queue NAME: ..." or "job NAME: ...". */
static sc_wobj_t *named(sc_world_t *w, const char *msg)
{
	static const struct {
		const char *prefix;
		int rank;
	} forms[] = {{"queue ", SC_RANK_QUEUE}, {"job ", SC_RANK_JOB}, {"job ", SC_RANK_DEPLOY}};
	for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
		size_t pl = strlen(forms[f].prefix);
		if (strncmp(msg, forms[f].prefix, pl) != 0)
			continue;
		size_t len = strcspn(msg + pl, ": ");
		for (size_t i = 0; i < w->n[forms[f].rank]; i++) {
			sc_wobj_t *o = w->v[forms[f].rank][i];
			if (o->slot >= 0 && strlen(o->name) == len &&
			    strncmp(o->name, msg + pl, len) == 0)
				return o;
		}
	}
	return NULL;
}

int sc__world_exclude(sc_world_t *w, const char *msg)
{
	sc_wobj_t *o = named(w, msg);
	if (!o)
		return 0;
	/* Kept until the object changes (its decoding is then redone). */
	set_dec(o, NULL, sc_xstrdup(msg));
	memset(o->vh, 0, sizeof(o->vh));
	o->vh_ok = true; /* decoded again at its next change, whatever it is */
	build_arrays(w);
	return 1;
}

uint64_t sc__world_gen(const sc_world_t *w)
{
	return w->gen;
}

sc_wobj_t *const *sc__world_objs(const sc_world_t *w, int rank, size_t *n)
{
	*n = w->n[rank];
	return w->v[rank];
}

uint64_t sc__world_drain_hash(const sc_world_t *w)
{
	return w->drain_hash;
}

json_t *sc__world_drained(const sc_world_t *w)
{
	json_t *set = json_object();
	for (size_t i = 0; i < w->n[SC_RANK_NODE]; i++)
		if (w->v[SC_RANK_NODE][i]->drained)
			json_object_set_new(set, w->v[SC_RANK_NODE][i]->name,
			                    w->v[SC_RANK_NODE][i]->drained == SC_DRAINED_DRAIN
			                        ? json_true()
			                        : json_string("scale-down"));
	return set;
}

size_t sc__world_bytes(const sc_world_t *w)
{
	size_t b = sizeof(*w);
	for (int r = 0; r < SC_RANKS; r++)
		for (size_t i = 0; i < w->n[r]; i++) {
			const sc_wobj_t *o = w->v[r][i];
			b += sizeof(*o) + strlen(o->key) + (o->text ? strlen(o->text) : 0);
		}
	return b + (w->nnodes * sizeof(sc_node_spec_t)) + (w->njobs * sizeof(sc_job_spec_t));
}
