/* PodGroup and Queue status, written back the way KAI Scheduler's users read
 * it (see k8s_int.h; docs/KUBERNETES.md lists the fields):
 *
 *   PodGroup  status.phase (Pending until minMember pods run, then Running),
 *             running, pending, resourcesStatus.{allocated,
 *             allocatedNonPreemptible,requested}, and schedulingConditions:
 *             while the gang waits, one UnschedulableOnNodePool condition
 *             (reason Unschedulable, the core's explanation as its message,
 *             transitionID counting up, as KAI writes it), removed once
 *             minMember pods are bound; a Warning Event "Unschedulable" on
 *             the PodGroup when that condition is written.
 *   Queue     status.{allocated,allocatedNonPreemptible,requested} summed over
 *             its pods and its child queues, and childQueues.
 *
 * Resources are Kubernetes quantities under cpu, memory and nvidia.com/gpu
 * (a share counts its fraction of a device), all three always written so
 * that a merge patch replaces every one.
 *
 * Writes. The desired status is compared with the status the watch shows
 * (two digests: one without condition messages, one with): nothing is
 * written when they agree. Otherwise one merge patch of the status
 * subresource, carrying metadata.resourceVersion as last seen, so that the
 * API server refuses it (409) when someone else wrote in between: the
 * patch replaces the schedulingConditions array, and other node pools'
 * conditions in it must not be lost. After a 409 nothing is sent for the
 * object until the watch shows a newer version (or CONFLICT_WAIT passed).
 * An object is written at most every STATUS_GAP seconds, and only every
 * MESSAGE_GAP when just a message changed (explanations count nodes, so
 * they move with the cluster). A CRD without the status subresource (a 404
 * while a list of that name still finds the object) or missing RBAC (403) turns
 * that kind's status writes off for NO_WRITE_RETRY seconds, with one
 * warning that says why. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/parse.h"
#include "k8s/k8s_int.h"
#include "starcloud/error.h"

#define STATUS_GAP 2.0
#define MESSAGE_GAP 10.0
#define RESEND_AFTER 30.0 /* sent, but the watch never showed it */
#define CONFLICT_WAIT 30.0
#define NO_WRITE_RETRY 300.0
#define NODE_POOL "default" /* KAI's name when node pools are not used */
#define PG_API "scheduling.run.ai/v2alpha2"
#define MAX_DEPTH 64 /* queue tree walks: a cycle in parentQueue must end */

enum { K_GROUP = 0, K_QUEUE, K_COUNT };
enum { R_ALLOC = 0, R_ALLOC_NP, R_REQ, R_COUNT };

typedef struct sent {
	char *key; /* object key; first: kmap keys are borrowed from values */
	char *full;
	char *sent_rv;     /* the resourceVersion that write was conditional on */
	double at;         /* monotonic time of the last write */
	char *conflict_rv; /* the version a 409 answered, or NULL */
	double conflict_at;
} sent_t;

/* After a 404: is the object there (then its CRD serves no status)? */
typedef struct probe {
	sc_kstatus_t *s;
	int kind;
	sc_hcli_req_t *req; /* NULL when none is under way */
} probe_t;

struct sc_kstatus {
	sc_k8s_t *k;
	sc_kmap_t sent[K_COUNT];
	double off_until[K_COUNT]; /* no status subresource, or no RBAC */
	probe_t probe[K_COUNT];
	unsigned long warned;
	bool deferred;
};

/* What a PodGroup or Queue holds this cycle. */
typedef struct acc {
	char *key; /* first */
	int64_t cpu[R_COUNT], mem[R_COUNT], gpu[R_COUNT];
	int running, pending, bound;
	const char *reason; /* the pending reason this cycle (borrowed), or NULL */
} acc_t;

static const char *const kind_name[K_COUNT] = {"PodGroup", "Queue"};
static const char *const crd_name[K_COUNT] = {"podgroups.scheduling.run.ai",
                                              "queues.scheduling.run.ai"};

/* ---- quantities --------------------------------------------------------- */

