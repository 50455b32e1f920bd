/* Subresources: GET /api/v1/jobs/{name}/explain (also deployments) and
 * POST|DELETE /api/v1/nodes/{name}/drain.
 *
 * Explain answers "why is my job pending?" from three sources: the job's
 * status (the core's pending reason, written by the last cycle), the last
 * cycle's figures for its queue (fair share against allocated and
 * requested), and what the job asks for (its tasks as written).
 *
 * Drain cordons a node (spec.unschedulable: true) and marks it with the
 * starcloud.dev/drain annotation; the scheduling loop then evicts every job
 * that has a pod on it (whole, since a gang is only useful whole) and the
 * core places them elsewhere. DELETE undoes both (uncordon). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/deploy.h"
#include "server/jobstatus.h"
#include "base/alloc.h"
#include "server/sched_int.h"
#include "starcloud/error.h"

int sc__subresource_known(const sc_kind_t *k, const char *sub)
{
	if (strcmp(sub, "explain") == 0 || strcmp(sub, "logs") == 0)
		return k->queue_scoped;
	if (strcmp(sub, "drain") == 0)
		return strcmp(k->kind, "Node") == 0;
	if (strcmp(sub, "rollout") == 0 || strcmp(sub, "rollout/report") == 0 ||
	    strcmp(sub, "autoscale/report") == 0)
		return strcmp(k->kind, "Deployment") == 0;
	return 0;
}

/* ---- explain ----------------------------------------------------------- */

static const char *str_or(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));
	return v ? v : "";
}

/* {"gpu": devices, "cpu": cores, "memory": bytes}, as `schedule -o json`. */
static json_t *num(double v, double scale)
{
	return v < 0 ? json_null() : json_real(v / scale); /* < 0: unlimited */
}

static json_t *res_json(const double *v)
{
	return json_pack("{s:o,s:o,s:o}", "gpu", num(v[SC_RES_GPU], 1), "cpu",
	                 num(v[SC_RES_CPU], 1000.0), "memory", num(v[SC_RES_MEM], 1));
}

static json_t *queue_json(sc_server_t *s, const char *queue)
{
	const sc_queue_report_t *q = sc__sched_queue(s, queue);
	if (!q)
		return json_null();
	return json_pack("{s:s,s:o,s:o,s:o,s:o,s:o}", "name", q->name, "fairShare",
	                 res_json(q->fair_share), "allocated", res_json(q->allocated), "requested",
	                 res_json(q->requested), "quota", res_json(q->quota), "limit",
	                 res_json(q->limit));
}

/* What the job asks for: its tasks as written, with totals of pods and
 * whole GPUs. */
static json_t *asks_json(json_t *obj)
{
	json_t *spec = json_object_get(obj, "spec");
	json_t *tasks = json_object_get(spec, "tasks"), *t, *out = json_array();
	size_t i;
	json_int_t pods = 0, gpus = 0;
	if (!tasks && json_object_get(spec, "template")) { /* a deployment */
		json_t *tmpl = json_object_get(spec, "template");
		json_t *r = json_object_get(spec, "replicas");
		json_int_t n = r ? json_integer_value(r) : 1;
		json_array_append_new(out,
		                      json_pack("{s:s,s:I,s:O*}", "name", "serve", "replicas", n,
		                                "resources", json_object_get(tmpl, "resources")));
	}
	json_array_foreach(tasks, i, t)
	{
		/* The decoder's defaults (docs/MANIFESTS.md): one replica, and a
		 * task without a name is "main". */
		json_t *res = json_object_get(t, "resources"), *r = json_object_get(t, "replicas");
		const char *name = json_string_value(json_object_get(t, "name"));
		json_int_t n = r ? json_integer_value(r) : 1;
		json_array_append_new(out, json_pack("{s:s,s:I,s:O*}", "name", name ? name : "main",
		                                     "replicas", n, "resources", res));
	}
	json_array_foreach(out, i, t)
	{
		json_int_t n = json_integer_value(json_object_get(t, "replicas"));
		pods += n;
		gpus +=
		    n * json_integer_value(json_object_get(json_object_get(t, "resources"), "gpu"));
	}
	json_t *min = json_object_get(spec, "minMember");
	return json_pack("{s:I,s:I,s:I,s:o}", "pods", pods, "minMember",
	                 min ? json_integer_value(min) : pods, "gpus", gpus, "tasks", out);
}

