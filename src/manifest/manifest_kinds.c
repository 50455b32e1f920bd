/* Decoders for the cluster-side kinds: Node, Queue (both API versions),
 * PriorityClass, SchedulerConfig and Topology, plus the shared metadata. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/quantity.h"
#include "manifest/manifest_int.h"
#include "starcloud/cluster.h"

static int oom(sc__rd_t *rd)
{
	return sc__rd_fail(rd, SC_ENOMEM, "out of memory");
}

/* ---- metadata ---------------------------------------------------------- */

/* Kubernetes' bounds on labels and annotations: labels are small keys for
 * selection, not a place to store data (a 900 KB label value and 50,000
 * labels were accepted before), and annotations are bounded in total. */
#define MAX_LABELS 64
#define MAX_LABEL_NAME 63    /* a key's name part, and a value */
#define MAX_LABEL_PREFIX 253 /* a key's DNS-subdomain prefix, before '/' */
#define MAX_ANNOTATION_BYTES (256 * 1024)

static int check_label(sc__rd_t *rd, const char *k, json_t *v)
{
	const char *slash = strrchr(k, '/');
	size_t plen = slash ? (size_t)(slash - k) : 0, nlen = strlen(slash ? slash + 1 : k);
	if (plen > MAX_LABEL_PREFIX)
		return sc__rd_fail(rd, SC_EINVAL, "a label key's prefix is at most %d characters",
		                   MAX_LABEL_PREFIX);
	if (nlen == 0 || nlen > MAX_LABEL_NAME)
		return sc__rd_fail(rd, SC_EINVAL, "a label key's name is 1 to %d characters",
		                   MAX_LABEL_NAME);
	if (json_is_string(v) && json_string_length(v) > MAX_LABEL_NAME)
		return sc__rd_fail(rd, SC_EINVAL, "a label value is at most %d characters, got %zu",
		                   MAX_LABEL_NAME, json_string_length(v));
	return 0;
}

static int check_meta_sizes(sc__rd_t *rd, json_t *md)
{
	json_t *labels = json_object_get(md, "labels"), *ann = json_object_get(md, "annotations");
	json_t *v;
	const char *k;
	int rc = 0;
	if (json_is_object(labels)) {
		sc__mark_t m = sc__rd_push(rd, "labels");
		if (json_object_size(labels) > MAX_LABELS)
			return sc__rd_fail(rd, SC_EINVAL, "at most %d labels, got %zu", MAX_LABELS,
			                   json_object_size(labels));
		json_object_foreach(labels, k, v)
		{
			sc__mark_t mk = sc__rd_push(rd, k);
			if ((rc = check_label(rd, k, v)) < 0)
				return rc;
			sc__rd_pop(rd, mk);
		}
		sc__rd_pop(rd, m);
	}
	if (json_is_object(ann)) {
		size_t total = 0;
		json_object_foreach(ann, k, v) total +=
		    strlen(k) + (json_is_string(v) ? json_string_length(v) : 0);
		if (total > MAX_ANNOTATION_BYTES) {
			sc__mark_t m = sc__rd_push(rd, "annotations");
			rc = sc__rd_fail(rd, SC_EINVAL,
			                 "at most %d bytes of annotations in all, got %zu",
			                 MAX_ANNOTATION_BYTES, total);
			sc__rd_pop(rd, m);
			return rc;
		}
	}
	return 0;
}

int sc__decode_metadata(sc__rd_t *rd, json_t *obj, const char *kind, const char **name,
                        sc_label_t **labels, size_t *nlabels, int64_t *created)
{
	/* Bookkeeping fields a `kubectl get -o yaml` dump carries are accepted
	 * and ignored, so that a KAI Queue loads unchanged. */
	static const char *const allowed[] = {"name",        "namespace",         "labels",
	                                      "annotations", "creationTimestamp", "resourceVersion",
	                                      "uid",         "generation",        NULL};
	json_t *md;
	sc_label_t *ann;
	size_t nann;
	int rc = sc__get_object(rd, obj, "metadata", true, &md);
	if (rc < 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "metadata");
	if ((rc = sc__rd_fields(rd, md, allowed)) < 0 ||
	    (rc = sc__get_name(rd, md, "name", true, name)) < 0)
		return rc;
	snprintf(rd->object, sizeof(rd->object), "%s %s", kind, *name);
	if ((rc = sc__get_labels(rd, md, "annotations", &ann, &nann)) < 0 ||
	    (rc = check_meta_sizes(rd, md)) < 0)
		return rc;
	if (labels && (rc = sc__get_labels(rd, md, "labels", labels, nlabels)) < 0)
		return rc;
	if (!labels && (rc = sc__get_labels(rd, md, "labels", &ann, &nann)) < 0)
		return rc;
	if (created && (rc = sc__get_time(rd, md, "creationTimestamp", false, created)) < 0)
		return rc;
	sc__rd_pop(rd, m);
	return 0;
}

