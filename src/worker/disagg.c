/* Prefill/decode disaggregation: /v1/prefill, /v1/kv/{handle} (GET, renew,
 * DELETE) and /v1/decode (its KV pull is in gen.c). The protocol is in
 * docs/WORKER.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starcloud/buf.h"
#include "base/alloc.h"
#include "starcloud/error.h"
#include "worker/worker_int.h"

#define MAX_KV_URL 1024

/* ---------------------------------------------------------------------
 * Prefill
 * ------------------------------------------------------------------- */

static void h_prefill(wreq_t *q)
{
	if (sc__need_role(q, ROLE_PREFILL) < 0 || sc__worker_faults(q))
		return;
	json_t *body = sc__body_json(q);
	if (!body || sc__pick_model(q, json_object_get(body, "model")) < 0)
		return json_decref(body);
	int max = q->m->model->cfg.seq_len - 1;
	gen_params_t p = {.fmt = FMT_PREFILL};
	gen_prompts_t pr = {0};
	/* The gateway hands the client's own fields to the prefill: a field
	 * no phase honours is refused here, before any work. */
	if (sc__known_fields(q, body, 1, sc__prefill_fields) < 0)
		return json_decref(body);
	/* The decode side answers max_tokens and the stream: not checked here. */
	json_object_del(body, "max_tokens");
	json_object_del(body, "max_completion_tokens");
	json_object_del(body, "stream");
	json_object_del(body, "stream_options");
	if (sc__gen_params(q, body, &p) == 0) {
		if (p.n != 1) {
			sc__reply_error(q, 400, "n", "a prefill takes n = 1");
		} else if (!(pr.ids = sc_malloc((size_t)max * sizeof(int)))) {
			sc__reply_error(q, 503, NULL, "out of memory");
		} else {
			p.max_tokens = 1;
			int n = sc__prompt_ids(q, body, pr.ids, max);
			if (n > 0) {
				pr.off[1] = n;
				pr.n = 1;
				sc__gen_start(q, &p, &pr, NULL, 0);
				pr.ids = NULL;
			}
		}
	}
	free(pr.ids);
	json_decref(body);
}

/* ---------------------------------------------------------------------
 * KV handles
 * ------------------------------------------------------------------- */

/* The handle in /v1/kv/{handle}[/renew]; 0 after a 404 otherwise. */
static int path_handle(wreq_t *q, char out[SC_KV_HANDLE_LEN], const char **rest)
{
	const char *p = sc_http_path(q->req) + strlen("/v1/kv/");
	size_t n = strcspn(p, "/");
	if (n == 0 || n >= SC_KV_HANDLE_LEN || strspn(p, "kv-0123456789abcdef") < n) {
		sc__reply_error(q, 404, "kv_handle", "unknown KV handle");
		return 0;
	}
	memcpy(out, p, n);
	out[n] = '\0';
	*rest = p + n;
	return 1;
}

static void h_kv_get(wreq_t *q)
{
	sc_worker_t *w = q->w;
	char handle[SC_KV_HANDLE_LEN];
	const char *rest;
	if (sc__need_role(q, ROLE_PREFILL) < 0 || !path_handle(q, handle, &rest))
		return;
	sc_kv_entry_t *e = *rest ? NULL : sc_kvstore_touch(w->kv, handle, sc__now_ms());
	if (!e)
		return sc__reply_error(q, 404, "kv_handle", "unknown or expired KV handle %s",
		                       handle);
	w->c.kv_fetches_served++;
	w->c.kv_bytes_served += e->len;
	/* The answer is copied into the connection's output at once, so the
	 * lease restart at the start of the transfer is also the one at its
	 * end here. */
	sc__reply_raw(q, 200, "application/octet-stream", e->block, e->len);
}

static void h_kv_post(wreq_t *q)
{
	sc_worker_t *w = q->w;
	char handle[SC_KV_HANDLE_LEN];
	const char *rest;
	if (sc__need_role(q, ROLE_PREFILL) < 0 || !path_handle(q, handle, &rest))
		return;
	if (strcmp(rest, "/renew") != 0)
		return sc__reply_error(q, 404, "path", "no such path");
	if (!sc_kvstore_touch(w->kv, handle, sc__now_ms()))
		return sc__reply_error(q, 404, "kv_handle", "unknown or expired KV handle %s",
		                       handle);
	sc__reply_json(q, 200,
	               json_pack("{s:s, s:I}", "kv_handle", handle, "lease_ms",
	                         (json_int_t)sc_kvstore_lease_ms(w->kv)));
}

static void h_kv_delete(wreq_t *q)
{
	char handle[SC_KV_HANDLE_LEN];
	const char *rest;
	if (sc__need_role(q, ROLE_PREFILL) < 0 || !path_handle(q, handle, &rest))
		return;
	if (*rest || sc_kvstore_delete(q->w->kv, handle) < 0)
		return sc__reply_error(q, 404, "kv_handle", "unknown KV handle %s", handle);
	sc__reply_raw(q, 204, "application/json", "", 0);
}

/* ---------------------------------------------------------------------
 * Decode
 * ------------------------------------------------------------------- */

