/* Endpoints the gateway answers itself: the model list, KServe health,
 * rollout administration, /healthz and /metrics. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/gw_int.h"
#include "net/promtext.h"
#include "net/tlsreload.h"
#include "starcloud/error.h"

static void respond_json(sc_http_req_t *r, int status, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	sc_http_respond(r, status, "application/json", s, strlen(s));
	free(s);
}

/* Every model the gateway routes to, with its versions. */
static json_t *models_json(sc_gw_t *gw)
{
	json_t *seen = json_object();
	for (size_t i = 0; i < gw->nbe; i++) {
		gw_backend_t *b = gw->be[i];
		if (b->gone)
			continue;
		json_t *m = json_object_get(seen, b->model);
		if (!m) {
			m = json_pack("{s:s,s:s,s:I,s:s,s:[]}", "id", b->model, "object", "model",
			              "created", (json_int_t)time(NULL), "owned_by", "starcloud",
			              "versions");
			json_object_set_new(seen, b->model, m);
		}
		json_t *vs = json_object_get(m, "versions");
		int have = 0;
		for (size_t k = 0; k < json_array_size(vs); k++)
			have |= strcmp(json_string_value(json_array_get(vs, k)), b->version) == 0;
		if (!have)
			json_array_append_new(vs, json_string(b->version));
	}
	return seen;
}

/* GET /v1/models: one entry per model, with its versions; GET
 * /v1/models/{id} (NAME or NAME:VERSION) one of them, 404 for another. */
static void h_models(sc_http_req_t *r, void *ud)
{
	sc_gw_t *gw = ud;
	const char *path = sc_http_path(r);
	json_t *seen = models_json(gw);
	if (strncmp(path, "/v1/models/", 11) == 0 && path[11]) {
		char name[GW_MAX_NAME + GW_MAX_VERSION + 2];
		snprintf(name, sizeof(name), "%s", path + 11);
		char *colon = strchr(name, ':');
		if (colon)
			*colon = '\0';
		json_t *m = json_object_get(seen, name), *one = NULL;
		if (m && colon) {
			json_t *vs = json_object_get(m, "versions");
			for (size_t k = 0; k < json_array_size(vs); k++)
				if (strcmp(json_string_value(json_array_get(vs, k)), colon + 1) ==
				    0)
					one = json_pack("{s:s,s:s,s:I,s:s,s:[s]}", "id", path + 11,
					                "object", "model", "created",
					                (json_int_t)time(NULL), "owned_by",
					                "starcloud", "versions", colon + 1);
		} else if (m) {
			one = json_incref(m);
		}
		json_decref(seen);
		if (!one) {
			sc__gw_error(r, 404, "model_not_found", "model",
			             "no such model or version");
			return;
		}
		respond_json(r, 200, one);
		return;
	}
	if (strcmp(path, "/v1/models") != 0 && strcmp(path, "/v1/models/") != 0) {
		json_decref(seen);
		sc__gw_error(r, 404, NULL, NULL, "no such path");
		return;
	}
	json_t *data = json_array(), *m;
	const char *k;
	json_object_foreach(seen, k, m) json_array_append(data, m);
	json_decref(seen);
	respond_json(r, 200, json_pack("{s:s,s:o}", "object", "list", "data", data));
}

/* Ready when every model has at least one replica that takes traffic. */
static int all_ready(sc_gw_t *gw)
{
	int any = 0;
	for (size_t i = 0; i < gw->nbe; i++) {
		gw_backend_t *b = gw->be[i];
		if (b->gone)
			continue;
		any = 1;
		int ok = 0;
		for (size_t k = 0; k < gw->nbe && !ok; k++) {
			gw_backend_t *o = gw->be[k];
			ok = strcmp(o->model, b->model) == 0 && o->role != GW_ROLE_PREFILL &&
			     sc__gw_backend_usable(gw, o);
		}
		if (!ok)
			return 0;
	}
	return any;
}

static void h_v2_health(sc_http_req_t *r, void *ud)
{
	sc_gw_t *gw = ud;
	const char *p = sc_http_path(r);
	if (strcmp(p, "/v2/health/live") == 0)
		sc_http_respond(r, 200, "application/json", "", 0);
	else if (strcmp(p, "/v2/health/ready") == 0)
		sc_http_respond(r, all_ready(gw) ? 200 : 503, "application/json", "", 0);
	else
		sc__gw_error(r, 404, NULL, NULL, "no such path");
}

static void h_v2(sc_http_req_t *r, void *ud)
{
	if (strcmp(sc_http_path(r), "/v2") != 0) {
		sc__gw_error(r, 404, NULL, NULL, "no such path");
		return;
	}
	respond_json(r, 200,
	             json_pack("{s:s,s:s,s:[]}", "name", "starcloud-gateway", "version", "0.1.0",
	                       "extensions"));
}

static void h_healthz(sc_http_req_t *r, void *ud)
{
	sc_http_respond(r, 200, "text/plain", "ok\n", 3);
}

static void h_rollouts_get(sc_http_req_t *r, void *ud)
{
	sc_gw_t *gw = ud;
	const char *p = sc_http_path(r) + strlen("/admin/rollouts");
	if (*p == '/' && p[1]) {
		gw_rollout_t *ro = sc__gw_rollout_find(gw, p + 1);
		if (!ro) {
			sc__gw_error(r, 404, NULL, "model", "no rollout for this model");
			return;
		}
		respond_json(r, 200, sc__gw_rollout_json(ro));
		return;
	}
	json_t *list = json_array();
	for (size_t i = 0; i < GW_MAX_ROLLOUTS; i++)
		if (gw->ro[i].used)
			json_array_append_new(list, sc__gw_rollout_json(&gw->ro[i]));
	respond_json(r, 200, json_pack("{s:o}", "rollouts", list));
}

