/* What a Deployment runs: its live tasks (the plan) and the scheduler's
 * view of it.
 *
 * The core decodes a Deployment into a serving job with one task per role.
 * A rollout needs two versions side by side, each with its own template
 * and its own pod names (so a promoted canary keeps running under its
 * name), so the scheduling loop does not hand the core the Deployment as
 * stored: it hands it a serving Job whose tasks are the live (version,
 * role) pairs, "main-v1" beside "main-v2". The Job carries what makes the
 * Deployment a serving job: replicas start one by one (minMember 1), spread
 * over spreadFactor nodes (default 2, as the core's serving default), and
 * it restarts always. Pods of tasks no longer live are left out of the
 * view (the controller releases them, see deploy_ctl.c). A pod that failed
 * for good is left out too, so the core places its replica again: a served
 * model keeps its replica count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/quantity.h"
#include "base/parse.h"
#include "base/alloc.h"
#include "server/deploy.h"
#include "server/jobstatus.h"
#include "starcloud/error.h"
#include "starcloud/sha256.h"

#define SLUG_MAX 24
#define SERVING_SPREAD 2

const char *const sc__deploy_status_keys[] = {"templates",     "rollout",     "endpoints",
                                              "stableVersion", "autoscaling", NULL};

static const char *name_of(json_t *obj)
{
	return sc__str_of(json_object_get(obj, "metadata"), "name");
}

void sc__deploy_version(json_t *dep, char *out, size_t outsz)
{
	json_t *v = json_object_get(json_object_get(dep, "spec"), "version");
	if (json_is_integer(v))
		snprintf(out, outsz, "%lld", (long long)json_integer_value(v));
	else if (json_is_string(v) && json_string_length(v) > 0)
		snprintf(out, outsz, "%s", json_string_value(v));
	else
		snprintf(out, outsz, "1");
}

/* ---- task names ---------------------------------------------------------- */

/* A version as a piece of a pod name: lower-case letters and digits, other
 * characters become '-', starting with a letter ("2" -> "v2", "V1.3" ->
 * "v1-3"). Two versions may give the same slug; sc__deploy_record() then
 * adds a digest of the version. */
static void slug(const char *v, char *out, size_t outsz)
{
	size_t n = 0;
	if (!((v[0] >= 'a' && v[0] <= 'z') || (v[0] >= 'A' && v[0] <= 'Z')))
		out[n++] = 'v';
	for (size_t i = 0; v[i] && n + 1 < outsz && n < SLUG_MAX; i++) {
		char c = v[i];
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
			c = '-';
		if (c == '-' && out[n - 1] == '-')
			continue;
		out[n++] = c;
	}
	while (n > 1 && out[n - 1] == '-')
		n--;
	out[n] = '\0';
}

static const char *role_prefix(const char *role)
{
	return strcmp(role, "both") == 0 ? "main" : role;
}

static void task_name(const char *role, const char *sl, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s-%s", role_prefix(role), sl);
}

/* ---- roles of a spec ----------------------------------------------------- */

typedef struct role_spec {
	const char *role;
	json_t *tpl; /* borrowed */
	int replicas;
} role_spec_t;

static int int_or(json_t *v, int dflt)
{
	return json_is_integer(v) ? (int)json_integer_value(v) : dflt;
}

/* The roles of spec: "both", or "prefill" and "decode". */
static size_t spec_roles(json_t *spec, role_spec_t *r)
{
	json_t *dis = json_object_get(spec, "disaggregation");
	json_t *base = json_object_get(spec, "template");
	if (!json_is_object(dis)) {
		r[0] = (role_spec_t){"both", base, int_or(json_object_get(spec, "replicas"), 1)};
		return 1;
	}
	static const char *const roles[] = {"prefill", "decode"};
	for (int i = 0; i < 2; i++) {
		json_t *ro = json_object_get(dis, roles[i]);
		json_t *tpl = json_object_get(ro, "template");
		r[i] = (role_spec_t){roles[i], tpl ? tpl : base,
		                     int_or(json_object_get(ro, "replicas"), 1)};
	}
	return 2;
}

