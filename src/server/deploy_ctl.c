/* The deployment controller (docs/SERVING.md).
 *
 * Every TICK_MS it brings each Deployment's controller-owned status up to
 * date and writes it when it changed: *   - rollout steps: a canary moves to the next step on
 * evidence only: once every canary pod of the step is ready, analysisWindow has passed since the
 * step began, and the gateways' analysis reports of this step add up to at least minRequests canary
 * requests at no more than maxErrorRate, the last of them fresh (within two windows). Without that
 * evidence (no gateway, no traffic) the rollout pauses and says why, and goes on by itself once the
 * evidence comes; it never promotes on a timer. At 100 % the canary becomes the stable version
 * (Complete, event Promoted). A user's pause holds it until resumed;
 *   - clean-up: a pod whose task is no longer live (the old version after a
 *     promotion, the canary after a rollback) or whose index is beyond its
 *     task's replicas (scale-down, a canary step back) is set Releasing, so
 *     the agent stops it and the next scheduling cycle removes it;
 *   - endpoints: one per ready pod, http://<node address>:<pod port>.
 * The replica count itself is kept by the scheduling loop on the view of
 * deploy_view.c: a pod that is gone, evicted, lost with its node or failed
 * for good leaves a gap that the core fills.
 *
 * A rollout starts in the API write itself (sc__deploy_on_write), so the
 * template of the version being replaced is recorded before anything can
 * place a pod from the new spec. Everything runs on the loop's thread;
 * each write is conditional on the revision read, and a conflict is simply
 * retried at the next tick. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/quantity.h"
#include "base/alloc.h"
#include "server/cache.h"
#include "server/deploy.h"
#include "server/ha.h"
#include "server/jobstatus.h"
#include "server/metrics.h"
#include "starcloud/error.h"

#define TICK_MS 500
#define PORT_SPAN 1000

static const char *name_of(json_t *obj)
{
	return sc__str_of(json_object_get(obj, "metadata"), "name");
}

static json_t *obj_at(json_t *parent, const char *key)
{
	json_t *o = json_object_get(parent, key);
	if (!json_is_object(o)) {
		o = json_object();
		json_object_set_new(parent, key, o);
	}
	return o;
}

static void stamp(json_t *o, const char *key, int64_t t)
{
	char ts[40];
	sc__rfc3339(t, ts, sizeof(ts));
	json_object_set_new(o, key, json_string(ts));
}

/* ---- events and writes --------------------------------------------------- */

/* Builds an Event about a deployment into events. */
static void sc__deploy_event(json_t *events, json_t *obj, const char *reason, const char *type,
                             const char *msg)
{
	char now[40];
	if (!events)
		return;
	sc__now_rfc3339(now, sizeof(now));
	json_t *ev = sc_xcheck(
	    json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s,s:s},s:s,s:s,s:s,s:s}", "apiVersion",
	              "starcloud.dev/v1", "kind", "Event", "metadata", "creationTimestamp", now,
	              "involvedObject", "kind", "Deployment", "name", name_of(obj), "queue",
	              sc__str_of(json_object_get(obj, "spec"), "queue"), "reason", reason, "type",
	              type, "message", msg, "lastTimestamp", now));
	json_array_append_new(events, ev);
}

/* A deployment's write: the object (condition rev) and its new events,
 * in one transaction. The strings are in owned (2 * n of them, freed by
 * save_free). */
typedef struct save {
	sc_store_op_t *ops;
	char **owned;
	size_t n;
	char key[SC_MAX_NAME + 64];
} save_t;

