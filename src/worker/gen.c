/* Generation jobs. A job lives on the heap from the handler that starts it
 * until its answer is complete or its client is gone. It moves through
 * phases driven by one timer (so the loop keeps serving other requests
 * between tokens) and, for decode, one asynchronous KV fetch:
 *
 *   delay (--latency-ms) -> prefill | fetch KV -> step, step, ... -> finish
 *
 * A step emits one token: the pending one (sampled from the last logits,
 * or forced when a decode retry resends tokens the client already has),
 * then feeds it to the model and picks the next. Output is the same
 * whether it is streamed (SSE) or not, and whether the prompt was
 * prefilled here or on a prefill worker. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "starcloud/buf.h"
#include "base/alloc.h"
#include "starcloud/error.h"
#include "worker/worker_int.h"

struct sc_gen {
	wreq_t q;
	gen_params_t p;
	uv_timer_t timer;
	sc_session_t *sess;
	int *prompt, n_prompt;
	int *forced, n_forced;
	int *out_ids, n_ids; /* emitted ids (max_tokens room) */
	int pending, n_out, prev_tok;
	sc_buf_t text;
	sc_buf_t hold; /* generated text not yet released: may start a stop sequence */
	sc_utf8_t utf8;
	int streaming, fetching, emitted;
	int stopped; /* a stop sequence completed */
	char id[48];
	long long created;
	char *kv_url; /* decode */
};

static void step_cb(uv_timer_t *t);

/* ---------------------------------------------------------------------
 * Lifetime
 * ------------------------------------------------------------------- */

static void on_timer_closed(uv_handle_t *h)
{
	sc_gen_t *g = h->data;
	sc_session_free(g->sess);
	free(g->prompt);
	free(g->forced);
	free(g->out_ids);
	free(g->kv_url);
	sc_buf_free(&g->text);
	sc_buf_free(&g->hold);
	free(g);
}

static void gen_destroy(sc_gen_t *g)
{
	if (!g->q.ended)
		sc__span_end(&g->q, 499); /* client went away */
	uv_close((uv_handle_t *)&g->timer, on_timer_closed);
}

static void on_req_close(sc_http_req_t *r, void *ud)
{
	sc_gen_t *g = ud;
	g->q.req = NULL;
}

static sc_gen_t *gen_new(const wreq_t *q, const gen_params_t *p)
{
	sc_worker_t *w = q->w;
	sc_gen_t *g = sc_xcalloc(1, sizeof(*g));
	if (g) {
		g->sess = sc_session_new(w->model);
		g->out_ids = sc_calloc((size_t)p->max_tokens + 1, sizeof(int));
	}
	if (!g || !g->sess || !g->out_ids) {
		if (g) {
			sc_session_free(g->sess);
			free(g->out_ids);
			free(g);
		}
		wreq_t tmp = *q;
		sc__reply_error(&tmp, 503, NULL, "out of memory for a session");
		return NULL;
	}
	g->q = *q;
	g->p = *p;
	sc_buf_init(&g->text, 0);
	sc_buf_init(&g->hold, 0);
	uv_timer_init(w->loop, &g->timer);
	g->timer.data = g;
	g->prev_tok = SC_TOK_BOS;
	g->created = (long long)time(NULL);
	static unsigned long long seq;
	snprintf(g->id, sizeof(g->id), "%s-%s%llx",
	         p->fmt == FMT_CHAT     ? "chatcmpl"
	         : p->fmt == FMT_KSERVE ? "infer"
	                                : "cmpl",
	         q->span_id, ++seq);
	sc_http_on_close(g->q.req, on_req_close, g);
	return g;
}

/* ---------------------------------------------------------------------
 * Output
 * ------------------------------------------------------------------- */

static json_t *usage_json(const sc_gen_t *g)
{
	return json_pack("{s:i, s:i, s:i}", "prompt_tokens", g->n_prompt, "completion_tokens",
	                 g->n_out, "total_tokens", g->n_prompt + g->n_out);
}

