/* A cycle's decisions, applied through the API (see k8s_int.h):
 *
 *   binding    POST pods/NAME/binding, with our device annotations on the
 *              Binding (the API server copies them onto the pod). Until the
 *              watch shows the pod bound, local state holds it on its node
 *              so the next cycle does not place it twice.
 *   pipelined  a binding onto resources still held by pods being evicted:
 *              nominated, not bound. It holds its node in the snapshot (so
 *              the core neither places it again nor evicts more for it) and
 *              is bound once no pod on that node is terminating any more:
 *              the reclaimer binds after its victims are gone.
 *   eviction   POST pods/NAME/eviction (policy/v1beta1), so
 *              PodDisruptionBudgets are honoured; a Warning event on the pod
 *              says who needed the room and by which rule. A consolidation
 *              move is only its eviction: Kubernetes cannot move a pod, its
 *              controller makes a new one that is scheduled again.
 *   pending    the PodScheduled condition (False, Unschedulable) carries the
 *              core's explanation; it is patched, with a FailedScheduling
 *              event, only when the text changes.
 * Writes go out at most max_inflight at a time, bindings and evictions
 * first, and only while the lease is valid: the moment it is not, every
 * queued write is dropped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "k8s/k8s_int.h"
#include "starcloud/error.h"
#include "starcloud/manifest.h"

#define MAX_MSG 1024        /* condition and event messages */
#define ACK_GRACE 30.0      /* acked binding/eviction not seen by the watch */
#define WRITE_TIMEOUT 30000 /* ms */
/* A pending pod's explanation counts nodes, so it changes as the cluster
 * does: a pod's condition is rewritten at most every EXPLAIN_EVERY seconds,
 * and at most EXPLAIN_PER_CYCLE conditions are queued per cycle (the rest
 * wait for later cycles), so 10,000 waiting pods cannot turn every cycle
 * into 10,000 writes. */
#define EXPLAIN_EVERY 10.0
#define EXPLAIN_PER_CYCLE 500

enum { OP_BIND = 0, OP_EVICT, OP_STATUS, OP_EVENT, OP_PATCH };

typedef struct kop {
	sc_kwriter_t *w;
	int type;
	char *key, *uid;
	char *path, *body;
	const char *ctype;
	/* The Event to write once the API server accepted the write (a
	 * refused eviction must not say "evicted"). */
	const char *ev_type, *ev_reason;
	char *ev_msg;
	const char *ev_api, *ev_kind;  /* the Event's object (NULL: the Pod) */
	sc_kwriter_patched_fn patched; /* OP_PATCH */
	struct kop *next;
} kop_t;

typedef struct oq {
	kop_t *head, *tail;
	size_t n;
} oq_t;

typedef struct explained {
	char *key; /* first: kmap keys are borrowed from values */
	char *msg;
	double at; /* monotonic time it was sent */
} explained_t;

struct sc_kwriter {
	sc_k8s_t *k;
	oq_t hi, lo;
	kop_t *flying; /* sent, not answered: freed with the writer */
	size_t inflight;
	size_t explained_now; /* conditions queued this cycle */
	unsigned long warned;
};

static char *xstrdup(const char *s)
{
	char *d = sc_xstrdup(s ? s : "");
	return d;
}

/* ---- the queue ---------------------------------------------------------- */

static void op_free(kop_t *op)
{
	free(op->key);
	free(op->uid);
	free(op->path);
	free(op->body);
	free(op->ev_msg);
	free(op);
}

static void push(oq_t *q, kop_t *op)
{
	if (q->tail)
		q->tail->next = op;
	else
		q->head = op;
	q->tail = op;
	q->n++;
}

static kop_t *pop(oq_t *q)
{
	kop_t *op = q->head;
	if (op) {
		q->head = op->next;
		if (!q->head)
			q->tail = NULL;
		q->n--;
		op->next = NULL;
	}
	return op;
}

static void clear(oq_t *q)
{
	kop_t *op;
	while ((op = pop(q)))
		op_free(op);
}

static void pump(sc_kwriter_t *w);
static void event(sc_kwriter_t *w, const char *api, const char *kind, const char *key,
                  const char *uid, const char *type, const char *reason, const char *msg);

static sc_klocal_t *local_of(sc_k8s_t *k, const char *key, const char *uid)
{
	sc_klocal_t *l = sc_kmap_get(&k->local, key);
	if (l && uid && l->uid && strcmp(l->uid, uid) != 0)
		return NULL;
	return l;
}

