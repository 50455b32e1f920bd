/* REST API: /api/v1/{nodes|queues|priorityclasses|jobs|deployments|events}[/{name}].
 *
 * Every request goes: authenticate -> resolve the kind -> check the role ->
 * read, validate and (for writes) store in one conditional write. Nothing is
 * written before the whole body has been validated, so a rejected request
 * changes nothing. Objects are stored without metadata.resourceVersion; the
 * store's mod_rev is added on the way out, so it can never go stale. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/cache.h"
#include "base/parse.h"
#include "base/alloc.h"
#include "server/deploy.h"
#include "server/ha.h"
#include "server/server.h"
#include "starcloud/error.h"
#include "starcloud/json_merge.h"

/* Serialises an object for the store: without resourceVersion (derived from
 * the store on read). Returns malloc'd text. */
static char *object_dump(json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata");
	json_t *rv = json_incref(json_object_get(md, "resourceVersion"));
	json_object_del(md, "resourceVersion");
	char *text = sc_xcheck(json_dumps(obj, JSON_COMPACT));
	if (rv)
		json_object_set_new(md, "resourceVersion", rv);
	return text;
}

/* Parses metadata.resourceVersion: 0 when absent, -1 when not a revision. */
static int64_t object_rv(json_t *obj)
{
	json_t *rv = json_object_get(json_object_get(obj, "metadata"), "resourceVersion");
	if (!rv)
		return 0;
	if (json_is_integer(rv))
		return json_integer_value(rv) > 0 ? json_integer_value(rv) : -1;
	int64_t v;
	return sc_parse_i64(json_string_value(rv), 1, INT64_MAX, &v) < 0 ? -1 : v;
}

static const char *object_name(json_t *obj)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
}

static const char *object_queue(json_t *obj)
{
	return json_string_value(json_object_get(json_object_get(obj, "spec"), "queue"));
}

/* ---------------------------------------------------------------------
 * Request context
 * ------------------------------------------------------------------- */

typedef struct api_req {
	sc_server_t *s;
	sc_http_req_t *r;
	sc_principal_t who;
	const sc_kind_t *kind;
	char name[SC_MAX_NAME + 1]; /* "" for the collection */
	char key[SC_MAX_NAME + 64];
	char sub[32]; /* subresource ("explain", "drain", "autoscale/report") or "" */
	/* The write's condition is the revision this server read, not one
	 * the client sent: a conflict means another writer (the scheduler's
	 * status, an agent) came between, and the verb runs again. */
	int own_cond;
	int tries;
} api_req_t;

static void run_verb(api_req_t *a);

/* Splits /api/v1/<plural>[/<name>]; answers and returns < 0 on a bad path. */
static int parse_path(api_req_t *a)
{
	const char *p = sc_http_path(a->r) + strlen(SC_API_PREFIX);
	const char *slash = strchr(p, '/');
	size_t plen = slash ? (size_t)(slash - p) : strlen(p);
	a->kind = sc__kind_by_plural(p, plen);
	if (!a->kind) {
		sc__api_error(a->r, 404, "NotFound", "kind", "unknown kind \"%.*s\"",
		              (int)(plen > 64 ? 64 : plen), p);
		return SC_ENOTFOUND;
	}
	a->name[0] = '\0';
	if (slash && slash[1]) {
		const char *name = slash + 1;
		const char *sub = strchr(name, '/');
		if (sub) {
			/* /jobs/{name}/explain, /nodes/{name}/drain (ops.c). */
			if ((size_t)(sub - name) > SC_MAX_NAME ||
			    !sc__subresource_known(a->kind, sub + 1)) {
				sc__api_error(a->r, 404, "NotFound", NULL, "no such path");
				return SC_ENOTFOUND;
			}
			snprintf(a->sub, sizeof(a->sub), "%s", sub + 1);
			snprintf(a->name, sizeof(a->name), "%.*s", (int)(sub - name), name);
			name = a->name;
		}
		if (strlen(name) > SC_MAX_NAME || !sc__name_valid(name)) {
			sc__api_error(a->r, 400, "Invalid", "metadata.name",
			              "invalid object name in the path");
			return SC_EINVAL;
		}
		if (name != a->name)
			snprintf(a->name, sizeof(a->name), "%s", name);
		sc__object_key(a->kind, a->name, a->key, sizeof(a->key));
	}
	return 0;
}

