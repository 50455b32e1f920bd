/* etcd v3 backend of the store (see store_etcd.h for the model).
 *
 * A daemon's loop makes its calls asynchronously (store.h): they wait for
 * etcd on the store's calls thread (etcd_calls.c) and are answered on the
 * loop thread once the watch has delivered what they observed. The
 * blocking calls remain for start-up, shutdown and the CLI; once the calls
 * thread runs they are handed to it too (sc__etcd_call), and counted
 * (stats.blocking), since a loop that makes one waits. Writes are durable
 * when etcd answers (it commits through its Raft log and fsyncs), so the
 * server may acknowledge at once. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "starcloud/error.h"
#include "base/alloc.h"
#include "base/log.h"
#include "store/etcd_int.h"

typedef struct etcd_store {
	sc_store_t base;
	sc_etcd_conn_t conn;
	sc_etcd_stats_t stats; /* stats_mu: the calls thread counts, the loop reads */
	pthread_mutex_t stats_mu;
	char prefix[256];     /* "/starcloud/" */
	char leader_key[300]; /* "/starcloud/leader" */
	int64_t rev;          /* newest revision seen (atomic: both threads) */
	int64_t fence;        /* leader key mod_revision every txn requires; 0 = none */
	sc_etcd_watch_t watch;
	sc_etcd_calls_t calls;
} etcd_store_t;

static const sc_store_ops_t etcd_ops;

/* The etcd key of a store key: the prefix replaces the leading '/'. */
static int etcd_key(const etcd_store_t *e, const char *key, char *out, size_t outsz)
{
	if (*key == '/')
		key++;
	if ((size_t)snprintf(out, outsz, "%s%s", e->prefix, key) >= outsz)
		return SC_EINVAL;
	return 0;
}

/* The first key after every key that starts with prefix. */
static void range_end(const char *prefix, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s", prefix);
	size_t n = strlen(out);
	if (n > 0)
		out[n - 1]++;
}

/* The newest revision seen, from any thread. */
static void seen_rev(etcd_store_t *e, int64_t r)
{
	int64_t cur = __atomic_load_n(&e->rev, __ATOMIC_RELAXED);
	while (r > cur && !__atomic_compare_exchange_n(&e->rev, &cur, r, 0, __ATOMIC_RELAXED,
	                                               __ATOMIC_RELAXED))
		;
}

static void seen(etcd_store_t *e, json_t *resp)
{
	seen_rev(e, sc__etcd_int(json_object_get(resp, "header"), "revision"));
}

/* Fills kv from a gateway KeyValue; the store key drops the prefix. */
static int kv_from(etcd_store_t *e, json_t *j, sc_kv_t *kv)
{
	char *key = NULL, *value = NULL;
	const char *k64 = json_string_value(json_object_get(j, "key"));
	const char *v64 = json_string_value(json_object_get(j, "value"));
	if (!k64 || sc__b64_dec(k64, &key, NULL) < 0 ||
	    sc__b64_dec(v64 ? v64 : "", &value, NULL) < 0) {
		free(key);
		return SC_EPARSE;
	}
	size_t plen = strlen(e->prefix);
	kv->key = sc_xmalloc(strlen(key) + 2);
	snprintf(kv->key, strlen(key) + 2, "/%s", strlen(key) >= plen ? key + plen : key);
	free(key);
	kv->value = value;
	kv->create_rev = sc__etcd_int(j, "create_revision");
	kv->mod_rev = sc__etcd_int(j, "mod_revision");
	return 0;
}

static int range(etcd_store_t *e, const char *key, const char *end, json_t **resp)
{
	json_t *req = json_object();
	sc__etcd_set_b64(req, "key", key);
	if (end)
		sc__etcd_set_b64(req, "range_end", end);
	int rc = sc__etcd_call(&e->conn, "/v3/kv/range", req, resp);
	json_decref(req);
	if (rc == 0)
		seen(e, *resp);
	return rc;
}

