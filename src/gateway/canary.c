/* Canary rollouts between two versions of one model.
 *
 * Unpinned requests go to the canary with probability weight/100. Every
 * analysis window the gateway compares what the canary did (attempts,
 * failures, p99 latency) against the rollout's limits, as Argo Rollouts'
 * analysis does: a window with too many failures rolls the canary back at
 * once (weight 0, every unpinned request to the stable version); a good
 * window with enough canary traffic moves to the next step (10 -> 50 ->
 * 100 %); a good window at the last step promotes the canary. A window
 * without canary traffic proves nothing and holds the step. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "gateway/gw_int.h"
#include "starcloud/error.h"

static const char *const state_names[] = {"progressing", "promoted", "rolled_back", "aborted"};

const char *sc__gw_rollout_state(int state)
{
	return state_names[state];
}

gw_rollout_t *sc__gw_rollout_find(sc_gw_t *gw, const char *model)
{
	/* Every request asks (twice): look only at slots ever used, not at all
	 * GW_MAX_ROLLOUTS, each of which is several KiB. */
	for (size_t i = 0; i < gw->nro; i++)
		if (gw->ro[i].used && strcmp(gw->ro[i].model, model) == 0)
			return &gw->ro[i];
	return NULL;
}

/* ---------------------------------------------------------------------
 * Windows
 * ------------------------------------------------------------------- */

/* ---------------------------------------------------------------------
 * State changes
 * ------------------------------------------------------------------- */

static void finish(sc_gw_t *gw, gw_rollout_t *ro, int state, const char *reason)
{
	ro->state = state;
	ro->weight = state == RO_PROMOTED ? 100 : 0;
	snprintf(ro->reason, sizeof(ro->reason), "%s", reason);
	uv_timer_stop(&ro->timer);
	sc_log_info("rollout %s %s -> %s: %s (%s)", ro->model, ro->stable, ro->canary,
	            state_names[state], reason);
	if (state == RO_ROLLED_BACK)
		sc__gw_stats_rollback(sc__gw_stats(gw, ro->model, ro->canary));
	if (gw->rollout_outcome)
		gw->rollout_outcome(gw, ro, state == RO_PROMOTED ? "promoted" : state_names[state]);
}

/* Ends the current window: its figures become the last window's, and the
 * control plane hears of them. */
static void close_window(sc_gw_t *gw, gw_rollout_t *ro)
{
	for (int i = 0; i < 2; i++) {
		ro->last_err[i] = sc_window_err(&ro->cur[i]);
		ro->last_p99[i] = sc_window_p99(&ro->cur[i]);
		ro->last[i] = ro->cur[i];
		memset(&ro->cur[i], 0, sizeof(ro->cur[i]));
	}
	ro->windows++;
	if (gw->rollout_window)
		gw->rollout_window(gw, ro);
}

static void evaluate(sc_gw_t *gw, gw_rollout_t *ro)
{
	close_window(gw, ro);
	const gw_window_t *c = &ro->last[1];
	char why[256];
	sc_canary_limits_t lim = {ro->max_error_rate, ro->max_p99, ro->min_requests,
	                          ro->confidence};
	int v =
	    sc_canary_verdict(c->requests, c->errors, ro->last_p99[1], &lim, ro->step, ro->nsteps);
	switch (v) {
	case SC_CANARY_ROLLBACK_ERR:
		snprintf(why, sizeof(why),
		         "canary error rate %.3f > %.3f in window %llu (%llu/%llu)",
		         ro->last_err[1], ro->max_error_rate, (unsigned long long)ro->windows,
		         (unsigned long long)c->errors, (unsigned long long)c->requests);
		finish(gw, ro, RO_ROLLED_BACK, why);
		return;
	case SC_CANARY_ROLLBACK_P99:
		snprintf(why, sizeof(why), "canary p99 %.3fs > %.3fs in window %llu",
		         ro->last_p99[1], ro->max_p99, (unsigned long long)ro->windows);
		finish(gw, ro, RO_ROLLED_BACK, why);
		return;
	case SC_CANARY_PROMOTE:
		if (ro->source == GW_SRC_SERVER)
			return; /* the server promotes, on the evidence of every gateway */
		finish(gw, ro, RO_PROMOTED, "every step passed its analysis");
		return;
	case SC_CANARY_ADVANCE:
		if (ro->source == GW_SRC_SERVER)
			return; /* the server steps, and the weight follows it */
		ro->step++;
		ro->weight = ro->steps[ro->step];
		ro->step_req = ro->step_err = 0;
		sc_log_info("rollout %s: canary %s at %d %%", ro->model, ro->canary, ro->weight);
		return;
	default:
		return; /* hold the step */
	}
}

static void on_window(uv_timer_t *t)
{
	gw_rollout_t *ro = t->data;
	evaluate(ro->gw, ro);
}

