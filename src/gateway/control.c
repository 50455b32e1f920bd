/* Backends and rollouts from the control plane.
 *
 * With --server and --token the gateway watches
 * GET /api/v1/deployments?watch=1 (newline-delimited JSON events, ADDED for
 * every object first) and keeps the latest object of each deployment. After
 * each event the server-sourced backends are rebuilt from every
 * deployment's status.endpoints (see docs/GATEWAY.md for the shape), and a
 * deployment whose endpoints carry two versions gets a rollout from
 * spec.rollout. A broken watch is restarted after a second; on restart the
 * object map is rebuilt from scratch (DELETED events may have been missed).
 * Static --backend flags are never touched by this.
 *
 * --server may list several servers (an HA control plane): the gateway uses
 * one at a time and moves to the next when it is unreachable or answers
 * 503 (a follower), as the CLI and the agent do. Rollout reports follow the
 * same list. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/alloc.h"
#include "base/version.h"
#include "gateway/gw_int.h"
#include "starcloud/error.h"

#define MAX_LINE (4u << 20)
/* The server checks that a gateway is not too old for it (base/version.h). */
#define UA_HEADER "User-Agent: " SC_USER_AGENT("gateway") "\r\n"
#define SCALE_REPORT_MS 1000 /* load reports of autoscaled Deployments */

typedef struct control {
	sc_gw_t *gw;
	json_t *deps; /* name -> latest object */
	json_t *ttft; /* autoscaled deployment -> its model's TTFT buckets at the last report */
	json_t *tok;  /* disaggregated autoscaled deployment -> [tokens, loop ms] at the last one */
	uv_timer_t scale;
	uint64_t scale_warned; /* loop ms of the last failed load report logged */
	sc_buf_t line;
	sc_hcli_req_t *watch;
	uv_timer_t retry;
	int stopping;
	int status; /* of the watch in flight */
} control_t;

static void watch_start(control_t *ct);

/* ---------------------------------------------------------------------
 * The server list
 * ------------------------------------------------------------------- */

int sc__gw_parse_servers(gw_opts_t *o, char *err, size_t errsz)
{
	const char *p = o->server;
	o->nservers = 0;
	for (;;) {
		size_t n = strcspn(p, ",");
		char host[64];
		int port;
		const char *path;
		char *url = o->servers[o->nservers];
		if (o->nservers == GW_MAX_SERVERS) {
			snprintf(err, errsz, "at most %d servers", GW_MAX_SERVERS);
			return SC_EINVAL;
		}
		while (n > 0 && p[n - 1] == '/')
			n--; /* "http://h:p/" names the same server */
		if (n == 0 || n >= GW_MAX_URL) {
			snprintf(err, errsz, "entry %zu: expected http://HOST:PORT",
			         o->nservers + 1);
			return SC_EINVAL;
		}
		memcpy(url, p, n);
		url[n] = '\0';
		if (sc_hcli_parse_url(url, host, sizeof(host), &port, &path) < 0 ||
		    strcmp(path, "/") != 0) {
			snprintf(err, errsz, "\"%s\": expected http://HOST:PORT", url);
			return SC_EINVAL;
		}
		o->nservers++;
		p += strcspn(p, ",");
		if (!*p)
			return 0;
		p++;
	}
}

/* The control plane server in use, and a move to the next one of the list
 * (after it was unreachable or answered as a follower). */
static const char *sc__gw_server(const sc_gw_t *gw)
{
	return gw->o.servers[gw->server_idx % (gw->o.nservers ? gw->o.nservers : 1)];
}

static void sc__gw_server_next(sc_gw_t *gw)
{
	if (gw->o.nservers < 2)
		return;
	gw->server_idx = (gw->server_idx + 1) % gw->o.nservers;
	sc_log_info("control plane: trying %s", sc__gw_server(gw));
}

static int role_of(const char *r)
{
	if (!r || strcmp(r, "both") == 0)
		return GW_ROLE_BOTH;
	if (strcmp(r, "prefill") == 0)
		return GW_ROLE_PREFILL;
	if (strcmp(r, "decode") == 0)
		return GW_ROLE_DECODE;
	return -1;
}

