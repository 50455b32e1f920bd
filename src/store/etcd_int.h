/* Internals of the etcd backend (store_etcd.c, etcd_http.c, etcd_watch.c,
 * etcd_lease.c).
 *
 * The backend speaks etcd v3's JSON gateway (grpc-gateway) over HTTP/1.1
 * with libcurl: POST /v3/kv/range, /v3/kv/txn, /v3/watch (a stream of
 * newline-delimited JSON messages), /v3/lease/grant|keepalive|revoke. In
 * that API keys and values are base64 and 64-bit integers are JSON
 * strings. Paths are those of etcd 3.4 (Debian 12's etcd-server). */
#ifndef SC_STORE_ETCD_INT_H
#define SC_STORE_ETCD_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

#include "store/store.h"
#include "store/store_etcd.h"

#define SC_ETCD_MAX_ENDPOINTS 16
/* Largest response accepted from etcd (a list of every job). */
#define SC_ETCD_MAX_RESPONSE (256u << 20)
/* Largest single watch message. */
#define SC_ETCD_MAX_WATCH_MSG (64u << 20)

typedef struct sc_etcd_calls sc_etcd_calls_t;

/* One HTTP client over a list of endpoints. A call goes to the current
 * endpoint and, on a transport error or an etcd "unavailable" answer, to
 * the next one, each at most once per call. Not thread-safe: the loop
 * thread and the watch thread have one each. */
typedef struct sc_etcd_conn {
	char *eps[SC_ETCD_MAX_ENDPOINTS]; /* owned "http://host:port" */
	size_t nep;
	size_t cur;
	CURL *curl;
	long timeout_ms;
	sc_etcd_stats_t *stats;    /* borrowed; may be NULL */
	pthread_mutex_t *stats_mu; /* borrowed; held to change stats, may be NULL */
	/* The store's connection: once its calls thread runs, only that
	 * thread uses it, and a call made elsewhere is handed to it. */
	sc_etcd_calls_t *calls;
	/* Without quorum etcd takes a request and answers nothing until its own
	 * timeout, and every call of the loop thread would wait that long.
	 * A call that has had no answer from any endpoint within
	 * SC_ETCD_ANSWER_MS fails; then the breaker opens: every later call
	 * fails at once with SC_EUNAVAIL (the API answers 503 in
	 * milliseconds) until sc__etcd_breaker_close (a probe of the server's
	 * on another thread saw etcd answer) or SC_ETCD_BREAKER_MS passed. */
	int breaker;         /* this connection has one (the store's) */
	uint64_t open_until; /* monotonic ms; 0: closed (atomic: read by the loop) */
} sc_etcd_conn_t;

#define SC_ETCD_ANSWER_MS 1500
/* One attempt on one member waits at most this for the first byte of its
 * answer, then the call goes on to the next member (etcd_http.c,
 * attempt_deadline): a member whose leader just died holds a write for
 * seconds, and the call must move on while it still has time. */
#define SC_ETCD_ATTEMPT_MS 500
/* The pause after a round in which every member refused at once. */
#define SC_ETCD_ROUND_PAUSE_MS 50
#define SC_ETCD_BREAKER_MS 10000

/* Parses "host:port[,host:port...]" (an optional "etcd://" or "http://"
 * in front). SC_EINVAL names nothing; the caller reports the option. */
int sc__etcd_conn_init(sc_etcd_conn_t *c, const char *list, long timeout_ms);
void sc__etcd_conn_free(sc_etcd_conn_t *c);
/* POSTs req (borrowed) to path; *resp is a new reference on success
 * (etcd_calls.c: once the calls thread runs, a call from another thread
 * is handed to it and waited for).
 * SC_EUNAVAIL when no endpoint answered (within SC_ETCD_ANSWER_MS, or the
 * breaker is open) and the request reached none, or none that may act on
 * it: nothing changed. SC_EUNSURE in its place when a write (a txn, put or
 * delete) reached a member that gave no answer or an undecided one ("request
 * timed out"): a member without quorum keeps the proposal in its log and
 * it is applied once the quorum is back. SC_EIO on an etcd error. */
int sc__etcd_call(sc_etcd_conn_t *c, const char *path, json_t *req, json_t **resp);
/* The same on the calling thread, whatever thread that is (etcd_http.c;
 * sc__etcd_call, in etcd_calls.c, routes to it). */
int sc__etcd_call_here(sc_etcd_conn_t *c, const char *path, json_t *req, json_t **resp);
void sc__etcd_breaker_close(sc_etcd_conn_t *c);
/* 1 while the breaker is open (any thread). */
int sc__etcd_breaker_open(sc_etcd_conn_t *c);
uint64_t sc__etcd_mono_ms(void);

/* ---- etcd_calls.c: the store's calls thread ----
 * Asynchronous calls (store.h) wait for etcd here, one at a time, in call
 * order; the loop thread answers them in that order once the watch has
 * delivered the revision each observed (c->wait_rev, set by exec) or its
 * deadline passed. */
