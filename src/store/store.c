/* Backend-independent part of the store: dispatch and live watchers. */
#include "store/store.h"
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "starcloud/error.h"

struct sc_store_watch {
	struct sc_store_watch *next;
	char *prefix;
	sc_store_watch_fn fn;
	void *ud;
	int64_t from_rev; /* live events at or before it were replayed or seen */
};

void sc_store_refuse_writes(sc_store_t *s, int rc)
{
	s->refuse = rc < 0 ? rc : 0;
}

int sc_store_probe(sc_store_t *s)
{
	return s->ops->probe ? s->ops->probe(s) : 0;
}

int sc_store_get(sc_store_t *s, const char *key, sc_kv_t *out)
{
	return s->ops->get(s, key, out);
}

int sc_store_list(sc_store_t *s, const char *prefix, sc_kv_list_t *out)
{
	return s->ops->list(s, prefix, out);
}

int sc_store_put(sc_store_t *s, const char *key, const char *value, int64_t expect_rev,
                 int64_t *rev)
{
	sc_store_op_t op = {SC_STORE_PUT, key, value, expect_rev};
	return sc_store_txn(s, &op, 1, rev, NULL);
}

int sc_store_delete(sc_store_t *s, const char *key, int64_t expect_rev, int64_t *rev)
{
	sc_store_op_t op = {SC_STORE_DELETE, key, NULL, expect_rev};
	return sc_store_txn(s, &op, 1, rev, NULL);
}

int sc_store_txn(sc_store_t *s, const sc_store_op_t *ops, size_t n, int64_t *rev, size_t *failed)
{
	if (s->refuse < 0) {
		if (failed)
			*failed = 0;
		return s->refuse;
	}
	return s->ops->txn(s, ops, n, rev, failed);
}

int sc_store_stats(sc_store_t *s, sc_store_stats_t *out)
{
	memset(out, 0, sizeof(*out));
	return s->ops->stats ? s->ops->stats(s, out) : SC_ENOTFOUND;
}

uint64_t sc__store_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int64_t sc_store_revision(sc_store_t *s)
{
	return s->ops->revision(s);
}

int sc_store_sync(sc_store_t *s)
{
	return s->ops->sync(s);
}

int sc_store_commit(sc_store_t *s)
{
	return s->ops->commit ? s->ops->commit(s) : s->ops->sync(s);
}

int sc_store_flush_fd(sc_store_t *s)
{
	return s->ops->flush_fd ? s->ops->flush_fd(s) : -1;
}

int sc_store_watch(sc_store_t *s, const char *prefix, int64_t from_rev, sc_store_watch_fn fn,
                   void *ud, sc_store_watch_t **out)
{
	/* Replay first, then register: both happen within one call on the one
	 * thread that also writes, so no change can slip in between. */
	int rc = s->ops->replay(s, prefix, from_rev, fn, ud);
	if (rc < 0)
		return rc;
	sc_store_watch_t *w = sc_calloc(1, sizeof(*w));
	if (!w || !(w->prefix = sc_strdup(prefix))) {
		free(w);
		return SC_ENOMEM;
	}
	w->fn = fn;
	w->ud = ud;
	w->from_rev = from_rev;
	w->next = s->watchers;
	s->watchers = w;
	*out = w;
	return 0;
}

int sc_store_replay(sc_store_t *s, const char *prefix, int64_t from_rev, sc_store_watch_fn fn,
                    void *ud)
{
	return s->ops->replay(s, prefix, from_rev, fn, ud);
}

void sc_store_unwatch(sc_store_t *s, sc_store_watch_t *w)
{
	for (sc_store_watch_t **p = &s->watchers; *p; p = &(*p)->next) {
		if (*p == w) {
			*p = w->next;
			free(w->prefix);
			free(w);
			return;
		}
	}
}

void sc__store_notify(sc_store_t *s, const sc_store_event_t *ev)
{
	sc_store_watch_t *w = s->watchers, *next;
	for (; w; w = next) {
		/* A callback may unwatch itself (a closed stream), so take the
		 * successor first. It must not unwatch others. */
		next = w->next;
		/* A backend whose changes arrive late (etcd) may deliver
		 * one the watcher asked to start after. */
		if (ev->rev > w->from_rev && strncmp(ev->key, w->prefix, strlen(w->prefix)) == 0)
			w->fn(ev, w->ud);
	}
}

