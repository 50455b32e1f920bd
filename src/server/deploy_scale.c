/* Replica autoscaling of Deployments (docs/AUTOSCALING.md, deploy.h).
 *
 * Gateways report, about once a second per autoscaled Deployment, the load
 * they see for its model (POST /api/v1/deployments/{name}/autoscale/report,
 * rollout.c): requests in flight at its replicas, requests held waiting for
 * a replica (a parked Deployment's first requests), replicas busy, the
 * interval's requests and its time-to-first-token p95. This file keeps the
 * latest report of each gateway in memory (the leader's: a report is a
 * figure of the moment, not state worth a write) and turns them into a
 * replica count:
 *   inflightPerReplica T  ceil((in flight + held) / T)  (Knative's concurrency)
 *   queueDepth T          busy replicas + ceil(held / T): grows while
 *                         requests wait, holds while replicas are busy
 *   ttftP95 T             current * p95 / T when it is more than 10 % off
 *                         (the HPA's proportional rule and tolerance)
 * and for the roles of a disaggregated Deployment, each on its own report
 * (the gateway's per-role figures) and its own limits and window:
 *   promptTokensPerReplica T     prefill: ceil(prompt tokens waiting or in
 *                                prefill / T) (Dynamo's prefill queue)
 *   tokensPerSecondPerReplica T  decode: ceil(generated tokens/s / T)
 *   inflightPerReplica T         either: ceil(requests in that phase / T)
 *   ttftP95 T                    prefill: as above
 * clamped to [minReplicas, maxReplicas]; a Deployment with nothing in flight,
 * held or requested wants minReplicas (0 parks it), and anything held wants
 * at least one replica (activation). A higher count applies at once; a
 * lower one only once every recommendation of the last
 * scaleDownStabilization was at most that (the HPA's scale-down window), so
 * a dip does not cost a replica that the next burst needs. A server that
 * just became leader has no history: it scales down only after one window.
 * Reports older than STALE_S are ignored (a gateway that stopped). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "server/deploy.h"
#include "starcloud/manifest.h"

#define STALE_S 5
#define MAX_GATEWAYS 64  /* reports kept per Deployment */
#define MAX_HISTORY 3600 /* recommendations kept per Deployment */
#define FORGET_S 3600    /* a Deployment not reported or decided for an hour */
#define TTFT_TOLERANCE 0.1

typedef struct gw_report {
	char id[SC_SCALE_GATEWAY_MAX + 1];
	int64_t at;
	sc_scale_signal_t sig;
} gw_report_t;

typedef struct rec {
	int64_t at;
	int desired;
} rec_t;

typedef struct dep_state {
	char name[SC_MAX_NAME + 16]; /* the key: "name" or "name/ROLE" */
	gw_report_t gw[MAX_GATEWAYS];
	size_t ngw;
	rec_t *hist; /* ring of recommendations, oldest first */
	size_t nhist;
	int64_t since; /* first seen by this server */
	int64_t touched;
	struct dep_state *next;
} dep_state_t;

struct sc_scaler {
	dep_state_t *deps;
	unsigned long long up, down;
};

static sc_scaler_t *scaler(sc_server_t *s)
{
	if (!s->scaler)
		s->scaler = sc_xcalloc(1, sizeof(sc_scaler_t));
	return s->scaler;
}

static dep_state_t *dep_of(sc_scaler_t *sc, const char *name, int64_t now)
{
	for (dep_state_t *d = sc->deps; d; d = d->next)
		if (strcmp(d->name, name) == 0)
			return d;
	dep_state_t *d = sc_xcalloc(1, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->since = d->touched = now;
	d->next = sc->deps;
	sc->deps = d;
	return d;
}

void sc__scale_report(sc_server_t *s, const char *dep, const char *gateway,
                      const sc_scale_signal_t *sig, int64_t now)
{
	dep_state_t *d = dep_of(scaler(s), dep, now);
	gw_report_t *g = NULL;
	size_t oldest = 0;
	for (size_t i = 0; i < d->ngw; i++) {
		if (strcmp(d->gw[i].id, gateway) == 0)
			g = &d->gw[i];
		if (d->gw[i].at < d->gw[oldest].at)
			oldest = i;
	}
	if (!g)
		g = d->ngw < MAX_GATEWAYS ? &d->gw[d->ngw++] : &d->gw[oldest];
	snprintf(g->id, sizeof(g->id), "%s", gateway);
	g->at = now;
	g->sig = *sig;
	d->touched = now;
}

/* The fresh reports of d added up (ttft: the worst gateway's). */
static bool signal_of(const dep_state_t *d, int64_t now, sc_scale_signal_t *out)
{
	bool any = false;
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < d->ngw; i++) {
		const gw_report_t *g = &d->gw[i];
		if (now - g->at > STALE_S)
			continue;
		any = true;
		out->inflight += g->sig.inflight;
		out->queued += g->sig.queued;
		out->busy += g->sig.busy;
		out->requests += g->sig.requests;
		out->ttft_p95 = g->sig.ttft_p95 > out->ttft_p95 ? g->sig.ttft_p95 : out->ttft_p95;
		out->prompt_tokens += g->sig.prompt_tokens;
		out->tps += g->sig.tps;
	}
	return any;
}

static int clamp(long v, const sc_autoscaling_t *as)
{
	if (v < as->min_replicas)
		v = as->min_replicas;
	if (v > as->max_replicas)
		v = as->max_replicas;
	return (int)v;
}

