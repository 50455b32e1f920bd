/* The scheduling loop: a cycle every second, and soon after any change.
 *
 * A change (an API write) only arms a short timer, so a burst of writes
 * (an apply of 1,000 objects) costs one cycle, not 1,000. The delay grows
 * with the last cycle's duration (KICK_MS + 2 x cycle time, at most the
 * period), so under a stream of writes the loop spends at most about a
 * third of the event loop's time scheduling and the API stays responsive.
 *
 * A cycle: load + decode (sched_load.c), sc_scheduler_run(), write back in one
 * conditional transaction (sched_write.c). A conflict (an API write to a
 * job between read and write cannot happen on this one thread today, but
 * will with a remote store) runs the cycle again, up to MAX_TRIES. The
 * server reports ready (/readyz) after its first successful cycle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/deploy.h"
#include "server/ha.h"
#include "server/metrics.h"
#include "server/sched_int.h"
#include "starcloud/error.h"

#define PERIOD_MS 1000
#define KICK_MS 2
#define MAX_TRIES 3

struct sc_sched {
	sc_server_t *s;
	uv_timer_t period;
	uv_timer_t kick;
	int kicked;
	int closed;
	double last_cycle; /* seconds */
	long events;       /* events in the store, as far as we know; -1 = unknown */
	sc_queue_report_t *queues; /* last cycle's; names owned */
	size_t nqueues;
	sc_scheduler_t *core; /* keeps the core's scratch memory between cycles */
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
	sc->queues = calloc(d->nqueues + 1, sizeof(*sc->queues));
	if (!sc->queues)
		abort();
	for (size_t i = 0; i < d->nqueues; i++) {
		sc->queues[i] = d->queues[i];
		sc->queues[i].name = strdup(d->queues[i].name);
		sc->queues[i].parent = d->queues[i].parent ? strdup(d->queues[i].parent) : NULL;
		if (!sc->queues[i].name)
			abort();
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
	sc_queue_metrics_t *q = calloc(d->nqueues + 1, sizeof(*q));
	if (!q)
		abort();
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
	for (size_t i = 0; i < out->nwaits; i++)
		sc__metrics_wait(sc->s->metrics, out->waits[i]);
	free(q);
}

/* One attempt: load, schedule, write. */
static int attempt(sc_sched_t *sc, int64_t now, sc_decisions_t **d, sc_cycle_out_t *out)
{
	sc_cycle_in_t in;
	char msg[512];
	int rc = sc__cycle_load(sc->s, now, &in);
	if (rc == 0) {
		rc = sc_scheduler_run(sc->core, &in.snap, d, msg, sizeof(msg));
		if (rc < 0)
			snprintf(sc->last_error, sizeof(sc->last_error), "schedule: %s", msg);
	}
	if (rc == 0) {
		rc = sc__cycle_write(sc->s, &in, *d, out);
		if (rc < 0) {
			sc_decisions_free(*d);
			*d = NULL;
		}
	}
	sc__cycle_in_free(&in);
	return rc;
}

static void trim_events(sc_sched_t *sc, size_t created)
{
	if (sc->events >= 0)
		sc->events += (long)created;
	/* Listing every event costs; do it when the estimate is 10 % over. */
	if (sc->events < 0 || sc->events > SC_EVENT_LIMIT + SC_EVENT_LIMIT / 10)
		sc->events = sc__events_trim(sc->s);
}

static void arm_kick(sc_sched_t *sc);

static void cycle_run(sc_sched_t *sc)
{
	uint64_t t0 = uv_hrtime();
	int64_t now = (int64_t)time(NULL);
	sc_decisions_t *d = NULL;
	sc_cycle_out_t out = { 0 };
	int rc = SC_ECONFLICT;
	for (int i = 0; i < MAX_TRIES && rc == SC_ECONFLICT; i++)
		rc = attempt(sc, now, &d, &out);
	double secs = (double)(uv_hrtime() - t0) / 1e9;
	sc->last_cycle = secs;
	if (rc < 0) {
		if (!sc->last_error[0])
			snprintf(sc->last_error, sizeof(sc->last_error), "%s", sc_strerror(rc));
		fprintf(stderr, "server: scheduling cycle failed: %s\n", sc->last_error);
		sc->last_error[0] = '\0';
		free(out.waits);
		return;
	}
	keep_queues(sc, d);
	feed_metrics(sc, secs, d, &out);
	trim_events(sc, out.events);
	sc->s->ready = 1;
	sc__deploy_tick(sc->s);
	/* Releasing pods are removed by the next cycle; run it soon so an
	 * eviction completes (and its preemptor starts) without waiting a
	 * whole period. */
	if (out.releasing)
		arm_kick(sc);
	sc_decisions_free(d);
	free(out.waits);
}

/* Only the leader schedules; its writes are fenced (ha.c). */
static void cycle(sc_sched_t *sc)
{
	if (!sc__ha_leader_begin(sc->s))
		return;
	cycle_run(sc);
	sc__ha_leader_end(sc->s);
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
	sc_sched_t *sc = calloc(1, sizeof(*sc));
	if (!sc)
		return SC_ENOMEM;
	sc->core = sc_scheduler_new();
	if (!sc->core) {
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
	return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
	sc_sched_t *sc = h->data;
	/* Both timers point here; free after the second, whatever the order. */
	if (++sc->closed == 2) {
		free_queues(sc);
		sc_scheduler_free(sc->core);
		free(sc);
	}
}

void sc__sched_stop(sc_server_t *s)
{
	sc_sched_t *sc = s->sched;
	if (!sc)
		return;
	s->sched = NULL;
	uv_close((uv_handle_t *)&sc->period, on_timer_closed);
	uv_close((uv_handle_t *)&sc->kick, on_timer_closed);
}

void sc__sched_kick(sc_server_t *s)
{
	if (s->sched)
		arm_kick(s->sched);
}