/* ---------------------------------------------------------------------
 * Asynchronous calls
 * ------------------------------------------------------------------- */

/* Copies ops into c (c->ops, c->n); the strings go in one block after
 * the array, freed with it. */
static void copy_ops(sc_store_call_t *c, const sc_store_op_t *ops, size_t n)
{
	size_t bytes = n * sizeof(*ops);
	for (size_t i = 0; i < n; i++)
		bytes += strlen(ops[i].key) + 1 + (ops[i].value ? strlen(ops[i].value) + 1 : 0);
	c->ops = sc_xmalloc(bytes ? bytes : 1);
	c->n = n;
	char *p = (char *)(c->ops + n);
	for (size_t i = 0; i < n; i++) {
		c->ops[i] = ops[i];
		size_t kl = strlen(ops[i].key) + 1;
		c->ops[i].key = memcpy(p, ops[i].key, kl);
		p += kl;
		if (ops[i].value) {
			size_t vl = strlen(ops[i].value) + 1;
			c->ops[i].value = memcpy(p, ops[i].value, vl);
			p += vl;
		}
	}
}

/* A backend without a thread: the blocking call, and the answer, at once. */
static void call_now(sc_store_t *s, int kind, const sc_store_op_t *ops, size_t n,
                     void (*run)(sc_store_t *, void *), sc_store_done_fn fn, void *ud)
{
	sc_store_res_t res = {0};
	if (kind == SC_STORE_CALL_TXN)
		res.rc = sc_store_txn(s, ops, n, &res.rev, &res.failed);
	else if (kind == SC_STORE_CALL_PING)
		res.rev = sc_store_revision(s);
	else
		run(s, ud);
	fn(&res, ud);
}

static void submit(sc_store_t *s, int kind, const sc_store_op_t *ops, size_t n,
                   void (*run)(sc_store_t *, void *), sc_store_done_fn fn, void *ud)
{
	if (!s->ops->submit) {
		call_now(s, kind, ops, n, run, fn, ud);
		return;
	}
	sc_store_call_t *c = sc_xcalloc(1, sizeof(*c));
	c->kind = kind;
	c->run = run;
	c->fn = fn;
	c->ud = ud;
	if (kind == SC_STORE_CALL_TXN && s->refuse < 0) {
		/* Refused writes touch nothing, as sc_store_txn's; still an
		 * answer in call order. */
		c->res.rc = s->refuse;
		c->finished = 1;
	} else if (kind == SC_STORE_CALL_TXN) {
		copy_ops(c, ops, n);
	}
	s->ops->submit(s, c);
}

void sc_store_txn_async(sc_store_t *s, const sc_store_op_t *ops, size_t n, sc_store_done_fn fn,
                        void *ud)
{
	submit(s, SC_STORE_CALL_TXN, ops, n, NULL, fn, ud);
}

void sc_store_ping_async(sc_store_t *s, sc_store_done_fn fn, void *ud)
{
	submit(s, SC_STORE_CALL_PING, NULL, 0, NULL, fn, ud);
}

void sc_store_run_async(sc_store_t *s, void (*run)(sc_store_t *s, void *ud), sc_store_done_fn fn,
                        void *ud)
{
	submit(s, SC_STORE_CALL_RUN, NULL, 0, run, fn, ud);
}

int sc_store_poll_fd(sc_store_t *s)
{
	return s->ops->poll_fd ? s->ops->poll_fd(s) : -1;
}

void sc_store_dispatch(sc_store_t *s)
{
	if (s->ops->dispatch)
		s->ops->dispatch(s);
}

void sc_store_drain(sc_store_t *s)
{
	if (s && s->ops->drain)
		s->ops->drain(s);
}

void sc_store_close(sc_store_t *s)
{
	if (!s)
		return;
	while (s->watchers)
		sc_store_unwatch(s, s->watchers);
	s->ops->close(s);
}

void sc_kv_free(sc_kv_t *kv)
{
	if (!kv)
		return;
	free(kv->key);
	free(kv->value);
	kv->key = kv->value = NULL;
}

void sc_kv_list_free(sc_kv_list_t *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		sc_kv_free(&l->items[i]);
	free(l->items);
	l->items = NULL;
	l->n = 0;
}
