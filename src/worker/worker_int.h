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
#include "net/hfetch.h"
#include "worker/kvstore.h"
#include "worker/forward.h"
#include "worker/model.h"
#include "worker/stop.h"
#include "worker/tokenizer.h"

enum { ROLE_PREFILL = 1, ROLE_DECODE = 2, ROLE_BOTH = 3 };
/* What a generation answers: OpenAI completion or chat, KServe infer or
 * generate, a prefill's KV handle, or embeddings. */
enum { FMT_COMPLETION, FMT_CHAT, FMT_KSERVE, FMT_PREFILL, FMT_EMBED, FMT_GENERATE };

#define SC_WORKER_MAX_BODY (1u << 20)
#define SC_WORKER_MAX_OTLP_INFLIGHT 32
#define SC_WORKER_MAX_CHOICES 16 /* n */
#define SC_WORKER_MAX_PROMPTS 64 /* prompts (or KServe batch) per request */
#define SC_WORKER_MAX_SEQS 128   /* sequences per request: prompts x n */
#define SC_WORKER_MAX_TOP_LOGPROBS 20

typedef struct sc_counters {
	uint64_t requests_received, prefills, prefill_tokens, decode_requests, decode_steps;
	uint64_t tokens_generated, kv_created, kv_expired, kv_fetches_served, kv_bytes_served;
	uint64_t kv_pulls, kv_pull_failures, faults_injected, spans_exported, spans_dropped;
	uint64_t batch_steps, batch_items, cancelled, embeddings, queue_full;
	uint64_t by_code[600];
} sc_counters_t;

typedef struct sc_batcher sc_batcher_t;

/* A served model: one version of one model, its weights, tokenizer and
 * batcher. Requests hold a reference, so an unloaded model lives until the
 * last of them is done. */
typedef struct sc_wmodel {
	char name[128], version[32];
	sc_model_t *model;
	sc_tokenizer_t *tok;
	sc_batcher_t *batch;
	int max_tokens_cap;        /* min(--max-tokens, seq_len) */
	int refs;                  /* requests using it, plus one while it is listed */
	int served;                /* found by requests; 0 once unloaded (freed when idle) */
	int64_t ck_size, ck_mtime; /* the checkpoint file it was loaded from (repository) */
	struct sc_wmodel *next;
} sc_wmodel_t;

typedef struct sc_worker {
	uv_loop_t *loop;
	sc_http_server_t *http;
	sc_tls_ctx_t *tls;        /* the listener's, or NULL */
	sc_hcli_t *hcli;          /* KV pulls and OTLP exports, on the loop */
	sc_tls_ctx_t *tls_client; /* their https: --ca, or the system's CAs */
	sc_wmodel_t *models;      /* served models (one without --model-repository) and unloaded
     ones still finishing requests */
	char repo_dir[1024];      /* --model-repository, or "" */
	json_t *repo_errors;      /* model -> why its last load failed */
	sc_kvstore_t *kv;
	char id[160], host[64];
	int port, role, max_tokens;
	int max_batch, max_batch_tokens, max_queue; /* continuous batching */
	/* Fault injection (0 = off). */
	long crash_after, hang_after, latency_ms, fail_decode_after;
	double fail_rate;
	uint64_t fault_rng;
	long model_requests;
	int hung;
	char otlp_url[512];
	int otlp_inflight;
	uv_timer_t sweep_timer, exit_timer;
	uv_idle_t step_idle; /* runs batch steps while any model has work */
	sc_counters_t c;
} sc_worker_t;

/* One request as the worker sees it: the HTTP request (NULL once the
 * client went away), the model it is for, and its span. */
typedef struct wreq {
	sc_worker_t *w;
	sc_http_req_t *req;
	sc_wmodel_t *m; /* the model (a reference is held by a generation) */
	uint64_t start_ns, start_unix_ns;
	char trace_id[33], span_id[17], parent_id[17];
	char name[300];                      /* span name: "POST /v1/completions" (net/otel.h) */
	char route[256];                     /* the route template */
	int probe;                           /* a health check or scrape: no span */
	char method[12], path[256], ua[128]; /* of the request, kept for the span */
	int err_shape; /* ERR_OPENAI (default) or ERR_KSERVE: {"error": "msg"} */
	int model_req; /* counts for --crash-after when it ends */
	int ended;
} wreq_t;