/* Adds one endpoint of a deployment; bad entries are logged and skipped. */
static void add_endpoint(sc_gw_t *gw, const char *dep, const char *model, const char *ver,
                         json_t *ep)
{
	const char *url = json_string_value(json_object_get(ep, "url"));
	const char *v = json_string_value(json_object_get(ep, "version"));
	int role = role_of(json_string_value(json_object_get(ep, "role")));
	json_t *ready = json_object_get(ep, "ready");
	json_t *w = json_object_get(ep, "weight");
	gw_backend_t d = {0};
	char host[64];
	int port;
	const char *path;
	if (!url || role < 0 || strlen(url) >= sizeof(d.url) ||
	    sc_hcli_parse_url(url, host, sizeof(host), &port, &path) < 0) {
		sc_log_warn("deployment %s: skipping an endpoint with a bad url or role", dep);
		return;
	}
	snprintf(d.model, sizeof(d.model), "%s", model);
	snprintf(d.version, sizeof(d.version), "%s", v ? v : ver);
	size_t ul = strlen(url);
	if (ul > 0 && url[ul - 1] == '/' && strcmp(path, "/") == 0)
		ul--; /* "http://h:p/" and "http://h:p" name the same replica */
	snprintf(d.url, sizeof(d.url), "%.*s", (int)ul, url);
	d.role = role;
	d.weight = json_is_number(w) && json_number_value(w) > 0 ? json_number_value(w) : 1;
	d.ready = !json_is_false(ready);
	d.source = GW_SRC_SERVER;
	/* A replica serving a model repository says itself what it serves. */
	if (json_is_true(json_object_get(ep, "repository"))) {
		if (!json_is_false(ready) && !sc__gw_repo_add(gw, d.url, d.weight, GW_SRC_SERVER))
			sc_log_warn("deployment %s: the repository replica table is full", dep);
		return;
	}
	sc__gw_backend_add(gw, &d);
}

/* A deployment with endpoints of two versions is a rollout: the spec's
 * version is the canary, status.stableVersion (or the other version) the
 * stable one. */
static void rollout_from(sc_gw_t *gw, const char *dep, const char *model, const char *ver,
                         json_t *obj)
{
	json_t *spec = json_object_get(obj, "spec");
	json_t *status = json_object_get(obj, "status");
	const char *stable = json_string_value(json_object_get(status, "stableVersion"));
	json_t *eps = json_object_get(status, "endpoints");
	for (size_t i = 0; !stable && i < json_array_size(eps); i++) {
		const char *v =
		    json_string_value(json_object_get(json_array_get(eps, i), "version"));
		if (v && strcmp(v, ver) != 0)
			stable = v;
	}
	if (!stable || strcmp(stable, ver) == 0)
		return;
	json_t *ro = json_object_get(spec, "rollout");
	int steps[GW_MAX_STEPS];
	size_t n = 0;
	json_t *js = json_object_get(ro, "steps");
	for (size_t i = 0; i < json_array_size(js) && n < GW_MAX_STEPS; i++) {
		json_int_t v = json_integer_value(json_array_get(js, i));
		if (v > 0 && v <= 100)
			steps[n++] = (int)v;
	}
	if (n == 0) {
		memcpy(steps, gw->o.steps, gw->o.nsteps * sizeof(int));
		n = gw->o.nsteps;
	}
	uint64_t win = gw->o.window_ms;
	json_t *wv = json_object_get(ro, "analysisWindow");
	const char *ws = json_string_value(wv);
	if (ws && sc_parse_duration_ms(ws, 0, GW_MAX_DURATION_MS, &win) < 0)
		win = gw->o.window_ms;
	if (json_is_integer(wv) && json_integer_value(wv) > 0)
		win = (uint64_t)json_integer_value(wv) * 1000; /* seconds, as the server reads it */
	json_t *me = json_object_get(ro, "maxErrorRate");
	double mer = json_is_number(me) ? json_number_value(me) : gw->o.max_error_rate;
	gw_rollout_t *r =
	    sc__gw_rollout_set(gw, model, stable, ver, steps, n, win, mer, GW_SRC_SERVER);
	if (!r)
		return;
	snprintf(r->deployment, sizeof(r->deployment), "%s", dep);
	json_t *mr = json_object_get(ro, "minRequests");
	r->min_requests = json_is_integer(mr) && json_integer_value(mr) > 0
	                      ? (uint64_t)json_integer_value(mr)
	                      : GW_SERVER_MIN_REQUESTS;
	json_t *ec = json_object_get(ro, "earlyRollbackConfidence");
	r->confidence = json_is_number(ec) ? json_number_value(ec) : GW_EARLY_CONFIDENCE;
	/* The server owns the steps: the gateway follows its weight and phase,
	 * reports its windows, and only rolls back by itself. */
	json_t *sro = json_object_get(status, "rollout");
	json_t *w = json_object_get(json_object_get(sro, "weights"), ver);
	sc__gw_rollout_follow(gw, r, json_string_value(json_object_get(sro, "phase")),
	                      json_is_integer(w) ? (int)json_integer_value(w) : -1);
}