static json_t *ids_json(const int *ids, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_integer(ids[i]));
	return a;
}

/* One streamed chunk: text (valid UTF-8) and the ids it carries; finish
 * NULL until the last. */
static json_t *chunk_json(const sc_gen_t *g, const char *text, size_t len, const int *ids, int n,
                          const char *finish)
{
	sc_worker_t *w = g->q.w;
	json_t *choice;
	if (g->p.fmt == FMT_CHAT) {
		json_t *delta = json_object();
		if (len || !finish)
			json_object_set_new(delta, "content", json_stringn(text, len));
		choice = json_pack("{s:i, s:o}", "index", 0, "delta", delta);
	} else {
		choice = json_pack("{s:i, s:s%, s:n}", "index", 0, "text", text, len, "logprobs");
	}
	json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
	json_object_set_new(choice, "token_ids", ids_json(ids, n));
	json_t *c =
	    json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", g->id, "object",
	              g->p.fmt == FMT_CHAT ? "chat.completion.chunk" : "text_completion", "created",
	              (json_int_t)g->created, "model", w->model_name, "choices", choice);
	if (finish)
		json_object_set_new(c, "usage", usage_json(g));
	return c;
}

static int sse_send(sc_gen_t *g, json_t *obj)
{
	char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	if (!s || !g->q.req)
		return free(s), SC_EIO;
	sc_buf_t b;
	sc_buf_init(&b, 0);
	int rc = sc_buf_printf(&b, "data: %s\n\n", s);
	free(s);
	if (rc == 0)
		rc = sc_http_stream_write(g->q.req, b.data, b.len);
	sc_buf_free(&b);
	return rc;
}

static void stream_begin(sc_gen_t *g)
{
	sc_http_stream_start(g->q.req, 200, "text/event-stream; charset=utf-8", on_req_close, g);
	g->streaming = 1;
	if (g->p.fmt == FMT_CHAT) {
		json_t *c = chunk_json(g, "", 0, NULL, 0, NULL);
		json_t *delta =
		    json_object_get(json_array_get(json_object_get(c, "choices"), 0), "delta");
		json_object_set_new(delta, "role", json_string("assistant"));
		sse_send(g, c);
	}
}

static json_t *final_json(const sc_gen_t *g, const char *finish)
{
	sc_worker_t *w = g->q.w;
	const char *text = g->text.data ? g->text.data : "";
	if (g->p.fmt == FMT_KSERVE) {
		json_t *outs = json_array();
		if (g->p.want_text)
			json_array_append_new(outs,
			                      json_pack("{s:s, s:s, s:[i], s:[s%]}", "name",
			                                "text_output", "datatype", "BYTES", "shape",
			                                1, "data", text, g->text.len));
		if (g->p.want_ids)
			json_array_append_new(outs, json_pack("{s:s, s:s, s:[i], s:o}", "name",
			                                      "output_ids", "datatype", "INT64",
			                                      "shape", g->n_ids, "data",
			                                      ids_json(g->out_ids, g->n_ids)));
		return json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:i, s:i}}", "model_name",
		                 w->model_name, "model_version", w->version, "id",
		                 g->p.req_id[0] ? g->p.req_id : g->id, "outputs", outs,
		                 "parameters", "finish_reason", finish, "prompt_tokens",
		                 g->n_prompt, "completion_tokens", g->n_out);
	}
	json_t *choice;
	if (g->p.fmt == FMT_CHAT)
		choice =
		    json_pack("{s:i, s:{s:s, s:s%}, s:s}", "index", 0, "message", "role",
		              "assistant", "content", text, g->text.len, "finish_reason", finish);
	else
		choice = json_pack("{s:i, s:s%, s:n, s:s}", "index", 0, "text", text, g->text.len,
		                   "logprobs", "finish_reason", finish);
	json_object_set_new(choice, "token_ids", ids_json(g->out_ids, g->n_ids));
	return json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", g->id, "object",
	                 g->p.fmt == FMT_CHAT ? "chat.completion" : "text_completion", "created",
	                 (json_int_t)g->created, "model", w->model_name, "choices", choice, "usage",
	                 usage_json(g));
}

