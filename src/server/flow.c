/* Flow control of API requests per principal (flow.h), after Kubernetes'
 * API priority and fairness.
 *
 * Lanes. Requests to paths that need no token (/healthz, /readyz,
 * /metrics, /version, /ui) and those of agents and admins run at once, as
 * before: agents' heartbeats keep their nodes' leases, and admins stand
 * for the operator and for components like the gateway. (The scheduling
 * loop's own writes are not requests at all.) Every other request, from
 * tenants, viewers, and clients without a valid token (grouped by their
 * address), waits in the queue of its flow, one flow per principal, and
 * runs at the end of the loop iteration it came in, before the group
 * commit (server.c calls sc__flow_run): it waits for no extra iteration.
 *
 * Fairness. Flows are served round-robin with a deficit counter in
 * nanoseconds of handler time (deficit round robin): each iteration every
 * flow with waiting requests gets a quantum (the iteration's budget of 1 ms
 * shared among them, at least MIN_QUANTUM_NS), a request runs while its flow's
 * deficit is positive and costs the time its handler took. A flow that
 * floods writes gets no more handler time per iteration than a flow with
 * one read, and iterations stay short, so the other flow's request never
 * waits behind the flood. Reads (GET, HEAD) of every flow run before the
 * iteration's writes; one that shows only durable data is answered at once
 * (commit.c) instead of after the fsync of a flood.
 *
 * Over the share. A flow holds at most queue_len waiting requests and a
 * request waits at most max_wait: past either it is answered 429 with
 * Retry-After, so a client sending faster than its share is told to slow
 * down instead of being queued without bound. */
#include "server/flow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "server/server.h"

#define FLOW_BUCKETS 256
#define ITERATION_BUDGET_NS 1000000 /* queued requests' handler time per iteration */
#define MIN_QUANTUM_NS 250000
#define FLOW_GC_MS 30000 /* flows with nothing waiting are forgotten this often */

typedef struct item {
	struct item *prev, *next;
	struct flow *flow;
	sc_http_req_t *r;
	uint64_t since; /* loop ms when it was queued */
	int read;
} item_t;

typedef struct flow {
	struct flow *next;         /* hash chain */
	char key[SC_MAX_NAME + 8]; /* "t:<token id>" or "a:<address>" */
	item_t *head, *tail;
	size_t n;
	int64_t deficit; /* ns of handler time it may still use */
	int active;      /* in f->active */
} flow_t;

struct sc_flow {
	sc_server_t *s;
	sc_flow_opts_t o;
	flow_t *buckets[FLOW_BUCKETS];
	flow_t **active; /* flows with waiting requests */
	size_t nactive, cap;
	size_t rr;      /* where the next round starts */
	uv_idle_t spin; /* while requests wait, the loop does not sleep */
	uv_timer_t gc;
	int handles;
	sc_flow_stats_t st;
};

/* ---- flows ------------------------------------------------------------- */

static size_t bucket_of(const char *key)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (; *key; key++)
		h = (h ^ (unsigned char)*key) * 16777619u;
	return h % FLOW_BUCKETS;
}

static flow_t *flow_get(sc_flow_t *f, const char *key)
{
	flow_t **head = &f->buckets[bucket_of(key)];
	for (flow_t *fl = *head; fl; fl = fl->next)
		if (strcmp(fl->key, key) == 0)
			return fl;
	flow_t *fl = sc_xcalloc(1, sizeof(*fl));
	snprintf(fl->key, sizeof(fl->key), "%s", key);
	fl->next = *head;
	*head = fl;
	return fl;
}

static void on_spin(uv_idle_t *h)
{
	(void)h; /* its being active is the point: poll does not block */
}

static void activate(sc_flow_t *f, flow_t *fl)
{
	if (fl->active)
		return;
	if (f->nactive == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 16;
		f->active = sc_xreallocarray(f->active, f->cap, sizeof(*f->active));
	}
	fl->active = 1;
	fl->deficit = 0;
	f->active[f->nactive++] = fl;
	uv_idle_start(&f->spin, on_spin);
}