static int is_write(const char *method)
{
	return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
}

/* Agents read jobs and deployments (their desired state) and create or
 * patch their own Node (registration); the name is checked against the
 * token's node in check_queue_write. Heartbeats are in agent_api.c. */
static int agent_allowed(api_req_t *a, const char *method)
{
	const char *plural = a->kind->plural;
	if (!is_write(method))
		return strcmp(plural, "jobs") == 0 || strcmp(plural, "deployments") == 0;
	return strcmp(plural, "nodes") == 0 &&
	       (strcmp(method, "POST") == 0 || strcmp(method, "PATCH") == 0);
}

/* Role rules: viewers read; tenants read what they can see and write only
 * queue-scoped kinds; agents as agent_allowed; admins do everything.
 * Server-owned kinds (events) are not written through the API except
 * deletes by admins. */
static int check_role(api_req_t *a, const char *method)
{
	if (a->who.role == SC_ROLE_AGENT && !agent_allowed(a, method)) {
		sc__api_error(a->r, 403, "Forbidden", NULL, "role agent may not %s %s", method,
		              a->kind->plural);
		return SC_EINVAL;
	}
	if (!is_write(method))
		return 0;
	if (a->kind->readonly && (strcmp(method, "DELETE") != 0 || a->who.role != SC_ROLE_ADMIN)) {
		sc__api_error(a->r, 405, "MethodNotAllowed", NULL, "%s are written by the server",
		              a->kind->plural);
		return SC_EINVAL;
	}
	if (a->who.role == SC_ROLE_ADMIN)
		return 0;
	if ((a->who.role == SC_ROLE_TENANT && a->kind->queue_scoped) ||
	    a->who.role == SC_ROLE_AGENT)
		return 0;
	sc__api_error(a->r, 403, "Forbidden", NULL, "role %s may not %s %s",
	              sc__role_name(a->who.role), method, a->kind->plural);
	return SC_EINVAL;
}

/* Parses the body; answers 400 and returns NULL when it is not JSON. */
static json_t *parse_body(api_req_t *a)
{
	size_t len;
	const char *body = sc_http_body(a->r, &len);
	json_error_t jerr;
	json_t *obj = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!obj)
		sc__api_error(a->r, 400, "BadRequest", "",
		              "malformed JSON at line %d column %d: %s", jerr.line, jerr.column,
		              jerr.text);
	return obj;
}

/* Validates obj as an object of the request's kind; answers 400 and
 * returns < 0 when it is not one. one as in sc__validate_decode. */
static int check_valid(api_req_t *a, json_t *obj, sc_manifest_obj_t **one, uint64_t vh[2])
{
	char field[256] = "", msg[512] = "";
	if (sc__validate_decode(a->kind, obj, field, sizeof(field), msg, sizeof(msg), one, vh) <
	    0) {
		sc__api_error(a->r, 400, "Invalid", field, "%s", msg);
		return SC_EINVAL;
	}
	return 0;
}

/* A tenant may only put objects into its own queues; an agent may only
 * write the Node its token names. */
static int check_queue_write(api_req_t *a, json_t *obj)
{
	if (a->who.role == SC_ROLE_AGENT) {
		if (strcmp(object_name(obj), a->who.node) == 0)
			return 0;
		sc__api_error(a->r, 403, "Forbidden", "metadata.name",
		              "this agent token acts for node \"%s\" only", a->who.node);
		return SC_EINVAL;
	}
	if (a->who.role != SC_ROLE_TENANT || sc__auth_has_queue(&a->who, object_queue(obj)))
		return 0;
	sc__api_error(a->r, 403, "Forbidden", "spec.queue",
	              "queue \"%s\" is not bound to this token", object_queue(obj));
	return SC_EINVAL;
}

/* How many objects of kind k the queue named may hold: its Queue's
 * spec.maxObjects.<plural>, else the server's default. */
