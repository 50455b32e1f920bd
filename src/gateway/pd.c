/* Prefill/decode disaggregation.
 *
 * A completion for a model that has prefill and decode replicas runs in two
 * phases (docs/WORKER.md, "KV handle protocol"): POST /v1/prefill on a
 * prefill replica returns {kv_handle, kv_url, first_token}; POST /v1/decode
 * on a decode replica with {kv_url, first_token, max_tokens, stream,
 * format} fetches the KV cache from the prefill side and generates. From
 * then on the request is an ordinary attempt loop over decode replicas with
 * the same handle: a failed decode is retried on another decode replica
 * without a second prefill, and a stream broken mid-way continues there with
 * "generated_ids" (the token ids already relayed after first_token), so the
 * worker emits only what the client has not seen.
 *
 * When the prefill replica fails, or a decode replica cannot fetch the KV
 * (502 with error.field "kv_url": the prefill side is gone),
 * --prefill-failure decides: `fail` answers 502 at once (fail fast across
 * the P->D boundary instead of waiting on a dead peer), `retry` prefills
 * again on another prefill replica: the least loaded one this request has
 * not tried, within its --max-retries, the gateway's retry budget and its
 * deadline. A timeout, a connection error, a 5xx and a replica's 429 are
 * retried; other 4xx are the client's answer.
 *
 * Admission: a prefill replica whose oldest unanswered prefill has waited
 * over half the attempt timeout takes no new one, and when every replica is
 * like that a new request is refused at once with 503 "overloaded" and
 * Retry-After instead of queueing behind requests that will time out. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "gateway/proxy.h"
#include "net/promtext.h"
#include "starcloud/error.h"

static void prefill_try(gw_req_t *q);
static gw_tokmodel_t *tokmodel(sc_gw_t *gw, const char *model, int create);
static void note_prompt(gw_req_t *q);
static void learn_prompt(gw_req_t *q, const json_t *answer);

static int pf_head(sc_hcli_req_t *up, int status, void *ud)
{
	gw_req_t *q = ud;
	q->up_status = status;
	const char *ct = sc_hcli_header(up, "content-type");
	snprintf(q->up_ctype, sizeof(q->up_ctype), "%s", ct ? ct : "");
	return 0;
}

static int pf_data(sc_hcli_req_t *up, const char *d, size_t n, void *ud)
{
	gw_req_t *q = ud;
	if (sc_buf_append(&q->resp, d, n) < 0)
		q->up_status = -1;
	return 0;
}

/* Ends a request whose failed prefill is not retried (deny: GW_DENY_*).
 * Overload (the retry budget spent, every other replica late or full) is
 * answered 503 "overloaded" with Retry-After, as a shed request is: the
 * client should come back later, not at once. A replica's own 429 with
 * nowhere else to go is the gateway's 429. Otherwise 502 prefill_failed. */
static void prefill_give_up(gw_req_t *q, int deny)
{
	if (q->be)
		sc__gw_stats_prefill_denied(q->be->stats, deny);
	if (q->pf_reason == GW_PF_BUSY && deny != GW_DENY_ATTEMPTS)
		sc__gw_fail(q, 429, "overloaded", NULL, "every prefill replica is saturated");
	else if (deny == GW_DENY_BUDGET || deny == GW_DENY_OVERLOADED)
		sc__gw_fail(q, 503, "overloaded", NULL, q->last_err);
	else
		sc__gw_fail(q, 502, "prefill_failed", NULL, q->last_err);
}

/* The prefill phase failed (reason: GW_PF_*): retry it on another prefill
 * replica or give up, per the policy, the request's retries and the retry
 * budget. */
static void prefill_failed(gw_req_t *q, int reason, const char *why)
{
	snprintf(q->last_err, sizeof(q->last_err), "prefill on %s failed: %s",
	         q->be ? q->be->id : "?", why);
	sc_log_warn("%s", q->last_err);
	q->pf_reason = reason;
	if (sc__gw_canary_fallback(q))
		return;
	if (!q->gw->o.prefill_retry) {
		sc__gw_fail(q, 502, "prefill_failed", NULL, q->last_err);
		return;
	}
	int deny = sc__gw_retry_check(q);
	if (deny) {
		size_t at = strlen(q->last_err);
		snprintf(q->last_err + at, sizeof(q->last_err) - at, "; not retried: %s",
		         deny == GW_DENY_BUDGET ? "the retry budget is spent"
		                                : "the request's retries are spent");
		prefill_give_up(q, deny);
		return;
	}
	prefill_try(q);
}

