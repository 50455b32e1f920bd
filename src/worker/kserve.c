/* KServe v2 (Open Inference Protocol, as Triton serves it): health,
 * server and model metadata, infer (JSON and the binary tensor data
 * extension, batches, nested data) and Triton's generate extension
 * (generate, generate_stream). Errors are KServe's {"error": "message"}.
 *
 * Binary tensor data: when the request carries Inference-Header-Content-
 * Length: N, the first N bytes of the body are the JSON header and the rest
 * holds the tensors whose parameters say binary_data_size, in the order of
 * the inputs: BYTES elements as a 4-byte little-endian length and the
 * bytes, integers as 1, 2, 4 or 8 little-endian bytes per element.
 *
 * Every v2 datatype is known: text_input takes BYTES, input_ids any
 * integer type (INT8..INT64, UINT8..UINT64, each value range-checked);
 * BOOL and the floating types (FP16, BF16, FP32, FP64) hold no text nor
 * token ids and are refused naming the input and the datatype, as is a
 * name that is no v2 datatype, a shape the data does not fill, binary data
 * of the wrong size and a field nobody reads. */
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

/* The v2 protocol's datatypes: element width in the binary extension
 * and what a model input of each may hold. */
enum { DK_BOOL, DK_UINT, DK_INT, DK_FLOAT, DK_BYTES };
static const struct dtype {
	const char *name;
	int width, kind;
} dtypes[] = {
    {"BOOL", 1, DK_BOOL},   {"UINT8", 1, DK_UINT},  {"UINT16", 2, DK_UINT}, {"UINT32", 4, DK_UINT},
    {"UINT64", 8, DK_UINT}, {"INT8", 1, DK_INT},    {"INT16", 2, DK_INT},   {"INT32", 4, DK_INT},
    {"INT64", 8, DK_INT},   {"FP16", 2, DK_FLOAT},  {"BF16", 2, DK_FLOAT},  {"FP32", 4, DK_FLOAT},
    {"FP64", 8, DK_FLOAT},  {"BYTES", 0, DK_BYTES},
};

static const struct dtype *dtype_find(const char *name)
{
	for (size_t i = 0; name && i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (strcmp(dtypes[i].name, name) == 0)
			return &dtypes[i];
	return NULL;
}

/* An n-byte little-endian integer; signed ones are sign-extended. A
 * UINT64 above INT64_MAX comes out negative: no token id, so refused. */
static int64_t le(const unsigned char *p, int n, int is_signed)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	if (is_signed && n < 8 && (v >> (8 * n - 1)) & 1)
		v |= ~(uint64_t)0 << (8 * n);
	return (int64_t)v;
}

/* The elements of a binary tensor, from bin (len bytes). */
static int binary_elems(tensor_t *t, const unsigned char *bin, size_t len, const struct dtype *dt)
{
	size_t at = 0;
	for (long long i = 0; i < t->elems; i++) {
		if (t->is_bytes) {
			if (len - at < 4)
				return -1;
			size_t n = (size_t)le(bin + at, 4, 0);
			if (n > len - at - 4)
				return -1;
			t->sp[i] = (const char *)bin + at + 4;
			t->sl[i] = n;
			at += 4 + n;
		} else {
			t->iv[i] = le(bin + at, dt->width, dt->kind == DK_INT);
			at += (size_t)dt->width;
		}
	}
	return at == len ? 0 : -1;
}

/* The range of an integer datatype's values in JSON. */
static void int_range(const struct dtype *dt, json_int_t *lo, json_int_t *hi)
{
	int bits = 8 * dt->width;
	if (dt->kind == DK_UINT) {
		*lo = 0;
		*hi = bits == 64 ? INT64_MAX : (json_int_t)((1ULL << bits) - 1);
	} else {
		*lo = bits == 64 ? INT64_MIN : -(json_int_t)(1ULL << (bits - 1));
		*hi = bits == 64 ? INT64_MAX : (json_int_t)((1ULL << (bits - 1)) - 1);
	}
}

/* The elements of a JSON tensor (data flat or nested); *bad is the index
 * of an element of the wrong type or out of the datatype's range. */
