/* Backends discovered from a replica's model repository.
 *
 * A replica declared with `repository=true` (a `--backend` flag or a
 * Deployment endpoint; docs/GATEWAY.md) serves whatever its Triton model
 * repository has loaded, so the gateway does not take model and version
 * from its declaration: every probe interval it asks the replica
 * `POST /v2/repository/index {"ready": true}` and keeps one backend entry
 * per (model, version) the replica reports READY. A version unloaded there
 * stops getting requests at the next poll; a version loaded there starts
 * getting them. Everything else (picking, retries, ejection, rollouts)
 * treats those entries as any other backend. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "gateway/gw_int.h"
#include "starcloud/error.h"

gw_repo_t *sc__gw_repo_add(sc_gw_t *gw, const char *url, double weight, int source)
{
	gw_repo_t *free_slot = NULL;
	for (size_t i = 0; i < gw->nrepos; i++) {
		gw_repo_t *r = &gw->repos[i];
		if (r->used && strcmp(r->url, url) == 0) {
			r->weight = weight;
			r->source = source;
			r->gone = 0;
			return r;
		}
		if (!r->used && !free_slot)
			free_slot = r;
	}
	if (!free_slot) {
		if (gw->nrepos == GW_MAX_REPOS)
			return NULL;
		free_slot = &gw->repos[gw->nrepos++];
	}
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->used = 1;
	free_slot->weight = weight;
	free_slot->source = source;
	snprintf(free_slot->url, sizeof(free_slot->url), "%s", url);
	const char *host = strstr(url, "://");
	snprintf(free_slot->id, sizeof(free_slot->id), "%s", host ? host + 3 : url);
	return free_slot;
}

/* Marks the derived backends of r tentatively gone (2) or sweeps those
 * still marked (gone for good). */
static void derived(sc_gw_t *gw, const gw_repo_t *r, int sweep)
{
	for (size_t i = 0; i < gw->nbe; i++) {
		gw_backend_t *b = gw->be[i];
		if (b->source != GW_SRC_REPO || strcmp(b->url, r->url) != 0)
			continue;
		if (!sweep && !b->gone)
			b->gone = 2;
		else if (sweep && b->gone == 2)
			b->gone = 1;
	}
}

void sc__gw_repo_mark(sc_gw_t *gw, int source)
{
	for (size_t i = 0; i < gw->nrepos; i++)
		if (gw->repos[i].used && gw->repos[i].source == source)
			gw->repos[i].gone = 2;
}

void sc__gw_repo_sweep(sc_gw_t *gw, int source)
{
	for (size_t i = 0; i < gw->nrepos; i++) {
		gw_repo_t *r = &gw->repos[i];
		if (!r->used || r->source != source || r->gone != 2)
			continue;
		derived(gw, r, 0);
		derived(gw, r, 1);
		r->gone = 1;
		if (!r->polling)
			r->used = 0;
	}
}

/* The replica's index: READY (model, version) pairs become backends. */
static void apply_index(sc_gw_t *gw, gw_repo_t *r, json_t *idx)
{
	derived(gw, r, 0);
	size_t i;
	json_t *e;
	json_array_foreach(idx, i, e)
	{
		const char *m = json_string_value(json_object_get(e, "name"));
		const char *v = json_string_value(json_object_get(e, "version"));
		const char *st = json_string_value(json_object_get(e, "state"));
		if (!m || !v || !st || strcmp(st, "READY") != 0 || !*m || strchr(m, ':') ||
		    strlen(m) >= GW_MAX_NAME || !*v || strlen(v) >= GW_MAX_VERSION)
			continue;
		gw_backend_t d = {0};
		snprintf(d.model, sizeof(d.model), "%s", m);
		snprintf(d.version, sizeof(d.version), "%s", v);
		snprintf(d.url, sizeof(d.url), "%s", r->url);
		d.role = GW_ROLE_BOTH;
		d.kind = GW_BK_STARCLOUD;
		d.weight = r->weight;
		d.ready = 1;
		d.source = GW_SRC_REPO;
		if (!sc__gw_backend_add(gw, &d))
			sc_log_warn("repository %s: the backend table is full", r->id);
	}
	derived(gw, r, 1);
}

static int poll_data(sc_hcli_req_t *req, const char *d, size_t n, void *ud)
{
	gw_repo_t *r = ud;
	return sc_buf_append(&r->body, d, n) < 0;
}

static void poll_done(sc_hcli_req_t *req, int err, void *ud)
{
	gw_repo_t *r = ud;
	r->polling = 0;
	if (r->gone) {
		r->used = 0; /* removed while the poll was out */
	} else if (err == 0 && sc_hcli_status(req) == 200) {
		json_t *idx = json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, NULL);
		if (json_is_array(idx))
			apply_index(r->gw, r, idx);
		else
			sc_log_warn("repository %s: the index is not a JSON array", r->id);
		json_decref(idx);
	}
	/* Unreachable: its entries stay, and their readiness probes fail. */
	sc_buf_free(&r->body);
}

void sc__gw_repo_poll(sc_gw_t *gw)
{
	static const char body[] = "{\"ready\":true}";
	for (size_t i = 0; i < gw->nrepos; i++) {
		gw_repo_t *r = &gw->repos[i];
		if (!r->used || r->gone || r->polling)
			continue;
		char url[GW_MAX_URL + 32];
		snprintf(url, sizeof(url), "%s/v2/repository/index", r->url);
		r->gw = gw;
		sc_buf_init(&r->body, 4u << 20);
		sc_hcli_call_t call = {
		    .method = "POST",
		    .url = url,
		    .body = body,
		    .body_len = sizeof(body) - 1,
		    .timeout_ms = gw->o.probe_interval_ms < 2000 ? gw->o.probe_interval_ms : 2000,
		    .cbs = {.on_data = poll_data, .on_done = poll_done},
		    .ud = r,
		};
		if (sc_hcli_start(gw->hc, &call, NULL) < 0)
			continue;
		r->polling = 1;
	}
}
