/* The rollout API of a Deployment (docs/SERVING.md):
 *
 *   GET  /api/v1/deployments/{name}/rollout          the rollout status
 *   POST /api/v1/deployments/{name}/rollout          {"action": "promote|abort|pause|resume"}
 *   POST /api/v1/deployments/{name}/rollout/report   {"version","requests","errors","p99"}
 *   POST /api/v1/deployments/{name}/autoscale/report {"gateway","inflight","queued","busy",
 *                                                     "requests","ttftP95"}
 *
 * The gateway reports each analysis window per version: a canary's windows
 * add up to its step's evidence, which the controller needs before it moves
 * the rollout on (deploy_ctl.c); a canary whose error rate exceeds
 * spec.rollout.maxErrorRate, in a window or over the step, with at least
 * spec.rollout.minRequests requests, is rolled back here at once, so the
 * server stays the source of truth. The gateway's own outcome
 * posts ({"action":"abort","source":"gateway","outcome":"rolled_back",...})
 * are accepted too: a rolled_back outcome counts as an automatic rollback.
 * Every body is checked whole before anything changes; a field of the
 * wrong type or an unknown field is a 400 that names it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/deploy.h"
#include "server/ha.h"
#include "base/alloc.h"
#include "starcloud/error.h"

#define MAX_TRIES 3
#define MAX_TEXT 256

/* ---- bodies -------------------------------------------------------------- */

typedef struct body_field {
	const char *name;
	int type; /* JSON_STRING, JSON_INTEGER, JSON_REAL (any number) */
} body_field_t;

static const body_field_t action_fields[] = {
    {"action", JSON_STRING},  {"source", JSON_STRING},
    {"outcome", JSON_STRING}, {"model", JSON_STRING},
    {"stable", JSON_STRING},  {"canary", JSON_STRING},
    {"reason", JSON_STRING},  {"canaryErrorRate", JSON_REAL},
    {"window", JSON_INTEGER}, {NULL, 0},
};

static const body_field_t report_fields[] = {
    {"version", JSON_STRING},
    {"requests", JSON_INTEGER},
    {"errors", JSON_INTEGER},
    {"p99", JSON_REAL},
    {"window", JSON_INTEGER},
    {"source", JSON_STRING},
    {NULL, 0},
};

static const body_field_t scale_fields[] = {
    {"gateway", JSON_STRING}, {"inflight", JSON_INTEGER}, {"queued", JSON_INTEGER},
    {"busy", JSON_INTEGER},   {"requests", JSON_INTEGER}, {"ttftP95", JSON_REAL},
    {"model", JSON_STRING},   {"roles", JSON_OBJECT},     {NULL, 0},
};

static int type_ok(json_t *v, int type)
{
	if (type == JSON_OBJECT)
		return json_is_object(v);
	if (type == JSON_REAL)
		return json_is_number(v);
	if (type == JSON_STRING)
		return json_is_string(v) && json_string_length(v) <= MAX_TEXT;
	return json_is_integer(v);
}

/* Parses the body and checks every member; answers 400 and returns NULL
 * on the first problem. */
static json_t *read_body(sc_http_req_t *r, const body_field_t *fields)
{
	size_t len, i;
	const char *text = sc_http_body(r, &len);
	json_error_t jerr;
	json_t *b = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr), *v;
	const char *k;
	if (!json_is_object(b)) {
		sc__api_error(r, 400, "BadRequest", "", "expected a JSON object (%s)",
		              b ? "got another type" : jerr.text);
		json_decref(b);
		return NULL;
	}
	json_object_foreach(b, k, v)
	{
		for (i = 0; fields[i].name && strcmp(fields[i].name, k) != 0; i++)
			;
		if (!fields[i].name || !type_ok(v, fields[i].type)) {
			sc__api_error(r, 400, "Invalid", k, "%.64s: %s", k,
			              fields[i].name ? "wrong type" : "unknown field");
			json_decref(b);
			return NULL;
		}
	}
	return b;
}

/* ---- answers ------------------------------------------------------------- */

static json_t *rollout_doc(json_t *obj)
{
	json_t *st = json_object_get(obj, "status");
	json_t *ro = json_object_get(st, "rollout");
	char v[SC_DEPLOY_VERSION_MAX + 2];
	sc__deploy_version(obj, v, sizeof(v));
	json_t *doc =
	    sc_xcheck(json_pack("{s:s,s:s,s:s,s:s,s:O*,s:O*}", "kind", "Rollout", "deployment",
	                        sc__str_of(json_object_get(obj, "metadata"), "name"), "model",
	                        sc__str_of(json_object_get(obj, "spec"), "model"), "version", v,
	                        "rollout", ro, "endpoints", json_object_get(st, "endpoints")));
	return doc;
}