static void save_build(sc_server_t *s, json_t *obj, int64_t rev, json_t *events, save_t *w)
{
	size_t i;
	int64_t next = sc_store_revision(s->store) + 1;
	json_t *ev;
	w->n = 1 + json_array_size(events);
	w->ops = sc_xcalloc(w->n, sizeof(*w->ops));
	w->owned = sc_xcalloc(2 * w->n, sizeof(*w->owned));
	sc__object_key(sc__kind_by_name("Deployment"), name_of(obj), w->key, sizeof(w->key));
	w->owned[0] = json_dumps(obj, JSON_COMPACT);
	w->ops[0] = (sc_store_op_t){SC_STORE_PUT, w->key, w->owned[0], rev};
	json_array_foreach(events, i, ev)
	{
		char name[SC_MAX_NAME + 1], ekey[SC_MAX_NAME + 64];
		snprintf(name, sizeof(name), "%.200s.%lld.d%zu", name_of(obj), (long long)next, i);
		json_object_set_new(json_object_get(ev, "metadata"), "name", json_string(name));
		sc__object_key(sc__kind_by_name("Event"), name, ekey, sizeof(ekey));
		w->owned[2 * i + 1] = json_dumps(ev, JSON_COMPACT);
		w->owned[2 * i + 2] = sc_xstrdup(ekey);
		w->ops[i + 1] = (sc_store_op_t){SC_STORE_PUT, w->owned[2 * i + 2],
		                                w->owned[2 * i + 1], SC_REV_ABSENT};
	}
}

static void save_free(save_t *w)
{
	for (size_t i = 0; i < 2 * w->n; i++)
		free(w->owned[i]);
	free(w->owned);
	free(w->ops);
}

typedef struct saving {
	sc_server_t *s;
	sc_store_done_fn fn;
	void *ud;
} saving_t;

static void saved(const sc_store_res_t *res, void *ud)
{
	saving_t *w = ud;
	if (res->rc == 0)
		sc__sched_kick(w->s);
	if (w->fn)
		w->fn(res, w->ud);
	free(w);
}

void sc__deploy_save(sc_server_t *s, json_t *obj, int64_t rev, json_t *events, sc_store_done_fn fn,
                     void *ud)
{
	save_t w;
	saving_t *g = sc_xcalloc(1, sizeof(*g));
	g->s = s;
	g->fn = fn;
	g->ud = ud;
	save_build(s, obj, rev, events, &w);
	sc_store_txn_async(s->store, w.ops, w.n, saved, g);
	save_free(&w);
}

/* The host an agent advertised ("127.0.0.1:7071" -> "127.0.0.1"), unless
 * the node has status.address. */
json_t *sc__deploy_node_addresses(sc_server_t *s)
{
	json_t *out = json_object();
	size_t n;
	sc_cobj_t *const *items = sc__cache_items(s->cache, sc__kind_by_name("Node"), &n);
	for (size_t i = 0; i < n; i++) {
		json_t *node = sc__cache_obj(items[i]);
		json_t *st = json_object_get(node, "status");
		char host[300];
		snprintf(host, sizeof(host), "%s", sc__str_of(st, "address"));
		if (!host[0]) {
			snprintf(host, sizeof(host), "%s",
			         sc__str_of(json_object_get(st, "agent"), "address"));
			char *colon = strrchr(host, ':');
			if (colon)
				*colon = '\0';
		}
		if (node)
			json_object_set_new(out, items[i]->name, json_string(host));
	}
	return out;
}

/* ---- rollout state ------------------------------------------------------- */

static void set_weights(json_t *ro, const char *stable, const char *canary, int w)
{
	json_t *ws = json_object();
	json_object_set_new(ws, stable, json_integer(canary && canary[0] ? 100 - w : 100));
	if (canary && canary[0])
		json_object_set_new(ws, canary, json_integer(w));
	json_object_set_new(ro, "weights", ws);
}

static void set_phase(json_t *ro, const char *phase, const char *reason, int64_t now)
{
	json_object_set_new(ro, "phase", json_string(phase));
	json_object_set_new(ro, "reason", json_string(reason));
	stamp(ro, "lastTransition", now);
}

static void store_steps(json_t *obj, json_t *ro)
{
	int steps[34];
	size_t n = sc__deploy_steps(obj, steps, 34);
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, json_integer(steps[i]));
	json_object_set_new(ro, "steps", arr);
}

/* Drops templates of versions that are neither stable nor canary. */
static void prune_templates(json_t *st, const char *stable, const char *canary)
{
	json_t *tpls = json_object_get(st, "templates"), *e;
	const char *k;
	void *tmp;
	json_object_foreach_safe(tpls, tmp, k, e)
	{
		const char *v = sc__str_of(e, "version");
		if (strcmp(v, stable) != 0 && strcmp(v, canary) != 0)
			json_object_del(tpls, k);
	}
}

