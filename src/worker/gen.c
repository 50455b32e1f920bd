/* Generation requests: a job per request, a sequence per prompt and
 * choice, run by the model's batcher (batch.c).
 *
 *   start: (--latency-ms) -> [decode: fetch the KV] -> queued in the batcher
 *   batcher: admitted (KV cache) -> fed the prompt in chunks -> a token
 *            per step: picked, emitted, fed -> done
 *   end: the answer (JSON, or the last SSE events) once every sequence is
 *        done; a client that goes away cancels every sequence at once and
 *        its KV caches are freed on the next loop turn.
 *
 * A sequence emits a token as soon as it is picked: its text goes through
 * the UTF-8 cleaner and the stop sequences (what may still grow into one
 * is held back), then out as an SSE chunk or into the answer. Tokens the
 * client already has (a resumed stream) are replayed through the same
 * text pipeline without being sent, then fed with the prompt, so the rest
 * is exactly what an unbroken answer would have said. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "starcloud/buf.h"
#include "base/alloc.h"
#include "starcloud/error.h"
#include "worker/gen.h"

static void job_cancel(sc_job_t *j);

/* ---------------------------------------------------------------------
 * Lifetime
 * ------------------------------------------------------------------- */

static void seq_free(sc_seq_t *s)
{
	sc_session_free(s->sess);
	free(s->feed);
	free(s->out_ids);
	free(s->logits);
	free(s->hidden);
	free(s->kv_block);
	json_decref(s->lps);
	sc_buf_free(&s->text);
	sc_buf_free(&s->hold);
}

static void on_timer_closed(uv_handle_t *h)
{
	sc_job_t *j = h->data;
	for (int i = 0; i < j->nseq; i++)
		seq_free(&j->seqs[i]);
	free(j->seqs);
	free(j->kv_url);
	free(j->scratch);
	sc__wmodel_unref(j->q.m);
	free(j);
}

/* Frees the job once its answer is over and the batcher holds none of its
 * sequences; a sequence in a batcher list is released by its sweep. */
static void job_maybe_free(sc_job_t *j)
{
	if (j->freeing || !j->answered || j->inb > 0 || j->fetch)
		return;
	j->freeing = 1;
	uv_close((uv_handle_t *)&j->timer, on_timer_closed);
}

static void on_req_close(sc_http_req_t *r, void *ud)
{
	sc_job_t *j = ud;
	j->q.req = NULL;
	job_cancel(j);
}

static uint64_t choice_seed(uint64_t seed, int c)
{
	/* Choice 0 keeps the request's seed: n = 1 answers as before. */
	if (c == 0)
		return seed;
	uint64_t z = seed + 0x9e3779b97f4a7c15ull * (uint64_t)c;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	return z ^ (z >> 31);
}

static sc_job_t *job_new(const wreq_t *q, const gen_params_t *p, int nseq)
{
	sc_worker_t *w = q->w;
	sc_job_t *j = sc_calloc(1, sizeof(*j));
	if (j)
		j->seqs = sc_calloc((size_t)nseq, sizeof(*j->seqs));
	if (!j || !j->seqs) {
		free(j);
		wreq_t tmp = *q;
		sc__reply_error(&tmp, 503, NULL, "out of memory for a request");
		return NULL;
	}
	j->q = *q;
	j->p = *p;
	j->nseq = j->nlive = nseq;
	j->q.m->refs++;
	uv_timer_init(w->loop, &j->timer);
	j->timer.data = j;
	j->created = (long long)time(NULL);
	static unsigned long long seq;
	snprintf(j->id, sizeof(j->id), "%s-%s%llx",
	         p->fmt == FMT_CHAT     ? "chatcmpl"
	         : p->fmt == FMT_KSERVE ? "infer"
	         : p->fmt == FMT_EMBED  ? "embd"
	                                : "cmpl",
	         q->span_id, ++seq);
	sc_http_on_close(j->q.req, on_req_close, j);
	return j;
}