static void rebuild(control_t *ct)
{
	sc_gw_t *gw = ct->gw;
	sc__gw_backend_mark(gw, GW_SRC_SERVER);
	sc__gw_repo_mark(gw, GW_SRC_SERVER);
	const char *name;
	json_t *obj;
	json_object_foreach(ct->deps, name, obj)
	{
		json_t *spec = json_object_get(obj, "spec");
		const char *model = json_string_value(json_object_get(spec, "model"));
		/* spec.version: a string, an integer, or absent ("1"), as the
		 * server reads it. */
		json_t *jv = json_object_get(spec, "version");
		char vbuf[32];
		const char *ver = json_string_value(jv);
		if (json_is_integer(jv)) {
			snprintf(vbuf, sizeof(vbuf), "%lld", (long long)json_integer_value(jv));
			ver = vbuf;
		} else if (!jv) {
			ver = "1";
		}
		json_t *eps = json_object_get(json_object_get(obj, "status"), "endpoints");
		if (!model || !ver)
			continue;
		/* The server checked it (0.25..64); absent: the default. */
		sc__gw_pd_bytes_per_token(
		    gw, model, json_number_value(json_object_get(spec, "promptBytesPerToken")));
		for (size_t i = 0; i < json_array_size(eps); i++)
			add_endpoint(gw, name, model, ver, json_array_get(eps, i));
		/* A repository's versions are its own: no canary split by the
		 * Deployment's version. */
		if (!json_is_true(json_object_get(spec, "modelRepository")))
			rollout_from(gw, name, model, ver, obj);
	}
	sc__gw_backend_sweep(gw, GW_SRC_SERVER);
	sc__gw_repo_sweep(gw, GW_SRC_SERVER);
	/* New replicas may be what a held request waits for. */
	sc__gw_proxy_wake(gw);
}

static void on_event(control_t *ct, const char *line, size_t len)
{
	json_t *ev = json_loadb(line, len, 0, NULL);
	const char *type = json_string_value(json_object_get(ev, "type"));
	json_t *obj = json_object_get(ev, "object");
	const char *name =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
	if (type && name) {
		if (strcmp(type, "DELETED") == 0)
			json_object_del(ct->deps, name);
		else
			json_object_set(ct->deps, name, obj);
		rebuild(ct);
	}
	json_decref(ev);
}

static int w_head(sc_hcli_req_t *r, int status, void *ud)
{
	control_t *ct = ud;
	ct->status = status;
	sc_buf_reset(&ct->line); /* an error's body is kept for its message */
	if (status == 200)
		json_object_clear(ct->deps);
	return 0;
}

static int w_data(sc_hcli_req_t *r, const char *d, size_t n, void *ud)
{
	control_t *ct = ud;
	if (sc_hcli_status(r) != 200) {
		if (ct->line.len + n <= 4096)
			sc_buf_append(&ct->line, d, n);
		return 0;
	}
	if (sc_buf_append(&ct->line, d, n) < 0)
		return 0; /* an oversized line: dropped by the reset below */
	char *nl;
	while (ct->line.len && (nl = memchr(ct->line.data, '\n', ct->line.len))) {
		size_t len = (size_t)(nl - ct->line.data);
		if (len)
			on_event(ct, ct->line.data, len);
		sc_buf_consume(&ct->line, len + 1);
	}
	if (ct->line.len >= MAX_LINE)
		sc_buf_reset(&ct->line);
	return 0;
}