gw_rollout_t *sc__gw_rollout_set(sc_gw_t *gw, const char *model, const char *stable,
                                 const char *canary, const int *steps, size_t nsteps,
                                 uint64_t window_ms, double max_error_rate, int source)
{
	gw_rollout_t *ro = sc__gw_rollout_find(gw, model);
	int fresh = !ro || strcmp(ro->stable, stable) != 0 || strcmp(ro->canary, canary) != 0;
	if (!ro) {
		for (size_t i = 0; i < GW_MAX_ROLLOUTS && !ro; i++)
			if (!gw->ro[i].used)
				ro = &gw->ro[i];
		if (!ro)
			return NULL;
		memset(ro, 0, sizeof(*ro));
		ro->used = 1;
		if ((size_t)(ro - gw->ro) >= gw->nro)
			gw->nro = (size_t)(ro - gw->ro) + 1;
		ro->gw = gw;
		uv_timer_init(gw->loop, &ro->timer);
		ro->timer.data = ro;
	}
	snprintf(ro->model, sizeof(ro->model), "%s", model);
	snprintf(ro->stable, sizeof(ro->stable), "%s", stable);
	snprintf(ro->canary, sizeof(ro->canary), "%s", canary);
	if (nsteps > GW_MAX_STEPS)
		nsteps = GW_MAX_STEPS;
	memcpy(ro->steps, steps, nsteps * sizeof(int));
	ro->nsteps = nsteps;
	ro->window_ms = window_ms;
	ro->max_error_rate = max_error_rate;
	ro->source = source;
	if (!ro->min_requests)
		ro->min_requests = 1;
	if (fresh)
		ro->confidence = GW_EARLY_CONFIDENCE; /* the caller may set its own */
	if (!fresh)
		return ro;
	ro->step = 0;
	ro->weight = steps[0];
	ro->state = RO_PROGRESSING;
	ro->windows = 0;
	ro->step_req = ro->step_err = 0;
	ro->reason[0] = '\0';
	memset(ro->cur, 0, sizeof(ro->cur));
	memset(ro->last, 0, sizeof(ro->last));
	uv_timer_start(&ro->timer, on_window, window_ms, window_ms);
	sc_log_info("rollout %s: %s -> %s, canary at %d %%, window %llu ms, max error rate %.3f",
	            model, stable, canary, ro->weight, (unsigned long long)window_ms,
	            max_error_rate);
	return ro;
}

void sc__gw_rollout_follow(sc_gw_t *gw, gw_rollout_t *ro, const char *phase, int weight)
{
	if (ro->state != RO_PROGRESSING || !phase)
		return; /* ended here (rolled back, aborted): the server hears of it */
	if (strcmp(phase, "RolledBack") == 0) {
		ro->state = RO_ROLLED_BACK;
		ro->weight = 0;
		snprintf(ro->reason, sizeof(ro->reason), "rolled back by the control plane");
		uv_timer_stop(&ro->timer);
		return;
	}
	if (strcmp(phase, "Complete") == 0) {
		ro->state = RO_PROMOTED;
		ro->weight = 100;
		snprintf(ro->reason, sizeof(ro->reason), "promoted by the control plane");
		uv_timer_stop(&ro->timer);
		return;
	}
	if (weight >= 0 && weight <= 100 && weight != ro->weight) {
		sc_log_info("rollout %s: canary %s at %d %% (the control plane's step)", ro->model,
		            ro->canary, weight);
		ro->weight = weight;
		ro->step_req = ro->step_err = 0;
	}
	(void)gw;
}

const char *sc__gw_rollout_choose(sc_gw_t *gw, const char *model)
{
	gw_rollout_t *ro = sc__gw_rollout_find(gw, model);
	if (!ro)
		return NULL;
	if (ro->state == RO_PROMOTED)
		return ro->canary;
	if (ro->state != RO_PROGRESSING)
		return ro->stable;
	return (int)(sc__gw_rand(gw) % 100) < ro->weight ? ro->canary : ro->stable;
}

/* A version can serve a prefill/decode request only with a usable replica of
 * both roles: a canary with its prefill ready and no decoder yet would take
 * the prefill and then answer 404 at the decode. Like Envoy's weighted
 * clusters skipping one without healthy hosts, the request goes to the
 * rollout's other version when that one can serve it; its outcome is then
 * that version's evidence, as it is that version that served it. */
static int pd_eligible(const sc_gw_t *gw, const char *model, const char *version)
{
	return sc__gw_version_has_role(gw, model, version, GW_ROLE_PREFILL) &&
	       sc__gw_version_has_role(gw, model, version, GW_ROLE_DECODE);
}

const char *sc__gw_rollout_pd_other(sc_gw_t *gw, const char *model, const char *version)
{
	gw_rollout_t *ro = sc__gw_rollout_find(gw, model);
	if (!ro)
		return NULL;
	const char *other = strcmp(version, ro->canary) == 0   ? ro->stable
	                    : strcmp(version, ro->stable) == 0 ? ro->canary
	                                                       : NULL;
	return other && pd_eligible(gw, model, other) ? other : NULL;
}

const char *sc__gw_rollout_pd_version(sc_gw_t *gw, const char *model, const char *chosen)
{
	if (pd_eligible(gw, model, chosen))
		return chosen;
	const char *other = sc__gw_rollout_pd_other(gw, model, chosen);
	return other ? other : chosen;
}

