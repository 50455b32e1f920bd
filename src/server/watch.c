/* Watch streams: ?watch=1 on a list turns the response into newline-
 * delimited JSON change events, kept open until the client goes away
 * (watch.h).
 *
 * Without a resourceVersion the stream starts with an ADDED event for every
 * current object (Kubernetes' semantics), then continues from the revision
 * that list was read at; with one, it replays the store's change log after
 * that revision. Role and label filters apply to every event.
 *
 * Fan-out. The hub follows the object cache, which holds every object's
 * answer bytes (sc_wire_t: made once per revision, reference counted). An
 * event on the wire is `{"type":"MODIFIED","object":` + those bytes +
 * `}\n`, so a change is serialised once, and a watcher's queue holds
 * references, never copies. The filters read the object the cache parsed
 * once; nothing is parsed or printed per watcher. (The issue this answers:
 * each event was parsed and printed again for every watcher on the loop
 * thread, and 100 streams that never read held 947 MiB.)
 *
 * Output. A watcher hands the HTTP layer at most WINDOW bytes not yet
 * written to its socket (sc_http_stream_write_shared: the chunk points at
 * the shared bytes), and the rest waits in its queue. When the events
 * queued after its first list pass the buffer limit, the client is too
 * slow: it gets an ERROR event (code 410, "resume from resourceVersion N",
 * N the last event it was sent), the stream ends, the connection closes
 * once that is written or after CUT_GRACE_MS, and its references go. The
 * first list itself is not counted: it is the cache's own bytes, and a
 * client must be able to start however large the collection is.
 *
 * Bookmarks. A client that asks (allowWatchBookmarks=true, as in
 * Kubernetes) gets a BOOKMARK event every BOOKMARK_MS while it has nothing
 * else to read: its resourceVersion says every change up to it has been
 * sent, so a client resumes from there after a break instead of from its
 * last event (which the change log may have dropped), and a client can
 * tell a quiet watch from a frozen server (silence past a few bookmarks).
 *
 * Lifetime. A watch lives no longer than its token: deleting the token ends
 * every watch opened with it at once (a store watch on the token records,
 * so it holds across HA servers too), and a once-a-second sweep ends
 * watches whose token expired or that passed the server's --watch-timeout
 * (30 min by default, up to 1/8 earlier so reconnects do not come in a
 * herd); the client resumes from its last resourceVersion.
 *
 * Agents see a job only while one of its pods is bound to their node
 * (auth.c); when an object they were shown stops being visible they get a
 * DELETED event carrying only its name, so they stop its pods. */
#include "server/watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "server/cache.h"
#include "starcloud/error.h"

#define DEFAULT_BUFFER (8u << 20)
#define WINDOW (1u << 20)
#define CUT_GRACE_MS 5000
#define SOCKET_BUFFER (256 << 10) /* the kernel's share of a watcher's backlog */
#define BOOKMARK_MS 5000
#define EVENT_FRAMING 32 /* bytes around an object's answer bytes */
#define SWEEP_MS 1000

typedef struct wevent {
	int type;
	int64_t rev;
	sc_wire_t *wire; /* owned reference */
} wevent_t;

typedef struct watcher {
	struct watcher *prev, *next;
	sc_watch_hub_t *h;
	sc_http_req_t *r;
	const sc_kind_t *kind;
	sc_principal_t who;
	char selector[1024];
	int filter;  /* the object is needed to decide (tenant or selector) */
	wevent_t *q; /* ring of events not yet handed to HTTP */
	size_t head, n, cap;
	size_t ninitial;   /* of them, ADDED events of the first list (at the front) */
	size_t live_bytes; /* bytes of the other queued events */
	int64_t from_rev;  /* changes at or before it are in the list or replay */
	int64_t list_rev;  /* the revision the first list was read at */
	int64_t sent_rev;  /* resume point: everything up to it was handed over; 0 none */
	int draining;      /* waiting in sc_http_stream_on_drain */
	int bookmarks;     /* allowWatchBookmarks */
	uint64_t deadline; /* uv_now after which the watch ends (--watch-timeout) */
	json_t *shown;     /* agents: name -> true while shown, false once hidden */
	int resumed;       /* agents: started from a revision (their view unknown) */
} watcher_t;