/* Moves on to the decode phase with the handle the prefill returned. */
static void decode_phase(gw_req_t *q, json_t *kv)
{
	json_decref(q->kv);
	q->kv = json_incref(kv);
	q->prefill_be = q->be;
	q->be = NULL;
	q->role = GW_ROLE_DECODE;
	/* The KV cache is only meaningful to the same version's decoder. */
	snprintf(q->version, sizeof(q->version), "%s", q->prefill_be->version);
	q->rollout_chosen = 0;
	snprintf(q->path, sizeof(q->path), "/v1/decode");
	/* Decode replicas tried before a re-prefill may be tried again. */
	q->ntried = 0;
	sc__gw_attempt(q);
}

static void pf_done(sc_hcli_req_t *up, int err, void *ud)
{
	gw_req_t *q = ud;
	if (q->closed)
		return; /* req_release cancelled the prefill */
	q->up = NULL;
	int st = err < 0 ? -1 : q->up_status;
	if (st == 429) {
		/* The replica's queue is full: not its fault, and another one
		 * may have room. */
		sc__gw_attempt_end(q, 0);
		prefill_failed(q, GW_PF_BUSY, "busy (429)");
		return;
	}
	if (st >= 400 && st < 500) {
		/* The request itself was refused: the client hears why, in the
		 * replica's own words (an OpenAI error naming the field). */
		sc__gw_attempt_end(q, 0);
		if (q->hr)
			sc__gw_relay(q);
		return;
	}
	json_t *j = st == 200 ? json_loadb(q->resp.data, q->resp.len, 0, NULL) : NULL;
	int ok = json_is_string(json_object_get(j, "kv_url")) &&
	         json_is_integer(json_object_get(j, "first_token"));
	sc__gw_attempt_end(q, !ok);
	if (ok)
		learn_prompt(q, j);
	if (ok)
		decode_phase(q, j);
	else
		prefill_failed(q, err == SC_ELIMIT ? GW_PF_TIMEOUT : GW_PF_ERROR,
		               err == SC_ELIMIT ? "no answer within the attempt timeout"
		               : err < 0        ? sc_strerror(err)
		               : st == 200      ? "no kv_url/first_token in the answer"
		                                : "upstream error");
	json_decref(j);
}

/* A prefill replica for q: two random choices for a first attempt, the
 * least loaded other one for a retry (never one this request already
 * tried), in the chosen version or, for a rollout, the other one if that
 * one also decodes. Replicas whose oldest unanswered prefill has waited
 * over half the attempt timeout are left out (sc_prefill_wait_limit). */
static gw_backend_t *prefill_pick(gw_req_t *q, int *why)
{
	gw_pick_t p = {
	    .model = q->model,
	    .version = q->version[0] ? q->version : NULL,
	    .role = GW_ROLE_PREFILL,
	    .tried = q->tried,
	    .ntried = q->ntried,
	    .least = q->prefill_attempts > 0,
	    .max_wait_ms = sc_prefill_wait_limit(q->gw->o.attempt_timeout_ms),
	};
	gw_backend_t *b = sc__gw_pick(q->gw, &p, why);
	if (!b && q->rollout_chosen && p.version) {
		/* Another version's prefill only if that version also decodes: a
		 * prefill whose version has no decoder ends in a 404. */
		int why2 = 503;
		p.version = sc__gw_rollout_pd_other(q->gw, q->model, p.version);
		if (p.version)
			b = sc__gw_pick(q->gw, &p, &why2);
		if (!b && (why2 == 504 || why2 == 429))
			*why = why2;
	}
	return b;
}

/* No prefill replica to send q to. A first attempt is shed when every
 * replica is late (503 "overloaded") or full (429), as any shed request
 * is; a retry that finds none gives up. */