static void on_retry(uv_timer_t *t)
{
	watch_start(t->data);
}

static void w_done(sc_hcli_req_t *r, int err, void *ud)
{
	control_t *ct = ud;
	ct->watch = NULL;
	if (ct->stopping)
		return;
	if (ct->status != 200 && ct->status > 0) {
		/* The server's own words (a gateway too old for it says so). */
		json_t *e = json_loadb(ct->line.data, ct->line.len, 0, NULL);
		const char *why =
		    json_string_value(json_object_get(json_object_get(e, "error"), "message"));
		sc_log_warn("control plane watch: HTTP %d%s%s", ct->status, why ? ": " : "",
		            why ? why : "");
		json_decref(e);
		sc_buf_reset(&ct->line);
	}
	/* Unreachable, or not the leader (503): the next server of the list.
	 * A watch the server ended after a 200 is reopened on the same one;
	 * with one server, after a second; going round a list, at once. */
	int move = err < 0 || ct->status == 503 || ct->status >= 500;
	if (move)
		sc__gw_server_next(ct->gw);
	uint64_t delay = move && ct->gw->o.nservers > 1 && ct->gw->server_idx != 0 ? 0 : 1000;
	uv_timer_start(&ct->retry, on_retry, delay, 0);
}

static void watch_start(control_t *ct)
{
	sc_gw_t *gw = ct->gw;
	char url[GW_MAX_URL + 64], hdrs[400];
	ct->status = 0;
	snprintf(url, sizeof(url), "%s/api/v1/deployments?watch=1&allowWatchBookmarks=true",
	         sc__gw_server(gw));
	snprintf(hdrs, sizeof(hdrs), "Authorization: Bearer %s\r\n" UA_HEADER, gw->o.token);
	sc_hcli_call_t call = {
	    .method = "GET",
	    .url = url,
	    .headers = hdrs,
	    .cbs = {.on_head = w_head, .on_data = w_data, .on_done = w_done},
	    .ud = ct,
	    /* BOOKMARKs come every few seconds on a quiet watch: silence this
	     * long is a frozen server, and the next one of the list is tried. */
	    .timeout_ms = 15000,
	};
	if (sc_hcli_start(gw->hc, &call, &ct->watch) < 0) {
		ct->watch = NULL;
		uv_timer_start(&ct->retry, on_retry, 1000, 0);
	}
}

static void sc__gw_control_report(sc_gw_t *gw, const gw_rollout_t *ro, const char *outcome);
static void sc__gw_control_window(sc_gw_t *gw, const gw_rollout_t *ro);
static int may_hold(sc_gw_t *gw, const char *model);
static void held(sc_gw_t *gw, const char *model);
static void on_scale_tick(uv_timer_t *t);

int sc__gw_control_start(sc_gw_t *gw)
{
	if (!gw->o.server[0])
		return 0;
	control_t *ct = sc_xcalloc(1, sizeof(*ct));
	ct->gw = gw;
	ct->deps = json_object();
	sc_buf_init(&ct->line, MAX_LINE + 64 * 1024);
	uv_timer_init(gw->loop, &ct->retry);
	ct->retry.data = ct;
	gw->control = ct;
	gw->rollout_outcome = sc__gw_control_report;
	gw->rollout_window = sc__gw_control_window;
	gw->may_hold = may_hold;
	gw->held = held;
	ct->ttft = json_object();
	ct->tok = json_object();
	uv_timer_init(gw->loop, &ct->scale);
	ct->scale.data = ct;
	uv_timer_start(&ct->scale, on_scale_tick, SCALE_REPORT_MS, SCALE_REPORT_MS);
	uv_unref((uv_handle_t *)&ct->scale);
	watch_start(ct);
	return 0;
}

static void on_scale_closed(uv_handle_t *h)
{
	control_t *ct = h->data;
	json_decref(ct->deps);
	json_decref(ct->ttft);
	json_decref(ct->tok);
	sc_buf_free(&ct->line);
	free(ct);
}

static void on_retry_closed(uv_handle_t *h)
{
	control_t *ct = h->data;
	uv_close((uv_handle_t *)&ct->scale, on_scale_closed);
}

