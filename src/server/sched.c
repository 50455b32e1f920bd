/* The scheduling loop: a cycle every second, and soon after any change.
 *
 * A change (an API write) only arms a short timer, so a burst of writes
 * (an apply of 1,000 objects) costs one cycle, not 1,000. The delay grows
 * with the last cycle's duration (KICK_MS + 2 x cycle time, at most the
 * period), so on a busy machine the cycles leave the cores to the API.
 *
 * A cycle never blocks the event loop: the loop thread takes references to
 * the cached objects (sched_load.c), a libuv worker thread decodes them,
 * runs sc_scheduler_run() and turns the decisions into writes
 * (sched_write.c), and the loop thread starts one conditional transaction
 * of those (with etcd it waits on the store's calls thread, store.h; the
 * cycle ends when the store answers). An API write to a job the cycle read, made while the worker
 * ran, fails that transaction with SC_ECONFLICT and the cycle runs again on
 * fresh objects, up to MAX_TRIES. One cycle runs at a time; a kick during
 * one asks for another after it. The server reports ready (/readyz) after
 * its first successful cycle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/cache.h"
#include "base/alloc.h"
#include "base/log.h"
#include "server/deploy.h"
#include "server/ha.h"
#include "server/metrics.h"
#include "server/pool.h"
#include "server/sched_int.h"
#include "server/schedstat.h"
#include "starcloud/error.h"

#define PERIOD_MS 1000
#define KICK_MS 2
#define MAX_TRIES 3

typedef struct cycle_job cycle_job_t;

struct sc_sched {
	sc_server_t *s;
	uv_timer_t period;
	uv_timer_t kick;
	int kicked;
	int closed;
	int stopping;              /* sc__sched_stop ran: free once the worker is done */
	int again;                 /* a kick came while a cycle ran */
	cycle_job_t *job;          /* the cycle in progress, or NULL */
	double last_cycle;         /* seconds */
	long events;               /* events in the store, as far as we know; -1 = unknown */
	sc_queue_report_t *queues; /* last cycle's; names owned */
	size_t nqueues;
	sc_scheduler_t *core;       /* keeps the core's scratch memory between cycles */
	sc_decode_cache_t *decoded; /* worker's: objects decoded by earlier cycles */
	char last_error[600];
};

static void free_queues(sc_sched_t *sc)
{
	for (size_t i = 0; i < sc->nqueues; i++) {
		free((char *)sc->queues[i].name);
		free((char *)sc->queues[i].parent);
	}
	free(sc->queues);
	sc->queues = NULL;
	sc->nqueues = 0;
}

/* Keeps the queue figures for explain (the decisions are freed). */
static void keep_queues(sc_sched_t *sc, const sc_decisions_t *d)
{
	free_queues(sc);
	sc->queues = sc_xcalloc(d->nqueues + 1, sizeof(*sc->queues));
	for (size_t i = 0; i < d->nqueues; i++) {
		sc->queues[i] = d->queues[i];
		sc->queues[i].name = sc_xstrdup(d->queues[i].name);
		sc->queues[i].parent = d->queues[i].parent ? sc_xstrdup(d->queues[i].parent) : NULL;
	}
	sc->nqueues = d->nqueues;
}

const sc_queue_report_t *sc__sched_queue(sc_server_t *s, const char *name)
{
	sc_sched_t *sc = s->sched;
	for (size_t i = 0; sc && name && i < sc->nqueues; i++)
		if (strcmp(sc->queues[i].name, name) == 0)
			return &sc->queues[i];
	return NULL;
}

static void feed_metrics(sc_sched_t *sc, double seconds, const sc_decisions_t *d,
                         const sc_cycle_out_t *out)
{
	sc_queue_metrics_t *q = sc_xcalloc(d->nqueues + 1, sizeof(*q));
	for (size_t i = 0; i < d->nqueues; i++) {
		const sc_queue_report_t *r = &d->queues[i];
		snprintf(q[i].name, sizeof(q[i].name), "%s", r->name);
		q[i].quota = r->quota[SC_RES_GPU];
		q[i].fair_share = r->fair_share[SC_RES_GPU];
		q[i].allocated = r->allocated[SC_RES_GPU];
		q[i].requested = r->requested[SC_RES_GPU];
	}
	sc__metrics_cycle(sc->s->metrics, seconds, out->placements, out->evictions, SC_ACT_COUNT,
	                  out->drained, out->pending, q, d->nqueues);
	sc__metrics_compaction(sc->s->metrics, out->compaction_gpus, out->compaction_lost_gpu_s);
	for (size_t i = 0; i < out->nwaits; i++)
		sc__metrics_wait(sc->s->metrics, out->waits[i]);
	free(q);
}