static int et_get(sc_store_t *s, const char *key, sc_kv_t *out)
{
	etcd_store_t *e = (etcd_store_t *)s;
	char k[1024];
	json_t *resp = NULL;
	int rc = etcd_key(e, key, k, sizeof(k));
	if (rc == 0 && sc__etcd_is_meta(e->prefix, k))
		return SC_ENOTFOUND;
	if (rc == 0)
		rc = range(e, k, NULL, &resp);
	if (rc < 0)
		return rc;
	json_t *kvs = json_object_get(resp, "kvs");
	rc = json_array_size(kvs) ? kv_from(e, json_array_get(kvs, 0), out) : SC_ENOTFOUND;
	json_decref(resp);
	return rc;
}

static int et_list(sc_store_t *s, const char *prefix, sc_kv_list_t *out)
{
	etcd_store_t *e = (etcd_store_t *)s;
	char k[1024], end[1024];
	json_t *resp = NULL, *j;
	size_t i;
	memset(out, 0, sizeof(*out));
	int rc = etcd_key(e, prefix, k, sizeof(k));
	if (rc < 0)
		return rc;
	range_end(k, end, sizeof(end));
	if ((rc = range(e, k, end, &resp)) < 0)
		return rc;
	json_t *kvs = json_object_get(resp, "kvs");
	out->items = sc_xcalloc(json_array_size(kvs) + 1, sizeof(*out->items));
	out->rev = sc__etcd_int(json_object_get(resp, "header"), "revision");
	json_array_foreach(kvs, i, j)
	{
		sc_kv_t *kv = &out->items[out->n];
		if ((rc = kv_from(e, j, kv)) < 0)
			break;
		out->n++;
		if (!strchr(kv->key + 1, '/')) {
			sc_kv_free(kv); /* the election's and the schema's keys are not data */
			out->n--;
		}
	}
	json_decref(resp);
	if (rc < 0)
		sc_kv_list_free(out);
	return rc;
}

/* ---------------------------------------------------------------------
 * Transactions
 * ------------------------------------------------------------------- */

static json_t *compare(const char *key, const char *target, const char *result, const char *field,
                       int64_t v)
{
	json_t *c = json_object();
	sc__etcd_set_b64(c, "key", key);
	json_object_set_new(c, "target", json_string(target));
	json_object_set_new(c, "result", json_string(result));
	sc__etcd_set_int(c, field, v);
	return c;
}

/* Adds op's condition, its write and, for the failure branch, a read of
 * its key so a refusal can be explained. */
static int add_op(etcd_store_t *e, const sc_store_op_t *op, json_t *cmp, json_t *ok, json_t *fail)
{
	char k[1024];
	if (etcd_key(e, op->key, k, sizeof(k)) < 0 || sc__etcd_is_meta(e->prefix, k))
		return SC_EINVAL;
	if (op->expect_rev == SC_REV_ABSENT)
		json_array_append_new(cmp, compare(k, "CREATE", "EQUAL", "create_revision", 0));
	else if (op->expect_rev > 0)
		json_array_append_new(cmp,
		                      compare(k, "MOD", "EQUAL", "mod_revision", op->expect_rev));
	else if (op->type == SC_STORE_DELETE)
		json_array_append_new(cmp, compare(k, "CREATE", "GREATER", "create_revision", 0));
	json_t *w = json_object();
	sc__etcd_set_b64(w, "key", k);
	if (op->type == SC_STORE_PUT) {
		sc__etcd_set_b64(w, "value", op->value ? op->value : "");
		json_array_append_new(ok, json_pack("{s:o}", "request_put", w));
	} else {
		json_array_append_new(ok, json_pack("{s:o}", "request_delete_range", w));
	}
	json_t *r = json_object();
	sc__etcd_set_b64(r, "key", k);
	json_object_set_new(r, "keys_only", json_true());
	json_array_append_new(fail, json_pack("{s:o}", "request_range", r));
	return 0;
}

