/* Internal interfaces of the serving gateway (src/gateway).
 *
 * One sc_gw_t per process, on one libuv loop: no locks. Modules:
 *   gateway.c   options, start-up, routes, shutdown
 *   backend.c   the replica table, picking (least outstanding, power of two
 *               choices), passive ejection, active readiness probes
 *   proxy.c     one client request: attempts, retries, streaming, resume
 *   proxy_span.c  the request's server span and its attempts' client spans
 *   pd.c        prefill/decode disaggregation
 *   canary.c    versioned rollouts: weights, analysis windows, rollback
 *   trace.c     W3C traceparent, spans, OTLP/HTTP JSON export
 *   stats.c     per model/version counters and /metrics
 *   control.c   backends and rollouts from the control plane (watch)
 *   admin.c     /v1/models, /v2 health, /admin/rollouts, /healthz */
#ifndef SC_GATEWAY_GW_INT_H
#define SC_GATEWAY_GW_INT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "net/http.h"
#include "net/hclient.h"
#include "starcloud/buf.h"
#include "base/parse.h"
#include "gateway/policy.h"

#define GW_MAX_NAME 128
#define GW_MAX_VERSION 64
#define GW_MAX_URL 256
#define GW_MAX_BACKENDS 1024
#define GW_MAX_ROLLOUTS 64
#define GW_MAX_STEPS 16
#define GW_MAX_STATS 512
#define GW_MAX_TRIED 16
#define GW_MAX_SERVERS 8
#define GW_SERVER_MIN_REQUESTS 20 /* the server's default spec.rollout.minRequests */
#define GW_EARLY_CONFIDENCE 0.99  /* default spec.rollout.earlyRollbackConfidence */

enum { GW_ROLE_BOTH, GW_ROLE_PREFILL, GW_ROLE_DECODE };
/* Why a prefill attempt failed (a retry's reason in /metrics): no answer in
 * --attempt-timeout, a connection error / 5xx / unusable answer, the
 * replica's 429 (its queue is full), or a decode that could not fetch the
 * KV the prefill made. */
enum { GW_PF_TIMEOUT, GW_PF_ERROR, GW_PF_BUSY, GW_PF_KV_LOST, GW_PF_NREASONS };
/* Why a failed prefill was not retried: the request's --max-retries are
 * spent, the retry budget is, every other prefill replica is late or
 * saturated, or there is no other one. */
enum { GW_DENY_ATTEMPTS = 1, GW_DENY_BUDGET, GW_DENY_OVERLOADED, GW_DENY_NO_REPLICA, GW_DENY_N };
/* What a backend speaks: `starcloud worker` (OpenAI with token ids and the
 * resume and P/D extensions, KServe v2), or any OpenAI-compatible server
 * (vLLM, llama.cpp server, ...): completions, chat and embeddings only. */
enum { GW_BK_STARCLOUD, GW_BK_OPENAI };
/* Where a backend came from: a flag or the config file, the control plane,
 * or a replica's model repository index (discover.c). */
enum { GW_SRC_STATIC, GW_SRC_SERVER, GW_SRC_REPO };
#define GW_MAX_REPOS 256

typedef struct gw_stats gw_stats_t;

/* An attempt waiting for a replica's answer, in the replica's list of them
 * (oldest first): how long the oldest has waited says whether the replica
 * is keeping up (prefill admission, sc__gw_pick's max_wait_ms). Embedded in
 * the request that makes the attempt. */
typedef struct gw_wait {
	struct gw_wait *prev, *next;
	uint64_t since_ms; /* loop clock */
	int linked;
} gw_wait_t;

/* One replica of one version of one model. Backends are never freed while
 * the gateway runs: a removed one is marked gone and its slot is reused
 * once nothing refers to it (no request in flight, no probe). */
typedef struct gw_backend {
	char model[GW_MAX_NAME];
	char version[GW_MAX_VERSION];
	char url[GW_MAX_URL]; /* http://HOST:PORT, no trailing slash */
	char id[GW_MAX_URL];  /* HOST:PORT, the x-starcloud-replica value */
	int role;
	int kind;                         /* GW_BK_* */
	char upstream_model[GW_MAX_NAME]; /* the name the backend knows the model by, or "" */
	char health[64];                  /* readiness probe path */
	int repository; /* a descriptor of a replica to discover (repository=true) */
	double weight;
	int source;
	int gone;
	int ready; /* last readiness probe (1 until one fails) */
	int inflight;
	int consec_fail;
	int ejections;
	uint64_t ejected_until; /* ms on the loop clock; 0 = not ejected */
	int probing;
	uint64_t requests, failures;
	gw_wait_t *wait_head, *wait_tail; /* unanswered prefill attempts, oldest first */
	gw_stats_t *stats;                /* the model/version figures */
} gw_backend_t;