/* Re-records version v from spec, keeping its task names if known. */
static void record(json_t *spec, const char *v, json_t *tpls)
{
	json_t *fresh = json_object(), *avoid = json_object(), *e;
	const char *k;
	void *tmp;
	json_object_foreach_safe(tpls, tmp, k, e)
	{
		if (strcmp(sc__str_of(e, "version"), v) == 0)
			json_object_del(tpls, k);
		else
			json_object_set(avoid, k, e);
	}
	sc__deploy_record(spec, v, avoid, fresh);
	json_object_update(tpls, fresh);
	json_decref(fresh);
	json_decref(avoid);
}

/* The evidence of a step starts empty when the step starts. */
static void evidence_reset(json_t *ro, json_int_t step, int64_t now)
{
	json_t *ev =
	    json_pack("{s:I,s:i,s:i,s:i}", "step", step, "requests", 0, "errors", 0, "reports", 0);
	if (!ev)
		abort();
	stamp(ev, "since", now);
	json_object_set_new(ro, "evidence", ev);
}

void sc__deploy_evidence_add(json_t *obj, json_int_t requests, json_int_t errors, int64_t now)
{
	json_t *ro = obj_at(obj_at(obj, "status"), "rollout");
	json_t *ev = json_object_get(ro, "evidence");
	if (!json_is_object(ev)) {
		evidence_reset(ro, json_integer_value(json_object_get(ro, "step")), now);
		ev = json_object_get(ro, "evidence");
	}
	static const char *const keys[] = {"requests", "errors", "reports"};
	json_int_t add[] = {requests, errors, 1};
	for (int i = 0; i < 3; i++)
		json_object_set_new(
		    ev, keys[i],
		    json_integer(json_integer_value(json_object_get(ev, keys[i])) + add[i]));
	stamp(ev, "lastReport", now);
}

static void start_canary(json_t *obj, json_t *ro, const char *stable, const char *v, int64_t now)
{
	int steps[34];
	sc__deploy_steps(obj, steps, 34);
	char why[200];
	snprintf(why, sizeof(why), "version %.63s applied: canary at %d%%", v, steps[0]);
	json_object_set_new(ro, "canary", json_string(v));
	json_object_set_new(ro, "step", json_integer(0));
	json_object_del(ro, "promote");
	json_object_del(ro, "analysis");
	json_object_del(ro, "pausedBy");
	evidence_reset(ro, 0, now);
	store_steps(obj, ro);
	set_weights(ro, stable, v, steps[0]);
	set_phase(ro, "Progressing", why, now);
}

static void complete(json_t *ro, const char *stable, const char *reason, int64_t now)
{
	json_object_set_new(ro, "stable", json_string(stable));
	json_object_del(ro, "canary");
	json_object_del(ro, "promote");
	json_object_del(ro, "evidence");
	json_object_del(ro, "pausedBy");
	json_object_set_new(ro, "step", json_integer(0));
	set_weights(ro, stable, NULL, 0);
	set_phase(ro, "Complete", reason, now);
}

void sc__deploy_on_write(json_t *old, json_t *obj)
{
	char v[SC_DEPLOY_VERSION_MAX + 2], stable[SC_DEPLOY_VERSION_MAX + 1];
	int64_t now = (int64_t)time(NULL);
	json_t *st = obj_at(obj, "status"), *tpls = obj_at(st, "templates");
	json_t *ro = json_object_get(st, "rollout");
	sc__deploy_version(obj, v, sizeof(v));
	if (strlen(v) > SC_DEPLOY_VERSION_MAX)
		return; /* refused by validation before this point */
	if (!json_is_object(ro)) {
		ro = obj_at(st, "rollout");
		record(json_object_get(obj, "spec"), v, tpls);
		complete(ro, v, "first version", now);
		return;
	}
	snprintf(stable, sizeof(stable), "%s", sc__str_of(ro, "stable"));
	const char *phase = sc__str_of(ro, "phase"), *canary = sc__str_of(ro, "canary");
	int live = strcmp(phase, "Progressing") == 0 || strcmp(phase, "Paused") == 0;
	/* The stable version's template must survive the spec moving on. */
	if (old && !json_object_size(tpls))
		record(json_object_get(old, "spec"), stable, tpls);
	if (strcmp(v, stable) == 0) {
		record(json_object_get(obj, "spec"), v, tpls);
		if (live)
			complete(ro, stable, "spec.version set back to the stable version", now);
	} else if (strcmp(v, canary) == 0 && (live || strcmp(phase, "RolledBack") == 0)) {
		record(json_object_get(obj, "spec"), v, tpls); /* edited in place */
	} else {
		record(json_object_get(obj, "spec"), v, tpls);
		start_canary(obj, ro, stable, v, now);
	}
	prune_templates(st, stable, sc__str_of(ro, "canary"));
	json_object_set_new(st, "stableVersion", json_string(stable));
}

