/* OpenAI (completions, chat, models) and KServe v2 (health, metadata,
 * infer) handlers: parsing and validation; generation is in gen.c.
 * Every rejected request gets a 4xx naming the field and changes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/version.h"
#include "base/alloc.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"
#include "worker/worker_int.h"

#define DEFAULT_MAX_TOKENS 16

/* ---------------------------------------------------------------------
 * Shared parsing
 * ------------------------------------------------------------------- */

json_t *sc__body_json(wreq_t *q)
{
	size_t len;
	const char *body = sc_http_body(q->req, &len);
	json_error_t e;
	json_t *j = len ? json_loadb(body, len, JSON_REJECT_DUPLICATES, &e) : NULL;
	if (!j || !json_is_object(j)) {
		json_decref(j);
		sc__reply_error(q, 400, "body", "the body must be a JSON object%s%s",
		                len ? ": " : "", len ? e.text : "");
		return NULL;
	}
	return j;
}

int sc__body_and_ids(wreq_t *q, int n, json_t **body, int **ids)
{
	*ids = NULL;
	*body = sc__body_json(q);
	if (!*body)
		return -1;
	*ids = sc_malloc((size_t)n * sizeof(int));
	if (!*ids) {
		json_decref(*body);
		*body = NULL;
		sc__reply_error(q, 503, NULL, "out of memory");
		return -1;
	}
	return 0;
}

int sc__check_model(wreq_t *q, const char *name)
{
	sc_worker_t *w = q->w;
	size_t n = strlen(w->model_name);
	if (strcmp(name, w->model_name) == 0 ||
	    (strncmp(name, w->model_name, n) == 0 && name[n] == ':' &&
	     strcmp(name + n + 1, w->version) == 0))
		return 0;
	sc__reply_error(q, 404, "model",
	                "model \"%.100s\" is not served here (this worker serves "
	                "\"%s\" version \"%s\")",
	                name, w->model_name, w->version);
	return -1;
}

int sc__need_role(wreq_t *q, int need)
{
	if ((q->w->role & need) == need)
		return 0;
	static const char *names[] = {"", "prefill", "decode", "both"};
	sc__reply_error(q, 404, "role", "not served by a worker with role %s", names[q->w->role]);
	return -1;
}

static int get_int(wreq_t *q, json_t *obj, const char *key, long long lo, long long hi,
                   long long *out)
{
	json_t *v = json_object_get(obj, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
		sc__reply_error(q, 400, key, "%s must be an integer from %lld to %lld", key, lo,
		                hi);
		return -1;
	}
	*out = json_integer_value(v);
	return 1;
}

static int add_stop(wreq_t *q, sc_stops_t *st, json_t *v, const char *field)
{
	size_t n = json_is_string(v) ? json_string_length(v) : 0;
	if (n == 0 || n > SC_STOP_LEN) {
		sc__reply_error(q, 400, field, "%s must be a string of 1 to %d bytes", field,
		                SC_STOP_LEN);
		return -1;
	}
	memcpy(st->s[st->n], json_string_value(v), n + 1);
	st->len[st->n++] = n;
	return 0;
}

/* OpenAI's "stop": a string or an array of up to 4 strings. */
static int parse_stop(wreq_t *q, json_t *obj, sc_stops_t *st)
{
	st->n = 0;
	json_t *v = json_object_get(obj, "stop");
	if (!v || json_is_null(v))
		return 0;
	if (json_is_string(v))
		return add_stop(q, st, v, "stop");
	if (!json_is_array(v) || json_array_size(v) > SC_STOP_MAX) {
		sc__reply_error(q, 400, "stop",
		                "stop must be a string or an array of up to %d strings",
		                SC_STOP_MAX);
		return -1;
	}
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		char field[32];
		snprintf(field, sizeof(field), "stop[%zu]", i);
		if (add_stop(q, st, e, field) < 0)
			return -1;
	}
	return 0;
}

