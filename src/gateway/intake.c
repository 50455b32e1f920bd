/* Request intake: the gateway's routes for client requests. Each request is
 * checked before anything goes upstream (bad input is refused naming the
 * field), its model and version resolved, and then handed to the attempt
 * loop (proxy.c) or to the prefill/decode phases (pd.c).
 *
 * OpenAI bodies are checked by a validating scan, never parsed into a tree,
 * and forwarded byte for byte unless a retry must rewrite them. */
#include <stdlib.h>
#include <string.h>

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
	if (!sc__gw_model_known(q->gw, q->model, q->pinned ? q->version : NULL)) {
		/* Unknown names are not metric labels: they are unbounded. */
		q->model[0] = q->version[0] = '\0';
		sc__gw_fail(q, 404, "model_not_found", "no such model or version");
		return;
	}
	if (!q->pinned) {
		const char *v = sc__gw_rollout_choose(q->gw, q->model);
		if (v) {
			snprintf(q->version, sizeof(q->version), "%s", v);
			q->rollout_chosen = 1;
		}
	}
	if ((q->kind == GW_K_COMPL || q->kind == GW_K_CHAT) &&
	    sc__gw_model_has_role(q->gw, q->model, GW_ROLE_PREFILL) &&
	    sc__gw_model_has_role(q->gw, q->model, GW_ROLE_DECODE)) {
		sc__gw_req_json(q); /* the phases' bodies are built from it */
		sc__gw_pd_start(q);
		return;
	}
	sc__gw_attempt(q);
}

/* The top-level fields an OpenAI request is checked and routed on. */
enum { OA_MODEL, OA_STREAM, OA_MAX_TOKENS, OA_PROMPT, OA_MESSAGES, OA_N };
static const char *const oa_keys[OA_N] = {"model", "stream", "max_tokens", "prompt", "messages"};

/* Validates a scanned request; NULL when good, else the message. */
static const char *openai_check(int rc, const sc_jval_t *v, int kind)
{
	if (rc == SC_EPARSE)
		return "the body is not valid JSON";
	if (rc == SC_EINVAL)
		return "the body must be a JSON object";
	if (rc == SC_EEXISTS)
		return "the body repeats a key (model, stream, max_tokens, prompt or messages)";
	if (v[OA_MODEL].type != SC_JT_STRING)
		return "model: expected a string";
	int st = v[OA_STREAM].type;
	if (st != SC_JT_ABSENT && st != SC_JT_TRUE && st != SC_JT_FALSE)
		return "stream: expected true or false";
	long long mt = 0;
	int mtt = v[OA_MAX_TOKENS].type;
	if (mtt != SC_JT_ABSENT && mtt != SC_JT_NULL &&
	    (sc_jscan_int(&v[OA_MAX_TOKENS], &mt) < 0 || mt < 0))
		return "max_tokens: expected a non-negative integer";
	if (kind == GW_K_COMPL) {
		int pt = v[OA_PROMPT].type;
		if (pt != SC_JT_STRING && pt != SC_JT_ARRAY)
			return "prompt: expected a string or an array";
		return NULL;
	}
	size_t n = 0;
	int same = SC_JT_ABSENT;
	if (sc_jscan_array(&v[OA_MESSAGES], &n, &same) < 0 || n == 0)
		return "messages: expected a non-empty array";
	if (same != SC_JT_OBJECT)
		return "messages: every message must be an object";
	return NULL;
}

/* Checks and routes an OpenAI request from a validating scan of its body:
 * the body is forwarded as it came, never parsed into a tree, unless a
 * retry must rewrite it (see sc__gw_req_json). */
static void openai(sc_http_req_t *hr, sc_gw_t *gw, int kind, const char *path)
{
	size_t len;
	const char *raw = sc_http_body(hr, &len);
	sc_jval_t v[OA_N];
	int rc = sc_jscan_object(raw, len, oa_keys, OA_N, v);
	const char *bad = openai_check(rc, v, kind);
	if (bad) {
		sc__gw_error(hr, 400, "invalid_request_error", bad);
		return;
	}
	gw_req_t *q = sc__gw_req_new(gw, hr, kind);
	q->stream = v[OA_STREAM].type == SC_JT_TRUE;
	memcpy(q->path, path, strlen(path) + 1); /* one of our two constants */
	char model[GW_MAX_NAME + GW_MAX_VERSION + 2];
	if (sc_jscan_string(&v[OA_MODEL], model, sizeof(model)) < 0 ||
	    set_model(q, model, NULL) < 0) {
		sc__gw_fail(q, 400, "invalid_request_error",
		            "model: expected NAME or NAME:VERSION");
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

static void kserve_error(sc_http_req_t *hr, int status, const char *msg)
{
	json_t *e = json_pack("{s:s}", "error", msg);
	char *s = json_dumps(e, JSON_COMPACT);
	sc_http_respond(hr, status, "application/json", s, strlen(s));
	free(s);
	json_decref(e);
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
		kserve_error(hr, 400, "expected /v2/models/{model}[/versions/{version}]/...");
		return;
	}
	int infer = strcmp(rest, "/infer") == 0;
	if (strcmp(rest, "/ready") == 0 && strcmp(method, "GET") == 0) {
		int ok = kserve_ready(gw, m, v);
		sc_http_respond(hr, ok ? 200 : 400, "application/json", "", 0);
		return;
	}
	if ((infer && strcmp(method, "POST") != 0) || (!infer && strcmp(method, "GET") != 0) ||
	    (!infer && *rest)) {
		kserve_error(hr, infer ? 405 : 404, infer ? "infer takes POST" : "no such path");
		return;
	}
	if (infer) {
		size_t len;
		const char *raw = sc_http_body(hr, &len);
		static const char *const keys[] = {"inputs"};
		sc_jval_t in;
		int rc = sc_jscan_object(raw, len, keys, 1, &in);
		const char *bad = rc == SC_EPARSE || rc == SC_EINVAL
		                      ? "the body must be a JSON object"
		                  : rc == SC_EEXISTS       ? "inputs: given twice"
		                  : in.type != SC_JT_ARRAY ? "inputs: expected an array"
		                                           : NULL;
		if (bad) {
			kserve_error(hr, 400, bad);
			return;
		}
	}
	gw_req_t *q = sc__gw_req_new(gw, hr, infer ? GW_K_INFER : GW_K_PASS);
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
		rc = sc_http_route(gw->http, NULL, "/v2/models/", h_kserve, gw);
	return rc;
}
