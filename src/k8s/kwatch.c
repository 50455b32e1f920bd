/* List + watch of one resource kind into the cache, client-go's reflector
 * in small:
 *
 *   list     GET ...?limit=500[&continue=T] page by page; every object is
 *            stored, and at the end whatever the list did not contain is
 *            removed (sc_kcache_begin_list / end_list); the list's
 *            resourceVersion is where the watch starts.
 *   watch    GET ...?watch=1&resourceVersion=RV&allowWatchBookmarks=true
 *            &timeoutSeconds=N: newline-delimited events; each one (and each
 *            BOOKMARK) moves RV forward, so a watch that ends (the timeout,
 *            a dropped connection) resumes from RV without a list.
 *   410 Gone RV is older than the server keeps (an ERROR event or an HTTP
 *            410): list again.
 *   errors   back off 0.5 s doubling to 30 s, then resume (watch from RV,
 *            or list again when there is none).
 * The KAI kinds are optional: without their CRDs the list answers 404;
 * the kind then counts as synced and empty, and is listed again every
 * 30 s until the CRDs appear. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "k8s/k8s_int.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"

#define PAGE 500
#define MAX_PAGE (256u << 20) /* one list page */
#define MAX_EVENT (16u << 20) /* one watch event (a line) */
#define WATCH_TIMEOUT 300     /* seconds; spread by up to a third */
#define BACKOFF_MIN 0.5
#define BACKOFF_MAX 30.0
#define MISSING_RETRY 30.0

static const struct {
	const char *name;
	const char *path;
	const char *query;
	bool optional;
} kinds[SC_KK_COUNT] = {
    /* Finished pods hold nothing, as kube-scheduler's informer has it: a
     * pod that finishes then arrives as a DELETED event. */
    [SC_KK_POD] = {"pods", "/api/v1/pods",
                   "fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed", false},
    [SC_KK_NODE] = {"nodes", "/api/v1/nodes", NULL, false},
    [SC_KK_QUEUE] = {"queues", "/apis/scheduling.run.ai/v2/queues", NULL, true},
    [SC_KK_GROUP] = {"podgroups", "/apis/scheduling.run.ai/v2alpha2/podgroups", NULL, true},
    [SC_KK_CLASS] = {"priorityclasses", "/apis/scheduling.k8s.io/v1/priorityclasses", NULL, false},
};

enum { ST_IDLE = 0, ST_LIST, ST_WATCH };

struct sc_kwatch {
	sc_k8s_t *k;
	int kind;
	int state;
	bool synced;
	bool gone; /* a 410 came in the stream */
	char rv[64];
	char *cont; /* list continue token */
	sc_hcli_req_t *req;
	sc_buf_t line;  /* partial watch event */
	double started; /* when the current watch began */
	uv_timer_t retry;
	double backoff;
	unsigned long events;
};

static void start_list(sc_kwatch_t *w);
static void start_watch(sc_kwatch_t *w);

static void retry_cb(uv_timer_t *t)
{
	sc_kwatch_t *w = t->data;
	if (w->rv[0])
		start_watch(w);
	else
		start_list(w);
}

static void retry_later(sc_kwatch_t *w, double seconds)
{
	w->state = ST_IDLE;
	w->req = NULL;
	uv_timer_start(&w->retry, retry_cb, (uint64_t)(seconds * 1000), 0);
}

static void backoff(sc_kwatch_t *w)
{
	w->backoff = w->backoff < BACKOFF_MIN ? BACKOFF_MIN : w->backoff * 2;
	if (w->backoff > BACKOFF_MAX)
		w->backoff = BACKOFF_MAX;
	retry_later(w, w->backoff);
}

static void set_rv(sc_kwatch_t *w, json_t *obj)
{
	json_t *rv = json_object_get(json_object_get(obj, "metadata"), "resourceVersion");
	if (json_is_string(rv))
		snprintf(w->rv, sizeof(w->rv), "%s", json_string_value(rv));
}

/* ---- list --------------------------------------------------------------- */