struct sc_watch_hub {
	sc_server_t *s;
	size_t buffer;
	watcher_t *list;
	int64_t durable_rev; /* the store revision of the last successful sync */
	sc_watch_stats_t st;
	uv_timer_t bookmark;
	uv_timer_t sweep;         /* expired tokens, --watch-timeout */
	sc_store_watch_t *tokens; /* a deleted token ends its watches */
};

static const char *const prefixes[] = {
    "{\"type\":\"ADDED\",\"object\":", "{\"type\":\"MODIFIED\",\"object\":",
    "{\"type\":\"DELETED\",\"object\":"};

/* ---- the queue --------------------------------------------------------- */

static void q_push(watcher_t *w, int type, int64_t rev, sc_wire_t *wire)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 16;
		wevent_t *q = sc_xreallocarray(NULL, cap, sizeof(*q));
		for (size_t i = 0; i < w->n; i++)
			q[i] = w->q[(w->head + i) % w->cap];
		free(w->q);
		w->q = q;
		w->head = 0;
		w->cap = cap;
	}
	wevent_t *ev = &w->q[(w->head + w->n++) % w->cap];
	ev->type = type;
	ev->rev = rev;
	ev->wire = sc__wire_ref(wire);
	w->h->st.queued_bytes += wire->len + EVENT_FRAMING;
	w->h->st.events++;
}

/* Takes the front event out (the caller owns its reference). */
static wevent_t q_pop(watcher_t *w)
{
	wevent_t ev = w->q[w->head];
	w->head = (w->head + 1) % w->cap;
	w->n--;
	w->h->st.queued_bytes -= ev.wire->len + EVENT_FRAMING;
	if (w->ninitial)
		w->ninitial--;
	else
		w->live_bytes -= ev.wire->len + EVENT_FRAMING;
	return ev;
}

static void q_clear(watcher_t *w)
{
	while (w->n) {
		wevent_t ev = q_pop(w);
		sc__wire_unref(ev.wire);
	}
	free(w->q);
	w->q = NULL;
	w->cap = w->head = 0;
}

/* ---- watchers ---------------------------------------------------------- */

static void unlink_free(watcher_t *w)
{
	sc_watch_hub_t *h = w->h;
	if (w->prev)
		w->prev->next = w->next;
	else if (h->list == w)
		h->list = w->next;
	if (w->next)
		w->next->prev = w->prev;
	h->st.watchers--;
	q_clear(w);
	json_decref(w->shown);
	free(w);
}

/* Ends w's stream from the server's side (its token was deleted or has
 * expired, or the watch timed out): the events already handed over go,
 * the queued ones are dropped (the client resumes from the last
 * resourceVersion it read), and w is freed. */
static void end(watcher_t *w)
{
	q_clear(w);
	sc_http_on_close(w->r, NULL, NULL);
	sc_http_answer_rev(w->r, w->sent_rev > 0 ? w->sent_rev : 1);
	sc_http_stream_end(w->r);
	unlink_free(w);
}

static void on_close(sc_http_req_t *r, void *ud)
{
	(void)r;
	unlink_free(ud);
}

/* Ends w's stream with an ERROR event (a Kubernetes Status, code 410) and
 * frees it; its connection closes once that is written, or soon. */
static void cut(watcher_t *w, const char *why)
{
	char text[640], rv[80] = "";
	if (w->sent_rev > 0)
		snprintf(rv, sizeof(rv), ",\"metadata\":{\"resourceVersion\":\"%lld\"}",
		         (long long)w->sent_rev);
	int n = snprintf(
	    text, sizeof(text),
	    "{\"type\":\"ERROR\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Status\","
	    "\"status\":\"Failure\",\"code\":410,\"reason\":\"Expired\",\"message\":\"%s: "
	    "%s\"%s}}\n",
	    why,
	    w->sent_rev > 0 ? "resume from the resourceVersion given here" : "list and watch again",
	    rv);
	q_clear(w);
	sc_http_answer_rev(w->r, w->sent_rev > 0 ? w->sent_rev : 1);
	sc_http_stream_write(w->r, text, (size_t)n);
	sc_http_on_close(w->r, NULL, NULL);
	sc_http_stream_cut(w->r, CUT_GRACE_MS);
	unlink_free(w);
}

static void release_wire(void *ref)
{
	sc__wire_unref(ref);
}

static void pump(watcher_t *w);

