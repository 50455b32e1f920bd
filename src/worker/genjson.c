/* The JSON shapes of generation answers: OpenAI completions and chat
 * (whole and streamed, with logprobs and usage), KServe v2 infer (JSON and
 * the binary tensor extension) and generate, embeddings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "starcloud/buf.h"
#include "worker/gen.h"

/* ---------------------------------------------------------------------
 * Pieces
 * ------------------------------------------------------------------- */

static json_t *ids_json(const int *ids, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_integer(ids[i]));
	return a;
}

static json_t *usage_json(const sc_job_t *j)
{
	int out = 0;
	for (int i = 0; i < j->nseq; i++)
		out += j->seqs[i].n_out;
	return json_pack("{s:i, s:i, s:i}", "prompt_tokens", j->n_prompt_total, "completion_tokens",
	                 out, "total_tokens", j->n_prompt_total + out);
}

/* A token's text as a JSON string: its bytes after prev, with invalid
 * UTF-8 (a byte token in the middle of a character) as U+FFFD. */
static json_t *piece_json(const sc_job_t *j, int prev, int t, json_t **bytes)
{
	size_t plen;
	const char *piece = sc_tokenizer_piece(j->q.m->tok, prev, t, &plen);
	if (plen > 256)
		plen = 256;
	char clean[3 * 260 + 16];
	sc_utf8_t u = {0};
	size_t n = sc_utf8_feed(&u, piece, plen, 1, clean, sizeof(clean));
	if (bytes) {
		*bytes = json_array();
		for (size_t i = 0; i < plen; i++)
			json_array_append_new(*bytes, json_integer((unsigned char)piece[i]));
	}
	return json_stringn(clean, n);
}

/* Chat's logprobs entry: {token, logprob, bytes, top_logprobs: [...]}. */
static json_t *chat_lp(const sc_job_t *j, int prev, int t, const seq_lp_t *lp)
{
	json_t *bytes, *tops = json_array();
	json_t *tok = piece_json(j, prev, t, &bytes);
	for (int i = 0; i < lp->ntop; i++) {
		json_t *b;
		json_t *s = piece_json(j, prev, lp->top[i], &b);
		json_array_append_new(tops, json_pack("{s:o, s:f, s:o}", "token", s, "logprob",
		                                      (double)lp->top_lp[i], "bytes", b));
	}
	return json_pack("{s:o, s:f, s:o, s:o}", "token", tok, "logprob", (double)lp->lp, "bytes",
	                 bytes, "top_logprobs", tops);
}

/* Completions' logprobs for one token, as four parallel one-element
 * arrays (tokens, token_logprobs, top_logprobs, text_offset). */
static void compl_lp_add(json_t *o, const sc_job_t *j, int prev, int t, const seq_lp_t *lp,
                         size_t off)
{
	json_t *top = json_object();
	for (int i = 0; i < lp->ntop; i++) {
		json_t *s = piece_json(j, prev, lp->top[i], NULL);
		if (json_string_value(s) && !json_object_get(top, json_string_value(s)))
			json_object_set_new(top, json_string_value(s),
			                    json_real((double)lp->top_lp[i]));
		json_decref(s);
	}
	json_array_append_new(json_object_get(o, "tokens"), piece_json(j, prev, t, NULL));
	json_array_append_new(json_object_get(o, "token_logprobs"), json_real((double)lp->lp));
	json_array_append_new(json_object_get(o, "top_logprobs"), top);
	json_array_append_new(json_object_get(o, "text_offset"), json_integer((json_int_t)off));
}

static json_t *compl_lp_new(void)
{
	return json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs",
	                 "text_offset");
}

void sc__lp_append(sc_seq_t *s, int token, const seq_lp_t *lp)
{
	const sc_job_t *j = s->job;
	if (j->p.fmt == FMT_CHAT) {
		if (!s->lps)
			s->lps = json_pack("{s:[]}", "content");
		json_array_append_new(json_object_get(s->lps, "content"),
		                      chat_lp(j, s->prev_tok, token, lp));
	} else {
		if (!s->lps)
			s->lps = compl_lp_new();
		compl_lp_add(s->lps, j, s->prev_tok, token, lp, s->toff);
	}
}

/* ---------------------------------------------------------------------
 * Streams
 * ------------------------------------------------------------------- */

static const char *chunk_object(const sc_job_t *j)
{
	return j->p.fmt == FMT_CHAT ? "chat.completion.chunk" : "text_completion";
}