static void prefill_none(gw_req_t *q, int why)
{
	int overloaded = why == 504 || why == 429;
	if (q->prefill_attempts > 0) {
		size_t at = strlen(q->last_err);
		snprintf(q->last_err + at, sizeof(q->last_err) - at, "; not retried: %s",
		         overloaded ? "every other prefill replica is overloaded"
		                    : "no other prefill replica");
		prefill_give_up(q, overloaded ? GW_DENY_OVERLOADED : GW_DENY_NO_REPLICA);
		return;
	}
	if (overloaded) {
		sc__gw_stats_shed(sc__gw_stats(q->gw, q->model, q->version));
		q->gw->shed++;
	}
	if (why == 504)
		sc__gw_fail(q, 503, "overloaded", NULL,
		            "every prefill replica has a backlog over half the attempt timeout; "
		            "retry later");
	else if (why == 429)
		sc__gw_fail(q, 429, "overloaded", NULL, "every prefill replica is saturated");
	else
		sc__gw_fail(q, 503, "prefill_failed", NULL, "no ready prefill replica");
}

static void prefill_try(gw_req_t *q)
{
	int why = 503;
	gw_backend_t *b = prefill_pick(q, &why);
	if (!b) {
		prefill_none(q, why);
		return;
	}
	if (q->prefill_attempts > 0 && q->be)
		sc__gw_stats_prefill_retry(q->be->stats, q->pf_reason);
	sc__gw_attempt_take(q, b);
	q->prefill_attempts++;
	sc__gw_backend_wait_add(q->gw, b, &q->wait);
	char url[GW_MAX_URL + 32], hdrs[128], tp[56];
	snprintf(url, sizeof(url), "%s/v1/prefill", b->url);
	sc__gw_span_child(q->gw, &q->root, &q->att);
	sc__gw_traceparent(&q->att, tp);
	snprintf(hdrs, sizeof(hdrs), "traceparent: %s\r\n", tp);
	size_t blen;
	char *body = sc__gw_body_for_attempt(q, &blen);
	sc_hcli_call_t call = {
	    .method = "POST",
	    .url = url,
	    .headers = hdrs,
	    .body = body,
	    .body_len = blen,
	    /* Within the request's deadline: a retry never outlives it. */
	    .timeout_ms = sc_attempt_timeout(q->gw->o.attempt_timeout_ms, sc__gw_now_ms(q->gw),
	                                     q->deadline_ms),
	    .idle_timeout_ms = q->gw->o.idle_timeout_ms,
	    .cbs = {.on_head = pf_head, .on_data = pf_data, .on_done = pf_done},
	    .ud = q,
	};
	q->att_ns = uv_hrtime();
	q->up_status = 0;
	sc_buf_reset(&q->resp);
	int rc = sc_hcli_start(q->gw->hc, &call, &q->up);
	free(body);
	if (rc < 0) {
		q->up = NULL;
		pf_done(NULL, SC_EIO, q);
	}
}

static void sc__gw_pd_kv_lost(gw_req_t *q);
static json_t *sc__gw_pd_prefill_body(const gw_req_t *q);
static json_t *sc__gw_pd_decode_body(const gw_req_t *q);
static int sc__gw_pd_kv_gone(const gw_req_t *q);
static void sc__gw_pd_release(gw_req_t *q);
static void sc__gw_pd_restart(gw_req_t *q);

static const gw_pd_ops_t pd_ops = {
    .prefill_body = sc__gw_pd_prefill_body,
    .decode_body = sc__gw_pd_decode_body,
    .kv_gone = sc__gw_pd_kv_gone,
    .kv_lost = sc__gw_pd_kv_lost,
    .release = sc__gw_pd_release,
    .restart = sc__gw_pd_restart,
};

void sc__gw_pd_start(gw_req_t *q)
{
	q->pd = 1;
	q->pd_ops = &pd_ops;
	q->role = GW_ROLE_PREFILL;
	note_prompt(q);
	tokmodel(q->gw, q->model, 1); /* the model's gauge, from its first request */
	prefill_try(q);
}