static void on_drain(sc_http_req_t *r, void *ud)
{
	watcher_t *w = ud;
	(void)r;
	w->draining = 0;
	pump(w);
}

/* Hands queued events to HTTP while the window allows and they are
 * durable (a watcher must never show a change the store could still lose). */
static void pump(watcher_t *w)
{
	sc_watch_hub_t *h = w->h;
	int64_t durable = h->durable_rev;
	while (w->n && sc_http_pending_out(w->r) < WINDOW && w->q[w->head].rev <= durable) {
		int initial = w->ninitial > 0;
		wevent_t ev = q_pop(w);
		const char *pre = prefixes[ev.type];
		sc_http_answer_rev(w->r, ev.rev); /* durable: need not wait for newer writes */
		if (sc_http_stream_write_shared(w->r, pre, strlen(pre), ev.wire->data, ev.wire->len,
		                                "}\n", 2, release_wire, ev.wire) < 0)
			return; /* the connection is going: its close frees w */
		if (!initial)
			w->sent_rev = ev.rev;
		else if (!w->ninitial)
			w->sent_rev = w->list_rev; /* the whole list is out */
	}
	if (w->n && !w->draining && sc_http_pending_out(w->r) >= WINDOW) {
		w->draining = 1;
		sc_http_stream_on_drain(w->r, on_drain, w);
	}
}

static int sees(const watcher_t *w, json_t *obj)
{
	return obj && sc__auth_can_see(&w->who, w->kind, obj) &&
	       sc__selector_match(w->selector, obj);
}

/* An agent's view of a change (node authorization): the change itself
 * while the object is bound to its node (*wire unchanged, returns 1), once
 * a DELETED event with nothing but the name when an object it was shown
 * (or, after a resume, may have been shown) stops being bound to it
 * (*type and *wire replaced: a new reference the caller drops; returns
 * 1), else nothing (0). */
static int agent_view(watcher_t *w, int *type, json_t *obj, int64_t rev, sc_wire_t **wire)
{
	const char *name =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
	if (!name)
		return 0;
	if (*type != SC_EV_DELETED && sees(w, obj)) {
		json_object_set_new(w->shown, name, json_true());
		return 1;
	}
	json_t *was = json_object_get(w->shown, name);
	if (json_is_false(was) || (!was && !w->resumed))
		return 0;
	json_object_set_new(w->shown, name, json_false());
	json_t *gone = json_pack("{s:s,s:{s:s}}", "kind", w->kind->kind, "metadata", "name", name);
	char *text = json_dumps(gone, JSON_COMPACT);
	json_decref(gone);
	*type = SC_EV_DELETED;
	*wire = text ? sc__wire_from_text(text, rev) : NULL;
	free(text);
	return *wire != NULL;
}

/* Queues a live event for w; cuts it off when it is too far behind. */
static void deliver(watcher_t *w, int type, int64_t rev, sc_wire_t *wire)
{
	q_push(w, type, rev, wire);
	w->live_bytes += wire->len + EVENT_FRAMING;
	if (w->live_bytes > w->h->buffer) {
		w->h->st.cut_slow++;
		char why[128];
		snprintf(why, sizeof(why), "watcher too slow: more than %zu bytes of events queued",
		         w->h->buffer);
		cut(w, why);
		return;
	}
	pump(w);
}

/* A change the cache took in: one set of answer bytes for every watcher
 * that may see it. */
static void on_change(void *ud, int type, sc_cobj_t *o, int64_t rev)
{
	sc_watch_hub_t *h = ud;
	sc_wire_t *wire = NULL;
	json_t *obj = NULL;
	int parsed = 0;
	for (watcher_t *w = h->list, *next; w; w = next) {
		next = w->next; /* delivering may cut w off */
		if (w->kind != o->kind || rev <= w->from_rev)
			continue;
		if (w->shown) {
			if (!parsed) {
				obj = sc__cache_parse(o);
				parsed = 1;
			}
			int t = type;
			sc_wire_t *own = NULL;
			if (obj && agent_view(w, &t, obj, rev, &own)) {
				if (own) {
					deliver(w, t, rev, own);
					sc__wire_unref(own);
					continue;
				}
			} else {
				continue;
			}
		} else if (w->filter) {
			if (!parsed) {
				obj = sc__cache_parse(o);
				parsed = 1;
			}
			if (!sees(w, obj))
				continue;
		}
		if (!wire)
			wire = type == SC_EV_DELETED ? sc__cache_wire_at(o, rev)
			                             : sc__cache_wire_ref(o);
		if (!wire)
			break; /* not a JSON object: never written by this server */
		deliver(w, type, rev, wire);
	}
	sc__wire_unref(wire);
	json_decref(obj);
}