void sc__deploy_record(json_t *spec, const char *v, json_t *avoid, json_t *out)
{
	role_spec_t r[2];
	size_t n = spec_roles(spec, r);
	char sl[SLUG_MAX + 16], name[SC_DEPLOY_TASK_MAX + 1];
	slug(v, sl, sizeof(sl));
	for (size_t i = 0; i < n && avoid; i++) {
		task_name(r[i].role, sl, name, sizeof(name));
		json_t *other = json_object_get(avoid, name);
		if (other && strcmp(sc__str_of(other, "version"), v) != 0) {
			char hex[2 * SC_SHA256_LEN + 1];
			sc_sha256_hex(v, strlen(v), hex);
			size_t at = strlen(sl);
			snprintf(sl + at, sizeof(sl) - at, "-%.6s", hex);
			break;
		}
	}
	for (size_t i = 0; i < n; i++) {
		task_name(r[i].role, sl, name, sizeof(name));
		json_t *e = sc_xcheck(json_pack("{s:s,s:s,s:i}", "version", v, "role", r[i].role,
		                                "replicas", r[i].replicas));
		if (r[i].tpl)
			json_object_set_new(e, "template", json_deep_copy(r[i].tpl));
		json_object_set_new(out, name, e);
	}
}

/* ---- rollout settings ---------------------------------------------------- */

size_t sc__deploy_steps(json_t *dep, int *steps, size_t max)
{
	json_t *ro = json_object_get(json_object_get(dep, "spec"), "rollout");
	json_t *arr = json_object_get(ro, "steps"), *v;
	size_t i, n = 0;
	json_array_foreach(arr, i, v)
	{
		json_int_t w = json_integer_value(v);
		if (n + 1 < max && w > (n ? steps[n - 1] : 0) && w <= 100)
			steps[n++] = (int)w;
	}
	if (n == 0) {
		steps[n++] = 10;
		steps[n++] = 50;
	}
	if (steps[n - 1] != 100)
		steps[n++] = 100;
	return n;
}

int64_t sc__deploy_window(json_t *dep)
{
	json_t *ro = json_object_get(json_object_get(dep, "spec"), "rollout");
	json_t *w = json_object_get(ro, "analysisWindow");
	int64_t secs = SC_DEPLOY_DEFAULT_WINDOW;
	if (json_is_integer(w))
		secs = json_integer_value(w);
	else if (json_is_string(w) && sc_quantity_duration(json_string_value(w), &secs) < 0)
		secs = SC_DEPLOY_DEFAULT_WINDOW;
	return secs < 0 ? 0 : secs;
}

int64_t sc__deploy_min_requests(json_t *dep)
{
	json_t *ro = json_object_get(json_object_get(dep, "spec"), "rollout");
	json_t *m = json_object_get(ro, "minRequests");
	return json_is_integer(m) && json_integer_value(m) > 0 ? json_integer_value(m)
	                                                       : SC_DEPLOY_DEFAULT_MIN_REQUESTS;
}

double sc__deploy_max_error(json_t *dep)
{
	json_t *ro = json_object_get(json_object_get(dep, "spec"), "rollout");
	json_t *m = json_object_get(ro, "maxErrorRate");
	return json_is_number(m) ? json_number_value(m) : SC_DEPLOY_DEFAULT_MAX_ERROR;
}

/* ---- the plan ------------------------------------------------------------ */

static int canary_weight(json_t *dep, json_t *ro)
{
	int steps[34];
	size_t n = sc__deploy_steps(dep, steps, 34);
	json_int_t step = json_integer_value(json_object_get(ro, "step"));
	if (step < 0)
		step = 0;
	return steps[(size_t)step < n ? (size_t)step : n - 1];
}