/* POST /admin/rollouts/{model} {"action":"promote|abort"} */
static void h_rollouts_post(sc_http_req_t *r, void *ud)
{
	sc_gw_t *gw = ud;
	const char *p = sc_http_path(r) + strlen("/admin/rollouts");
	if (*p != '/' || !p[1]) {
		sc__gw_error(r, 404, NULL, NULL, "expected /admin/rollouts/{model}");
		return;
	}
	gw_rollout_t *ro = sc__gw_rollout_find(gw, p + 1);
	if (!ro) {
		sc__gw_error(r, 404, NULL, "model", "no rollout for this model");
		return;
	}
	size_t len;
	const char *raw = sc_http_body(r, &len);
	json_t *b = json_loadb(raw, len, 0, NULL);
	const char *action = json_string_value(json_object_get(b, "action"));
	if (!action || sc__gw_rollout_action(gw, ro, action) < 0) {
		json_decref(b);
		sc__gw_error(r, 400, NULL, "action", "action: expected \"promote\" or \"abort\"");
		return;
	}
	json_decref(b);
	respond_json(r, 200, sc__gw_rollout_json(ro));
}

/* ---- /metrics: the counters (stats.c), replicas and rollouts ---------- */

static void replicas_out(sc_buf_t *o, sc_gw_t *gw)
{
	static const char *roles[] = {"both", "prefill", "decode"};
	sc_prom_family(o, "starcloud_gateway_replica_up", "gauge",
	               "1 when the replica takes traffic (ready, not ejected).");
	for (size_t i = 0; i < gw->nbe; i++) {
		gw_backend_t *b = gw->be[i];
		if (!b->gone)
			sc_buf_printf(o,
			              "starcloud_gateway_replica_up{replica=\"%s\",model=\"%s\","
			              "version=\"%s\",role=\"%s\"} %d\n",
			              b->id, b->model, b->version, roles[b->role],
			              sc__gw_backend_usable(gw, b));
	}
	sc_prom_family(o, "starcloud_gateway_replica_requests_in_flight", "gauge",
	               "Upstream attempts in flight to the replica.");
	for (size_t i = 0; i < gw->nbe; i++)
		if (!gw->be[i]->gone)
			sc_buf_printf(
			    o,
			    "starcloud_gateway_replica_requests_in_flight{replica=\"%s\"} "
			    "%d\n",
			    gw->be[i]->id, gw->be[i]->inflight);
	sc_prom_family(o, "starcloud_gateway_replica_requests_total", "counter",
	               "Upstream attempts sent to the replica.");
	for (size_t i = 0; i < gw->nbe; i++)
		if (!gw->be[i]->gone)
			sc_buf_printf(o,
			              "starcloud_gateway_replica_requests_total{replica=\"%s\"} "
			              "%llu\n",
			              gw->be[i]->id, (unsigned long long)gw->be[i]->requests);
	sc_prom_family(o, "starcloud_gateway_replica_failures_total", "counter",
	               "Upstream attempts to the replica that failed (connection, timeout, "
	               "5xx).");
	for (size_t i = 0; i < gw->nbe; i++)
		if (!gw->be[i]->gone)
			sc_buf_printf(o,
			              "starcloud_gateway_replica_failures_total{replica=\"%s\"} "
			              "%llu\n",
			              gw->be[i]->id, (unsigned long long)gw->be[i]->failures);
}

static void rollouts_out(sc_buf_t *o, sc_gw_t *gw)
{
	sc_prom_family(o, "starcloud_gateway_canary_weight_ratio", "gauge",
	               "Share of unpinned traffic sent to the canary (0 to 1).");
	for (size_t i = 0; i < GW_MAX_ROLLOUTS; i++) {
		gw_rollout_t *ro = &gw->ro[i];
		if (ro->used)
			sc_buf_printf(o,
			              "starcloud_gateway_canary_weight_ratio{model=\"%s\","
			              "canary=\"%s\",state=\"%s\"} %g\n",
			              ro->model, ro->canary, sc__gw_rollout_state(ro->state),
			              ro->weight / 100.0);
	}
}

static void metrics_page(sc_http_req_t *r, void *ud)
{
	sc_gw_t *gw = ud;
	sc_buf_t o;
	sc_buf_init(&o, 0);
	sc__gw_stats_out(&o, gw);
	sc__gw_pd_metrics(&o, gw);
	replicas_out(&o, gw);
	rollouts_out(&o, gw);
	sc_prom_build_info(&o, "gateway", "");
	sc_prom_process(&o);
	sc_tls_reload_metrics(&o);
	sc_http_respond(r, 200, "text/plain; version=0.0.4", o.data, o.len);
	sc_buf_free(&o);
}

int sc__gw_admin_routes(sc_gw_t *gw)
{
	int rc = 0;
	rc = rc ? rc : sc_http_route(gw->http, "GET", "/v1/models", h_models, gw);
	rc = rc ? rc : sc_http_route(gw->http, "GET", "/v1/models/", h_models, gw);
	rc = rc ? rc : sc_http_route(gw->http, "GET", "/v2/health/", h_v2_health, gw);
	rc = rc ? rc : sc_http_route(gw->http, "GET", "/v2", h_v2, gw);
	rc = rc ? rc : sc_http_route(gw->http, "GET", "/healthz", h_healthz, gw);
	rc = rc ? rc : sc_http_route(gw->http, "GET", "/metrics", metrics_page, gw);
	rc = rc ? rc : sc_http_route(gw->http, "GET", "/admin/rollouts", h_rollouts_get, gw);
	rc = rc ? rc : sc_http_route(gw->http, "POST", "/admin/rollouts", h_rollouts_post, gw);
	return rc;
}