/* ---- starting a watch -------------------------------------------------- */

/* The first list, from the cache: ADDED for every object w may see. */
static void list_cache(watcher_t *w)
{
	size_t n;
	sc_cobj_t *const *v = sc__cache_items(w->h->s->cache, w->kind, &n);
	for (size_t i = 0; i < n; i++) {
		json_t *obj = w->filter ? sc__cache_parse(v[i]) : NULL;
		int seen = !w->filter || sees(w, obj);
		json_decref(obj);
		sc_wire_t *wire = seen ? sc__cache_wire_ref(v[i]) : NULL;
		if (!wire)
			continue;
		if (w->shown)
			json_object_set_new(w->shown, v[i]->name, json_true());
		q_push(w, SC_EV_ADDED, v[i]->mod_rev, wire);
		sc__wire_unref(wire); /* q_push took its own */
	}
	w->list_rev = sc__cache_rev(w->h->s->cache);
}

/* Queues a stored value (a first list read from the store, or a replayed
 * change) if w may see it. */
static void push_text(watcher_t *w, int type, const char *value, int64_t rev)
{
	sc_wire_t *wire = NULL;
	if (w->shown) {
		json_t *obj = json_loads(value, 0, NULL);
		int ok = obj && agent_view(w, &type, obj, rev, &wire);
		json_decref(obj);
		if (!ok)
			return;
		if (wire) {
			q_push(w, type, rev, wire);
			sc__wire_unref(wire);
			return;
		}
	} else if (w->filter) {
		json_t *obj = json_loads(value, 0, NULL);
		int ok = sees(w, obj);
		json_decref(obj);
		if (!ok)
			return;
	}
	wire = sc__wire_from_text(value, rev);
	if (!wire)
		return;
	q_push(w, type, rev, wire);
	sc__wire_unref(wire);
}

static void on_replay(const sc_store_event_t *ev, void *ud)
{
	watcher_t *w = ud;
	push_text(w, ev->type, ev->value, ev->rev);
	if (ev->rev > w->from_rev)
		w->from_rev = ev->rev;
}

void sc__watch_start(sc_server_t *s, sc_http_req_t *r, const sc_kind_t *k,
                     const sc_principal_t *who, const char *selector, int64_t from_rev,
                     int bookmarks)
{
	sc_watch_hub_t *h = s->watch;
	watcher_t *w = sc_xcalloc(1, sizeof(*w));
	char prefix[64];
	int rc = 0;
	w->h = h;
	w->r = r;
	w->kind = k;
	w->who = *who;
	snprintf(w->selector, sizeof(w->selector), "%s", selector);
	w->filter = who->role == SC_ROLE_TENANT || who->role == SC_ROLE_AGENT || selector[0];
	w->bookmarks = bookmarks;
	w->resumed = from_rev != 0;
	if (who->role == SC_ROLE_AGENT)
		w->shown = json_object();
	/* Up to 1/8 earlier, so watches opened together do not all end, and
	 * come back, in the same second. */
	uint64_t t = s->sec.watch_timeout_ms, jitter = t / 8;
	w->deadline =
	    t ? uv_now(s->loop) + t - (jitter ? (uv_hrtime() / 1000) % jitter : 0) : UINT64_MAX;
	snprintf(prefix, sizeof(prefix), SC_KEY_PREFIX "%s/", k->plural);
	if (from_rev == 0) {
		list_cache(w);
		w->ninitial = w->n;
		w->from_rev = w->list_rev;
		w->sent_rev = w->n ? 0 : w->list_rev;
	} else {
		w->from_rev = w->sent_rev = from_rev;
		rc = sc_store_replay(s->store, prefix, from_rev, on_replay, w);
		/* A replay is live events: it counts against the buffer. */
		for (size_t i = 0; i < w->n; i++)
			w->live_bytes += w->q[(w->head + i) % w->cap].wire->len + EVENT_FRAMING;
	}
	if (rc < 0) {
		q_clear(w);
		json_decref(w->shown);
		free(w);
		if (rc == SC_ERANGE)
			sc__api_error(
			    r, 410, "Expired", "resourceVersion",
			    "resourceVersion %lld is older than the change log; list again",
			    (long long)from_rev);
		else
			sc__api_store_error(r, rc, "watch");
		return;
	}
	w->next = h->list;
	if (h->list)
		h->list->prev = w;
	h->list = w;
	h->st.watchers++;
	sc_http_set_send_buffer(r, SOCKET_BUFFER);
	sc_http_stream_start(r, 200, "application/x-ndjson", on_close, w);
	if (w->live_bytes > h->buffer) {
		h->st.cut_slow++;
		cut(w, "too far behind: the replay is larger than the watch buffer");
		return;
	}
	pump(w);
}

