/* Validation of API objects against the shapes in interface.md.
 *
 * Each kind is described by a table of fields (name, type, range, children)
 * and one walker checks a JSON document against it: unknown fields, wrong
 * types, values out of range and missing required fields are refused with
 * the dotted path of the field ("spec.tasks[0].resources.gpu"). The
 * manifest decoder of the io branch will take over semantic decoding; this
 * table stays the API's first line of defence, so a rejected request never
 * reaches the store. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "starcloud/error.h"

enum ftype {
	T_STR,   /* string */
	T_NAME,  /* string that is a valid object name */
	T_INT,   /* integer in [min, max] */
	T_NUM,   /* number in [min, max] */
	T_BOOL,
	T_QTY,   /* quantity: number >= 0 or "500m", "16Gi", ... */
	T_DUR,   /* duration: "30s", "10m", "1h" or seconds */
	T_OBJ,   /* object with known children */
	T_MAP,   /* string -> string */
	T_ASTR,  /* array of strings */
	T_AINT,  /* array of integers in [min, max] */
	T_AOBJ,  /* array of objects with known children */
	T_ENUM,  /* one of enums */
	T_MIG,   /* false | true | "dynamic" | {layout: [[profile...]...]} */
	T_RV,    /* resourceVersion: string or integer */
	T_ANYOBJ /* any object (free-form, bounded by the body limit) */
};

typedef struct field {
	const char *name;
	int type;
	int required;
	double min, max;
	const struct field *children; /* T_OBJ, T_AOBJ; ends with name NULL */
	const char *const *enums;     /* T_ENUM; ends with NULL */
} field_t;

/* Field paths longer than the buffer are cut, which is harmless in a
 * message; going through vsnprintf says so to the compiler. */
static void PATHF(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void PATHF(char *out, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out, n, fmt, ap);
	va_end(ap);
}

#define END { NULL, 0, 0, 0, 0, NULL, NULL }
#define BIG 1e15

static const char *const placement_e[] = { "binpack", "spread", NULL };
static const char *const restart_e[] = { "Always", "OnFailure", "Never", NULL };
static const char *const phase_e[] = { "Pending", "Running", "Releasing", "Succeeded", "Failed",
				       NULL };

static const field_t labels_meta[] = {
	{ "name", T_NAME, 1, 0, 0, NULL, NULL },
	{ "labels", T_MAP, 0, 0, 0, NULL, NULL },
	{ "annotations", T_MAP, 0, 0, 0, NULL, NULL },
	{ "creationTimestamp", T_STR, 0, 0, 0, NULL, NULL },
	{ "resourceVersion", T_RV, 0, 0, 0, NULL, NULL },
	{ "uid", T_STR, 0, 0, 0, NULL, NULL },
	{ "namespace", T_STR, 0, 0, 0, NULL, NULL },
	END,
};

/* ---- Node ---- */
static const field_t node_gpus[] = {
	{ "count", T_INT, 0, 0, 16, NULL, NULL },
	{ "model", T_STR, 0, 0, 0, NULL, NULL },
	{ "memory", T_QTY, 0, 0, 0, NULL, NULL },
	{ "mig", T_MIG, 0, 0, 0, NULL, NULL },
	END,
};
static const field_t node_spec[] = {
	{ "cpu", T_QTY, 0, 0, 0, NULL, NULL },
	{ "memory", T_QTY, 0, 0, 0, NULL, NULL },
	{ "gpus", T_OBJ, 0, 0, 0, node_gpus, NULL },
	{ "unschedulable", T_BOOL, 0, 0, 0, NULL, NULL },
	END,
};