/* What is left to release at the end: nothing after a stop sequence, else
 * the held text with the UTF-8 tail (which may itself complete a stop
 * sequence, and then the reason becomes "stop"). Sets *len. */
static const char *final_text(sc_gen_t *g, const char **reason, size_t *len)
{
	char tail[32];
	size_t n = sc_utf8_feed(&g->utf8, NULL, 0, 1, tail, sizeof(tail));
	*len = 0;
	if (g->stopped)
		return "";
	size_t rel;
	int stop = sc_stop_feed(&g->p.stops, &g->hold, tail, n, &rel);
	if (stop == 1)
		*reason = "stop";
	*len = stop == 1 ? rel : g->hold.len; /* no more text: nothing to wait for */
	return g->hold.data ? g->hold.data : "";
}

static void finish(sc_gen_t *g, const char *reason)
{
	size_t n;
	const char *text = final_text(g, &reason, &n);
	if (g->streaming) {
		if (sse_send(g, chunk_json(g, text, n, NULL, 0, reason)) == 0 && g->q.req)
			sc_http_stream_write(g->q.req, "data: [DONE]\n\n", 14);
		if (g->q.req)
			sc_http_stream_end(g->q.req);
		g->q.req = NULL;
		sc__span_end(&g->q, 200);
	} else {
		if (n)
			sc_buf_append(&g->text, text, n);
		sc__reply_json(&g->q, 200, final_json(g, reason));
	}
	gen_destroy(g);
}

/* Passes new text through the stop sequences; returns how much of the
 * held text may go out now (at its start), or SC_ENOMEM. */
static long release(sc_gen_t *g, const char *clean, size_t n)
{
	size_t rel;
	int stop = sc_stop_feed(&g->p.stops, &g->hold, clean, n, &rel);
	if (stop < 0)
		return stop;
	g->stopped = stop;
	return (long)rel;
}

/* Emits token t: text, id, and the SSE chunk when streaming. */
static int emit(sc_gen_t *g, int t)
{
	sc_worker_t *w = g->q.w;
	size_t plen;
	const char *piece = sc_tokenizer_piece(w->tok, g->prev_tok, t, &plen);
	char clean[3 * 260 + 16];
	size_t n = sc_utf8_feed(&g->utf8, piece, plen > 256 ? 256 : plen, 0, clean, sizeof(clean));
	g->out_ids[g->n_ids++] = t;
	g->emitted++;
	w->c.tokens_generated++;
	long rel = release(g, clean, n);
	if (rel < 0)
		return (int)rel;
	const char *out = g->hold.data ? g->hold.data : "";
	int rc = g->streaming ? sse_send(g, chunk_json(g, out, (size_t)rel, &t, 1, NULL))
	         : rel        ? sc_buf_append(&g->text, out, (size_t)rel)
	                      : 0;
	sc_buf_consume(&g->hold, (size_t)rel);
	return rc;
}

/* A token the client already has: its text is not sent again, but its
 * bytes go through the UTF-8 cleaner so that a character split across the
 * resume point is completed exactly as in an uninterrupted answer. */
static void replay(sc_gen_t *g, int t)
{
	size_t plen;
	const char *piece = sc_tokenizer_piece(g->q.w->tok, g->prev_tok, t, &plen);
	char sink[3 * 260 + 16];
	size_t n = sc_utf8_feed(&g->utf8, piece, plen > 256 ? 256 : plen, 0, sink, sizeof(sink));
	/* The client has what an uninterrupted answer released by now; what
	 * it held back is held here too. */
	long rel = release(g, sink, n);
	if (rel > 0)
		sc_buf_consume(&g->hold, (size_t)rel);
}

/* ---------------------------------------------------------------------
 * Steps
 * ------------------------------------------------------------------- */