enum { ERR_OPENAI, ERR_KSERVE };

/* ---- wreq.c ---- */
/* Fills q for r: trace context from traceparent, replica header. */
void sc__wreq_begin(wreq_t *q, sc_worker_t *w, sc_http_req_t *r);
/* Answers with obj (taken) and ends the span. */
void sc__reply_json(wreq_t *q, int status, json_t *obj);
void sc__reply_raw(wreq_t *q, int status, const char *ctype, const void *body, size_t len);
/* Answers an error naming field (may be NULL) and ends the span: OpenAI's
 * {"error": {"message", "type", "param", "code"}}, or KServe's
 * {"error": "message"} on KServe routes. */
void sc__reply_error(wreq_t *q, int status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Ends the span (log line, OTLP export) without answering. */
void sc__span_end(wreq_t *q, int status);
/* Wall clock and monotonic milliseconds. */
uint64_t sc__now_ms(void);

/* ---- route.c (faults), wreq.c (--crash-after), serve.c (init) ---- */
/* Applies the fault flags to a model request. Returns 1 when the request
 * was consumed (hang, injected 500), 0 to go on. */
int sc__worker_faults(wreq_t *q);
/* Routes, observer and timers of a worker whose http server exists. */
void sc__worker_serve_init(sc_worker_t *w);
/* ---- wmodel.c ---- */
/* The served model called name ("name" or "name:version"; NULL or "" = the
 * only one), with version (NULL = any, the newest); NULL when none. */
sc_wmodel_t *sc__worker_model(sc_worker_t *w, const char *name, const char *version);
/* Loads a model as name:version from a checkpoint file (or, with ckpt
 * NULL, a generated one from gen) and a tokenizer file (NULL: byte-level);
 * max_batch > 0 caps its batch below --max-batch. The model is not listed
 * (the caller adds it). A message goes to err on failure. */
int sc__wmodel_load(sc_worker_t *w, const char *name, const char *version, const char *ckpt,
                    const char *tokenizer, const sc_model_gen_t *gen, int max_batch,
                    sc_wmodel_t **out, char *err, size_t errsz);
/* Drops a reference; the last frees the model (its batcher is idle then). */
void sc__wmodel_unref(sc_wmodel_t *m);

/* ---- repo.c: the Triton model repository ---- */
/* Opens --model-repository dir: loads every model, or in explicit mode
 * only those named in load. 0, or an error in err (the worker exits 2). */
int sc__repo_open(sc_worker_t *w, const char *dir, int explicit_mode, const char *const *load,
                  size_t nload, char *err, size_t errsz);
/* Frees unloaded models whose last request is done. */
void sc__repo_sweep(sc_worker_t *w);
void sc__repo_routes(sc_worker_t *w);

/* ---- gen.c: generation requests ---- */
typedef struct gen_params {
	int fmt, stream, max_tokens;
	float temperature;
	float top_p;      /* nucleus; 1 = the whole vocabulary */
	sc_stops_t stops; /* "stop" sequences */
	uint64_t seed;
	int n;                   /* choices per prompt (OpenAI n) */
	int logprobs;            /* top alternatives per token, -1 = no logprobs */
	int include_usage;       /* stream_options.include_usage */
	int embed_dims;          /* embeddings: dimensions (0 = the model's) */
	int embed_base64;        /* embeddings: encoding_format base64 */
	int want_text, want_ids; /* KServe requested outputs */
	int binary_out;          /* KServe binary tensor extension: 1 text_output, 2 output_ids */
	int kserve_batch;        /* KServe: the input had a batch dimension */
	char req_id[128];        /* KServe "id" */
} gen_params_t;

/* The prompts of a request: ids of prompt i are ids[off[i] .. off[i+1]). */
typedef struct gen_prompts {
	int *ids;
	int off[SC_WORKER_MAX_PROMPTS + 1];
	int n;
} gen_prompts_t;

/* Starts a generation on q->m for the prompts (taken: freed by the call),
 * n choices each. forced (copied, may be NULL) are token ids the client
 * already has (a resumed stream, single choice only): they are fed without
 * being sent again. Answers errors itself. */
void sc__gen_start(const wreq_t *q, const gen_params_t *p, gen_prompts_t *pr, const int *forced,
                   int n_forced);
/* Starts a decode job: fetches kv_url (net/hfetch.h, on the loop), then continues
 * from first_token, feeding forced (copied, n_forced ids, which start with
 * first_token) without emitting them. first_lp (borrowed, may be NULL) is
 * the prefill's logprobs of first_token. */
void sc__gen_decode(const wreq_t *q, const gen_params_t *p, const char *kv_url, int first_token,
                    const int *forced, int n_forced, json_t *first_lp);

/* ---- batch.c: continuous batching ---- */
/* A batcher for m (borrowed): at most max_seqs sequences at once, at most
 * max_tokens token positions per forward step. */
sc_batcher_t *sc__batcher_new(sc_worker_t *w, sc_wmodel_t *m, int max_seqs, int max_tokens);
void sc__batcher_free(sc_batcher_t *b);
/* Sequences waiting and running (for metrics). */
void sc__batcher_load(const sc_batcher_t *b, int *waiting, int *running);
/* Bytes of KV caches held by running sequences. */
size_t sc__batcher_kv_bytes(const sc_batcher_t *b);

/* ---- kvblock.c ---- */
/* Stores the first n tokens of s's cache as a KV handle and answers the
 * prefill request; lp (taken, may be NULL) is first_token's logprobs. */
void sc__prefill_reply(wreq_t *q, sc_session_t *s, int n, int first_token, json_t *lp);

/* ---- handlers ---- */
typedef void (*sc_whandler_fn)(wreq_t *q);
/* Adds a route whose handler gets a ready request context (and nothing at
 * all once the worker hangs, --hang-after). */
void sc__worker_route(sc_worker_t *w, const char *method, const char *prefix, sc_whandler_fn fn);
/* 404 naming "role" unless the worker's role includes need. */
int sc__need_role(wreq_t *q, int need);
/* Sets q->m from a request's "model" (may be NULL: the only model); 404
 * naming "model" when it is not served here. */
int sc__pick_model(wreq_t *q, json_t *model);
void sc__openai_routes(sc_worker_t *w);
void sc__kserve_routes(sc_worker_t *w);
void sc__disagg_routes(sc_worker_t *w);
/* Reads a JSON object body; answers 400 and returns NULL when it is not. */
json_t *sc__body_json(wreq_t *q);
/* Tokenizes text into ids (room for max, BOS first); answers 400 naming
 * field when it is too long. */
int sc__encode_text(wreq_t *q, const char *field, const char *text, size_t len, int *ids, int max);
/* Token ids from a JSON array; answers 400 naming field on failure. */
int sc__ids_from_array(wreq_t *q, json_t *a, const char *field, int *ids, int max);
/* Tokenizes a prompt (or the chat messages) into ids; answers 400 naming
 * the field on failure and returns a negative count. */
int sc__prompt_ids(wreq_t *q, json_t *body, int *ids, int max);
/* The top-level fields each endpoint accepts beside the ones every
 * generation shares (NULL-terminated). */
extern const char *const sc__completion_fields[], *const sc__chat_fields[];
extern const char *const sc__prefill_fields[], *const sc__decode_fields[];
/* 400 naming the first top-level field of obj that is neither in extra nor
 * (when generation) one every generation shares, as OpenAI answers
 * ("Unrecognized request argument supplied"): a field nobody reads is
 * never silently ignored. */
int sc__known_fields(wreq_t *q, json_t *obj, int generation, const char *const *extra);
/* Reads the sampling and length fields into p; 400 on a bad value. */
int sc__gen_params(wreq_t *q, json_t *obj, gen_params_t *p);

#endif