/* Pods that compaction moved (status movedAt): listed under "moved", and a
 * running job's reason says so, since nothing else in its status does. */
static void explain_moves(json_t *doc, json_t *pods)
{
	json_t *moved = json_array(), *p;
	const char *last = NULL;
	size_t i;
	json_array_foreach(pods, i, p)
	{
		const char *at = json_string_value(json_object_get(p, "movedAt"));
		if (!at || strcmp(str_or(p, "phase"), "Running") != 0)
			continue;
		json_array_append_new(moved, json_pack("{s:s,s:s,s:s}", "pod", str_or(p, "name"),
		                                       "node", str_or(p, "node"), "movedAt", at));
		if (!last || strcmp(at, last) > 0)
			last = at;
	}
	if (json_array_size(moved) == 0) {
		json_decref(moved);
		return;
	}
	const char *reason = json_string_value(json_object_get(doc, "reason"));
	if (reason && strcmp(reason, "running") == 0)
		json_object_set_new(doc, "reason",
		                    json_sprintf("running; %zu pod%s moved by compaction (last at "
		                                 "%s) to free nodes for larger work",
		                                 json_array_size(moved),
		                                 json_array_size(moved) == 1 ? "" : "s", last));
	json_object_set_new(doc, "moved", moved);
}

static void explain(sc_server_t *s, sc_http_req_t *r, json_t *obj)
{
	json_t *spec = json_object_get(obj, "spec"), *st = json_object_get(obj, "status");
	const char *queue = json_string_value(json_object_get(spec, "queue"));
	const char *phase = sc__jobst_phase(obj)[0] ? sc__jobst_phase(obj) : NULL;
	const char *reason = json_string_value(json_object_get(st, "reason"));
	json_t *doc = sc_xcheck(
	    json_pack("{s:s,s:s,s:s,s:s?,s:s?,s:o,s:o,s:O*}", "kind", "Explanation", "job",
	              json_string_value(json_object_get(json_object_get(obj, "metadata"), "name")),
	              "phase", phase ? phase : "Unknown", "queue", queue, "reason",
	              reason ? reason : (phase && strcmp(phase, "Running") == 0 ? "running" : NULL),
	              "asks", asks_json(obj), "queueStatus", queue_json(s, queue), "pods",
	              json_object_get(st, "pods")));
	if (!phase)
		json_object_set_new(doc, "reason",
		                    json_string("not scheduled yet: the next cycle will decide"));
	explain_moves(doc, json_object_get(st, "pods"));
	sc__api_json(r, 200, doc);
}

/* ---- drain ------------------------------------------------------------- */

/* A drain (or uncordon) waiting for the store; its condition is the
 * revision this server read, so a write that lost to another (a heartbeat
 * writing the node's status) is done again on the newer node. */
typedef struct drain_req {
	sc_server_t *s;
	sc_http_req_t *r; /* NULL once the client left */
	const sc_kind_t *k;
	char name[SC_MAX_NAME + 1];
	int on;
	int tries;
	json_t *node; /* as written */
} drain_req_t;

#define DRAIN_TRIES 8

static void drain_try(drain_req_t *d, json_t *node, int64_t mod_rev);

static void drain_gone(sc_http_req_t *r, void *ud)
{
	((drain_req_t *)ud)->r = NULL;
}