void sc__deploy_rollback(sc_server_t *s, json_t *obj, const char *reason, const char *why,
                         json_t *events)
{
	json_t *ro = obj_at(obj_at(obj, "status"), "rollout");
	char msg[600];
	int64_t now = (int64_t)time(NULL);
	snprintf(msg, sizeof(msg), "canary %.63s rolled back to %.63s: %s",
	         sc__str_of(ro, "canary"), sc__str_of(ro, "stable"), why);
	set_weights(ro, sc__str_of(ro, "stable"), NULL, 0);
	json_object_set_new(json_object_get(ro, "weights"), sc__str_of(ro, "canary"),
	                    json_integer(0));
	set_phase(ro, "RolledBack", why, now);
	json_object_del(ro, "promote");
	json_object_del(ro, "pausedBy");
	sc__deploy_event(events, obj, "RolledBack", "Warning", msg);
	if (s && s->metrics)
		sc__metrics_rollback(s->metrics, reason);
}

void sc__deploy_promote(json_t *obj, int64_t now)
{
	json_t *ro = obj_at(obj_at(obj, "status"), "rollout");
	int steps[34];
	size_t n = sc__deploy_steps(obj, steps, 34);
	json_object_set_new(ro, "step", json_integer((json_int_t)n - 1));
	json_object_set_new(ro, "promote", json_true());
	store_steps(obj, ro);
	set_weights(ro, sc__str_of(ro, "stable"), sc__str_of(ro, "canary"), 100);
	set_phase(ro, "Progressing", "promoted: canary at 100 % once its pods are ready", now);
}

void sc__deploy_pause(json_t *obj, bool pause, int64_t now)
{
	json_t *ro = obj_at(obj_at(obj, "status"), "rollout");
	set_phase(ro, pause ? "Paused" : "Progressing", pause ? "paused" : "resumed", now);
	if (pause)
		json_object_set_new(ro, "pausedBy", json_string("user"));
	else
		json_object_del(ro, "pausedBy");
}

/* ---- reconcile ----------------------------------------------------------- */

static int ready_pods(json_t *obj, const sc_deploy_plan_t *p, const sc_deploy_task_t *t)
{
	json_t *e;
	size_t i;
	int n = 0;
	sc_jobst_pod_t pod;
	json_array_foreach(sc__jobst_pods(obj), i, e)
	{
		long idx;
		sc__jobst_pod(e, &pod);
		if (sc__deploy_task_of(p, name_of(obj), pod.name, &idx) == t && idx < t->serving &&
		    pod.phase == SC_PP_RUNNING && pod.ready)
			n++;
	}
	return n;
}

static bool canary_ready(json_t *obj, const sc_deploy_plan_t *p)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->t[i].canary && ready_pods(obj, p, &p->t[i]) < p->t[i].serving)
			return false;
	return true;
}

/* Why the step's evidence does not allow a move yet ("" when it does). */
static void evidence_gap(json_t *obj, json_t *ro, int64_t now, char *why, size_t whysz)
{
	json_t *ev = json_object_get(ro, "evidence");
	json_int_t req = json_integer_value(json_object_get(ev, "requests"));
	json_int_t err = json_integer_value(json_object_get(ev, "errors"));
	int64_t min = sc__deploy_min_requests(obj), window = sc__deploy_window(obj), last = 0;
	int64_t fresh = 2 * window > 10 ? 2 * window : 10;
	double max = sc__deploy_max_error(obj);
	why[0] = '\0';
	if (!json_is_string(json_object_get(ev, "lastReport")) ||
	    sc_quantity_time(sc__str_of(ev, "lastReport"), &last) < 0)
		snprintf(why, whysz,
		         "waiting for analysis: no report from a gateway for this step (it needs "
		         "%lld canary requests)",
		         (long long)min);
	else if (now - last > fresh)
		snprintf(why, whysz,
		         "waiting for analysis: the last gateway report is %llds old (reports must "
		         "be at most %llds old)",
		         (long long)(now - last), (long long)fresh);
	else if (req < min)
		snprintf(why, whysz, "waiting for analysis: %lld of %lld canary requests reported",
		         (long long)req, (long long)min);
	else if ((double)err / (double)req > max)
		snprintf(why, whysz, "canary error rate %.3f > maxErrorRate %.3f (%lld of %lld)",
		         (double)err / (double)req, max, (long long)err, (long long)req);
}