void sc__gw_control_stop(sc_gw_t *gw)
{
	control_t *ct = gw->control;
	if (!ct)
		return;
	ct->stopping = 1;
	if (ct->watch)
		sc_hcli_cancel(ct->watch);
	gw->control = NULL;
	gw->may_hold = NULL;
	gw->held = NULL;
	uv_timer_stop(&ct->scale);
	uv_close((uv_handle_t *)&ct->retry, on_retry_closed);
}

/* ---------------------------------------------------------------------
 * Reporting rollout outcomes
 * ------------------------------------------------------------------- */

/* One rollout report; sent to the server in use, then to the others of
 * the list while they are unreachable or followers. */
typedef struct report {
	sc_gw_t *gw;
	char path[GW_MAX_NAME + 48];
	char *body;
	size_t tries;
} report_t;

static void report_send(report_t *rp);

static void report_done(sc_hcli_req_t *r, int err, void *ud)
{
	report_t *rp = ud;
	int status = err < 0 ? 0 : sc_hcli_status(r);
	if ((err < 0 || status == 503) && rp->tries < rp->gw->o.nservers && rp->gw->control) {
		sc__gw_server_next(rp->gw);
		report_send(rp);
		return;
	}
	control_t *ct = rp->gw->control;
	/* Load reports go every second: a server that is down is said once
	 * in 30 s, not once a second per Deployment. */
	int quiet = 0;
	if ((err < 0 || status >= 300) && ct && strstr(rp->path, "/autoscale/")) {
		uint64_t now = sc__gw_now_ms(rp->gw);
		quiet = ct->scale_warned && now - ct->scale_warned < 30000;
		if (!quiet)
			ct->scale_warned = now;
	}
	if ((err < 0 || status >= 300) && !quiet && err != SC_ECANCELED)
		sc_log_warn("control plane: report to %s failed (%s)", rp->path,
		            err < 0 ? sc_strerror(err) : "HTTP error");
	free(rp->body);
	free(rp);
}

static void report_send(report_t *rp)
{
	sc_gw_t *gw = rp->gw;
	char url[GW_MAX_URL + sizeof(rp->path)], hdrs[400];
	snprintf(url, sizeof(url), "%s%s", sc__gw_server(gw), rp->path);
	snprintf(hdrs, sizeof(hdrs), "Authorization: Bearer %s\r\n" UA_HEADER, gw->o.token);
	rp->tries++;
	sc_hcli_call_t call = {.method = "POST",
	                       .url = url,
	                       .headers = hdrs,
	                       .body = rp->body,
	                       .body_len = strlen(rp->body),
	                       .timeout_ms = 5000,
	                       .cbs = {.on_done = report_done},
	                       .ud = rp};
	if (sc_hcli_start(gw->hc, &call, NULL) < 0) {
		sc_log_error("control plane: bad server URL %s", sc__gw_server(gw));
		free(rp->body);
		free(rp);
	}
}

/* Queues one report (body taken) to path on the server in use. */
static void post_report(sc_gw_t *gw, const char *path, json_t *b)
{
	report_t *rp = sc_xcalloc(1, sizeof(*rp));
	rp->gw = gw;
	rp->body = sc_xcheck(json_dumps(b, JSON_COMPACT));
	json_decref(b);
	snprintf(rp->path, sizeof(rp->path), "%s", path);
	report_send(rp);
}

/* Tells the control plane a rollout ended (best effort). */
static void sc__gw_control_report(sc_gw_t *gw, const gw_rollout_t *ro, const char *outcome)
{
	if (!gw->o.server[0])
		return;
	const char *dep = ro->deployment[0] ? ro->deployment : ro->model;
	/* rolled_back and aborted both ask the server to abort; the reason and
	 * outcome say which it was. */
	const char *action = strcmp(outcome, "promoted") == 0 ? "promote" : "abort";
	json_t *b =
	    json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:f,s:I}", "action", action, "source",
	              "gateway", "outcome", outcome, "model", ro->model, "stable", ro->stable,
	              "canary", ro->canary, "reason", ro->reason, "canaryErrorRate",
	              ro->last_err[1], "window", (json_int_t)ro->windows);
	char path[GW_MAX_NAME + 48];
	snprintf(path, sizeof(path), "/api/v1/deployments/%s/rollout", dep);
	post_report(gw, path, b);
}