static json_t *load(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who, const char *name,
                    int64_t *rev)
{
	return sc__api_load(s, r, who, sc__kind_by_name("Deployment"), name, rev);
}

/* ---- changes ------------------------------------------------------------- */

/* A change: 0, or ANSWERED when it refused and answered the request. */
#define ANSWERED 1
typedef int (*change_fn)(sc_server_t *s, sc_http_req_t *r, json_t *obj, json_t *body,
                         json_t *events);

static int live(json_t *obj)
{
	json_t *ro = json_object_get(json_object_get(obj, "status"), "rollout");
	const char *ph = sc__str_of(ro, "phase");
	return (strcmp(ph, "Progressing") == 0 || strcmp(ph, "Paused") == 0) &&
	       sc__str_of(ro, "canary")[0];
}

static int no_rollout(sc_http_req_t *r, json_t *obj)
{
	json_t *ro = json_object_get(json_object_get(obj, "status"), "rollout");
	sc__api_error(r, 409, "Conflict", "action", "no rollout in progress (phase %s)",
	              sc__str_of(ro, "phase")[0] ? sc__str_of(ro, "phase") : "none");
	return ANSWERED;
}

static int do_action(sc_server_t *s, sc_http_req_t *r, json_t *obj, json_t *body, json_t *events)
{
	const char *action = sc__str_of(body, "action"), *outcome = sc__str_of(body, "outcome");
	int64_t now = (int64_t)time(NULL);
	char why[400];
	if (!live(obj))
		return no_rollout(r, obj);
	if (strcmp(action, "promote") == 0) {
		sc__deploy_promote(obj, now);
	} else if (strcmp(action, "abort") == 0) {
		int gw = strcmp(outcome, "rolled_back") == 0;
		if (gw)
			snprintf(why, sizeof(why), "gateway: %.256s", sc__str_of(body, "reason"));
		else
			snprintf(why, sizeof(why), "aborted by a user");
		sc__deploy_rollback(s, obj, gw ? "gateway" : "abort", why, events);
	} else {
		sc__deploy_pause(obj, strcmp(action, "pause") == 0, now);
	}
	return 0;
}

static void set_analysis(json_t *obj, json_t *body, double rate)
{
	json_t *st = json_object_get(obj, "status"), *ro = json_object_get(st, "rollout");
	json_t *an = json_object_get(ro, "analysis");
	char now[40];
	if (!json_is_object(an))
		json_object_set_new(ro, "analysis", an = json_object());
	sc__now_rfc3339(now, sizeof(now));
	json_t *p99 = json_object_get(body, "p99");
	json_object_set_new(an, sc__str_of(body, "version"),
	                    json_pack("{s:O,s:O,s:f,s:f,s:s}", "requests",
	                              json_object_get(body, "requests"), "errors",
	                              json_object_get(body, "errors"), "errorRate", rate, "p99",
	                              p99 ? json_number_value(p99) : 0.0, "at", now));
}

static int do_report(sc_server_t *s, sc_http_req_t *r, json_t *obj, json_t *body, json_t *events)
{
	json_t *ro = json_object_get(json_object_get(obj, "status"), "rollout");
	const char *v = sc__str_of(body, "version");
	json_int_t req = json_integer_value(json_object_get(body, "requests"));
	json_int_t err = json_integer_value(json_object_get(body, "errors"));
	int is_canary = live(obj) && strcmp(v, sc__str_of(ro, "canary")) == 0;
	if (!is_canary && strcmp(v, sc__str_of(ro, "stable")) != 0) {
		sc__api_error(r, 409, "Conflict", "version",
		              "version \"%.64s\" is neither the stable nor a live canary", v);
		return ANSWERED;
	}
	double rate = req > 0 ? (double)err / (double)req : 0.0;
	set_analysis(obj, body, rate);
	if (!is_canary)
		return 0;
	/* The canary's evidence of this step; too many errors roll back at
	 * once, in this window or over the step, once there are enough
	 * requests to judge (one failure out of one proves nothing). */
	int64_t now = (int64_t)time(NULL);
	sc__deploy_evidence_add(obj, req, err, now);
	json_t *ev = json_object_get(ro, "evidence");
	json_int_t sreq = json_integer_value(json_object_get(ev, "requests"));
	json_int_t serr = json_integer_value(json_object_get(ev, "errors"));
	double max = sc__deploy_max_error(obj);
	int64_t min = sc__deploy_min_requests(obj);
	char why[200];
	if (req >= min && rate > max)
		snprintf(why, sizeof(why), "error rate %.3f > maxErrorRate %.3f (%lld of %lld)",
		         rate, max, (long long)err, (long long)req);
	else if (sreq >= min && (double)serr / (double)sreq > max)
		snprintf(why, sizeof(why),
		         "error rate %.3f > maxErrorRate %.3f over the step (%lld of %lld)",
		         (double)serr / (double)sreq, max, (long long)serr, (long long)sreq);
	else
		return 0;
	sc__deploy_rollback(s, obj, "error_rate", why, events);
	return 0;
}