/* After a refused txn: which op's condition failed, from the failure
 * branch's reads (one per op, in order). None: the fence moved. *seen_mod:
 * the newest of the keys read, which the caller's cache must get to before
 * it is told (so it shows what refused the write). */
static int explain_failure(etcd_store_t *e, const sc_store_op_t *ops, size_t n, int64_t fence,
                           json_t *resp, size_t *failed, int64_t *seen_mod)
{
	json_t *rs = json_object_get(resp, "responses");
	for (size_t i = 0; i < n; i++) {
		json_t *kv = json_array_get(
		    json_object_get(json_object_get(json_array_get(rs, i), "response_range"),
		                    "kvs"),
		    0);
		int64_t mod = sc__etcd_int(kv, "mod_revision");
		if (mod > *seen_mod)
			*seen_mod = mod;
	}
	/* The fence first: a deposed leader's write is refused as such even
	 * when the objects it read have changed too (they usually have). */
	json_t *lk = json_array_get(
	    json_object_get(json_object_get(json_array_get(rs, n), "response_range"), "kvs"), 0);
	if (fence > 0 && sc__etcd_int(lk, "mod_revision") != fence) {
		pthread_mutex_lock(&e->stats_mu);
		e->stats.fenced++;
		pthread_mutex_unlock(&e->stats_mu);
		if (failed)
			*failed = n;
		return SC_EFENCED;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *kvs = json_object_get(
		    json_object_get(json_array_get(rs, i), "response_range"), "kvs");
		json_t *kv = json_array_get(kvs, 0);
		int exists = kv != NULL;
		int64_t mod = sc__etcd_int(kv, "mod_revision");
		int rc = 0;
		if (ops[i].expect_rev == SC_REV_ABSENT && exists)
			rc = SC_EEXISTS;
		else if (ops[i].expect_rev > 0 && !exists)
			rc = SC_ENOTFOUND;
		else if (ops[i].expect_rev > 0 && mod != ops[i].expect_rev)
			rc = SC_ECONFLICT;
		else if (ops[i].type == SC_STORE_DELETE && !exists)
			rc = SC_ENOTFOUND;
		if (rc < 0) {
			if (failed)
				*failed = i;
			return rc;
		}
	}
	return SC_EIO; /* refused, yet every condition holds: cannot be */
}

/* Test hook (docs/HA.md): when the file named by STARCLOUD_ETCD_STALL_FILE
 * exists at a fenced write, the write waits the seconds it holds (once; the
 * file is removed), as a leader frozen between deciding and writing would.
 * The HA tests use it to show that such a late write is refused. */
static void stall_hook(void)
{
	const char *path = getenv("STARCLOUD_ETCD_STALL_FILE");
	FILE *f = path ? fopen(path, "r") : NULL;
	int secs = 0;
	if (!f)
		return;
	if (fscanf(f, "%d", &secs) != 1 || secs < 0 || secs > 120)
		secs = 0;
	fclose(f);
	unlink(path);
	sc_log_warn("store: test hook: stalling a fenced write for %d s", secs);
	sleep((unsigned)secs);
}

/* One txn under the fence given (0: none). *observed: the revision the
 * caller's watchers must have seen for it to show the outcome. */
