/* The worker's HTTP side apart from the model APIs: /metrics,
 * /debug/counters, the 404 catch-all, every module's routes, and the timer
 * that expires KV leases (the route wrapper and fault injection are
 * route.c's; --crash-after is carried out by wreq.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starcloud/buf.h"
#include "base/log.h"
#include "starcloud/error.h"
#include "net/promtext.h"
#include "net/tlsreload.h"
#include "worker/worker.h"
#include "worker/worker_int.h"

/* ---------------------------------------------------------------------
 * Metrics and counters
 * ------------------------------------------------------------------- */

typedef struct counter_def {
	const char *name, *help;
	size_t off;
} counter_def_t;

#define C(field, help)                                                                             \
	{                                                                                          \
#field, help, offsetof(sc_counters_t, field)                                       \
	}
static const counter_def_t counter_defs[] = {
    C(requests_received, "requests received (routed to a handler)"),
    C(prefills, "prompt prefills computed"),
    C(prefill_tokens, "prompt tokens prefilled"),
    C(decode_requests, "decode requests (prefilled elsewhere)"),
    C(decode_steps, "forward passes after the prompt"),
    C(tokens_generated, "tokens generated and sent"),
    C(kv_created, "KV handles created"),
    C(kv_expired, "KV handles freed by lease expiry"),
    C(kv_fetches_served, "KV blocks served to decode workers"),
    C(kv_bytes_served, "KV bytes served"),
    C(kv_pulls, "KV blocks pulled from prefill workers"),
    C(kv_pull_failures, "failed KV pulls"),
    C(faults_injected, "faults injected by the fault flags"),
    C(spans_exported, "spans exported to OTLP"),
    C(spans_dropped, "spans not exported"),
    C(batch_steps, "batched forward steps"),
    C(batch_items, "token positions computed in batched steps"),
    C(cancelled, "requests cancelled because their client went away"),
    C(embeddings, "embedding inputs computed"),
    C(queue_full, "requests refused because the queue was full"),
};
#undef C
#define NCOUNTERS (sizeof(counter_defs) / sizeof(counter_defs[0]))

static uint64_t counter(const sc_worker_t *w, size_t i)
{
	return *(const uint64_t *)((const char *)&w->c + counter_defs[i].off);
}

/* Sequences waiting and running, and KV cache bytes, over every model. */
static void batch_load(const sc_worker_t *w, int *waiting, int *running, size_t *kv)
{
	*waiting = *running = 0;
	*kv = 0;
	for (const sc_wmodel_t *m = w->models; m; m = m->next) {
		int wt, rn;
		sc__batcher_load(m->batch, &wt, &rn);
		*waiting += wt;
		*running += rn;
		*kv += sc__batcher_kv_bytes(m->batch);
	}
}

static void h_metrics(wreq_t *q)
{
	sc_worker_t *w = q->w;
	sc_buf_t b;
	sc_buf_init(&b, 0);
	sc_buf_puts(&b,
	            "# HELP starcloud_worker_requests_total Requests answered, by status code.\n"
	            "# TYPE starcloud_worker_requests_total counter\n");
	for (int code = 100; code < 600; code++)
		if (w->c.by_code[code])
			sc_buf_printf(&b, "starcloud_worker_requests_total{code=\"%d\"} %llu\n",
			              code, (unsigned long long)w->c.by_code[code]);
	for (size_t i = 0; i < NCOUNTERS; i++)
		sc_buf_printf(&b,
		              "# HELP starcloud_worker_%s_total %s.\n"
		              "# TYPE starcloud_worker_%s_total counter\n"
		              "starcloud_worker_%s_total %llu\n",
		              counter_defs[i].name, counter_defs[i].help, counter_defs[i].name,
		              counter_defs[i].name, (unsigned long long)counter(w, i));
	int waiting, running;
	size_t kv;
	batch_load(w, &waiting, &running, &kv);
	sc_buf_printf(&b,
	              "# HELP starcloud_worker_kv_handles_live KV handles held under a lease.\n"
	              "# TYPE starcloud_worker_kv_handles_live gauge\n"
	              "starcloud_worker_kv_handles_live %zu\n"
	              "# HELP starcloud_worker_sequences_running Sequences in the batch.\n"
	              "# TYPE starcloud_worker_sequences_running gauge\n"
	              "starcloud_worker_sequences_running %d\n"
	              "# HELP starcloud_worker_sequences_waiting Sequences waiting for room.\n"
	              "# TYPE starcloud_worker_sequences_waiting gauge\n"
	              "starcloud_worker_sequences_waiting %d\n"
	              "# HELP starcloud_worker_kv_cache_bytes Bytes of KV caches held by running "
	              "sequences.\n"
	              "# TYPE starcloud_worker_kv_cache_bytes gauge\n"
	              "starcloud_worker_kv_cache_bytes %zu\n",
	              sc_kvstore_live(w->kv), running, waiting, kv);
	sc_prom_build_info(&b, "worker", "");
	sc_prom_process(&b);
	sc_tls_reload_metrics(&b);
	sc__reply_raw(q, 200, "text/plain; version=0.0.4", b.data, b.len);
	sc_buf_free(&b);
}