static void list_done(int status, const char *body, size_t len, void *ud)
{
	sc_kwatch_t *w = ud;
	sc_k8s_t *k = w->k;
	char msg[300];
	w->req = NULL;
	if (status == SC_ECANCELED)
		return; /* sc__kwatch_free */
	if (status == 404 && kinds[w->kind].optional) {
		if (!w->synced)
			sc_log_warn(
			    "%s: not served (KAI's CRDs are not installed?); treated as none, "
			    "retried every %.0f s",
			    kinds[w->kind].name, MISSING_RETRY);
		/* Nothing listed: whatever was cached is gone. */
		sc_kcache_end_list(&k->cache, w->kind);
		w->synced = true;
		w->rv[0] = '\0';
		sc__k8s_kick(k);
		retry_later(w, MISSING_RETRY);
		return;
	}
	if (status != 200) {
		sc_log_error("list %s: %s", kinds[w->kind].name,
		             status < 0 ? sc_strerror(status)
		                        : sc__k8s_status_msg(body, len, msg, sizeof(msg)));
		w->rv[0] = '\0';
		free(w->cont); /* a page error restarts the whole list */
		w->cont = NULL;
		backoff(w);
		return;
	}
	json_error_t je;
	json_t *list = json_loadb(body, len, 0, &je);
	json_t *items = json_object_get(list, "items"), *it;
	if (!json_is_array(items)) {
		sc_log_error("list %s: not a list (%s)", kinds[w->kind].name, je.text);
		json_decref(list);
		free(w->cont);
		w->cont = NULL;
		backoff(w);
		return;
	}
	size_t i;
	json_array_foreach(items, i, it)
	{
		if (sc_kcache_apply(&k->cache, w->kind, false, it) < 0)
			sc_log_warn("list %s: item %zu is not a valid object; skipped",
			            kinds[w->kind].name, i);
	}
	json_t *md = json_object_get(list, "metadata");
	const char *cont = json_string_value(json_object_get(md, "continue"));
	free(w->cont);
	w->cont = cont && *cont ? sc_xstrdup(cont) : NULL;
	if (w->cont) {
		json_decref(list);
		start_list(w);
		return;
	}
	set_rv(w, list);
	json_decref(list);
	size_t gone = sc_kcache_end_list(&k->cache, w->kind);
	if (gone)
		sc_log_info("%s: %zu objects were deleted while not watched", kinds[w->kind].name,
		            gone);
	w->synced = true;
	w->backoff = 0;
	sc__k8s_kick(k);
	start_watch(w);
}

static void start_list(sc_kwatch_t *w)
{
	char path[4096];
	const char *q = kinds[w->kind].query;
	if (!w->cont) {
		sc_kcache_begin_list(&w->k->cache, w->kind);
		w->k->st.relists++;
	}
	int n = snprintf(path, sizeof(path), "%s?limit=%d%s%s", kinds[w->kind].path, PAGE,
	                 q ? "&" : "", q ? q : "");
	if (w->cont) {
		char esc[2048];
		sc__k8s_escape(w->cont, esc, sizeof(esc));
		snprintf(path + n, sizeof(path) - (size_t)n, "&continue=%s", esc);
	}
	w->state = ST_LIST;
	w->req =
	    sc__k8s_request(w->k, "GET", path, NULL, NULL, 0, 120000, MAX_PAGE, NULL, list_done, w);
	if (!w->req)
		backoff(w);
}

/* ---- watch -------------------------------------------------------------- */

/* One event line. Returns -1 to stop the stream (410: list again). */
/* Is obj, a PodGroup or Queue whose status alone changed, showing the
 * status this scheduler wrote? */
static bool echo(sc_k8s_t *k, int kind, json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata");
	const char *ns = json_string_value(json_object_get(md, "namespace"));
	const char *name = json_string_value(json_object_get(md, "name"));
	char key[600];
	if (!name || !k->status)
		return false;
	if (kind == SC_KK_GROUP)
		snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name);
	else
		snprintf(key, sizeof(key), "%s", name);
	return sc__kstatus_echo(k->status, kind, key);
}

static int on_event(sc_kwatch_t *w, const char *text, size_t len)
{
	sc_k8s_t *k = w->k;
	json_t *ev = json_loadb(text, len, 0, NULL);
	const char *type = json_string_value(json_object_get(ev, "type"));
	json_t *obj = json_object_get(ev, "object");
	if (!type && json_is_string(json_object_get(ev, "kind"))) {
		/* A bare Status: the server refused the watch itself. */
		obj = ev;
		type = "ERROR";
	}
	if (!type || !json_is_object(obj)) {
		sc_log_warn("watch %s: unreadable event skipped", kinds[w->kind].name);
		json_decref(ev);
		return 0;
	}
	int rc = 0;
	if (strcmp(type, "ERROR") == 0) {
		json_t *code = json_object_get(obj, "code");
		if (json_integer_value(code) == 410) {
			w->gone = true;
		} else {
			char msg[300];
			const char *m = json_string_value(json_object_get(obj, "message"));
			snprintf(msg, sizeof(msg), "%s", m ? m : "?");
			sc_log_warn("watch %s: %s", kinds[w->kind].name, msg);
		}
		rc = -1;
	} else if (strcmp(type, "BOOKMARK") == 0) {
		set_rv(w, obj);
	} else {
		bool del = strcmp(type, "DELETED") == 0;
		int ac = sc_kcache_apply(&k->cache, w->kind, del, obj);
		if (ac < 0)
			sc_log_warn("watch %s: %s event with an invalid object skipped",
			            kinds[w->kind].name, type);
		set_rv(w, obj);
		w->events++;
		/* Our own status coming back is no reason for a cycle (it
		 * would answer every status write with one); someone else's
		 * change to it is: the cycle writes ours again. */
		if (ac != 2 || !echo(k, w->kind, obj))
			sc__k8s_kick(k);
	}
	json_decref(ev);
	return rc;
}