static void item_unlink(item_t *it)
{
	flow_t *fl = it->flow;
	if (it->prev)
		it->prev->next = it->next;
	else
		fl->head = it->next;
	if (it->next)
		it->next->prev = it->prev;
	else
		fl->tail = it->prev;
	fl->n--;
}

/* The connection of a waiting request went away. */
static void on_gone(sc_http_req_t *r, void *ud)
{
	item_t *it = ud;
	(void)r;
	item_unlink(it);
	free(it);
}

/* ---- lanes ------------------------------------------------------------- */

static int is_read(const char *method)
{
	return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}

/* The flow key of a request that must wait, or "" for one that runs at
 * once (system lane). */
static void classify(sc_flow_t *f, sc_http_req_t *r, char *key, size_t keysz)
{
	sc_principal_t who;
	key[0] = '\0';
	if (strncmp(sc_http_path(r), "/api/", 5) != 0)
		return; /* health, metrics, version, the dashboard's files */
	if (sc__auth_check(f->s, r, &who) < 0) {
		snprintf(key, keysz, "a:%s", sc_http_peer(r));
		return;
	}
	if (who.role == SC_ROLE_ADMIN || who.role == SC_ROLE_AGENT)
		return;
	snprintf(key, keysz, "t:%s", who.id);
}

static void reject(sc_flow_t *f, sc_http_req_t *r, const char *why)
{
	sc_http_set_header(r, "Retry-After", "1");
	sc__api_error(r, 429, "TooManyRequests", NULL,
	              "%s; this client is over its fair share of the server: retry after 1 s", why);
}

static void gate(sc_http_req_t *r, void *ud)
{
	sc_flow_t *f = ud;
	char key[sizeof(((flow_t *)0)->key)];
	classify(f, r, key, sizeof(key));
	if (!key[0]) {
		f->st.immediate++;
		sc_http_dispatch(r);
		return;
	}
	flow_t *fl = flow_get(f, key);
	if (fl->n >= f->o.queue_len) {
		f->st.rejected_full++;
		char why[96];
		snprintf(why, sizeof(why), "%zu requests of this client are already waiting",
		         fl->n);
		reject(f, r, why);
		return;
	}
	item_t *it = sc_xcalloc(1, sizeof(*it));
	it->flow = fl;
	it->r = r;
	it->since = uv_now(f->s->loop);
	it->read = is_read(sc_http_method(r));
	it->prev = fl->tail;
	if (fl->tail)
		fl->tail->next = it;
	else
		fl->head = it;
	fl->tail = it;
	fl->n++;
	f->st.queued++;
	sc_http_on_close(r, on_gone, it);
	activate(f, fl);
}

/* ---- running ----------------------------------------------------------- */

/* Answers 429 to requests that waited too long. */
static void expire(sc_flow_t *f, flow_t *fl, uint64_t now)
{
	while (fl->head && now - fl->head->since > f->o.max_wait_ms) {
		item_t *it = fl->head;
		item_unlink(it);
		f->st.rejected_wait++;
		char why[96];
		snprintf(why, sizeof(why), "the request waited %llu ms",
		         (unsigned long long)(now - it->since));
		sc_http_req_t *r = it->r;
		free(it);
		sc_http_on_close(r, NULL, NULL);
		reject(f, r, why);
	}
}

/* The first waiting request of fl (only a read when reads_only). */
static item_t *next_of(flow_t *fl, int reads_only)
{
	for (item_t *it = fl->head; it; it = it->next)
		if (!reads_only || it->read)
			return it;
	return NULL;
}

/* Runs one request of fl if its deficit allows; 1 when one ran. */
static int run_one(sc_flow_t *f, flow_t *fl, int reads_only)
{
	item_t *it = fl->deficit > 0 ? next_of(fl, reads_only) : NULL;
	if (!it)
		return 0;
	item_unlink(it);
	sc_http_req_t *r = it->r;
	free(it);
	uint64_t t0 = uv_hrtime();
	sc_http_dispatch(r); /* clears the close callback on_gone */
	fl->deficit -= (int64_t)(uv_hrtime() - t0);
	return 1;
}