static size_t queue_room(sc_server_t *s, const sc_kind_t *k, const char *queue, int *own)
{
	sc_cobj_t *q = (sc_cobj_t *)sc__cache_get(s->cache, sc__kind_by_plural("queues", 6), queue);
	json_t *obj = q ? sc__cache_obj(q) : NULL;
	json_t *v =
	    json_object_get(json_object_get(json_object_get(obj, "spec"), "maxObjects"), k->plural);
	*own = json_is_integer(v);
	if (*own)
		return (size_t)json_integer_value(v);
	return s->queue_max[strcmp(k->plural, "jobs") == 0 ? 0 : 1];
}

/* The per-queue object limits: a new object (or one moved to another
 * queue) must fit; 403 QuotaExceeded naming the limit otherwise. */
static int check_queue_room(api_req_t *a, json_t *obj)
{
	const char *queue = object_queue(obj);
	int own;
	if (!a->kind->queue_scoped || !queue)
		return 0;
	size_t have = sc__cache_queue_count(a->s->cache, a->kind, queue);
	size_t room = queue_room(a->s, a->kind, queue, &own);
	if (have < room)
		return 0;
	if (own)
		sc__api_error(a->r, 403, "QuotaExceeded", "spec.queue",
		              "queue \"%s\" holds %zu %s, its limit (spec.maxObjects.%s of Queue "
		              "%s): delete some first",
		              queue, have, a->kind->plural, a->kind->plural, queue);
	else
		sc__api_error(a->r, 403, "QuotaExceeded", "spec.queue",
		              "queue \"%s\" holds %zu %s, the server's limit per queue "
		              "(--queue-max-%s; a Queue may set spec.maxObjects.%s): delete some "
		              "first",
		              queue, have, a->kind->plural, a->kind->plural, a->kind->plural);
	return SC_ELIMIT;
}

/* Loads the current object; answers 404 (also for objects of another
 * tenant, which must look absent) and returns NULL when there is none. */
static json_t *load_existing(api_req_t *a, int64_t *mod_rev)
{
	json_t *obj = sc__api_load(a->s, a->r, &a->who, a->kind, a->name, mod_rev);
	sc__object_set_rv(obj, *mod_rev);
	return obj;
}

/* Answers a stored write: the cache takes obj (so the write is parsed and
 * serialised once, and later reads reuse the answer bytes) and one, obj
 * decoded by its validation (taken, may be NULL). */
static void answer_stored(api_req_t *a, json_t *obj, int64_t rev, int ok, sc_manifest_obj_t *one,
                          const uint64_t vh[2])
{
	sc_cobj_t *o = sc__cache_adopt(a->s->cache, a->key, rev, obj, 1);
	if (o)
		sc__cache_give_decoded(o, one, vh);
	else
		sc_manifest_obj_free(one);
	sc_wire_t *w = o ? sc__cache_wire_ref(o) : NULL;
	if (w) {
		sc_http_respond(a->r, ok, "application/json", w->data, w->len + 1);
		sc__wire_unref(w);
		json_decref(obj);
		return;
	}
	sc__object_set_rv(obj, rev);
	sc__api_json(a->r, ok, obj);
}

/* A write waiting for the store. With SQLite its answer comes at once;
 * with etcd the store's calls thread waits for etcd and the answer comes
 * later, on the loop (store.h, asynchronous calls), so the loop never
 * waits for the network. Everything the answer needs is here, since the
 * handler's api_req_t is gone by then. */
typedef struct api_write {
	api_req_t a;            /* a copy; a.r is NULL once the client left */
	json_t *obj;            /* the object stored, or (delete) the one removed */
	sc_manifest_obj_t *one; /* obj decoded as stored, or NULL */
	uint64_t vh[2];         /* its decoder view's digest */
	int64_t expect;
	int ok; /* the status of success (201, 200) */
	int del;
} api_write_t;

/* Runs of a verb whose own condition kept failing (a hot object). */
#define API_WRITE_TRIES 8

static void write_gone(sc_http_req_t *r, void *ud)
{
	((api_write_t *)ud)->a.r = NULL;
}

static void put_answer(api_write_t *w, const sc_store_res_t *res)
{
	api_req_t *a = &w->a;
	int rc = res->rc;
	if (rc == SC_EEXISTS)
		sc__api_error(a->r, 409, "AlreadyExists", "metadata.name",
		              "%s \"%s\" already exists", a->kind->kind, a->name);
	else if (rc == SC_ECONFLICT || rc == SC_ENOTFOUND)
		sc__api_error(a->r, 409, "Conflict", "metadata.resourceVersion",
		              "%s \"%s\" was modified (or deleted) since resourceVersion %lld",
		              a->kind->kind, a->name, (long long)w->expect);
	else if (rc < 0)
		sc__api_store_error(a->r, rc, "store");
	if (rc < 0)
		return;
	answer_stored(a, w->obj, res->rev, w->ok, w->one, w->vh);
	w->obj = NULL;
	w->one = NULL;
}

