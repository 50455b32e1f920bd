/* The etcd backend's change feed: one watch stream on the whole prefix,
 * read by a thread, handed to the loop thread through a queue and a pipe.
 *
 * The thread never touches the store's watchers: it only queues events.
 * The loop thread dispatches them (sc__etcd_watch_dispatch), so watch
 * callbacks run on the loop thread like every other store call, and
 * keeps the dispatched ones in a ring for replays. When the stream breaks
 * (an etcd member died) the thread reconnects to the next endpoint and
 * resumes at the revision after the last event it received, so no change
 * is lost or repeated. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "starcloud/buf.h"
#include "base/alloc.h"
#include "base/log.h"
#include "starcloud/error.h"
#include "store/etcd_int.h"

/* Events kept for replays (watches that resume from a resourceVersion). */
#define LOG_KEEP 20000
#define RETRY_MS 200

struct sc_etcd_ev {
	sc_etcd_ev_t *next;
	int type;
	char *key; /* store key */
	char *value;
	int64_t rev;
};

static void ev_free(sc_etcd_ev_t *ev)
{
	if (!ev)
		return;
	free(ev->key);
	free(ev->value);
	free(ev);
}

/* ---------------------------------------------------------------------
 * Thread side
 * ------------------------------------------------------------------- */

typedef struct stream {
	sc_etcd_watch_t *w;
	sc_buf_t line;
	int failed;
} stream_t;

static char *decode_field(json_t *kv, const char *field)
{
	char *out = NULL;
	const char *b = json_string_value(json_object_get(kv, field));
	if (sc__b64_dec(b ? b : "", &out, NULL) < 0)
		return NULL;
	return out;
}

/* Turns one gateway event into a queued event; NULL for keys we skip. */
static sc_etcd_ev_t *make_event(sc_etcd_watch_t *w, json_t *je)
{
	json_t *kv = json_object_get(je, "kv");
	char *key = decode_field(kv, "key");
	size_t plen = strlen(w->prefix);
	if (!key || strncmp(key, w->prefix, plen) != 0 || sc__etcd_is_meta(w->prefix, key)) {
		free(key);
		return NULL;
	}
	sc_etcd_ev_t *ev = sc_xcalloc(1, sizeof(*ev));
	ev->key = sc_xmalloc(strlen(key) - plen + 2);
	snprintf(ev->key, strlen(key) - plen + 2, "/%s", key + plen);
	free(key);
	ev->rev = sc__etcd_int(kv, "mod_revision");
	const char *type = json_string_value(json_object_get(je, "type"));
	if (type && strcmp(type, "DELETE") == 0) {
		ev->type = SC_EV_DELETED;
		ev->value = decode_field(json_object_get(je, "prev_kv"), "value");
	} else {
		ev->type = sc__etcd_int(kv, "version") == 1 ? SC_EV_ADDED : SC_EV_MODIFIED;
		ev->value = decode_field(kv, "value");
	}
	if (!ev->value || !*ev->value) {
		free(ev->value);
		ev->value = sc_xstrdup("{}");
	}
	return ev;
}

/* Queues first..last (may be none: a message with only the backend's own
 * keys still moves recv_rev, which calls waiting for it need). */
static void enqueue(sc_etcd_watch_t *w, sc_etcd_ev_t *first, sc_etcd_ev_t *last, int64_t rev)
{
	pthread_mutex_lock(&w->mu);
	if (first && w->qtail)
		w->qtail->next = first;
	else if (first)
		w->qhead = first;
	if (last)
		w->qtail = last;
	if (rev > w->recv_rev)
		w->recv_rev = rev;
	pthread_mutex_unlock(&w->mu);
	char b = 1;
	/* A full pipe already means "wake up": nothing to do on EAGAIN. */
	if (write(w->pipefd[1], &b, 1) < 0 && errno != EAGAIN)
		perror("store: etcd watch pipe");
}

/* One message of the stream: {"result":{"events":[...],...}}. */
static void on_message(stream_t *st, const char *text, size_t n)
{
	sc_etcd_watch_t *w = st->w;
	json_t *doc = json_loadb(text, n, 0, NULL);
	json_t *res = json_object_get(doc, "result"), *je;
	sc_etcd_ev_t *first = NULL, *last = NULL;
	int64_t newest = 0;
	size_t i;
	if (!res) {
		st->failed = 1; /* {"error":...}: reconnect */
		json_decref(doc);
		return;
	}
	int64_t compact = sc__etcd_int(res, "compact_revision");
	if (compact > 0) {
		sc_log_warn("store: etcd watch: revision %lld compacted; resuming at %lld",
		            (long long)w->next_rev, (long long)compact);
		w->next_rev = compact;
		st->failed = 1;
	}
	json_array_foreach(json_object_get(res, "events"), i, je)
	{
		int64_t rev = sc__etcd_int(json_object_get(je, "kv"), "mod_revision");
		if (rev >= w->next_rev)
			w->next_rev = rev + 1;
		if (rev > newest)
			newest = rev;
		sc_etcd_ev_t *ev = make_event(w, je);
		if (!ev)
			continue;
		if (last)
			last->next = ev;
		else
			first = ev;
		last = ev;
	}
	if (first || newest)
		enqueue(w, first, last, newest);
	json_decref(doc);
}

static size_t on_stream(char *data, size_t sz, size_t n, void *ud)
{
	stream_t *st = ud;
	size_t len = sz * n;
	for (size_t i = 0; i < len; i++) {
		if (data[i] != '\n') {
			if (sc_buf_append(&st->line, &data[i], 1) < 0)
				return 0; /* a message over the limit: drop the stream */
			continue;
		}
		if (st->line.len)
			on_message(st, st->line.data, st->line.len);
		sc_buf_reset(&st->line);
	}
	return st->failed ? 0 : len;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	stream_t *st = ud;
	return st->w->stop ? 1 : 0;
}