/* ---- Queue ---- */
static const field_t queue_res[] = {
	{ "quota", T_NUM, 0, -1, BIG, NULL, NULL },
	{ "overQuotaWeight", T_NUM, 0, 0, BIG, NULL, NULL },
	{ "limit", T_NUM, 0, -1, BIG, NULL, NULL },
	END,
};
static const field_t queue_resources[] = {
	{ "gpu", T_OBJ, 0, 0, 0, queue_res, NULL },
	{ "cpu", T_OBJ, 0, 0, 0, queue_res, NULL },
	{ "memory", T_OBJ, 0, 0, 0, queue_res, NULL },
	END,
};
static const field_t queue_spec[] = {
	{ "parentQueue", T_NAME, 0, 0, 0, NULL, NULL },
	{ "priority", T_INT, 0, -1e9, 1e9, NULL, NULL },
	{ "preemptMinRuntime", T_DUR, 0, 0, 0, NULL, NULL },
	{ "reclaimMinRuntime", T_DUR, 0, 0, 0, NULL, NULL },
	{ "displayName", T_STR, 0, 0, 0, NULL, NULL },
	{ "resources", T_OBJ, 0, 0, 0, queue_resources, NULL },
	END,
};

/* ---- PriorityClass ---- */
static const field_t pc_spec[] = {
	{ "value", T_INT, 1, -1e9, 1e9, NULL, NULL },
	{ "preemptible", T_BOOL, 0, 0, 0, NULL, NULL },
	END,
};

/* ---- Job ---- */
static const field_t probe_http[] = {
	{ "path", T_STR, 0, 0, 0, NULL, NULL },
	{ "port", T_INT, 1, 1, 65535, NULL, NULL },
	END,
};
static const field_t probe_tcp[] = {
	{ "port", T_INT, 1, 1, 65535, NULL, NULL },
	END,
};
static const field_t probe[] = {
	{ "http", T_OBJ, 0, 0, 0, probe_http, NULL },
	{ "tcp", T_OBJ, 0, 0, 0, probe_tcp, NULL },
	{ "periodSeconds", T_INT, 0, 1, 86400, NULL, NULL },
	{ "failureThreshold", T_INT, 0, 1, 10000, NULL, NULL },
	{ "successThreshold", T_INT, 0, 1, 10000, NULL, NULL },
	{ "initialDelaySeconds", T_INT, 0, 0, 86400, NULL, NULL },
	{ "timeoutSeconds", T_INT, 0, 1, 86400, NULL, NULL },
	END,
};
static const field_t probes[] = {
	{ "liveness", T_OBJ, 0, 0, 0, probe, NULL },
	{ "readiness", T_OBJ, 0, 0, 0, probe, NULL },
	{ "startup", T_OBJ, 0, 0, 0, probe, NULL },
	END,
};
static const field_t resources[] = {
	{ "cpu", T_QTY, 0, 0, 0, NULL, NULL },
	{ "memory", T_QTY, 0, 0, 0, NULL, NULL },
	{ "gpu", T_INT, 0, 0, 16, NULL, NULL },
	{ "gpuFraction", T_NUM, 0, 0.001, 0.999, NULL, NULL },
	{ "gpuMemory", T_QTY, 0, 0, 0, NULL, NULL },
	{ "mig", T_STR, 0, 0, 0, NULL, NULL },
	{ "gpuModels", T_ASTR, 0, 0, 0, NULL, NULL },
	END,
};
static const field_t task[] = {
	{ "name", T_NAME, 1, 0, 0, NULL, NULL },
	{ "replicas", T_INT, 0, 0, 10000, NULL, NULL },
	{ "command", T_ASTR, 0, 0, 0, NULL, NULL },
	{ "env", T_MAP, 0, 0, 0, NULL, NULL },
	{ "resources", T_OBJ, 0, 0, 0, resources, NULL },
	{ "nodeSelector", T_MAP, 0, 0, 0, NULL, NULL },
	{ "probes", T_OBJ, 0, 0, 0, probes, NULL },
	END,
};
static const field_t topology[] = {
	{ "required", T_STR, 0, 0, 0, NULL, NULL },
	{ "preferred", T_STR, 0, 0, 0, NULL, NULL },
	END,
};
static const field_t job_spec[] = {
	{ "queue", T_NAME, 1, 0, 0, NULL, NULL },
	{ "priorityClass", T_NAME, 0, 0, 0, NULL, NULL },
	{ "preemptible", T_BOOL, 0, 0, 0, NULL, NULL },
	{ "minMember", T_INT, 0, 0, 100000, NULL, NULL },
	{ "placement", T_ENUM, 0, 0, 0, NULL, placement_e },
	{ "spreadFactor", T_INT, 0, 0, 10000, NULL, NULL },
	{ "topology", T_OBJ, 0, 0, 0, topology, NULL },
	{ "restartPolicy", T_ENUM, 0, 0, 0, NULL, restart_e },
	{ "expectedRuntime", T_DUR, 0, 0, 0, NULL, NULL },
	{ "stalenessGracePeriod", T_DUR, 0, 0, 0, NULL, NULL },
	{ "tasks", T_AOBJ, 1, 1, 1000, task, NULL },
	END,
};
static const field_t pod_mig[] = {
	{ "gpu", T_INT, 0, 0, 15, NULL, NULL },
	{ "profile", T_STR, 0, 0, 0, NULL, NULL },
	{ "start", T_INT, 0, 0, 7, NULL, NULL },
	END,
};
static const field_t pod_status[] = {
	{ "name", T_STR, 1, 0, 0, NULL, NULL },
	{ "phase", T_ENUM, 1, 0, 0, NULL, phase_e },
	{ "node", T_NAME, 0, 0, 0, NULL, NULL },
	{ "gpus", T_AINT, 0, 0, 15, NULL, NULL },
	{ "gpuShare", T_INT, 0, 1, 999, NULL, NULL },
	{ "gpuMemory", T_QTY, 0, 0, 0, NULL, NULL },
	{ "mig", T_OBJ, 0, 0, 0, pod_mig, NULL },
	{ "startedAt", T_STR, 0, 0, 0, NULL, NULL },
	{ "pipelined", T_BOOL, 0, 0, 0, NULL, NULL },
	END,
};
static const field_t job_status[] = {
	{ "pods", T_AOBJ, 0, 0, 100000, pod_status, NULL },
	{ "staleSince", T_STR, 0, 0, 0, NULL, NULL },
	{ "phase", T_STR, 0, 0, 0, NULL, NULL },
	{ "reason", T_STR, 0, 0, 0, NULL, NULL },
	{ "scheduledAt", T_STR, 0, 0, 0, NULL, NULL },
	END,
};

