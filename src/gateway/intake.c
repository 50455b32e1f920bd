/* Request intake: the gateway's routes for client requests. Each request is
 * checked before anything goes upstream (bad input is refused naming the
 * field), its model and version resolved, and then handed to the attempt
 * loop (proxy.c) or to the prefill/decode phases (pd.c).
 *
 * OpenAI bodies are checked by a validating scan, never parsed into a tree,
 * and forwarded byte for byte unless a retry must rewrite them. */
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "gateway/proxy.h"
#include "starcloud/error.h"
#include "base/jscan.h"

/* Splits "name:version" into the request's model and pinned version. */
static int set_model(gw_req_t *q, const char *m, const char *v)
{
	const char *colon = v ? NULL : strchr(m, ':');
	size_t ml = colon ? (size_t)(colon - m) : strlen(m);
	if (ml == 0 || ml >= sizeof(q->model))
		return SC_EINVAL;
	memcpy(q->model, m, ml);
	q->model[ml] = '\0';
	const char *ver = v ? v : colon ? colon + 1 : NULL;
	if (ver) {
		if (!*ver || strlen(ver) >= sizeof(q->version))
			return SC_EINVAL;
		snprintf(q->version, sizeof(q->version), "%s", ver);
		q->pinned = 1;
		q->rewrite = colon != NULL;
	}
	return 0;
}

/* Starts routing once model and version are known. */
static void route(gw_req_t *q)
{
	/* A model of a parked autoscaled Deployment has no replica yet, and is
	 * known all the same: its request waits for one (proxy.c). */
	if (!sc__gw_model_known(q->gw, q->model, q->pinned ? q->version : NULL) &&
	    !(q->gw->may_hold && q->gw->may_hold(q->gw, q->model))) {
		/* Unknown names are not metric labels: they are unbounded. */
		q->model[0] = q->version[0] = '\0';
		sc__gw_fail(q, 404, "model_not_found", "model", "no such model or version");
		return;
	}
	if (!q->pinned) {
		const char *v = sc__gw_rollout_choose(q->gw, q->model);
		if (v) {
			snprintf(q->version, sizeof(q->version), "%s", v);
			q->rollout_chosen = 1;
		}
	}
	int gen = q->kind == GW_K_COMPL || q->kind == GW_K_CHAT;
	if (gen && sc__gw_model_has_role(q->gw, q->model, GW_ROLE_PREFILL) &&
	    sc__gw_model_has_role(q->gw, q->model, GW_ROLE_DECODE) &&
	    (q->single || !sc__gw_model_has_role(q->gw, q->model, GW_ROLE_BOTH))) {
		if (!q->single) {
			/* A prefill hands over one sequence's cache. */
			sc__gw_fail(q, 400, NULL, "n",
			            "n > 1 and several prompts need replicas of role both; this "
			            "model is served split into prefill and decode");
			return;
		}
		const char *v = q->rollout_chosen
		                    ? sc__gw_rollout_pd_version(q->gw, q->model, q->version)
		                    : q->version;
		if (v != q->version)
			snprintf(q->version, sizeof(q->version), "%s", v);
		sc__gw_req_json(q); /* the phases' bodies are built from it */
		sc__gw_pd_start(q);
		return;
	}
	if (q->kind == GW_K_EMBED && !sc__gw_model_has_role(q->gw, q->model, GW_ROLE_BOTH) &&
	    sc__gw_model_has_role(q->gw, q->model, GW_ROLE_PREFILL))
		q->role = GW_ROLE_PREFILL; /* prefill workers embed too */
	sc__gw_attempt(q);
}

/* The top-level fields an OpenAI request is checked and routed on. */
enum {
	OA_MODEL,
	OA_STREAM,
	OA_MAX_TOKENS,
	OA_MAX_COMPLETION,
	OA_PROMPT,
	OA_MESSAGES,
	OA_N,
	OA_INPUT,
	OA_STREAM_OPTIONS,
	OA_NKEYS
};
static const char *const oa_keys[OA_NKEYS] = {
    "model",    "stream", "max_tokens", "max_completion_tokens", "prompt",
    "messages", "n",      "input",      "stream_options"};

/* A refusal: the field (param) and the message, which names it too. */
typedef struct bad {
	const char *param;
	char msg[160];
} bad_t;

static int refuse(bad_t *b, const char *param, const char *msg)
{
	b->param = param;
	if (strcmp(param, "body") == 0 || strncmp(msg, param, strlen(param)) == 0)
		snprintf(b->msg, sizeof(b->msg), "%s", msg);
	else
		snprintf(b->msg, sizeof(b->msg), "%s: %s", param, msg);
	return -1;
}

static int check_count(const sc_jval_t *v, const char *name, bad_t *b)
{
	long long x = 0;
	int t = v->type;
	if (t != SC_JT_ABSENT && t != SC_JT_NULL && (sc_jscan_int(v, &x) < 0 || x < 0))
		return refuse(b, name, "expected a non-negative integer");
	return 0;
}