static void local_drop(sc_k8s_t *k, const char *key)
{
	sc_klocal_free(sc_kmap_del(&k->local, key));
}

static void explained_free(explained_t *e)
{
	if (!e)
		return;
	free(e->key);
	free(e->msg);
	free(e);
}

static void explained_drop(sc_k8s_t *k, const char *key)
{
	explained_free(sc_kmap_del(&k->explained, key));
}

static void drop_nominations(sc_k8s_t *k)
{
	size_t n = 0;
	sc_klocal_t **all = sc_xcalloc(k->local.len + 1, sizeof(*all));
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&k->local, &it);)
		if (((sc_klocal_t *)it.val)->kind == SC_KL_NOMINATED)
			all[n++] = it.val;
	for (size_t i = 0; i < n; i++)
		local_drop(k, all[i]->key);
	free(all);
}

static void op_done(int status, const char *body, size_t len, void *ud)
{
	kop_t *op = ud;
	sc_kwriter_t *w = op->w;
	sc_k8s_t *k = w->k;
	char msg[300];
	bool ok = status >= 200 && status < 300;
	sc_klocal_t *l = local_of(k, op->key, op->uid);
	kop_t **pp = &w->flying;
	while (*pp && *pp != op)
		pp = &(*pp)->next;
	if (*pp)
		*pp = op->next;
	w->inflight--;
	if (status == SC_ECANCELED) {
		op_free(op); /* the client closed at shutdown: nothing more to send */
		return;
	}
	if (ok && op->ev_msg)
		event(w, op->ev_api, op->ev_kind, op->key, op->uid, op->ev_type, op->ev_reason,
		      op->ev_msg);
	switch (op->type) {
	case OP_BIND:
	case OP_EVICT:
		if (ok) {
			if (l)
				l->acked = true;
			if (op->type == OP_BIND)
				k->st.bound++;
			else
				k->st.evicted++;
			break;
		}
		/* Refused (the pod is gone or already bound: 404, 409; a
		 * disruption budget: 429) or lost: forget it; the next cycle
		 * decides again from what the watches show. */
		if (op->type == OP_BIND)
			k->st.bind_failed++;
		else
			k->st.evict_failed++;
		/* A disruption budget refuses the same eviction every cycle:
		 * the first ones are logged, then one in a hundred. */
		unsigned long nf = k->st.bind_failed + k->st.evict_failed;
		if (nf <= 20 || nf % 100 == 0)
			sc_log_warn("%s %s refused: %s",
			            op->type == OP_BIND ? "binding" : "eviction", op->key,
			            status < 0 ? sc_strerror(status)
			                       : sc__k8s_status_msg(body, len, msg, sizeof(msg)));
		if (l)
			local_drop(k, op->key);
		/* A refused eviction leaves its victim running: nominations
		 * that counted on the room are decided again. */
		if (op->type == OP_EVICT)
			drop_nominations(k);
		sc__k8s_kick(k);
		break;
	case OP_STATUS:
		if (ok)
			k->st.patched++;
		else if (status != 404 && w->warned++ < 20)
			sc_log_warn("condition of %s: %s", op->key,
			            status < 0 ? sc_strerror(status)
			                       : sc__k8s_status_msg(body, len, msg, sizeof(msg)));
		if (!ok) /* try again next cycle */
			explained_drop(k, op->key);
		break;
	case OP_PATCH:
		op->patched(k, op->key, status, body, len);
		break;
	default:
		if (ok)
			k->st.events++;
		break;
	}
	op_free(op);
	pump(w);
}

static void pump(sc_kwriter_t *w)
{
	sc_k8s_t *k = w->k;
	while (w->inflight < (size_t)k->o.max_inflight && (w->hi.n || w->lo.n)) {
		if (!sc__k8s_may_write(k)) {
			sc__kwriter_drop(w);
			return;
		}
		kop_t *op = pop(w->hi.n ? &w->hi : &w->lo);
		bool patch = op->type == OP_STATUS || op->type == OP_PATCH;
		sc_hcli_req_t *r =
		    sc__k8s_request(k, patch ? "PATCH" : "POST", op->path, op->ctype, op->body,
		                    strlen(op->body), WRITE_TIMEOUT, 0, NULL, op_done, op);
		if (!r) {
			sc_log_error("cannot start a request for %s", op->key);
			local_drop(k, op->key);
			op_free(op);
			continue;
		}
		op->next = w->flying;
		w->flying = op;
		w->inflight++;
	}
}