static int wanted(int full, bool canary, int weight)
{
	if (!canary || full <= 0)
		return full;
	int n = (int)ceil((double)full * weight / 100.0);
	return n < 1 ? 1 : n > full ? full : n;
}

static void add_task(sc_deploy_plan_t *p, const char *name, const char *v, const char *role,
                     int full, bool canary, json_t *tpl)
{
	if (p->n == SC_DEPLOY_MAX_TASKS)
		return;
	sc_deploy_task_t *t = &p->t[p->n++];
	snprintf(t->name, sizeof(t->name), "%s", name);
	snprintf(t->version, sizeof(t->version), "%s", v);
	t->role = strcmp(role, "prefill") == 0  ? "prefill"
	          : strcmp(role, "decode") == 0 ? "decode"
	                                        : "both";
	int r = strcmp(t->role, "prefill") == 0 ? 0 : strcmp(t->role, "decode") == 0 ? 1 : -1;
	int as = r >= 0 ? p->role_autoscaled[r] : p->autoscaled;
	int held = p->held[r + 1];
	if (as >= 0)
		full = as;
	t->full = full;
	t->canary = canary;
	t->serving = wanted(full, canary, p->weight);
	t->replicas = as >= 0 && held > full ? wanted(held, canary, p->weight) : t->serving;
	t->tpl = tpl;
}

/* The spec's replica count of role, or dflt when the spec has no such
 * role (a version of another shape). */
static int spec_replicas(json_t *dep, const char *role, int dflt)
{
	role_spec_t r[2];
	size_t n = spec_roles(json_object_get(dep, "spec"), r);
	for (size_t i = 0; i < n; i++)
		if (strcmp(r[i].role, role) == 0)
			return r[i].replicas;
	return dflt;
}

/* Tasks of version v: as recorded in status.templates, else (a version
 * never recorded: the spec's own, before the write hook ran) from spec.
 * The replica count is the spec's for every version: a scale is not a
 * new version, and the record of the stable version is not rewritten
 * while spec.version names another (a rollout, or one rolled back: the
 * soak of issue 23 scaled decode 2 -> 5 there and the stable version
 * stayed at 2). */
static void add_version(sc_deploy_plan_t *p, json_t *dep, const char *v, bool canary)
{
	json_t *tpls = json_object_get(json_object_get(dep, "status"), "templates"), *e;
	const char *name;
	size_t before = p->n;
	json_object_foreach(tpls, name, e)
	{
		const char *role = sc__str_of(e, "role");
		if (strcmp(sc__str_of(e, "version"), v) == 0 && strlen(name) <= SC_DEPLOY_TASK_MAX)
			add_task(
			    p, name, v, role,
			    spec_replicas(dep, role, int_or(json_object_get(e, "replicas"), 1)),
			    canary, json_object_get(e, "template"));
	}
	char cur[SC_DEPLOY_VERSION_MAX + 1];
	sc__deploy_version(dep, cur, sizeof(cur));
	if (p->n > before || strcmp(cur, v) != 0)
		return;
	role_spec_t r[2];
	char sl[SLUG_MAX + 2], tn[SC_DEPLOY_TASK_MAX + 1];
	size_t n = spec_roles(json_object_get(dep, "spec"), r);
	slug(v, sl, sizeof(sl));
	for (size_t i = 0; i < n; i++) {
		task_name(r[i].role, sl, tn, sizeof(tn));
		add_task(p, tn, v, r[i].role, r[i].replicas, canary, r[i].tpl);
	}
}

int sc__deploy_role_autoscaled(json_t *dep, const char *role)
{
	sc_autoscaling_t as;
	json_t *spec = json_object_get(dep, "spec");
	bool both = strcmp(role, "both") == 0;
	if (both != !json_is_object(json_object_get(spec, "disaggregation")))
		return -1; /* a role the Deployment does not have */
	sc_deploy_role_autoscaling(spec, role, &as);
	if (as.target == SC_AS_NONE)
		return -1;
	json_t *st = json_object_get(json_object_get(dep, "status"), "autoscaling");
	json_t *n = json_object_get(both ? st : json_object_get(st, role), "replicas");
	int v = json_is_integer(n) ? (int)json_integer_value(n) : as.min_replicas;
	/* Limits changed since the last decision hold at once. */
	return v < as.min_replicas ? as.min_replicas : v > as.max_replicas ? as.max_replicas : v;
}