/* ---- Deployment ---- */
static const field_t template[] = {
	{ "command", T_ASTR, 0, 0, 0, NULL, NULL },
	{ "env", T_MAP, 0, 0, 0, NULL, NULL },
	{ "resources", T_OBJ, 0, 0, 0, resources, NULL },
	{ "nodeSelector", T_MAP, 0, 0, 0, NULL, NULL },
	{ "probes", T_OBJ, 0, 0, 0, probes, NULL },
	END,
};
static const field_t rollout[] = {
	{ "steps", T_AINT, 0, 0, 100, NULL, NULL },
	{ "analysisWindow", T_DUR, 0, 0, 0, NULL, NULL },
	{ "maxErrorRate", T_NUM, 0, 0, 1, NULL, NULL },
	END,
};
static const field_t role[] = {
	{ "replicas", T_INT, 0, 0, 10000, NULL, NULL },
	{ "template", T_OBJ, 0, 0, 0, template, NULL },
	END,
};
static const field_t disagg[] = {
	{ "prefill", T_OBJ, 0, 0, 0, role, NULL },
	{ "decode", T_OBJ, 0, 0, 0, role, NULL },
	END,
};
static const field_t deploy_spec[] = {
	{ "queue", T_NAME, 1, 0, 0, NULL, NULL },
	{ "model", T_STR, 0, 0, 0, NULL, NULL },
	{ "version", T_STR, 0, 0, 0, NULL, NULL },
	{ "replicas", T_INT, 0, 0, 10000, NULL, NULL },
	{ "priorityClass", T_NAME, 0, 0, 0, NULL, NULL },
	{ "template", T_OBJ, 0, 0, 0, template, NULL },
	{ "rollout", T_OBJ, 0, 0, 0, rollout, NULL },
	{ "disaggregation", T_OBJ, 0, 0, 0, disagg, NULL },
	END,
};

