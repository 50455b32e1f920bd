/* Decoders for autoscaling: the NodePool kind and a Deployment's
 * spec.autoscaling, and the read-back of the latter for the server
 * (docs/AUTOSCALING.md, docs/MANIFESTS.md). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/quantity.h"
#include "manifest/manifest_int.h"
#include "starcloud/cluster.h"

#define MAX_POOL_NODES 100000
#define MAX_POOL_GPUS (MAX_POOL_NODES * (int64_t)SC_MAX_GPUS)

static int oom(sc__rd_t *rd)
{
	return sc__rd_fail(rd, SC_ENOMEM, "out of memory");
}

/* ---- NodePool ---------------------------------------------------------- */

/* template: {cpu, memory, gpus: {count, model, memory, mig}, labels}. The
 * pool label is added to the labels, so a template node looks like the
 * nodes the pool makes; writing it with another value is an error. */
static int decode_template(sc__rd_t *rd, json_t *spec, sc_nodepool_t *np)
{
	static const char *const fields[] = {"cpu", "memory", "gpus", "labels", NULL};
	sc_node_spec_t *n = &np->pool.tmpl;
	json_t *t;
	sc_label_t *labels = NULL;
	size_t nl = 0;
	int rc = sc__get_object(rd, spec, "template", true, &t);
	if (rc < 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "template");
	if ((rc = sc__rd_fields(rd, t, fields)) < 0 ||
	    (rc = sc__get_cpu(rd, t, "cpu", true, 0, &n->cpu_milli)) < 0 ||
	    (rc = sc__get_mem(rd, t, "memory", true, 0, &n->memory)) < 0 ||
	    (rc = sc__decode_node_gpus(rd, t, n)) < 0 ||
	    (rc = sc__get_labels(rd, t, "labels", &labels, &nl)) < 0)
		return rc;
	sc_label_t *all = sc_arena_calloc(rd->arena, nl + 1, sizeof(*all));
	if (!all)
		return oom(rd);
	size_t k = 0;
	for (size_t i = 0; i < nl; i++) {
		if (strcmp(labels[i].key, SC_POOL_LABEL) != 0) {
			all[k++] = labels[i];
			continue;
		}
		if (strcmp(labels[i].value, np->pool.name) != 0) {
			sc__rd_push(rd, "labels");
			sc__rd_push(rd, SC_POOL_LABEL);
			return sc__rd_fail(rd, SC_EINVAL,
			                   "the pool label names the pool (%s), or is left out",
			                   np->pool.name);
		}
	}
	all[k++] = (sc_label_t){SC_POOL_LABEL, np->pool.name};
	n->labels = all;
	n->nlabels = k;
	sc__rd_pop(rd, m);
	return 0;
}

/* A command: a non-empty list of at most SC_POOL_MAX_ARGS strings. */
static int decode_command(sc__rd_t *rd, json_t *ex, const char *key, const char *const **out,
                          size_t *n)
{
	const char **v = NULL;
	int rc = sc__get_strs(rd, ex, key, true, &v, n);
	if (rc < 0)
		return rc;
	if (*n == 0 || *n > SC_POOL_MAX_ARGS || !v[0][0]) {
		sc__rd_push(rd, key);
		return sc__rd_fail(rd, SC_EINVAL,
		                   "expected a command: 1..%d strings, the first a program",
		                   SC_POOL_MAX_ARGS);
	}
	*out = v;
	return 0;
}

