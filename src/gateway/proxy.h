/* One client request as it moves through the gateway (proxy.c, pd.c).
 *
 * A request is answered by one or more upstream attempts. Non-streamed
 * answers are buffered (bounded) before anything reaches the client, so any
 * failed attempt can be retried elsewhere; streamed answers are forwarded
 * event by event, and a stream broken after tokens went out is continued on
 * another replica from the token ids the client already has. */
#ifndef SC_GATEWAY_PROXY_H
#define SC_GATEWAY_PROXY_H

#include "gateway/gw_int.h"

enum { GW_K_COMPL, GW_K_CHAT, GW_K_EMBED, GW_K_INFER, GW_K_PASS };

struct gw_req;

/* What the proxy asks of prefill/decode (pd.c) for a request in that mode;
 * pd.c hands its table in when it takes the request (sc__gw_pd_start), so
 * the proxy does not call into the module that calls it. */
typedef struct gw_pd_ops {
	/* Bodies of the two phases (docs/WORKER.md, "KV handle protocol"). */
	json_t *(*prefill_body)(const struct gw_req *q);
	json_t *(*decode_body)(const struct gw_req *q);
	/* True when a decode answer says the KV could not be fetched. */
	int (*kv_gone)(const struct gw_req *q);
	/* The decode replica lost the KV handle (410): prefill again or fail,
	 * per --prefill-failure. */
	void (*kv_lost)(struct gw_req *q);
	/* Frees the prefill's KV handle early (DELETE, best effort). */
	void (*release)(struct gw_req *q);
	/* Starts over with a prefill of q->version, freeing the KV handle it
	 * had (the request moved to another version: sc__gw_canary_fallback). */
	void (*restart)(struct gw_req *q);
} gw_pd_ops_t;

typedef struct gw_req {
	sc_gw_t *gw;
	sc_http_req_t *hr; /* NULL once the client is gone */
	int kind;
	char model[GW_MAX_NAME];
	char version[GW_MAX_VERSION]; /* pinned or chosen by the rollout; "" = any */
	int pinned;
	int rollout_chosen; /* version came from the rollout, may widen */
	int fell_back;      /* failed on the canary, moved to the stable version */
	json_t *body;       /* parsed OpenAI request (owned), lazily: sc__gw_req_json */
	const char *raw;    /* the client's body (borrowed from hr) */
	size_t rawlen;
	int rewrite;      /* body must be re-serialized (model:version) */
	char path[512];   /* upstream path and query */
	char ihcl[24];    /* KServe binary request: its JSON header's length */
	char up_ihcl[24]; /* KServe binary answer: the same, from the replica */
	const char *method;
	char ua[128]; /* the client's User-Agent, for the span */
	int stream;
	int role;         /* backends this phase uses */
	gw_backend_t *be; /* the attempt in flight */
	sc_hcli_req_t *up;
	gw_backend_t *tried[GW_MAX_TRIED];
	size_t ntried;
	int attempts;
	int resumes;
	int in_retry;   /* the attempt in flight counts as a retry */
	int free_retry; /* the failed attempt never reached its replica */
	int started;    /* the client stream is open */
	int passthru;   /* this attempt's answer is forwarded as it arrives */
	int up_status;
	char up_ctype[128];
	int held;       /* be->inflight counts this request */
	sc_buf_t resp;  /* buffered upstream answer */
	sc_buf_t sse;   /* an upstream event not yet complete */
	int ntok;       /* chunks with text sent to the client */
	int single;     /* one sequence (one prompt, n = 1): resumable, P/D-able */
	int no_ids;     /* a chunk carried text without token ids */
	int saw_finish; /* the sequence's last chunk (finish_reason) went out */
	int saw_done;
	uint64_t t0_ns, ttft_ns, att_ns;
	uint64_t deadline_ms; /* loop clock: t0 + --timeout (sc_gw_t.deadlines) */
	gw_span_t root, att;
	int last_status; /* of the last failed attempt, for the answer */
	char last_err[640];
	/* prefill/decode */
	int pd;
	const struct gw_pd_ops *pd_ops; /* pd.c's, set with pd */
	json_t *kv;  /* the prefill's answer: kv_handle, kv_url, first_token (owned) */
	json_t *ids; /* token ids sent to the client (streamed chunks' token_ids) */
	gw_backend_t *prefill_be;
	int prefill_attempts;
	int closed;
	int waiting; /* held for a replica of an autoscaled model (sc_gw_t.may_hold) */
	struct gw_req *prev, *next; /* sc_gw_t.reqs, then .dead and .pool */
	gw_wait_t wait;             /* a prefill attempt in its replica's waiting list */
	int pf_reason;              /* why the last prefill attempt failed (GW_PF_*) */
	long long prompt_bytes;     /* P/D: the prompt's text bytes, or -1 for token ids */
	long long prompt_ids;       /* P/D: the prompt's token ids (prompt_bytes -1) */
} gw_req_t;

