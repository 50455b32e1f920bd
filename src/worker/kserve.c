/* KServe v2 (Open Inference Protocol, as Triton serves it): health,
 * server and model metadata, infer (JSON and the binary tensor data
 * extension, batches, nested data) and Triton's generate extension
 * (generate, generate_stream). Errors are KServe's {"error": "message"}.
 *
 * Binary tensor data: when the request carries Inference-Header-Content-
 * Length: N, the first N bytes of the body are the JSON header and the rest
 * holds the tensors whose parameters say binary_data_size, in the order of
 * the inputs: BYTES elements as a 4-byte little-endian length and the
 * bytes, INT64 as 8 and INT32 as 4 little-endian bytes per element. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/version.h"
#include "base/alloc.h"
#include "starcloud/error.h"
#include "worker/worker_int.h"

#define MAX_ELEMS (1 << 20)
#define MAX_DIMS 4

/* ---------------------------------------------------------------------
 * Paths
 * ------------------------------------------------------------------- */

/* Splits /v2/models/{m}[/versions/{v}][/rest], sets q->m; 0 and *rest
 * on success, after a 404 otherwise. */
static int model_path(wreq_t *q, const char **rest)
{
	const char *p = sc_http_path(q->req) + strlen("/v2/models/");
	char name[128], ver[32] = "";
	size_t n = strcspn(p, "/");
	if (n == 0 || n >= sizeof(name)) {
		sc__reply_error(q, 404, "model", "unknown model \"%.*s\"", (int)(n > 100 ? 100 : n),
		                p);
		return -1;
	}
	memcpy(name, p, n);
	name[n] = '\0';
	p += n;
	if (strncmp(p, "/versions/", 10) == 0) {
		p += 10;
		n = strcspn(p, "/");
		if (n == 0 || n >= sizeof(ver)) {
			sc__reply_error(q, 404, "version", "unknown version of model %s", name);
			return -1;
		}
		memcpy(ver, p, n);
		ver[n] = '\0';
		p += n;
	}
	q->m = sc__worker_model(q->w, name, ver[0] ? ver : NULL);
	if (!q->m) {
		if (ver[0] && sc__worker_model(q->w, name, NULL))
			sc__reply_error(q, 404, "version", "unknown version \"%s\" of model %s",
			                ver, name);
		else
			sc__reply_error(q, 404, "model", "unknown model \"%s\"", name);
		return -1;
	}
	*rest = p;
	return 0;
}

/* ---------------------------------------------------------------------
 * Health and metadata
 * ------------------------------------------------------------------- */

static void h_live(wreq_t *q)
{
	sc__reply_raw(q, 200, "application/json", "", 0);
}

static void h_v2(wreq_t *q)
{
	q->err_shape = ERR_KSERVE;
	if (strcmp(sc_http_path(q->req), "/v2") != 0 && strcmp(sc_http_path(q->req), "/v2/") != 0)
		return sc__reply_error(q, 404, "path", "no such path");
	sc__reply_json(q, 200,
	               json_pack("{s:s, s:s, s:[s, s, s, s]}", "name", "starcloud-worker",
	                         "version", SC_VERSION, "extensions", "binary_tensor_data",
	                         "generate", "parameters", "model_repository"));
}

static json_t *tensor_meta(const char *name, const char *dtype, int d0, int d1)
{
	json_t *shape = d1 ? json_pack("[i, i]", d0, d1) : json_pack("[i]", d0);
	return json_pack("{s:s, s:s, s:o}", "name", name, "datatype", dtype, "shape", shape);
}

static void model_metadata(wreq_t *q)
{
	const sc_wmodel_t *m = q->m;
	json_t *in = json_pack("[o, o]", tensor_meta("text_input", "BYTES", -1, 0),
	                       tensor_meta("input_ids", "INT64", -1, -1));
	json_t *out = json_pack("[o, o]", tensor_meta("text_output", "BYTES", -1, 0),
	                        tensor_meta("output_ids", "INT64", -1, -1));
	json_t *versions = json_array();
	for (sc_wmodel_t *o = q->w->models; o; o = o->next)
		if (o->served && strcmp(o->name, m->name) == 0)
			json_array_append_new(versions, json_string(o->version));
	sc__reply_json(q, 200,
	               json_pack("{s:s, s:o, s:s, s:o, s:o}", "name", m->name, "versions", versions,
	                         "platform", "starcloud_llama2c", "inputs", in, "outputs", out));
}