static json_t *milli_qty(int64_t milli, bool as_milli)
{
	char buf[48];
	if (milli % 1000 == 0)
		snprintf(buf, sizeof(buf), "%lld", (long long)(milli / 1000));
	else if (as_milli)
		snprintf(buf, sizeof(buf), "%lldm", (long long)milli);
	else {
		/* "0.5", "1.25": what KAI writes for a share */
		snprintf(buf, sizeof(buf), "%lld.%03lld", (long long)(milli / 1000),
		         (long long)(milli % 1000));
		size_t n = strlen(buf);
		while (buf[n - 1] == '0')
			buf[--n] = '\0';
	}
	return json_string(buf);
}

static json_t *res_list(const acc_t *a, int r)
{
	char mem[32];
	snprintf(mem, sizeof(mem), "%lld", (long long)a->mem[r]);
	return json_pack("{s:o,s:s,s:o}", "cpu", milli_qty(a->cpu[r], true), "memory", mem,
	                 "nvidia.com/gpu", milli_qty(a->gpu[r], false));
}

static json_t *resources(const acc_t *a)
{
	return json_pack("{s:o,s:o,s:o}", "allocated", res_list(a, R_ALLOC),
	                 "allocatedNonPreemptible", res_list(a, R_ALLOC_NP), "requested",
	                 res_list(a, R_REQ));
}

/* ---- digests ------------------------------------------------------------ */

/* The part of a status this scheduler writes, as sorted compact JSON: the
 * same function reads the status the watch shows and the one wanted, so
 * equal digests mean nothing to write. */
static char *digest(json_t *st, int kind, bool with_msg)
{
	json_t *d = json_object();
	static const char *const group_keys[] = {"phase", "running", "pending", "resourcesStatus",
	                                         NULL};
	static const char *const queue_keys[] = {"allocated", "allocatedNonPreemptible",
	                                         "requested", "childQueues", NULL};
	for (const char *const *f = kind == K_GROUP ? group_keys : queue_keys; *f; f++) {
		json_t *v = json_object_get(st, *f);
		if (v)
			json_object_set(d, *f, v);
	}
	if (kind == K_GROUP) {
		json_t *cs = json_array(), *c;
		size_t i;
		json_array_foreach(json_object_get(st, "schedulingConditions"), i, c)
		{
			json_t *e = json_object();
			static const char *const ck[] = {"type",   "nodePool", "reason",
			                                 "status", "message",  NULL};
			for (const char *const *f = ck; *f && (with_msg || f[1]); f++)
				if (json_object_get(c, *f))
					json_object_set(e, *f, json_object_get(c, *f));
			json_array_append_new(cs, e);
		}
		json_object_set_new(d, "schedulingConditions", cs);
	}
	char *s = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(d);
	if (!s)
		sc_oom();
	return s;
}

/* ---- gathering ---------------------------------------------------------- */

static acc_t *acc_of(sc_kmap_t *m, const char *key)
{
	acc_t *a = sc_kmap_get(m, key);
	if (!a) {
		a = sc_xcalloc(1, sizeof(*a));
		a->key = sc_xstrdup(key);
		sc_kmap_put(m, a->key, a);
	}
	return a;
}

static void accs_free(sc_kmap_t *m)
{
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(m, &it);) {
		free(((acc_t *)it.val)->key);
		free(it.val);
	}
	sc_kmap_free(m);
}

static void add_res(acc_t *a, int r, const sc_kpod_t *p, int64_t gpu_milli)
{
	a->cpu[r] += p->req.cpu_milli;
	a->mem[r] += p->req.memory;
	a->gpu[r] += gpu_milli;
}

/* Is a pod of group g (NULL: none) preemptible? As kworld.c decides it:
 * the group's preemptibility, else its class (KAI: below 100). */
static bool preemptible(const sc_k8s_t *k, const sc_kgroup_t *g, const sc_kpod_t *p)
{
	if (g && g->preemptible >= 0)
		return g->preemptible == 1;
	const char *cls = g && g->prio_class ? g->prio_class : p->prio_class;
	const sc_kclass_t *c = cls ? sc_kmap_get(&k->cache.classes, cls) : NULL;
	if (c)
		return c->value < 100;
	if (cls)
		return p->priority < 100;
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&k->cache.classes, &it);)
		if (((sc_kclass_t *)it.val)->global_default)
			return ((sc_kclass_t *)it.val)->value < 100;
	return true; /* the core's "normal" (50) */
}