int sc__gen_params(wreq_t *q, json_t *obj, gen_params_t *p)
{
	sc_worker_t *w = q->w;
	long long v;
	p->max_tokens =
	    DEFAULT_MAX_TOKENS < w->max_tokens_cap ? DEFAULT_MAX_TOKENS : w->max_tokens_cap;
	p->seed = 1;
	json_t *m = json_object_get(obj, "model");
	if (m && !json_is_string(m)) {
		sc__reply_error(q, 400, "model", "model must be a string");
		return -1;
	}
	if (m && sc__check_model(q, json_string_value(m)) < 0)
		return -1;
	json_t *s = json_object_get(obj, "stream");
	if (s && !json_is_boolean(s) && !json_is_null(s)) {
		sc__reply_error(q, 400, "stream", "stream must be true or false");
		return -1;
	}
	p->stream = json_is_true(s);
	int rc = get_int(q, obj, "max_tokens", 1, w->max_tokens_cap, &v);
	if (rc < 0)
		return -1;
	if (rc)
		p->max_tokens = (int)v;
	if ((rc = get_int(q, obj, "n", 1, 1, &v)) < 0)
		return -1;
	if ((rc = get_int(q, obj, "seed", 0, INT64_MAX, &v)) < 0)
		return -1;
	if (rc)
		p->seed = (uint64_t)v;
	json_t *t = json_object_get(obj, "temperature");
	if (t && !json_is_null(t)) {
		if (!json_is_number(t) || json_number_value(t) < 0 || json_number_value(t) > 2) {
			sc__reply_error(q, 400, "temperature",
			                "temperature must be a number from 0 to 2");
			return -1;
		}
		p->temperature = (float)json_number_value(t);
	}
	p->top_p = 1;
	json_t *tp = json_object_get(obj, "top_p");
	if (tp && !json_is_null(tp)) {
		if (!json_is_number(tp) || !(json_number_value(tp) > 0) ||
		    json_number_value(tp) > 1) {
			sc__reply_error(q, 400, "top_p",
			                "top_p must be a number above 0, at most 1");
			return -1;
		}
		p->top_p = (float)json_number_value(tp);
	}
	return parse_stop(q, obj, &p->stops);
}

/* Token ids from a JSON array (field names the array for errors). */
static int ids_from_array(wreq_t *q, json_t *a, const char *field, int bos, int *ids, int max)
{
	int vocab = q->w->model->cfg.vocab_size, n = 0;
	if (bos)
		ids[n++] = SC_TOK_BOS;
	if (json_array_size(a) == 0 || json_array_size(a) > (size_t)(max - n)) {
		sc__reply_error(q, 400, field, "%s must hold 1 to %d token ids", field, max - n);
		return -1;
	}
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v)
	{
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) >= vocab) {
			sc__reply_error(q, 400, field, "%s[%zu] must be a token id from 0 to %d",
			                field, i, vocab - 1);
			return -1;
		}
		ids[n++] = (int)json_integer_value(v);
	}
	return n;
}

static int encode_text(wreq_t *q, const char *field, const char *text, size_t len, int *ids,
                       int max)
{
	int n = sc_tokenizer_encode(q->w->tok, text, len, 1, ids, max);
	if (n < 0)
		sc__reply_error(q, 400, field,
		                "%s is longer than %d tokens (seq_len %d leaves room "
		                "for one generated token)",
		                field, max, q->w->model->cfg.seq_len);
	return n;
}

/* Flattens chat messages: "<|role|>\ncontent\n" each, then "<|assistant|>\n". */
static int messages_ids(wreq_t *q, json_t *msgs, int *ids, int max)
{
	if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
		sc__reply_error(q, 400, "messages", "messages must be a non-empty array");
		return -1;
	}
	sc_buf_t b;
	sc_buf_init(&b, SC_WORKER_MAX_BODY);
	size_t i;
	json_t *m;
	char field[64];
	json_array_foreach(msgs, i, m)
	{
		const char *role = json_string_value(json_object_get(m, "role"));
		json_t *content = json_object_get(m, "content");
		if (!role || (strcmp(role, "system") && strcmp(role, "user") &&
		              strcmp(role, "assistant") && strcmp(role, "tool"))) {
			snprintf(field, sizeof(field), "messages[%zu].role", i);
			sc__reply_error(q, 400, field, "%s must be system, user, assistant or tool",
			                field);
			return sc_buf_free(&b), -1;
		}
		if (!json_is_string(content)) {
			snprintf(field, sizeof(field), "messages[%zu].content", i);
			sc__reply_error(q, 400, field, "%s must be a string", field);
			return sc_buf_free(&b), -1;
		}
		sc_buf_printf(&b, "<|%s|>\n", role);
		sc_buf_append(&b, json_string_value(content), json_string_length(content));
		sc_buf_puts(&b, "\n");
	}
	sc_buf_puts(&b, "<|assistant|>\n");
	int n = encode_text(q, "messages", b.data, b.len, ids, max);
	sc_buf_free(&b);
	return n;
}