/* Holds the rollout in Paused (by the analysis) with the reason why; an
 * event only when it pauses, not while it stays paused. */
static void analysis_pause(json_t *obj, json_t *ro, const char *why, int64_t now, json_t *events)
{
	if (strcmp(sc__str_of(ro, "phase"), "Paused") == 0) {
		if (strcmp(sc__str_of(ro, "reason"), why) != 0)
			json_object_set_new(ro, "reason", json_string(why));
		return;
	}
	set_phase(ro, "Paused", why, now);
	json_object_set_new(ro, "pausedBy", json_string("analysis"));
	char msg[400];
	snprintf(msg, sizeof(msg), "canary %.63s paused: %.300s", sc__str_of(ro, "canary"), why);
	sc__deploy_event(events, obj, "RolloutPaused", "Warning", msg);
}

/* Next step, or promotion at the last one, when the window of the step has
 * passed and its evidence says so (see the header comment). */
static void progress(sc_server_t *s, json_t *obj, int64_t now, json_t *events)
{
	sc_deploy_plan_t p;
	json_t *ro = json_object_get(json_object_get(obj, "status"), "rollout");
	const char *phase = sc__str_of(ro, "phase");
	int64_t since = 0;
	int analysis_paused =
	    strcmp(phase, "Paused") == 0 && strcmp(sc__str_of(ro, "pausedBy"), "analysis") == 0;
	if ((strcmp(phase, "Progressing") != 0 && !analysis_paused) ||
	    sc__deploy_plan(obj, &p) < 0 || !p.canary[0] || !canary_ready(obj, &p))
		return;
	bool promote = json_is_true(json_object_get(ro, "promote"));
	json_t *ev = json_object_get(ro, "evidence");
	if (sc_quantity_time(sc__str_of(ev, "since"), &since) < 0)
		sc_quantity_time(sc__str_of(ro, "lastTransition"), &since);
	if (!promote && now - since < sc__deploy_window(obj))
		return;
	char why[300];
	if (!promote) {
		evidence_gap(obj, ro, now, why, sizeof(why));
		if (strncmp(why, "canary error rate", 17) == 0) {
			sc__deploy_rollback(s, obj, "error_rate", why, events);
			return;
		}
		if (why[0]) {
			analysis_pause(obj, ro, why, now, events);
			return;
		}
	}
	int steps[34];
	size_t n = sc__deploy_steps(obj, steps, 34);
	json_int_t step = json_integer_value(json_object_get(ro, "step"));
	char msg[300];
	json_object_del(ro, "pausedBy");
	if (p.weight >= 100 || (size_t)step + 1 >= n) {
		snprintf(msg, sizeof(msg), "version %.63s promoted: it replaces %.63s", p.canary,
		         p.stable);
		complete(ro, p.canary, "promoted", now);
		sc__deploy_event(events, obj, "Promoted", "Normal", msg);
		return;
	}
	json_object_set_new(ro, "step", json_integer(step + 1));
	set_weights(ro, p.stable, p.canary, steps[step + 1]);
	evidence_reset(ro, step + 1, now);
	snprintf(msg, sizeof(msg), "canary %.63s at %d%%", p.canary, steps[step + 1]);
	set_phase(ro, "Progressing", msg, now);
	sc__deploy_event(events, obj, "RolloutStep", "Normal", msg);
}

/* Pods no task wants any more are released (those an autoscaler's lower
 * count leaves out once their drain is over: sc__deploy_role_held). */