/* ---- top level, per kind ---- */
#define TOP(spec_t, spec_req, status_f, status_t)                                              \
	{                                                                                      \
		{ "apiVersion", T_STR, 1, 0, 0, NULL, NULL },                                  \
		{ "kind", T_STR, 1, 0, 0, NULL, NULL },                                        \
		{ "metadata", T_OBJ, 1, 0, 0, labels_meta, NULL },                             \
		{ "spec", T_OBJ, spec_req, 0, 0, spec_t, NULL },                               \
		{ "status", status_f, 0, 0, 0, status_t, NULL }, END,                          \
	}

static const field_t node_top[] = TOP(node_spec, 0, T_ANYOBJ, NULL);
static const field_t queue_top[] = TOP(queue_spec, 0, T_ANYOBJ, NULL);
static const field_t pc_top[] = TOP(pc_spec, 1, T_ANYOBJ, NULL);
static const field_t job_top[] = TOP(job_spec, 1, T_OBJ, job_status);
static const field_t deploy_top[] = TOP(deploy_spec, 1, T_ANYOBJ, NULL);

typedef struct vctx {
	char *field;
	size_t fieldsz;
	char *msg;
	size_t msgsz;
} vctx_t;

static int fail(vctx_t *v, const char *path, const char *fmt, const char *detail)
{
	snprintf(v->field, v->fieldsz, "%s", path);
	char m[256];
	snprintf(m, sizeof(m), fmt, detail);
	snprintf(v->msg, v->msgsz, "%s: %s", path, m);
	return SC_EINVAL;
}

static const char *type_name(json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

/* Lower-case letters, digits, '-' and '.', starting and ending with a
 * letter or digit (Kubernetes' DNS subdomain rule); keeps names safe in
 * keys and URLs. */
int sc__name_valid(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > SC_MAX_NAME)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && !((c == '-' || c == '.') && i > 0 && i + 1 < n))
			return 0;
	}
	return 1;
}

/* Quantity: digits with an optional fraction and a Kubernetes suffix. */
static int qty_valid(const char *s)
{
	static const char *const sfx[] = { "", "m", "k", "K", "M", "G", "T", "P", "Ki", "Mi",
					   "Gi", "Ti", "Pi", NULL };
	char *end;
	double v = strtod(s, &end);
	if (end == s || !isfinite(v) || v < 0 || isspace((unsigned char)*s))
		return 0;
	for (size_t i = 0; sfx[i]; i++)
		if (strcmp(end, sfx[i]) == 0)
			return 1;
	return 0;
}

/* Duration: one or more <number><s|m|h|d> groups ("90s", "1h30m"). */
static int dur_valid(const char *s)
{
	if (!*s)
		return 0;
	while (*s) {
		char *end;
		double v = strtod(s, &end);
		if (end == s || v < 0 || !isfinite(v) || !strchr("smhd", *end) || !*end)
			return 0;
		s = end + 1;
	}
	return 1;
}

static int check_value(vctx_t *v, const field_t *f, json_t *j, const char *path);

static int check_object(vctx_t *v, const field_t *fields, json_t *obj, const char *path)
{
	char sub[512];
	const char *key;
	json_t *val;
	if (!json_is_object(obj))
		return fail(v, path[0] ? path : "(document)", "expected an object, got %s",
			    type_name(obj));
	json_object_foreach(obj, key, val) {
		const field_t *f = fields;
		while (f->name && strcmp(f->name, key) != 0)
			f++;
		PATHF(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "", key);
		if (!f->name)
			return fail(v, sub, "unknown field%s", "");
		int rc = check_value(v, f, val, sub);
		if (rc < 0)
			return rc;
	}
	for (const field_t *f = fields; f->name; f++) {
		if (f->required && !json_object_get(obj, f->name)) {
			PATHF(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "", f->name);
			return fail(v, sub, "required field is missing%s", "");
		}
	}
	return 0;
}

