/* The scheduling loop: a cycle every second, and soon after any change.
 *
 * A change (an API write) only arms a short timer, so a burst of writes
 * (an apply of 1,000 objects) costs one cycle, not 1,000. */
#include <stdlib.h>

#include "server/metrics.h"
#include "server/server.h"
#include "starcloud/error.h"

#define PERIOD_MS 1000
#define KICK_DELAY_MS 20

struct sc_sched {
	sc_server_t *s;
	uv_timer_t period;
	uv_timer_t kick;
	int kicked;
	int closed;
};

static void cycle(sc_sched_t *sc)
{
	uint64_t t0 = uv_hrtime();
	/* The snapshot -> sc_schedule() -> one-transaction write-back lands with
	 * the manifest decoder (io branch); until then a cycle only proves the
	 * store readable. */
	sc_server_t *s = sc->s;
	(void)sc_store_revision(s->store);
	s->ready = 1;
	sc__metrics_cycle(s->metrics, (double)(uv_hrtime() - t0) / 1e9, 0, NULL, 0, 0, NULL, 0);
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

int sc__sched_start(sc_server_t *s)
{
	sc_sched_t *sc = calloc(1, sizeof(*sc));
	if (!sc)
		return SC_ENOMEM;
	sc->s = s;
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
	if (++sc->closed == 2)
		free(sc);
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
	sc_sched_t *sc = s->sched;
	if (!sc || sc->kicked)
		return;
	sc->kicked = 1;
	uv_timer_start(&sc->kick, on_kick, KICK_DELAY_MS, 0);
}