/* A rollout change waiting for the store: load, change, reconcile, write;
 * again on a write conflict (a heartbeat, the controller came first). */
typedef struct change_req {
	sc_server_t *s;
	sc_http_req_t *r; /* NULL once the client left */
	sc_principal_t who;
	char name[SC_MAX_NAME + 1];
	json_t *body;
	change_fn fn;
	int attempt;
	json_t *obj; /* as written */
} change_req_t;

static void change_try(change_req_t *c);

static void change_gone(sc_http_req_t *r, void *ud)
{
	((change_req_t *)ud)->r = NULL;
}

static void change_free(change_req_t *c)
{
	json_decref(c->body);
	json_decref(c->obj);
	free(c);
}

static void changed(const sc_store_res_t *res, void *ud)
{
	change_req_t *c = ud;
	if (c->r && res->rc == SC_ECONFLICT && ++c->attempt < MAX_TRIES) {
		json_decref(c->obj);
		c->obj = NULL;
		change_try(c); /* the cache has the newer object now (store.h) */
		return;
	}
	if (c->r && res->rc == 0)
		sc__api_json(c->r, 200, rollout_doc(c->obj));
	else if (c->r)
		sc__api_store_error(c->r, res->rc, "store");
	change_free(c);
}

static void change_try(change_req_t *c)
{
	int64_t rev;
	json_t *obj = load(c->s, c->r, &c->who, c->name, &rev);
	if (!obj) {
		change_free(c); /* answered */
		return;
	}
	json_t *events = json_array(), *nodes = sc__deploy_node_addresses(c->s);
	if (c->fn(c->s, c->r, obj, c->body, events) == 0) {
		sc__deploy_reconcile(c->s, obj, nodes, (int64_t)time(NULL), events);
		c->obj = obj;
		sc__deploy_save(c->s, obj, rev, events, changed, c);
	} else {
		json_decref(obj);
		change_free(c); /* answered */
	}
	json_decref(nodes);
	json_decref(events);
}

static void change(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who, const char *name,
                   json_t *body, change_fn fn)
{
	change_req_t *c = sc_xcalloc(1, sizeof(*c));
	c->s = s;
	c->r = r;
	c->who = *who;
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->body = json_incref(body);
	c->fn = fn;
	sc_http_on_close(r, change_gone, c);
	change_try(c);
}

static int check_report(sc_http_req_t *r, json_t *b)
{
	static const char *const req[] = {"version", "requests", "errors", NULL};
	for (size_t i = 0; req[i]; i++)
		if (!json_object_get(b, req[i])) {
			sc__api_error(r, 400, "Invalid", req[i], "%s: required field is missing",
			              req[i]);
			return SC_EINVAL;
		}
	json_int_t n = json_integer_value(json_object_get(b, "requests"));
	json_int_t e = json_integer_value(json_object_get(b, "errors"));
	json_t *p99 = json_object_get(b, "p99");
	if (n < 0 || e < 0 || e > n) {
		sc__api_error(r, 400, "Invalid", n < 0 ? "requests" : "errors",
		              "expected 0 <= errors <= requests");
		return SC_EINVAL;
	}
	if (p99 && (json_number_value(p99) < 0 || !isfinite(json_number_value(p99)))) {
		sc__api_error(r, 400, "Invalid", "p99", "p99: expected seconds >= 0");
		return SC_EINVAL;
	}
	return 0;
}

static int check_action(sc_http_req_t *r, json_t *b)
{
	static const char *const actions[] = {"promote", "abort", "pause", "resume", NULL};
	const char *a = sc__str_of(b, "action");
	for (size_t i = 0; actions[i]; i++)
		if (strcmp(actions[i], a) == 0)
			return 0;
	sc__api_error(r, 400, "Invalid", "action",
	              "action: expected promote, abort, pause or resume, got \"%.64s\"", a);
	return SC_EINVAL;
}