static void delete_answer(api_write_t *w, const sc_store_res_t *res)
{
	if (res->rc == SC_ECONFLICT)
		sc__api_error(w->a.r, 409, "Conflict", NULL, "delete failed: %s",
		              sc_strerror(res->rc));
	else if (res->rc < 0)
		sc__api_store_error(w->a.r, res->rc, "delete failed");
	else
		sc__api_json(w->a.r, 200, json_incref(w->obj));
}

static void write_done(const sc_store_res_t *res, void *ud)
{
	api_write_t *w = ud;
	sc__sched_writing(w->a.s, w->a.key, 0);
	if (w->a.r && w->a.own_cond && w->a.tries + 1 < API_WRITE_TRIES &&
	    (res->rc == SC_ECONFLICT || res->rc == SC_ENOTFOUND)) {
		/* The cache has what refused it now (store.h): read, decide and
		 * write again; a deleted object answers 404 this time. */
		api_req_t again = w->a;
		again.tries++;
		again.own_cond = 0;
		sc_manifest_obj_free(w->one);
		json_decref(w->obj);
		free(w);
		run_verb(&again);
		return;
	}
	if (w->a.r && w->del)
		delete_answer(w, res);
	else if (w->a.r)
		put_answer(w, res);
	if (res->rc == 0)
		sc__sched_kick(w->a.s);
	sc_manifest_obj_free(w->one);
	json_decref(w->obj);
	free(w);
}

/* Starts the write of op (its strings are copied) for the request; takes
 * obj and one. */
static void write_start(api_req_t *a, const sc_store_op_t *op, json_t *obj, sc_manifest_obj_t *one,
                        const uint64_t vh[2], int ok)
{
	api_write_t *w = sc_xcalloc(1, sizeof(*w));
	w->a = *a;
	w->obj = obj;
	w->one = one;
	if (vh)
		memcpy(w->vh, vh, sizeof(w->vh));
	w->expect = op->expect_rev;
	w->ok = ok;
	w->del = op->type == SC_STORE_DELETE;
	sc_http_on_close(a->r, write_gone, w);
	sc__sched_writing(a->s, a->key, 1);
	sc_store_txn_async(a->s->store, op, 1, write_done, w);
}

/* Writes obj under the request's key with the condition expect; answers
 * with the stored object (status code ok) or the error. Takes obj and one
 * (obj decoded exactly as stored, or NULL). */
static void store_and_answer(api_req_t *a, json_t *obj, int64_t expect, int ok,
                             sc_manifest_obj_t *one, const uint64_t vh[2])
{
	/* The stored form has no resourceVersion (it is derived on the way out). */
	json_object_del(json_object_get(obj, "metadata"), "resourceVersion");
	char *text = object_dump(obj);
	size_t len = strlen(text);
	if (a->s->max_object && len > a->s->max_object) {
		/* Checked on the object as stored: a body under --max-body, or
		 * a small patch to a big object, can still make it too large. */
		free(text);
		sc_manifest_obj_free(one);
		json_decref(obj);
		sc__api_error(a->r, 413, "RequestEntityTooLarge", "",
		              "%s \"%s\" would be %zu bytes stored; objects are at most %zu bytes "
		              "(--max-object-size)",
		              a->kind->kind, a->name, len, a->s->max_object);
		return;
	}
	sc_store_op_t op = {SC_STORE_PUT, a->key, text, expect};
	write_start(a, &op, obj, one, vh, ok);
	free(text);
}

/* ---------------------------------------------------------------------
 * Verbs
 * ------------------------------------------------------------------- */

/* Served from the cache: no store read, no parse, and the answer bytes
 * are made once per object revision. */