int sc__prompt_ids(wreq_t *q, json_t *body, int *ids, int max)
{
	json_t *msgs = json_object_get(body, "messages"), *prompt = json_object_get(body, "prompt");
	json_t *iids = json_object_get(body, "input_ids");
	if (!!msgs + !!prompt + !!iids != 1) {
		sc__reply_error(q, 400, "prompt",
		                "give exactly one of prompt, messages, input_ids");
		return -1;
	}
	if (msgs)
		return messages_ids(q, msgs, ids, max);
	if (iids)
		return ids_from_array(q, iids, "input_ids", 0, ids, max);
	if (json_is_string(prompt))
		return encode_text(q, "prompt", json_string_value(prompt),
		                   json_string_length(prompt), ids, max);
	if (json_is_array(prompt) && json_array_size(prompt) == 1 &&
	    json_is_string(json_array_get(prompt, 0))) {
		json_t *s = json_array_get(prompt, 0);
		return encode_text(q, "prompt", json_string_value(s), json_string_length(s), ids,
		                   max);
	}
	if (json_is_array(prompt) && json_is_integer(json_array_get(prompt, 0)))
		return ids_from_array(q, prompt, "prompt", 0, ids, max);
	sc__reply_error(q, 400, "prompt",
	                "prompt must be a string, a one-string array or an array of token ids");
	return -1;
}

/* ---------------------------------------------------------------------
 * OpenAI
 * ------------------------------------------------------------------- */

static void openai_generate(wreq_t *q, int fmt)
{
	if (sc__need_role(q, ROLE_BOTH) < 0 || sc__worker_faults(q))
		return;
	int max = q->w->model->cfg.seq_len - 1, *ids;
	json_t *body;
	if (sc__body_and_ids(q, max, &body, &ids) < 0)
		return;
	gen_params_t p = {.fmt = fmt};
	if (fmt == FMT_CHAT && json_object_get(body, "prompt")) {
		sc__reply_error(q, 400, "prompt", "chat completions take messages, not prompt");
	} else if (fmt == FMT_COMPLETION && json_object_get(body, "messages")) {
		sc__reply_error(q, 400, "messages", "completions take prompt, not messages");
	} else if (sc__gen_params(q, body, &p) == 0) {
		int n = sc__prompt_ids(q, body, ids, max);
		if (n > 0)
			sc__gen_prompt(q, &p, ids, n);
	}
	free(ids);
	json_decref(body);
}

static void h_completions(wreq_t *q)
{
	openai_generate(q, FMT_COMPLETION);
}

static void h_chat(wreq_t *q)
{
	openai_generate(q, FMT_CHAT);
}

static void h_models(wreq_t *q)
{
	sc_worker_t *w = q->w;
	sc__reply_json(q, 200,
	               json_pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:s}]}", "object", "list", "data",
	                         "id", w->model_name, "object", "model", "created",
	                         (json_int_t)time(NULL), "owned_by", "starcloud", "version",
	                         w->version));
}

/* ---------------------------------------------------------------------
 * KServe v2
 * ------------------------------------------------------------------- */

static void h_live(wreq_t *q)
{
	sc__reply_raw(q, 200, "application/json", "", 0);
}

static void h_v2(wreq_t *q)
{
	if (strcmp(sc_http_path(q->req), "/v2") != 0 && strcmp(sc_http_path(q->req), "/v2/") != 0)
		return sc__reply_error(q, 404, "path", "no such path");
	sc__reply_json(q, 200,
	               json_pack("{s:s, s:s, s:[]}", "name", "starcloud-worker", "version",
	                         SC_VERSION, "extensions"));
}

static json_t *tensor_meta(const char *name, const char *dtype, int dim)
{
	return json_pack("{s:s, s:s, s:[i]}", "name", name, "datatype", dtype, "shape", dim);
}

/* Splits /v2/models/{m}[/versions/{v}][/rest]; 0 and *rest on success,
 * after a 404 otherwise. */