/* Each finished analysis window, per version, to the server's report API
 * (docs/SERVING.md): the server keeps them in status.rollout.analysis (the
 * dashboard shows the error rates), adds the canary's up to the evidence a
 * step needs before it moves on, and applies its own rollback rule. */
static void sc__gw_control_window(sc_gw_t *gw, const gw_rollout_t *ro)
{
	if (!gw->o.server[0])
		return;
	/* Every window with canary traffic counts: the server adds them up
	 * to the step's evidence. */
	if (ro->last[1].requests == 0)
		return;
	const char *dep = ro->deployment[0] ? ro->deployment : ro->model;
	char path[GW_MAX_NAME + 48];
	snprintf(path, sizeof(path), "/api/v1/deployments/%s/rollout/report", dep);
	for (int i = 0; i < 2; i++) {
		const gw_window_t *w = &ro->last[i];
		json_t *b =
		    sc_xcheck(json_pack("{s:s,s:I,s:I,s:f}", "version", i ? ro->canary : ro->stable,
		                        "requests", (json_int_t)w->requests, "errors",
		                        (json_int_t)w->errors, "p99", ro->last_p99[i]));
		post_report(gw, path, b);
	}
}

/* ---------------------------------------------------------------------
 * Load reports of autoscaled Deployments (docs/AUTOSCALING.md)
 * ------------------------------------------------------------------- */

static const char *model_of(json_t *dep)
{
	return json_string_value(json_object_get(json_object_get(dep, "spec"), "model"));
}

static int autoscaled(json_t *dep)
{
	return json_is_object(json_object_get(json_object_get(dep, "spec"), "autoscaling"));
}

/* A disaggregated Deployment with a role autoscaled: reported per role. */
static int role_autoscaled(json_t *dep)
{
	json_t *dis = json_object_get(json_object_get(dep, "spec"), "disaggregation");
	return json_is_object(json_object_get(json_object_get(dis, "prefill"), "autoscaling")) ||
	       json_is_object(json_object_get(json_object_get(dis, "decode"), "autoscaling"));
}

static int may_hold(sc_gw_t *gw, const char *model)
{
	control_t *ct = gw->control;
	const char *name;
	json_t *dep;
	if (!ct)
		return 0;
	json_object_foreach(ct->deps, name, dep)
	{
		const char *m = model_of(dep);
		if (m && strcmp(m, model) == 0 && autoscaled(dep))
			return 1;
	}
	return 0;
}

/* The interval's requests and TTFT p95 (the upper bound of the bucket that
 * holds it) from the histogram's growth since the last report. */
static void ttft_window(control_t *ct, const char *dep, const char *model, json_int_t *requests,
                        double *p95)
{
	uint64_t b[GW_TTFT_BUCKETS], total;
	sc__gw_stats_ttft(ct->gw, model, b, GW_TTFT_BUCKETS, &total);
	json_t *prev = json_object_get(ct->ttft, dep), *snap = json_array();
	uint64_t d[GW_TTFT_BUCKETS], n = 0;
	for (size_t i = 0; i < GW_TTFT_BUCKETS; i++) {
		uint64_t was = (uint64_t)json_integer_value(json_array_get(prev, i));
		d[i] = prev && b[i] >= was ? b[i] - was : 0;
		n += d[i];
		json_array_append_new(snap, json_integer((json_int_t)b[i]));
	}
	json_object_set_new(ct->ttft, dep, snap);
	*requests = (json_int_t)n;
	*p95 = 0;
	uint64_t acc = 0, want = (n * 95 + 99) / 100;
	for (size_t i = 0; n && i < GW_TTFT_BUCKETS; i++) {
		acc += d[i];
		if (acc >= want) {
			*p95 = sc__gw_stats_bucket_bound(i);
			break;
		}
	}
}

/* Generated tokens per second of model since the last report for dep. */
static double token_rate(control_t *ct, const char *dep, const char *model)
{
	uint64_t n = sc__gw_stats_tokens(ct->gw, model), now = sc__gw_now_ms(ct->gw);
	json_t *prev = json_object_get(ct->tok, dep);
	double rate = 0;
	if (prev) {
		uint64_t was = (uint64_t)json_integer_value(json_array_get(prev, 0));
		uint64_t at = (uint64_t)json_integer_value(json_array_get(prev, 1));
		if (n >= was && now > at)
			rate = (double)(n - was) * 1000.0 / (double)(now - at);
	}
	json_object_set_new(ct->tok, dep,
	                    sc_xcheck(json_pack("[I,I]", (json_int_t)n, (json_int_t)now)));
	return rate;
}