static void h_counters(wreq_t *q)
{
	sc_worker_t *w = q->w;
	json_t *o = json_object(), *codes = json_object();
	for (size_t i = 0; i < NCOUNTERS; i++)
		json_object_set_new(o, counter_defs[i].name,
		                    json_integer((json_int_t)counter(w, i)));
	for (int code = 100; code < 600; code++)
		if (w->c.by_code[code]) {
			char k[16];
			snprintf(k, sizeof(k), "%d", code);
			json_object_set_new(codes, k, json_integer((json_int_t)w->c.by_code[code]));
		}
	json_object_set_new(o, "responses_by_code", codes);
	json_object_set_new(o, "kv_handles_live", json_integer((json_int_t)sc_kvstore_live(w->kv)));
	json_object_set_new(o, "model_requests", json_integer(w->model_requests));
	int waiting, running;
	size_t kv;
	batch_load(w, &waiting, &running, &kv);
	json_object_set_new(o, "sequences_running", json_integer(running));
	json_object_set_new(o, "sequences_waiting", json_integer(waiting));
	json_object_set_new(o, "kv_cache_bytes", json_integer((json_int_t)kv));
	json_object_set_new(o, "role",
	                    json_string(w->role == ROLE_BOTH      ? "both"
	                                : w->role == ROLE_PREFILL ? "prefill"
	                                                          : "decode"));
	sc__reply_json(q, 200, o);
}

static void h_notfound(wreq_t *q)
{
	sc__reply_error(q, 404, "path", "no such path");
}

static void h_healthz(wreq_t *q)
{
	sc__reply_raw(q, 200, "text/plain", "ok\n", 3);
}

static void observe(const char *method, const char *route, int status, double secs, void *ud)
{
	sc_worker_t *w = ud;
	if (status >= 100 && status < 600)
		w->c.by_code[status]++;
}

static void on_sweep(uv_timer_t *t)
{
	sc_worker_t *w = t->data;
	w->c.kv_expired += (uint64_t)sc_kvstore_sweep(w->kv, sc__now_ms());
	sc__repo_sweep(w);
}

void sc__worker_serve_init(sc_worker_t *w)
{
	sc_http_set_observer(w->http, observe, w);
	sc__worker_route(w, NULL, "/", h_notfound);
	sc__worker_route(w, "GET", "/metrics", h_metrics);
	sc__worker_route(w, "GET", "/debug/counters", h_counters);
	sc__worker_route(w, "GET", "/healthz", h_healthz);
	sc__openai_routes(w);
	sc__repo_routes(w);
	sc__kserve_routes(w);
	sc__disagg_routes(w);
	uv_timer_init(w->loop, &w->sweep_timer);
	uv_timer_init(w->loop, &w->exit_timer);
	w->sweep_timer.data = w->exit_timer.data = w;
	uv_timer_start(&w->sweep_timer, on_sweep, 250, 250);
}