static void do_get(api_req_t *a)
{
	sc_cobj_t *o = (sc_cobj_t *)sc__cache_get(a->s->cache, a->kind, a->name);
	/* Only agents and tenants see a part of the objects: others' answers
	 * need no parse (and a job's tree is not kept: sc__cache_parse). */
	int scoped = a->who.role == SC_ROLE_AGENT || a->who.role == SC_ROLE_TENANT;
	json_t *obj = o && scoped ? sc__cache_parse(o) : NULL;
	int parsed = obj != NULL, denied = obj && !sc__auth_can_see(&a->who, a->kind, obj);
	json_decref(obj);
	if (denied && a->who.role == SC_ROLE_AGENT) {
		sc__api_error(a->r, 403, "Forbidden", NULL,
		              "%s \"%s\" has no pod bound to node \"%s\"", a->kind->kind, a->name,
		              a->who.node);
		return;
	}
	sc_wire_t *w = o && !denied && (parsed || !scoped) ? sc__cache_wire_ref(o) : NULL;
	if (!w) {
		sc__api_error(a->r, 404, "NotFound", NULL, "%s \"%s\" not found", a->kind->kind,
		              a->name);
		return;
	}
	/* It shows this object's revision only: it need not wait for the
	 * fsync of newer writes (commit.c). */
	sc_http_answer_rev(a->r, o->mod_rev);
	sc_http_respond(a->r, 200, "application/json", w->data, w->len + 1);
	sc__wire_unref(w);
}

/* Node authorization: an agent lists and watches only what is bound to its
 * node, and says so (?node=NAME, as a kubelet's field selector): a list
 * of everything is refused outright rather than silently filtered. */
static int agent_list_scoped(api_req_t *a)
{
	char node[SC_MAX_NAME + 1];
	if (a->who.role != SC_ROLE_AGENT)
		return 0;
	if (sc_http_query_param(a->r, "node", node, sizeof(node)) > 0 &&
	    strcmp(node, a->who.node) == 0)
		return 0;
	sc__api_error(a->r, 403, "Forbidden", "node",
	              "an agent token lists only what is bound to its node: add ?node=%s",
	              a->who.node);
	return SC_EINVAL;
}

static void do_list(api_req_t *a)
{
	char sel[1024] = "", tmp[32], why[300];
	int64_t from_rev = 0;
	if (agent_list_scoped(a) < 0)
		return;
	if (sc_http_query_param(a->r, "labelSelector", sel, sizeof(sel)) == SC_ETOOBIG) {
		sc__api_error(a->r, 400, "BadRequest", "labelSelector",
		              "labelSelector: longer than %zu bytes", sizeof(sel) - 1);
		return;
	}
	if (sc__selector_why(sel, why, sizeof(why)) < 0) {
		sc__api_error(a->r, 400, "BadRequest", "labelSelector", "%s", why);
		return;
	}
	if (sc_http_query_param(a->r, "resourceVersion", tmp, sizeof(tmp)) > 0) {
		int64_t v = -1;
		sc_parse_i64(tmp, 0, INT64_MAX, &v);
		from_rev = v;
		if (from_rev < 0) {
			sc__api_error(a->r, 400, "BadRequest", "resourceVersion",
			              "resourceVersion must be a non-negative integer");
			return;
		}
	}
	if (sc_http_query_param(a->r, "watch", tmp, sizeof(tmp)) >= 0 && strcmp(tmp, "0") != 0 &&
	    strcmp(tmp, "false") != 0) {
		int bm = sc_http_query_param(a->r, "allowWatchBookmarks", tmp, sizeof(tmp)) >= 0 &&
		         (strcmp(tmp, "true") == 0 || strcmp(tmp, "1") == 0);
		sc__watch_start(a->s, a->r, a->kind, &a->who, sel, from_rev, bm);
		return;
	}
	sc__list_serve(a->s, a->r, a->kind, &a->who, sel);
}