/* Top-level keys: apiVersion, kind, metadata, spec and, where allowed,
 * status. */
static int top_fields(sc__rd_t *rd, json_t *obj, bool status)
{
	static const char *const with[] = {"apiVersion", "kind",   "metadata",
	                                   "spec",       "status", NULL};
	static const char *const without[] = {"apiVersion", "kind", "metadata", "spec", NULL};
	return sc__rd_fields(rd, obj, status ? with : without);
}

/* ---- Node -------------------------------------------------------------- */

static int decode_mig_layout(sc__rd_t *rd, json_t *mig, sc_node_spec_t *n)
{
	json_t *layout, *dev, *p;
	size_t i, j;
	int rc;
	static const char *const allowed[] = {"layout", NULL};
	if ((rc = sc__rd_fields(rd, mig, allowed)) < 0 ||
	    (rc = sc__get_array(rd, mig, "layout", true, &layout)) < 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "layout");
	if (json_array_size(layout) != (size_t)n->gpu_count)
		return sc__rd_fail(rd, SC_EINVAL,
		                   "expected one list of instances per device (%d), got %zu",
		                   n->gpu_count, json_array_size(layout));
	sc_mig_layout_t *l = sc_arena_calloc(rd->arena, json_array_size(layout) + 1, sizeof(*l));
	if (!l)
		return oom(rd);
	json_array_foreach(layout, i, dev)
	{
		sc__mark_t mi = sc__rd_push_index(rd, i);
		if (!json_is_array(dev) || json_array_size(dev) == 0)
			return sc__rd_fail(rd, SC_EINVAL,
			                   "expected a non-empty list of MIG profiles");
		const char **names =
		    sc_arena_calloc(rd->arena, json_array_size(dev), sizeof(char *));
		if (!names)
			return oom(rd);
		json_array_foreach(dev, j, p)
		{
			sc__mark_t mj = sc__rd_push_index(rd, j);
			if (!json_is_string(p) || !sc__mig_profile_ok(json_string_value(p)))
				return sc__rd_fail(rd, SC_EINVAL,
				                   "expected a MIG profile such as 1g.10gb");
			if (!(names[j] = sc_arena_strdup(rd->arena, json_string_value(p))))
				return oom(rd);
			sc__rd_pop(rd, mj);
		}
		l[i].profiles = names;
		l[i].nprofiles = json_array_size(dev);
		sc__rd_pop(rd, mi);
	}
	sc__rd_pop(rd, m);
	n->mig_layout = l;
	n->mig_mode = SC_MIG_FIXED;
	return 0;
}

/* mig: false | true | "dynamic" | {layout: [[...], ...]} */
static int decode_mig(sc__rd_t *rd, json_t *gpus, sc_node_spec_t *n)
{
	json_t *mig = json_object_get(gpus, "mig");
	if (!mig || json_is_null(mig) || json_is_false(mig))
		return 0;
	sc__mark_t m = sc__rd_push(rd, "mig");
	if (json_is_true(mig) ||
	    (json_is_string(mig) && strcmp(json_string_value(mig), "dynamic") == 0)) {
		n->mig_mode = SC_MIG_DYNAMIC;
	} else if (json_is_object(mig)) {
		int rc = decode_mig_layout(rd, mig, n);
		if (rc < 0)
			return rc;
	} else {
		return sc__rd_fail(rd, SC_EINVAL,
		                   "expected false, dynamic or {layout: [[profiles], ...]}");
	}
	sc__rd_pop(rd, m);
	return 0;
}