static void sc__gw_pd_kv_lost(gw_req_t *q)
{
	snprintf(q->last_err, sizeof(q->last_err), "decode on %s: the KV handle is gone",
	         q->be ? q->be->id : "?");
	if (q->started || !q->gw->o.prefill_retry || !sc__gw_may_retry(q)) {
		sc__gw_fail(q, 502, "prefill_failed", NULL, q->last_err);
		return;
	}
	sc_log_warn("%s; prefilling again", q->last_err);
	q->role = GW_ROLE_PREFILL;
	q->ntried = 0;
	q->pf_reason = GW_PF_KV_LOST;
	/* Counted on the prefill replica whose KV was lost. */
	q->be = q->prefill_be;
	prefill_try(q);
}

static void sc__gw_pd_restart(gw_req_t *q)
{
	if (q->kv)
		sc__gw_pd_release(q);
	json_decref(q->kv);
	q->kv = NULL;
	q->role = GW_ROLE_PREFILL;
	q->ntried = 0;
	prefill_try(q);
}

/* ---------------------------------------------------------------------
 * Bodies
 * ------------------------------------------------------------------- */

static void copy_field(json_t *dst, const json_t *src, const char *key)
{
	json_t *v = json_object_get(src, key);
	if (v)
		json_object_set(dst, key, v);
}

/* The client's whole request, model name resolved: the prefill checks
 * every field (a field neither phase honours, tool_choice say, is refused
 * there by name rather than dropped here) and chooses the first token,
 * so its logprobs too. The decode body takes the fields decode needs. */
static json_t *sc__gw_pd_prefill_body(const gw_req_t *q)
{
	json_t *b = json_deep_copy(q->body);
	if (!b)
		b = json_object();
	json_object_set_new(b, "model", json_string(q->model));
	return b;
}

static json_t *sc__gw_pd_decode_body(const gw_req_t *q)
{
	json_t *b = json_pack("{s:s,s:O,s:O,s:b,s:s}", "model", q->model, "kv_url",
	                      json_object_get(q->kv, "kv_url"), "first_token",
	                      json_object_get(q->kv, "first_token"), "stream", q->stream, "format",
	                      q->kind == GW_K_CHAT ? "chat" : "completion");
	copy_field(b, q->body, "max_tokens");
	copy_field(b, q->body, "max_completion_tokens");
	copy_field(b, q->body, "temperature");
	copy_field(b, q->body, "top_p");
	copy_field(b, q->body, "seed");
	copy_field(b, q->body, "stop");
	copy_field(b, q->body, "logprobs");
	copy_field(b, q->body, "top_logprobs");
	copy_field(b, q->body, "stream_options");
	copy_field(b, q->kv, "first_logprobs");
	size_t n = json_array_size(q->ids);
	if (n > 1) {
		/* Everything after first_token that the client already has. */
		json_t *g = json_array();
		for (size_t i = 1; i < n; i++)
			json_array_append(g, json_array_get(q->ids, i));
		json_object_set_new(b, "generated_ids", g);
	}
	return b;
}

static int sc__gw_pd_kv_gone(const gw_req_t *q)
{
	if (q->up_status != 502 || !q->resp.len)
		return 0;
	json_t *j = json_loadb(q->resp.data, q->resp.len, 0, NULL);
	json_t *e = json_object_get(j, "error");
	/* OpenAI's "param"; workers before it said "field". */
	const char *f = json_string_value(json_object_get(e, "param"));
	if (!f)
		f = json_string_value(json_object_get(e, "field"));
	int gone = f && strcmp(f, "kv_url") == 0;
	json_decref(j);
	return gone;
}

static void delete_done(sc_hcli_req_t *r, int err, void *ud)
{
}

static void sc__gw_pd_release(gw_req_t *q)
{
	const char *url = json_string_value(json_object_get(q->kv, "kv_url"));
	if (!url || !q->gw->hc)
		return;
	sc_hcli_call_t call = {
	    .method = "DELETE", .url = url, .timeout_ms = 2000, .cbs = {.on_done = delete_done}};
	sc_hcli_start(q->gw->hc, &call, NULL);
}

/* ---------------------------------------------------------------------
 * The prefill autoscaler's signal
 * ------------------------------------------------------------------- */

/* The model's estimate state; created on first use when create is set
 * (NULL when the table is full: the default estimate, nothing learnt). */