static void do_create(api_req_t *a)
{
	sc_manifest_obj_t *one = NULL;
	uint64_t vh[2] = {0, 0};
	json_t *obj = parse_body(a);
	if (!obj)
		return;
	/* Status belongs to the server (and to admins, who stand in for
	 * agents); a tenant's is still checked, as before, then dropped. */
	if (a->who.role != SC_ROLE_ADMIN && json_object_get(obj, "status")) {
		if (check_valid(a, obj, NULL, NULL) < 0)
			goto out;
		json_object_del(obj, "status");
	}
	/* The server owns creationTimestamp, as Kubernetes does: a client's
	 * (say, copied from another cluster or an example) would make a job
	 * look days old and fire the waiting alert at once. */
	json_t *md = json_object_get(obj, "metadata");
	if (json_is_object(md)) {
		char ts[40];
		sc__now_rfc3339(ts, sizeof(ts));
		json_object_set_new(md, "creationTimestamp", json_string(ts));
	}
	/* Validated as it will be stored, so its decoding serves the
	 * scheduling loop too (the server's own timestamp is always valid). */
	if (check_valid(a, obj, &one, vh) < 0)
		goto out;
	if (check_queue_write(a, obj) < 0 || sc__admit(a->s, a->r, a->kind, obj) < 0 ||
	    check_queue_room(a, obj) < 0)
		goto out;
	if (a->name[0] && strcmp(a->name, object_name(obj)) != 0) {
		sc__api_error(a->r, 400, "Invalid", "metadata.name",
		              "metadata.name \"%s\" does not match the path", object_name(obj));
		goto out;
	}
	/* A new Deployment's rollout state and role templates are stored with
	 * it: the scheduling loop may bind its pods before the controller's
	 * next pass, and an agent that found no recorded template started a
	 * prefill pod from spec.template (issue 23's soak ran prefill pods as
	 * decode workers that way). */
	if (strcmp(a->kind->kind, "Deployment") == 0 &&
	    !json_is_object(json_object_get(json_object_get(obj, "status"), "rollout")))
		sc__deploy_on_write(NULL, obj);
	snprintf(a->name, sizeof(a->name), "%s", object_name(obj));
	sc__object_key(a->kind, a->name, a->key, sizeof(a->key));
	store_and_answer(a, json_incref(obj), SC_REV_ABSENT, 201, one, vh);
	one = NULL;
out:
	sc_manifest_obj_free(one);
	json_decref(obj);
}

/* Common tail of PUT and PATCH: the new object replaces old. */
static void replace(api_req_t *a, json_t *old, json_t *obj, int64_t cur_rev)
{
	const char *name = object_name(obj);
	if (strcmp(name, a->name) != 0) {
		sc__api_error(a->r, 400, "Invalid", "metadata.name",
		              "metadata.name \"%s\" does not match the path", name);
		return;
	}
	if (check_queue_write(a, obj) < 0)
		return;
	const char *oq = object_queue(old), *nq = object_queue(obj);
	if (nq && (!oq || strcmp(oq, nq) != 0) && check_queue_room(a, obj) < 0)
		return;
	int64_t rv = object_rv(obj);
	if (rv < 0) {
		sc__api_error(a->r, 400, "Invalid", "metadata.resourceVersion",
		              "metadata.resourceVersion must be a positive integer");
		return;
	}
	/* Kept from creation whatever the write says (see do_create). */
	json_t *md = json_object_get(obj, "metadata");
	json_t *ts = json_object_get(json_object_get(old, "metadata"), "creationTimestamp");
	if (ts && json_is_object(md))
		json_object_set(md, "creationTimestamp", ts);
	else if (json_is_object(md))
		json_object_del(md, "creationTimestamp");
	/* Status belongs to the scheduler: a write without one (an `apply` of
	 * the spec) keeps it, so re-applying a running job does not drop its
	 * pods; only admins (standing in for node agents) may replace it. */
	json_t *st = json_object_get(old, "status");
	if (a->who.role != SC_ROLE_ADMIN || !json_object_get(obj, "status")) {
		if (st)
			json_object_set(obj, "status", st);
		else
			json_object_del(obj, "status");
	}
	/* Validated as it will be stored (body and kept status), so the
	 * decoding serves the scheduling loop too, as for a create. A
	 * deployment's rollout bookkeeping needs a valid spec, and the loop
	 * decodes deployments from its own view (one stays NULL). */
	sc_manifest_obj_t *one = NULL;
	uint64_t vh[2] = {0, 0};
	if (check_valid(a, obj, &one, vh) < 0)
		return;
	if (sc__admit(a->s, a->r, a->kind, obj) < 0) {
		sc_manifest_obj_free(one);
		return;
	}
	if (strcmp(a->kind->kind, "Deployment") == 0)
		sc__deploy_on_write(old, obj);
	/* Without a resourceVersion the write is still conditional on the
	 * version we read, so a concurrent change is never silently lost
	 * (the verb runs again on the newer one). */
	a->own_cond = rv == 0;
	store_and_answer(a, json_incref(obj), rv ? rv : cur_rev, 200, one, vh);
}

