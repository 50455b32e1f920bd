/* Desired state from the server: list, then watch, jobs and deployments.
 *
 * The pods this node must run are the status.pods entries with
 * node == our name and phase == Running (the scheduling loop writes them
 * when it binds). Each entry's identity is its assignment generation
 * (status.pods[].generation), or its startedAt when the loop writes no
 * generation: a local pod whose identity differs from the server's entry
 * belongs to an older assignment and is stopped, and the new one starts
 * only once the old process is gone, so a pod never runs twice here.
 *
 * List-then-watch (Kubernetes' informer pattern): the list gives every
 * object and a revision, so pods of objects that vanished while we were
 * away are stopped (fencing after a partition); the watch then streams
 * changes after that revision. A failed stream resumes from the last
 * revision seen; 410 Gone (the log moved on) or a heartbeat that succeeds
 * after failures starts over with a list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/sync.h"
#include "base/parse.h"
#include "base/log.h"
#include "agent/pod.h"
#include "agent/pod_serving.h"
#include "starcloud/error.h"

#define MAX_LIST (64u << 20)
/* The server sends a BOOKMARK at least every few seconds on a quiet watch
 * (allowWatchBookmarks): a stream silent for longer is stalled (a frozen
 * server keeps the connection open and says nothing). */
#define WATCH_STALL_S 15
#define MAX_EVENT (8u << 20)
#define RETRY_MS 1000

static void start_list(sc_watch_t *w);
static void start_watch(sc_watch_t *w);

static const char *str_of(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));
	return v ? v : "";
}

static const char *name_of(json_t *obj)
{
	return str_of(json_object_get(obj, "metadata"), "name");
}

/* ---- which task a pod runs --------------------------------------------- */

/* "<job>-<task>-<index>" -> task. */
static int task_name(const char *job, const char *pod, char *out, size_t outsz)
{
	size_t jl = strlen(job);
	if (strncmp(pod, job, jl) != 0 || pod[jl] != '-')
		return SC_EINVAL;
	const char *t = pod + jl + 1, *dash = strrchr(t, '-');
	if (!dash || dash == t || (size_t)(dash - t) >= outsz)
		return SC_EINVAL;
	snprintf(out, outsz, "%.*s", (int)(dash - t), t);
	return 0;
}

static json_t *task_of(const char *kind, json_t *obj, const char *pod)
{
	char t[SC_AGENT_NAME_MAX + 1];
	json_t *spec = json_object_get(obj, "spec"), *v;
	size_t i;
	if (task_name(name_of(obj), pod, t, sizeof(t)) < 0)
		return NULL;
	if (strcmp(kind, "Deployment") == 0) {
		/* Without a recorded template (sc__pod_serving_task prefers it),
		 * the task's role decides: tasks are "<role>-<version slug>". */
		const char *role = strncmp(t, "prefill-", 8) == 0  ? "prefill"
		                   : strncmp(t, "decode-", 7) == 0 ? "decode"
		                                                   : t;
		json_t *r = json_object_get(json_object_get(spec, "disaggregation"), role);
		json_t *tpl = json_object_get(r, "template");
		return tpl ? tpl : json_object_get(spec, "template");
	}
	json_array_foreach(json_object_get(spec, "tasks"), i, v)
	{
		const char *n = json_string_value(json_object_get(v, "name"));
		if (strcmp(n ? n : "main", t) == 0)
			return v;
	}
	return NULL;
}

/* ---- reconcile --------------------------------------------------------- */

static json_t *desired_entry(sc_agent_t *a, json_t *obj, const char *pod)
{
	json_t *e;
	size_t i;
	json_array_foreach(json_object_get(json_object_get(obj, "status"), "pods"), i, e)
	{
		if (strcmp(str_of(e, "name"), pod) == 0 &&
		    strcmp(str_of(e, "node"), a->o.name) == 0 &&
		    strcmp(str_of(e, "phase"), "Running") == 0)
			return e;
	}
	return NULL;
}

