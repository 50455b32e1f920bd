/* Watch streams: ?watch=1 on a list turns the response into newline-
 * delimited JSON change events, kept open until the client goes away.
 *
 * Without a resourceVersion the stream starts with an ADDED event for every
 * current object (Kubernetes' semantics), then continues from the revision
 * that list was read at; with one, it replays the store's change log after
 * that revision. Role and label filters apply to every event. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "base/alloc.h"
#include "starcloud/error.h"

typedef struct watcher {
	sc_server_t *s;
	sc_http_req_t *r;
	const sc_kind_t *kind;
	sc_principal_t who;
	char selector[1024];
	sc_store_watch_t *w;
	int started;
	int dead; /* the stream failed; stop sending */
} watcher_t;

static const char *const type_names[] = {"ADDED", "MODIFIED", "DELETED"};

static void start_stream(watcher_t *wt);

static void send_event(watcher_t *wt, int type, const char *value, int64_t rev)
{
	if (wt->dead)
		return;
	json_t *obj = sc__object_load(value, rev);
	if (!obj)
		return;
	if (!sc__auth_can_see(&wt->who, wt->kind, obj) || !sc__selector_match(wt->selector, obj)) {
		json_decref(obj);
		return;
	}
	if (!wt->started)
		start_stream(wt);
	json_t *ev = json_pack("{s:s,s:o}", "type", type_names[type], "object", obj);
	char *text = sc_xcheck(json_dumps(ev, JSON_COMPACT));
	json_decref(ev);
	size_t n = strlen(text);
	text[n] = '\n'; /* replaces the NUL: the chunk is sent by length */
	if (sc_http_stream_write(wt->r, text, n + 1) < 0)
		wt->dead = 1;
	free(text);
}

static void on_change(const sc_store_event_t *ev, void *ud)
{
	watcher_t *wt = ud;
	send_event(wt, ev->type, ev->value, ev->rev);
	if (wt->dead && wt->w) {
		/* A client that does not read is cut off; it lists again. */
		sc_store_unwatch(wt->s->store, wt->w);
		wt->w = NULL;
		sc_http_stream_end(wt->r);
		free(wt);
	}
}

static void on_close(sc_http_req_t *r, void *ud)
{
	watcher_t *wt = ud;
	if (wt->w)
		sc_store_unwatch(wt->s->store, wt->w);
	free(wt);
}

static void start_stream(watcher_t *wt)
{
	wt->started = 1;
	sc_http_stream_start(wt->r, 200, "application/x-ndjson", on_close, wt);
}

void sc__watch_start(sc_server_t *s, sc_http_req_t *r, const sc_kind_t *k,
                     const sc_principal_t *who, const char *selector, int64_t from_rev)
{
	watcher_t *wt = sc_xcalloc(1, sizeof(*wt));
	wt->s = s;
	wt->r = r;
	wt->kind = k;
	wt->who = *who;
	snprintf(wt->selector, sizeof(wt->selector), "%s", selector);
	char prefix[64];
	snprintf(prefix, sizeof(prefix), SC_KEY_PREFIX "%s/", k->plural);
	if (from_rev == 0) {
		sc_kv_list_t l;
		int lrc = sc_store_list(s->store, prefix, &l);
		if (lrc < 0) {
			free(wt);
			sc__api_store_error(r, lrc, "store");
			return;
		}
		for (size_t i = 0; i < l.n; i++)
			send_event(wt, SC_EV_ADDED, l.items[i].value, l.items[i].mod_rev);
		from_rev = l.rev;
		sc_kv_list_free(&l);
	}
	int rc = sc_store_watch(s->store, prefix, from_rev, on_change, wt, &wt->w);
	if (rc < 0 && !wt->started) {
		free(wt);
		if (rc == SC_ERANGE)
			sc__api_error(
			    r, 410, "Expired", "resourceVersion",
			    "resourceVersion %lld is older than the change log; list again",
			    (long long)from_rev);
		else
			sc__api_store_error(r, rc, "watch");
		return;
	}
	if (!wt->started)
		start_stream(wt);
	if (wt->dead) {
		if (wt->w)
			sc_store_unwatch(s->store, wt->w);
		sc_http_stream_end(r);
		free(wt);
	}
}

/* ---------------------------------------------------------------------
 * Label selectors
 * ------------------------------------------------------------------- */

/* Calls fn on each comma-separated term; stops at the first non-zero. */
static int each_term(const char *sel, int (*fn)(const char *t, size_t n, void *ud), void *ud)
{
	while (*sel) {
		const char *end = strchr(sel, ',');
		size_t n = end ? (size_t)(end - sel) : strlen(sel);
		int rc = fn(sel, n, ud);
		if (rc)
			return rc;
		sel += n + (end ? 1 : 0);
	}
	return 0;
}

static int term_check(const char *t, size_t n, void *ud)
{
	if (n == 0 || t[0] == '=' || (t[0] == '!' && n == 1))
		return SC_EINVAL;
	return 0;
}

int sc__selector_check(const char *selector)
{
	return each_term(selector, term_check, NULL);
}

/* Returns 1 (stop: no match) when the term does not hold for labels. */
static int term_fails(const char *t, size_t n, void *ud)
{
	json_t *labels = ud;
	char key[256], want[256];
	const char *eq = memchr(t, '=', n);
	int neg = 0, exists_only = !eq;
	if (eq && eq > t && eq[-1] == '!')
		neg = 1;
	size_t klen = eq ? (size_t)(eq - t - neg) : n;
	int not_exists = exists_only && t[0] == '!';
	if (not_exists)
		t++, klen--;
	snprintf(key, sizeof(key), "%.*s", (int)klen, t);
	if (eq) {
		const char *v = eq + 1 + (eq[1] == '=');
		snprintf(want, sizeof(want), "%.*s", (int)(t + n - v), v);
	}
	const char *have = json_string_value(json_object_get(labels, key));
	if (exists_only)
		return not_exists ? have != NULL : have == NULL;
	int equal = have && strcmp(have, want) == 0;
	return neg ? equal : !equal;
}

int sc__selector_match(const char *selector, json_t *obj)
{
	json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
	return each_term(selector, term_fails, labels) == 0;
}