/* One pod of ours into its group's and its queue's sums. */
static void add_pod(sc_k8s_t *k, sc_kmap_t *groups, sc_kmap_t *queues, sc_kpod_t *p)
{
	char gkey[600];
	const sc_kgroup_t *g = NULL;
	if (p->group) {
		snprintf(gkey, sizeof(gkey), "%s/%s", p->ns, p->group);
		g = sc_kmap_get(&k->cache.groups, gkey);
	}
	const char *q = g && g->queue ? g->queue : !g && p->queue ? p->queue : k->o.default_queue;
	const sc_klocal_t *l = sc_kmap_get(&k->local, p->key);
	if (l && l->uid && p->uid && strcmp(l->uid, p->uid) != 0)
		l = NULL;
	bool bound = p->node || (l && l->kind == SC_KL_BINDING);
	int share = p->node ? p->share_milli : l ? l->share_milli : 0;
	int64_t gpu = p->req.gpus ? (int64_t)p->req.gpus * SC_GPU_MILLI
	              : share > 0 ? share
	                          : p->req.gpu_milli;
	bool np = !preemptible(k, g, p);
	acc_t *as[2] = {g ? acc_of(groups, g->key) : NULL, acc_of(queues, q)};
	for (int i = 0; i < 2; i++) {
		acc_t *a = as[i];
		if (!a)
			continue;
		add_res(a, R_REQ, p, gpu);
		if (bound) {
			a->bound++;
			add_res(a, R_ALLOC, p, gpu);
			if (np)
				add_res(a, R_ALLOC_NP, p, gpu);
		}
		if (p->phase == SC_KP_RUNNING)
			a->running++;
		else
			a->pending++;
	}
}

/* The pending reason of each group this cycle: the core's, or why the
 * world held its pods back. */
static void add_reasons(sc_kmap_t *groups, const sc_kworld_t *world, const sc_decisions_t *d)
{
	char gkey[600];
	for (size_t i = 0; d && i < d->npending; i++) {
		size_t j = d->pending[i].job;
		if (world->foreign[j] || world->first[j] == world->first[j + 1])
			continue;
		const sc_kpod_t *p = world->pods[world->first[j]];
		if (!p->group)
			continue;
		snprintf(gkey, sizeof(gkey), "%s/%s", p->ns, p->group);
		acc_t *a = sc_kmap_get(groups, gkey);
		if (a && !a->reason)
			a->reason =
			    d->pending[i].reason ? d->pending[i].reason : "not scheduled yet";
	}
	for (size_t i = 0; i < world->nheld; i++) {
		const sc_kpod_t *p = world->held[i].pod;
		if (!p->group || p->node)
			continue;
		snprintf(gkey, sizeof(gkey), "%s/%s", p->ns, p->group);
		acc_t *a = sc_kmap_get(groups, gkey);
		if (a && !a->reason)
			a->reason = world->held[i].reason;
	}
}

/* Parents' sums include their children's (KAI's queue status). */
static void roll_up(sc_k8s_t *k, sc_kmap_t *queues)
{
	size_t n = 0;
	acc_t **leaf = sc_xcalloc(queues->len + 1, sizeof(*leaf));
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(queues, &it);)
		leaf[n++] = it.val;
	/* Copies first: adding to a parent must not be added again from it. */
	acc_t *own = sc_xcalloc(n + 1, sizeof(*own));
	for (size_t i = 0; i < n; i++)
		own[i] = *leaf[i];
	for (size_t i = 0; i < n; i++) {
		const sc_kqueue_t *q = sc_kmap_get(&k->cache.queues, own[i].key);
		for (int depth = 0; q && q->parent && depth < MAX_DEPTH; depth++) {
			acc_t *pa = acc_of(queues, q->parent);
			for (int r = 0; r < R_COUNT; r++) {
				pa->cpu[r] += own[i].cpu[r];
				pa->mem[r] += own[i].mem[r];
				pa->gpu[r] += own[i].gpu[r];
			}
			q = sc_kmap_get(&k->cache.queues, q->parent);
		}
	}
	free(own);
	free(leaf);
}