const char *sc__gw_rollout_fallback(sc_gw_t *gw, const char *model, const char *version, int role)
{
	gw_rollout_t *ro = sc__gw_rollout_find(gw, model);
	/* Promoted: the canary is the version now, there is nothing to fall
	 * back to. Rolled back or aborted: a request still on the canary was
	 * routed before the end, and the stable version serves it. */
	if (!ro || ro->state == RO_PROMOTED || strcmp(version, ro->canary) != 0 ||
	    strcmp(ro->stable, ro->canary) == 0)
		return NULL;
	int ok = role < 0 ? pd_eligible(gw, model, ro->stable)
	                  : sc__gw_version_has_role(gw, model, ro->stable, role);
	return ok ? ro->stable : NULL;
}

void sc__gw_rollout_observe(sc_gw_t *gw, const char *model, const char *version, int error,
                            double seconds)
{
	gw_rollout_t *ro = sc__gw_rollout_find(gw, model);
	if (!ro || ro->state != RO_PROGRESSING)
		return;
	int i = strcmp(version, ro->canary) == 0 ? 1 : strcmp(version, ro->stable) == 0 ? 0 : -1;
	if (i < 0)
		return;
	sc_window_add(&ro->cur[i], error, seconds, sc__gw_rand(gw));
	if (i == 0)
		return;
	ro->step_req++;
	ro->step_err += error != 0;
	/* Early rollback: failures that already prove the canary's error rate
	 * above the limit end it now, not at the window's end nor after
	 * minRequests; checked on failures only (a success never proves it). */
	if (!error ||
	    !sc_canary_proven_bad(ro->step_req, ro->step_err, ro->max_error_rate, ro->confidence))
		return;
	/* The window so far is the evidence: reported before the outcome. */
	close_window(gw, ro);
	char why[256];
	snprintf(why, sizeof(why),
	         "canary failed %llu of %llu requests in this step: error rate above %.3f at "
	         "%.0f %% confidence",
	         (unsigned long long)ro->step_err, (unsigned long long)ro->step_req,
	         ro->max_error_rate, ro->confidence * 100);
	finish(gw, ro, RO_ROLLED_BACK, why);
}

int sc__gw_rollout_action(sc_gw_t *gw, gw_rollout_t *ro, const char *action)
{
	if (strcmp(action, "promote") == 0) {
		if (ro->state != RO_PROMOTED)
			finish(gw, ro, RO_PROMOTED, "promoted by an operator");
		return 0;
	}
	if (strcmp(action, "abort") == 0) {
		if (ro->state == RO_PROGRESSING || ro->state == RO_PROMOTED)
			finish(gw, ro, RO_ABORTED, "aborted by an operator");
		return 0;
	}
	return SC_EINVAL;
}

static json_t *window_json(const gw_window_t *w, double err, double p99)
{
	return json_pack("{s:I,s:I,s:f,s:f}", "requests", (json_int_t)w->requests, "errors",
	                 (json_int_t)w->errors, "errorRate", err, "p99Seconds", p99);
}

json_t *sc__gw_rollout_json(const gw_rollout_t *ro)
{
	json_t *steps = json_array();
	for (size_t i = 0; i < ro->nsteps; i++)
		json_array_append_new(steps, json_integer(ro->steps[i]));
	json_t *last = json_pack(
	    "{s:o,s:o}", "stable", window_json(&ro->last[0], ro->last_err[0], ro->last_p99[0]),
	    "canary", window_json(&ro->last[1], ro->last_err[1], ro->last_p99[1]));
	json_t *cur = json_pack("{s:o,s:o}", "stable",
	                        window_json(&ro->cur[0], sc_window_err(&ro->cur[0]), 0), "canary",
	                        window_json(&ro->cur[1], sc_window_err(&ro->cur[1]), 0));
	json_t *step = json_pack("{s:I,s:I}", "requests", (json_int_t)ro->step_req, "errors",
	                         (json_int_t)ro->step_err);
	return json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:o,s:f,s:f,s:I,s:f,s:I,s:s,s:o,s:o,s:o}",
	                 "model", ro->model, "stable", ro->stable, "canary", ro->canary, "state",
	                 state_names[ro->state], "step", (int)ro->step, "weight", ro->weight,
	                 "steps", steps, "analysisWindowSeconds", (double)ro->window_ms / 1000.0,
	                 "maxErrorRate", ro->max_error_rate, "minRequests",
	                 (json_int_t)ro->min_requests, "earlyRollbackConfidence", ro->confidence,
	                 "windows", (json_int_t)ro->windows, "reason", ro->reason, "lastWindow",
	                 last, "currentWindow", cur, "stepEvidence", step);
}

void sc__gw_rollout_stop_all(sc_gw_t *gw)
{
	for (size_t i = 0; i < GW_MAX_ROLLOUTS; i++)
		if (gw->ro[i].used)
			uv_close((uv_handle_t *)&gw->ro[i].timer, NULL);
}