/* One attempt of a cycle; the fields after `in` are written by the worker. */
struct cycle_job {
	uv_work_t req;
	sc_sched_t *sc;
	int tries;
	uint64_t t0;
	sc_cycle_in_t in;
	sc_decisions_t *d;
	sc_pool_cycle_t *pools; /* node pools' input and plans, or NULL */
	sc_cycle_plan_t plan;
	sc_cycle_out_t out;
	int rc;
	char msg[512];
};

static void trim_events(sc_sched_t *sc, size_t created)
{
	if (sc->events >= 0)
		sc->events += (long)created;
	/* Counting events costs; do it when the estimate is 10 % over. */
	if (sc->events < 0 || sc->events > SC_EVENT_LIMIT + SC_EVENT_LIMIT / 10)
		sc->events = sc__events_trim(sc->s);
}

static void arm_kick(sc_sched_t *sc);
static void kick(sc_server_t *s);
static void start_attempt(sc_sched_t *sc, int tries, uint64_t t0);

static void job_free(cycle_job_t *j)
{
	sc__cycle_plan_free(&j->plan);
	sc__pool_cycle_free(j->pools);
	sc_decisions_free(j->d);
	sc__cycle_in_free(&j->in);
	free(j->out.waits);
	free(j);
}

static void sched_free(sc_sched_t *sc)
{
	free_queues(sc);
	sc_scheduler_free(sc->core);
	sc__decode_cache_free(sc->decoded);
	free(sc);
}

/* Worker thread: reads only j and the immutable cached objects it holds. */
static void work(uv_work_t *req)
{
	cycle_job_t *j = req->data;
	j->rc = sc__cycle_build(&j->in, j->sc->decoded);
	if (j->rc == 0) {
		j->rc = sc_scheduler_run(j->sc->core, &j->in.snap, &j->d, j->msg, sizeof(j->msg));
		if (j->rc < 0)
			j->msg[sizeof(j->msg) - 1] = '\0';
		else
			j->msg[0] = '\0';
	}
	/* Node pools plan on the same snapshot and decisions; a failure
	 * there leaves the cycle's own decisions standing. */
	if (j->rc == 0 && j->pools && sc__pool_plan(j->pools, &j->in, j->d) == 0)
		j->in.pool_waits = j->pools->waits;
	if (j->rc == 0)
		j->rc = sc__cycle_plan(&j->in, j->d, j->sc->decoded, &j->plan, &j->out);
}

static void cycle_failed(sc_sched_t *sc, cycle_job_t *j)
{
	/* Writes kept racing this cycle's commit: try again soon, on fresher
	 * objects, rather than a whole period later. */
	if (j->rc == SC_ECONFLICT)
		sc->again = 1;
	if (j->msg[0])
		snprintf(sc->last_error, sizeof(sc->last_error), "schedule: %s", j->msg);
	else
		snprintf(sc->last_error, sizeof(sc->last_error), "%s", sc_strerror(j->rc));
	sc_log_error("scheduling cycle failed: %s", sc->last_error);
	sc->last_error[0] = '\0';
}

static void cycle_done(sc_sched_t *sc, cycle_job_t *j)
{
	double secs = (double)(uv_hrtime() - j->t0) / 1e9;
	sc->last_cycle = secs;
	if (j->rc < 0) {
		cycle_failed(sc, j);
		return;
	}
	keep_queues(sc, j->d);
	feed_metrics(sc, secs, j->d, &j->out);
	if (sc->s->stat)
		sc__schedstat_cycle(sc->s->stat, (int64_t)time(NULL), secs, &j->in.snap, j->d);
	sc__metrics_decodes(sc->s->metrics, j->in.decoded);
	trim_events(sc, j->out.events);
	sc->s->ready = 1;
	sc__pool_act(sc->s, j->pools); /* takes them */
	j->pools = NULL;
	sc__deploy_tick(sc->s);
	/* Releasing pods are removed by the next cycle; run it soon so an
	 * eviction completes (and its preemptor starts) without waiting a
	 * whole period. */
	if (j->out.releasing)
		sc->again = 1;
}

/* The cycle is over (stopped, deposed, done): the next may start. */
static void job_end(sc_sched_t *sc, cycle_job_t *j)
{
	sc->job = NULL;
	job_free(j);
	if (sc->stopping && sc->closed == 2)
		sched_free(sc);
}

/* Loop thread, when the store has answered the cycle's write: done, or
 * run again on a conflict. */