static gw_tokmodel_t *tokmodel(sc_gw_t *gw, const char *model, int create)
{
	for (size_t i = 0; i < gw->ntok; i++)
		if (strcmp(gw->tok[i].model, model) == 0)
			return &gw->tok[i];
	if (!create || gw->ntok == GW_MAX_TOKMODELS)
		return NULL;
	gw_tokmodel_t *t = &gw->tok[gw->ntok++];
	memset(t, 0, sizeof(*t));
	snprintf(t->model, sizeof(t->model), "%s", model);
	return t;
}

void sc__gw_pd_bytes_per_token(sc_gw_t *gw, const char *model, double bpt)
{
	gw_tokmodel_t *t = tokmodel(gw, model, bpt > 0);
	if (t)
		t->bytes_per_token = bpt > 0 ? bpt : 0;
}

/* Text bytes of a message's content: a string, or an array of parts whose
 * text counts. */
static size_t content_bytes(const json_t *c)
{
	size_t i, n = json_string_length(c);
	const json_t *part;
	json_array_foreach(c, i, part)
	{
		n += json_string_length(json_object_get(part, "text"));
	}
	return n;
}

/* Notes the size of q's prompt (P/D requests have one sequence): its
 * token ids, or the bytes of its text (a string prompt, or the messages'
 * contents). */
static void note_prompt(gw_req_t *q)
{
	json_t *b = sc__gw_req_json(q), *p = json_object_get(b, "prompt"), *m;
	size_t i, n = 0;
	q->prompt_ids = 0;
	if (json_is_array(p) && json_is_string(json_array_get(p, 0)))
		p = json_array_get(p, 0);
	if (json_is_array(p)) {
		q->prompt_bytes = -1;
		q->prompt_ids = (long long)json_array_size(p);
		return;
	}
	if (json_is_string(p)) {
		q->prompt_bytes = (long long)json_string_length(p);
		return;
	}
	json_array_foreach(json_object_get(b, "messages"), i, m)
	{
		n += content_bytes(json_object_get(m, "content"));
	}
	q->prompt_bytes = (long long)n;
}

/* A prefill replica's count of q's prompt (the reference worker's
 * "n_tokens"), learnt for the model's estimate. */
static void learn_prompt(gw_req_t *q, const json_t *answer)
{
	json_t *n = json_object_get(answer, "n_tokens");
	if (q->prompt_bytes <= 0 || !json_is_integer(n))
		return;
	gw_tokmodel_t *t = tokmodel(q->gw, q->model, 1);
	if (t)
		sc_prompt_tokens_learn(&t->seen_tokens, &t->seen_bytes, (size_t)q->prompt_bytes,
		                       json_integer_value(n));
}

static long long prompt_tokens(const gw_req_t *q, const gw_tokmodel_t *t)
{
	if (q->prompt_bytes < 0)
		return q->prompt_ids;
	return sc_prompt_tokens_estimate((size_t)q->prompt_bytes, t ? t->bytes_per_token : 0,
	                                 t ? t->seen_tokens : 0, t ? t->seen_bytes : 0);
}

long long sc__gw_pd_prompt_tokens(sc_gw_t *gw, const char *model)
{
	const gw_tokmodel_t *t = tokmodel(gw, model, 0);
	long long n = 0;
	for (gw_req_t *q = gw->reqs; q; q = q->next)
		if (q->pd && q->role == GW_ROLE_PREFILL && !q->closed &&
		    strcmp(q->model, model) == 0)
			n += prompt_tokens(q, t);
	return n;
}

void sc__gw_pd_metrics(sc_buf_t *o, sc_gw_t *gw)
{
	sc_prom_family(o, "starcloud_gateway_prefill_prompt_tokens", "gauge",
	               "Prompt tokens of the requests waiting for or in prefill (the prefill "
	               "autoscaler's signal; text estimated, docs/GATEWAY.md).");
	for (size_t i = 0; i < gw->ntok; i++)
		sc_buf_printf(o, "starcloud_gateway_prefill_prompt_tokens{model=\"%s\"} %lld\n",
		              gw->tok[i].model, sc__gw_pd_prompt_tokens(gw, gw->tok[i].model));
}