static int sc__seq_admitted(sc_seq_t *s);
static void sc__seq_after_step(sc_seq_t *s, float *logits);
static void sc__seq_fail(sc_seq_t *s, int status, const char *msg);
static void sc__seq_released(sc_seq_t *s);

static const sc_seq_ops_t seq_ops = {
    .admitted = sc__seq_admitted,
    .after_step = sc__seq_after_step,
    .fail = sc__seq_fail,
    .released = sc__seq_released,
};

/* Sets up sequence i for feed (copied, n ids: the prompt, n_prompt of
 * them, then forced ones). 0, or SC_ENOMEM. */
static int seq_init(sc_job_t *j, int i, int prompt, const int *feed, int n, int n_prompt)
{
	const sc_model_t *m = j->q.m->model;
	sc_seq_t *s = &j->seqs[i];
	s->ops = &seq_ops;
	s->job = j;
	s->index = i;
	s->prompt = prompt;
	s->prev_tok = SC_TOK_BOS;
	s->n_prompt = n_prompt;
	s->n_forced = n - n_prompt;
	s->seed = choice_seed(j->p.seed, i % (j->p.n > 0 ? j->p.n : 1));
	sc_buf_init(&s->text, 0);
	sc_buf_init(&s->hold, 0);
	s->feed = sc_malloc(((size_t)n + 1) * sizeof(int));
	s->logits = sc_malloc((size_t)m->cfg.vocab_size * sizeof(float));
	if (j->p.fmt == FMT_EMBED)
		s->hidden = sc_calloc((size_t)m->cfg.dim, sizeof(double));
	else
		s->out_ids = sc_calloc((size_t)j->p.max_tokens + 1, sizeof(int));
	if (!s->feed || !s->logits || (!s->hidden && !s->out_ids))
		return SC_ENOMEM;
	memcpy(s->feed, feed, (size_t)n * sizeof(int));
	s->n_feed = n;
	return 0;
}

/* ---------------------------------------------------------------------
 * Output
 * ------------------------------------------------------------------- */

static int sse_send(sc_job_t *j, json_t *obj)
{
	char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	if (!s || !j->q.req)
		return free(s), SC_EIO;
	sc_buf_t b;
	sc_buf_init(&b, 0);
	int rc = sc_buf_printf(&b, "data: %s\n\n", s);
	free(s);
	if (rc == 0)
		rc = sc_http_stream_write(j->q.req, b.data, b.len);
	sc_buf_free(&b);
	return rc;
}

/* Opens the event stream at the first output; a chat stream starts every
 * choice with a delta that carries the role. */
static int stream_begin(sc_job_t *j)
{
	if (j->streaming)
		return 0;
	if (!j->q.req)
		return SC_EIO;
	j->streaming = 1;
	sc_http_stream_start(j->q.req, 200, "text/event-stream; charset=utf-8", on_req_close, j);
	/* A resumed answer's client has the role already. */
	if (j->p.fmt != FMT_CHAT || (j->nseq == 1 && j->seqs[0].n_forced > 0))
		return 0;
	for (int i = 0; i < j->nseq; i++)
		if (sse_send(j, sc__chunk_json(&j->seqs[i], "", 0, NULL, 0, NULL, NULL)) < 0)
			return SC_EIO;
	return 0;
}

/* A non-streamed JSON answer opens with its head at the first token and
 * then sends a blank every HEARTBEAT_MS until the JSON (leading blanks are
 * valid JSON): a gateway sees at once that the replica answers, and from
 * then on that it is alive, so a long generation is not taken for a hung
 * replica while a hung one is found within the gateway's idle timeout.
 * Binary KServe answers need their header length in the head, and
 * embeddings and prefills answer at once: they are sent whole. */
#define HEARTBEAT_MS 1000

static void on_heartbeat(uv_timer_t *t)
{
	sc_job_t *j = t->data;
	if (j->q.req && sc_http_stream_write(j->q.req, " ", 1) < 0)
		job_cancel(j);
}

