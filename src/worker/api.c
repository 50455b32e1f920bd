/* OpenAI handlers (completions, chat, embeddings, models) and the request
 * parsing every generation shares; KServe v2 is in kserve.c, generation in
 * gen.c. Every rejected request gets a 4xx naming the field and changes
 * nothing. Fields this worker cannot honour are refused, never ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "starcloud/buf.h"
#include "base/alloc.h"
#include "starcloud/error.h"
#include "worker/worker_int.h"

#define DEFAULT_MAX_TOKENS 16
#define MAX_COMPL_LOGPROBS 5

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

int sc__pick_model(wreq_t *q, json_t *model)
{
	if (model && !json_is_null(model) && !json_is_string(model)) {
		sc__reply_error(q, 400, "model", "model must be a string");
		return -1;
	}
	const char *name = json_string_value(model);
	if ((q->m = sc__worker_model(q->w, name, NULL)))
		return 0;
	if (!name || !*name)
		sc__reply_error(q, 400, "model", "model is required: this worker serves several");
	else
		sc__reply_error(q, 404, "model", "model \"%.100s\" is not served here", name);
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

static int get_number(wreq_t *q, json_t *obj, const char *key, double lo, double hi, int open_lo,
                      float *out)
{
	json_t *v = json_object_get(obj, key);
	if (!v || json_is_null(v))
		return 0;
	double x = json_is_number(v) ? json_number_value(v) : lo - 1;
	if (x < lo || x > hi || (open_lo && !(x > lo))) {
		sc__reply_error(q, 400, key, "%s must be a number %s %g, at most %g", key,
		                open_lo ? "above" : "from", lo, hi);
		return -1;
	}
	*out = (float)x;
	return 0;
}

/* The top-level fields every generation endpoint knows (read or refused
 * by value below); each endpoint adds its own. */
static const char common_fields[] =
    "model stream stream_options max_tokens max_completion_tokens n seed "
    "temperature top_p logprobs top_logprobs stop presence_penalty "
    "frequency_penalty logit_bias tools functions tool_choice "
    "function_call parallel_tool_calls response_format user store metadata "
    "service_tier modalities audio prediction reasoning_effort "
    "web_search_options";

const char *const sc__completion_fields[] = {"prompt", "echo",          "best_of",
                                             "suffix", "generated_ids", NULL};
const char *const sc__chat_fields[] = {"messages", "input_ids", "generated_ids", NULL};
const char *const sc__prefill_fields[] = {"prompt",  "messages", "input_ids", "echo",
                                          "best_of", "suffix",   NULL};
const char *const sc__decode_fields[] = {
    "kv_url",         "first_token",   "format", "first_token_relayed",
    "first_logprobs", "generated_ids", NULL};

/* Whether key is one of the space-separated words ("a b", holding a
 * space, is none of them). */
static int in_words(const char *words, const char *key)
{
	size_t n = strlen(key);
	if (n == 0 || strchr(key, ' '))
		return 0;
	for (const char *w = words; *w; w += strcspn(w, " "), w += *w == ' ')
		if (strncmp(w, key, n) == 0 && (w[n] == ' ' || w[n] == '\0'))
			return 1;
	return 0;
}

static int listed(const char *const *list, const char *key)
{
	for (size_t i = 0; list && list[i]; i++)
		if (strcmp(list[i], key) == 0)
			return 1;
	return 0;
}

int sc__known_fields(wreq_t *q, json_t *obj, int generation, const char *const *extra)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v)
	{
		if ((generation && in_words(common_fields, key)) || listed(extra, key))
			continue;
		/* OpenAI's own words for a field it does not know; the name is
		 * bounded: it is the client's. */
		char param[64];
		snprintf(param, sizeof(param), "%s", key);
		sc__reply_error(q, 400, param, "Unrecognized request argument supplied: %s", param);
		return -1;
	}
	return 0;
}

/* Tool calling and the output shapes this worker cannot produce: accepted
 * only at the value that asks for nothing (tool_choice "none" with no
 * tools is a plain completion), refused by name otherwise. */