json_t *sc__chunk_json(const sc_seq_t *s, const char *text, size_t len, const int *ids, int n,
                       const seq_lp_t *lp, const char *finish)
{
	const sc_job_t *j = s->job;
	const sc_wmodel_t *m = j->q.m;
	if (j->p.fmt == FMT_GENERATE) {
		json_t *c = json_pack("{s:s, s:s, s:s%}", "model_name", m->name, "model_version",
		                      m->version, "text_output", text, len);
		if (finish)
			json_object_set_new(c, "finish_reason", json_string(finish));
		return c;
	}
	json_t *choice, *lpj = json_null();
	if (j->p.fmt == FMT_CHAT) {
		json_t *delta = json_object();
		if (!ids && !finish) /* the first chunk of a choice: the role */
			json_object_set_new(delta, "role", json_string("assistant"));
		if (len || !finish)
			json_object_set_new(delta, "content", json_stringn(text, len));
		choice = json_pack("{s:i, s:o}", "index", s->index, "delta", delta);
		if (lp && n == 1)
			lpj = json_pack("{s:[o]}", "content", chat_lp(j, s->prev_tok, ids[0], lp));
	} else {
		choice = json_pack("{s:i, s:s%}", "index", s->index, "text", text, len);
		if (lp && n == 1) {
			lpj = compl_lp_new();
			compl_lp_add(lpj, j, s->prev_tok, ids[0], lp, s->toff);
		}
	}
	json_object_set_new(choice, "logprobs", lpj);
	json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
	json_object_set_new(choice, "token_ids", ids_json(ids, ids ? n : 0));
	return json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", j->id, "object", chunk_object(j),
	                 "created", (json_int_t)j->created, "model", m->name, "choices", choice);
}

json_t *sc__usage_chunk_json(const sc_job_t *j)
{
	return json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", j->id, "object", chunk_object(j),
	                 "created", (json_int_t)j->created, "model", j->q.m->name, "choices",
	                 "usage", usage_json(j));
}

/* ---------------------------------------------------------------------
 * Whole answers
 * ------------------------------------------------------------------- */

static const char *seq_text(const sc_seq_t *s)
{
	return s->text.data ? s->text.data : "";
}

/* KServe infer: one row per prompt (batch); without a batch dimension in
 * the request the shapes are those of a single sequence ([1] and [n]). */
static json_t *kserve_outputs(const sc_job_t *j, int with_data)
{
	json_t *outs = json_array();
	int b = j->nseq, maxlen = 0;
	for (int i = 0; i < b; i++)
		if (j->seqs[i].n_ids > maxlen)
			maxlen = j->seqs[i].n_ids;
	if (j->p.want_text) {
		json_t *data = json_array();
		for (int i = 0; i < b; i++)
			json_array_append_new(
			    data, json_stringn(seq_text(&j->seqs[i]), j->seqs[i].text.len));
		json_t *o = json_pack("{s:s, s:s, s:[i]}", "name", "text_output", "datatype",
		                      "BYTES", "shape", b);
		if (with_data && !(j->p.binary_out & 1))
			json_object_set_new(o, "data", data);
		else
			json_decref(data);
		json_array_append_new(outs, o);
	}
	if (j->p.want_ids) {
		json_t *shape = j->p.kserve_batch ? json_pack("[i, i]", b, maxlen)
		                                  : json_pack("[i]", j->seqs[0].n_ids);
		json_t *o = json_pack("{s:s, s:s, s:o}", "name", "output_ids", "datatype", "INT64",
		                      "shape", shape);
		if (with_data && !(j->p.binary_out & 2)) {
			/* Rows of different lengths are padded with -1. */
			json_t *data = json_array();
			for (int i = 0; i < b; i++) {
				const sc_seq_t *s = &j->seqs[i];
				int len = j->p.kserve_batch ? maxlen : s->n_ids;
				for (int k = 0; k < len; k++)
					json_array_append_new(
					    data, json_integer(k < s->n_ids ? s->out_ids[k] : -1));
			}
			json_object_set_new(o, "data", data);
		}
		json_array_append_new(outs, o);
	}
	return outs;
}

static json_t *kserve_json(const sc_job_t *j, int with_data)
{
	const sc_wmodel_t *m = j->q.m;
	int out = 0;
	for (int i = 0; i < j->nseq; i++)
		out += j->seqs[i].n_out;
	json_t *params =
	    json_pack("{s:i, s:i}", "prompt_tokens", j->n_prompt_total, "completion_tokens", out);
	if (j->nseq == 1)
		json_object_set_new(params, "finish_reason", json_string(j->seqs[0].finish));
	return json_pack("{s:s, s:s, s:s, s:o, s:o}", "model_name", m->name, "model_version",
	                 m->version, "id", j->p.req_id[0] ? j->p.req_id : j->id, "outputs",
	                 kserve_outputs(j, with_data), "parameters", params);
}