static void answer_begin(sc_job_t *j)
{
	if (j->early || j->streaming || j->p.stream || !j->q.req || j->p.fmt == FMT_EMBED ||
	    j->p.fmt == FMT_PREFILL || (j->p.fmt == FMT_KSERVE && j->p.binary_out))
		return;
	j->early = 1;
	sc_http_stream_start(j->q.req, 200, "application/json", on_req_close, j);
	uv_timer_start(&j->timer, on_heartbeat, HEARTBEAT_MS, HEARTBEAT_MS);
}

/* What is left to release at the end: nothing after a stop sequence, else
 * the held text with the UTF-8 tail (which may itself complete a stop
 * sequence, and then the reason becomes "stop"). Sets *len. */
static const char *final_text(sc_seq_t *s, const char **reason, size_t *len)
{
	char tail[32];
	size_t n = sc_utf8_feed(&s->utf8, NULL, 0, 1, tail, sizeof(tail));
	*len = 0;
	if (s->stopped)
		return "";
	size_t rel;
	int stop = sc_stop_feed(&s->job->p.stops, &s->hold, tail, n, &rel);
	if (stop == 1)
		*reason = "stop";
	*len = stop == 1 ? rel : s->hold.len; /* no more text: nothing to wait for */
	return s->hold.data ? s->hold.data : "";
}

/* Every sequence is done: the answer, or the end of the stream. */
static void job_complete(sc_job_t *j)
{
	wreq_t *q = &j->q;
	if (j->answered)
		return;
	j->answered = 1;
	if (j->streaming) {
		int rc = 0;
		if (j->p.include_usage)
			rc = sse_send(j, sc__usage_chunk_json(j));
		if (rc == 0 && q->req && j->p.fmt != FMT_GENERATE)
			sc_http_stream_write(q->req, "data: [DONE]\n\n", 14);
		if (q->req)
			sc_http_stream_end(q->req);
		q->req = NULL;
		sc__span_end(q, 200);
	} else if (j->early) {
		uv_timer_stop(&j->timer);
		json_t *doc = sc_xcheck(sc__final_json(j));
		char *body = sc_xcheck(json_dumps(doc, JSON_COMPACT));
		json_decref(doc);
		if (q->req) {
			sc_http_stream_write(q->req, body, strlen(body));
			sc_http_stream_end(q->req);
		}
		free(body);
		q->req = NULL;
		sc__span_end(q, 200);
	} else if (j->p.fmt == FMT_KSERVE && j->p.binary_out) {
		size_t len, hlen;
		unsigned char *body = sc__kserve_binary(j, &len, &hlen);
		char h[32];
		snprintf(h, sizeof(h), "%zu", hlen);
		if (!body) {
			sc__reply_error(q, 503, NULL, "out of memory for the answer");
		} else {
			if (q->req)
				sc_http_set_header(q->req, "Inference-Header-Content-Length", h);
			sc__reply_raw(q, 200, "application/octet-stream", body, len);
		}
		free(body);
	} else if (j->p.fmt == FMT_EMBED) {
		sc__reply_json(q, 200, sc__embed_json(j));
	} else {
		sc__reply_json(q, 200, sc__final_json(j));
	}
}

/* Ends sequence s with reason; the last one completes the answer. */
static void seq_finish(sc_seq_t *s, const char *reason)
{
	sc_job_t *j = s->job;
	if (s->state == SEQ_DONE)
		return;
	size_t n = 0;
	const char *text = s->out_ids ? final_text(s, &reason, &n) : "";
	s->state = SEQ_DONE;
	s->finish = reason;
	j->nlive--;
	if (j->p.fmt == FMT_PREFILL) {
		/* answered by sc__prefill_reply */
	} else if (j->p.stream) {
		if (stream_begin(j) < 0 ||
		    sse_send(j, sc__chunk_json(s, text, n, NULL, 0, NULL, reason)) < 0)
			return job_cancel(j);
	} else if (n) {
		sc_buf_append(&s->text, text, n);
	}
	if (j->nlive == 0)
		job_complete(j);
	if (j->inb)
		sc__batcher_kick(j->q.m->batch); /* free its KV cache now */
	job_maybe_free(j);
}