static int refuse_tooling(wreq_t *q, json_t *obj)
{
	static const struct {
		const char *key, *ok_string, *why;
	} only_null[] = {
	    {"tool_choice", "none",
	     "tool_choice is not supported: this worker has no tool calling"},
	    {"function_call", "none",
	     "function_call is not supported: this worker has no tool calling"},
	    {"parallel_tool_calls", NULL,
	     "parallel_tool_calls is not supported: this worker has no tool calling"},
	    {"audio", NULL, "audio is not supported: this worker produces text only"},
	    {"prediction", NULL, "prediction (predicted outputs) is not supported"},
	    {"reasoning_effort", NULL, "reasoning_effort is not supported: not a reasoning model"},
	    {"web_search_options", NULL, "web_search_options is not supported"},
	    {"service_tier", "auto", "service_tier is not supported (only \"auto\")"},
	    {"store", NULL, "store is not supported: completions are not stored"},
	};
	for (size_t i = 0; i < sizeof(only_null) / sizeof(only_null[0]); i++) {
		json_t *v = json_object_get(obj, only_null[i].key);
		const char *s = json_string_value(v);
		int neutral =
		    !v || json_is_null(v) ||
		    (only_null[i].ok_string && s && strcmp(s, only_null[i].ok_string) == 0) ||
		    (strcmp(only_null[i].key, "store") == 0 && json_is_false(v)) ||
		    (strcmp(only_null[i].key, "service_tier") == 0 && s &&
		     strcmp(s, "default") == 0);
		if (!neutral) {
			sc__reply_error(q, 400, only_null[i].key, "%s", only_null[i].why);
			return -1;
		}
	}
	json_t *md = json_object_get(obj, "metadata");
	if (md && !json_is_null(md) && !(json_is_object(md) && !json_object_size(md))) {
		sc__reply_error(q, 400, "metadata",
		                "metadata is not supported (nothing is stored)");
		return -1;
	}
	json_t *u = json_object_get(obj, "user");
	if (u && !json_is_null(u) && !json_is_string(u)) {
		sc__reply_error(q, 400, "user", "user must be a string");
		return -1;
	}
	json_t *mod = json_object_get(obj, "modalities");
	if (mod && !json_is_null(mod) &&
	    !(json_is_array(mod) && json_array_size(mod) == 1 &&
	      json_string_value(json_array_get(mod, 0)) &&
	      strcmp(json_string_value(json_array_get(mod, 0)), "text") == 0)) {
		sc__reply_error(q, 400, "modalities", "modalities: only [\"text\"]");
		return -1;
	}
	return 0;
}

/* Fields OpenAI defines that this worker cannot honour: refused by name
 * rather than ignored, so a client never believes it got what it asked
 * for. A field at its neutral value is accepted. */
static int refuse_unsupported(wreq_t *q, json_t *obj)
{
	static const char *const zero_num[] = {"presence_penalty", "frequency_penalty", NULL};
	static const char *const null_or_empty[] = {"logit_bias", "tools", "functions", "suffix",
	                                            NULL};
	for (size_t i = 0; zero_num[i]; i++) {
		json_t *v = json_object_get(obj, zero_num[i]);
		if (v && !json_is_null(v) && !(json_is_number(v) && json_number_value(v) == 0)) {
			sc__reply_error(q, 400, zero_num[i], "%s is not supported (only 0)",
			                zero_num[i]);
			return -1;
		}
	}
	for (size_t i = 0; null_or_empty[i]; i++) {
		json_t *v = json_object_get(obj, null_or_empty[i]);
		int empty = !v || json_is_null(v) || (json_is_array(v) && !json_array_size(v)) ||
		            (json_is_object(v) && !json_object_size(v)) ||
		            (json_is_string(v) && !json_string_length(v));
		if (!empty) {
			sc__reply_error(q, 400, null_or_empty[i],
			                "%s is not supported by this worker", null_or_empty[i]);
			return -1;
		}
	}
	if (refuse_tooling(q, obj) < 0)
		return -1;
	json_t *echo = json_object_get(obj, "echo"), *bo = json_object_get(obj, "best_of");
	if (json_is_true(echo)) {
		sc__reply_error(q, 400, "echo", "echo is not supported");
		return -1;
	}
	if (bo && !json_is_null(bo) && !(json_is_integer(bo) && json_integer_value(bo) == 1)) {
		sc__reply_error(q, 400, "best_of", "best_of is not supported (only 1)");
		return -1;
	}
	json_t *rf = json_object_get(obj, "response_format");
	const char *rft = json_string_value(json_object_get(rf, "type"));
	if (rf && !json_is_null(rf) && !(rft && strcmp(rft, "text") == 0)) {
		sc__reply_error(q, 400, "response_format",
		                "response_format: only {\"type\": \"text\"}");
		return -1;
	}
	return 0;
}

/* logprobs: an integer 0..5 on completions; on chat a boolean with
 * top_logprobs 0..20 beside it. -1 = not asked. */