json_t *sc__final_json(const sc_job_t *j)
{
	const sc_wmodel_t *m = j->q.m;
	if (j->p.fmt == FMT_KSERVE)
		return kserve_json(j, 1);
	if (j->p.fmt == FMT_GENERATE) {
		const sc_seq_t *s = &j->seqs[0];
		return json_pack("{s:s, s:s, s:s%, s:o, s:s}", "model_name", m->name,
		                 "model_version", m->version, "text_output", seq_text(s),
		                 s->text.len, "output_ids", ids_json(s->out_ids, s->n_ids),
		                 "finish_reason", s->finish);
	}
	json_t *choices = json_array();
	for (int i = 0; i < j->nseq; i++) {
		const sc_seq_t *s = &j->seqs[i];
		json_t *lp = s->lps ? json_incref(s->lps) : json_null();
		json_t *c;
		if (j->p.fmt == FMT_CHAT)
			c = json_pack("{s:i, s:{s:s, s:s%}, s:o, s:s}", "index", s->index,
			              "message", "role", "assistant", "content", seq_text(s),
			              s->text.len, "logprobs", lp, "finish_reason", s->finish);
		else
			c = json_pack("{s:i, s:s%, s:o, s:s}", "index", s->index, "text",
			              seq_text(s), s->text.len, "logprobs", lp, "finish_reason",
			              s->finish);
		json_object_set_new(c, "token_ids", ids_json(s->out_ids, s->n_ids));
		json_array_append_new(choices, c);
	}
	return json_pack("{s:s, s:s, s:I, s:s, s:o, s:o}", "id", j->id, "object",
	                 j->p.fmt == FMT_CHAT ? "chat.completion" : "text_completion", "created",
	                 (json_int_t)j->created, "model", m->name, "choices", choices, "usage",
	                 usage_json(j));
}

/* ---------------------------------------------------------------------
 * KServe binary tensor extension
 * ------------------------------------------------------------------- */

static void put_u32(sc_buf_t *b, uint32_t v)
{
	unsigned char x[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >> 24};
	sc_buf_append(b, (const char *)x, 4);
}

static void put_i64(sc_buf_t *b, int64_t v)
{
	unsigned char x[8];
	for (int i = 0; i < 8; i++)
		x[i] = (unsigned char)(((uint64_t)v >> (8 * i)) & 0xff);
	sc_buf_append(b, (const char *)x, 8);
}

/* The JSON header (outputs sent as binary carry parameters.binary_data_size
 * instead of data), then each binary output's bytes in output order: BYTES
 * elements as a 4-byte little-endian length and the bytes, INT64 as 8
 * little-endian bytes. */
unsigned char *sc__kserve_binary(const sc_job_t *j, size_t *len, size_t *hlen)
{
	sc_buf_t bin[2];
	sc_buf_init(&bin[0], 0);
	sc_buf_init(&bin[1], 0);
	int b = j->nseq, maxlen = 0;
	for (int i = 0; i < b; i++) {
		const sc_seq_t *s = &j->seqs[i];
		put_u32(&bin[0], (uint32_t)s->text.len);
		sc_buf_append(&bin[0], seq_text(s), s->text.len);
		if (s->n_ids > maxlen)
			maxlen = s->n_ids;
	}
	for (int i = 0; i < b; i++) {
		const sc_seq_t *s = &j->seqs[i];
		int n = j->p.kserve_batch ? maxlen : s->n_ids;
		for (int k = 0; k < n; k++)
			put_i64(&bin[1], k < s->n_ids ? s->out_ids[k] : -1);
	}
	json_t *doc = kserve_json(j, 1);
	json_t *outs = json_object_get(doc, "outputs"), *o;
	size_t i;
	json_array_foreach(outs, i, o)
	{
		int k =
		    strcmp(json_string_value(json_object_get(o, "name")), "text_output") ? 1 : 0;
		if (j->p.binary_out & (1 << k))
			json_object_set_new(
			    o, "parameters",
			    json_pack("{s:I}", "binary_data_size", (json_int_t)bin[k].len));
	}
	char *head = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	unsigned char *out = NULL;
	if (head) {
		*hlen = strlen(head);
		size_t tot = *hlen;
		for (int k = 0; k < 2; k++)
			if (j->p.binary_out & (1 << k) &&
			    ((k == 0 && j->p.want_text) || (k == 1 && j->p.want_ids)))
				tot += bin[k].len;
		out = sc_malloc(tot ? tot : 1);
		if (out) {
			size_t at = *hlen;
			memcpy(out, head, *hlen);
			/* Outputs keep their order: text_output, then output_ids. */
			for (int k = 0; k < 2; k++)
				if (j->p.binary_out & (1 << k) &&
				    ((k == 0 && j->p.want_text) || (k == 1 && j->p.want_ids))) {
					if (bin[k].len)
						memcpy(out + at, bin[k].data, bin[k].len);
					at += bin[k].len;
				}
			*len = tot;
		}
	}
	free(head);
	sc_buf_free(&bin[0]);
	sc_buf_free(&bin[1]);
	return out;
}