static int model_path(wreq_t *q, const char **rest)
{
	sc_worker_t *w = q->w;
	const char *p = sc_http_path(q->req) + strlen("/v2/models/");
	size_t n = strcspn(p, "/");
	if (n != strlen(w->model_name) || strncmp(p, w->model_name, n) != 0) {
		sc__reply_error(q, 404, "model", "unknown model \"%.*s\"", (int)(n > 100 ? 100 : n),
		                p);
		return -1;
	}
	p += n;
	if (strncmp(p, "/versions/", 10) == 0) {
		p += 10;
		n = strcspn(p, "/");
		if (n != strlen(w->version) || strncmp(p, w->version, n) != 0) {
			sc__reply_error(q, 404, "version", "unknown version \"%.*s\" of model %s",
			                (int)(n > 100 ? 100 : n), p, w->model_name);
			return -1;
		}
		p += n;
	}
	*rest = p;
	return 0;
}

static void model_metadata(wreq_t *q)
{
	sc_worker_t *w = q->w;
	json_t *in = json_pack("[o, o]", tensor_meta("text_input", "BYTES", 1),
	                       tensor_meta("input_ids", "INT64", -1));
	json_t *out = json_pack("[o, o]", tensor_meta("text_output", "BYTES", 1),
	                        tensor_meta("output_ids", "INT64", -1));
	sc__reply_json(q, 200,
	               json_pack("{s:s, s:[s], s:s, s:o, s:o}", "name", w->model_name, "versions",
	                         w->version, "platform", "starcloud_llama2c", "inputs", in,
	                         "outputs", out));
}

static void h_model_get(wreq_t *q)
{
	q->kserve_errors = 1;
	const char *rest;
	if (model_path(q, &rest) < 0)
		return;
	if (*rest == '\0')
		return model_metadata(q);
	if (strcmp(rest, "/ready") == 0)
		return sc__reply_raw(q, 200, "application/json", "", 0);
	sc__reply_error(q, 404, "path", "no such path");
}

/* Shape product of a tensor, or -1 when shape is not an array of
 * non-negative integers. */
static long long shape_elems(json_t *shape)
{
	if (!json_is_array(shape) || json_array_size(shape) == 0 || json_array_size(shape) > 4)
		return -1;
	long long n = 1;
	size_t i;
	json_t *d;
	json_array_foreach(shape, i, d)
	{
		if (!json_is_integer(d) || json_integer_value(d) < 0 ||
		    json_integer_value(d) > 1 << 20)
			return -1;
		n *= json_integer_value(d);
	}
	return n;
}

static int check_tensor(wreq_t *q, json_t *t, size_t i, const char *dtype)
{
	char f[48];
	const char *dt = json_string_value(json_object_get(t, "datatype"));
	json_t *data = json_object_get(t, "data");
	long long elems = shape_elems(json_object_get(t, "shape"));
	if (!dt || (strcmp(dt, dtype) != 0 &&
	            !(strcmp(dtype, "INT64") == 0 && strcmp(dt, "INT32") == 0))) {
		snprintf(f, sizeof(f), "inputs[%zu].datatype", i);
		sc__reply_error(q, 400, f, "%s must be %s", f, dtype);
		return -1;
	}
	if (elems < 0) {
		snprintf(f, sizeof(f), "inputs[%zu].shape", i);
		sc__reply_error(q, 400, f, "%s must be an array of non-negative integers", f);
		return -1;
	}
	if (!json_is_array(data) || (long long)json_array_size(data) != elems) {
		snprintf(f, sizeof(f), "inputs[%zu].data", i);
		sc__reply_error(q, 400, f, "%s must be an array of %lld elements (the shape)", f,
		                elems);
		return -1;
	}
	if (strcmp(dtype, "BYTES") == 0 &&
	    (elems != 1 || !json_is_string(json_array_get(data, 0)))) {
		snprintf(f, sizeof(f), "inputs[%zu].data", i);
		sc__reply_error(q, 400, f, "%s must hold exactly one string (batch size 1)", f);
		return -1;
	}
	return 0;
}