/* Round-robin passes until no flow with deficit left has a request of the
 * kind (the array may grow meanwhile: a finished answer lets a pipelined
 * request of that connection in, through the gate). */
static void rounds(sc_flow_t *f, int reads_only)
{
	for (int ran = 1; ran;) {
		ran = 0;
		for (size_t k = 0; k < f->nactive; k++)
			ran |= run_one(f, f->active[(f->rr + k) % f->nactive], reads_only);
	}
}

void sc__flow_run(sc_flow_t *f)
{
	if (!f || f->nactive == 0)
		return;
	uint64_t now = uv_now(f->s->loop);
	for (size_t i = 0; i < f->nactive; i++)
		expire(f, f->active[i], now);
	int64_t quantum = ITERATION_BUDGET_NS / (int64_t)f->nactive;
	if (quantum < MIN_QUANTUM_NS)
		quantum = MIN_QUANTUM_NS;
	/* A flow that overspent (one long request) pays it back over the
	 * next iterations; an unused quantum is not saved up. */
	for (size_t i = 0; i < f->nactive; i++) {
		flow_t *fl = f->active[i];
		fl->deficit = fl->deficit + quantum < quantum ? fl->deficit + quantum : quantum;
	}
	rounds(f, 1);
	rounds(f, 0);
	f->rr++;
	size_t keep = 0;
	for (size_t i = 0; i < f->nactive; i++) {
		flow_t *fl = f->active[i];
		if (fl->n)
			f->active[keep++] = fl;
		else
			fl->active = 0;
	}
	f->nactive = keep;
	if (!keep)
		uv_idle_stop(&f->spin);
}

/* Forgets flows that have nothing waiting (a client's address is a flow
 * key, so the table would otherwise grow with every address seen). */
static void forget_idle(sc_flow_t *f)
{
	for (size_t b = 0; b < FLOW_BUCKETS; b++)
		for (flow_t **p = &f->buckets[b]; *p;) {
			flow_t *fl = *p;
			if (fl->n || fl->active) {
				p = &fl->next;
				continue;
			}
			*p = fl->next;
			free(fl);
		}
}

static void on_gc(uv_timer_t *t)
{
	forget_idle(t->data);
}

const sc_flow_stats_t *sc__flow_stats(const sc_flow_t *f)
{
	static const sc_flow_stats_t none;
	if (!f)
		return &none;
	sc_flow_stats_t *st = (sc_flow_stats_t *)&f->st;
	st->waiting = 0;
	for (size_t i = 0; i < f->nactive; i++)
		st->waiting += f->active[i]->n;
	return st;
}

sc_flow_t *sc__flow_new(sc_server_t *s, const sc_flow_opts_t *o)
{
	sc_flow_t *f = sc_xcalloc(1, sizeof(*f));
	f->s = s;
	f->o = *o;
	if (!f->o.queue_len)
		f->o.queue_len = 64;
	if (!f->o.max_wait_ms)
		f->o.max_wait_ms = 5000;
	uv_idle_init(s->loop, &f->spin);
	uv_timer_init(s->loop, &f->gc);
	f->spin.data = f->gc.data = f;
	f->handles = 2;
	/* Neither keeps the loop alive at shutdown. */
	uv_unref((uv_handle_t *)&f->spin);
	uv_timer_start(&f->gc, on_gc, FLOW_GC_MS, FLOW_GC_MS);
	uv_unref((uv_handle_t *)&f->gc);
	sc_http_set_gate(s->http, gate, f);
	return f;
}

static void on_closed(uv_handle_t *h)
{
	sc_flow_t *f = h->data;
	if (--f->handles > 0)
		return;
	forget_idle(f); /* the connections are closed: nothing waits, all go */
	free(f->active);
	free(f);
}

void sc__flow_close(sc_flow_t *f)
{
	if (!f)
		return;
	uv_close((uv_handle_t *)&f->spin, on_closed);
	uv_close((uv_handle_t *)&f->gc, on_closed);
}