int sc__deploy_role_held(json_t *dep, const char *role)
{
	int n = sc__deploy_role_autoscaled(dep, role);
	if (n < 0)
		return n;
	json_t *st = json_object_get(json_object_get(dep, "status"), "autoscaling");
	if (strcmp(role, "both") != 0)
		st = json_object_get(st, role);
	json_t *from = json_object_get(json_object_get(st, "drain"), "from");
	/* At most the maximum: a drain is never a reason to hold more. */
	sc_autoscaling_t as;
	sc_deploy_role_autoscaling(json_object_get(dep, "spec"), role, &as);
	if (json_is_integer(from) && json_integer_value(from) > n)
		n = json_integer_value(from) < as.max_replicas ? (int)json_integer_value(from)
		                                               : as.max_replicas;
	return n;
}

int sc__deploy_autoscaled(json_t *dep)
{
	return sc__deploy_role_autoscaled(dep, "both");
}

size_t sc__deploy_scaled_roles(json_t *dep, const char **roles)
{
	static const char *const all[] = {"both", "prefill", "decode"};
	size_t n = 0;
	for (size_t i = 0; i < 3 && n < 2; i++)
		if (sc__deploy_role_autoscaled(dep, all[i]) >= 0)
			roles[n++] = all[i];
	return n;
}

int sc__deploy_plan(json_t *dep, sc_deploy_plan_t *p)
{
	json_t *ro = json_object_get(json_object_get(dep, "status"), "rollout");
	const char *phase = sc__str_of(ro, "phase");
	char v[SC_DEPLOY_VERSION_MAX + 2];
	memset(p, 0, sizeof(*p));
	p->autoscaled = sc__deploy_autoscaled(dep);
	p->role_autoscaled[0] = sc__deploy_role_autoscaled(dep, "prefill");
	p->role_autoscaled[1] = sc__deploy_role_autoscaled(dep, "decode");
	p->held[0] = sc__deploy_role_held(dep, "both");
	p->held[1] = sc__deploy_role_held(dep, "prefill");
	p->held[2] = sc__deploy_role_held(dep, "decode");
	sc__deploy_version(dep, v, sizeof(v));
	if (strlen(v) > SC_DEPLOY_VERSION_MAX)
		return SC_EINVAL;
	snprintf(p->stable, sizeof(p->stable), "%.63s",
	         json_is_string(json_object_get(ro, "stable")) ? sc__str_of(ro, "stable") : v);
	if ((strcmp(phase, "Progressing") == 0 || strcmp(phase, "Paused") == 0) &&
	    sc__str_of(ro, "canary")[0] && strcmp(sc__str_of(ro, "canary"), p->stable) != 0) {
		snprintf(p->canary, sizeof(p->canary), "%.63s", sc__str_of(ro, "canary"));
		p->weight = canary_weight(dep, ro);
	}
	add_version(p, dep, p->stable, false);
	if (p->canary[0])
		add_version(p, dep, p->canary, true);
	return 0;
}

const sc_deploy_task_t *sc__deploy_task_of(const sc_deploy_plan_t *p, const char *dep,
                                           const char *pod, long *index)
{
	size_t dl = strlen(dep);
	const char *dash = strrchr(pod, '-');
	if (strncmp(pod, dep, dl) != 0 || pod[dl] != '-' || !dash || dash <= pod + dl + 1)
		return NULL;
	const char *end = dash + 1;
	uint64_t idx;
	if (sc_parse_digits(&end, INT32_MAX, &idx) < 0 || *end)
		return NULL;
	const char *t = pod + dl + 1;
	size_t tl = (size_t)(dash - t);
	for (size_t i = 0; i < p->n; i++)
		if (strlen(p->t[i].name) == tl && strncmp(p->t[i].name, t, tl) == 0) {
			if (index)
				*index = idx;
			return &p->t[i];
		}
	return NULL;
}

