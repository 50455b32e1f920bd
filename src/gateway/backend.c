/* The replica table: adding and removing backends, picking one for a
 * request, passive ejection and active readiness probes.
 *
 * Picking is "least outstanding requests with power of two choices" (what
 * Envoy's LEAST_REQUEST does): take two distinct eligible backends at random
 * (weighted), keep the one with fewer requests in flight relative to its
 * weight. Two random choices avoid the herd that a strict least-loaded pick
 * causes and still steer clear of slow replicas, whose requests pile up. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/alloc.h"
#include "gateway/gw_int.h"
#include "starcloud/error.h"

/* ---------------------------------------------------------------------
 * Table
 * ------------------------------------------------------------------- */

static int same_backend(const gw_backend_t *a, const gw_backend_t *b)
{
	return strcmp(a->url, b->url) == 0 && strcmp(a->model, b->model) == 0 &&
	       strcmp(a->version, b->version) == 0 && a->role == b->role;
}

gw_backend_t *sc__gw_backend_add(sc_gw_t *gw, const gw_backend_t *desc)
{
	gw_backend_t *free_slot = NULL;
	for (size_t i = 0; i < gw->nbe; i++) {
		gw_backend_t *b = gw->be[i];
		if (same_backend(b, desc)) {
			b->weight = desc->weight;
			b->kind = desc->kind;
			memcpy(b->upstream_model, desc->upstream_model, sizeof(b->upstream_model));
			memcpy(b->health, desc->health, sizeof(b->health));
			b->source = desc->source;
			if (b->gone) {
				b->gone = 0;
				b->ready = desc->ready;
			} else if (desc->source == GW_SRC_SERVER) {
				b->ready = desc->ready;
			}
			return b;
		}
		if (!free_slot && b->gone && b->inflight == 0 && !b->probing)
			free_slot = b;
	}
	gw_backend_t *b = free_slot;
	if (!b) {
		if (gw->nbe == GW_MAX_BACKENDS)
			return NULL;
		b = sc_xcalloc(1, sizeof(*b));
		gw->be[gw->nbe++] = b;
	}
	*b = *desc;
	b->gone = 0;
	b->inflight = 0;
	b->consec_fail = 0;
	b->ejections = 0;
	b->ejected_until = 0;
	b->probing = 0;
	b->wait_head = b->wait_tail = NULL;
	b->requests = b->failures = 0;
	const char *host = strstr(b->url, "://");
	snprintf(b->id, sizeof(b->id), "%s", host ? host + 3 : b->url);
	b->stats = sc__gw_stats(gw, b->model, b->version);
	return b;
}

/* Server-sourced backends are refreshed as a whole: mark, re-add, sweep. */
void sc__gw_backend_mark(sc_gw_t *gw, int src)
{
	for (size_t i = 0; i < gw->nbe; i++)
		if (gw->be[i]->source == src && !gw->be[i]->gone)
			gw->be[i]->gone = 2; /* tentatively gone */
}

void sc__gw_backend_sweep(sc_gw_t *gw, int src)
{
	for (size_t i = 0; i < gw->nbe; i++)
		if (gw->be[i]->gone == 2 && gw->be[i]->source == src)
			gw->be[i]->gone = 1;
}

/* ---------------------------------------------------------------------
 * Eligibility
 * ------------------------------------------------------------------- */

static int is_ejected(const sc_gw_t *gw, const gw_backend_t *b)
{
	return b->ejected_until && b->ejected_until > sc__gw_now_ms(gw);
}

int sc__gw_backend_usable(const sc_gw_t *gw, const gw_backend_t *b)
{
	return !b->gone && b->ready && !is_ejected(gw, b);
}

static int matches(const gw_backend_t *b, const char *model, const char *version, int role)
{
	if (b->gone || strcmp(b->model, model) != 0)
		return 0;
	if (version && strcmp(b->version, version) != 0)
		return 0;
	if (role == GW_ROLE_BOTH)
		return b->role == GW_ROLE_BOTH;
	return b->role == role;
}

int sc__gw_model_known(const sc_gw_t *gw, const char *model, const char *version)
{
	for (size_t i = 0; i < gw->nbe; i++) {
		const gw_backend_t *b = gw->be[i];
		if (!b->gone && strcmp(b->model, model) == 0 &&
		    (!version || strcmp(b->version, version) == 0))
			return 1;
	}
	return 0;
}

int sc__gw_model_has_role(const sc_gw_t *gw, const char *model, int role)
{
	return sc__gw_version_has_role(gw, model, NULL, role);
}

int sc__gw_version_has_role(const sc_gw_t *gw, const char *model, const char *version, int role)
{
	for (size_t i = 0; i < gw->nbe; i++)
		if (matches(gw->be[i], model, version, role) &&
		    sc__gw_backend_usable(gw, gw->be[i]))
			return 1;
	return 0;
}

void sc__gw_backend_wait_add(sc_gw_t *gw, gw_backend_t *b, gw_wait_t *w)
{
	w->since_ms = sc__gw_now_ms(gw);
	w->next = NULL;
	w->prev = b->wait_tail;
	if (b->wait_tail)
		b->wait_tail->next = w;
	else
		b->wait_head = w;
	b->wait_tail = w;
	w->linked = 1;
}

void sc__gw_backend_wait_del(gw_backend_t *b, gw_wait_t *w)
{
	if (!w->linked)
		return;
	if (w->prev)
		w->prev->next = w->next;
	else
		b->wait_head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		b->wait_tail = w->prev;
	w->prev = w->next = NULL;
	w->linked = 0;
}

static int is_late(const sc_gw_t *gw, const gw_pick_t *p, const gw_backend_t *b)
{
	return p->max_wait_ms && b->wait_head &&
	       sc_queue_late(b->wait_head->since_ms, sc__gw_now_ms(gw), p->max_wait_ms);
}

