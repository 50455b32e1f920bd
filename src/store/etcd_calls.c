/* The etcd store's calls thread: the one place its requests wait for the
 * network once a daemon's event loop runs (etcd_int.h, "etcd_calls.c").
 *
 * The loop thread hands a call over (sc__etcd_calls_submit) and goes on; the
 * thread runs the calls one at a time, in the order they came, and marks
 * each finished; the loop thread answers them in that same order from
 * sc__etcd_calls_deliver, each once the store's watch has delivered the
 * revision the call observed (so a write's callback finds the write in
 * every watcher's state, the server's cache first) or its deadline passed.
 * A blocking call made on another thread while this one runs (start-up and
 * shutdown, the CLI) is handed over the same way and waited for, so one
 * connection is never used by two threads. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "starcloud/error.h"
#include "store/etcd_int.h"

/* A call that a thread other than ours waits for (blocking). */
typedef struct blocking {
	sc_store_call_t call;
	sc_etcd_conn_t *conn;
	const char *path;
	json_t *req;
	json_t **resp;
	int rc;
	int done; /* mu */
} blocking_t;

static void wake_loop(sc_etcd_calls_t *q)
{
	char b = 1;
	/* A full pipe already means "wake up". */
	if (write(q->wake_fd, &b, 1) < 0 && errno != EAGAIN)
		sc_log_error("store: etcd calls: wake pipe: %s", strerror(errno));
}