static int parse_logprobs(wreq_t *q, json_t *obj, gen_params_t *p)
{
	json_t *lp = json_object_get(obj, "logprobs");
	long long v;
	p->logprobs = -1;
	if (p->fmt != FMT_CHAT) {
		int rc = get_int(q, obj, "logprobs", 0, MAX_COMPL_LOGPROBS, &v);
		if (rc > 0)
			p->logprobs = (int)v;
		return rc < 0 ? -1 : 0;
	}
	if (lp && !json_is_null(lp) && !json_is_boolean(lp)) {
		sc__reply_error(q, 400, "logprobs", "logprobs must be true or false");
		return -1;
	}
	int rc = get_int(q, obj, "top_logprobs", 0, SC_WORKER_MAX_TOP_LOGPROBS, &v);
	if (rc < 0)
		return -1;
	if (rc > 0 && !json_is_true(lp)) {
		sc__reply_error(q, 400, "top_logprobs", "top_logprobs needs logprobs: true");
		return -1;
	}
	if (json_is_true(lp))
		p->logprobs = rc > 0 ? (int)v : 0;
	return 0;
}

int sc__gen_params(wreq_t *q, json_t *obj, gen_params_t *p)
{
	int cap = q->m->max_tokens_cap;
	long long v;
	p->max_tokens = DEFAULT_MAX_TOKENS < cap ? DEFAULT_MAX_TOKENS : cap;
	p->seed = 1;
	p->n = 1;
	p->top_p = 1;
	json_t *s = json_object_get(obj, "stream");
	if (s && !json_is_boolean(s) && !json_is_null(s)) {
		sc__reply_error(q, 400, "stream", "stream must be true or false");
		return -1;
	}
	p->stream = json_is_true(s);
	json_t *so = json_object_get(obj, "stream_options");
	if (so && !json_is_null(so)) {
		json_t *iu = json_object_get(so, "include_usage");
		if (!p->stream) {
			sc__reply_error(q, 400, "stream_options",
			                "stream_options is only allowed when stream is true");
			return -1;
		}
		if (!json_is_object(so) || (iu && !json_is_boolean(iu) && !json_is_null(iu))) {
			sc__reply_error(q, 400, "stream_options",
			                "stream_options must be {\"include_usage\": true|false}");
			return -1;
		}
		p->include_usage = json_is_true(iu);
	}
	/* max_completion_tokens is the current name; max_tokens the old one. */
	int rc = get_int(q, obj, "max_completion_tokens", 1, cap, &v);
	if (rc == 0)
		rc = get_int(q, obj, "max_tokens", 1, cap, &v);
	if (rc < 0)
		return -1;
	if (rc)
		p->max_tokens = (int)v;
	if ((rc = get_int(q, obj, "n", 1, SC_WORKER_MAX_CHOICES, &v)) < 0)
		return -1;
	if (rc)
		p->n = (int)v;
	if ((rc = get_int(q, obj, "seed", 0, INT64_MAX, &v)) < 0)
		return -1;
	if (rc)
		p->seed = (uint64_t)v;
	if (get_number(q, obj, "temperature", 0, 2, 0, &p->temperature) < 0 ||
	    get_number(q, obj, "top_p", 0, 1, 1, &p->top_p) < 0 || parse_logprobs(q, obj, p) < 0 ||
	    refuse_unsupported(q, obj) < 0)
		return -1;
	return parse_stop(q, obj, &p->stops);
}