static int txn_do(etcd_store_t *e, const sc_store_op_t *ops, size_t n, int64_t fence, int64_t *rev,
                  size_t *failed, int64_t *observed)
{
	json_t *cmp = json_array(), *ok = json_array(), *fail = json_array(), *resp = NULL;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		if ((rc = add_op(e, &ops[i], cmp, ok, fail)) < 0 && failed)
			*failed = i;
	if (fence > 0)
		stall_hook();
	if (fence > 0) {
		json_t *r = json_object();
		sc__etcd_set_b64(r, "key", e->leader_key);
		json_array_append_new(fail, json_pack("{s:o}", "request_range", r));
		json_array_append_new(
		    cmp, compare(e->leader_key, "MOD", "EQUAL", "mod_revision", fence));
	}
	json_t *req = json_pack("{s:o,s:o,s:o}", "compare", cmp, "success", ok, "failure", fail);
	if (rc == 0)
		rc = sc__etcd_call(&e->conn, "/v3/kv/txn", req, &resp);
	if (rc == 0) {
		seen(e, resp);
		if (json_is_true(json_object_get(resp, "succeeded"))) {
			int64_t r = sc__etcd_int(json_object_get(resp, "header"), "revision");
			if (rev)
				*rev = r;
			*observed = r;
		} else {
			rc = explain_failure(e, ops, n, fence, resp, failed, observed);
		}
	}
	json_decref(resp);
	json_decref(req);
	return rc;
}

/* A blocking write returns, as SQLite's, once the store's watchers have
 * seen what it observed (its own revision, or what refused it), so code
 * that writes and then reads state a watch keeps (the server's cache)
 * finds the write; it waits at most SC_STORE_WATCH_WAIT_MS for the watch
 * (the write stands either way). Only the watch is dispatched here, not
 * the asynchronous calls' answers: those come from sc_store_dispatch,
 * which the wake-up below makes sure runs. */
static void wait_watch(etcd_store_t *e, int64_t rev)
{
	uint64_t deadline = sc__etcd_mono_ms() + SC_STORE_WATCH_WAIT_MS;
	int woke = 0;
	for (;;) {
		sc__etcd_watch_dispatch(&e->watch, &e->base);
		woke = 1;
		if (e->watch.dispatched_rev >= rev)
			break;
		uint64_t now = sc__etcd_mono_ms();
		if (now >= deadline) {
			sc_log_warn(
			    "store: etcd watch has not delivered revision %lld within %d ms "
			    "(at %lld): going on",
			    (long long)rev, SC_STORE_WATCH_WAIT_MS,
			    (long long)e->watch.dispatched_rev);
			break;
		}
		struct pollfd pfd = {.fd = e->watch.pipefd[0], .events = POLLIN};
		if (poll(&pfd, 1, (int)(deadline - now)) < 0 && errno != EINTR)
			break;
	}
	/* The pipe was emptied: answers that wait on it must still come. */
	char b = 1;
	if (woke && e->calls.head && write(e->watch.pipefd[1], &b, 1) < 0 && errno != EAGAIN)
		sc_log_error("store: etcd: wake pipe: %s", strerror(errno));
}

static int et_txn(sc_store_t *s, const sc_store_op_t *ops, size_t n, int64_t *rev, size_t *failed)
{
	etcd_store_t *e = (etcd_store_t *)s;
	int64_t observed = 0;
	int rc = txn_do(e, ops, n, e->fence, rev, failed, &observed);
	if (observed > 0)
		wait_watch(e, observed);
	return rc;
}

/* ---------------------------------------------------------------------
 * Revision, replay, life cycle
 * ------------------------------------------------------------------- */

static int fetch_revision(etcd_store_t *e)
{
	json_t *req = json_object(), *resp = NULL;
	sc__etcd_set_b64(req, "key", e->leader_key);
	json_object_set_new(req, "count_only", json_true());
	int rc = sc__etcd_call(&e->conn, "/v3/kv/range", req, &resp);
	json_decref(req);
	if (rc == 0)
		seen(e, resp);
	json_decref(resp);
	return rc;
}

/* The newest revision this store has seen (an answer or the watch): no
 * call, so the loop never waits for it. */
static int64_t et_revision(sc_store_t *s)
{
	etcd_store_t *e = (etcd_store_t *)s;
	seen_rev(e, e->watch.dispatched_rev);
	return __atomic_load_n(&e->rev, __ATOMIC_RELAXED);
}