/* ---- autoscale reports (deploy_scale.c) ------------------------------------ */

/* o[key], created as an empty object when absent (borrowed). */
static json_t *obj_at_new(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	if (!v) {
		v = json_object();
		json_object_set_new(o, key, v);
	}
	return v;
}

#define MAX_LOAD 100000000LL /* requests: far above any gateway's */

/* roles (a disaggregated Deployment's figures per role):
 * {"prefill": {inflight, busy, promptTokens}, "decode": {inflight, busy,
 * tokensPerSecond}}, every member optional; errors name roles.ROLE.FIELD. */
static int check_roles(sc_http_req_t *r, json_t *roles)
{
	static const char *const names[] = {"prefill", "decode"};
	static const char *const counts[] = {"inflight", "busy", "promptTokens", NULL};
	const char *k, *f;
	json_t *v, *x;
	char field[64];
	json_object_foreach(roles, k, v)
	{
		int i = strcmp(k, names[0]) == 0 ? 0 : strcmp(k, names[1]) == 0 ? 1 : -1;
		snprintf(field, sizeof(field), "roles.%.32s", k);
		if (i < 0 || !json_is_object(v)) {
			sc__api_error(r, 400, "Invalid", field, "%s: %s", field,
			              i < 0 ? "expected prefill or decode" : "expected an object");
			return SC_EINVAL;
		}
		json_object_foreach(v, f, x)
		{
			bool count = false;
			for (size_t j = 0; counts[j]; j++)
				count |= strcmp(counts[j], f) == 0 && (j < 2 || i == 0);
			bool tps = i == 1 && strcmp(f, "tokensPerSecond") == 0;
			snprintf(field, sizeof(field), "roles.%s.%.32s", k, f);
			if (!count && !tps) {
				sc__api_error(r, 400, "Invalid", field, "%s: unknown field", field);
				return SC_EINVAL;
			}
			if (count && (!json_is_integer(x) || json_integer_value(x) < 0 ||
			              json_integer_value(x) > MAX_LOAD)) {
				sc__api_error(r, 400, "Invalid", field, "%s: expected 0 to %lld",
				              field, MAX_LOAD);
				return SC_EINVAL;
			}
			if (tps && (!json_is_number(x) || !isfinite(json_number_value(x)) ||
			            json_number_value(x) < 0 || json_number_value(x) > 1e12)) {
				sc__api_error(r, 400, "Invalid", field,
				              "%s: expected tokens per second, 0 to 1e12", field);
				return SC_EINVAL;
			}
		}
	}
	return 0;
}

static int check_scale(sc_http_req_t *r, json_t *b)
{
	static const char *const counts[] = {"inflight", "queued", "busy", "requests", NULL};
	const char *gw = sc__str_of(b, "gateway");
	if (!gw[0] || strlen(gw) > SC_SCALE_GATEWAY_MAX) {
		sc__api_error(r, 400, "Invalid", "gateway",
		              "gateway: expected an id of 1 to %d "
		              "characters",
		              SC_SCALE_GATEWAY_MAX);
		return SC_EINVAL;
	}
	if (!json_object_get(b, "inflight")) {
		sc__api_error(r, 400, "Invalid", "inflight", "inflight: required field is missing");
		return SC_EINVAL;
	}
	for (size_t i = 0; counts[i]; i++) {
		json_int_t v = json_integer_value(json_object_get(b, counts[i]));
		if (v < 0 || v > MAX_LOAD) {
			sc__api_error(r, 400, "Invalid", counts[i], "%s: expected 0 to %lld",
			              counts[i], MAX_LOAD);
			return SC_EINVAL;
		}
	}
	json_t *t = json_object_get(b, "ttftP95");
	if (t && (!isfinite(json_number_value(t)) || json_number_value(t) < 0 ||
	          json_number_value(t) > 86400)) {
		sc__api_error(r, 400, "Invalid", "ttftP95",
		              "ttftP95: expected seconds, 0 to 86400");
		return SC_EINVAL;
	}
	return check_roles(r, json_object_get(b, "roles"));
}

/* A gateway's load report: kept in memory for the deployment controller's
 * next tick (no write). The answer says the count in force. */