/* provider: {dev: {joinTimeout?}} or {exec: {create, delete, joinTimeout?}}. */
static int decode_provider(sc__rd_t *rd, json_t *spec, sc_nodepool_t *np)
{
	static const char *const fields[] = {"dev", "exec", NULL};
	static const char *const dev_fields[] = {"joinTimeout", NULL};
	static const char *const exec_fields[] = {"create", "delete", "joinTimeout", NULL};
	json_t *p, *dev = NULL, *ex = NULL;
	int rc = sc__get_object(rd, spec, "provider", true, &p);
	if (rc < 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "provider");
	if ((rc = sc__rd_fields(rd, p, fields)) < 0 ||
	    (rc = sc__get_object(rd, p, "dev", false, &dev)) < 0 ||
	    (rc = sc__get_object(rd, p, "exec", false, &ex)) < 0)
		return rc;
	if (!dev == !ex)
		return sc__rd_fail(rd, SC_EINVAL, "expected exactly one of dev: {} or exec: {...}");
	sc__mark_t m2 = sc__rd_push(rd, dev ? "dev" : "exec");
	json_t *o = dev ? dev : ex;
	np->provider = dev ? SC_PROVIDER_DEV : SC_PROVIDER_EXEC;
	np->join_timeout = dev ? SC_POOL_JOIN_TIMEOUT_DEV : SC_POOL_JOIN_TIMEOUT_EXEC;
	if ((rc = sc__rd_fields(rd, o, dev ? dev_fields : exec_fields)) < 0 ||
	    (rc = sc__get_dur(rd, o, "joinTimeout", false, &np->join_timeout)) < 0)
		return rc;
	if (np->join_timeout <= 0) {
		sc__rd_push(rd, "joinTimeout");
		return sc__rd_fail(rd, SC_EINVAL, "expected a positive duration");
	}
	if (ex && ((rc = decode_command(rd, ex, "create", &np->create, &np->ncreate)) < 0 ||
	           (rc = decode_command(rd, ex, "delete", &np->remove, &np->nremove)) < 0))
		return rc;
	sc__rd_pop(rd, m2);
	sc__rd_pop(rd, m);
	return 0;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* minNodes/minGPUs, maxNodes/maxGPUs: both kinds of limit may be given and
 * both hold; at least one maximum is required (a pool without one could
 * grow without end on one bad job). */
static int decode_limits(sc__rd_t *rd, json_t *spec, sc_nodepool_t *np)
{
	int64_t min_nodes = 0, max_nodes = -1, min_gpus = 0, max_gpus = -1;
	int g = np->pool.tmpl.gpu_count;
	int rc;
	if ((rc = sc__get_int(rd, spec, "minNodes", false, 0, MAX_POOL_NODES, &min_nodes)) < 0 ||
	    (rc = sc__get_int(rd, spec, "maxNodes", false, 0, MAX_POOL_NODES, &max_nodes)) < 0 ||
	    (rc = sc__get_int(rd, spec, "minGPUs", false, 0, MAX_POOL_GPUS, &min_gpus)) < 0 ||
	    (rc = sc__get_int(rd, spec, "maxGPUs", false, 0, MAX_POOL_GPUS, &max_gpus)) < 0)
		return rc;
	if (g == 0 && (min_gpus > 0 || max_gpus >= 0)) {
		sc__rd_push(rd, min_gpus > 0 ? "minGPUs" : "maxGPUs");
		return sc__rd_fail(rd, SC_EINVAL, "the template has no GPUs: give nodes instead");
	}
	if (max_nodes < 0 && max_gpus < 0)
		return sc__rd_fail(rd, SC_EINVAL, "expected maxNodes or maxGPUs (or both)");
	if (g > 0 && min_gpus > 0)
		min_nodes = min_nodes > ceil_div(min_gpus, g) ? min_nodes : ceil_div(min_gpus, g);
	/* The largest node count both maximums allow. */
	int64_t cap = max_nodes >= 0 ? max_nodes : MAX_POOL_NODES;
	if (g > 0 && max_gpus >= 0 && max_gpus / g < cap)
		cap = max_gpus / g;
	if (min_nodes > cap) {
		sc__rd_push(rd, min_gpus > 0 && g > 0 ? "minGPUs" : "minNodes");
		return sc__rd_fail(rd, SC_EINVAL,
		                   "the minimum (%lld nodes) is above what maxNodes/maxGPUs "
		                   "allow (%lld nodes)",
		                   (long long)min_nodes, (long long)cap);
	}
	np->pool.min_nodes = (int)min_nodes;
	np->pool.max_nodes = (int)max_nodes;
	np->pool.max_gpus = max_gpus;
	return 0;
}

int sc__decode_nodepool(sc__rd_t *rd, json_t *obj, sc__batch_t *b)
{
	static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", "status", NULL};
	static const char *const fields[] = {"minNodes", "maxNodes",       "minGPUs",
	                                     "maxGPUs",  "scaleDownAfter", "template",
	                                     "provider", "cost",           NULL};
	sc__pool_t pool = {0};
	sc_nodepool_t *np = &pool.spec;
	json_t *spec;
	int rc;
	pool.o.at = sc__rd_pos(rd, NULL);
	np->scale_down_after = SC_POOL_SCALE_DOWN_AFTER;
	if ((rc = sc__rd_fields(rd, obj, top)) < 0 ||
	    (rc = sc__decode_metadata(rd, obj, "NodePool", &np->pool.name, NULL, NULL,
	                              &np->created)) < 0 ||
	    (rc = sc__get_object(rd, obj, "spec", true, &spec)) < 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "spec");
	if ((rc = sc__rd_fields(rd, spec, fields)) < 0 ||
	    (rc = decode_template(rd, spec, np)) < 0 || (rc = decode_limits(rd, spec, np)) < 0 ||
	    (rc = sc__get_dur(rd, spec, "scaleDownAfter", false, &np->scale_down_after)) < 0 ||
	    (rc = sc__get_num(rd, spec, "cost", false, 0, 1e12, &np->pool.cost)) < 0 ||
	    (rc = decode_provider(rd, spec, np)) < 0)
		return rc;
	sc__rd_pop(rd, m);
	/* status is the server's (members, requests in flight): not read. */
	return sc__vec_push(&b->pools, &pool) ? oom(rd) : 0;
}

char *sc_pool_wait_text(char *buf, size_t size, const char *pool, int nodes, int64_t age)
{
	char when[48];
	if (age < 0)
		snprintf(when, sizeof(when), "to be requested");
	else
		snprintf(when, sizeof(when), "requested %lld s ago", (long long)age);
	snprintf(buf, size, "waiting for %d node%s of pool %s (%s)", nodes, nodes == 1 ? "" : "s",
	         pool, when);
	return buf;
}

/* ---- Deployment.spec.autoscaling ----------------------------------------- */

/* The targets each kind of replica may scale on: a whole replica (role
 * "both"), a prefill replica, a decode replica. The first list is also the
 * read-back order. */
static const char *const target_keys[] = {"inflightPerReplica", "queueDepth", "ttftP95", NULL};
static const char *const prefill_keys[] = {"promptTokensPerReplica", "inflightPerReplica",
                                           "ttftP95", NULL};
static const char *const decode_keys[] = {"inflightPerReplica", "tokensPerSecondPerReplica", NULL};
static const char *const all_keys[] = {
    "inflightPerReplica",        "queueDepth", "ttftP95", "promptTokensPerReplica",
    "tokensPerSecondPerReplica", NULL};

static const char *const *keys_of(const char *role)
{
	if (role && strcmp(role, "prefill") == 0)
		return prefill_keys;
	if (role && strcmp(role, "decode") == 0)
		return decode_keys;
	return target_keys;
}

static bool key_in(const char *const *keys, const char *k)
{
	for (size_t i = 0; keys[i]; i++)
		if (strcmp(keys[i], k) == 0)
			return true;
	return false;
}

/* "a, b or c" of keys, into buf. */
static const char *key_list(const char *const *keys, char *buf, size_t size)
{
	size_t n = 0, at = 0;
	while (keys[n])
		n++;
	buf[0] = '\0';
	for (size_t i = 0; i < n && at < size; i++)
		at += (size_t)snprintf(buf + at, size - at, "%s%s",
		                       i == 0       ? ""
		                       : i + 1 == n ? " or "
		                                    : ", ",
		                       keys[i]);
	return buf;
}

/* target: exactly one of the role's keys; numbers within (0, 1e6], ttftP95 a
 * duration (milliseconds kept). A target of another role names itself. */
static int decode_target(sc__rd_t *rd, json_t *as, const char *role)
{
	const char *const *keys = keys_of(role);
	json_t *t, *v;
	const char *k;
	char list[160];
	int rc = sc__get_object(rd, as, "target", true, &t), n = 0;
	double x;
	if (rc < 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "target");
	json_object_foreach(t, k, v)
	{
		if (key_in(all_keys, k) && !key_in(keys, k)) {
			sc__rd_push(rd, k);
			return sc__rd_fail(
			    rd, SC_EINVAL, "not a target of %s replicas: expected %s",
			    role ? role : "serving", key_list(keys, list, sizeof(list)));
		}
	}
	if ((rc = sc__rd_fields(rd, t, keys)) < 0)
		return rc;
	for (int i = 0; keys[i]; i++)
		n += json_object_get(t, keys[i]) != NULL;
	if (n != 1)
		return sc__rd_fail(rd, SC_EINVAL, "expected exactly one of %s",
		                   key_list(keys, list, sizeof(list)));
	for (int i = 0; keys[i]; i++)
		if (strcmp(keys[i], "ttftP95") != 0 &&
		    (rc = sc__get_num(rd, t, keys[i], false, 0.01, 1e6, &x)) < 0)
			return rc;
	json_t *ttft = json_object_get(t, "ttftP95");
	if (ttft) {
		int64_t ms = 0;
		sc__rd_push(rd, "ttftP95");
		if (!json_is_string(ttft) ||
		    sc_quantity_duration_ms(json_string_value(ttft), &ms) < 0 || ms <= 0 ||
		    ms > 3600 * 1000)
			return sc__rd_fail(rd, SC_EINVAL,
			                   "expected a duration such as 500ms or 2s (at most 1h)");
	}
	sc__rd_pop(rd, m);
	return 0;
}

/* The autoscaling object as (at the reader's position "autoscaling"):
 * limits, window and target. A role of a disaggregated Deployment keeps at
 * least one replica (min_lo 1): the gateway holds requests only for a
 * Deployment as a whole. */
static int decode_as(sc__rd_t *rd, json_t *as, const char *role, int64_t min_lo, int64_t *min)
{
	static const char *const fields[] = {"minReplicas", "maxReplicas", "target",
	                                     "scaleDownStabilization", NULL};
	int64_t max = 0, stab;
	int rc;
	*min = 1;
	if ((rc = sc__rd_fields(rd, as, fields)) < 0 ||
	    (rc = sc__get_int(rd, as, "minReplicas", false, min_lo, SC_AS_MAX_REPLICAS, min)) < 0 ||
	    (rc = sc__get_int(rd, as, "maxReplicas", true, 1, SC_AS_MAX_REPLICAS, &max)) < 0 ||
	    (rc = sc__get_dur(rd, as, "scaleDownStabilization", false, &stab)) < 0 ||
	    (rc = decode_target(rd, as, role)) < 0)
		return rc;
	if (max < *min) {
		sc__rd_push(rd, "maxReplicas");
		return sc__rd_fail(rd, SC_EINVAL, "expected at least minReplicas (%lld)",
		                   (long long)*min);
	}
	return 0;
}

int sc__decode_autoscaling(sc__rd_t *rd, json_t *spec, int64_t *min_replicas)
{
	json_t *as;
	int rc = sc__get_object(rd, spec, "autoscaling", false, &as);
	if (rc <= 0)
		return rc;
	if (json_object_get(spec, "replicas")) {
		sc__rd_push(rd, "replicas");
		return sc__rd_fail(rd, SC_EINVAL,
		                   "with autoscaling the autoscaler sets the replica count: give "
		                   "autoscaling.minReplicas instead");
	}
	if (json_object_get(spec, "disaggregation")) {
		sc__rd_push(rd, "autoscaling");
		return sc__rd_fail(rd, SC_EINVAL,
		                   "a disaggregated Deployment is autoscaled per role: give "
		                   "disaggregation.prefill.autoscaling and/or "
		                   "disaggregation.decode.autoscaling");
	}
	sc__mark_t m = sc__rd_push(rd, "autoscaling");
	if ((rc = decode_as(rd, as, NULL, 0, min_replicas)) < 0)
		return rc;
	sc__rd_pop(rd, m);
	return 1;
}

int sc__decode_role_autoscaling(sc__rd_t *rd, json_t *ro, const char *role, int64_t *min_replicas)
{
	json_t *as;
	int rc = sc__get_object(rd, ro, "autoscaling", false, &as);
	if (rc <= 0)
		return rc;
	if (json_object_get(ro, "replicas")) {
		sc__rd_push(rd, "replicas");
		return sc__rd_fail(
		    rd, SC_EINVAL,
		    "with autoscaling the autoscaler sets the %s replica count: give "
		    "autoscaling.minReplicas instead",
		    role);
	}
	sc__mark_t m = sc__rd_push(rd, "autoscaling");
	if ((rc = decode_as(rd, as, role, 1, min_replicas)) < 0)
		return rc;
	sc__rd_pop(rd, m);
	return 1;
}

/* A number field within (0, 1e6], or 0. */
static double positive(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	double x = json_is_number(v) ? json_number_value(v) : 0;
	return x >= 0.01 && x <= 1e6 ? x : 0;
}

static int int_in(json_t *o, const char *key, int lo, int hi, int dflt)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return dflt;
	return (int)json_integer_value(v);
}