static int decode_fields(wreq_t *q, json_t *body, const char **url, int *first, gen_params_t *p)
{
	json_t *u = json_object_get(body, "kv_url"), *ft = json_object_get(body, "first_token");
	const char *s = json_string_value(u);
	if (!s || (strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0) ||
	    strlen(s) > MAX_KV_URL) {
		sc__reply_error(q, 400, "kv_url",
		                "kv_url must be an http:// or https:// URL (at most %d bytes)",
		                MAX_KV_URL);
		return -1;
	}
	if (!json_is_integer(ft) || json_integer_value(ft) < 0 ||
	    json_integer_value(ft) >= q->m->model->cfg.vocab_size) {
		sc__reply_error(q, 400, "first_token",
		                "first_token must be a token id from 0 to %d",
		                q->m->model->cfg.vocab_size - 1);
		return -1;
	}
	const char *fmt = json_string_value(json_object_get(body, "format"));
	if (json_object_get(body, "format") &&
	    (!fmt || (strcmp(fmt, "completion") && strcmp(fmt, "chat")))) {
		sc__reply_error(q, 400, "format", "format must be \"completion\" or \"chat\"");
		return -1;
	}
	p->fmt = fmt && strcmp(fmt, "chat") == 0 ? FMT_CHAT : FMT_COMPLETION;
	*url = s;
	*first = (int)json_integer_value(ft);
	return 0;
}

/* The tokens a retried decode must feed without emitting them (into ids,
 * room for max_tokens): first_token when the client already has it, then
 * generated_ids, the tokens relayed after it. first_token counts as relayed
 * when generated_ids is non-empty or first_token_relayed is true. */
static int decode_forced(wreq_t *q, json_t *body, int first, int max_tokens, int *ids)
{
	json_t *g = json_object_get(body, "generated_ids");
	json_t *fr = json_object_get(body, "first_token_relayed");
	if (g && !json_is_array(g)) {
		sc__reply_error(q, 400, "generated_ids",
		                "generated_ids must be an array of token ids");
		return -1;
	}
	if (fr && !json_is_boolean(fr)) {
		sc__reply_error(q, 400, "first_token_relayed",
		                "first_token_relayed must be a boolean");
		return -1;
	}
	size_t n = json_array_size(g);
	int relayed = fr ? json_is_true(fr) : n > 0;
	if (n > 0 && !relayed) {
		sc__reply_error(q, 400, "first_token_relayed",
		                "generated_ids follow first_token, so first_token_relayed cannot "
		                "be false");
		return -1;
	}
	if (!relayed)
		return 0;
	if (1 + n > (size_t)max_tokens) {
		sc__reply_error(q, 400, "generated_ids",
		                "first_token and generated_ids (%zu) exceed max_tokens (%d)", n,
		                max_tokens);
		return -1;
	}
	ids[0] = first;
	size_t i;
	json_t *v;
	json_array_foreach(g, i, v)
	{
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) >= q->m->model->cfg.vocab_size) {
			sc__reply_error(q, 400, "generated_ids",
			                "generated_ids[%zu] must be a token id from 0 to %d", i,
			                q->m->model->cfg.vocab_size - 1);
			return -1;
		}
		ids[1 + i] = (int)json_integer_value(v);
	}
	return (int)(1 + n);
}

static void h_decode(wreq_t *q)
{
	if (sc__need_role(q, ROLE_DECODE) < 0 || sc__worker_faults(q))
		return;
	json_t *body = sc__body_json(q);
	if (!body || sc__pick_model(q, json_object_get(body, "model")) < 0)
		return json_decref(body);
	int *forced = sc_malloc(((size_t)q->m->max_tokens_cap + 1) * sizeof(int));
	gen_params_t p = {0};
	const char *url;
	int first;
	json_t *flp = json_object_get(body, "first_logprobs");
	if (!forced) {
		sc__reply_error(q, 503, NULL, "out of memory");
	} else if (sc__known_fields(q, body, 1, sc__decode_fields) == 0 &&
	           decode_fields(q, body, &url, &first, &p) == 0 &&
	           sc__gen_params(q, body, &p) == 0) {
		int n = decode_forced(q, body, first, p.max_tokens, forced);
		if (p.n != 1)
			sc__reply_error(q, 400, "n", "a decode takes n = 1");
		else if (flp && !json_is_null(flp) && !json_is_object(flp))
			sc__reply_error(q, 400, "first_logprobs",
			                "first_logprobs must be an object");
		else if (n >= 0)
			sc__gen_decode(q, &p, url, first, forced, n,
			               json_is_object(flp) ? flp : NULL);
	}
	free(forced);
	json_decref(body);
}

void sc__disagg_routes(sc_worker_t *w)
{
	sc__worker_route(w, "POST", "/v1/prefill", h_prefill);
	sc__worker_route(w, "POST", "/v1/decode", h_decode);
	sc__worker_route(w, "GET", "/v1/kv/", h_kv_get);
	sc__worker_route(w, "POST", "/v1/kv/", h_kv_post);
	sc__worker_route(w, "DELETE", "/v1/kv/", h_kv_delete);
}