/* roles: the figures of a disaggregated model's prefill and decode
 * replicas (requests at them, replicas busy), the prompt tokens waiting
 * for or in prefill, and the decode side's tokens per second. */
static json_t *role_load(control_t *ct, const char *dep, const char *model,
                         const json_int_t *inflight, const json_int_t *busy)
{
	return json_pack("{s:{s:I,s:I,s:I},s:{s:I,s:I,s:f}}", "prefill", "inflight",
	                 inflight[GW_ROLE_PREFILL], "busy", busy[GW_ROLE_PREFILL], "promptTokens",
	                 (json_int_t)sc__gw_pd_prompt_tokens(ct->gw, model), "decode", "inflight",
	                 inflight[GW_ROLE_DECODE], "busy", busy[GW_ROLE_DECODE], "tokensPerSecond",
	                 token_rate(ct, dep, model));
}

static void report_load(control_t *ct, const char *dep, const char *model)
{
	sc_gw_t *gw = ct->gw;
	json_int_t inflight = 0, busy = 0, requests, role_in[3] = {0}, role_busy[3] = {0};
	double p95;
	for (size_t i = 0; i < gw->nbe; i++) {
		const gw_backend_t *b = gw->be[i];
		if (!b || b->gone || strcmp(b->model, model) != 0)
			continue;
		inflight += b->inflight;
		busy += b->inflight > 0;
		if (b->role >= GW_ROLE_BOTH && b->role <= GW_ROLE_DECODE) {
			role_in[b->role] += b->inflight;
			role_busy[b->role] += b->inflight > 0;
		}
	}
	ttft_window(ct, dep, model, &requests, &p95);
	char id[GW_MAX_URL], path[GW_MAX_NAME + 64];
	snprintf(id, sizeof(id), "%s:%d", gw->o.listen.host, gw->o.listen.port);
	snprintf(path, sizeof(path), "/api/v1/deployments/%s/autoscale/report", dep);
	json_t *b =
	    json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:f}", "gateway", id, "model", model, "inflight",
	              inflight, "queued", (json_int_t)sc__gw_proxy_held(gw, model), "busy", busy,
	              "requests", requests, "ttftP95", p95);
	if (b && role_autoscaled(json_object_get(ct->deps, dep)))
		json_object_set_new(b, "roles",
		                    sc_xcheck(role_load(ct, dep, model, role_in, role_busy)));
	post_report(gw, path, sc_xcheck(b));
}

/* Every second, each autoscaled Deployment's load, idle or not: the server
 * needs the zeros to scale down, and a report is how it knows this gateway
 * still serves the model. */
static void on_scale_tick(uv_timer_t *t)
{
	control_t *ct = t->data;
	const char *name;
	json_t *dep;
	void *tmp;
	json_object_foreach(ct->deps, name, dep)
	{
		if ((autoscaled(dep) || role_autoscaled(dep)) && model_of(dep))
			report_load(ct, name, model_of(dep));
	}
	json_object_foreach_safe(ct->ttft, tmp, name, dep)
	{
		if (!json_object_get(ct->deps, name))
			json_object_del(ct->ttft, name);
	}
	json_object_foreach_safe(ct->tok, tmp, name, dep)
	{
		if (!json_object_get(ct->deps, name))
			json_object_del(ct->tok, name);
	}
}

/* A request now waits for a replica: tell the server at once (scale from
 * zero should not wait for the next tick). */
static void held(sc_gw_t *gw, const char *model)
{
	control_t *ct = gw->control;
	const char *name;
	json_t *dep;
	/* The first one held says it; a burst of them is the next tick's. */
	if (!ct || sc__gw_proxy_held(gw, model) != 1)
		return;
	json_object_foreach(ct->deps, name, dep)
	{
		const char *m = model_of(dep);
		if (m && strcmp(m, model) == 0 && autoscaled(dep))
			report_load(ct, name, m);
	}
}