/* ---- the scheduler's view ------------------------------------------------ */

static json_t *view_task(const sc_deploy_task_t *t)
{
	json_t *task = sc_xcheck(json_is_object(t->tpl) ? json_deep_copy(t->tpl) : json_object());
	json_object_set_new(task, "name", json_string(t->name));
	json_object_set_new(task, "replicas", json_integer(t->replicas));
	return task;
}

/* The fields of a pod entry the core uses; what agents report (ready,
 * restarts, message, ...) and the port are the server's business. */
static const char *const pod_fields[] = {"name",      "phase", "node",      "gpus",    "gpuShare",
                                         "gpuMemory", "mig",   "startedAt", "movedAt", NULL};

static json_t *view_pod(json_t *e)
{
	json_t *p = json_object();
	for (size_t i = 0; pod_fields[i]; i++) {
		json_t *v = json_object_get(e, pod_fields[i]);
		if (v)
			json_object_set(p, pod_fields[i], v);
	}
	return p;
}

static json_t *view_status(json_t *dep, const sc_deploy_plan_t *p)
{
	json_t *st = json_object_get(dep, "status"), *pods = json_array(), *e;
	size_t i;
	sc_jobst_pod_t pod;
	json_array_foreach(sc__jobst_pods(dep), i, e)
	{
		long idx;
		sc__jobst_pod(e, &pod);
		const sc_deploy_task_t *t = sc__deploy_task_of(p, name_of(dep), pod.name, &idx);
		if (!t || idx >= t->replicas || pod.phase == SC_PP_FAILED ||
		    pod.phase == SC_PP_SUCCEEDED)
			continue;
		json_array_append_new(pods, view_pod(e));
	}
	json_t *out = json_pack("{s:o}", "pods", pods);
	if (json_object_get(st, "staleSince"))
		json_object_set(out, "staleSince", json_object_get(st, "staleSince"));
	return out;
}

/* Settings that mean the same on a Job. */
static const char *const same_fields[] = {"queue",     "priorityClass", "preemptible",
                                          "placement", "topology",      NULL};

json_t *sc__deploy_view(json_t *dep)
{
	sc_deploy_plan_t p;
	json_t *spec = json_object_get(dep, "spec");
	if (!json_is_object(spec) || sc__deploy_plan(dep, &p) < 0)
		return json_incref(dep); /* the decoder names the problem */
	json_t *js = json_object(), *tasks = json_array();
	int total = 0;
	for (size_t i = 0; same_fields[i]; i++) {
		json_t *v = json_object_get(spec, same_fields[i]);
		if (v)
			json_object_set(js, same_fields[i], v);
	}
	json_t *sf = json_object_get(spec, "spreadFactor");
	json_object_set_new(js, "spreadFactor",
	                    sf ? json_incref(sf) : json_integer(SERVING_SPREAD));
	json_object_set_new(js, "restartPolicy", json_string("Always"));
	for (size_t i = 0; i < p.n; i++) {
		json_array_append_new(tasks, view_task(&p.t[i]));
		total += p.t[i].replicas;
	}
	if (p.n == 0)
		json_array_append_new(tasks, json_pack("{s:s,s:i}", "name", "main", "replicas", 0));
	json_object_set_new(js, "tasks", tasks);
	if (total > 0)
		json_object_set_new(js, "minMember", json_integer(1));
	json_t *md = json_object_get(dep, "metadata");
	json_t *view =
	    sc_xcheck(json_pack("{s:s,s:s,s:O,s:o,s:o}", "apiVersion", "starcloud.dev/v1", "kind",
	                        "Job", "metadata", md, "spec", js, "status", view_status(dep, &p)));
	return view;
}