int sc__decode_node_gpus(sc__rd_t *rd, json_t *spec, sc_node_spec_t *n)
{
	static const char *const allowed[] = {"count", "model", "memory", "mig", NULL};
	json_t *g;
	int64_t count = 0;
	int rc = sc__get_object(rd, spec, "gpus", false, &g);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "gpus");
	if ((rc = sc__rd_fields(rd, g, allowed)) < 0 ||
	    (rc = sc__get_int(rd, g, "count", true, 0, SC_MAX_GPUS, &count)) < 0 ||
	    (rc = sc__get_str(rd, g, "model", false, &n->gpu_model)) < 0 ||
	    (rc = sc__get_mem(rd, g, "memory", false, 0, &n->gpu_memory)) < 0)
		return rc;
	/* KAI's nodes carry no GPU model: one without matches every job that
	 * names no gpuModels (sc__task_filter). */
	n->gpu_count = (int)count;
	if ((rc = decode_mig(rd, g, n)) < 0)
		return rc;
	/* MIG profiles depend on the device's memory class, which only the
	 * model or the memory can tell. */
	if (n->mig_mode != SC_MIG_NONE && !n->gpu_model && n->gpu_memory <= 0) {
		sc__rd_push(rd, "memory");
		return sc__rd_fail(
		    rd, SC_EINVAL,
		    "required for MIG when no GPU model is given (e.g. 40Gi or 80Gi)");
	}
	sc__rd_pop(rd, m);
	return 0;
}

int sc__decode_node(sc__rd_t *rd, json_t *obj, sc__batch_t *b)
{
	static const char *const spec_fields[] = {"cpu", "memory", "gpus", "unschedulable", NULL};
	/* address, conditions, agent and devices are written by the node
	 * agent's heartbeat (docs/AGENT.md, docs/SERVING.md); the scheduler
	 * reads only ready. */
	static const char *const status_fields[] = {"ready", "address", "conditions",
	                                            "agent", "devices", NULL};
	sc__node_t node = {0};
	sc_node_spec_t *n = &node.spec;
	sc_label_t *labels = NULL;
	json_t *spec, *status = NULL;
	bool ready = true;
	int rc;

	node.o.at = sc__rd_pos(rd, NULL);
	if ((rc = top_fields(rd, obj, true)) < 0 ||
	    (rc = sc__decode_metadata(rd, obj, "Node", &n->name, &labels, &n->nlabels, NULL)) < 0 ||
	    (rc = sc__get_object(rd, obj, "spec", true, &spec)) < 0)
		return rc;
	n->labels = labels;
	sc__mark_t m = sc__rd_push(rd, "spec");
	if ((rc = sc__rd_fields(rd, spec, spec_fields)) < 0 ||
	    (rc = sc__get_cpu(rd, spec, "cpu", true, 0, &n->cpu_milli)) < 0 ||
	    (rc = sc__get_mem(rd, spec, "memory", true, 0, &n->memory)) < 0 ||
	    (rc = sc__decode_node_gpus(rd, spec, n)) < 0 ||
	    (rc = sc__get_bool(rd, spec, "unschedulable", false, &n->unschedulable)) < 0)
		return rc;
	sc__rd_pop(rd, m);
	if ((rc = sc__get_object(rd, obj, "status", false, &status)) < 0)
		return rc;
	if (status) {
		m = sc__rd_push(rd, "status");
		if ((rc = sc__rd_fields(rd, status, status_fields)) < 0 ||
		    (rc = sc__get_bool(rd, status, "ready", false, &ready)) < 0)
			return rc;
		sc__rd_pop(rd, m);
	}
	n->not_ready = !ready;
	return sc__vec_push(&b->nodes, &node) ? oom(rd) : 0;
}

/* ---- Queue ------------------------------------------------------------- */

/* A -1 written in the user's units means "unlimited"; any other negative
 * value is a mistake worth reporting. */
static int unlimited_or_positive(sc__rd_t *rd, const char *key, double v, double minus_one)
{
	if (v >= 0 || v == minus_one)
		return 0;
	sc__mark_t m = sc__rd_push(rd, key);
	(void)m;
	return sc__rd_fail(rd, SC_EINVAL, "expected -1 (unlimited) or a non-negative value");
}