static void scale_report(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who,
                         const char *name, json_t *b)
{
	int64_t rev;
	json_t *obj = load(s, r, who, name, &rev);
	if (!obj)
		return;
	const char *roles[2];
	size_t n = sc__deploy_scaled_roles(obj, roles);
	if (n == 0) {
		sc__api_error(r, 409, "Conflict", "spec.autoscaling",
		              "deployment %s is not autoscaled (no spec.autoscaling, nor "
		              "spec.disaggregation.ROLE.autoscaling)",
		              name);
		json_decref(obj);
		return;
	}
	sc_scale_signal_t sig = {
	    .inflight = json_integer_value(json_object_get(b, "inflight")),
	    .queued = json_integer_value(json_object_get(b, "queued")),
	    .busy = json_integer_value(json_object_get(b, "busy")),
	    .requests = json_integer_value(json_object_get(b, "requests")),
	    .ttft_p95 = json_number_value(json_object_get(b, "ttftP95")),
	};
	json_t *ans = json_pack("{s:s,s:s}", "kind", "AutoscaleReport", "deployment", name);
	int64_t now = (int64_t)time(NULL);
	for (size_t i = 0; i < n; i++) {
		int cur = sc__deploy_role_autoscaled(obj, roles[i]);
		if (strcmp(roles[i], "both") == 0) {
			sc__scale_report(s, name, sc__str_of(b, "gateway"), &sig, now);
			json_object_set_new(ans, "replicas", json_integer(cur));
			continue;
		}
		/* A role's own figures; the held requests and the interval's
		 * requests and TTFT are the model's. */
		json_t *ro = json_object_get(json_object_get(b, "roles"), roles[i]);
		sc_scale_signal_t rs = sig;
		char key[SC_MAX_NAME + 16];
		rs.inflight = json_integer_value(json_object_get(ro, "inflight"));
		rs.busy = json_integer_value(json_object_get(ro, "busy"));
		rs.prompt_tokens = json_integer_value(json_object_get(ro, "promptTokens"));
		rs.tps = json_number_value(json_object_get(ro, "tokensPerSecond"));
		snprintf(key, sizeof(key), "%s/%s", name, roles[i]);
		sc__scale_report(s, key, sc__str_of(b, "gateway"), &rs, now);
		json_object_set_new(obj_at_new(ans, "roles"), roles[i],
		                    json_pack("{s:i}", "replicas", cur));
	}
	sc__api_json(r, 200, ans);
	json_decref(obj);
}

void sc__rollout_api(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who, const char *name,
                     const char *sub)
{
	if (strcmp(sub, "autoscale/report") == 0) {
		if (strcmp(sc_http_method(r), "POST") != 0) {
			sc__api_error(r, 405, "MethodNotAllowed", NULL, "%s is POSTed", sub);
			return;
		}
		if (who->role != SC_ROLE_ADMIN && who->role != SC_ROLE_TENANT) {
			sc__api_error(r, 403, "Forbidden", NULL, "role %s may not report load",
			              sc__role_name(who->role));
			return;
		}
		/* Reports live in the leader's memory, where the controller
		 * decides: a follower sends the gateway on to the next server of
		 * its list, as it does an agent's heartbeat (docs/HA.md). */
		if (!sc__ha_is_leader(s)) {
			sc__api_error(r, 503, "NotLeader", NULL, "this server is not the leader");
			return;
		}
		json_t *b = read_body(r, scale_fields);
		if (b && check_scale(r, b) == 0)
			scale_report(s, r, who, name, b);
		json_decref(b);
		return;
	}
	const char *m = sc_http_method(r);
	int report = strcmp(sub, "rollout/report") == 0;
	int64_t rev;
	if (!report && strcmp(m, "GET") == 0) {
		json_t *obj = load(s, r, who, name, &rev);
		if (obj)
			sc__api_json(r, 200, rollout_doc(obj));
		json_decref(obj);
		return;
	}
	if (strcmp(m, "POST") != 0) {
		sc__api_error(r, 405, "MethodNotAllowed", NULL, "%s is %s", sub,
		              report ? "POSTed" : "read with GET or changed with POST");
		return;
	}
	if (who->role != SC_ROLE_ADMIN && who->role != SC_ROLE_TENANT) {
		sc__api_error(r, 403, "Forbidden", NULL, "role %s may not change rollouts",
		              sc__role_name(who->role));
		return;
	}
	json_t *body = read_body(r, report ? report_fields : action_fields);
	if (!body)
		return;
	if ((report ? check_report(r, body) : check_action(r, body)) == 0)
		change(s, r, who, name, body, report ? do_report : do_action);
	json_decref(body);
}