/* Reads "inputs" into ids; returns the count or -1 after answering. */
static int infer_inputs(wreq_t *q, json_t *body, int *ids, int max)
{
	json_t *inputs = json_object_get(body, "inputs"), *t, *found = NULL;
	if (!json_is_array(inputs) || json_array_size(inputs) == 0) {
		sc__reply_error(q, 400, "inputs", "inputs must be a non-empty array");
		return -1;
	}
	size_t i, at = 0;
	json_array_foreach(inputs, i, t)
	{
		const char *name = json_string_value(json_object_get(t, "name"));
		char f[48];
		snprintf(f, sizeof(f), "inputs[%zu].name", i);
		if (!name || (strcmp(name, "text_input") && strcmp(name, "input_ids"))) {
			sc__reply_error(q, 400, f, "%s must be text_input or input_ids", f);
			return -1;
		}
		if (found) {
			sc__reply_error(q, 400, f, "give one input: text_input or input_ids");
			return -1;
		}
		if (check_tensor(q, t, i, strcmp(name, "text_input") ? "INT64" : "BYTES") < 0)
			return -1;
		found = t;
		at = i;
	}
	json_t *data = json_object_get(found, "data");
	if (strcmp(json_string_value(json_object_get(found, "name")), "input_ids") == 0) {
		char f[48];
		snprintf(f, sizeof(f), "inputs[%zu].data", at);
		return ids_from_array(q, data, f, 0, ids, max);
	}
	json_t *s = json_array_get(data, 0);
	return encode_text(q, "inputs[].data", json_string_value(s), json_string_length(s), ids,
	                   max);
}

/* "outputs": which of text_output/output_ids to return (default both). */
static int infer_outputs(wreq_t *q, json_t *body, gen_params_t *p)
{
	json_t *outs = json_object_get(body, "outputs"), *o;
	p->want_text = p->want_ids = 1;
	if (!outs)
		return 0;
	if (!json_is_array(outs)) {
		sc__reply_error(q, 400, "outputs", "outputs must be an array");
		return -1;
	}
	p->want_text = p->want_ids = 0;
	size_t i;
	json_array_foreach(outs, i, o)
	{
		const char *name = json_string_value(json_object_get(o, "name"));
		if (name && strcmp(name, "text_output") == 0) {
			p->want_text = 1;
		} else if (name && strcmp(name, "output_ids") == 0) {
			p->want_ids = 1;
		} else {
			char f[48];
			snprintf(f, sizeof(f), "outputs[%zu].name", i);
			sc__reply_error(q, 400, f, "%s must be text_output or output_ids", f);
			return -1;
		}
	}
	return 0;
}

static int infer_params(wreq_t *q, json_t *body, gen_params_t *p)
{
	json_t *id = json_object_get(body, "id"), *params = json_object_get(body, "parameters");
	if (id && (!json_is_string(id) || json_string_length(id) >= sizeof(p->req_id))) {
		sc__reply_error(q, 400, "id", "id must be a string of at most 127 bytes");
		return -1;
	}
	if (id)
		snprintf(p->req_id, sizeof(p->req_id), "%s", json_string_value(id));
	if (params && !json_is_object(params)) {
		sc__reply_error(q, 400, "parameters", "parameters must be an object");
		return -1;
	}
	json_t *empty = json_object();
	int rc = sc__gen_params(q, params ? params : empty, p);
	json_decref(empty);
	if (rc == 0 && p->stream) {
		sc__reply_error(q, 400, "parameters.stream", "infer does not stream");
		return -1;
	}
	return rc;
}

static void h_infer(wreq_t *q)
{
	sc_worker_t *w = q->w;
	int max = w->model->cfg.seq_len - 1;
	gen_params_t p = {.fmt = FMT_KSERVE};
	json_t *body;
	int *ids;
	if (sc__body_and_ids(q, max, &body, &ids) < 0)
		return;
	if (infer_params(q, body, &p) == 0 && infer_outputs(q, body, &p) == 0) {
		int n = infer_inputs(q, body, ids, max);
		if (n > 0)
			sc__gen_prompt(q, &p, ids, n);
	}
	free(ids);
	json_decref(body);
}

static void h_model_post(wreq_t *q)
{
	q->kserve_errors = 1;
	const char *rest;
	if (model_path(q, &rest) < 0)
		return;
	if (strcmp(rest, "/infer") != 0)
		return sc__reply_error(q, 404, "path", "no such path");
	if (sc__need_role(q, ROLE_BOTH) < 0 || sc__worker_faults(q))
		return;
	h_infer(q);
}

void sc__api_routes(sc_worker_t *w)
{
	sc__worker_route(w, "POST", "/v1/completions", h_completions);
	sc__worker_route(w, "POST", "/v1/chat/completions", h_chat);
	sc__worker_route(w, "GET", "/v1/models", h_models);
	sc__worker_route(w, "GET", "/v2/health/live", h_live);
	sc__worker_route(w, "GET", "/v2/health/ready", h_live);
	sc__worker_route(w, "GET", "/v2", h_v2);
	sc__worker_route(w, "GET", "/v2/models/", h_model_get);
	sc__worker_route(w, "POST", "/v2/models/", h_model_post);
}