/* ---- the hub ----------------------------------------------------------- */

/* The revision up to which every change has reached the watchers' queues
 * and is durable: the cache's (with etcd the store is ahead of the changes
 * its feed has delivered) unless a write is still waiting for its sync. */
static int64_t delivered_rev(sc_watch_hub_t *h)
{
	int64_t rev = sc__cache_rev(h->s->cache);
	return h->durable_rev < rev ? h->durable_rev : rev;
}

static void on_bookmark(uv_timer_t *t)
{
	sc_watch_hub_t *h = t->data;
	char text[256];
	int64_t rev = delivered_rev(h);
	for (watcher_t *w = h->list; w; w = w->next) {
		if (!w->bookmarks || w->n || sc_http_pending_out(w->r) >= WINDOW ||
		    rev < w->sent_rev)
			continue;
		int n =
		    snprintf(text, sizeof(text),
		             "{\"type\":\"BOOKMARK\",\"object\":{\"apiVersion\":\"starcloud.dev/"
		             "v1\",\"kind\":\"%s\",\"metadata\":{\"resourceVersion\":\"%lld\"}}}\n",
		             w->kind->kind, (long long)rev);
		sc_http_answer_rev(w->r, rev);
		if (sc_http_stream_write(w->r, text, (size_t)n) == 0)
			w->sent_rev = rev;
	}
}

/* A token record was deleted: its watches end now. */
static void on_token_change(const sc_store_event_t *ev, void *ud)
{
	sc_watch_hub_t *h = ud;
	const char *id = ev->key + strlen(SC_KEY_PREFIX "tokens/");
	if (ev->type != SC_EV_DELETED)
		return;
	for (watcher_t *w = h->list, *next; w; w = next) {
		next = w->next;
		if (strcmp(w->who.id, id) == 0)
			end(w);
	}
}

static void on_sweep(uv_timer_t *t)
{
	sc_watch_hub_t *h = t->data;
	uint64_t now = uv_now(h->s->loop);
	int64_t unix_now = (int64_t)time(NULL);
	for (watcher_t *w = h->list, *next; w; w = next) {
		next = w->next;
		if (now >= w->deadline || sc__auth_expired(&w->who, unix_now))
			end(w);
	}
}