static void *calls_main(void *ud)
{
	sc_etcd_calls_t *q = ud;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (!q->todo && !q->stop)
			pthread_cond_wait(&q->cv, &q->mu);
		sc_store_call_t *c = q->todo;
		if (!c)
			break; /* stopping, and nothing left to run */
		q->todo = c->next;
		if (!q->todo)
			q->todo_tail = NULL;
		pthread_mutex_unlock(&q->mu);
		if (c->kind == SC_ETCD_CALL_BLOCKING) {
			blocking_t *b = (blocking_t *)c;
			b->rc = sc__etcd_call_here(b->conn, b->path, b->req, b->resp);
		} else {
			q->exec(q->store, c);
		}
		pthread_mutex_lock(&q->mu);
		c->finished = 1;
		c->deadline = sc__etcd_mono_ms() + SC_STORE_WATCH_WAIT_MS;
		if (c->kind == SC_ETCD_CALL_BLOCKING)
			((blocking_t *)c)->done = 1;
		else
			wake_loop(q);
		pthread_cond_broadcast(&q->done_cv); /* blocking callers, a drain */
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

void sc__etcd_calls_init(sc_etcd_calls_t *q, sc_store_t *s,
                         void (*exec)(sc_store_t *s, sc_store_call_t *c), int wake_fd)
{
	memset(q, 0, sizeof(*q));
	q->store = s;
	q->exec = exec;
	q->wake_fd = wake_fd;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	pthread_cond_init(&q->done_cv, NULL);
}

/* Started by the first asynchronous call: a store opened by the CLI (a
 * copy, a backup) never has the thread and calls from where it is. */
static int start(sc_etcd_calls_t *q)
{
	if (q->started)
		return 0;
	if (pthread_create(&q->thread, NULL, calls_main, q) != 0)
		return SC_ENOMEM;
	q->started = 1;
	return 0;
}

static void enqueue(sc_etcd_calls_t *q, sc_store_call_t *c)
{
	c->next = NULL;
	if (q->todo_tail)
		q->todo_tail->next = c;
	else
		q->todo = c;
	q->todo_tail = c;
	pthread_cond_signal(&q->cv);
}

void sc__etcd_calls_submit(sc_etcd_calls_t *q, sc_store_call_t *c)
{
	c->fnext = NULL;
	if (q->tail)
		q->tail->fnext = c;
	else
		q->head = c;
	q->tail = c;
	q->pending++;
	if (c->finished) {
		/* Answered already (refused writes): only its turn is awaited. */
		c->deadline = 0;
		wake_loop(q);
		return;
	}
	if (start(q) < 0) {
		c->res.rc = SC_ENOMEM;
		c->finished = 1;
		wake_loop(q);
		return;
	}
	pthread_mutex_lock(&q->mu);
	enqueue(q, c);
	pthread_mutex_unlock(&q->mu);
}

/* 1 when the caller may use the store's connection itself: the thread does
 * not run, or the caller is it. */
static int calls_here(const sc_etcd_calls_t *q)
{
	return !q->started || pthread_equal(pthread_self(), q->thread);
}

/* Runs one HTTP call on the thread and waits for it (another thread's
 * blocking call). */
static int calls_blocking(sc_etcd_calls_t *q, sc_etcd_conn_t *c, const char *path, json_t *req,
                          json_t **resp)
{
	blocking_t b = {.call = {.kind = SC_ETCD_CALL_BLOCKING},
	                .conn = c,
	                .path = path,
	                .req = req,
	                .resp = resp};
	pthread_mutex_lock(&q->mu);
	q->blocking++;
	enqueue(q, &b.call);
	while (!b.done)
		pthread_cond_wait(&q->done_cv, &q->mu);
	pthread_mutex_unlock(&q->mu);
	return b.rc;
}

/* Every blocking call of the backend comes here: on the calls thread, or
 * before it runs, it is made at once; elsewhere it is handed over. */
int sc__etcd_call(sc_etcd_conn_t *c, const char *path, json_t *req, json_t **resp)
{
	if (c->calls && !calls_here(c->calls))
		return calls_blocking(c->calls, c, path, req, resp);
	return sc__etcd_call_here(c, path, req, resp);
}

static void answer(sc_etcd_calls_t *q, sc_store_call_t *c)
{
	q->head = c->fnext;
	if (!q->head)
		q->tail = NULL;
	q->pending--;
	c->fn(&c->res, c->ud);
	free(c->ops);
	free(c);
}

void sc__etcd_calls_deliver(sc_etcd_calls_t *q, int64_t watched_rev)
{
	uint64_t now = sc__etcd_mono_ms();
	for (;;) {
		sc_store_call_t *c = q->head;
		if (!c)
			return;
		pthread_mutex_lock(&q->mu);
		int finished = c->finished;
		pthread_mutex_unlock(&q->mu);
		if (!finished)
			return;
		if (c->wait_rev > watched_rev && now < c->deadline)
			return; /* the watch has not brought its revision yet */
		if (c->wait_rev > watched_rev)
			sc_log_warn(
			    "store: etcd watch has not delivered revision %lld within %d ms "
			    "(at %lld): answering anyway",
			    (long long)c->wait_rev, SC_STORE_WATCH_WAIT_MS, (long long)watched_rev);
		answer(q, c);
	}
}

void sc__etcd_calls_drain(sc_etcd_calls_t *q)
{
	while (q->head) {
		pthread_mutex_lock(&q->mu);
		while (q->head && !q->head->finished)
			pthread_cond_wait(&q->done_cv, &q->mu);
		pthread_mutex_unlock(&q->mu);
		if (q->head)
			answer(q, q->head);
	}
}

void sc__etcd_calls_stop(sc_etcd_calls_t *q)
{
	pthread_mutex_lock(&q->mu);
	q->stop = 1;
	/* Calls not run yet fail: the store is closing under them. */
	for (sc_store_call_t *c = q->todo; c; c = c->next) {
		c->res.rc = SC_EUNAVAIL;
		c->finished = 1;
		if (c->kind == SC_ETCD_CALL_BLOCKING) {
			((blocking_t *)c)->rc = SC_EUNAVAIL;
			((blocking_t *)c)->done = 1;
		}
	}
	pthread_cond_broadcast(&q->done_cv);
	q->todo = q->todo_tail = NULL;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	if (q->started)
		pthread_join(q->thread, NULL);
	q->started = 0;
	/* Every call gets its answer, even at close (store.h). */
	while (q->head)
		answer(q, q->head);
	pthread_cond_destroy(&q->cv);
	pthread_cond_destroy(&q->done_cv);
	pthread_mutex_destroy(&q->mu);
}