static int et_replay(sc_store_t *s, const char *prefix, int64_t from_rev, sc_store_watch_fn fn,
                     void *ud)
{
	etcd_store_t *e = (etcd_store_t *)s;
	return sc__etcd_watch_replay(&e->watch, prefix, from_rev, fn, ud);
}

static void et_close(sc_store_t *s)
{
	etcd_store_t *e = (etcd_store_t *)s;
	sc__etcd_calls_stop(&e->calls);
	sc__etcd_watch_stop(&e->watch);
	sc__etcd_conn_free(&e->conn);
	pthread_mutex_destroy(&e->stats_mu);
	free(e);
}

/* ---------------------------------------------------------------------
 * Asynchronous calls (store.h; the thread is etcd_calls.c)
 * ------------------------------------------------------------------- */

/* On the calls thread: touches only c, the connection and the atomics. */
static void et_exec(sc_store_t *s, sc_store_call_t *c)
{
	etcd_store_t *e = (etcd_store_t *)s;
	switch (c->kind) {
	case SC_STORE_CALL_TXN:
		c->res.rc =
		    txn_do(e, c->ops, c->n, c->fence, &c->res.rev, &c->res.failed, &c->wait_rev);
		break;
	case SC_STORE_CALL_PING:
		c->res.rc = fetch_revision(e);
		c->res.rev = __atomic_load_n(&e->rev, __ATOMIC_RELAXED);
		break;
	default:
		c->run(s, c->ud);
		break;
	}
}

static void et_submit(sc_store_t *s, sc_store_call_t *c)
{
	etcd_store_t *e = (etcd_store_t *)s;
	c->fence = e->fence; /* the fence when the write was decided */
	sc__etcd_calls_submit(&e->calls, c);
}

static int et_poll_fd(sc_store_t *s)
{
	return ((etcd_store_t *)s)->watch.pipefd[0];
}

static void et_dispatch(sc_store_t *s)
{
	etcd_store_t *e = (etcd_store_t *)s;
	sc__etcd_watch_dispatch(&e->watch, s);
	sc__etcd_calls_deliver(&e->calls, e->watch.dispatched_rev);
}

static void et_drain(sc_store_t *s)
{
	etcd_store_t *e = (etcd_store_t *)s;
	sc__etcd_watch_dispatch(&e->watch, s);
	sc__etcd_calls_drain(&e->calls);
}

/* etcd acknowledges a write only once a quorum has it in its log, so by the
 * time a transaction returns it is already durable: nothing to flush. */
static int et_sync(sc_store_t *st)
{
	(void)st;
	return 0;
}

static const sc_store_ops_t etcd_ops = {
    .name = "etcd",
    .get = et_get,
    .list = et_list,
    .txn = et_txn,
    .replay = et_replay,
    .revision = et_revision,
    .sync = et_sync,
    .close = et_close,
    .submit = et_submit,
    .poll_fd = et_poll_fd,
    .dispatch = et_dispatch,
    .drain = et_drain,
};