static int same_assignment(const sc_pod_t *p, json_t *e)
{
	json_t *g = json_object_get(e, "generation");
	if (p->generation || json_is_integer(g))
		return json_is_integer(g) && json_integer_value(g) == p->generation;
	return strcmp(p->started_at, str_of(e, "startedAt")) == 0;
}

/* Stops local pods of job that obj (NULL: deleted) no longer assigns here. */
static void stop_unwanted(sc_agent_t *a, const char *kind, const char *job, json_t *obj)
{
	for (sc_pod_t *p = a->pods, *next; p; p = next) {
		next = p->next;
		if (p->stopping || strcmp(p->kind, kind) != 0 || strcmp(p->job, job) != 0)
			continue;
		json_t *e = obj ? desired_entry(a, obj, p->name) : NULL;
		if (!e)
			sc__pod_stop(p, "no longer assigned to this node");
		else if (!same_assignment(p, e))
			sc__pod_stop(p, "assigned again under a newer generation");
	}
}

static void start_wanted(sc_agent_t *a, const char *kind, json_t *obj)
{
	json_t *e;
	size_t i;
	const char *job = name_of(obj);
	json_array_foreach(json_object_get(json_object_get(obj, "status"), "pods"), i, e)
	{
		const char *pod = str_of(e, "name");
		if (strcmp(str_of(e, "node"), a->o.name) != 0 ||
		    strcmp(str_of(e, "phase"), "Running") != 0 || sc__pod_find(a, job, pod))
			continue;
		json_t *task = sc__pod_serving_task(kind, obj, e, task_of(kind, obj, pod));
		if (!task) {
			sc_log_warn("%s %s: no task for pod %s; not started", kind, job, pod);
			continue;
		}
		sc__pod_start(a, kind, job, json_object_get(obj, "spec"), task, e);
		json_decref(task);
	}
}

static void reconcile(sc_watch_t *w, const char *job, json_t *obj)
{
	sc_agent_t *a = w->a;
	stop_unwanted(a, w->kind, job, obj);
	/* Fenced: the lease is gone and our view may be stale; start nothing
	 * until a heartbeat succeeds and we have listed again. */
	if (obj && !a->stopping && !a->fenced)
		start_wanted(a, w->kind, obj);
}

/* Reconciles every cached object (after a list, or when a stopped pod
 * makes room for its newer assignment). */
static void reconcile_all(sc_watch_t *w)
{
	const char *name;
	json_t *obj;
	for (sc_pod_t *p = w->a->pods, *next; p; p = next) {
		next = p->next;
		if (strcmp(p->kind, w->kind) == 0 && !json_object_get(w->cache, p->job))
			sc__pod_stop(p, "its object is gone");
	}
	json_object_foreach(w->cache, name, obj) reconcile(w, name, obj);
}

static void on_resync(uv_timer_t *t)
{
	sc_agent_t *a = t->data;
	for (int i = 0; i < 2; i++)
		reconcile_all(&a->watches[i]);
}

/* ---- list -------------------------------------------------------------- */

static int64_t rev_of(json_t *obj)
{
	const char *rv = str_of(json_object_get(obj, "metadata"), "resourceVersion");
	int64_t v = 0;
	return sc_parse_i64(rv, 0, INT64_MAX, &v) == 0 ? v : 0;
}

static void on_retry(uv_timer_t *t)
{
	sc_watch_t *w = t->data;
	if (w->rev)
		start_watch(w);
	else
		start_list(w);
}

static void retry_later(sc_watch_t *w)
{
	if (!w->a->stopping)
		uv_timer_start(&w->retry, on_retry, RETRY_MS, 0);
}

static void list_page(sc_watch_t *w);

/* One page of the list (the server pages lists). The whole list is taken
 * in only once its last page is in; the watch then starts from the first
 * page's revision, so every change made while the later pages were read
 * is seen again (handle_event keeps the newer of two revisions). */