static void committed(const sc_store_res_t *res, void *ud)
{
	cycle_job_t *j = ud;
	sc_sched_t *sc = j->sc;
	/* Deposed while etcd answered (the write was fenced either way): the
	 * new leader schedules. */
	if (sc->stopping || !sc__ha_leader_begin(sc->s)) {
		job_end(sc, j);
		return;
	}
	j->rc = sc__cycle_committed(sc->s, &j->plan, res);
	if (j->rc == SC_ECONFLICT && j->tries + 1 < MAX_TRIES) {
		int tries = j->tries + 1;
		uint64_t t0 = j->t0;
		sc__ha_leader_end(sc->s);
		job_end(sc, j); /* first: its snapshot borrows from the decode cache */
		start_attempt(sc, tries, t0);
		return;
	}
	cycle_done(sc, j); /* trims events: still fenced */
	sc__ha_leader_end(sc->s);
	job_end(sc, j);
	if (sc->again) {
		sc->again = 0;
		arm_kick(sc);
	}
}

/* Loop thread, after the worker: the write starts (the cycle stays in
 * sc->job until the store answers, so no other starts meanwhile). */
static void after_work(uv_work_t *req, int status)
{
	cycle_job_t *j = req->data;
	sc_sched_t *sc = j->sc;
	if (sc->stopping || status == UV_ECANCELED) {
		job_end(sc, j);
		return;
	}
	/* Deposed while the worker ran: the new leader schedules. */
	if (!sc__ha_leader_begin(sc->s)) {
		job_end(sc, j);
		return;
	}
	if (j->rc < 0) {
		cycle_done(sc, j); /* says why */
		sc__ha_leader_end(sc->s);
		job_end(sc, j);
		if (sc->again) {
			sc->again = 0;
			arm_kick(sc);
		}
		return;
	}
	/* The fence is taken with the write, when it is submitted. */
	sc__cycle_commit(sc->s, &j->plan, committed, j);
	sc__ha_leader_end(sc->s);
}

static void start_attempt(sc_sched_t *sc, int tries, uint64_t t0)
{
	cycle_job_t *j = sc_xcalloc(1, sizeof(*j));
	j->sc = sc;
	j->tries = tries;
	j->t0 = t0;
	j->req.data = j;
	sc__cycle_collect(sc->s, (int64_t)time(NULL), &j->in);
	j->pools = sc__pool_input(sc->s, j->in.now);
	sc->job = j;
	int rc = uv_queue_work(sc->s->loop, &j->req, work, after_work);
	if (rc < 0) {
		sc_log_error("cannot queue a cycle: %s", uv_strerror(rc));
		sc->job = NULL;
		job_free(j);
	}
}

/* Only the leader schedules (ha.c); its writes are fenced at commit. */
static void cycle(sc_sched_t *sc)
{
	if (!sc__ha_is_leader(sc->s))
		return;
	if (sc->job) {
		sc->again = 1;
		return;
	}
	start_attempt(sc, 0, uv_hrtime());
}

static void on_period(uv_timer_t *t)
{
	cycle(t->data);
}

static void on_kick(uv_timer_t *t)
{
	sc_sched_t *sc = t->data;
	sc->kicked = 0;
	cycle(sc);
}

static void arm_kick(sc_sched_t *sc)
{
	if (sc->kicked)
		return;
	uint64_t delay = KICK_MS + (uint64_t)(2000.0 * sc->last_cycle);
	if (delay > PERIOD_MS)
		delay = PERIOD_MS;
	sc->kicked = 1;
	uv_timer_start(&sc->kick, on_kick, delay, 0);
}

int sc__sched_start(sc_server_t *s)
{
	sc_sched_t *sc = sc_calloc(1, sizeof(*sc));
	if (!sc)
		return SC_ENOMEM;
	sc->core = sc_scheduler_new();
	sc->decoded = sc__decode_cache_new();
	if (!sc->core || !sc->decoded) {
		sc_scheduler_free(sc->core);
		sc__decode_cache_free(sc->decoded);
		free(sc);
		return SC_ENOMEM;
	}
	sc->s = s;
	sc->events = -1;
	uv_timer_init(s->loop, &sc->period);
	uv_timer_init(s->loop, &sc->kick);
	sc->period.data = sc->kick.data = sc;
	uv_timer_start(&sc->period, on_period, 0, PERIOD_MS);
	s->sched = sc;
	s->kick = kick;
	return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
	sc_sched_t *sc = h->data;
	/* Both timers point here; free after the second, whatever the order,
	 * and after the cycle on the worker (its after_work frees then). */
	if (++sc->closed == 2 && !sc->job)
		sched_free(sc);
}

void sc__sched_stop(sc_server_t *s)
{
	sc_sched_t *sc = s->sched;
	if (!sc)
		return;
	s->sched = NULL;
	s->kick = NULL;
	sc->stopping = 1;
	if (sc->job)
		uv_cancel((uv_req_t *)&sc->job->req); /* fails once it runs: then it finishes */
	uv_close((uv_handle_t *)&sc->period, on_timer_closed);
	uv_close((uv_handle_t *)&sc->kick, on_timer_closed);
}

/* What sc__sched_kick (kick.c) runs while the loop is up. */
static void kick(sc_server_t *s)
{
	if (s->sched)
		arm_kick(s->sched);
}