static int watch_data(const char *data, size_t len, void *ud)
{
	sc_kwatch_t *w = ud;
	if (sc_buf_append(&w->line, data, len) < 0) {
		sc_log_error("watch %s: an event is larger than %u bytes", kinds[w->kind].name,
		             MAX_EVENT);
		sc_buf_reset(&w->line);
		return -1;
	}
	size_t start = 0;
	for (size_t i = 0; i < w->line.len; i++) {
		if (w->line.data[i] != '\n')
			continue;
		if (i > start && on_event(w, w->line.data + start, i - start) < 0) {
			sc_buf_reset(&w->line);
			return -1;
		}
		start = i + 1;
	}
	sc_buf_consume(&w->line, start);
	return 0;
}

static void watch_done(int status, const char *body, size_t len, void *ud)
{
	sc_kwatch_t *w = ud;
	w->req = NULL;
	sc_buf_reset(&w->line);
	if (status == SC_ECANCELED)
		return; /* sc__kwatch_free */
	w->k->st.watch_restarts++;
	if (w->gone || status == 410) {
		w->gone = false;
		w->rv[0] = '\0';
		sc_log_info("watch %s: resourceVersion too old (410); listing again",
		            kinds[w->kind].name);
		start_list(w);
		return;
	}
	if (status == 200 && sc__k8s_now() - w->started > 1) {
		/* The server's timeout: resume from where we are. A watch that
		 * ends at once every time is an error, and backs off below. */
		w->backoff = 0;
		start_watch(w);
		return;
	}
	if (status != SC_EIO || !w->k->stopping) {
		char msg[300];
		sc_log_warn("watch %s ended (%s); resuming", kinds[w->kind].name,
		            status < 0      ? sc_strerror(status)
		            : status == 200 ? "closed at once"
		                            : sc__k8s_status_msg(body, len, msg, sizeof(msg)));
	}
	backoff(w);
}

static void start_watch(sc_kwatch_t *w)
{
	char path[1024];
	const char *q = kinds[w->kind].query;
	int timeout = WATCH_TIMEOUT + (int)(random() % (WATCH_TIMEOUT / 3));
	snprintf(path, sizeof(path),
	         "%s?watch=1&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d%s%s",
	         kinds[w->kind].path, w->rv, timeout, q ? "&" : "", q ? q : "");
	w->state = ST_WATCH;
	w->gone = false;
	w->started = sc__k8s_now();
	w->req = sc__k8s_request(w->k, "GET", path, NULL, NULL, 0, 0, 0, watch_data, watch_done, w);
	if (!w->req)
		backoff(w);
}

/* ---- public ------------------------------------------------------------- */

sc_kwatch_t *sc__kwatch_new(sc_k8s_t *k, int kind)
{
	sc_kwatch_t *w = sc_xcalloc(1, sizeof(*w));
	w->k = k;
	w->kind = kind;
	sc_buf_init(&w->line, MAX_EVENT);
	uv_timer_init(k->loop, &w->retry);
	w->retry.data = w;
	return w;
}

void sc__kwatch_start(sc_kwatch_t *w)
{
	start_list(w);
}

bool sc__kwatch_synced(const sc_kwatch_t *w)
{
	return w->synced;
}

static void on_closed(uv_handle_t *h)
{
	free(h->data);
}

void sc__kwatch_free(sc_kwatch_t *w)
{
	if (!w)
		return;
	sc_hcli_cancel(w->req); /* its done runs inside and returns at once */
	sc_buf_free(&w->line);
	free(w->cont);
	uv_timer_stop(&w->retry);
	uv_close((uv_handle_t *)&w->retry, on_closed);
}