/* ---- writing ------------------------------------------------------------ */

static sent_t *sent_of(sc_kstatus_t *s, int kind, const char *key)
{
	sent_t *e = sc_kmap_get(&s->sent[kind], key);
	if (!e) {
		e = sc_xcalloc(1, sizeof(*e));
		e->key = sc_xstrdup(key);
		sc_kmap_put(&s->sent[kind], e->key, e);
	}
	return e;
}

static void sent_free(sent_t *e)
{
	if (!e)
		return;
	free(e->key);
	free(e->full);
	free(e->sent_rv);
	free(e->conflict_rv);
	free(e);
}

static void turn_off(sc_kstatus_t *s, int kind, const char *why, const char *detail)
{
	if (s->off_until[kind] < sc__k8s_now())
		sc_log_warn("%s status not written for %.0f s: %s (%s)", kind_name[kind],
		            NO_WRITE_RETRY, why, detail);
	s->off_until[kind] = sc__k8s_now() + NO_WRITE_RETRY;
}

static void probe_done(int status, const char *body, size_t len, void *ud)
{
	probe_t *pr = ud;
	pr->req = NULL;
	if (status != 200)
		return; /* asked again at the next 404 */
	json_t *j = json_loadb(body, len, 0, NULL);
	bool there = json_array_size(json_object_get(j, "items")) > 0;
	json_decref(j);
	if (there)
		turn_off(pr->s, pr->kind,
		         "the CRD has no status subresource (spec.versions[].subresources.status)",
		         crd_name[pr->kind]);
}

/* The API answers 404 alike for an object deleted meanwhile and for a CRD
 * that serves no status subresource; a list of that one name (list is
 * granted, get is not) tells them apart. */
static void probe(sc_kstatus_t *s, int kind, const char *key)
{
	probe_t *pr = &s->probe[kind];
	char *path, name[600];
	const char *slash = kind == K_GROUP ? strchr(key, '/') : NULL;
	if (pr->req || (kind == K_GROUP && !slash))
		return;
	sc__k8s_escape(slash ? slash + 1 : key, name, sizeof(name));
	int n = slash ? asprintf(&path,
	                         "/apis/" PG_API "/namespaces/%.*s/podgroups?fieldSelector="
	                         "metadata.name%%3D%s&limit=1",
	                         (int)(slash - key), key, name)
	              : asprintf(&path,
	                         "/apis/scheduling.run.ai/v2/queues?fieldSelector="
	                         "metadata.name%%3D%s&limit=1",
	                         name);
	if (n < 0)
		sc_oom();
	pr->s = s;
	pr->kind = kind;
	pr->req = sc__k8s_request(s->k, "GET", path, NULL, NULL, 0, 30000, 0, NULL, probe_done, pr);
	free(path);
}

static void patched(sc_k8s_t *k, int kind, const char *key, int status, const char *body,
                    size_t len)
{
	sc_kstatus_t *s = k->status;
	sent_t *e = sc_kmap_get(&s->sent[kind], key);
	char msg[300];
	if (status >= 200 && status < 300) {
		k->st.status_written++;
		return;
	}
	if (status == 409) {
		/* Written by someone else since we read it: wait for the
		 * watch to show that version, then decide again. */
		k->st.status_conflicts++;
		if (e) {
			/* The version the refused write was made on: the watch
			 * may have shown the newer one before this answer. */
			free(e->conflict_rv);
			e->conflict_rv = sc_xstrdup(e->sent_rv ? e->sent_rv : "");
			e->conflict_at = sc__k8s_now();
			free(e->full);
			e->full = NULL;
			e->at = 0;
		}
		if (k->st.status_conflicts <= 10)
			sc_log_info("%s %s status: changed by someone else meanwhile (409); "
			            "written again on the newer version",
			            kind_name[kind], key);
		sc__k8s_kick(k);
		return;
	}
	if (status == 404) {
		/* Deleted meanwhile, or no status subresource: until the probe
		 * answers, the object waits STATUS_GAP like any failed write. */
		probe(s, kind, key);
		if (e)
			e->at = sc__k8s_now();
		return;
	}
	if (status == 403) {
		turn_off(s, kind, "RBAC does not allow patching it",
		         sc__k8s_status_msg(body, len, msg, sizeof(msg)));
		sent_free(sc_kmap_del(&s->sent[kind], key));
		return;
	}
	if (s->warned++ < 20)
		sc_log_warn("%s %s status: %s", kind_name[kind], key,
		            status < 0 ? sc_strerror(status)
		                       : sc__k8s_status_msg(body, len, msg, sizeof(msg)));
	if (e)
		e->at = sc__k8s_now(); /* retried after STATUS_GAP */
}