static int was_tried(const gw_pick_t *p, const gw_backend_t *b)
{
	for (size_t i = 0; i < p->ntried; i++)
		if (p->tried[i] == b)
			return 1;
	return 0;
}

/* ---------------------------------------------------------------------
 * Picking
 * ------------------------------------------------------------------- */

gw_backend_t *sc__gw_pick(sc_gw_t *gw, const gw_pick_t *p, int *why)
{
	gw_backend_t *cand[GW_MAX_BACKENDS];
	double weight[GW_MAX_BACKENDS];
	int inflight[GW_MAX_BACKENDS];
	size_t n = 0, known = 0, saturated = 0, late = 0;
	for (size_t i = 0; i < gw->nbe; i++) {
		gw_backend_t *b = gw->be[i];
		if (!matches(b, p->model, p->version, p->role) ||
		    (p->kserve && b->kind != GW_BK_STARCLOUD))
			continue;
		known++;
		if (!sc__gw_backend_usable(gw, b) || was_tried(p, b))
			continue;
		if (gw->o.max_inflight > 0 && b->inflight >= gw->o.max_inflight) {
			saturated++;
			continue;
		}
		if (is_late(gw, p, b)) {
			late++;
			continue;
		}
		weight[n] = b->weight;
		inflight[n] = b->inflight;
		cand[n++] = b;
	}
	if (n == 0) {
		*why = known == 0 ? 404 : late > 0 ? 504 : saturated > 0 ? 429 : 503;
		return NULL;
	}
	if (n == 1)
		return cand[0];
	if (p->least)
		return cand[sc_lb_least(weight, inflight, n)];
	uint64_t r1 = sc__gw_rand(gw), r2 = sc__gw_rand(gw);
	return cand[sc_lb_p2c(weight, inflight, n, r1, r2)];
}

/* ---------------------------------------------------------------------
 * Passive ejection
 * ------------------------------------------------------------------- */

/* Envoy's rule, stricter on the cap: never eject more than half of a
 * model's replicas, so a model-wide fault degrades instead of going dark. */
static int may_eject(const sc_gw_t *gw, const gw_backend_t *b)
{
	size_t total = 0, ejected = 0;
	for (size_t i = 0; i < gw->nbe; i++) {
		const gw_backend_t *o = gw->be[i];
		if (o->gone || strcmp(o->model, b->model) != 0 || o->role != b->role)
			continue;
		total++;
		if (is_ejected(gw, o))
			ejected++;
	}
	return sc_eject_allowed(ejected, total);
}

void sc__gw_backend_result(sc_gw_t *gw, gw_backend_t *b, int ok)
{
	b->requests++;
	if (ok) {
		b->consec_fail = 0;
		return;
	}
	b->failures++;
	b->consec_fail++;
	if (b->consec_fail < gw->o.eject_after || is_ejected(gw, b) || !may_eject(gw, b))
		return;
	b->ejections++;
	uint64_t d = sc_eject_ms(gw->o.eject_base_ms, gw->o.eject_max_ms, b->ejections);
	b->ejected_until = sc__gw_now_ms(gw) + d;
	b->consec_fail = 0;
	sc__gw_stats_ejection(b->stats);
	sc_log_warn("ejected %s (%s:%s) for %llu ms after %d consecutive failures", b->id, b->model,
	            b->version, (unsigned long long)d, gw->o.eject_after);
}

/* ---------------------------------------------------------------------
 * Active readiness probes: GET /v2/health/ready (or the backend's own
 * health path, /health for OpenAI-compatible servers) on every backend
 * ------------------------------------------------------------------- */

/* The backend itself is the probe's context: a probe still out when the
 * client closes at shutdown has nothing of its own to free. */
static void probe_done(sc_hcli_req_t *r, int err, void *ud)
{
	gw_backend_t *b = ud;
	b->probing = 0;
	if (err == SC_ECANCELED)
		return; /* the client closed at shutdown: no verdict */
	int ok = err == 0 && sc_hcli_status(r) == 200;
	if (!b->gone && ok != b->ready) {
		sc_log_info("replica %s (%s:%s) is %s", b->id, b->model, b->version,
		            ok ? "ready again" : "not ready");
		/* A passing probe does not lift an ejection early: the
		 * backend answered a probe, not traffic. */
		b->ready = ok;
	}
}

static void probe_one(sc_gw_t *gw, gw_backend_t *b)
{
	char url[GW_MAX_URL + sizeof(b->health)];
	snprintf(url, sizeof(url), "%s%s", b->url, b->health[0] ? b->health : "/v2/health/ready");
	sc_hcli_call_t call = {
	    .method = "GET",
	    .url = url,
	    .timeout_ms = gw->o.probe_interval_ms < 2000 ? gw->o.probe_interval_ms : 2000,
	    .cbs = {.on_done = probe_done},
	    .ud = b,
	};
	if (sc_hcli_start(gw->hc, &call, NULL) < 0)
		return;
	b->probing = 1;
}

static void on_probe_timer(uv_timer_t *t)
{
	sc_gw_t *gw = t->data;
	if (gw->probe_tick)
		gw->probe_tick(gw);
	for (size_t i = 0; i < gw->nbe; i++) {
		gw_backend_t *b = gw->be[i];
		if (!b->gone && !b->probing)
			probe_one(gw, b);
	}
}

void sc__gw_probe_start(sc_gw_t *gw)
{
	if (gw->o.probe_interval_ms == 0)
		return;
	uv_timer_init(gw->loop, &gw->probe_timer);
	gw->probe_timer.data = gw;
	uv_timer_start(&gw->probe_timer, on_probe_timer, 0, gw->o.probe_interval_ms);
}