static void cleanup(json_t *obj, const sc_deploy_plan_t *p)
{
	json_t *e;
	size_t i;
	sc_jobst_pod_t pod;
	json_array_foreach(sc__jobst_pods(obj), i, e)
	{
		long idx = 0;
		sc__jobst_pod(e, &pod);
		const sc_deploy_task_t *t = sc__deploy_task_of(p, name_of(obj), pod.name, &idx);
		if (pod.phase != SC_PP_RUNNING || (t && idx < t->replicas))
			continue;
		sc__jobst_set_phase(e, SC_PP_RELEASING,
		                    t ? "scaled down by the deployment controller"
		                      : "version retired by the deployment controller");
		json_object_set_new(e, "ready", json_false());
	}
}

static json_t *endpoints(json_t *obj, const sc_deploy_plan_t *p, json_t *nodes)
{
	json_t *out = json_array(), *e;
	int repo = json_is_true(json_object_get(json_object_get(obj, "spec"), "modelRepository"));
	size_t i;
	sc_jobst_pod_t pod;
	json_array_foreach(sc__jobst_pods(obj), i, e)
	{
		long idx;
		sc__jobst_pod(e, &pod);
		const sc_deploy_task_t *t = sc__deploy_task_of(p, name_of(obj), pod.name, &idx);
		const char *addr = sc__str_of(nodes, pod.node);
		if (!t || idx >= t->serving || pod.phase != SC_PP_RUNNING || !pod.ready ||
		    !addr[0] || !pod.port)
			continue;
		/* The template's scheme: what the pod serves on its port. */
		const char *sch = json_string_value(json_object_get(t->tpl, "scheme"));
		char url[400];
		snprintf(url, sizeof(url), "%s://%s:%lld",
		         sch && strcasecmp(sch, "https") == 0 ? "https" : "http", addr,
		         (long long)pod.port);
		json_t *ep =
		    json_pack("{s:s,s:s,s:s,s:s,s:s,s:b}", "url", url, "pod", pod.name, "node",
		              pod.node, "version", t->version, "role", t->role, "ready", 1);
		/* The pod serves a model repository: the gateway asks it what it
		 * serves (docs/GATEWAY.md). */
		if (repo)
			json_object_set_new(ep, "repository", json_true());
		json_array_append_new(out, ep);
	}
	return out;
}

/* The autoscaler's key for role of Deployment name: the name itself for a
 * whole replica, "name/prefill" and "name/decode" (a name has no '/'). */
static void scale_key(const char *name, const char *role, char *out, size_t size)
{
	if (strcmp(role, "both") == 0)
		snprintf(out, size, "%s", name);
	else
		snprintf(out, size, "%s/%s", name, role);
}

/* Ends a drain (a: the role's status, may be NULL) that is over, or that
 * a count of want no longer needs. */
static void drain(json_t *a, int want, int64_t now)
{
	json_t *dr = json_object_get(a, "drain");
	if (dr && (json_integer_value(json_object_get(dr, "until")) <= now ||
	           json_integer_value(json_object_get(dr, "from")) <= want))
		json_object_del(a, "drain");
}

/* One autoscaled role of obj: the count from the gateways' reports
 * (deploy_scale.c), kept in status.autoscaling (role "both") or
 * status.autoscaling.ROLE; written when it changes, with the signal that
 * moved it and an event. */