static void group_patched(sc_k8s_t *k, const char *key, int status, const char *body, size_t len)
{
	patched(k, K_GROUP, key, status, body, len);
}

static void queue_patched(sc_k8s_t *k, const char *key, int status, const char *body, size_t len)
{
	patched(k, K_QUEUE, key, status, body, len);
}

/* Whether to write desired over observed now; sets deferred when later. */
static bool due(sc_kstatus_t *s, int kind, const char *key, const sc_kmeta_t *m, json_t *want,
                char **full_out)
{
	double now = sc__k8s_now();
	if (s->off_until[kind] > now)
		return false;
	char *full = digest(want, kind, true);
	char *seen = digest(m->status, kind, true);
	bool same = strcmp(full, seen) == 0;
	free(seen);
	bool msg_only = false;
	if (!same && kind == K_GROUP) {
		char *a = digest(want, kind, false), *b = digest(m->status, kind, false);
		msg_only = strcmp(a, b) == 0;
		free(a);
		free(b);
	}
	sent_t *e = sc_kmap_get(&s->sent[kind], key);
	if (same) {
		sent_free(sc_kmap_del(&s->sent[kind], key));
		free(full);
		return false;
	}
	if (e && e->conflict_rv && m->rv && strcmp(e->conflict_rv, m->rv) == 0 &&
	    now - e->conflict_at < CONFLICT_WAIT) {
		free(full);
		s->deferred = true;
		return false;
	}
	if (e && e->full && strcmp(e->full, full) == 0 && now - e->at < RESEND_AFTER) {
		free(full);
		return false; /* sent; the watch has not shown it yet */
	}
	if (e && now - e->at < (msg_only ? MESSAGE_GAP : STATUS_GAP)) {
		free(full);
		s->deferred = true;
		return false;
	}
	*full_out = full;
	return true;
}

static void sent_mark(sc_kstatus_t *s, int kind, const char *key, const char *rv, char *full)
{
	sent_t *e = sent_of(s, kind, key);
	free(e->full);
	e->full = full;
	free(e->sent_rv);
	e->sent_rv = rv ? sc_xstrdup(rv) : NULL;
	e->at = sc__k8s_now();
	free(e->conflict_rv);
	e->conflict_rv = NULL;
}

static json_t *patch_body(const sc_kmeta_t *m, json_t *status)
{
	json_t *b = json_pack("{s:o}", "status", status);
	if (m->rv)
		json_object_set_new(b, "metadata", json_pack("{s:s}", "resourceVersion", m->rv));
	return b;
}