static void h_model_get(wreq_t *q)
{
	q->err_shape = ERR_KSERVE;
	const char *rest;
	if (model_path(q, &rest) < 0)
		return;
	if (*rest == '\0')
		return model_metadata(q);
	if (strcmp(rest, "/ready") == 0)
		return sc__reply_raw(q, 200, "application/json", "", 0);
	sc__reply_error(q, 404, "path", "no such path");
}

/* ---------------------------------------------------------------------
 * Tensors
 * ------------------------------------------------------------------- */

typedef struct tensor {
	int is_bytes;
	int64_t shape[MAX_DIMS];
	int ndim;
	long long elems;
	const char **sp; /* BYTES elements */
	size_t *sl;
	int64_t *iv; /* integer elements */
} tensor_t;

static void tensor_free(tensor_t *t)
{
	free(t->sp);
	free(t->sl);
	free(t->iv);
}

/* Appends the leaves of nested arrays (depth <= MAX_DIMS) to flat. */
static int flatten(json_t *v, json_t *flat, int depth)
{
	if (!json_is_array(v)) {
		json_array_append(flat, v);
		return json_array_size(flat) > MAX_ELEMS ? -1 : 0;
	}
	if (depth > MAX_DIMS)
		return -1;
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) if (flatten(e, flat, depth + 1) < 0) return -1;
	return 0;
}

static int64_t le(const unsigned char *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	if (n == 4)
		return (int32_t)(uint32_t)v;
	return (int64_t)v;
}

/* The elements of a binary tensor, from bin (len bytes). */
static int binary_elems(tensor_t *t, const unsigned char *bin, size_t len, int width)
{
	size_t at = 0;
	for (long long i = 0; i < t->elems; i++) {
		if (t->is_bytes) {
			if (len - at < 4)
				return -1;
			size_t n = (size_t)le(bin + at, 4) & 0xffffffffu;
			if (n > len - at - 4)
				return -1;
			t->sp[i] = (const char *)bin + at + 4;
			t->sl[i] = n;
			at += 4 + n;
		} else {
			if (len - at < (size_t)width)
				return -1;
			t->iv[i] = le(bin + at, width);
			at += (size_t)width;
		}
	}
	return at == len ? 0 : -1;
}

/* The elements of a JSON tensor (data flat or nested). */
static int json_elems(tensor_t *t, json_t *data)
{
	json_t *flat = json_array();
	int rc = flatten(data, flat, 0);
	if (rc == 0 && (long long)json_array_size(flat) != t->elems)
		rc = -1;
	for (long long i = 0; rc == 0 && i < t->elems; i++) {
		json_t *e = json_array_get(flat, (size_t)i);
		if (t->is_bytes && json_is_string(e)) {
			t->sp[i] = json_string_value(e);
			t->sl[i] = json_string_length(e);
		} else if (!t->is_bytes && json_is_integer(e)) {
			t->iv[i] = json_integer_value(e);
		} else {
			rc = -1;
		}
	}
	/* Strings stay borrowed from data, which outlives the tensor. */
	json_decref(flat);
	return rc;
}

/* Reads input i (t zeroed) of datatype want ("BYTES" or "INT64", which
 * also takes INT32); binary data is taken from *bin. 0, or -1 after a 400. */