/* A prompt or embedding input: a string, or an array (of strings, token
 * ids or arrays of token ids); *one is set when it is a single sequence. */
static int check_input(const sc_jval_t *v, const char *name, int *one, bad_t *b)
{
	size_t n = 0;
	int same = SC_JT_ABSENT;
	if (v->type == SC_JT_STRING) {
		*one = 1;
		return 0;
	}
	if (v->type != SC_JT_ARRAY || sc_jscan_array(v, &n, &same) < 0 || n == 0)
		return refuse(b, name, "expected a string or a non-empty array");
	*one = same == SC_JT_INT || (n == 1 && same == SC_JT_STRING);
	return 0;
}

/* Validates a scanned request; 0 when good, else -1 with *b set. Sets
 * *single when the request is one sequence (one prompt, n = 1): only those
 * can be resumed mid-stream or split into prefill and decode. */
static int openai_check(int rc, const sc_jval_t *v, int kind, int *single, bad_t *b)
{
	if (rc == SC_EPARSE)
		return refuse(b, "body", "the body is not valid JSON");
	if (rc == SC_EINVAL)
		return refuse(b, "body", "the body must be a JSON object");
	if (rc == SC_EEXISTS)
		return refuse(b, "body", "the body repeats a key the gateway routes on");
	if (v[OA_MODEL].type != SC_JT_STRING)
		return refuse(b, "model", "model: expected a string");
	int st = v[OA_STREAM].type;
	if (st != SC_JT_ABSENT && st != SC_JT_NULL && st != SC_JT_TRUE && st != SC_JT_FALSE)
		return refuse(b, "stream", "stream: expected true or false");
	int so = v[OA_STREAM_OPTIONS].type;
	if (so != SC_JT_ABSENT && so != SC_JT_NULL && so != SC_JT_OBJECT)
		return refuse(b, "stream_options", "stream_options: expected an object");
	if (check_count(&v[OA_MAX_TOKENS], "max_tokens", b) < 0 ||
	    check_count(&v[OA_MAX_COMPLETION], "max_completion_tokens", b) < 0 ||
	    check_count(&v[OA_N], "n", b) < 0)
		return -1;
	long long n = 1;
	if (v[OA_N].type == SC_JT_INT)
		sc_jscan_int(&v[OA_N], &n);
	int one = 0;
	if (kind == GW_K_EMBED) {
		if (check_input(&v[OA_INPUT], "input", &one, b) < 0)
			return -1;
	} else if (kind == GW_K_COMPL) {
		if (check_input(&v[OA_PROMPT], "prompt", &one, b) < 0)
			return -1;
	} else {
		size_t nm = 0;
		int same = SC_JT_ABSENT;
		if (sc_jscan_array(&v[OA_MESSAGES], &nm, &same) < 0 || nm == 0)
			return refuse(b, "messages", "messages: expected a non-empty array");
		if (same != SC_JT_OBJECT)
			return refuse(b, "messages", "messages: every message must be an object");
		one = 1;
	}
	*single = one && n <= 1;
	return 0;
}

/* Checks and routes an OpenAI request from a validating scan of its body:
 * the body is forwarded as it came, never parsed into a tree, unless a
 * retry must rewrite it (see sc__gw_req_json). */
static void openai(sc_http_req_t *hr, sc_gw_t *gw, int kind, const char *path)
{
	size_t len;
	const char *raw = sc_http_body(hr, &len);
	sc_jval_t v[OA_NKEYS];
	bad_t bad;
	int single = 0;
	int rc = sc_jscan_object(raw, len, oa_keys, OA_NKEYS, v);
	if (openai_check(rc, v, kind, &single, &bad) < 0) {
		sc__gw_error(hr, 400, NULL, bad.param, bad.msg);
		return;
	}
	gw_req_t *q = sc__gw_req_new(gw, hr, kind);
	q->stream = v[OA_STREAM].type == SC_JT_TRUE;
	q->single = single;
	memcpy(q->path, path, strlen(path) + 1); /* one of our constants */
	char model[GW_MAX_NAME + GW_MAX_VERSION + 2];
	if (sc_jscan_string(&v[OA_MODEL], model, sizeof(model)) < 0 ||
	    set_model(q, model, NULL) < 0) {
		sc__gw_fail(q, 400, NULL, "model", "model: expected NAME or NAME:VERSION");
		return;
	}
	route(q);
}

static void h_completions(sc_http_req_t *hr, void *ud)
{
	openai(hr, ud, GW_K_COMPL, "/v1/completions");
}

static void h_chat(sc_http_req_t *hr, void *ud)
{
	openai(hr, ud, GW_K_CHAT, "/v1/chat/completions");
}

static void h_embeddings(sc_http_req_t *hr, void *ud)
{
	openai(hr, ud, GW_K_EMBED, "/v1/embeddings");
}

/* Copies the path segment at *p (up to the next '/') into out and moves *p
 * past it; SC_EINVAL when it is empty or does not fit. */