static kop_t *enqueue(sc_kwriter_t *w, int type, const char *key, const char *uid, char *path,
                      json_t *body, const char *ctype)
{
	kop_t *op = sc_xcalloc(1, sizeof(*op));
	op->w = w;
	op->type = type;
	op->key = xstrdup(key);
	op->uid = xstrdup(uid);
	op->path = path;
	op->body = json_dumps(body, JSON_COMPACT);
	op->ctype = ctype;
	json_decref(body);
	push(type <= OP_EVICT ? &w->hi : &w->lo, op);
	return op;
}

static char *pod_path(const sc_kpod_t *p, const char *sub)
{
	char *s;
	if (asprintf(&s, "/api/v1/namespaces/%s/pods/%s%s%s", p->ns, p->name, sub ? "/" : "",
	             sub ? sub : "") < 0)
		sc_oom();
	return s;
}

/* ---- writes ------------------------------------------------------------- */

/* An Event about the object key ("namespace/name") of kind (default: a
 * Pod, apiVersion v1). */
static void event(sc_kwriter_t *w, const char *api, const char *kind, const char *key,
                  const char *uid, const char *type, const char *reason, const char *msg)
{
	sc_k8s_t *k = w->k;
	char now[48], gen[300], ns[256], *path;
	const char *slash = strchr(key, '/');
	if (!k->o.events || !slash || (size_t)(slash - key) >= sizeof(ns))
		return;
	snprintf(ns, sizeof(ns), "%.*s", (int)(slash - key), key);
	const char *name = slash + 1;
	snprintf(gen, sizeof(gen), "%.240s.", name);
	sc__k8s_time(now, sizeof(now));
	json_t *ev = json_pack(
	    "{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s,s:s},s:s,s:s%,s:s,s:{s:s},s:s,s:s,s:"
	    "i,s:s,s:s}",
	    "apiVersion", "v1", "kind", "Event", "metadata", "generateName", gen, "namespace", ns,
	    "involvedObject", "apiVersion", api ? api : "v1", "kind", kind ? kind : "Pod",
	    "namespace", ns, "name", name, "uid", uid ? uid : "", "reason", reason, "message", msg,
	    strnlen(msg, MAX_MSG), "type", type, "source", "component", k->o.scheduler,
	    "firstTimestamp", now, "lastTimestamp", now, "count", 1, "reportingComponent",
	    k->o.scheduler, "reportingInstance", k->o.identity);
	if (asprintf(&path, "/api/v1/namespaces/%s/events", ns) < 0)
		sc_oom();
	enqueue(w, OP_EVENT, key, uid, path, ev, NULL);
}

static void send_binding(sc_kwriter_t *w, const sc_kpod_t *p, const sc_klocal_t *l)
{
	char gpus[SC_K8S_MAX_GPUS * 4 + 1] = "", share[16];
	for (int i = 0; i < l->ngpus; i++) {
		size_t n = strlen(gpus);
		snprintf(gpus + n, sizeof(gpus) - n, "%s%d", i ? "," : "", l->gpus[i]);
	}
	json_t *ann = json_object();
	if (l->ngpus)
		json_object_set_new(ann, SC_K8S_ANN_GPUS, json_string(gpus));
	if (l->share_milli) {
		snprintf(share, sizeof(share), "%d", l->share_milli);
		json_object_set_new(ann, SC_K8S_ANN_SHARE, json_string(share));
	}
	json_t *b = json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:o},s:{s:s,s:s,s:s}}", "apiVersion", "v1",
	                      "kind", "Binding", "metadata", "name", p->name, "namespace", p->ns,
	                      "uid", p->uid ? p->uid : "", "annotations", ann, "target",
	                      "apiVersion", "v1", "kind", "Node", "name", l->node);
	kop_t *op = enqueue(w, OP_BIND, p->key, p->uid, pod_path(p, "binding"), b, NULL);
	op->ev_type = "Normal";
	op->ev_reason = "Scheduled";
	if (asprintf(&op->ev_msg, "Successfully assigned %s to %s", p->key, l->node) < 0)
		sc_oom();
}