#define SC_ETCD_CALL_BLOCKING 100 /* a call another thread waits for */
struct sc_etcd_calls {
	sc_store_t *store;
	void (*exec)(sc_store_t *s, sc_store_call_t *c); /* runs one call, on the thread */
	int wake_fd;                                     /* written when a call finishes */
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;                 /* work for the thread */
	pthread_cond_t done_cv;            /* a call finished */
	int stop;                          /* mu */
	sc_store_call_t *todo, *todo_tail; /* mu: not run yet */
	sc_store_call_t *head, *tail;      /* loop thread: unanswered, in call order */
	size_t pending;                    /* loop thread: len(head) */
	uint64_t blocking;                 /* mu: calls other threads waited for */
};

void sc__etcd_calls_init(sc_etcd_calls_t *q, sc_store_t *s,
                         void (*exec)(sc_store_t *s, sc_store_call_t *c), int wake_fd);
/* Loop thread: takes c; starts the thread at the first call. */
void sc__etcd_calls_submit(sc_etcd_calls_t *q, sc_store_call_t *c);
/* Loop thread: answers the finished calls at the head whose revision the
 * watch has delivered (watched_rev) or whose deadline passed. */
void sc__etcd_calls_deliver(sc_etcd_calls_t *q, int64_t watched_rev);
/* Loop thread: waits for every call and answers it, whatever the watch. */
void sc__etcd_calls_drain(sc_etcd_calls_t *q);
/* Stops the thread; calls not run yet are answered SC_EUNAVAIL. */
void sc__etcd_calls_stop(sc_etcd_calls_t *q);

/* Decodes base64 text into a malloc'd NUL-terminated string; SC_EPARSE. */
int sc__b64_dec(const char *s, char **out, size_t *n);
/* An int64 field of the gateway (a JSON string or number); 0 when absent. */
int64_t sc__etcd_int(json_t *obj, const char *field);
/* Sets a field to a base64 string. */
void sc__etcd_set_b64(json_t *obj, const char *field, const char *s);
/* Sets an int64 field as the gateway's string form. */
void sc__etcd_set_int(json_t *obj, const char *field, int64_t v);

/* etcd_schema.c: checks the schema key under prefix and brings the store
 * forward to this binary's layout; *schema is the version found or
 * reached. SC_ERANGE (with a message) when the store needs a newer
 * release, SC_EPARSE when the key holds no schema record. readonly: writes
 * nothing, and refuses (SC_ERANGE) a store that would need a migration
 * that changes data before this binary could read it. */
int sc__etcd_schema_open(sc_etcd_conn_t *c, const char *prefix, int readonly, int *schema);

/* etcd_http.c: 1 when an etcd key is one of the backend's own keys directly
 * under the prefix (leader, schema) rather than data: data keys are store
 * keys, which all have a folder ("/registry/..."). */
int sc__etcd_is_meta(const char *prefix, const char *key);

/* store_etcd.c, for etcd_lease.c: the store's connection and leader key. */
sc_etcd_conn_t *sc__etcd_store_conn(sc_store_t *s, const char **leader_key);

/* ---- etcd_watch.c: one watch stream over the whole prefix ---- */
typedef struct sc_etcd_ev sc_etcd_ev_t;
typedef struct sc_etcd_watch {
	sc_etcd_conn_t conn; /* the thread's own */
	char *prefix;        /* etcd key prefix (owned) */
	pthread_t thread;
	int started;
	volatile int stop;
	pthread_mutex_t mu;
	int pipefd[2];               /* the thread writes a byte when events queue up */
	sc_etcd_ev_t *qhead, *qtail; /* received, not yet dispatched (mu) */
	int64_t next_rev;            /* where the stream (re)starts (thread only) */
	/* Dispatched events, for replay (loop thread only): a ring. */
	sc_etcd_ev_t **log;
	size_t logcap, loghead, logn;
	int64_t log_from; /* replays of from_rev >= log_from are complete */
	int64_t dispatched_rev;
	/* Newest revision the stream brought, the backend's own keys included
	 * (mu): once the queue taken with it is dispatched, every change up to
	 * it has been (dispatched_rev follows). */
	int64_t recv_rev;
} sc_etcd_watch_t;

/* Starts the stream at start_rev (events with revision >= start_rev).
 * Changes to the backend's own keys (sc__etcd_is_meta) are never reported. */
int sc__etcd_watch_start(sc_etcd_watch_t *w, const char *endpoints, const char *prefix,
                         int64_t start_rev);
void sc__etcd_watch_stop(sc_etcd_watch_t *w);
/* Loop thread: hands queued events to the store's watchers. */
void sc__etcd_watch_dispatch(sc_etcd_watch_t *w, sc_store_t *s);
/* Loop thread: replays logged events with revision > from_rev under the
 * store key prefix; SC_ERANGE when the log does not reach back. */
int sc__etcd_watch_replay(sc_etcd_watch_t *w, const char *prefix, int64_t from_rev,
                          sc_store_watch_fn fn, void *ud);

#endif