static void on_list(int status, const char *body, size_t len, void *ud)
{
	sc_watch_t *w = ud;
	w->req = NULL;
	if (status == SC_ECANCELED)
		return; /* restarted or stopping: whoever cancelled goes on */
	json_t *doc = status == 200 ? json_loadb(body, len, 0, NULL) : NULL;
	json_t *items = json_object_get(doc, "items"), *obj;
	size_t i;
	if (!json_is_array(items)) {
		json_decref(doc);
		json_decref(w->paging);
		w->paging = NULL;
		w->rev = 0;
		retry_later(w);
		return;
	}
	if (!w->paging) {
		w->paging = json_object();
		w->list_rev = rev_of(doc);
	}
	json_array_foreach(items, i, obj) json_object_set(w->paging, name_of(obj), obj);
	const char *next = str_of(json_object_get(doc, "metadata"), "continue");
	snprintf(w->cont, sizeof(w->cont), "%s", next);
	json_decref(doc);
	if (w->cont[0]) {
		list_page(w);
		return;
	}
	json_decref(w->cache);
	w->cache = w->paging;
	w->paging = NULL;
	w->rev = w->list_rev;
	reconcile_all(w);
	start_watch(w);
}

static void start_list(sc_watch_t *w)
{
	json_decref(w->paging);
	w->paging = NULL;
	w->cont[0] = '\0';
	w->rev = 0;
	list_page(w);
}

static void list_page(sc_watch_t *w)
{
	char url[1024];
	/* ?node=: the server shows an agent only what is bound to its node,
	 * and wants that scope said (node authorization, docs/SECURITY.md). */
	snprintf(url, sizeof(url), "%s/api/v1/%s?node=%s&limit=500%s%s", w->a->server, w->plural,
	         w->a->o.name, w->cont[0] ? "&continue=" : "", w->cont);
	sc_hfetch_t o = {.url = url,
	                 .token = w->a->o.token,
	                 .timeout_ms = 30000,
	                 .max_body = MAX_LIST,
	                 .done = on_list,
	                 .ud = w};
	if (sc_hfetch(w->a->http, &o, &w->req) < 0) {
		w->req = NULL;
		retry_later(w);
	}
}

/* ---- watch ------------------------------------------------------------- */

/* 1 when a watch event must be skipped: the cache already holds that
 * object at a newer revision (a list read page by page, then watched from
 * its first page's revision, sees some changes twice). */
static int stale(sc_watch_t *w, const char *name, int64_t rev)
{
	json_t *have = json_object_get(w->cache, name);
	return have && rev_of(have) >= rev;
}

static void handle_event(sc_watch_t *w, json_t *ev)
{
	const char *type = str_of(ev, "type");
	json_t *obj = json_object_get(ev, "object");
	const char *name = name_of(obj);
	if (strcmp(type, "BOOKMARK") == 0) {
		/* Nothing changed for us up to rev: a later resume starts there. */
		int64_t rev = rev_of(obj);
		if (rev > w->rev)
			w->rev = rev;
		return;
	}
	if (strcmp(type, "ERROR") == 0) {
		/* Cut off (too slow: 410). The stream ends next; it resumes from
		 * the last revision seen, or lists again when the server gave
		 * no revision to resume from. */
		if (!str_of(json_object_get(obj, "metadata"), "resourceVersion")[0])
			w->rev = 0;
		sc_log_warn("%s watch cut off by the server: %s", w->plural,
		            str_of(obj, "message"));
		return;
	}
	if (!json_is_object(obj) || !name[0])
		return;
	int64_t rev = rev_of(obj);
	if (rev > w->rev)
		w->rev = rev;
	if (stale(w, name, rev))
		return;
	if (strcmp(type, "DELETED") == 0) {
		json_object_del(w->cache, name);
		reconcile(w, name, NULL);
		return;
	}
	json_object_set(w->cache, name, obj);
	reconcile(w, name, obj);
}