static void drained(const sc_store_res_t *res, void *ud)
{
	drain_req_t *d = ud;
	int rc = res->rc;
	if (d->r && (rc == SC_ECONFLICT || rc == SC_ENOTFOUND) && ++d->tries < DRAIN_TRIES) {
		int64_t rev;
		json_t *node = sc__object_copy(d->s, d->k, d->name, &rev);
		json_decref(d->node);
		d->node = NULL;
		if (node) {
			drain_try(d, node, rev);
			json_decref(node);
			return;
		}
		rc = SC_ENOTFOUND;
	}
	if (d->r && rc == SC_ENOTFOUND)
		sc__api_error(d->r, 404, "NotFound", NULL, "%s \"%s\" not found", d->k->kind,
		              d->name);
	else if (d->r && rc == SC_ECONFLICT)
		sc__api_error(d->r, 409, "Conflict", NULL, "drain: %s", sc_strerror(rc));
	else if (d->r && rc < 0)
		sc__api_store_error(d->r, rc, "drain");
	else if (d->r) {
		sc__object_set_rv(d->node, res->rev);
		sc__api_json(d->r, 200, json_incref(d->node));
	}
	json_decref(d->node);
	free(d);
}

static void drain_try(drain_req_t *d, json_t *node, int64_t mod_rev)
{
	json_t *md = json_object_get(node, "metadata"), *spec = json_object_get(node, "spec");
	json_t *ann = json_object_get(md, "annotations");
	if (!json_is_object(ann)) {
		ann = json_object();
		json_object_set_new(md, "annotations", ann);
	}
	if (d->on) {
		json_object_set_new(spec, "unschedulable", json_true());
		json_object_set_new(ann, SC_DRAIN_ANNOTATION, json_string("true"));
	} else {
		json_object_del(spec, "unschedulable");
		json_object_del(ann, SC_DRAIN_ANNOTATION);
	}
	d->node = json_incref(node);
	sc__object_save(d->s, d->k, node, mod_rev, drained, d);
}

static void drain(sc_server_t *s, sc_http_req_t *r, const sc_kind_t *k, json_t *node,
                  int64_t mod_rev, int on)
{
	drain_req_t *d = sc_xcalloc(1, sizeof(*d));
	d->s = s;
	d->r = r;
	d->k = k;
	d->on = on;
	snprintf(d->name, sizeof(d->name), "%s",
	         json_string_value(json_object_get(json_object_get(node, "metadata"), "name")));
	sc_http_on_close(r, drain_gone, d);
	drain_try(d, node, mod_rev);
}

void sc__subresource(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who,
                     const sc_kind_t *k, const char *name, const char *sub)
{
	const char *m = sc_http_method(r);
	int is_drain = strcmp(sub, "drain") == 0;
	int64_t rev;
	if (strncmp(sub, "rollout", 7) == 0 || strcmp(sub, "autoscale/report") == 0) {
		sc__rollout_api(s, r, who, name, sub);
		return;
	}
	if (strcmp(sub, "logs") == 0) {
		sc__logs_serve(s, r, who, k, name);
		return;
	}
	if (!is_drain && strcmp(m, "GET") != 0) {
		sc__api_error(r, 405, "MethodNotAllowed", NULL, "explain is read with GET");
		return;
	}
	if (is_drain && strcmp(m, "POST") != 0 && strcmp(m, "DELETE") != 0) {
		sc__api_error(r, 405, "MethodNotAllowed", NULL,
		              "drain is POST (drain) or DELETE (uncordon)");
		return;
	}
	if (is_drain && who->role != SC_ROLE_ADMIN) {
		sc__api_error(r, 403, "Forbidden", NULL, "role %s may not drain nodes",
		              sc__role_name(who->role));
		return;
	}
	json_t *obj = sc__api_load(s, r, who, k, name, &rev);
	if (!obj)
		return;
	if (is_drain)
		drain(s, r, k, obj, rev, strcmp(m, "POST") == 0);
	else
		explain(s, r, obj);
	json_decref(obj);
}