static kop_t *send_eviction(sc_kwriter_t *w, const sc_kpod_t *p)
{
	json_t *e = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:{s:s}}}", "apiVersion", "policy/v1beta1",
	                      "kind", "Eviction", "metadata", "name", p->name, "namespace", p->ns,
	                      "deleteOptions", "preconditions", "uid", p->uid ? p->uid : "");
	return enqueue(w, OP_EVICT, p->key, p->uid, pod_path(p, "eviction"), e, NULL);
}

/* The explanation on a pending pod, when it changed. */
static void explain(sc_kwriter_t *w, const sc_kpod_t *p, const char *reason)
{
	sc_k8s_t *k = w->k;
	char msg[MAX_MSG + 1];
	snprintf(msg, sizeof(msg), "%s", reason ? reason : "not scheduled yet");
	if (p->cond_unsched && p->cond_msg && strcmp(p->cond_msg, msg) == 0)
		return;
	explained_t *e = sc_kmap_get(&k->explained, p->key);
	double now_s = sc__k8s_now();
	if (e && (strcmp(e->msg, msg) == 0 || now_s - e->at < EXPLAIN_EVERY))
		return;
	if (w->explained_now >= EXPLAIN_PER_CYCLE)
		return;
	w->explained_now++;
	if (!e) {
		e = sc_xcalloc(1, sizeof(*e));
		e->key = xstrdup(p->key);
		sc_kmap_put(&k->explained, e->key, e);
	}
	free(e->msg);
	e->msg = xstrdup(msg);
	e->at = now_s;
	char now[48];
	sc__k8s_time(now, sizeof(now));
	json_t *patch = json_pack("{s:{s:[{s:s,s:s,s:s,s:s,s:s}]}}", "status", "conditions", "type",
	                          "PodScheduled", "status", "False", "reason", "Unschedulable",
	                          "message", msg, "lastTransitionTime", now);
	kop_t *op = enqueue(w, OP_STATUS, p->key, p->uid, pod_path(p, "status"), patch,
	                    "application/strategic-merge-patch+json");
	op->ev_type = "Warning";
	op->ev_reason = "FailedScheduling";
	op->ev_msg = xstrdup(msg);
}

void sc__kwriter_patch(sc_kwriter_t *w, const char *key, const char *uid, char *path, json_t *body,
                       sc_kwriter_patched_fn patched, const sc_kwriter_event_t *ev)
{
	kop_t *op = enqueue(w, OP_PATCH, key, uid, path, body, "application/merge-patch+json");
	op->patched = patched;
	if (ev) {
		op->ev_api = ev->api;
		op->ev_kind = ev->kind;
		op->ev_type = ev->type;
		op->ev_reason = ev->reason;
		op->ev_msg = xstrdup(ev->msg);
	}
	pump(w);
}

/* ---- a cycle's decisions ------------------------------------------------ */

static bool evicted_now(const sc_decisions_t *d, const char *pod)
{
	for (size_t i = 0; i < d->nevictions; i++)
		if (strcmp(d->evictions[i].pod, pod) == 0)
			return true;
	return false;
}

static void apply_binding(sc_kwriter_t *w, const sc_kworld_t *world, const sc_decisions_t *d,
                          const sc_binding_t *b)
{
	sc_k8s_t *k = w->k;
	sc_kpod_t *p = sc_kworld_pod(world, b->pod);
	if (world->foreign[b->job] || !p || p->node || p->deleting || local_of(k, p->key, p->uid))
		return;
	/* Moved by consolidation: its eviction is the whole move here. */
	if (d->nevictions && evicted_now(d, b->pod))
		return;
	sc_klocal_t *l = sc_xcalloc(1, sizeof(*l));
	l->key = xstrdup(p->key);
	l->uid = xstrdup(p->uid);
	l->node = xstrdup(b->node);
	l->kind = b->pipelined ? SC_KL_NOMINATED : SC_KL_BINDING;
	l->since = sc__k8s_now();
	for (size_t i = 0; i < b->ngpus && i < SC_K8S_MAX_GPUS; i++)
		l->gpus[l->ngpus++] = b->gpus[i];
	l->share_milli = b->gpu_milli;
	sc_klocal_free(sc_kmap_put(&k->local, l->key, l));
	if (!b->pipelined)
		send_binding(w, p, l);
}