/* Our condition, kept as the watch shows it when nothing changed in it. */
static json_t *conditions(const sc_kgroup_t *g, const acc_t *a, bool *changed)
{
	json_t *seen = json_object_get(g->meta.status, "schedulingConditions");
	json_t *out = json_array(), *c, *ours = NULL;
	int64_t last_id = 0;
	size_t i;
	*changed = false;
	json_array_foreach(seen, i, c)
	{
		const char *pool = json_string_value(json_object_get(c, "nodePool"));
		const char *tid = json_string_value(json_object_get(c, "transitionID"));
		int64_t id = 0;
		if (tid && sc_parse_i64(tid, 0, INT32_MAX, &id) < 0)
			id = 0; /* KAI, too, counts on from 0 */
		if (id > last_id)
			last_id = id;
		if (pool && strcmp(pool, NODE_POOL) == 0)
			ours = c;
		else
			json_array_append(out, c);
	}
	if (!a->reason) {
		/* Bound (or not decided this cycle): the condition goes once
		 * minMember pods hold their nodes, as the gang is placed. */
		int need = g->min_member > 0 ? g->min_member : 1;
		if (ours && a->bound < need)
			json_array_append(out, ours);
		else
			*changed = ours != NULL;
		return out;
	}
	char msg[1025];
	snprintf(msg, sizeof(msg), "%s", a->reason);
	const char *old = json_string_value(json_object_get(ours, "message"));
	const char *st = json_string_value(json_object_get(ours, "status"));
	const char *rs = json_string_value(json_object_get(ours, "reason"));
	if (ours && old && st && rs && strcmp(old, msg) == 0 && strcmp(st, "True") == 0 &&
	    strcmp(rs, "Unschedulable") == 0) {
		json_array_append(out, ours);
		return out;
	}
	char now[48], id[24];
	sc__k8s_time(now, sizeof(now));
	snprintf(id, sizeof(id), "%lld", (long long)(last_id + 1));
	json_array_append_new(out, json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:[{s:s,s:s}]}", "type",
	                                     "UnschedulableOnNodePool", "nodePool", NODE_POOL,
	                                     "reason", "Unschedulable", "message", msg, "status",
	                                     "True", "transitionID", id, "lastTransitionTime", now,
	                                     "reasons", "reason", "Unschedulable", "message", msg));
	*changed = true;
	return out;
}

static void write_group(sc_kstatus_t *s, const sc_kgroup_t *g, const acc_t *a)
{
	sc_k8s_t *k = s->k;
	bool cond_changed;
	int need = g->min_member > 0 ? g->min_member : 1;
	json_t *want =
	    json_pack("{s:s,s:i,s:i,s:o,s:o}", "phase", a->running >= need ? "Running" : "Pending",
	              "running", a->running, "pending", a->pending, "resourcesStatus", resources(a),
	              "schedulingConditions", conditions(g, a, &cond_changed));
	char *full = NULL;
	if (!due(s, K_GROUP, g->key, &g->meta, want, &full)) {
		json_decref(want);
		return;
	}
	sent_mark(s, K_GROUP, g->key, g->meta.rv, full);
	const char *slash = strchr(g->key, '/');
	char *path;
	if (asprintf(&path, "/apis/" PG_API "/namespaces/%.*s/podgroups/%s/status",
	             (int)(slash - g->key), g->key, g->name) < 0)
		sc_oom();
	sc_kwriter_event_t ev = {PG_API, "PodGroup", "Warning", "Unschedulable", a->reason};
	sc__kwriter_patch(k->writer, g->key, g->meta.uid, path, patch_body(&g->meta, want),
	                  group_patched, cond_changed && a->reason ? &ev : NULL);
}

static int cmp_str(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

static void write_queue(sc_kstatus_t *s, const sc_kqueue_t *q, const acc_t *a)
{
	sc_k8s_t *k = s->k;
	size_t n = 0;
	const char **kids = sc_xcalloc(k->cache.queues.len + 1, sizeof(*kids));
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&k->cache.queues, &it);) {
		const sc_kqueue_t *c = it.val;
		if (c->parent && strcmp(c->parent, q->key) == 0)
			kids[n++] = c->key;
	}
	qsort(kids, n, sizeof(*kids), cmp_str);
	json_t *children = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(children, json_string(kids[i]));
	free(kids);
	json_t *want = json_pack("{s:o,s:o,s:o,s:o}", "allocated", res_list(a, R_ALLOC),
	                         "allocatedNonPreemptible", res_list(a, R_ALLOC_NP), "requested",
	                         res_list(a, R_REQ), "childQueues", children);
	char *full = NULL;
	if (!due(s, K_QUEUE, q->key, &q->meta, want, &full)) {
		json_decref(want);
		return;
	}
	sent_mark(s, K_QUEUE, q->key, q->meta.rv, full);
	char *path;
	if (asprintf(&path, "/apis/scheduling.run.ai/v2/queues/%s/status", q->key) < 0)
		sc_oom();
	sc__kwriter_patch(k->writer, q->key, q->meta.uid, path, patch_body(&q->meta, want),
	                  queue_patched, NULL);
}