/* Feeds t and picks the next pending token; 0 when the cache is full. */
static int advance(sc_gen_t *g, int t)
{
	sc_worker_t *w = g->q.w;
	const float *logits = sc_session_forward(g->sess, t);
	if (!logits)
		return 0;
	w->c.decode_steps++;
	if (g->n_out < g->n_forced) {
		g->pending = g->forced[g->n_out];
		return 1;
	}
	g->pending = sc_sample((float *)logits, w->model->cfg.vocab_size, g->p.temperature,
	                       g->p.top_p, g->p.seed, g->n_out);
	return g->pending >= 0;
}

static void step_cb(uv_timer_t *timer)
{
	sc_gen_t *g = timer->data;
	sc_worker_t *w = g->q.w;
	for (;;) {
		if (!g->q.req)
			return gen_destroy(g);
		int t = g->pending;
		if (t == SC_TOK_EOS)
			return finish(g, "stop");
		int skip = g->n_out < g->n_forced;
		if (skip)
			replay(g, t);
		else if (emit(g, t) < 0) {
			if (g->q.req)
				sc_http_abort(g->q.req);
			g->q.req = NULL;
			return gen_destroy(g);
		}
		g->prev_tok = t;
		g->n_out++;
		if (g->stopped)
			return finish(g, "stop");
		if (!skip && w->fail_decode_after > 0 && g->emitted >= w->fail_decode_after) {
			/* Injected fault: cut the answer mid-way, no terminator. */
			w->c.faults_injected++;
			if (g->q.req)
				sc_http_abort(g->q.req);
			g->q.req = NULL;
			sc__span_end(&g->q, 200);
			return gen_destroy(g);
		}
		if (g->n_out >= g->p.max_tokens || !advance(g, t))
			return finish(g, "length");
		if (!skip)
			break;
	}
	uv_timer_start(&g->timer, step_cb, 0, 0);
}

static void start_steps(sc_gen_t *g)
{
	if (g->p.stream)
		stream_begin(g);
	uv_timer_start(&g->timer, step_cb, 0, 0);
}

/* ---------------------------------------------------------------------
 * Prompt path
 * ------------------------------------------------------------------- */

static void prefill_cb(uv_timer_t *timer)
{
	sc_gen_t *g = timer->data;
	sc_worker_t *w = g->q.w;
	if (!g->q.req)
		return gen_destroy(g);
	const float *logits = NULL;
	for (int i = 0; i < g->n_prompt; i++)
		logits = sc_session_forward(g->sess, g->prompt[i]);
	w->c.prefills++;
	w->c.prefill_tokens += (uint64_t)g->n_prompt;
	if (!logits) {
		sc__reply_error(&g->q, 500, NULL, "forward pass failed");
		return gen_destroy(g);
	}
	g->pending = sc_sample((float *)logits, w->model->cfg.vocab_size, g->p.temperature,
	                       g->p.top_p, g->p.seed, 0);
	if (g->pending < 0) {
		sc__reply_error(&g->q, 503, NULL, "out of memory for sampling");
		return gen_destroy(g);
	}
	if (g->p.fmt == FMT_PREFILL) {
		sc__prefill_reply(&g->q, g->sess, g->n_prompt, g->pending);
		return gen_destroy(g);
	}
	start_steps(g);
}

void sc__gen_prompt(const wreq_t *q, const gen_params_t *p, const int *ids, int n)
{
	sc_gen_t *g = gen_new(q, p);
	if (!g)
		return;
	if (!(g->prompt = sc_malloc((size_t)n * sizeof(int)))) {
		sc__reply_error(&g->q, 503, NULL, "out of memory");
		return gen_destroy(g);
	}
	memcpy(g->prompt, ids, (size_t)n * sizeof(int));
	g->n_prompt = n;
	uv_timer_start(&g->timer, prefill_cb, (uint64_t)q->w->latency_ms, 0);
}

/* ---------------------------------------------------------------------
 * Decode path
 * ------------------------------------------------------------------- */