typedef sc_window_t gw_window_t; /* src/gateway/policy.h */

/* A replica whose model repository decides what it serves (discover.c). */
typedef struct gw_repo {
	char url[GW_MAX_URL];
	char id[GW_MAX_URL];
	double weight;
	int source; /* GW_SRC_STATIC or GW_SRC_SERVER */
	int gone;   /* 2: tentatively, during a rebuild */
	int polling;
	int used;
	struct sc_gw *gw;
	sc_buf_t body; /* the index being read (freed with the gateway) */
} gw_repo_t;

/* A model's prompt-token estimate (pd.c, the prefill autoscaler's signal):
 * the Deployment's bytes per token and the backends' own counts. */
#define GW_MAX_TOKMODELS 256
typedef struct gw_tokmodel {
	char model[GW_MAX_NAME];
	double bytes_per_token;         /* spec.promptBytesPerToken; 0 = the default (4) */
	double seen_tokens, seen_bytes; /* backends' counts (sc_prompt_tokens_learn) */
} gw_tokmodel_t;

enum { RO_PROGRESSING, RO_PROMOTED, RO_ROLLED_BACK, RO_ABORTED };

/* A canary rollout between two versions of one model. */
typedef struct gw_rollout {
	char model[GW_MAX_NAME];
	char stable[GW_MAX_VERSION];
	char canary[GW_MAX_VERSION];
	char deployment[GW_MAX_NAME]; /* control plane object to report to, or "" */
	int steps[GW_MAX_STEPS];
	size_t nsteps;
	size_t step;
	int weight; /* percent of unpinned traffic to the canary */
	int state;
	double max_error_rate;
	double max_p99; /* seconds; 0 = not checked */
	uint64_t window_ms;
	uint64_t min_requests; /* canary requests a window needs to advance */
	double confidence;     /* an early rollback's (sc_canary_proven_bad); 0 = off */
	uint64_t step_req;     /* canary attempts since the step (weight) began */
	uint64_t step_err;     /* ... and failures among them */
	uint64_t windows;
	gw_window_t cur[2]; /* [0] stable, [1] canary */
	gw_window_t last[2];
	double last_err[2], last_p99[2];
	char reason[256];
	uv_timer_t timer;
	struct sc_gw *gw;
	int used;
	int source;
} gw_rollout_t;

typedef struct gw_opts {
	sc_hostport_t listen;
	uint64_t timeout_ms;         /* whole request */
	uint64_t attempt_timeout_ms; /* one upstream attempt: until its first byte */
	uint64_t idle_timeout_ms;    /* one upstream attempt: silence once it answers */
	int max_inflight;            /* per replica, then 429 */
	int max_retries;             /* per request */
	double retry_budget;         /* share of active requests */
	int retry_budget_min;
	int eject_after; /* consecutive failures */
	uint64_t eject_base_ms;
	uint64_t eject_max_ms;
	uint64_t probe_interval_ms;
	int prefill_retry;                        /* --prefill-failure retry */
	size_t max_body;                          /* client request body */
	size_t max_response;                      /* buffered upstream answer */
	char server[GW_MAX_SERVERS * GW_MAX_URL]; /* --server URL1,URL2,... as given */
	char servers[GW_MAX_SERVERS][GW_MAX_URL]; /* the same, split and checked */
	size_t nservers;
	char token[256];
	char otlp[GW_MAX_URL];
	uint64_t window_ms; /* default analysis window */
	double max_error_rate;
	int steps[GW_MAX_STEPS];
	size_t nsteps;
} gw_opts_t;

