/* The route wrapper every handler of the worker is registered through,
 * and fault injection for model requests (worker_int.h, "route.c"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "worker/worker_int.h"

#define MAX_WROUTES 32

typedef struct wroute {
	sc_worker_t *w;
	sc_whandler_fn fn;
	int exact; /* the path must equal the prefix */
	char prefix[64];
} wroute_t;

static wroute_t wroutes[MAX_WROUTES];
static size_t nwroutes;

static void on_route(sc_http_req_t *r, void *ud)
{
	wroute_t *rt = ud;
	/* A hung worker reads requests and never answers: what a wedged
	 * process looks like from outside. */
	if (rt->w->hung)
		return;
	if (rt->exact && strcmp(sc_http_path(r), rt->prefix) != 0) {
		wreq_t q;
		sc__wreq_begin(&q, rt->w, r);
		return sc__reply_error(&q, 404, "path", "no such path");
	}
	wreq_t q;
	sc__wreq_begin(&q, rt->w, r);
	rt->fn(&q);
}

void sc__worker_route(sc_worker_t *w, const char *method, const char *prefix, sc_whandler_fn fn)
{
	if (nwroutes == MAX_WROUTES)
		abort(); /* a programming error: the table is sized for our routes */
	wroute_t *rt = &wroutes[nwroutes++];
	rt->w = w;
	rt->fn = fn;
	size_t n = strlen(prefix);
	rt->exact = n > 1 && prefix[n - 1] != '/';
	snprintf(rt->prefix, sizeof(rt->prefix), "%s", prefix);
	if (sc_http_route(w->http, method, prefix, on_route, rt) < 0)
		abort();
}

/* ---------------------------------------------------------------------
 * Faults
 * ------------------------------------------------------------------- */

static double fault_draw(sc_worker_t *w)
{
	w->fault_rng ^= w->fault_rng << 13;
	w->fault_rng ^= w->fault_rng >> 7;
	w->fault_rng ^= w->fault_rng << 17;
	return (double)(w->fault_rng >> 11) / (double)(1ull << 53);
}

int sc__worker_faults(wreq_t *q)
{
	sc_worker_t *w = q->w;
	q->model_req = 1;
	w->model_requests++;
	if (w->hang_after > 0 && w->model_requests > w->hang_after) {
		sc_log_warn("--hang-after %ld reached, no more answers", w->hang_after);
		w->hung = 1;
		w->c.faults_injected++;
		return 1;
	}
	if (w->fail_rate > 0 && fault_draw(w) < w->fail_rate) {
		w->c.faults_injected++;
		sc__reply_error(q, 500, NULL, "injected failure (--fail-rate)");
		return 1;
	}
	return 0;
}