/* One resource in starcloud.dev/v1 units: gpu in devices, cpu and memory
 * as quantities. */
static int queue_value_v1(sc__rd_t *rd, json_t *o, const char *key, int res, double *out)
{
	int64_t q;
	int rc;
	if (res == SC_RES_GPU) {
		double g;
		if ((rc = sc__get_num(rd, o, key, false, -1, 1e12, &g)) <= 0)
			return rc;
		if ((rc = unlimited_or_positive(rd, key, g, -1.0)) < 0)
			return rc;
		*out = g;
		return 1;
	}
	if (res == SC_RES_CPU)
		rc = sc__get_cpu(rd, o, key, false, SC_QTY_NEGATIVE, &q);
	else
		rc = sc__get_mem(rd, o, key, false, SC_QTY_NEGATIVE, &q);
	if (rc <= 0)
		return rc;
	if (q < 0 && (rc = unlimited_or_positive(rd, key, (double)q,
	                                         res == SC_RES_CPU ? -1000.0 : -1.0)) < 0)
		return rc;
	*out = q < 0 ? -1 : (double)q;
	return 1;
}

/* One resource in KAI's units: gpu in devices, cpu in millicores, memory in
 * MB (10^6 bytes); numbers only, as in KAI's CRD. */
static int queue_value_kai(sc__rd_t *rd, json_t *o, const char *key, int res, double *out)
{
	double v;
	int rc = sc__get_num(rd, o, key, false, -1e18, 1e18, &v);
	if (rc <= 0)
		return rc;
	if ((rc = unlimited_or_positive(rd, key, v, -1.0)) < 0)
		return rc;
	*out = v < 0 ? -1 : res == SC_RES_MEM ? v * 1e6 : v;
	return 1;
}

static int decode_queue_res(sc__rd_t *rd, json_t *spec, sc_queue_spec_t *q, bool kai)
{
	static const char *const names[SC_RES_COUNT] = {"gpu", "cpu", "memory"};
	static const char *const res_fields[] = {"gpu", "cpu", "memory", NULL};
	static const char *const fields[] = {"quota", "overQuotaWeight", "limit", NULL};
	json_t *res, *o;
	int rc = sc__get_object(rd, spec, "resources", false, &res);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "resources");
	if ((rc = sc__rd_fields(rd, res, res_fields)) < 0)
		return rc;
	for (int r = 0; r < SC_RES_COUNT; r++) {
		o = NULL;
		if ((rc = sc__get_object(rd, res, names[r], false, &o)) < 0)
			return rc;
		if (!o)
			continue;
		sc__mark_t mr = sc__rd_push(rd, names[r]);
		if ((rc = sc__rd_fields(rd, o, fields)) < 0 ||
		    (rc = (kai ? queue_value_kai : queue_value_v1)(rd, o, "quota", r,
		                                                   &q->res[r].quota)) < 0 ||
		    (rc = (kai ? queue_value_kai : queue_value_v1)(rd, o, "limit", r,
		                                                   &q->res[r].limit)) < 0 ||
		    (rc = sc__get_num(rd, o, "overQuotaWeight", false, 0, 1e9, &q->res[r].weight)) <
		        0)
			return rc;
		sc__rd_pop(rd, mr);
	}
	sc__rd_pop(rd, m);
	return 0;
}

/* spec.maxObjects: how many jobs and deployments the queue may hold (the
 * API server refuses more; docs/MANIFESTS.md). Checked here so a bad value
 * is refused with the field named; the scheduler does not use it. */
static int check_max_objects(sc__rd_t *rd, json_t *spec)
{
	static const char *const fields[] = {"jobs", "deployments", NULL};
	json_t *mo;
	int64_t v;
	int rc = sc__get_object(rd, spec, "maxObjects", false, &mo);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "maxObjects");
	if ((rc = sc__rd_fields(rd, mo, fields)) < 0 ||
	    (rc = sc__get_int(rd, mo, "jobs", false, 0, 10000000, &v)) < 0 ||
	    (rc = sc__get_int(rd, mo, "deployments", false, 0, 10000000, &v)) < 0)
		return rc;
	sc__rd_pop(rd, m);
	return 0;
}