int sc_store_etcd_open_mode(const char *endpoints, const char *prefix, int readonly,
                            sc_store_t **out)
{
	size_t plen = strlen(prefix);
	if (plen < 1 || plen > 200 || prefix[0] != '/' || prefix[plen - 1] != '/')
		return SC_EINVAL;
	etcd_store_t *e = sc_calloc(1, sizeof(*e));
	if (!e)
		return SC_ENOMEM;
	/* Before the watch thread exists: curl's global set-up is not
	 * thread-safe. Reference counted, so a second store is fine. */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	e->base.ops = &etcd_ops;
	snprintf(e->prefix, sizeof(e->prefix), "%s", prefix);
	snprintf(e->leader_key, sizeof(e->leader_key), "%sleader", prefix);
	int rc = sc__etcd_conn_init(&e->conn, endpoints, 3000);
	e->conn.breaker = 1;
	if (rc < 0) {
		free(e);
		return rc;
	}
	pthread_mutex_init(&e->stats_mu, NULL);
	e->conn.stats = &e->stats;
	e->conn.stats_mu = &e->stats_mu;
	/* The schema first: a store this binary cannot work on is left as it
	 * is, and a migration's writes come before the watch starts. */
	if ((rc = sc__etcd_schema_open(&e->conn, e->prefix, readonly, &e->base.schema)) < 0 ||
	    (rc = fetch_revision(e)) < 0)
		goto error;
	rc = sc__etcd_watch_start(&e->watch, endpoints, e->prefix, e->rev + 1);
	if (rc < 0)
		goto error;
	sc__etcd_calls_init(&e->calls, &e->base, et_exec, e->watch.pipefd[1]);
	e->conn.calls = &e->calls;
	*out = &e->base;
	return 0;
error:
	sc__etcd_conn_free(&e->conn);
	pthread_mutex_destroy(&e->stats_mu);
	free(e);
	return rc;
}

int sc_store_is_etcd(sc_store_t *s)
{
	return s && s->ops == &etcd_ops;
}

void sc_store_etcd_stats(sc_store_t *s, sc_etcd_stats_t *out)
{
	etcd_store_t *e = (etcd_store_t *)s;
	pthread_mutex_lock(&e->stats_mu);
	*out = e->stats;
	pthread_mutex_unlock(&e->stats_mu);
	pthread_mutex_lock(&e->calls.mu);
	out->blocking = e->calls.blocking;
	pthread_mutex_unlock(&e->calls.mu);
	out->pending = e->calls.pending;
}

int sc_store_etcd_down(sc_store_t *s)
{
	return sc__etcd_breaker_open(&((etcd_store_t *)s)->conn);
}

void sc_store_etcd_up(sc_store_t *s)
{
	sc__etcd_breaker_close(&((etcd_store_t *)s)->conn);
}

struct sc_etcd_probe {
	sc_etcd_conn_t conn; /* its own curl handle: used on a worker thread */
	char key[300];
};

sc_etcd_probe_t *sc_store_etcd_probe_new(sc_store_t *s)
{
	etcd_store_t *e = (etcd_store_t *)s;
	sc_etcd_probe_t *p = sc_xcalloc(1, sizeof(*p));
	char list[SC_ETCD_MAX_ENDPOINTS * 210] = "";
	for (size_t i = 0; i < e->conn.nep; i++) {
		size_t n = strlen(list);
		snprintf(list + n, sizeof(list) - n, "%s%s", i ? "," : "", e->conn.eps[i] + 7);
	}
	if (sc__etcd_conn_init(&p->conn, list, SC_ETCD_ANSWER_MS) < 0) {
		free(p);
		return NULL;
	}
	snprintf(p->key, sizeof(p->key), "%s", e->leader_key);
	return p;
}

int sc_etcd_probe_run(sc_etcd_probe_t *p)
{
	json_t *req = json_object(), *resp = NULL;
	sc__etcd_set_b64(req, "key", p->key);
	json_object_set_new(req, "count_only", json_true());
	int rc = sc__etcd_call(&p->conn, "/v3/kv/range", req, &resp);
	json_decref(req);
	json_decref(resp);
	return rc;
}

void sc_etcd_probe_free(sc_etcd_probe_t *p)
{
	if (!p)
		return;
	sc__etcd_conn_free(&p->conn);
	free(p);
}

void sc_store_etcd_fence(sc_store_t *s, int64_t leader_mod_rev)
{
	((etcd_store_t *)s)->fence = leader_mod_rev;
}

sc_etcd_conn_t *sc__etcd_store_conn(sc_store_t *s, const char **leader_key)
{
	etcd_store_t *e = (etcd_store_t *)s;
	*leader_key = e->leader_key;
	return &e->conn;
}