static void autoscale_role(sc_server_t *s, json_t *obj, const char *role, int64_t now,
                           json_t *events)
{
	sc_autoscaling_t as;
	bool both = strcmp(role, "both") == 0;
	json_t *st = obj_at(obj, "status");
	sc_deploy_role_autoscaling(json_object_get(obj, "spec"), role, &as);
	int cur = sc__deploy_role_autoscaled(obj, role);
	sc_scale_signal_t sig;
	char why[256], msg[400], key[SC_MAX_NAME + 16];
	scale_key(name_of(obj), role, key, sizeof(key));
	int want = sc__scale_decide(s, key, &as, cur, now, &sig, why, sizeof(why));
	json_t *top = obj_at(st, "autoscaling");
	json_t *a = both ? top : json_object_get(top, role);
	json_t *had = json_object_get(a, "replicas");
	drain(a, want, now);
	if (want == cur && json_is_integer(had) && json_integer_value(had) == cur)
		return;
	a = both ? top : obj_at(top, role);
	json_object_set_new(a, "replicas", json_integer(want));
	if (want == cur)
		return; /* the first decision, or limits that moved the count */
	stamp(a, "lastScaleTime", now);
	json_object_set_new(a, "reason", json_string(why));
	if (want < cur) {
		/* The replicas above want drain: out of the endpoints now,
		 * released SC_SCALE_DRAIN_S later (deploy.h). */
		json_t *dr = json_object_get(a, "drain");
		json_int_t from = json_integer_value(json_object_get(dr, "from"));
		json_object_set_new(a, "drain",
		                    json_pack("{s:I,s:I}", "from",
		                              from > cur ? from : (json_int_t)cur, "until",
		                              (json_int_t)(now + SC_SCALE_DRAIN_S)));
	}
	json_t *sg = json_pack("{s:I,s:I,s:I,s:I,s:f}", "inflight", (json_int_t)sig.inflight,
	                       "queued", (json_int_t)sig.queued, "busy", (json_int_t)sig.busy,
	                       "requests", (json_int_t)sig.requests, "ttftP95", sig.ttft_p95);
	if (!both) {
		json_object_set_new(sg, "promptTokens",
		                    json_integer((json_int_t)sig.prompt_tokens));
		json_object_set_new(sg, "tokensPerSecond", json_real(sig.tps));
	}
	json_object_set_new(a, "signal", sg);
	snprintf(msg, sizeof(msg), "%s%sreplicas %d -> %d: %s", both ? "" : role, both ? "" : " ",
	         cur, want, why);
	sc__deploy_event(events, obj, want > cur ? "ScaledUp" : "ScaledDown", "Normal", msg);
	sc__scale_count(s, want > cur);
}

/* spec.autoscaling, or disaggregation.{prefill,decode}.autoscaling: each
 * autoscaled role on its own signal; status of roles no longer autoscaled
 * goes. */
static void autoscale(sc_server_t *s, json_t *obj, int64_t now, json_t *events)
{
	static const char *const roles[] = {"prefill", "decode"};
	const char *scaled[2];
	json_t *st = obj_at(obj, "status");
	size_t n = sc__deploy_scaled_roles(obj, scaled);
	if (n == 0) {
		json_object_del(st, "autoscaling");
		return;
	}
	json_t *top = json_object_get(st, "autoscaling");
	if (json_is_object(top) && strcmp(scaled[0], "both") != 0) {
		/* Per role: the whole-replica keys of an earlier spec go. */
		static const char *const whole[] = {"replicas", "lastScaleTime", "reason", "signal",
		                                    NULL};
		for (size_t i = 0; whole[i]; i++)
			json_object_del(top, whole[i]);
		for (size_t i = 0; i < 2; i++)
			if (sc__deploy_role_autoscaled(obj, roles[i]) < 0)
				json_object_del(top, roles[i]);
	} else if (json_is_object(top)) {
		for (size_t i = 0; i < 2; i++)
			json_object_del(top, roles[i]);
	}
	for (size_t i = 0; i < n; i++)
		autoscale_role(s, obj, scaled[i], now, events);
}

void sc__deploy_reconcile(sc_server_t *s, json_t *obj, json_t *nodes, int64_t now, json_t *events)
{
	sc_deploy_plan_t p;
	json_t *st = obj_at(obj, "status");
	if (!json_is_object(json_object_get(st, "rollout")))
		sc__deploy_on_write(NULL, obj);
	autoscale(s, obj, now, events);
	progress(s, obj, now, events);
	if (sc__deploy_plan(obj, &p) < 0)
		return;
	cleanup(obj, &p);
	json_object_set_new(st, "endpoints", endpoints(obj, &p, nodes));
	json_object_set_new(st, "stableVersion", json_string(p.stable));
	prune_templates(st, p.stable, p.canary);
}

static void reconcile_one(sc_server_t *s, sc_cobj_t *o, json_t *nodes, int64_t now)
{
	json_t *cur = sc__cache_obj(o);
	if (!json_is_object(cur) || !json_is_object(json_object_get(cur, "spec")))
		return;
	/* A copy to change: the cache's is shared with every reader. */
	json_t *obj = json_deep_copy(cur), *events = json_array();
	sc__deploy_reconcile(s, obj, nodes, now, events);
	if (!json_equal(cur, obj))
		sc__deploy_save(s, obj, o->mod_rev, events, NULL, NULL);
	json_decref(events);
	json_decref(obj);
}