static void do_put(api_req_t *a)
{
	json_t *obj = parse_body(a);
	if (!obj)
		return;
	/* A status that replace() will drop is still checked as sent. The
	 * rest is validated once, as stored, in replace(). */
	if (a->who.role != SC_ROLE_ADMIN && json_object_get(obj, "status") &&
	    check_valid(a, obj, NULL, NULL) < 0) {
		json_decref(obj);
		return;
	}
	int64_t cur;
	json_t *old = load_existing(a, &cur);
	if (old)
		replace(a, old, obj, cur);
	json_decref(old);
	json_decref(obj);
}

static void do_patch(api_req_t *a)
{
	size_t len;
	const char *body = sc_http_body(a->r, &len);
	json_error_t jerr;
	json_t *patch = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!patch || !json_is_object(patch)) {
		sc__api_error(a->r, 400, "BadRequest", "",
		              "a merge patch must be a JSON object (%s)",
		              patch ? "got another type" : jerr.text);
		json_decref(patch);
		return;
	}
	int64_t cur;
	json_t *old = load_existing(a, &cur);
	if (!old) {
		json_decref(patch);
		return;
	}
	/* The merged result carries the resourceVersion we read unless the
	 * patch names one, so the write is conditional either way. */
	json_t *merged = sc_xcheck(sc_json_merge_patch(old, patch));
	replace(a, old, merged, cur); /* validates what it stores */
	json_decref(merged);
	json_decref(patch);
	json_decref(old);
}

static void do_delete(api_req_t *a)
{
	int64_t cur;
	json_t *old = load_existing(a, &cur);
	if (!old)
		return;
	sc_store_op_t op = {SC_STORE_DELETE, a->key, NULL, cur};
	a->own_cond = 1;
	write_start(a, &op, old, NULL, NULL, 200);
}

static void dispatch(api_req_t *a);

static void handle_objects(sc_http_req_t *r, void *ud)
{
	api_req_t a = {.s = ud, .r = r};
	if (sc__auth_request(a.s, r, &a.who) == 0)
		dispatch(&a);
	sc__audit_request(a.s, r, &a.who, sc_http_status(r));
}

static void dispatch(api_req_t *ap)
{
	api_req_t a = *ap;
	sc_http_req_t *r = a.r;
	const char *m = sc_http_method(r);
	if (parse_path(&a) < 0)
		return;
	if (a.sub[0]) {
		sc__subresource(a.s, r, &a.who, a.kind, a.name, a.sub);
		return;
	}
	if (check_role(&a, m) < 0)
		return;
	int one = a.name[0] != '\0';
	/* Reads come from the cache, which does not wait for etcd; but while
	 * etcd does not answer it may be stale, and a client is better told
	 * (it may ask another server) than shown old data as current. */
	if (strcmp(m, "GET") == 0 && sc__ha_store_down(a.s)) {
		sc__api_store_error(r, SC_EUNAVAIL, "store");
		return;
	}
	if (strcmp(m, "GET") == 0)
		one ? do_get(&a) : do_list(&a);
	else
		run_verb(&a);
}

/* The writing verbs (again, after a conflict on the server's own read). */
static void run_verb(api_req_t *a)
{
	const char *m = sc_http_method(a->r);
	int one = a->name[0] != '\0';
	if (strcmp(m, "POST") == 0 && !one)
		do_create(a);
	else if (strcmp(m, "PUT") == 0 && one)
		do_put(a);
	else if (strcmp(m, "PATCH") == 0 && one)
		do_patch(a);
	else if (strcmp(m, "DELETE") == 0 && one)
		do_delete(a);
	else
		sc__api_error(a->r, 405, "MethodNotAllowed", NULL, "%s is not allowed on %s", m,
		              sc_http_path(a->r));
}

int sc__api_register(sc_server_t *s)
{
	return sc_http_route(s->http, NULL, SC_API_PREFIX, handle_objects, s);
}