static int check_range(vctx_t *v, const field_t *f, double x, const char *path)
{
	if (x < f->min || x > f->max) {
		char d[96];
		snprintf(d, sizeof(d), "%g is out of range [%g, %g]", x, f->min, f->max);
		return fail(v, path, "%s", d);
	}
	return 0;
}

static int check_array(vctx_t *v, const field_t *f, json_t *j, const char *path)
{
	char sub[512];
	size_t i;
	json_t *el;
	if (!json_is_array(j))
		return fail(v, path, "expected an array, got %s", type_name(j));
	if (f->type == T_AOBJ && f->required && json_array_size(j) < (size_t)f->min)
		return fail(v, path, "must have at least one entry%s", "");
	json_array_foreach(j, i, el) {
		PATHF(sub, sizeof(sub), "%s[%zu]", path, i);
		int rc = 0;
		if (f->type == T_ASTR && !json_is_string(el))
			rc = fail(v, sub, "expected a string, got %s", type_name(el));
		else if (f->type == T_AINT && !json_is_integer(el))
			rc = fail(v, sub, "expected an integer, got %s", type_name(el));
		else if (f->type == T_AINT)
			rc = check_range(v, f, (double)json_integer_value(el), sub);
		else if (f->type == T_AOBJ)
			rc = check_object(v, f->children, el, sub);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int check_map(vctx_t *v, json_t *j, const char *path)
{
	const char *key;
	json_t *val;
	char sub[512];
	if (!json_is_object(j))
		return fail(v, path, "expected an object of strings, got %s", type_name(j));
	json_object_foreach(j, key, val) {
		PATHF(sub, sizeof(sub), "%s.%s", path, key);
		if (!json_is_string(val))
			return fail(v, sub, "expected a string, got %s", type_name(val));
		if (strlen(key) == 0 || strlen(key) > 253 || strchr(key, ',') || strchr(key, '='))
			return fail(v, sub, "invalid key%s", "");
	}
	return 0;
}

static int check_mig(vctx_t *v, json_t *j, const char *path)
{
	if (json_is_boolean(j))
		return 0;
	if (json_is_string(j))
		return strcmp(json_string_value(j), "dynamic") == 0
			       ? 0
			       : fail(v, path, "expected false, \"dynamic\" or {layout: ...}%s", "");
	if (!json_is_object(j))
		return fail(v, path, "expected false, \"dynamic\" or {layout: ...}, got %s",
			    type_name(j));
	json_t *layout = json_object_get(j, "layout");
	if (json_object_size(j) != 1 || !json_is_array(layout))
		return fail(v, path, "expected {layout: [[profile, ...], ...]}%s", "");
	size_t i, k;
	json_t *dev, *p;
	json_array_foreach(layout, i, dev) {
		if (!json_is_array(dev))
			return fail(v, path, "layout entries must be arrays of profiles%s", "");
		json_array_foreach(dev, k, p) if (!json_is_string(p)) return fail(
			v, path, "layout profiles must be strings%s", "");
	}
	return 0;
}

static int check_value(vctx_t *v, const field_t *f, json_t *j, const char *path)
{
	switch (f->type) {
	case T_STR:
	case T_NAME:
		if (!json_is_string(j))
			return fail(v, path, "expected a string, got %s", type_name(j));
		if (f->type == T_NAME && !sc__name_valid(json_string_value(j)))
			return fail(v, path,
				    "invalid name \"%s\": use lower-case letters, digits, '-' "
				    "and '.', at most 253 characters",
				    json_string_value(j));
		return 0;
	case T_INT:
		if (!json_is_integer(j))
			return fail(v, path, "expected an integer, got %s", type_name(j));
		return check_range(v, f, (double)json_integer_value(j), path);
	case T_NUM:
		if (!json_is_number(j))
			return fail(v, path, "expected a number, got %s", type_name(j));
		return check_range(v, f, json_number_value(j), path);
	case T_BOOL:
		return json_is_boolean(j) ? 0
					  : fail(v, path, "expected a boolean, got %s", type_name(j));
	case T_QTY:
		if (json_is_number(j))
			return json_number_value(j) >= 0
				       ? 0
				       : fail(v, path, "quantity must not be negative%s", "");
		if (!json_is_string(j) || !qty_valid(json_string_value(j)))
			return fail(v, path, "expected a quantity such as 8, \"500m\" or \"16Gi\"%s",
				    "");
		return 0;
	case T_DUR:
		if (json_is_integer(j) && json_integer_value(j) >= 0)
			return 0;
		if (!json_is_string(j) || !dur_valid(json_string_value(j)))
			return fail(v, path, "expected a duration such as \"30s\", \"10m\" or \"1h\"%s",
				    "");
		return 0;
	case T_OBJ:
		return check_object(v, f->children, j, path);
	case T_MAP:
		return check_map(v, j, path);
	case T_ASTR:
	case T_AINT:
	case T_AOBJ:
		return check_array(v, f, j, path);
	case T_ENUM:
		if (json_is_string(j))
			for (size_t i = 0; f->enums[i]; i++)
				if (strcmp(f->enums[i], json_string_value(j)) == 0)
					return 0;
	{
		char list[160] = "";
		for (size_t i = 0; f->enums[i]; i++) {
			size_t n = strlen(list);
			snprintf(list + n, sizeof(list) - n, "%s%s", i ? ", " : "", f->enums[i]);
		}
		return fail(v, path, "expected one of %s", list);
	}
	case T_MIG:
		return check_mig(v, j, path);
	case T_RV:
		return json_is_string(j) || json_is_integer(j)
			       ? 0
			       : fail(v, path, "expected a string, got %s", type_name(j));
	case T_ANYOBJ:
		return json_is_object(j) ? 0
					 : fail(v, path, "expected an object, got %s", type_name(j));
	}
	return 0;
}

/* Checks apiVersion/kind against the path's kind before the walk, so the
 * message says "wrong kind" rather than something deeper. */
static int check_kind(vctx_t *v, const sc_kind_t *k, json_t *obj)
{
	json_t *av = json_object_get(obj, "apiVersion");
	json_t *kind = json_object_get(obj, "kind");
	if (av && json_is_string(av)) {
		const char *s = json_string_value(av);
		int kai = strcmp(s, "scheduling.run.ai/v2") == 0 && strcmp(k->kind, "Queue") == 0;
		if (strcmp(s, "starcloud.dev/v1") != 0 && !kai)
			return fail(v, "apiVersion", "unsupported apiVersion \"%s\"", s);
	}
	if (kind && json_is_string(kind) && strcmp(json_string_value(kind), k->kind) != 0) {
		char d[160];
		snprintf(d, sizeof(d), "kind \"%.64s\" does not match this path (expected %s)",
			 json_string_value(kind), k->kind);
		return fail(v, "kind", "%s", d);
	}
	return 0;
}

int sc__validate_object(const sc_kind_t *k, json_t *obj, char *field, size_t fieldsz, char *msg,
			size_t msgsz)
{
	vctx_t v = { field, fieldsz, msg, msgsz };
	const field_t *top = NULL;
	if (strcmp(k->kind, "Node") == 0)
		top = node_top;
	else if (strcmp(k->kind, "Queue") == 0)
		top = queue_top;
	else if (strcmp(k->kind, "PriorityClass") == 0)
		top = pc_top;
	else if (strcmp(k->kind, "Job") == 0)
		top = job_top;
	else if (strcmp(k->kind, "Deployment") == 0)
		top = deploy_top;
	else
		return fail(&v, "kind", "objects of kind %s cannot be written", k->kind);
	if (!json_is_object(obj))
		return fail(&v, "(document)", "expected a JSON object, got %s", type_name(obj));
	int rc = check_kind(&v, k, obj);
	if (rc < 0)
		return rc;
	return check_object(&v, top, obj, "");
}