static int json_elems(tensor_t *t, json_t *data, const struct dtype *dt, long long *bad)
{
	json_t *flat = json_array();
	int rc = flatten(data, flat, 0);
	json_int_t lo = 0, hi = 0;
	if (!t->is_bytes)
		int_range(dt, &lo, &hi);
	if (rc == 0 && (long long)json_array_size(flat) != t->elems)
		rc = -1;
	for (long long i = 0; rc == 0 && i < t->elems; i++) {
		json_t *e = json_array_get(flat, (size_t)i);
		if (t->is_bytes && json_is_string(e)) {
			t->sp[i] = json_string_value(e);
			t->sl[i] = json_string_length(e);
		} else if (!t->is_bytes && json_is_integer(e) && json_integer_value(e) >= lo &&
		           json_integer_value(e) <= hi) {
			t->iv[i] = json_integer_value(e);
		} else {
			*bad = i;
			rc = -2;
		}
	}
	/* Strings stay borrowed from data, which outlives the tensor. */
	json_decref(flat);
	return rc;
}

/* Checks input i's datatype against what the input takes (text_input:
 * BYTES; input_ids: any integer type); *out is the datatype. */
static int tensor_dtype(wreq_t *q, json_t *in, size_t i, const char *name, int want_bytes,
                        const struct dtype **out)
{
	char f[64];
	json_t *v = json_object_get(in, "datatype");
	const char *dts = json_string_value(v);
	const struct dtype *dt = dtype_find(dts);
	snprintf(f, sizeof(f), "inputs[%zu].datatype", i);
	if (!dt) {
		sc__reply_error(q, 400, f,
		                "%s: \"%.32s\" is not a KServe v2 datatype (BOOL, UINT8, UINT16, "
		                "UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, FP32, FP64, "
		                "BF16, BYTES)",
		                f,
		                dts                     ? dts
		                : json_is_null(v) || !v ? "(missing)"
		                                        : "(not a string)");
		return -1;
	}
	if (want_bytes && dt->kind != DK_BYTES) {
		sc__reply_error(q, 400, f, "%s: %s takes BYTES (strings), not %s", f, name,
		                dt->name);
		return -1;
	}
	if (!want_bytes && dt->kind != DK_INT && dt->kind != DK_UINT) {
		sc__reply_error(q, 400, f,
		                "%s: %s takes integer token ids (INT8..INT64 or UINT8..UINT64), "
		                "not %s",
		                f, name, dt->name);
		return -1;
	}
	*out = dt;
	return 0;
}

/* Reads input i's shape into t; -1 after a 400. */
static int tensor_shape(wreq_t *q, json_t *in, size_t i, tensor_t *t)
{
	json_t *shape = json_object_get(in, "shape"), *d;
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
		char f[64];
		snprintf(f, sizeof(f), "inputs[%zu].shape", i);
		sc__reply_error(q, 400, f,
		                "%s must be 1 to %d non-negative integers (at most %d elements)", f,
		                MAX_DIMS, MAX_ELEMS);
		return -1;
	}
	return 0;
}

/* Input i's elements from its binary data (n bytes at *bin, consumed). */
static int tensor_binary(wreq_t *q, size_t i, const char *name, const struct dtype *dt, tensor_t *t,
                         json_int_t n, const unsigned char **bin, size_t *binlen)
{
	char f[80];
	snprintf(f, sizeof(f), "inputs[%zu].parameters.binary_data_size", i);
	if (!t->is_bytes && n != t->elems * dt->width) {
		sc__reply_error(q, 400, f,
		                "%s: %s is %lld %s elements (the shape), %lld bytes, not %lld", f,
		                name, t->elems, dt->name, t->elems * dt->width, (long long)n);
		return -1;
	}
	int rc = binary_elems(t, *bin, (size_t)n, dt);
	*bin += n;
	*binlen -= (size_t)n;
	if (rc < 0)
		sc__reply_error(q, 400, f,
		                "%s: %s must be %lld BYTES elements (the shape), each a 4-byte "
		                "little-endian length and that many bytes, filling exactly "
		                "binary_data_size (%lld) bytes",
		                f, name, t->elems, (long long)n);
	return rc;
}

/* 400 naming the first key of obj (at where: "inputs[0]", say) that is not
 * one of the NULL-terminated allowed: a field nobody reads (a misspelt
 * "datatpye", a "content" beside "data") is refused, never ignored. */
static int only_keys(wreq_t *q, json_t *obj, const char *where, const char *const *allowed)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v)
	{
		size_t i = 0;
		while (allowed[i] && strcmp(allowed[i], key) != 0)
			i++;
		if (allowed[i])
			continue;
		char f[128], known[160] = "";
		snprintf(f, sizeof(f), "%s%s%.64s", where, *where ? "." : "", key);
		for (i = 0; allowed[i]; i++)
			snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
			         i ? ", " : "", allowed[i]);
		sc__reply_error(q, 400, f, "%s: unknown field (this worker reads %s)", f, known);
		return -1;
	}
	return 0;
}