/* spec.podSecurity (docs/SECURITY.md): whether jobs of the queue may pick
 * their uid (runAsUser) and whether that may be root. Enforced by the
 * server when a job is written; the scheduler does not read it. */
static int decode_pod_security(sc__rd_t *rd, json_t *spec)
{
	static const char *const fields[] = {"allowRunAsUser", "allowRoot", NULL};
	json_t *ps = NULL;
	bool v;
	int rc = sc__get_object(rd, spec, "podSecurity", false, &ps);
	if (rc < 0 || !ps)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "podSecurity");
	if ((rc = sc__rd_fields(rd, ps, fields)) < 0 ||
	    (rc = sc__get_bool(rd, ps, "allowRunAsUser", false, &v)) < 0 ||
	    (rc = sc__get_bool(rd, ps, "allowRoot", false, &v)) < 0)
		return rc;
	sc__rd_pop(rd, m);
	return 0;
}

int sc__decode_queue(sc__rd_t *rd, json_t *obj, sc__batch_t *b, bool kai)
{
	static const char *const spec_fields[] = {
	    "displayName",       "parentQueue",       "priority",
	    "preemptMinRuntime", "reclaimMinRuntime", "resources",
	    "maxObjects",        "podSecurity",       NULL};
	sc__queue_t queue = {0};
	sc_queue_spec_t *q = &queue.spec;
	json_t *spec = NULL;
	const char *display;
	int64_t prio = 100;
	int rc;

	/* Defaults: v1 quota 0, weight 1, limit -1 (unlimited); KAI quota 0,
	 * weight 1, limit 0 (nothing above quota). */
	for (int r = 0; r < SC_RES_COUNT; r++)
		q->res[r] = (sc_queue_res_t){.quota = 0, .limit = kai ? 0 : -1, .weight = 1};
	queue.o.at = sc__rd_pos(rd, NULL);
	/* KAI's status block (allocated, requested, ...) is output, ignored. */
	if ((rc = top_fields(rd, obj, kai)) < 0 ||
	    (rc = sc__decode_metadata(rd, obj, "Queue", &q->name, NULL, NULL, &q->created)) < 0 ||
	    (rc = sc__get_object(rd, obj, "spec", false, &spec)) < 0)
		return rc;
	if (spec) {
		sc__mark_t m = sc__rd_push(rd, "spec");
		queue.o.ref[0] = sc__rd_pos(rd, "parentQueue");
		if ((rc = sc__rd_fields(rd, spec, spec_fields)) < 0 ||
		    (rc = sc__get_str(rd, spec, "displayName", false, &display)) < 0 ||
		    (rc = sc__get_name(rd, spec, "parentQueue", false, &q->parent)) < 0 ||
		    (rc = sc__get_int(rd, spec, "priority", false, -1000000, 1000000, &prio)) < 0 ||
		    (rc = sc__get_dur(rd, spec, "preemptMinRuntime", false,
		                      &q->preempt_min_runtime)) < 0 ||
		    (rc = sc__get_dur(rd, spec, "reclaimMinRuntime", false,
		                      &q->reclaim_min_runtime)) < 0 ||
		    (rc = decode_queue_res(rd, spec, q, kai)) < 0 ||
		    (rc = check_max_objects(rd, spec)) < 0 ||
		    (rc = decode_pod_security(rd, spec)) < 0)
			return rc;
		sc__rd_pop(rd, m);
	}
	q->priority = (int)prio;
	return sc__vec_push(&b->queues, &queue) ? oom(rd) : 0;
}

/* ---- PriorityClass ----------------------------------------------------- */