typedef struct sc_gw {
	uv_loop_t *loop;
	gw_opts_t o;
	sc_http_server_t *http;
	sc_hcli_t *hc;
	sc_tls_ctx_t *tls, *tls_client; /* the listener's and the client's (https://), or NULL */
	gw_backend_t *be[GW_MAX_BACKENDS];
	size_t nbe;
	gw_rollout_t ro[GW_MAX_ROLLOUTS];
	size_t nro; /* slots of ro ever used (a high-water mark) */
	gw_repo_t repos[GW_MAX_REPOS];
	size_t nrepos;
	gw_stats_t *stats[GW_MAX_STATS];
	size_t nstats;
	gw_tokmodel_t tok[GW_MAX_TOKMODELS]; /* models with prefill/decode traffic or a setting */
	size_t ntok;
	uint64_t active;         /* client requests in flight */
	uint64_t active_retries; /* retry attempts in flight */
	uint64_t shed, budget_exhausted;
	struct gw_req *reqs;      /* every request in flight, newest first */
	struct gw_req *reqs_tail; /* the oldest: the next deadline (proxy.c) */
	struct gw_req *dead;      /* released, recycled after this iteration */
	uv_timer_t deadlines;     /* armed for reqs_tail->deadline_ms */
	uv_check_t reaper;        /* moves dead to pool */
	struct gw_req *pool;      /* finished requests kept for reuse (proxy.c) */
	size_t npool;
	uv_timer_t probe_timer;
	uv_signal_t sigint, sigterm;
	uv_timer_t watchdog; /* systemd WatchdogSec= pings (net/sdnotify.h) */
	void *trace;         /* trace.c exporter state */
	void *control;       /* control.c watch state */
	size_t server_idx;   /* the control plane server in use (o.servers) */
	uint64_t rng;
	/* Work that a lower module sets off and a higher one does, handed in
	 * at start-up so the lower one does not call up: a finished rollout
	 * and each analysis window go to the control plane (control.c, when
	 * --server is given), and every probe round also polls the replicas
	 * whose model repository decides what they serve (discover.c). */
	void (*rollout_outcome)(struct sc_gw *gw, const gw_rollout_t *ro, const char *outcome);
	void (*rollout_window)(struct sc_gw *gw, const gw_rollout_t *ro);
	void (*probe_tick)(struct sc_gw *gw);
	/* Scale from zero (docs/AUTOSCALING.md): whether a request for model
	 * that finds no replica may wait for one (an autoscaled Deployment
	 * serves it), and the news that one now waits (control.c reports it
	 * at once). NULL without --server. */
	int (*may_hold)(struct sc_gw *gw, const char *model);
	void (*held)(struct sc_gw *gw, const char *model);
	uint64_t waiting; /* requests held for a replica (proxy.c) */
} sc_gw_t;

/* The loop's clock in ms. */
static inline uint64_t sc__gw_now_ms(const sc_gw_t *gw)
{
	return uv_now(gw->loop);
}