static void apply_eviction(sc_kwriter_t *w, const sc_kworld_t *world, const sc_eviction_t *e)
{
	sc_k8s_t *k = w->k;
	sc_kpod_t *p = sc_kworld_pod(world, e->pod);
	if (world->foreign[e->job] || !p || p->deleting)
		return;
	sc_klocal_t *l = sc_xcalloc(1, sizeof(*l));
	l->key = xstrdup(p->key);
	l->uid = xstrdup(p->uid);
	l->kind = SC_KL_EVICTING;
	l->since = sc__k8s_now();
	sc_klocal_free(sc_kmap_put(&k->local, l->key, l));
	kop_t *op = send_eviction(w, p);
	op->ev_type = "Warning";
	op->ev_reason = e->action == SC_ACT_PREEMPT ? "Preempted" : "Evicted";
	if (asprintf(&op->ev_msg, "evicted from %s by %s%s%s: %s", e->node ? e->node : "?",
	             sc_eviction_action_name(e->action), e->by ? " for " : "", e->by ? e->by : "",
	             e->reason ? e->reason : "") < 0)
		sc_oom();
}

void sc__kwriter_apply(sc_kwriter_t *w, const sc_kworld_t *world, const sc_decisions_t *d)
{
	sc_k8s_t *k = w->k;
	w->explained_now = 0;
	for (size_t i = 0; i < d->nevictions; i++)
		apply_eviction(w, world, &d->evictions[i]);
	for (size_t i = 0; i < d->nbindings; i++)
		apply_binding(w, world, d, &d->bindings[i]);
	for (size_t i = 0; i < d->npending; i++) {
		const sc_pending_t *pe = &d->pending[i];
		if (world->foreign[pe->job])
			continue;
		for (size_t j = world->first[pe->job]; j < world->first[pe->job + 1]; j++) {
			const sc_kpod_t *p = world->pods[j];
			if (!p->node && !p->deleting && !local_of(k, p->key, p->uid))
				explain(w, p, pe->reason);
		}
	}
	for (size_t i = 0; i < world->nheld; i++)
		if (!world->held[i].pod->node)
			explain(w, world->held[i].pod, world->held[i].reason);
	pump(w);
}

/* ---- between cycles ----------------------------------------------------- */

/* What a node holds now, for deciding whether a nominated pod may be bound:
 * every pod bound there that has not finished (terminating ones too), plus
 * our bindings the watch has not shown yet. */
typedef struct node_use {
	char *key; /* owned; first: kmap keys are borrowed from values */
	bool busy; /* a pod there is terminating or being evicted */
	int64_t cpu, mem, gpu_milli;
} node_use_t;

static int64_t gpu_milli_of(const sc_kpod_t *p, int share_milli)
{
	if (p->req.gpus)
		return (int64_t)p->req.gpus * SC_GPU_MILLI;
	if (share_milli > 0)
		return share_milli;
	return p->req.gpu_milli;
}

static node_use_t *use_of(sc_kmap_t *m, const char *node)
{
	node_use_t *u = sc_kmap_get(m, node);
	if (!u) {
		u = sc_xcalloc(1, sizeof(*u));
		u->key = xstrdup(node);
		sc_kmap_put(m, u->key, u);
	}
	return u;
}

static void add_use(node_use_t *u, const sc_kpod_t *p, int share_milli)
{
	u->cpu += p->req.cpu_milli;
	u->mem += p->req.memory;
	u->gpu_milli += gpu_milli_of(p, share_milli);
}

static void node_usage(sc_k8s_t *k, sc_kmap_t *out)
{
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&k->cache.pods, &it);) {
		sc_kpod_t *p = it.val;
		if (p->phase == SC_KP_SUCCEEDED || p->phase == SC_KP_FAILED)
			continue;
		sc_klocal_t *l = local_of(k, p->key, p->uid);
		if (p->node) {
			node_use_t *u = use_of(out, p->node);
			add_use(u, p, p->share_milli);
			u->busy |= p->deleting || (l && l->kind == SC_KL_EVICTING);
		} else if (l && l->kind == SC_KL_BINDING) {
			add_use(use_of(out, l->node), p, l->share_milli);
		}
	}
}

/* Would pod p fit on node now? Shares are counted per node, not per
 * device: the core chose the device, this is only a guard against binding
 * onto room someone else took meanwhile. */