/* as: an autoscaling object of a stored Deployment; role as in keys_of. */
static void read_as(json_t *as, const char *role, int min_lo, sc_autoscaling_t *out)
{
	json_t *t = json_object_get(as, "target");
	const char *const *keys = keys_of(role);
	memset(out, 0, sizeof(*out));
	if (!json_is_object(as) || !json_is_object(t))
		return;
	out->min_replicas = int_in(as, "minReplicas", min_lo, SC_AS_MAX_REPLICAS, 1);
	out->max_replicas = int_in(as, "maxReplicas", 1, SC_AS_MAX_REPLICAS, 0);
	if (out->max_replicas < out->min_replicas || out->max_replicas == 0)
		return;
	out->stabilization = SC_AS_STABILIZATION;
	const char *st = json_string_value(json_object_get(as, "scaleDownStabilization"));
	int64_t secs;
	if (st && sc_quantity_duration(st, &secs) == 0 && secs >= 0)
		out->stabilization = secs;
	else if (json_is_integer(json_object_get(as, "scaleDownStabilization")))
		out->stabilization =
		    json_integer_value(json_object_get(as, "scaleDownStabilization"));
	int64_t ms;
	const char *ttft = json_string_value(json_object_get(t, "ttftP95"));
	if (key_in(keys, "inflightPerReplica") &&
	    (out->value = positive(t, "inflightPerReplica")) > 0)
		out->target = SC_AS_INFLIGHT;
	else if (key_in(keys, "queueDepth") && (out->value = positive(t, "queueDepth")) > 0)
		out->target = SC_AS_QUEUE;
	else if (key_in(keys, "promptTokensPerReplica") &&
	         (out->value = positive(t, "promptTokensPerReplica")) > 0)
		out->target = SC_AS_PROMPT_TOKENS;
	else if (key_in(keys, "tokensPerSecondPerReplica") &&
	         (out->value = positive(t, "tokensPerSecondPerReplica")) > 0)
		out->target = SC_AS_TPS;
	else if (key_in(keys, "ttftP95") && ttft && sc_quantity_duration_ms(ttft, &ms) == 0 &&
	         ms > 0) {
		out->target = SC_AS_TTFT;
		out->value = (double)ms / 1000.0;
	}
}

void sc_deploy_autoscaling(json_t *spec, sc_autoscaling_t *out)
{
	read_as(json_object_get(spec, "autoscaling"), NULL, 0, out);
	/* The decoder refuses spec.autoscaling beside disaggregation. */
	if (json_object_get(spec, "disaggregation"))
		out->target = SC_AS_NONE;
}

void sc_deploy_role_autoscaling(json_t *spec, const char *role, sc_autoscaling_t *out)
{
	if (!role || strcmp(role, "both") == 0) {
		sc_deploy_autoscaling(spec, out);
		return;
	}
	json_t *ro = json_object_get(json_object_get(spec, "disaggregation"), role);
	read_as(json_object_get(ro, "autoscaling"), role, 1, out);
}