/* The client is gone, or cannot keep up: every sequence ends now. */
static void job_cancel(sc_job_t *j)
{
	sc_worker_t *w = j->q.w;
	if (j->q.req) {
		sc_http_abort(j->q.req);
		j->q.req = NULL;
	}
	if (!j->answered) {
		w->c.cancelled++;
		j->answered = 1;
		sc__span_end(&j->q, 499);
	}
	for (int i = 0; i < j->nseq; i++)
		if (j->seqs[i].state != SEQ_DONE) {
			j->seqs[i].state = SEQ_DONE;
			j->nlive--;
		}
	uv_timer_stop(&j->timer);
	if (j->fetch) {
		sc_hcli_req_t *f = j->fetch;
		j->fetch = NULL;
		sc_hcli_cancel(f); /* fetch_done runs inside and leaves j to us */
	}
	if (j->inb)
		sc__batcher_kick(j->q.m->batch);
	job_maybe_free(j);
}

/* Passes new text through the stop sequences; returns how much of the
 * held text may go out now (at its start), or SC_ENOMEM. */
static long release(sc_seq_t *s, const char *clean, size_t n)
{
	size_t rel;
	int stop = sc_stop_feed(&s->job->p.stops, &s->hold, clean, n, &rel);
	if (stop < 0)
		return stop;
	s->stopped = stop;
	return (long)rel;
}

/* Emits token t: text, id, logprobs, and the SSE chunk when streaming. */
static int emit(sc_seq_t *s, int t, const seq_lp_t *lp)
{
	sc_job_t *j = s->job;
	sc_worker_t *w = j->q.w;
	size_t plen;
	const char *piece = sc_tokenizer_piece(j->q.m->tok, s->prev_tok, t, &plen);
	char clean[3 * 260 + 16];
	size_t n = sc_utf8_feed(&s->utf8, piece, plen > 256 ? 256 : plen, 0, clean, sizeof(clean));
	s->out_ids[s->n_ids++] = t;
	w->c.tokens_generated++;
	long rel = release(s, clean, n);
	if (rel < 0)
		return (int)rel;
	const char *out = s->hold.data ? s->hold.data : "";
	int rc = 0;
	if (j->p.stream) {
		rc = stream_begin(j);
		if (rc == 0)
			rc = sse_send(j, sc__chunk_json(s, out, (size_t)rel, &t, 1, lp, NULL));
	} else {
		answer_begin(j);
		if (lp)
			sc__lp_append(s, t, lp);
		if (rel)
			rc = sc_buf_append(&s->text, out, (size_t)rel);
	}
	sc_buf_consume(&s->hold, (size_t)rel);
	s->chunks++;
	s->toff += n;
	return rc;
}

/* A token the client already has: its text is not sent again, but its
 * bytes go through the UTF-8 cleaner and the stop sequences so that the
 * rest continues exactly as an uninterrupted answer. Returns 1 when the
 * sequence is done by it. */
static int replay(sc_seq_t *s, int t)
{
	if (t == SC_TOK_EOS) {
		seq_finish(s, "stop");
		return 1;
	}
	size_t plen;
	const char *piece = sc_tokenizer_piece(s->job->q.m->tok, s->prev_tok, t, &plen);
	char sink[3 * 260 + 16];
	size_t n = sc_utf8_feed(&s->utf8, piece, plen > 256 ? 256 : plen, 0, sink, sizeof(sink));
	/* The client has what an uninterrupted answer released by now; what
	 * it held back is held here too. */
	long rel = release(s, sink, n);
	if (rel > 0)
		sc_buf_consume(&s->hold, (size_t)rel);
	s->out_ids[s->n_ids++] = t;
	s->prev_tok = t;
	s->n_out++;
	if (s->stopped) {
		seq_finish(s, "stop");
		return 1;
	}
	if (s->n_out >= s->job->p.max_tokens) {
		seq_finish(s, "length");
		return 1;
	}
	return 0;
}