static int read_tensor(wreq_t *q, json_t *in, size_t i, const char *want, tensor_t *t,
                       const unsigned char **bin, size_t *binlen)
{
	char f[64];
	const char *dt = json_string_value(json_object_get(in, "datatype"));
	json_t *shape = json_object_get(in, "shape"), *d;
	int width = dt && strcmp(dt, "INT32") == 0 ? 4 : 8;
	t->is_bytes = strcmp(want, "BYTES") == 0;
	if (!dt || (strcmp(dt, want) != 0 && !(!t->is_bytes && strcmp(dt, "INT32") == 0))) {
		snprintf(f, sizeof(f), "inputs[%zu].datatype", i);
		sc__reply_error(q, 400, f, "%s must be %s", f,
		                t->is_bytes ? "BYTES" : "INT64 or INT32");
		return -1;
	}
	t->elems = 1;
	size_t k;
	if (!json_is_array(shape) || json_array_size(shape) == 0 ||
	    json_array_size(shape) > MAX_DIMS)
		t->elems = -1;
	json_array_foreach(shape, k, d)
	{
		if (t->elems < 0 || !json_is_integer(d) || json_integer_value(d) < 0 ||
		    json_integer_value(d) > MAX_ELEMS ||
		    t->elems * json_integer_value(d) > MAX_ELEMS) {
			t->elems = -1;
			break;
		}
		t->shape[t->ndim++] = json_integer_value(d);
		t->elems *= json_integer_value(d);
	}
	if (t->elems < 0) {
		snprintf(f, sizeof(f), "inputs[%zu].shape", i);
		sc__reply_error(q, 400, f,
		                "%s must be 1 to %d non-negative integers (at most %d elements)", f,
		                MAX_DIMS, MAX_ELEMS);
		return -1;
	}
	t->sp = sc_calloc((size_t)t->elems + 1, sizeof(*t->sp));
	t->sl = sc_calloc((size_t)t->elems + 1, sizeof(*t->sl));
	t->iv = sc_calloc((size_t)t->elems + 1, sizeof(*t->iv));
	if (!t->sp || !t->sl || !t->iv) {
		sc__reply_error(q, 503, NULL, "out of memory");
		return -1;
	}
	json_t *bsz = json_object_get(json_object_get(in, "parameters"), "binary_data_size");
	json_t *data = json_object_get(in, "data");
	int rc;
	if (bsz) {
		json_int_t n = json_integer_value(bsz);
		if (!json_is_integer(bsz) || n < 0 || (size_t)n > *binlen || data) {
			snprintf(f, sizeof(f), "inputs[%zu].parameters.binary_data_size", i);
			sc__reply_error(q, 400, f,
			                "%s must be the size of this input's binary data, "
			                "within the body (and no data beside it)",
			                f);
			return -1;
		}
		rc = binary_elems(t, *bin, (size_t)n, width);
		*bin += n;
		*binlen -= (size_t)n;
	} else {
		rc = json_is_array(data) ? json_elems(t, data) : -1;
	}
	if (rc < 0) {
		snprintf(f, sizeof(f), "inputs[%zu].data", i);
		sc__reply_error(q, 400, f, "%s must hold %lld %s elements (the shape)", f, t->elems,
		                t->is_bytes ? "string" : "integer");
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------------
 * Infer
 * ------------------------------------------------------------------- */

/* The prompts of a text_input ([B] or [B, 1]) or input_ids ([n] or
 * [B, n]) tensor. */
static int tensor_prompts(wreq_t *q, const tensor_t *t, gen_params_t *p, gen_prompts_t *pr)
{
	int max = q->m->model->cfg.seq_len - 1, vocab = q->m->model->cfg.vocab_size;
	long long b = t->is_bytes ? t->elems : t->ndim == 1 ? 1 : t->shape[0];
	long long n = t->is_bytes ? 1 : t->ndim == 1 ? t->shape[0] : t->shape[1];
	if (b < 1 || b > SC_WORKER_MAX_PROMPTS || (t->is_bytes && t->ndim > 2) ||
	    (t->is_bytes && t->ndim == 2 && t->shape[1] != 1) || (!t->is_bytes && t->ndim > 2) ||
	    (!t->is_bytes && (n < 1 || n > max))) {
		sc__reply_error(q, 400, "inputs[0].shape",
		                "inputs[0].shape: %s takes a batch of 1 to %d %s",
		                t->is_bytes ? "text_input" : "input_ids", SC_WORKER_MAX_PROMPTS,
		                t->is_bytes ? "strings, shape [B] or [B, 1]"
		                            : "rows of 1..seq_len-1 ids, shape [n] or [B, n]");
		return -1;
	}
	p->kserve_batch = b > 1;
	pr->ids = sc_malloc((size_t)b * (size_t)(t->is_bytes ? max : n) * sizeof(int));
	if (!pr->ids) {
		sc__reply_error(q, 503, NULL, "out of memory");
		return -1;
	}
	for (long long r = 0; r < b; r++) {
		int at = pr->off[pr->n], k;
		if (t->is_bytes) {
			k = sc__encode_text(q, "inputs[0].data", t->sp[r], t->sl[r], pr->ids + at,
			                    max);
			if (k < 0)
				return -1;
		} else {
			for (k = 0; k < n; k++) {
				int64_t v = t->iv[r * n + k];
				if (v < 0 || v >= vocab) {
					sc__reply_error(
					    q, 400, "inputs[0].data",
					    "inputs[0].data: input_ids must be token ids from 0 "
					    "to %d",
					    vocab - 1);
					return -1;
				}
				pr->ids[at + k] = (int)v; /* used as given: no BOS added */
			}
		}
		pr->off[++pr->n] = at + k;
	}
	return 0;
}

/* "outputs": which of text_output/output_ids to return (default both),
 * and which as binary data. */
static int infer_outputs(wreq_t *q, json_t *body, gen_params_t *p)
{
	json_t *outs = json_object_get(body, "outputs"), *o;
	json_t *bdo = json_object_get(json_object_get(body, "parameters"), "binary_data_output");
	p->want_text = p->want_ids = 1;
	p->binary_out = json_is_true(bdo) ? 3 : 0;
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
		json_t *bd = json_object_get(json_object_get(o, "parameters"), "binary_data");
		int bit = name && strcmp(name, "text_output") == 0  ? 1
		          : name && strcmp(name, "output_ids") == 0 ? 2
		                                                    : 0;
		if (!bit) {
			char f[48];
			snprintf(f, sizeof(f), "outputs[%zu].name", i);
			sc__reply_error(q, 400, f, "%s must be text_output or output_ids", f);
			return -1;
		}
		*(bit == 1 ? &p->want_text : &p->want_ids) = 1;
		if (json_is_true(bd))
			p->binary_out |= bit;
		else if (json_is_false(bd))
			p->binary_out &= ~bit;
	}
	return 0;
}

/* Sampling parameters from a KServe "parameters" object (or {}). */
static int kserve_params(wreq_t *q, json_t *params, gen_params_t *p)
{
	if (params && !json_is_object(params)) {
		sc__reply_error(q, 400, "parameters", "parameters must be an object");
		return -1;
	}
	json_t *tmp = json_object();
	json_object_update(tmp, params);
	/* The binary extension's own keys are not sampling parameters. */
	json_object_del(tmp, "binary_data_output");
	/* A parameter nobody reads (Triton's priority, say) is refused. */
	int rc = sc__known_fields(q, tmp, 1, NULL);
	if (rc == 0)
		rc = sc__gen_params(q, tmp, p);
	json_decref(tmp);
	return rc;
}

/* Splits a body in the binary extension's layout: the JSON header, then
 * the tensors. */
static json_t *infer_body(wreq_t *q, const unsigned char **bin, size_t *binlen)
{
	size_t len;
	const char *body = sc_http_body(q->req, &len),
	           *h = sc_http_header(q->req, "Inference-Header-Content-Length");
	size_t jlen = len;
	if (h) {
		uint64_t n;
		if (sc_parse_u64(h, 0, len, &n) < 0) {
			sc__reply_error(
			    q, 400, "Inference-Header-Content-Length",
			    "Inference-Header-Content-Length must be the JSON header's size "
			    "(at most the body's %zu bytes)",
			    len);
			return NULL;
		}
		jlen = (size_t)n;
	}
	*bin = (const unsigned char *)body + jlen;
	*binlen = len - jlen;
	json_error_t e;
	json_t *j = jlen ? json_loadb(body, jlen, JSON_REJECT_DUPLICATES, &e) : NULL;
	if (!json_is_object(j)) {
		json_decref(j);
		sc__reply_error(q, 400, "body", "the %s must be a JSON object%s%s",
		                h ? "JSON header" : "body", jlen ? ": " : "", jlen ? e.text : "");
		return NULL;
	}
	return j;
}

static void h_infer(wreq_t *q)
{
	const unsigned char *bin;
	size_t binlen;
	json_t *body = infer_body(q, &bin, &binlen);
	if (!body)
		return;
	gen_params_t p = {.fmt = FMT_KSERVE};
	gen_prompts_t pr = {0};
	tensor_t t = {0};
	json_t *id = json_object_get(body, "id"), *inputs = json_object_get(body, "inputs"), *in;
	if (id && (!json_is_string(id) || json_string_length(id) >= sizeof(p.req_id))) {
		sc__reply_error(q, 400, "id", "id must be a string of at most 127 bytes");
		goto out;
	}
	if (id)
		snprintf(p.req_id, sizeof(p.req_id), "%s", json_string_value(id));
	if (kserve_params(q, json_object_get(body, "parameters"), &p) < 0 ||
	    infer_outputs(q, body, &p) < 0)
		goto out;
	if (p.stream || p.n != 1 || p.logprobs >= 0) {
		sc__reply_error(q, 400, "parameters",
		                "infer takes neither stream, n nor logprobs (see generate_stream)");
		goto out;
	}
	if (!json_is_array(inputs) || json_array_size(inputs) != 1) {
		sc__reply_error(q, 400, "inputs",
		                "inputs must be an array of one tensor: "
		                "text_input or input_ids");
		goto out;
	}
	in = json_array_get(inputs, 0);
	const char *name = json_string_value(json_object_get(in, "name"));
	if (!name || (strcmp(name, "text_input") && strcmp(name, "input_ids"))) {
		sc__reply_error(q, 400, "inputs[0].name",
		                "inputs[0].name must be text_input or input_ids");
		goto out;
	}
	if (read_tensor(q, in, 0, strcmp(name, "text_input") ? "INT64" : "BYTES", &t, &bin,
	                &binlen) < 0)
		goto out;
	if (binlen) {
		sc__reply_error(q, 400, "body", "%zu bytes of binary data belong to no input",
		                binlen);
		goto out;
	}
	if (tensor_prompts(q, &t, &p, &pr) == 0) {
		sc__gen_start(q, &p, &pr, NULL, 0);
		pr.ids = NULL;
	}
out:
	tensor_free(&t);
	free(pr.ids);
	json_decref(body);
}

/* Triton's generate extension: {"text_input" | "input_ids", "parameters"?,
 * sampling fields at the top level or in parameters}. */
static void h_generate(wreq_t *q, int stream)
{
	json_t *body = sc__body_json(q);
	if (!body)
		return;
	gen_params_t p = {.fmt = FMT_GENERATE};
	gen_prompts_t pr = {0};
	json_t *params = json_object(), *text = json_object_get(body, "text_input");
	json_t *iids = json_object_get(body, "input_ids"),
	       *inner = json_object_get(body, "parameters");
	int max = q->m->model->cfg.seq_len - 1, n = -1;
	json_object_update(params, body);
	json_object_del(params, "text_input");
	json_object_del(params, "input_ids");
	json_object_del(params, "parameters");
	json_object_del(params, "id");
	if (inner && !json_is_object(inner)) {
		sc__reply_error(q, 400, "parameters", "parameters must be an object");
		goto out;
	}
	json_object_update(params, inner);
	json_object_set_new(params, "stream", json_boolean(stream));
	if (sc__known_fields(q, params, 1, NULL) < 0 || sc__gen_params(q, params, &p) < 0)
		goto out;
	if (p.n != 1 || !!text == !!iids) {
		sc__reply_error(q, 400, p.n != 1 ? "n" : "text_input",
		                p.n != 1 ? "generate takes n = 1" : "give text_input or input_ids");
		goto out;
	}
	if (!(pr.ids = sc_malloc((size_t)max * sizeof(int)))) {
		sc__reply_error(q, 503, NULL, "out of memory");
		goto out;
	}
	if (text && !json_is_string(text))
		sc__reply_error(q, 400, "text_input", "text_input must be a string");
	else if (text)
		n = sc__encode_text(q, "text_input", json_string_value(text),
		                    json_string_length(text), pr.ids, max);
	else if (!json_is_array(iids))
		sc__reply_error(q, 400, "input_ids", "input_ids must be an array of token ids");
	else
		n = sc__ids_from_array(q, iids, "input_ids", pr.ids, max);
	if (n > 0) {
		pr.off[1] = n;
		pr.n = 1;
		sc__gen_start(q, &p, &pr, NULL, 0);
		pr.ids = NULL;
	}
out:
	free(pr.ids);
	json_decref(params);
	json_decref(body);
}

static void h_model_post(wreq_t *q)
{
	q->err_shape = ERR_KSERVE;
	const char *rest;
	if (model_path(q, &rest) < 0)
		return;
	int op = strcmp(rest, "/infer") == 0             ? 1
	         : strcmp(rest, "/generate") == 0        ? 2
	         : strcmp(rest, "/generate_stream") == 0 ? 3
	                                                 : 0;
	if (!op)
		return sc__reply_error(q, 404, "path", "no such path");
	if (sc__need_role(q, ROLE_BOTH) < 0 || sc__worker_faults(q))
		return;
	if (op == 1)
		h_infer(q);
	else
		h_generate(q, op == 3);
}

void sc__kserve_routes(sc_worker_t *w)
{
	sc__worker_route(w, "GET", "/v2/health/live", h_live);
	sc__worker_route(w, "GET", "/v2/health/ready", h_live);
	sc__worker_route(w, "GET", "/v2", h_v2);
	sc__worker_route(w, "GET", "/v2/models/", h_model_get);
	sc__worker_route(w, "POST", "/v2/models/", h_model_post);
}