/* Checks a fetched block against this worker's model and loads it. */
static int load_kv(sc_gen_t *g, const char *body, size_t len, int first_token)
{
	const sc_model_t *m = g->q.w->model;
	sc_kv_header_t h;
	const void *payload;
	char err[256];
	if (sc_kv_parse(body, len, &h, &payload, err, sizeof(err)) < 0) {
		sc__reply_error(&g->q, 502, "kv_url", "%s", err);
		return -1;
	}
	if ((int)h.n_layers != m->cfg.n_layers || (int)h.kv_dim != m->kv_dim ||
	    (int)h.seq_len != m->cfg.seq_len || h.fingerprint != m->fingerprint || h.n_tokens < 1 ||
	    (int)h.n_tokens >= m->cfg.seq_len) {
		sc__reply_error(&g->q, 502, "kv_url", "KV block is for another model");
		return -1;
	}
	if (h.first_token != first_token) {
		sc__reply_error(&g->q, 400, "first_token",
		                "first_token %d does not match the KV handle's %d", first_token,
		                h.first_token);
		return -1;
	}
	sc_session_kv_import(g->sess, (int)h.n_tokens, payload);
	g->n_prompt = (int)h.n_tokens;
	return 0;
}

/* The KV pull finished (status: HTTP status or SC_EIO/SC_ETOOBIG); body is
 * borrowed for this call. */
static void fetch_done(int status, const char *body, size_t len, void *ud)
{
	sc_gen_t *g = ud;
	sc_worker_t *w = g->q.w;
	g->fetching = 0;
	if (!g->q.req)
		return gen_destroy(g);
	if (status != 200) {
		w->c.kv_pull_failures++;
		if (status < 0)
			sc__reply_error(&g->q, 502, "kv_url", "KV fetch failed: %s",
			                status == SC_ETOOBIG ? "block larger than this model's "
			                                       "full context"
			                                     : "connection failed or timed out");
		else
			sc__reply_error(&g->q, 502, "kv_url", "KV fetch answered %d", status);
		return gen_destroy(g);
	}
	if (load_kv(g, body, len, g->pending) < 0) {
		w->c.kv_pull_failures++;
		return gen_destroy(g);
	}
	w->c.kv_pulls++;
	start_steps(g);
}

/* Starts the pull. A client that goes away meanwhile is noticed when the
 * pull ends (at most its 10 s timeout later). */
static void fetch_cb(uv_timer_t *timer)
{
	sc_gen_t *g = timer->data;
	sc_worker_t *w = g->q.w;
	if (!g->q.req)
		return gen_destroy(g);
	sc_httpc_opts_t o = {.url = g->kv_url,
	                     .timeout_ms = 10000,
	                     .max_body = SC_KV_HEADER +
	                                 sc_session_kv_bytes(w->model, w->model->cfg.seq_len),
	                     .done = fetch_done,
	                     .ud = g};
	g->fetching = 1;
	if (!sc_httpc_start(w->httpc, &o)) {
		g->fetching = 0;
		sc__reply_error(&g->q, 503, NULL, "cannot start the KV fetch");
		gen_destroy(g);
	}
}

void sc__gen_decode(const wreq_t *q, const gen_params_t *p, const char *kv_url, int first_token,
                    const int *forced, int n_forced)
{
	sc_gen_t *g = gen_new(q, p);
	if (!g)
		return;
	g->kv_url = sc_strdup(kv_url);
	g->forced = sc_malloc(((size_t)n_forced + 1) * sizeof(int));
	if (!g->kv_url || !g->forced) {
		sc__reply_error(&g->q, 503, NULL, "out of memory");
		return gen_destroy(g);
	}
	memcpy(g->forced, forced, (size_t)n_forced * sizeof(int));
	g->n_forced = n_forced;
	g->pending = first_token;
	q->w->c.decode_requests++;
	uv_timer_start(&g->timer, fetch_cb, (uint64_t)q->w->latency_ms, 0);
}
