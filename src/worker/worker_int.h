/* Internals shared by the worker's files: the daemon state, the request
 * context every handler works through, and the generation job.
 *
 *   worker.c   flags, routes, health, metrics, counters, fault injection
 *   wreq.c     request context: replies, errors, traceparent, OTLP spans
 *   gen.c      generation jobs (prefill, token steps, SSE and JSON output)
 *   api.c      OpenAI and KServe v2 handlers (parsing and validation)
 *   disagg.c   /v1/prefill, /v1/kv/... and /v1/decode
 *   model.c, tokenizer.c, kvstore.c   pure modules (unit-tested) */
#ifndef SC_WORKER_INT_H
#define SC_WORKER_INT_H

#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "net/http.h"
#include "net/httpc.h"
#include "worker/kvstore.h"
#include "worker/model.h"
#include "worker/stop.h"
#include "worker/tokenizer.h"

enum { ROLE_PREFILL = 1, ROLE_DECODE = 2, ROLE_BOTH = 3 };
enum { FMT_COMPLETION, FMT_CHAT, FMT_KSERVE, FMT_PREFILL };

#define SC_WORKER_MAX_BODY (1u << 20)
#define SC_WORKER_MAX_OTLP_INFLIGHT 32

typedef struct sc_counters {
	uint64_t requests_received, prefills, prefill_tokens, decode_requests, decode_steps;
	uint64_t tokens_generated, kv_created, kv_expired, kv_fetches_served, kv_bytes_served;
	uint64_t kv_pulls, kv_pull_failures, faults_injected, spans_exported, spans_dropped;
	uint64_t by_code[600];
} sc_counters_t;

typedef struct sc_worker {
	uv_loop_t *loop;
	sc_http_server_t *http;
	sc_httpc_t *httpc; /* KV pulls and OTLP exports, on the loop */
	sc_model_t *model;
	sc_tokenizer_t *tok;
	sc_kvstore_t *kv;
	char model_name[128], version[32], id[160], host[64];
	int port, role, max_tokens_cap;
	/* Fault injection (0 = off). */
	long crash_after, hang_after, latency_ms, fail_decode_after;
	double fail_rate;
	uint64_t fault_rng;
	long model_requests;
	int hung;
	char otlp_url[512];
	int otlp_inflight;
	uv_timer_t sweep_timer, exit_timer;
	sc_counters_t c;
} sc_worker_t;

/* One request as the worker sees it: the HTTP request (NULL once the
 * client went away) and its span. */
typedef struct wreq {
	sc_worker_t *w;
	sc_http_req_t *req;
	uint64_t start_ns, start_unix_ns;
	char trace_id[33], span_id[17], parent_id[17];
	char name[64];
	int kserve_errors; /* {"error": "msg"} instead of the OpenAI shape */
	int model_req;     /* counts for --crash-after when it ends */
	int ended;
} wreq_t;

/* ---- wreq.c ---- */
/* Fills q for r: trace context from traceparent, replica header. */
void sc__wreq_begin(wreq_t *q, sc_worker_t *w, sc_http_req_t *r);
/* Answers with obj (taken) and ends the span. */
void sc__reply_json(wreq_t *q, int status, json_t *obj);
void sc__reply_raw(wreq_t *q, int status, const char *ctype, const void *body, size_t len);
/* Answers an error naming field (may be NULL) and ends the span. */
void sc__reply_error(wreq_t *q, int status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Ends the span (log line, OTLP export) without answering. */
void sc__span_end(wreq_t *q, int status);
/* Wall clock and monotonic milliseconds. */
uint64_t sc__now_ms(void);

/* ---- worker.c ---- */
/* Applies the fault flags to a model request. Returns 1 when the request
 * was consumed (hang, injected 500), 0 to go on. */
int sc__worker_faults(wreq_t *q);
/* Counts a finished model request (for --crash-after). */
void sc__worker_request_done(sc_worker_t *w);
/* Routes, observer and timers of a worker whose http server exists. */
void sc__worker_serve_init(sc_worker_t *w);

/* ---- gen.c ---- */
typedef struct gen_params {
	int fmt, stream, max_tokens;
	float temperature;
	float top_p;      /* nucleus; 1 = the whole vocabulary */
	sc_stops_t stops; /* "stop" sequences */
	uint64_t seed;
	int want_text, want_ids; /* KServe requested outputs */
	char req_id[128];        /* KServe "id" */
} gen_params_t;

typedef struct sc_gen sc_gen_t;
/* Starts generation for a prompt of n ids (copied): after the latency
 * delay, prefill, then one token per loop turn. q is copied. */
void sc__gen_prompt(const wreq_t *q, const gen_params_t *p, const int *ids, int n);
/* Starts a decode job: fetches kv_url (net/httpc, on the loop), then continues
 * from first_token, feeding forced (copied, n_forced ids, which start with
 * first_token) without emitting them. */
void sc__gen_decode(const wreq_t *q, const gen_params_t *p, const char *kv_url, int first_token,
                    const int *forced, int n_forced);

/* ---- disagg.c ---- */
/* Stores the first n tokens of s's cache as a KV handle and answers the
 * prefill request. */
void sc__prefill_reply(wreq_t *q, sc_session_t *s, int n, int first_token);

/* ---- handlers ---- */
typedef void (*sc_whandler_fn)(wreq_t *q);
/* Adds a route whose handler gets a ready request context (and nothing at
 * all once the worker hangs, --hang-after). */
void sc__worker_route(sc_worker_t *w, const char *method, const char *prefix, sc_whandler_fn fn);
/* 404 naming "role" unless the worker's role includes need. */
int sc__need_role(wreq_t *q, int need);
/* 404 naming "model" unless name (may be "name:version") is ours. */
int sc__check_model(wreq_t *q, const char *name);
void sc__api_routes(sc_worker_t *w);
void sc__disagg_routes(sc_worker_t *w);
/* Reads a JSON object body; answers 400 and returns NULL when it is not. */
json_t *sc__body_json(wreq_t *q);
/* Reads a JSON object body and allocates room for n token ids (the caller
 * frees both). On failure answers (400 for the body, 503 when out of
 * memory), leaves nothing to free and returns -1. */
int sc__body_and_ids(wreq_t *q, int n, json_t **body, int **ids);
/* Tokenizes a prompt (or the chat messages) into ids; answers 400 naming
 * the field on failure and returns a negative count. */
int sc__prompt_ids(wreq_t *q, json_t *body, int *ids, int max);
/* Reads stream/max_tokens/temperature/seed into p; 400 on a bad value. */
int sc__gen_params(wreq_t *q, json_t *obj, gen_params_t *p);

#endif