static int path_segment(const char **p, char *out, size_t sz)
{
	size_t l = strcspn(*p, "/");
	if (l == 0 || l >= sz)
		return SC_EINVAL;
	memcpy(out, *p, l);
	out[l] = '\0';
	*p += l;
	return 0;
}

/* /v2/models/{m}[/versions/{v}][/rest]: splits the path; rest is what
 * follows ("/infer", "/ready", ""). */
static int kserve_path(const char *path, char *m, size_t msz, char *v, size_t vsz,
                       const char **rest)
{
	const char *p = path + strlen("/v2/models/");
	v[0] = '\0';
	if (path_segment(&p, m, msz) < 0)
		return SC_EINVAL;
	if (strncmp(p, "/versions/", 10) == 0) {
		p += 10;
		if (path_segment(&p, v, vsz) < 0)
			return SC_EINVAL;
	}
	*rest = p;
	return 0;
}

static int kserve_ready(sc_gw_t *gw, const char *m, const char *v)
{
	for (size_t i = 0; i < gw->nbe; i++) {
		gw_backend_t *b = gw->be[i];
		if (strcmp(b->model, m) == 0 && (!*v || strcmp(b->version, v) == 0) &&
		    b->role != GW_ROLE_PREFILL && sc__gw_backend_usable(gw, b))
			return 1;
	}
	return 0;
}

static void h_kserve(sc_http_req_t *hr, void *ud)
{
	sc_gw_t *gw = ud;
	char m[GW_MAX_NAME], v[GW_MAX_VERSION];
	const char *rest;
	const char *path = sc_http_path(hr);
	const char *method = sc_http_method(hr);
	if (kserve_path(path, m, sizeof(m), v, sizeof(v), &rest) < 0) {
		sc__gw_kserve_error(hr, 400,
		                    "expected /v2/models/{model}[/versions/{version}]/...");
		return;
	}
	int infer = strcmp(rest, "/infer") == 0, gen = strcmp(rest, "/generate") == 0,
	    gen_stream = strcmp(rest, "/generate_stream") == 0;
	if (strcmp(rest, "/ready") == 0 && strcmp(method, "GET") == 0) {
		int ok = kserve_ready(gw, m, v);
		sc_http_respond(hr, ok ? 200 : 400, "application/json", "", 0);
		return;
	}
	int post = infer || gen || gen_stream;
	if ((post && strcmp(method, "POST") != 0) || (!post && strcmp(method, "GET") != 0) ||
	    (!post && *rest)) {
		sc__gw_kserve_error(hr, post ? 405 : 404,
		                    post ? "this route takes POST" : "no such path");
		return;
	}
	size_t jlen = 0;
	const char *ihcl = sc_http_header(hr, "Inference-Header-Content-Length");
	if (post) {
		size_t len;
		const char *raw = sc_http_body(hr, &len);
		const char *bad = NULL;
		uint64_t n = len;
		/* The binary tensor extension: only the first N bytes are JSON. */
		if (infer && ihcl && sc_parse_u64(ihcl, 0, len, &n) < 0)
			bad =
			    "Inference-Header-Content-Length: expected the JSON header's size, at "
			    "most the body's";
		jlen = (size_t)n;
		static const char *const keys[] = {"inputs"};
		sc_jval_t in;
		int rc = bad ? 0 : sc_jscan_object(raw, jlen, keys, 1, &in);
		if (!bad)
			bad = rc == SC_EPARSE || rc == SC_EINVAL ? "the body must be a JSON object"
			      : !infer                           ? NULL
			      : rc == SC_EEXISTS                 ? "inputs: given twice"
			      : in.type != SC_JT_ARRAY           ? "inputs: expected an array"
			                                         : NULL;
		if (bad) {
			sc__gw_kserve_error(hr, 400, bad);
			return;
		}
	}
	gw_req_t *q = sc__gw_req_new(gw, hr, post ? GW_K_INFER : GW_K_PASS);
	q->stream = gen_stream;
	if (infer && ihcl)
		snprintf(q->ihcl, sizeof(q->ihcl), "%zu", jlen);
	set_model(q, m, *v ? v : NULL);
	if (*v)
		snprintf(q->path, sizeof(q->path), "/v2/models/%s/versions/%s%s", m, v, rest);
	else
		snprintf(q->path, sizeof(q->path), "/v2/models/%s%s", m, rest);
	route(q);
}

int sc__gw_proxy_routes(sc_gw_t *gw)
{
	int rc = sc_http_route(gw->http, "POST", "/v1/completions", h_completions, gw);
	if (rc == 0)
		rc = sc_http_route(gw->http, "POST", "/v1/chat/completions", h_chat, gw);
	if (rc == 0)
		rc = sc_http_route(gw->http, "POST", "/v1/embeddings", h_embeddings, gw);
	if (rc == 0)
		rc = sc_http_route(gw->http, NULL, "/v2/models/", h_kserve, gw);
	return rc;
}