static bool fits_now(sc_k8s_t *k, node_use_t *u, const sc_kpod_t *p, const sc_klocal_t *l)
{
	const sc_knode_t *n = sc_kmap_get(&k->cache.nodes, l->node);
	if (!n || u->busy)
		return false;
	return u->cpu + p->req.cpu_milli <= n->cpu_milli && u->mem + p->req.memory <= n->memory &&
	       u->gpu_milli + gpu_milli_of(p, l->share_milli) <= (int64_t)n->gpus * SC_GPU_MILLI;
}

void sc__kwriter_reconcile(sc_kwriter_t *w)
{
	sc_k8s_t *k = w->k;
	double now = sc__k8s_now();
	size_t n = 0;
	bool have_nominated = false;
	sc_klocal_t **all = sc_xcalloc(k->local.len + 1, sizeof(*all));
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&k->local, &it);) {
		all[n++] = it.val;
		have_nominated |= ((sc_klocal_t *)it.val)->kind == SC_KL_NOMINATED;
	}
	sc_kmap_t use;
	sc_kmap_init(&use);
	if (have_nominated)
		node_usage(k, &use);
	for (size_t i = 0; i < n; i++) {
		sc_klocal_t *l = all[i];
		sc_kpod_t *p = sc_kmap_get(&k->cache.pods, l->key);
		bool drop = !p || (p->uid && l->uid && strcmp(p->uid, l->uid) != 0);
		if (!drop && l->kind == SC_KL_BINDING)
			drop = p->node || (l->acked && now - l->since > ACK_GRACE);
		else if (!drop && l->kind == SC_KL_EVICTING)
			drop = p->deleting || (l->acked && now - l->since > ACK_GRACE);
		else if (!drop && l->kind == SC_KL_NOMINATED) {
			node_use_t *u = use_of(&use, l->node);
			drop = p->node || p->deleting;
			if (!drop && now - l->since > k->o.nominate_timeout) {
				sc_log_warn("%s: node %s has not made room after %.0f s; "
				            "deciding again",
				            l->key, l->node, k->o.nominate_timeout);
				drop = true;
			} else if (!drop && fits_now(k, u, p, l)) {
				/* The victims are gone: bind, and count it so a
				 * second nomination does not take the same room. */
				l->kind = SC_KL_BINDING;
				l->since = now;
				add_use(u, p, l->share_milli);
				send_binding(w, p, l);
			}
		}
		if (drop)
			local_drop(k, l->key);
	}
	free(all);
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&use, &it);) {
		free(((node_use_t *)it.val)->key);
		free(it.val);
	}
	sc_kmap_free(&use);
	/* Explanations of pods that are gone or bound are not needed. */
	n = 0;
	explained_t **ex = sc_xcalloc(k->explained.len + 1, sizeof(*ex));
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&k->explained, &it);) {
		sc_kpod_t *p = sc_kmap_get(&k->cache.pods, it.key);
		if (!p || p->node)
			ex[n++] = it.val;
	}
	for (size_t i = 0; i < n; i++)
		explained_drop(k, ex[i]->key);
	free(ex);
	pump(w);
}

void sc__klocal_clear(sc_k8s_t *k)
{
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&k->local, &it);)
		sc_klocal_free(it.val);
	sc_kmap_free(&k->local);
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&k->explained, &it);)
		explained_free(it.val);
	sc_kmap_free(&k->explained);
}

void sc__kwriter_drop(sc_kwriter_t *w)
{
	sc_k8s_t *k = w->k;
	size_t dropped = w->hi.n + w->lo.n;
	clear(&w->hi);
	clear(&w->lo);
	sc__klocal_clear(k);
	if (dropped)
		sc_log_warn("not the leader: %zu queued writes dropped", dropped);
}

size_t sc__kwriter_nominated(const sc_kwriter_t *w)
{
	size_t n = 0;
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&w->k->local, &it);)
		n += ((sc_klocal_t *)it.val)->kind == SC_KL_NOMINATED;
	return n;
}

sc_kwriter_t *sc__kwriter_new(sc_k8s_t *k)
{
	sc_kwriter_t *w = sc_xcalloc(1, sizeof(*w));
	w->k = k;
	return w;
}

void sc__kwriter_free(sc_kwriter_t *w)
{
	if (!w)
		return;
	clear(&w->hi);
	clear(&w->lo);
	while (w->flying) {
		kop_t *op = w->flying;
		w->flying = op->next;
		op_free(op);
	}
	free(w);
}