/* Sequence s picked (or was given) token t: emit it and go on, or end. */
static void take(sc_seq_t *s, int t, const seq_lp_t *lp)
{
	sc_job_t *j = s->job;
	sc_worker_t *w = j->q.w;
	if (t == SC_TOK_EOS)
		return seq_finish(s, "stop");
	if (emit(s, t, lp) < 0)
		return job_cancel(j);
	s->prev_tok = t;
	s->n_out++;
	if (s->stopped)
		return seq_finish(s, "stop");
	if (w->fail_decode_after > 0 && (long)(s->n_out - s->n_forced) >= w->fail_decode_after) {
		/* Injected fault: cut the answer mid-way, no terminator. */
		w->c.faults_injected++;
		if (j->q.req)
			sc_http_abort(j->q.req);
		j->q.req = NULL;
		sc__span_end(&j->q, 200);
		j->answered = 1;
		return job_cancel(j);
	}
	if (s->n_out >= j->p.max_tokens || s->sess->pos >= j->q.m->model->cfg.seq_len)
		return seq_finish(s, "length");
	s->pending = t;
	s->state = SEQ_DECODING;
}

/* ---------------------------------------------------------------------
 * The batcher's callbacks
 * ------------------------------------------------------------------- */

static void sc__seq_after_step(sc_seq_t *s, float *logits)
{
	sc_job_t *j = s->job;
	const sc_model_t *m = j->q.m->model;
	int vocab = m->cfg.vocab_size;
	if (!logits) { /* embeddings: the hidden states are summed */
		j->q.w->c.embeddings++;
		return seq_finish(s, "stop");
	}
	seq_lp_t lp, *lpp = NULL;
	if (j->p.logprobs >= 0)
		memcpy(j->scratch, logits, (size_t)vocab * sizeof(float));
	int t = sc_sample(logits, vocab, j->p.temperature, j->p.top_p, s->seed, s->n_out);
	if (t < 0)
		return sc__seq_fail(s, 503, "out of memory for sampling");
	if (j->p.logprobs >= 0) {
		/* The model's own distribution, before temperature and nucleus
		 * (as vLLM's raw logprobs). */
		int k = j->p.logprobs < vocab ? j->p.logprobs : vocab;
		lp.ntop = k;
		lp.lp = sc_logprobs(j->scratch, vocab, t, k, lp.top, lp.top_lp);
		lpp = &lp;
	}
	if (j->p.fmt == FMT_PREFILL) {
		s->state = SEQ_DONE;
		j->nlive--;
		j->answered = 1;
		sc__prefill_reply(&j->q, s->sess, s->n_prompt, t,
		                  lpp ? sc__lp_json(j, t, lpp) : NULL);
		sc__batcher_kick(j->q.m->batch);
		return;
	}
	take(s, t, lpp);
}

static int sc__seq_admitted(sc_seq_t *s)
{
	sc_job_t *j = s->job;
	if (!s->kv_block)
		return 0;
	sc_session_kv_import(s->sess, s->kv_tokens, s->kv_block + SC_KV_HEADER);
	free(s->kv_block);
	s->kv_block = NULL;
	if (s->n_feed == 0) {
		/* first_token is new to the client: it goes out first. */
		take(s, j->first_token, j->first_lp_set ? &j->first_lp : NULL);
		return s->state == SEQ_DONE ? SC_EIO : 0;
	}
	return 0;
}

static void sc__seq_fail(sc_seq_t *s, int status, const char *msg)
{
	sc_job_t *j = s->job;
	if (j->streaming || j->early || j->answered) {
		/* Half an answer went out: cut it, never a complete-looking one. */
		return job_cancel(j);
	}
	j->answered = 1;
	sc__reply_error(&j->q, status, NULL, "%s", msg);
	job_cancel(j);
}

static void sc__seq_released(sc_seq_t *s)
{
	sc_job_t *j = s->job;
	j->inb--;
	job_maybe_free(j);
}

/* ---------------------------------------------------------------------
 * Starting
 * ------------------------------------------------------------------- */