int sc__ids_from_array(wreq_t *q, json_t *a, const char *field, int *ids, int max)
{
	int vocab = q->m->model->cfg.vocab_size, n = 0;
	if (json_array_size(a) == 0 || json_array_size(a) > (size_t)max) {
		sc__reply_error(q, 400, field, "%s must hold 1 to %d token ids", field, max);
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

int sc__encode_text(wreq_t *q, const char *field, const char *text, size_t len, int *ids, int max)
{
	int n = sc_tokenizer_encode(q->m->tok, text, len, 1, ids, max);
	if (n < 0)
		sc__reply_error(q, 400, field,
		                "%s is longer than %d tokens (seq_len %d leaves room "
		                "for one generated token)",
		                field, max, q->m->model->cfg.seq_len);
	return n;
}

/* A message's content: a string, null (an assistant turn that only called
 * tools), or an array of text parts; appended to b. */
static int message_content(wreq_t *q, json_t *content, size_t i, const char *role, sc_buf_t *b)
{
	char field[80];
	if (json_is_string(content))
		return sc_buf_append(b, json_string_value(content), json_string_length(content));
	if (json_is_null(content) && strcmp(role, "assistant") == 0)
		return 0;
	if (!json_is_array(content)) {
		snprintf(field, sizeof(field), "messages[%zu].content", i);
		sc__reply_error(q, 400, field, "%s must be a string or an array of text parts",
		                field);
		return -1;
	}
	size_t k;
	json_t *part;
	json_array_foreach(content, k, part)
	{
		const char *type = json_string_value(json_object_get(part, "type"));
		json_t *text = json_object_get(part, "text");
		if (!type || strcmp(type, "text") != 0) {
			snprintf(field, sizeof(field), "messages[%zu].content[%zu].type", i, k);
			sc__reply_error(q, 400, field, "%s: only \"text\" parts are supported",
			                field);
			return -1;
		}
		if (!json_is_string(text)) {
			snprintf(field, sizeof(field), "messages[%zu].content[%zu].text", i, k);
			sc__reply_error(q, 400, field, "%s must be a string", field);
			return -1;
		}
		sc_buf_append(b, json_string_value(text), json_string_length(text));
	}
	return 0;
}

/* Flattens chat messages: "<|role|>\ncontent\n" each, then "<|assistant|>\n".
 * A developer message is the system message of newer models. */
static int messages_ids(wreq_t *q, json_t *msgs, int *ids, int max)
{
	static const char *const roles[] = {"system",    "developer", "user",
	                                    "assistant", "tool",      NULL};
	if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
		sc__reply_error(q, 400, "messages", "messages must be a non-empty array");
		return -1;
	}
	sc_buf_t b;
	sc_buf_init(&b, SC_WORKER_MAX_BODY);
	size_t i, r;
	json_t *m;
	char field[64];
	json_array_foreach(msgs, i, m)
	{
		const char *role = json_string_value(json_object_get(m, "role"));
		for (r = 0; role && roles[r] && strcmp(role, roles[r]) != 0; r++)
			;
		if (!role || !roles[r]) {
			snprintf(field, sizeof(field), "messages[%zu].role", i);
			sc__reply_error(q, 400, field,
			                "%s must be system, developer, user, assistant or tool",
			                field);
			return sc_buf_free(&b), -1;
		}
		sc_buf_printf(&b, "<|%s|>\n", strcmp(role, "developer") == 0 ? "system" : role);
		if (message_content(q, json_object_get(m, "content"), i, role, &b) < 0)
			return sc_buf_free(&b), -1;
		sc_buf_puts(&b, "\n");
	}
	sc_buf_puts(&b, "<|assistant|>\n");
	int n = sc__encode_text(q, "messages", b.data, b.len, ids, max);
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
		return sc__ids_from_array(q, iids, "input_ids", ids, max);
	if (json_is_string(prompt))
		return sc__encode_text(q, "prompt", json_string_value(prompt),
		                       json_string_length(prompt), ids, max);
	if (json_is_array(prompt) && json_array_size(prompt) == 1 &&
	    json_is_string(json_array_get(prompt, 0))) {
		json_t *s = json_array_get(prompt, 0);
		return sc__encode_text(q, "prompt", json_string_value(s), json_string_length(s),
		                       ids, max);
	}
	if (json_is_array(prompt) && json_is_integer(json_array_get(prompt, 0)))
		return sc__ids_from_array(q, prompt, "prompt", ids, max);
	sc__reply_error(q, 400, "prompt",
	                "prompt must be a string, a one-string array or an array of token ids");
	return -1;
}

/* Appends n ids as the next prompt. */
static int prompts_add(wreq_t *q, gen_prompts_t *pr, const int *ids, int n)
{
	int at = pr->off[pr->n];
	int *g = sc_realloc(pr->ids, ((size_t)at + (size_t)n) * sizeof(int));
	if (!g) {
		sc__reply_error(q, 503, NULL, "out of memory");
		return -1;
	}
	pr->ids = g;
	memcpy(g + at, ids, (size_t)n * sizeof(int));
	pr->off[++pr->n] = at + n;
	return 0;
}

/* One input of a list: a string or an array of token ids. */
static int one_input(wreq_t *q, json_t *v, const char *field, int *ids, int max)
{
	if (json_is_string(v))
		return sc__encode_text(q, field, json_string_value(v), json_string_length(v), ids,
		                       max);
	if (json_is_array(v))
		return sc__ids_from_array(q, v, field, ids, max);
	sc__reply_error(q, 400, field, "%s must be a string or an array of token ids", field);
	return -1;
}

/* A completion's prompt or an embedding's input, as OpenAI allows it: a
 * string, an array of strings, an array of token ids, or an array of
 * arrays of token ids. Each becomes one prompt of at most max ids. */
static int read_inputs(wreq_t *q, json_t *v, const char *name, gen_prompts_t *pr, int max)
{
	int *ids = sc_malloc((size_t)max * sizeof(int)), n;
	if (!ids) {
		sc__reply_error(q, 503, NULL, "out of memory");
		return -1;
	}
	int rc = -1;
	char field[48];
	if (json_is_string(v) || (json_is_array(v) && json_is_integer(json_array_get(v, 0)))) {
		if ((n = one_input(q, v, name, ids, max)) > 0)
			rc = prompts_add(q, pr, ids, n);
	} else if (json_is_array(v) && json_array_size(v) > 0 &&
	           json_array_size(v) <= SC_WORKER_MAX_PROMPTS) {
		size_t i;
		json_t *e;
		rc = 0;
		json_array_foreach(v, i, e)
		{
			snprintf(field, sizeof(field), "%s[%zu]", name, i);
			if ((n = one_input(q, e, field, ids, max)) < 0 ||
			    prompts_add(q, pr, ids, n) < 0) {
				rc = -1;
				break;
			}
		}
	} else {
		sc__reply_error(q, 400, name,
		                "%s must be a string, an array of 1 to %d strings, token ids, or "
		                "arrays of token ids",
		                name, SC_WORKER_MAX_PROMPTS);
	}
	free(ids);
	return rc;
}

/* "generated_ids": token ids the client already has from an earlier
 * attempt at this very request (the gateway's resume of a broken stream);
 * they count towards max_tokens. Returns the count, or -1 after a 400. */
static int resume_ids(wreq_t *q, json_t *body, const gen_params_t *p, int nseq, int **out)
{
	json_t *g = json_object_get(body, "generated_ids");
	*out = NULL;
	if (!g || json_is_null(g) || (json_is_array(g) && json_array_size(g) == 0))
		return 0;
	if (nseq != 1) {
		sc__reply_error(q, 400, "generated_ids",
		                "generated_ids needs one prompt and n = 1");
		return -1;
	}
	if (!json_is_array(g) || json_array_size(g) >= (size_t)p->max_tokens + 1) {
		sc__reply_error(
		    q, 400, "generated_ids",
		    "generated_ids must be an array of at most max_tokens (%d) token ids",
		    p->max_tokens);
		return -1;
	}
	if (!(*out = sc_malloc(json_array_size(g) * sizeof(int)))) {
		sc__reply_error(q, 503, NULL, "out of memory");
		return -1;
	}
	int n = sc__ids_from_array(q, g, "generated_ids", *out, p->max_tokens);
	if (n < 0) {
		free(*out);
		*out = NULL;
	}
	return n;
}

/* ---------------------------------------------------------------------
 * OpenAI
 * ------------------------------------------------------------------- */

static void openai_generate(wreq_t *q, int fmt)
{
	if (sc__need_role(q, ROLE_BOTH) < 0 || sc__worker_faults(q))
		return;
	json_t *body = sc__body_json(q);
	if (!body || sc__pick_model(q, json_object_get(body, "model")) < 0)
		return json_decref(body);
	int max = q->m->model->cfg.seq_len - 1, *ids = NULL, *forced = NULL, nf = 0;
	gen_params_t p = {.fmt = fmt};
	gen_prompts_t pr = {0};
	if (fmt == FMT_CHAT && json_object_get(body, "prompt")) {
		sc__reply_error(q, 400, "prompt", "chat completions take messages, not prompt");
	} else if (fmt == FMT_COMPLETION && json_object_get(body, "messages")) {
		sc__reply_error(q, 400, "messages", "completions take prompt, not messages");
	} else if (sc__known_fields(q, body, 1,
	                            fmt == FMT_CHAT ? sc__chat_fields : sc__completion_fields) ==
	               0 &&
	           sc__gen_params(q, body, &p) == 0) {
		int ok = 0;
		if (fmt == FMT_CHAT) {
			if (!(ids = sc_malloc((size_t)max * sizeof(int))))
				sc__reply_error(q, 503, NULL, "out of memory");
			int n = ids ? sc__prompt_ids(q, body, ids, max) : -1;
			ok = n > 0 && prompts_add(q, &pr, ids, n) == 0;
		} else if (!json_object_get(body, "prompt")) {
			sc__reply_error(q, 400, "prompt", "prompt is required");
		} else {
			ok = read_inputs(q, json_object_get(body, "prompt"), "prompt", &pr, max) ==
			     0;
		}
		if (ok && pr.n * p.n > SC_WORKER_MAX_SEQS) {
			sc__reply_error(q, 400, "n", "prompts x n must be at most %d",
			                SC_WORKER_MAX_SEQS);
			ok = 0;
		}
		if (ok && (nf = resume_ids(q, body, &p, pr.n * p.n, &forced)) < 0)
			ok = 0;
		if (ok && pr.off[1] + nf > max) {
			sc__reply_error(q, 400, "generated_ids",
			                "the prompt and generated_ids fill the context (%d tokens)",
			                max + 1);
			ok = 0;
		}
		if (ok) {
			sc__gen_start(q, &p, &pr, forced, nf);
			pr.ids = NULL;
		}
	}
	free(forced);
	free(pr.ids);
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

/* POST /v1/embeddings: the mean of the model's final hidden states over
 * each input's tokens, at unit length. */
static void h_embeddings(wreq_t *q)
{
	if (sc__need_role(q, ROLE_PREFILL) < 0 || sc__worker_faults(q))
		return;
	json_t *body = sc__body_json(q);
	if (!body || sc__pick_model(q, json_object_get(body, "model")) < 0)
		return json_decref(body);
	gen_params_t p = {.fmt = FMT_EMBED, .n = 1, .logprobs = -1};
	gen_prompts_t pr = {0};
	json_t *fmt = json_object_get(body, "encoding_format");
	long long dims;
	const char *f = json_string_value(fmt);
	static const char *const embed_fields[] = {"model",      "input", "encoding_format",
	                                           "dimensions", "user",  NULL};
	int rc = sc__known_fields(q, body, 0, embed_fields);
	if (rc == 0)
		rc = get_int(q, body, "dimensions", 1, q->m->model->cfg.dim, &dims);
	if (rc < 0) {
	} else if (fmt && !json_is_null(fmt) &&
	           (!f || (strcmp(f, "float") != 0 && strcmp(f, "base64") != 0))) {
		sc__reply_error(q, 400, "encoding_format",
		                "encoding_format must be float or base64");
	} else if (!json_object_get(body, "input")) {
		sc__reply_error(q, 400, "input", "input is required");
	} else if (read_inputs(q, json_object_get(body, "input"), "input", &pr,
	                       q->m->model->cfg.seq_len) == 0) {
		p.embed_dims = rc > 0 ? (int)dims : 0;
		p.embed_base64 = f && strcmp(f, "base64") == 0;
		sc__gen_start(q, &p, &pr, NULL, 0);
		pr.ids = NULL;
	}
	free(pr.ids);
	json_decref(body);
}

static json_t *model_json(const sc_wmodel_t *m)
{
	return json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", m->name, "object", "model", "created",
	                 (json_int_t)time(NULL), "owned_by", "starcloud", "version", m->version);
}

/* GET /v1/models: each served model once (its newest version), and
 * GET /v1/models/{id} (id = name or name:version); 404 for another. */
static void h_models(wreq_t *q)
{
	sc_worker_t *w = q->w;
	const char *path = sc_http_path(q->req);
	if (strncmp(path, "/v1/models/", 11) == 0 && path[11]) {
		sc_wmodel_t *m = sc__worker_model(w, path + 11, NULL);
		if (!m)
			return sc__reply_error(q, 404, "model", "model \"%.100s\" does not exist",
			                       path + 11);
		return sc__reply_json(q, 200, model_json(m));
	}
	if (strcmp(path, "/v1/models") != 0 && strcmp(path, "/v1/models/") != 0)
		return sc__reply_error(q, 404, "path", "no such path");
	json_t *data = json_array();
	for (sc_wmodel_t *m = w->models; m; m = m->next)
		if (m->served && sc__worker_model(w, m->name, NULL) == m)
			json_array_append_new(data, model_json(m));
	sc__reply_json(q, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

void sc__openai_routes(sc_worker_t *w)
{
	sc__worker_route(w, "POST", "/v1/completions", h_completions);
	sc__worker_route(w, "POST", "/v1/chat/completions", h_chat);
	sc__worker_route(w, "POST", "/v1/embeddings", h_embeddings);
	sc__worker_route(w, "GET", "/v1/models", h_models);
	sc__worker_route(w, "GET", "/v1/models/", h_models);
}