int sc__decode_class(sc__rd_t *rd, json_t *obj, sc__batch_t *b)
{
	static const char *const spec_fields[] = {"value", "preemptible", "description", NULL};
	sc__class_t cls = {0};
	json_t *spec;
	const char *desc;
	int64_t value;
	bool pre;
	int rc;

	cls.o.at = sc__rd_pos(rd, NULL);
	if ((rc = top_fields(rd, obj, false)) < 0 ||
	    (rc = sc__decode_metadata(rd, obj, "PriorityClass", &cls.spec.name, NULL, NULL, NULL)) <
	        0 ||
	    (rc = sc__get_object(rd, obj, "spec", true, &spec)) < 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "spec");
	if ((rc = sc__rd_fields(rd, spec, spec_fields)) < 0 ||
	    (rc = sc__get_int(rd, spec, "value", true, -1000000000, 1000000000, &value)) < 0 ||
	    (rc = sc__get_str(rd, spec, "description", false, &desc)) < 0 ||
	    (rc = sc__get_bool(rd, spec, "preemptible", false, &pre)) < 0)
		return rc;
	sc__rd_pop(rd, m);
	cls.spec.value = (int)value;
	cls.spec.preemptible = rc == 1 ? pre : -1;
	return sc__vec_push(&b->classes, &cls) ? oom(rd) : 0;
}

/* ---- SchedulerConfig --------------------------------------------------- */

static int decode_actions(sc__rd_t *rd, json_t *spec, sc_config_t *c)
{
	const char **names;
	size_t n;
	int rc = sc__get_strs(rd, spec, "actions", false, &names, &n);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "actions");
	if (n == 0 || n > SC_ACT_COUNT)
		return sc__rd_fail(rd, SC_EINVAL, "expected 1 to %d actions", SC_ACT_COUNT);
	for (size_t i = 0; i < n; i++) {
		int a = sc_action_parse(names[i]);
		sc__mark_t mi = sc__rd_push_index(rd, i);
		if (a < 0)
			return sc__rd_fail(rd, SC_EINVAL,
			                   "unknown action \"%s\" (expected allocate, "
			                   "consolidation, reclaim, preempt, stalegangeviction or "
			                   "compaction)",
			                   names[i]);
		for (size_t j = 0; j < i; j++)
			if (c->actions[j] == a)
				return sc__rd_fail(rd, SC_EINVAL, "action \"%s\" is listed twice",
				                   names[i]);
		c->actions[i] = a;
		sc__rd_pop(rd, mi);
	}
	c->nactions = n;
	sc__rd_pop(rd, m);
	return 0;
}

static int decode_placement(sc__rd_t *rd, json_t *spec, sc_config_t *c)
{
	static const char *const fields[] = {"gpu", "cpu", "device", NULL};
	static const char *const policies[] = {"binpack", "spread", NULL};
	static const char *const device[] = {"pack", "spread", NULL};
	json_t *p;
	int g = -1, cpu = -1, dev = -1;
	int rc = sc__get_object(rd, spec, "placement", false, &p);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "placement");
	if ((rc = sc__rd_fields(rd, p, fields)) < 0 ||
	    (rc = sc__get_enum(rd, p, "gpu", false, policies, &g)) < 0 ||
	    (rc = sc__get_enum(rd, p, "cpu", false, policies, &cpu)) < 0 ||
	    (rc = sc__get_enum(rd, p, "device", false, device, &dev)) < 0)
		return rc;
	/* Index 0 is binpack/pack, 1 is spread. */
	if (g >= 0)
		c->gpu_placement = g ? SC_PLACE_SPREAD : SC_PLACE_BINPACK;
	if (cpu >= 0)
		c->cpu_placement = cpu ? SC_PLACE_SPREAD : SC_PLACE_BINPACK;
	if (dev >= 0)
		c->device_placement = dev ? SC_PLACE_SPREAD : SC_PLACE_BINPACK;
	sc__rd_pop(rd, m);
	return 0;
}

/* victims: {search: minimal | ordered} */
static int decode_victims(sc__rd_t *rd, json_t *spec, sc_config_t *c)
{
	static const char *const fields[] = {"search", NULL};
	static const char *const modes[] = {"minimal", "ordered", NULL};
	json_t *o;
	int mode = -1;
	int rc = sc__get_object(rd, spec, "victims", false, &o);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "victims");
	if ((rc = sc__rd_fields(rd, o, fields)) < 0 ||
	    (rc = sc__get_enum(rd, o, "search", false, modes, &mode)) < 0)
		return rc;
	if (mode >= 0)
		c->victim_search = mode ? SC_VICTIMS_ORDERED : SC_VICTIMS_MINIMAL;
	sc__rd_pop(rd, m);
	return 0;
}