/* Queues every sequence that is not done yet. */
static void job_enqueue(sc_job_t *j)
{
	sc_batcher_t *b = j->q.m->batch;
	for (int i = 0; i < j->nseq; i++) {
		sc_seq_t *s = &j->seqs[i];
		if (s->state == SEQ_DONE)
			continue;
		if (sc__batcher_add(b, s) < 0) {
			j->q.w->c.queue_full++;
			if (j->q.req)
				sc_http_set_header(j->q.req, "Retry-After", "1");
			return sc__seq_fail(s, 429, "the worker's queue is full (--max-queue)");
		}
		j->inb++;
	}
}

static void on_start(uv_timer_t *t)
{
	sc_job_t *j = t->data;
	if (j->answered)
		return;
	job_enqueue(j);
}

void sc__gen_start(const wreq_t *q, const gen_params_t *p, gen_prompts_t *pr, const int *forced,
                   int n_forced)
{
	int per = p->fmt == FMT_EMBED || p->fmt == FMT_PREFILL || p->n < 1 ? 1 : p->n;
	sc_job_t *j = job_new(q, p, pr->n * per);
	if (!j) {
		free(pr->ids);
		return;
	}
	const sc_model_t *m = q->m->model;
	int rc = 0, *tmp = sc_malloc(((size_t)m->cfg.seq_len + (size_t)n_forced + 1) * sizeof(int));
	if (p->logprobs >= 0 &&
	    !(j->scratch = sc_malloc((size_t)m->cfg.vocab_size * sizeof(float))))
		rc = SC_ENOMEM;
	for (int i = 0; rc == 0 && i < pr->n; i++) {
		int n = pr->off[i + 1] - pr->off[i];
		j->n_prompt_total += n;
		if (!tmp) {
			rc = SC_ENOMEM;
			break;
		}
		memcpy(tmp, pr->ids + pr->off[i], (size_t)n * sizeof(int));
		if (n_forced > 0)
			memcpy(tmp + n, forced, (size_t)n_forced * sizeof(int));
		for (int c = 0; rc == 0 && c < per; c++)
			rc = seq_init(j, i * per + c, i, tmp, n + n_forced, n);
	}
	free(tmp);
	free(pr->ids);
	pr->ids = NULL;
	if (rc < 0) {
		j->answered = 1;
		sc__reply_error(&j->q, 503, NULL, "out of memory for a request");
		return job_cancel(j);
	}
	/* Tokens the client already has (one sequence only). */
	if (n_forced > 0) {
		sc_seq_t *s = &j->seqs[0];
		for (int i = 0; i < n_forced; i++)
			if (replay(s, forced[i]))
				break;
		if (s->state == SEQ_DONE)
			return; /* the answer was complete already */
	}
	uv_timer_start(&j->timer, on_start, (uint64_t)q->w->latency_ms, 0);
}

/* ---------------------------------------------------------------------
 * Decode path
 * ------------------------------------------------------------------- */

/* Checks a fetched block against this model and keeps it for admission. */
static int keep_kv(sc_job_t *j, const char *body, size_t len)
{
	const sc_model_t *m = j->q.m->model;
	sc_seq_t *s = &j->seqs[0];
	sc_kv_header_t h;
	const void *payload;
	char err[256];
	if (sc_kv_parse(body, len, &h, &payload, err, sizeof(err)) < 0) {
		sc__reply_error(&j->q, 502, "kv_url", "%s", err);
		return -1;
	}
	if ((int)h.n_layers != m->cfg.n_layers || (int)h.kv_dim != m->kv_dim ||
	    (int)h.seq_len != m->cfg.seq_len || h.fingerprint != m->fingerprint || h.n_tokens < 1 ||
	    (int)h.n_tokens >= m->cfg.seq_len) {
		sc__reply_error(&j->q, 502, "kv_url", "KV block is for another model");
		return -1;
	}
	if (h.first_token != j->first_token) {
		sc__reply_error(&j->q, 400, "first_token",
		                "first_token %d does not match the KV handle's %d", j->first_token,
		                h.first_token);
		return -1;
	}
	if ((int)h.n_tokens + s->n_feed >= m->cfg.seq_len) {
		sc__reply_error(&j->q, 400, "generated_ids",
		                "the KV handle's %u tokens and generated_ids fill the context",
		                h.n_tokens);
		return -1;
	}
	if (!(s->kv_block = sc_malloc(len))) {
		sc__reply_error(&j->q, 503, NULL, "out of memory for the KV block");
		return -1;
	}
	memcpy(s->kv_block, body, len);
	s->kv_len = len;
	s->kv_tokens = (int)h.n_tokens;
	s->n_prompt = (int)h.n_tokens;
	j->n_prompt_total = (int)h.n_tokens;
	return 0;
}