/* xorshift64*: fast, good enough for load balancing and span ids. */
static inline uint64_t sc__gw_rand(sc_gw_t *gw)
{
	uint64_t x = gw->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	gw->rng = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* ---- reply.c ---- */
/* Answers OpenAI's {"error":{"message","type","param","code"}}: type from
 * the status, param the field at fault (or NULL), code a short reason such
 * as "model_not_found" (or NULL). */
void sc__gw_error(sc_http_req_t *r, int status, const char *code, const char *param,
                  const char *msg);
/* Answers KServe's {"error": "message"}. */
void sc__gw_kserve_error(sc_http_req_t *r, int status, const char *msg);

/* The longest duration any gateway setting takes (a week). */
#define GW_MAX_DURATION_MS (7 * 86400000ull)

/* ---- backend.c ---- */
/* Adds (or refreshes) a backend; returns it, or NULL when the table is full. */
gw_backend_t *sc__gw_backend_add(sc_gw_t *gw, const gw_backend_t *desc);
/* Marks every backend of source src not touched since sc__gw_backend_mark as gone. */
void sc__gw_backend_mark(sc_gw_t *gw, int src);
void sc__gw_backend_sweep(sc_gw_t *gw, int src);
typedef struct gw_pick {
	const char *model;
	const char *version;        /* NULL = any */
	int role;                   /* GW_ROLE_BOTH: serving backends */
	int kserve;                 /* KServe routes: starcloud backends only */
	gw_backend_t *const *tried; /* to avoid */
	size_t ntried;
	int least;            /* the least loaded (a retry) instead of two random choices */
	uint64_t max_wait_ms; /* leave out replicas whose oldest waiting attempt waited longer; 0 =
	                         no limit */
} gw_pick_t;
/* Picks a backend, or NULL with *why = 404 (no such model/version), 503 (none
 * usable), 429 (all saturated: --max-inflight) or 504 (every one left is
 * late: its oldest waiting attempt has waited over max_wait_ms). */
gw_backend_t *sc__gw_pick(sc_gw_t *gw, const gw_pick_t *p, int *why);
/* Records an attempt's outcome: ok resets the failure run, a failure may
 * eject the backend. */
void sc__gw_backend_result(sc_gw_t *gw, gw_backend_t *b, int ok);
int sc__gw_backend_usable(const sc_gw_t *gw, const gw_backend_t *b);
/* Puts w at the end of b's waiting attempts (since now) / takes it out
 * (nothing when it is not in). */
void sc__gw_backend_wait_add(sc_gw_t *gw, gw_backend_t *b, gw_wait_t *w);
void sc__gw_backend_wait_del(gw_backend_t *b, gw_wait_t *w);
int sc__gw_model_known(const sc_gw_t *gw, const char *model, const char *version);
int sc__gw_model_has_role(const sc_gw_t *gw, const char *model, int role);
/* Same, for one version only (NULL: any version). */
int sc__gw_version_has_role(const sc_gw_t *gw, const char *model, const char *version, int role);
void sc__gw_probe_start(sc_gw_t *gw);

/* ---- discover.c ---- */
/* Adds (or refreshes) a replica to discover; NULL when the table is full. */
gw_repo_t *sc__gw_repo_add(sc_gw_t *gw, const char *url, double weight, int source);
/* Rebuilds by source, as backends are: mark, re-add, sweep (which drops
 * the backends a swept replica served). */
void sc__gw_repo_mark(sc_gw_t *gw, int source);
void sc__gw_repo_sweep(sc_gw_t *gw, int source);
/* Asks every replica to discover for its index (the probe timer). */
void sc__gw_repo_poll(sc_gw_t *gw);

/* ---- canary.c ---- */
gw_rollout_t *sc__gw_rollout_find(sc_gw_t *gw, const char *model);
/* Creates or updates the rollout of model from stable to canary. */
gw_rollout_t *sc__gw_rollout_set(sc_gw_t *gw, const char *model, const char *stable,
                                 const char *canary, const int *steps, size_t nsteps,
                                 uint64_t window_ms, double max_error_rate, int source);
/* A rollout the control plane steps: follows its canary weight (-1 =
 * unknown) and phase (Progressing, Paused, RolledBack, Complete), unless the
 * gateway has ended the rollout itself. */
void sc__gw_rollout_follow(sc_gw_t *gw, gw_rollout_t *ro, const char *phase, int weight);
/* Chooses the version for an unpinned request (NULL = no rollout: any). */
const char *sc__gw_rollout_choose(sc_gw_t *gw, const char *model);
/* For a prefill/decode request: chosen if it has a usable replica of both
 * roles, else the rollout's other version if that one has, else chosen (the
 * request then fails as before). The result points into the rollout. */
const char *sc__gw_rollout_pd_version(sc_gw_t *gw, const char *model, const char *chosen);
/* The rollout's version other than version if it has a usable replica of
 * both roles, else NULL. */
const char *sc__gw_rollout_pd_other(sc_gw_t *gw, const char *model, const char *version);
/* The version a request that failed on version (a rollout's canary, not
 * promoted) is tried again on: the stable version when it has a usable
 * replica of role (-1: of both prefill and decode), else NULL. The result
 * points into the rollout. */
const char *sc__gw_rollout_fallback(sc_gw_t *gw, const char *model, const char *version, int role);
/* Records a finished request of model/version for the analysis. */
void sc__gw_rollout_observe(sc_gw_t *gw, const char *model, const char *version, int error,
                            double seconds);
int sc__gw_rollout_action(sc_gw_t *gw, gw_rollout_t *ro, const char *action);
json_t *sc__gw_rollout_json(const gw_rollout_t *ro);
const char *sc__gw_rollout_state(int state);
void sc__gw_rollout_stop_all(sc_gw_t *gw);

/* ---- stats.c: counters (the /metrics page is admin.c's) ---- */
gw_stats_t *sc__gw_stats(sc_gw_t *gw, const char *model, const char *version);
void sc__gw_stats_done(gw_stats_t *s, int code, double total, double ttft);
void sc__gw_stats_inflight(gw_stats_t *s, int delta);
/* Time-to-first-token histogram of every version of model added up:
 * bucket counts (n >= GW_TTFT_BUCKETS; the last is above every bound)
 * and the total. Returns the largest bound. */
#define GW_TTFT_BUCKETS 15
double sc__gw_stats_ttft(const sc_gw_t *gw, const char *model, uint64_t *buckets, size_t n,
                         uint64_t *count);
/* The upper bound of bucket b in seconds (the last bound for the last). */
double sc__gw_stats_bucket_bound(size_t b);
/* Generated tokens: n relayed (a streamed chunk's token ids), those of a
 * buffered answer (its usage.completion_tokens; body borrowed), and the
 * total of every version of model since start (the decode autoscaler's
 * tokens per second, control.c). */
void sc__gw_stats_tokens_add(gw_stats_t *s, uint64_t n);
void sc__gw_stats_answer_tokens(gw_stats_t *s, const char *body, size_t len);
uint64_t sc__gw_stats_tokens(const sc_gw_t *gw, const char *model);
void sc__gw_stats_retry(gw_stats_t *s);
/* A prefill retried after a failure of kind reason (GW_PF_*), or not
 * retried for deny (GW_DENY_*): counted on the failed replica's figures. */
void sc__gw_stats_prefill_retry(gw_stats_t *s, int reason);
void sc__gw_stats_prefill_denied(gw_stats_t *s, int deny);
void sc__gw_stats_ejection(gw_stats_t *s);
void sc__gw_stats_rollback(gw_stats_t *s);
void sc__gw_stats_shed(gw_stats_t *s);
/* Writes the counters in the Prometheus text format. */
void sc__gw_stats_out(sc_buf_t *o, sc_gw_t *gw);

/* ---- trace.c ---- */
typedef struct gw_span {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t parent_id[8];
	int has_parent;
	int sampled;
	uint64_t start_ns; /* unix time */
} gw_span_t;
/* Starts the request's root span from a traceparent header (NULL or
 * invalid: a new trace). */
void sc__gw_span_root(sc_gw_t *gw, gw_span_t *s, const char *traceparent);
void sc__gw_span_child(sc_gw_t *gw, const gw_span_t *parent, gw_span_t *child);
/* Writes the traceparent naming span s (55 chars + NUL). */
void sc__gw_traceparent(const gw_span_t *s, char out[56]);
/* True when s would be exported (sampled, --otlp set): lets callers skip
 * building attributes on the hot path. */
int sc__gw_span_wanted(const sc_gw_t *gw, const gw_span_t *s);
/* Ends a span and queues it for export (when --otlp is set). kind is
 * SC_OTEL_SERVER or SC_OTEL_CLIENT; status and attrs (an OTLP attribute
 * array) are taken, both made with net/otel.h. */
void sc__gw_span_end(sc_gw_t *gw, const gw_span_t *s, const char *name, int kind, json_t *status,
                     json_t *attrs);
int sc__gw_trace_init(sc_gw_t *gw);
void sc__gw_trace_close(sc_gw_t *gw);

/* ---- proxy.c: requests held for a replica ---- */
/* Held requests of model (all when NULL). */
size_t sc__gw_proxy_held(sc_gw_t *gw, const char *model);
/* Prompt tokens of model's requests in their prefill phase (at a replica
 * or waiting for one): the prefill autoscaler's signal (pd.c). Token ids
 * count one each; text is estimated (sc_prompt_tokens_estimate) from the
 * model's bytes per token and the counts its prefill replicas answered. */
long long sc__gw_pd_prompt_tokens(sc_gw_t *gw, const char *model);
/* Sets model's bytes per token (a Deployment's spec.promptBytesPerToken;
 * 0: the default), control.c. */
void sc__gw_pd_bytes_per_token(sc_gw_t *gw, const char *model, double bpt);
/* starcloud_gateway_prefill_prompt_tokens{model} for /metrics (admin.c). */
void sc__gw_pd_metrics(sc_buf_t *o, sc_gw_t *gw);
/* Tries every held request again (replicas changed). */
void sc__gw_proxy_wake(sc_gw_t *gw);

/* ---- control.c ---- */
/* Splits o->server ("URL1,URL2,...") into o->servers; errors name the
 * entry. */
int sc__gw_parse_servers(gw_opts_t *o, char *err, size_t errsz);
int sc__gw_control_start(sc_gw_t *gw);
void sc__gw_control_stop(sc_gw_t *gw);

/* ---- admin.c ---- */
int sc__gw_admin_routes(sc_gw_t *gw);

/* ---- intake.c ---- */
int sc__gw_proxy_routes(sc_gw_t *gw);

#endif