/* reclaim: {tolerance: 0.2, allowConsolidating: false} */
static int decode_reclaim(sc__rd_t *rd, json_t *spec, sc_config_t *c, double *tol)
{
	static const char *const fields[] = {"tolerance", "allowConsolidating", NULL};
	json_t *o;
	bool cons = c->reclaim_consolidating;
	int rc = sc__get_object(rd, spec, "reclaim", false, &o);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "reclaim");
	if ((rc = sc__rd_fields(rd, o, fields)) < 0 ||
	    (rc = sc__get_num(rd, o, "tolerance", false, 0, 100, tol)) < 0 ||
	    (rc = sc__get_bool(rd, o, "allowConsolidating", false, &cons)) < 0)
		return rc;
	c->reclaim_consolidating = cons;
	sc__rd_pop(rd, m);
	return 0;
}

/* compaction: {enabled, maxMovesPerCycle, maxMovesPerHour, minRuntime,
 * cooldown, gracePeriod, checkpointEvery, horizon, targetGpus}. */
static int decode_compaction(sc__rd_t *rd, json_t *spec, sc_config_t *c)
{
	static const char *const fields[] = {
	    "enabled",     "maxMovesPerCycle", "maxMovesPerHour", "minRuntime", "cooldown",
	    "gracePeriod", "checkpointEvery",  "horizon",         "targetGpus", NULL};
	sc_compaction_t k = c->compaction;
	int64_t cyc = k.max_moves_cycle, hour = k.max_moves_hour, target = k.target_gpus;
	json_t *o;
	int rc = sc__get_object(rd, spec, "compaction", false, &o);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "compaction");
	if ((rc = sc__rd_fields(rd, o, fields)) < 0 ||
	    (rc = sc__get_bool(rd, o, "enabled", false, &k.enabled)) < 0 ||
	    (rc = sc__get_int(rd, o, "maxMovesPerCycle", false, 0, 10000, &cyc)) < 0 ||
	    (rc = sc__get_int(rd, o, "maxMovesPerHour", false, 0, 1000000, &hour)) < 0 ||
	    (rc = sc__get_dur(rd, o, "minRuntime", false, &k.min_runtime)) < 0 ||
	    (rc = sc__get_dur(rd, o, "cooldown", false, &k.cooldown)) < 0 ||
	    (rc = sc__get_dur(rd, o, "gracePeriod", false, &k.grace_period)) < 0 ||
	    (rc = sc__get_dur(rd, o, "checkpointEvery", false, &k.checkpoint_every)) < 0 ||
	    (rc = sc__get_dur(rd, o, "horizon", false, &k.horizon)) < 0 ||
	    (rc = sc__get_int(rd, o, "targetGpus", false, 0, 16, &target)) < 0)
		return rc;
	k.max_moves_cycle = (int)cyc;
	k.max_moves_hour = (int)hour;
	k.target_gpus = (int)target;
	c->compaction = k;
	sc__rd_pop(rd, m);
	return 0;
}

/* Reads {key: {field: value}} groups of one setting each. */
static int one_setting(sc__rd_t *rd, json_t *spec, const char *group, const char *field, double min,
                       double max, double *out)
{
	const char *const fields[] = {field, NULL};
	json_t *o;
	int rc = sc__get_object(rd, spec, group, false, &o);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, group);
	if ((rc = sc__rd_fields(rd, o, fields)) < 0)
		return rc;
	if (strcmp(field, "after") == 0) {
		int64_t s;
		if ((rc = sc__get_dur(rd, o, field, false, &s)) < 0)
			return rc;
		if (rc)
			*out = (double)s;
	} else if ((rc = sc__get_num(rd, o, field, false, min, max, out)) < 0) {
		return rc;
	}
	sc__rd_pop(rd, m);
	return 0;
}