/* From the cache, which every write reaches before it is answered. */
void sc__deploy_tick(sc_server_t *s)
{
	size_t n;
	sc_cobj_t *const *items = sc__cache_items(s->cache, sc__kind_by_name("Deployment"), &n);
	if (!n)
		return;
	json_t *nodes = sc__deploy_node_addresses(s);
	int64_t now = (int64_t)time(NULL);
	for (size_t i = 0; i < n; i++)
		reconcile_one(s, items[i], nodes, now);
	json_decref(nodes);
	sc__scale_sweep(s, now);
}

/* Only the leader runs controllers; its writes are fenced (ha.c). */
static void on_tick(uv_timer_t *t)
{
	sc_server_t *s = t->data;
	if (!sc__ha_leader_begin(s))
		return;
	sc__deploy_tick(s);
	sc__ha_leader_end(s);
}

int sc__deploy_start(sc_server_t *s)
{
	uv_timer_t *t = sc_calloc(1, sizeof(*t));
	if (!t)
		return SC_ENOMEM;
	uv_timer_init(s->loop, t);
	t->data = s;
	uv_timer_start(t, on_tick, TICK_MS, TICK_MS);
	/* Like the lease timer: it must not keep the loop alive at shutdown;
	 * the handle lives as long as the process. */
	uv_unref((uv_handle_t *)t);
	return 0;
}

/* ---- hooks of the scheduling loop ---------------------------------------- */

void sc__deploy_keep_status(json_t *old, json_t *st)
{
	for (size_t i = 0; sc__deploy_status_keys[i]; i++) {
		json_t *v = json_object_get(old, sc__deploy_status_keys[i]);
		if (v)
			json_object_set(st, sc__deploy_status_keys[i], v);
	}
}

/* Ports belong to a host, and several nodes may share one (`starcloud dev`
 * runs every agent on loopback): pairs are keyed by the node's address.
 * A node whose agent has not reported an address yet could be any host,
 * so its pods count as "?" and the port as taken everywhere ("*"). */
static const char *host_key(json_t *addrs, const char *node)
{
	const char *a = sc__str_of(addrs, node);
	return a[0] ? a : "?";
}

static void mark(json_t *used, const char *host, json_int_t port)
{
	char key[SC_MAX_NAME + 16];
	snprintf(key, sizeof(key), "%s:%lld", host, (long long)port);
	json_object_set_new(used, key, json_true());
	snprintf(key, sizeof(key), "*:%lld", (long long)port);
	json_object_set_new(used, key, json_true());
}

static bool taken(json_t *used, const char *host, json_int_t port)
{
	char key[SC_MAX_NAME + 16];
	snprintf(key, sizeof(key), "%s:%lld", strcmp(host, "?") ? host : "*", (long long)port);
	if (json_object_get(used, key))
		return true;
	snprintf(key, sizeof(key), "?:%lld", (long long)port);
	return json_object_get(used, key) != NULL;
}

json_t *sc__deploy_ports_in_use(json_t *addrs, json_t *deps)
{
	json_t *used = json_object(), *e, *d;
	size_t i, k;
	json_object_set(used, "", addrs);
	json_array_foreach(deps, i, d)
	{
		sc_jobst_pod_t pod;
		json_array_foreach(sc__jobst_pods(d), k, e)
		{
			sc__jobst_pod(e, &pod);
			if (pod.port && sc__jobst_holds(&pod))
				mark(used, host_key(addrs, pod.node), pod.port);
		}
	}
	return used;
}

void sc__deploy_bind_port(json_t *obj, json_t *np, json_t *used)
{
	sc_deploy_plan_t p;
	if (sc__deploy_plan(obj, &p) < 0)
		return;
	const sc_deploy_task_t *t =
	    sc__deploy_task_of(&p, name_of(obj), sc__str_of(np, "name"), NULL);
	json_t *want = t ? json_object_get(t->tpl, "port") : NULL;
	json_int_t base = json_is_integer(want) ? json_integer_value(want) : SC_DEPLOY_DEFAULT_PORT;
	const char *host = host_key(json_object_get(used, ""), sc__str_of(np, "node"));
	for (json_int_t port = base; port < base + PORT_SPAN && port <= 65535; port++) {
		if (taken(used, host, port))
			continue;
		mark(used, host, port);
		json_object_set_new(np, "port", json_integer(port));
		return;
	}
}