static void stream_once(sc_etcd_watch_t *w)
{
	char url[512], end[512];
	stream_t st = {.w = w};
	sc_buf_init(&st.line, SC_ETCD_MAX_WATCH_MSG);
	snprintf(end, sizeof(end), "%s", w->prefix);
	end[strlen(end) - 1]++;
	json_t *cr = json_object();
	sc__etcd_set_b64(cr, "key", w->prefix);
	sc__etcd_set_b64(cr, "range_end", end);
	sc__etcd_set_int(cr, "start_revision", w->next_rev);
	json_object_set_new(cr, "prev_kv", json_true());
	json_t *req = json_pack("{s:o}", "create_request", cr);
	char *body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	CURL *h = w->conn.curl;
	snprintf(url, sizeof(url), "%s/v3/watch", w->conn.eps[w->conn.cur]);
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, &st);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 500L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_perform(h);
	free(body);
	sc_buf_free(&st.line);
}

static void *watch_main(void *ud)
{
	sc_etcd_watch_t *w = ud;
	while (!w->stop) {
		stream_once(w);
		if (w->stop)
			break;
		/* The stream ended: the member went away or refused us. */
		w->conn.cur = (w->conn.cur + 1) % w->conn.nep;
		struct timespec ts = {0, RETRY_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* ---------------------------------------------------------------------
 * Loop side
 * ------------------------------------------------------------------- */

int sc__etcd_watch_start(sc_etcd_watch_t *w, const char *endpoints, const char *prefix,
                         int64_t start_rev)
{
	memset(w, 0, sizeof(*w));
	w->pipefd[0] = w->pipefd[1] = -1;
	int rc = sc__etcd_conn_init(&w->conn, endpoints, 0);
	if (rc < 0)
		return rc;
	w->prefix = sc_xstrdup(prefix);
	w->logcap = LOG_KEEP;
	w->log = sc_xcalloc(w->logcap, sizeof(*w->log));
	w->next_rev = start_rev;
	w->log_from = start_rev - 1;
	w->dispatched_rev = start_rev - 1;
	pthread_mutex_init(&w->mu, NULL);
	if (pipe2(w->pipefd, O_NONBLOCK | O_CLOEXEC) < 0) {
		sc__etcd_watch_stop(w);
		return SC_EIO;
	}
	if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
		sc__etcd_watch_stop(w);
		return SC_ENOMEM;
	}
	w->started = 1;
	return 0;
}

void sc__etcd_watch_stop(sc_etcd_watch_t *w)
{
	w->stop = 1;
	if (w->started)
		pthread_join(w->thread, NULL);
	w->started = 0;
	for (sc_etcd_ev_t *ev = w->qhead, *next; ev; ev = next) {
		next = ev->next;
		ev_free(ev);
	}
	w->qhead = w->qtail = NULL;
	for (size_t i = 0; i < w->logn; i++)
		ev_free(w->log[(w->loghead + i) % w->logcap]);
	free(w->log);
	w->log = NULL;
	w->logn = 0;
	for (int i = 0; i < 2; i++)
		if (w->pipefd[i] >= 0)
			close(w->pipefd[i]);
	w->pipefd[0] = w->pipefd[1] = -1;
	free(w->prefix);
	w->prefix = NULL;
	sc__etcd_conn_free(&w->conn);
	pthread_mutex_destroy(&w->mu);
}

static void log_append(sc_etcd_watch_t *w, sc_etcd_ev_t *ev)
{
	if (w->logn == w->logcap) {
		sc_etcd_ev_t *old = w->log[w->loghead];
		w->log_from = old->rev;
		ev_free(old);
		w->loghead = (w->loghead + 1) % w->logcap;
		w->logn--;
	}
	ev->next = NULL;
	w->log[(w->loghead + w->logn++) % w->logcap] = ev;
}

void sc__etcd_watch_dispatch(sc_etcd_watch_t *w, sc_store_t *s)
{
	char drain[256];
	while (read(w->pipefd[0], drain, sizeof(drain)) > 0)
		;
	pthread_mutex_lock(&w->mu);
	sc_etcd_ev_t *ev = w->qhead, *next;
	int64_t recv = w->recv_rev;
	w->qhead = w->qtail = NULL;
	pthread_mutex_unlock(&w->mu);
	for (; ev; ev = next) {
		next = ev->next;
		sc_store_event_t se = {ev->type, ev->key, ev->value, ev->rev};
		if (ev->rev > w->dispatched_rev)
			w->dispatched_rev = ev->rev;
		log_append(w, ev);
		sc__store_notify(s, &se);
	}
	if (recv > w->dispatched_rev)
		w->dispatched_rev = recv;
}

int sc__etcd_watch_replay(sc_etcd_watch_t *w, const char *prefix, int64_t from_rev,
                          sc_store_watch_fn fn, void *ud)
{
	if (from_rev < w->log_from)
		return SC_ERANGE;
	size_t plen = strlen(prefix);
	for (size_t i = 0; i < w->logn; i++) {
		sc_etcd_ev_t *ev = w->log[(w->loghead + i) % w->logcap];
		if (ev->rev <= from_rev || strncmp(ev->key, prefix, plen) != 0)
			continue;
		sc_store_event_t se = {ev->type, ev->key, ev->value, ev->rev};
		fn(&se, ud);
	}
	return 0;
}