bool sc__kstatus_apply(sc_kstatus_t *s, const sc_kworld_t *world, const sc_decisions_t *d)
{
	sc_k8s_t *k = s->k;
	sc_kmap_t groups, queues;
	sc_kmap_init(&groups);
	sc_kmap_init(&queues);
	s->deferred = false;
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&k->cache.pods, &it);) {
		sc_kpod_t *p = it.val;
		if (p->scheduler && strcmp(p->scheduler, k->o.scheduler) == 0 &&
		    (p->phase == SC_KP_PENDING || p->phase == SC_KP_RUNNING) && !p->deleting)
			add_pod(k, &groups, &queues, p);
	}
	add_reasons(&groups, world, d);
	roll_up(k, &queues);
	acc_t none = {0};
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&k->cache.groups, &it);) {
		const sc_kgroup_t *g = it.val;
		const acc_t *a = sc_kmap_get(&groups, g->key);
		write_group(s, g, a ? a : &none);
	}
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&k->cache.queues, &it);) {
		const sc_kqueue_t *q = it.val;
		const acc_t *a = sc_kmap_get(&queues, q->key);
		write_queue(s, q, a ? a : &none);
	}
	/* What was sent for objects now gone. */
	for (int kind = 0; kind < K_COUNT; kind++) {
		const sc_kmap_t *live = kind == K_GROUP ? &k->cache.groups : &k->cache.queues;
		size_t n = 0;
		sent_t **gone = sc_xcalloc(s->sent[kind].len + 1, sizeof(*gone));
		for (sc_kmap_iter_t it = {0}; sc_kmap_next(&s->sent[kind], &it);)
			if (!sc_kmap_get(live, it.key))
				gone[n++] = it.val;
		for (size_t i = 0; i < n; i++)
			sent_free(sc_kmap_del(&s->sent[kind], gone[i]->key));
		free(gone);
	}
	accs_free(&groups);
	accs_free(&queues);
	return s->deferred;
}

bool sc__kstatus_echo(sc_kstatus_t *s, int cache_kind, const char *key)
{
	sc_k8s_t *k = s->k;
	int kind = cache_kind == SC_KK_GROUP ? K_GROUP : K_QUEUE;
	const sc_kmeta_t *m = NULL;
	if (cache_kind == SC_KK_GROUP) {
		const sc_kgroup_t *g = sc_kmap_get(&k->cache.groups, key);
		m = g ? &g->meta : NULL;
	} else if (cache_kind == SC_KK_QUEUE) {
		const sc_kqueue_t *q = sc_kmap_get(&k->cache.queues, key);
		m = q ? &q->meta : NULL;
	}
	const sent_t *e = m ? sc_kmap_get(&s->sent[kind], key) : NULL;
	if (!e || !e->full)
		return false;
	char *seen = digest(m->status, kind, true);
	bool ours = strcmp(seen, e->full) == 0;
	free(seen);
	return ours;
}

void sc__kstatus_drop(sc_kstatus_t *s)
{
	for (int kind = 0; kind < K_COUNT; kind++) {
		for (sc_kmap_iter_t it = {0}; sc_kmap_next(&s->sent[kind], &it);)
			sent_free(it.val);
		sc_kmap_free(&s->sent[kind]);
		sc_kmap_init(&s->sent[kind]);
	}
}

sc_kstatus_t *sc__kstatus_new(sc_k8s_t *k)
{
	sc_kstatus_t *s = sc_xcalloc(1, sizeof(*s));
	s->k = k;
	for (int kind = 0; kind < K_COUNT; kind++)
		sc_kmap_init(&s->sent[kind]);
	return s;
}

void sc__kstatus_free(sc_kstatus_t *s)
{
	if (!s)
		return;
	for (int kind = 0; kind < K_COUNT; kind++)
		sc_hcli_cancel(s->probe[kind].req); /* probe_done runs inside: not 200 */
	sc__kstatus_drop(s);
	for (int kind = 0; kind < K_COUNT; kind++)
		sc_kmap_free(&s->sent[kind]);
	free(s);
}