int sc__decode_config(sc__rd_t *rd, json_t *obj, sc__batch_t *b)
{
	static const char *const fields[] = {
	    "actions",       "placement",    "packThreshold", "spreadFactor", "reclaim", "preempt",
	    "consolidation", "reservations", "victims",       "compaction",   NULL};
	const char *name;
	json_t *spec = NULL;
	sc_config_t *c = &b->config;
	double tol, util, cmax, serving, after;
	int rc;

	if (b->has_config)
		return sc__rd_fail(rd, SC_EEXISTS, "only one SchedulerConfig may be given");
	b->config_o.at = sc__rd_pos(rd, NULL);
	sc_config_default(c);
	tol = c->reclaim_tolerance;
	util = c->preempt_util_threshold;
	cmax = c->consolidation_max;
	serving = c->serving_spread;
	after = (double)c->reservation_after;
	if ((rc = top_fields(rd, obj, false)) < 0 ||
	    (rc = sc__decode_metadata(rd, obj, "SchedulerConfig", &name, NULL, NULL, NULL)) < 0 ||
	    (rc = sc__get_object(rd, obj, "spec", false, &spec)) < 0)
		return rc;
	if (spec) {
		sc__mark_t m = sc__rd_push(rd, "spec");
		if ((rc = sc__rd_fields(rd, spec, fields)) < 0 ||
		    (rc = decode_actions(rd, spec, c)) < 0 ||
		    (rc = decode_placement(rd, spec, c)) < 0 ||
		    (rc = decode_victims(rd, spec, c)) < 0 ||
		    (rc = decode_compaction(rd, spec, c)) < 0 ||
		    (rc = sc__get_num(rd, spec, "packThreshold", false, 0, 1, &c->pack_threshold)) <
		        0 ||
		    (rc = one_setting(rd, spec, "spreadFactor", "serving", 1, 1000, &serving)) <
		        0 ||
		    (rc = decode_reclaim(rd, spec, c, &tol)) < 0 ||
		    (rc = one_setting(rd, spec, "preempt", "utilizationThreshold", 0, 1, &util)) <
		        0 ||
		    (rc = one_setting(rd, spec, "consolidation", "maxPreemptees", 0, 100000,
		                      &cmax)) < 0 ||
		    (rc = one_setting(rd, spec, "reservations", "after", 0, 0, &after)) < 0)
			return rc;
		sc__rd_pop(rd, m);
	}
	if (serving != floor(serving) || cmax != floor(cmax)) {
		sc__rd_push(rd, serving != floor(serving) ? "spec.spreadFactor.serving"
		                                          : "spec.consolidation.maxPreemptees");
		return sc__rd_fail(rd, SC_EINVAL, "expected a whole number");
	}
	c->reclaim_tolerance = tol;
	c->preempt_util_threshold = util;
	c->consolidation_max = (int)cmax;
	c->serving_spread = (int)serving;
	c->reservation_after = (int64_t)after;
	b->has_config = true;
	return 0;
}

/* ---- Topology ---------------------------------------------------------- */

int sc__decode_topology(sc__rd_t *rd, json_t *obj, sc__batch_t *b)
{
	static const char *const fields[] = {"levels", NULL};
	const char *name;
	const char **levels;
	size_t n;
	json_t *spec;
	int rc;

	if (b->has_topology)
		return sc__rd_fail(rd, SC_EEXISTS, "only one Topology may be given");
	b->topology_o.at = sc__rd_pos(rd, NULL);
	if ((rc = top_fields(rd, obj, false)) < 0 ||
	    (rc = sc__decode_metadata(rd, obj, "Topology", &name, NULL, NULL, NULL)) < 0 ||
	    (rc = sc__get_object(rd, obj, "spec", true, &spec)) < 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "spec");
	if ((rc = sc__rd_fields(rd, spec, fields)) < 0 ||
	    (rc = sc__get_strs(rd, spec, "levels", true, &levels, &n)) < 0)
		return rc;
	sc__rd_push(rd, "levels");
	if (n == 0 || n > 16)
		return sc__rd_fail(rd, SC_EINVAL, "expected 1 to 16 levels");
	for (size_t i = 1; i < n; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(levels[i], levels[j]) == 0) {
				sc__rd_push_index(rd, i);
				return sc__rd_fail(rd, SC_EINVAL, "level \"%s\" is listed twice",
				                   levels[i]);
			}
	sc__rd_pop(rd, m);
	b->levels = levels;
	b->nlevels = n;
	b->has_topology = true;
	return 0;
}