/* The request's server span (ver: the answering version, may be NULL;
 * status: the HTTP status sent) and an upstream attempt's client span on
 * replica b (failed: no answer or one that broke off); both handed to the
 * exporter (proxy_span.c). */
void sc__gw_root_span(gw_req_t *q, const char *ver, int status);
void sc__gw_attempt_span(gw_req_t *q, gw_backend_t *b, int failed);
/* A new request in flight for hr (borrowed; the request hears when its
 * client goes away), linked into sc_gw_t.reqs with its deadline. */
gw_req_t *sc__gw_req_new(sc_gw_t *gw, sc_http_req_t *hr, int kind);
/* The deadline timer and the reaper of finished requests (before any
 * request); sc__gw_proxy_shutdown closes them. */
int sc__gw_proxy_init(sc_gw_t *gw);
/* Starts (or retries) an upstream attempt for the current phase. */
void sc__gw_attempt(gw_req_t *q);
/* Ends the request with an error answer (or an error event on an open
 * stream) and releases it. */
void sc__gw_fail(gw_req_t *q, int status, const char *code, const char *param, const char *msg);
/* Sends the buffered upstream answer (status, type, body) to the client and
 * releases the request. */
void sc__gw_relay(gw_req_t *q);
/* True when another attempt is allowed (retry limit and budget). */
int sc__gw_may_retry(gw_req_t *q);
/* The same, saying why not: 0 when allowed, else GW_DENY_ATTEMPTS (the
 * request's --max-retries are spent) or GW_DENY_BUDGET (the gateway's retry
 * budget is, counted in starcloud_gateway_retry_budget_exhausted_total). */
int sc__gw_retry_check(gw_req_t *q);
/* Ends the attempt in flight: replica load, ejection, canary, span. */
void sc__gw_attempt_end(gw_req_t *q, int failed);
/* Takes b for the next attempt (inflight, retry budget, tried list). */
void sc__gw_attempt_take(gw_req_t *q, gw_backend_t *b);
/* After a failed attempt on a rollout's canary with nothing sent to the
 * client: 1 when the request was moved to the stable version and tried
 * there (once per request, within --max-retries and the retry budget),
 * 0 when the caller goes on as before. */
int sc__gw_canary_fallback(gw_req_t *q);
/* Starts the prefill phase (pd.c); the decode phase follows by itself. */
void sc__gw_pd_start(gw_req_t *q);
/* The client's OpenAI body as a tree, parsed on first use (only retries
 * that rewrite it and prefill/decode need one); NULL for other kinds or a
 * body jansson refuses. Owned by q. */
json_t *sc__gw_req_json(gw_req_t *q);
/* True when the client's body can go upstream byte for byte (attempt.c). */
int sc__gw_body_verbatim(const gw_req_t *q);
/* The request body for the next attempt (caller frees with free()). */
char *sc__gw_body_for_attempt(gw_req_t *q, size_t *len);

/* Ends every request in flight (shutdown). */
void sc__gw_proxy_shutdown(sc_gw_t *gw);
/* Frees the pool of finished requests (after the loop has stopped). */
void sc__gw_proxy_free_pool(sc_gw_t *gw);

#endif