int sc__watch_hub_new(sc_server_t *s, size_t buffer, sc_watch_hub_t **out)
{
	sc_watch_hub_t *h = sc_xcalloc(1, sizeof(*h));
	int rc = sc_store_watch(s->store, SC_KEY_PREFIX "tokens/", sc_store_revision(s->store),
	                        on_token_change, h, &h->tokens);
	if (rc < 0) {
		free(h);
		return rc;
	}
	h->s = s;
	h->buffer = buffer ? buffer : DEFAULT_BUFFER;
	h->durable_rev = sc_store_revision(s->store);
	sc__cache_listen(s->cache, on_change, h);
	uv_timer_init(s->loop, &h->bookmark);
	h->bookmark.data = h;
	uv_timer_start(&h->bookmark, on_bookmark, BOOKMARK_MS, BOOKMARK_MS);
	uv_unref((uv_handle_t *)&h->bookmark);
	uv_timer_init(s->loop, &h->sweep);
	h->sweep.data = h;
	uv_timer_start(&h->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
	uv_unref((uv_handle_t *)&h->sweep);
	*out = h;
	return 0;
}

/* The hub goes with the second of its two timers. */
static void on_timer_closed(uv_handle_t *t)
{
	sc_watch_hub_t *h = t->data;
	if (t == (uv_handle_t *)&h->bookmark)
		h->bookmark.data = NULL;
	else
		h->sweep.data = NULL;
	if (!h->bookmark.data && !h->sweep.data)
		free(h);
}

void sc__watch_hub_free(sc_watch_hub_t *h)
{
	if (!h)
		return;
	sc__cache_listen(h->s->cache, NULL, NULL);
	if (h->tokens)
		sc_store_unwatch(h->s->store, h->tokens);
	h->tokens = NULL;
	while (h->list)
		cut(h->list, "the server is stopping");
	uv_close((uv_handle_t *)&h->bookmark, on_timer_closed);
	uv_close((uv_handle_t *)&h->sweep, on_timer_closed);
}

void sc__watch_flush(sc_watch_hub_t *h, int64_t durable)
{
	if (!h)
		return;
	h->durable_rev = durable;
	for (watcher_t *w = h->list, *next; w; w = next) {
		next = w->next;
		if (w->n && !w->draining)
			pump(w);
	}
}

void sc__watch_rollback(sc_watch_hub_t *h, int64_t durable)
{
	for (watcher_t *w = h->list, *next; w; w = next) {
		next = w->next;
		for (size_t i = 0; i < w->n; i++)
			if (w->q[(w->head + i) % w->cap].rev > durable) {
				h->st.cut_lost++;
				cut(w, "the store could not write its last changes");
				break;
			}
	}
	h->durable_rev = durable;
}

const sc_watch_stats_t *sc__watch_stats(sc_watch_hub_t *h)
{
	return &h->st;
}

/* ---------------------------------------------------------------------
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

/* Kubernetes' label syntax: a name is 1..63 of [A-Za-z0-9-_.] starting and
 * ending with an alphanumeric; a key may have a DNS prefix and '/' before
 * its name; a value is empty or a name. */
static int is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int label_name(const char *s, size_t n, size_t max)
{
	if (n == 0 || n > max || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return 0;
	return 1;
}

static int label_key(const char *s, size_t n)
{
	const char *slash = memchr(s, '/', n);
	if (!slash)
		return label_name(s, n, 63);
	size_t pre = (size_t)(slash - s);
	return label_name(s, pre, 253) && label_name(slash + 1, n - pre - 1, 63);
}

typedef struct sel_err {
	char *msg;
	size_t msgsz;
} sel_err_t;

/* Checks one term; on a bad one writes what is wrong into ud's message. */
static int term_check(const char *t, size_t n, void *ud)
{
	sel_err_t *e = ud;
	const char *why = NULL;
	const char *eq = memchr(t, '=', n);
	if (n == 0) {
		why = "an empty term (two commas, or a comma at an end)";
	} else if (!eq) {
		size_t neg = t[0] == '!';
		if (!label_key(t + neg, n - neg))
			why = memchr(t, ' ', n)
			          ? "set-based selectors (in, notin) are not supported; "
			            "use k=v, k!=v, k or !k"
			          : "not a label key (letters, digits, -, _ and ., "
			            "optionally after a DNS prefix and /)";
	} else {
		int neg = eq > t && eq[-1] == '!';
		size_t klen = (size_t)(eq - t) - (size_t)neg;
		const char *v = eq + 1 + (eq + 1 < t + n && eq[1] == '=' && !neg);
		size_t vlen = (size_t)(t + n - v);
		if (!label_key(t, klen))
			why = "not a label key before the operator";
		else if (vlen && !label_name(v, vlen, 63))
			why = memchr(v, '=', vlen)
			          ? "more than one operator"
			          : "not a label value after the operator (letters, "
			            "digits, -, _ and ., at most 63)";
	}
	if (!why)
		return 0;
	if (e && e->msg)
		snprintf(e->msg, e->msgsz,
		         "labelSelector: \"%.*s\": %s; expected k=v, k==v, k!=v, k or !k, "
		         "comma-separated",
		         (int)(n > 100 ? 100 : n), t, why);
	return SC_EINVAL;
}

int sc__selector_why(const char *selector, char *msg, size_t msgsz)
{
	sel_err_t e = {msg, msgsz};
	size_t n = strlen(selector);
	if (msgsz)
		msg[0] = '\0';
	if (n && selector[n - 1] == ',') /* each_term never sees the empty last term */
		return term_check(selector + n, 0, &e);
	return each_term(selector, term_check, &e);
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