/* Reads input i (t zeroed), named name, which takes BYTES (text_input)
 * or integers (input_ids); binary data is taken from *bin. 0, or -1 after
 * a 400 naming the input and, where it is at fault, the datatype. */
static int read_tensor(wreq_t *q, json_t *in, size_t i, const char *name, tensor_t *t,
                       const unsigned char **bin, size_t *binlen)
{
	char f[64];
	const struct dtype *dt;
	static const char *const tensor_keys[] = {"name",       "datatype", "shape",
	                                          "parameters", "data",     NULL};
	static const char *const tensor_params[] = {"binary_data_size", NULL};
	snprintf(f, sizeof(f), "inputs[%zu]", i);
	if (!json_is_object(in)) {
		sc__reply_error(q, 400, f, "%s must be an object", f);
		return -1;
	}
	if (only_keys(q, in, f, tensor_keys) < 0)
		return -1;
	json_t *tp = json_object_get(in, "parameters");
	snprintf(f, sizeof(f), "inputs[%zu].parameters", i);
	if (tp && !json_is_object(tp)) {
		sc__reply_error(q, 400, f, "%s must be an object", f);
		return -1;
	}
	if (tp && only_keys(q, tp, f, tensor_params) < 0)
		return -1;
	t->is_bytes = strcmp(name, "text_input") == 0;
	if (tensor_dtype(q, in, i, name, t->is_bytes, &dt) < 0 || tensor_shape(q, in, i, t) < 0)
		return -1;
	t->sp = sc_calloc((size_t)t->elems + 1, sizeof(*t->sp));
	t->sl = sc_calloc((size_t)t->elems + 1, sizeof(*t->sl));
	t->iv = sc_calloc((size_t)t->elems + 1, sizeof(*t->iv));
	if (!t->sp || !t->sl || !t->iv) {
		sc__reply_error(q, 503, NULL, "out of memory");
		return -1;
	}
	json_t *bsz = json_object_get(json_object_get(in, "parameters"), "binary_data_size");
	json_t *data = json_object_get(in, "data");
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
		return tensor_binary(q, i, name, dt, t, n, bin, binlen);
	}
	long long bad = -1;
	int rc = json_is_array(data) ? json_elems(t, data, dt, &bad) : -1;
	snprintf(f, sizeof(f), "inputs[%zu].data", i);
	if (rc == -2 && !t->is_bytes) {
		json_int_t lo, hi;
		int_range(dt, &lo, &hi);
		sc__reply_error(
		    q, 400, f, "%s: element %lld of %s must be an %s: an integer from %lld to %lld",
		    f, bad, name, dt->name, (long long)lo, (long long)hi);
	} else if (rc < 0) {
		sc__reply_error(q, 400, f,
		                "%s: %s must hold %lld %s elements (the shape), flat or nested", f,
		                name, t->elems, dt->name);
	}
	return rc < 0 ? -1 : 0;
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
		static const char *const out_keys[] = {"name", "parameters", NULL};
		static const char *const out_params[] = {"binary_data", NULL};
		char w[48];
		snprintf(w, sizeof(w), "outputs[%zu]", i);
		json_t *op = json_object_get(o, "parameters");
		if (!json_is_object(o) || (op && !json_is_object(op))) {
			sc__reply_error(q, 400, w, "%s and its parameters must be objects", w);
			return -1;
		}
		if (only_keys(q, o, w, out_keys) < 0)
			return -1;
		snprintf(w, sizeof(w), "outputs[%zu].parameters", i);
		if (op && only_keys(q, op, w, out_params) < 0)
			return -1;
		const char *name = json_string_value(json_object_get(o, "name"));
		json_t *bd = json_object_get(op, "binary_data");
		if (bd && !json_is_boolean(bd)) {
			sc__reply_error(q, 400, w, "%s.binary_data must be true or false", w);
			return -1;
		}
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
	static const char *const infer_keys[] = {"id", "inputs", "outputs", "parameters", NULL};
	if (only_keys(q, body, "", infer_keys) < 0)
		goto out;
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
	if (read_tensor(q, in, 0, name, &t, &bin, &binlen) < 0)
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