/* ---------------------------------------------------------------------
 * Embeddings and prefill logprobs
 * ------------------------------------------------------------------- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static json_t *base64_json(const unsigned char *p, size_t n)
{
	sc_buf_t b;
	sc_buf_init(&b, 0);
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		char q[4] = {b64[v >> 18], b64[(v >> 12) & 63],
		             i + 1 < n ? b64[(v >> 6) & 63] : '=', i + 2 < n ? b64[v & 63] : '='};
		sc_buf_append(&b, q, 4);
	}
	json_t *s = json_stringn(b.data ? b.data : "", b.len);
	sc_buf_free(&b);
	return s;
}

/* The mean of the final-norm hidden states over the prompt's positions,
 * cut to the requested dimensions and scaled to unit length (as OpenAI's
 * embeddings are). */
static json_t *embedding(const sc_job_t *j, const sc_seq_t *s)
{
	int d = j->q.m->model->cfg.dim, dims = j->p.embed_dims > 0 ? j->p.embed_dims : d;
	float *v = sc_malloc((size_t)dims * sizeof(float));
	if (!v)
		return NULL;
	double norm = 0;
	for (int i = 0; i < dims; i++) {
		double x = s->hidden[i] / (s->n_prompt > 0 ? s->n_prompt : 1);
		norm += x * x;
		v[i] = (float)x;
	}
	norm = sqrt(norm);
	for (int i = 0; i < dims && norm > 0; i++)
		v[i] = (float)(v[i] / norm);
	json_t *e;
	if (j->p.embed_base64) {
		/* Little-endian float32, as the OpenAI SDKs decode it. */
		unsigned char *raw = sc_malloc((size_t)dims * 4);
		for (int i = 0; raw && i < dims; i++) {
			uint32_t u;
			memcpy(&u, &v[i], 4);
			for (int k = 0; k < 4; k++)
				raw[4 * i + k] = (unsigned char)(u >> (8 * k));
		}
		e = raw ? base64_json(raw, (size_t)dims * 4) : NULL;
		free(raw);
	} else {
		e = json_array();
		for (int i = 0; i < dims; i++)
			json_array_append_new(e, json_real((double)v[i]));
	}
	free(v);
	return e;
}

json_t *sc__embed_json(const sc_job_t *j)
{
	json_t *data = json_array();
	for (int i = 0; i < j->nseq; i++)
		json_array_append_new(data,
		                      json_pack("{s:s, s:i, s:o}", "object", "embedding", "index",
		                                i, "embedding", embedding(j, &j->seqs[i])));
	return json_pack("{s:s, s:o, s:s, s:{s:i, s:i}}", "object", "list", "data", data, "model",
	                 j->q.m->name, "usage", "prompt_tokens", j->n_prompt_total, "total_tokens",
	                 j->n_prompt_total);
}

json_t *sc__lp_json(const sc_job_t *j, int token, const seq_lp_t *lp)
{
	json_t *top = json_array();
	for (int i = 0; i < lp->ntop; i++)
		json_array_append_new(top, json_pack("[i, f]", lp->top[i], (double)lp->top_lp[i]));
	return json_pack("{s:i, s:f, s:o}", "token", token, "logprob", (double)lp->lp, "top", top);
}

int sc__lp_parse(const sc_job_t *j, json_t *o, seq_lp_t *lp)
{
	json_t *top = json_object_get(o, "top"), *e;
	int vocab = j->q.m->model->cfg.vocab_size;
	if (!json_is_number(json_object_get(o, "logprob")) || !json_is_array(top) ||
	    json_array_size(top) > SC_WORKER_MAX_TOP_LOGPROBS)
		return -1;
	lp->lp = (float)json_number_value(json_object_get(o, "logprob"));
	lp->ntop = 0;
	size_t i;
	json_array_foreach(top, i, e)
	{
		json_t *id = json_array_get(e, 0), *v = json_array_get(e, 1);
		if (!json_is_integer(id) || json_integer_value(id) < 0 ||
		    json_integer_value(id) >= vocab || !json_is_number(v))
			return -1;
		lp->top[lp->ntop] = (int)json_integer_value(id);
		lp->top_lp[lp->ntop++] = (float)json_number_value(v);
	}
	/* The decode request asks for its own count of alternatives. */
	if (lp->ntop > j->p.logprobs)
		lp->ntop = j->p.logprobs;
	return 0;
}