/* The KV pull finished (status: HTTP status or SC_E*, net/hfetch.h); body is
 * borrowed for this call. */
static void fetch_done(int status, const char *body, size_t len, void *ud)
{
	sc_job_t *j = ud;
	sc_worker_t *w = j->q.w;
	j->fetch = NULL;
	if (status == SC_ECANCELED)
		return; /* job_cancel, or the client closing: the job is theirs */
	if (j->answered)
		return job_maybe_free(j);
	if (status != 200 || keep_kv(j, body, len) < 0) {
		w->c.kv_pull_failures++;
		if (status < 0)
			sc__reply_error(&j->q, 502, "kv_url", "KV fetch failed: %s",
			                status == SC_ETOOBIG ? "block larger than this model's "
			                                       "full context"
			                                     : "connection failed or timed out");
		else if (status != 200)
			sc__reply_error(&j->q, 502, "kv_url", "KV fetch answered %d", status);
		j->answered = 1;
		return job_cancel(j);
	}
	w->c.kv_pulls++;
	job_enqueue(j);
}

/* Starts the pull; a client that goes away meanwhile cancels it. */
static void on_fetch(uv_timer_t *timer)
{
	sc_job_t *j = timer->data;
	sc_worker_t *w = j->q.w;
	const sc_model_t *m = j->q.m->model;
	if (j->answered)
		return;
	sc_hfetch_t o = {.url = j->kv_url,
	                 .timeout_ms = 10000,
	                 .max_body = SC_KV_HEADER + sc_session_kv_bytes(m, m->cfg.seq_len),
	                 .done = fetch_done,
	                 .ud = j};
	if (sc_hfetch(w->hcli, &o, &j->fetch) < 0) {
		j->fetch = NULL;
		j->answered = 1;
		sc__reply_error(&j->q, 503, NULL, "cannot start the KV fetch");
		job_cancel(j);
	}
}

void sc__gen_decode(const wreq_t *q, const gen_params_t *p, const char *kv_url, int first_token,
                    const int *forced, int n_forced, json_t *first_lp)
{
	sc_job_t *j = job_new(q, p, 1);
	if (!j)
		return;
	const sc_model_t *m = q->m->model;
	q->w->c.decode_requests++;
	j->first_token = first_token;
	j->kv_url = sc_strdup(kv_url);
	int rc = j->kv_url ? seq_init(j, 0, 0, forced, n_forced, 0) : SC_ENOMEM;
	if (rc == 0 && p->logprobs >= 0 &&
	    !(j->scratch = sc_malloc((size_t)m->cfg.vocab_size * sizeof(float))))
		rc = SC_ENOMEM;
	if (rc < 0) {
		j->answered = 1;
		sc__reply_error(&j->q, 503, NULL, "out of memory");
		return job_cancel(j);
	}
	if (first_lp && p->logprobs >= 0) {
		if (sc__lp_parse(j, first_lp, &j->first_lp) < 0) {
			j->answered = 1;
			sc__reply_error(
			    &j->q, 400, "first_logprobs",
			    "first_logprobs must be {\"logprob\", \"top\": [[id, logprob], "
			    "...]} as the prefill answered it");
			return job_cancel(j);
		}
		j->first_lp_set = 1;
	}
	sc_seq_t *s = &j->seqs[0];
	for (int i = 0; i < n_forced; i++)
		if (replay(s, forced[i]))
			return; /* the client has the whole answer already */
	uv_timer_start(&j->timer, on_fetch, (uint64_t)q->w->latency_ms, 0);
}