/* The count the signal asks for, before the stabilization window. */
static int recommend(const sc_autoscaling_t *as, const sc_scale_signal_t *g, int current)
{
	long want;
	if (g->inflight == 0 && g->queued == 0 && g->requests == 0 && g->prompt_tokens == 0 &&
	    g->tps <= 0)
		return clamp(0, as); /* idle: the minimum (0 parks it) */
	switch (as->target) {
	case SC_AS_INFLIGHT:
		want = (long)ceil((double)(g->inflight + g->queued) / as->value);
		break;
	case SC_AS_PROMPT_TOKENS:
		want = (long)ceil((double)g->prompt_tokens / as->value);
		break;
	case SC_AS_TPS:
		/* 1e-9: a rate of exactly k * T wants k replicas, not k + 1. */
		want = (long)ceil(g->tps / as->value - 1e-9);
		break;
	case SC_AS_QUEUE:
		want = g->busy + (long)ceil((double)g->queued / as->value);
		break;
	default: /* SC_AS_TTFT */
		want = current;
		if (current > 0 && g->ttft_p95 > 0 &&
		    fabs(g->ttft_p95 / as->value - 1.0) > TTFT_TOLERANCE)
			want = (long)ceil((double)current * g->ttft_p95 / as->value);
		break;
	}
	if (g->queued > 0 && want < 1)
		want = 1; /* a held request activates a parked Deployment */
	return clamp(want, as);
}

static void remember(dep_state_t *d, int64_t now, int desired, int64_t window)
{
	size_t keep = 0;
	while (keep < d->nhist && d->hist[keep].at < now - window)
		keep++;
	if (keep) {
		memmove(d->hist, d->hist + keep, (d->nhist - keep) * sizeof(rec_t));
		d->nhist -= keep;
	}
	if (d->nhist && d->hist[d->nhist - 1].at == now) {
		/* One entry a second: the highest of that second. */
		rec_t *last = &d->hist[d->nhist - 1];
		last->desired = desired > last->desired ? desired : last->desired;
		return;
	}
	if (d->nhist == MAX_HISTORY) {
		memmove(d->hist, d->hist + 1, (d->nhist - 1) * sizeof(rec_t));
		d->nhist--;
	}
	if (!d->hist)
		d->hist = sc_xcalloc(MAX_HISTORY, sizeof(rec_t));
	d->hist[d->nhist++] = (rec_t){now, desired};
}

int sc__scale_decide(sc_server_t *s, const char *dep, const sc_autoscaling_t *as, int current,
                     int64_t now, sc_scale_signal_t *sig, char *why, size_t whysz)
{
	dep_state_t *d = dep_of(scaler(s), dep, now);
	int desired = signal_of(d, now, sig) ? recommend(as, sig, current) : -1;
	d->touched = now;
	why[0] = '\0';
	if (desired < 0) {
		/* No gateway reports: keep the count (within the limits). */
		return clamp(current, as);
	}
	remember(d, now, desired, as->stabilization);
	if (desired >= current) {
		if (desired > current && as->target == SC_AS_PROMPT_TOKENS)
			snprintf(why, whysz, "prompt tokens %lld (in flight %lld), TTFT p95 %.3f s",
			         (long long)sig->prompt_tokens, (long long)sig->inflight,
			         sig->ttft_p95);
		else if (desired > current && as->target == SC_AS_TPS)
			snprintf(why, whysz, "%.1f tokens/s (streams %lld, busy %lld)", sig->tps,
			         (long long)sig->inflight, (long long)sig->busy);
		else if (desired > current)
			snprintf(why, whysz,
			         "in flight %lld, held %lld, busy %lld, TTFT p95 %.3f s",
			         (long long)sig->inflight, (long long)sig->queued,
			         (long long)sig->busy, sig->ttft_p95);
		return desired;
	}
	/* Lower: the highest recommendation of the window holds, and a
	 * server new to the Deployment waits one window first. */
	if (now - d->since < as->stabilization)
		return current;
	int hold = desired;
	for (size_t i = 0; i < d->nhist; i++)
		hold = d->hist[i].desired > hold ? d->hist[i].desired : hold;
	if (hold >= current)
		return current;
	snprintf(why, whysz, "at most %d wanted over the last %lld s (in flight %lld, held %lld)",
	         hold, (long long)as->stabilization, (long long)sig->inflight,
	         (long long)sig->queued);
	return hold;
}

void sc__scale_count(sc_server_t *s, bool up)
{
	if (up)
		scaler(s)->up++;
	else
		scaler(s)->down++;
}

void sc__scale_sweep(sc_server_t *s, int64_t now)
{
	sc_scaler_t *sc = scaler(s);
	for (dep_state_t **p = &sc->deps; *p;) {
		dep_state_t *d = *p;
		if (now - d->touched > FORGET_S) {
			*p = d->next;
			free(d->hist);
			free(d);
		} else {
			p = &d->next;
		}
	}
}

void sc__scale_metrics(sc_server_t *s, sc_buf_t *b)
{
	sc_scaler_t *sc = scaler(s);
	sc_buf_printf(b,
	              "# HELP starcloud_deployment_scale_decisions_total Replica count changes "
	              "made by the autoscaler of Deployments.\n"
	              "# TYPE starcloud_deployment_scale_decisions_total counter\n"
	              "starcloud_deployment_scale_decisions_total{direction=\"up\"} %llu\n"
	              "starcloud_deployment_scale_decisions_total{direction=\"down\"} %llu\n",
	              sc->up, sc->down);
}

void sc__scale_free(sc_server_t *s)
{
	sc_scaler_t *sc = s->scaler;
	if (!sc)
		return;
	while (sc->deps) {
		dep_state_t *d = sc->deps;
		sc->deps = d->next;
		free(d->hist);
		free(d);
	}
	free(sc);
	s->scaler = NULL;
}