static int on_watch_data(const char *data, size_t len, void *ud)
{
	sc_watch_t *w = ud;
	if (sc_buf_append(&w->buf, data, len) < 0)
		return SC_ETOOBIG; /* one event over the limit: start over */
	char *nl;
	while ((nl = memchr(w->buf.data, '\n', w->buf.len))) {
		size_t n = (size_t)(nl - w->buf.data);
		json_t *ev = json_loadb(w->buf.data, n, 0, NULL);
		sc_buf_consume(&w->buf, n + 1);
		if (ev)
			handle_event(w, ev);
		json_decref(ev);
	}
	return 0;
}

static void on_watch_done(int status, const char *body, size_t len, void *ud)
{
	sc_watch_t *w = ud;
	w->req = NULL;
	sc_buf_reset(&w->buf);
	if (status == SC_ECANCELED)
		return; /* restarted or stopping */
	if (status == 410 || status == SC_ETOOBIG)
		w->rev = 0; /* the change log moved on: list again */
	retry_later(w);
}

static void start_watch(sc_watch_t *w)
{
	char url[1024];
	snprintf(url, sizeof(url),
	         "%s/api/v1/%s?watch=1&allowWatchBookmarks=true&resourceVersion=%lld&node=%s",
	         w->a->server, w->plural, (long long)w->rev, w->a->o.name);
	sc_buf_reset(&w->buf);
	sc_hfetch_t o = {.url = url,
	                 .token = w->a->o.token,
	                 .on_data = on_watch_data,
	                 .timeout_ms = WATCH_STALL_S * 1000,
	                 .done = on_watch_done,
	                 .ud = w};
	if (sc_hfetch(w->a->http, &o, &w->req) < 0) {
		w->req = NULL;
		retry_later(w);
	}
}

/* ---- public ------------------------------------------------------------ */

void sc__sync_init(sc_agent_t *a)
{
	static const char *const plurals[] = {"jobs", "deployments"};
	static const char *const kinds[] = {"Job", "Deployment"};
	uv_timer_init(a->loop, &a->resync_timer);
	a->resync_timer.data = a;
	a->resync_cb = on_resync;
	for (int i = 0; i < 2; i++) {
		sc_watch_t *w = &a->watches[i];
		w->a = a;
		w->plural = plurals[i];
		w->kind = kinds[i];
		w->cache = json_object();
		sc_buf_init(&w->buf, MAX_EVENT);
		uv_timer_init(a->loop, &w->retry);
		w->retry.data = w;
	}
}

void sc__sync_start(sc_agent_t *a)
{
	for (int i = 0; i < 2; i++)
		if (!a->watches[i].req)
			start_list(&a->watches[i]);
}

void sc__sync_restart(sc_agent_t *a)
{
	for (int i = 0; i < 2; i++) {
		sc_watch_t *w = &a->watches[i];
		sc_hcli_cancel(w->req); /* its done runs inside and clears w->req */
		w->req = NULL;
		uv_timer_stop(&w->retry);
		start_list(w);
	}
}

void sc__sync_stop(sc_agent_t *a)
{
	uv_timer_stop(&a->resync_timer);
	for (int i = 0; i < 2; i++) {
		sc_watch_t *w = &a->watches[i];
		sc_hcli_cancel(w->req);
		w->req = NULL;
		uv_timer_stop(&w->retry);
	}
}

void sc__sync_free(sc_agent_t *a)
{
	uv_close((uv_handle_t *)&a->resync_timer, NULL);
	for (int i = 0; i < 2; i++) {
		sc_watch_t *w = &a->watches[i];
		uv_close((uv_handle_t *)&w->retry, NULL);
		json_decref(w->cache);
		json_decref(w->paging);
		sc_buf_free(&w->buf);
	}
}
