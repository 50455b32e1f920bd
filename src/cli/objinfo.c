/* What the CLI reads out of API objects (see objinfo.h). */
#include "cli/objinfo.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/parse.h"
#include "base/quantity.h"
#include "cli/table.h"

const char *sc_obj_str(json_t *obj, const char *a, const char *b, const char *c)
{
	json_t *v = json_object_get(obj, a);
	if (b)
		v = json_object_get(v, b);
	if (b && c)
		v = json_object_get(v, c);
	return json_is_string(v) ? json_string_value(v) : "";
}

const char *sc_str_or(const char *s, const char *dflt)
{
	return s && s[0] ? s : dflt;
}

double sc_obj_age(json_t *obj, const char *at, int64_t now)
{
	int64_t t;
	const char *ts = at ? at : sc_obj_str(obj, "metadata", "creationTimestamp", NULL);
	if (!ts[0] || sc_quantity_time(ts, &t) < 0 || t > now + 60)
		return -1;
	return t > now ? 0 : (double)(now - t);
}

int sc_pod_holds(json_t *pod)
{
	const char *ph = sc_obj_str(pod, "phase", NULL, NULL);
	return strcmp(ph, "Running") == 0 || strcmp(ph, "Releasing") == 0 ||
	       strcmp(ph, "Pipelined") == 0;
}

static int has_phase(json_t *pod, const char *phase)
{
	if (!phase)
		return sc_pod_holds(pod);
	return strcmp(sc_obj_str(pod, "phase", NULL, NULL), phase) == 0;
}

long sc_job_pods(json_t *job, const char *phase)
{
	json_t *p;
	size_t i;
	long n = 0;
	json_array_foreach(json_object_get(json_object_get(job, "status"), "pods"), i, p)
	{
		n += has_phase(p, phase);
	}
	return n;
}

const char *sc_job_status(json_t *job)
{
	const char *ph = sc_obj_str(job, "status", "phase", NULL);
	if (!ph[0])
		return "Pending";
	if (strcmp(ph, "Running") == 0 && sc_job_pods(job, "Releasing") > 0 &&
	    sc_job_pods(job, "Running") == 0)
		return "Releasing";
	return ph;
}

long sc_job_replicas(json_t *job)
{
	json_t *spec = json_object_get(job, "spec"), *t;
	json_t *tasks = json_object_get(spec, "tasks");
	size_t i;
	long n = 0;
	if (!tasks) { /* a deployment */
		json_t *r = json_object_get(spec, "replicas");
		return r ? (long)json_integer_value(r) : 1;
	}
	json_array_foreach(tasks, i, t)
	{
		json_t *r = json_object_get(t, "replicas");
		n += r ? (long)json_integer_value(r) : 1;
	}
	return n;
}

double sc_pod_gpus(json_t *pod, double dev_mem)
{
	json_t *mig = json_object_get(pod, "mig"), *share = json_object_get(pod, "gpuShare");
	json_t *gmem = json_object_get(pod, "gpuMemory");
	size_t n = json_array_size(json_object_get(pod, "gpus"));
	if (json_is_object(mig)) {
		const char *prof = sc_obj_str(mig, "profile", NULL, NULL);
		uint64_t g = 0; /* "3g.40gb": the slices before the 'g' */
		if (sc_parse_digits(&prof, 7, &g) < 0)
			return 0;
		return g > 0 && g <= 7 ? (double)g / 7.0 : 0;
	}
	if (json_is_number(share))
		return json_number_value(share) / 1000.0 * (double)(n ? n : 1);
	if (gmem && !json_is_null(gmem)) {
		double b = sc_qty_mem(gmem, 0);
		return dev_mem > 0 && b > 0 ? fmin(1.0, b / dev_mem) : 0;
	}
	return (double)n;
}

double sc_job_gpus(json_t *job, double dev_mem)
{
	json_t *p;
	size_t i;
	double g = 0;
	json_array_foreach(json_object_get(json_object_get(job, "status"), "pods"), i, p)
	{
		if (sc_pod_holds(p))
			g += sc_pod_gpus(p, dev_mem);
	}
	return g;
}

json_t *sc_pod_task(json_t *job, const char *pod)
{
	json_t *spec = json_object_get(job, "spec"), *t;
	json_t *tasks = json_object_get(spec, "tasks");
	const char *jn = sc_obj_str(job, "metadata", "name", NULL);
	size_t i, jl = strlen(jn);
	if (!tasks)
		return json_object_get(spec, "template");
	if (strncmp(pod, jn, jl) != 0 || pod[jl] != '-')
		return NULL;
	json_array_foreach(tasks, i, t)
	{
		const char *tn = sc_obj_str(t, "name", NULL, NULL);
		size_t tl = strlen(tn);
		if (tl && strncmp(pod + jl + 1, tn, tl) == 0 && pod[jl + 1 + tl] == '-')
			return t;
	}
	return json_array_size(tasks) == 1 ? json_array_get(tasks, 0) : NULL;
}

void sc_task_cpu_mem(json_t *task, int64_t *cpu_milli, int64_t *mem)
{
	json_t *res = json_object_get(task, "resources");
	double c = sc_qty_cpu(json_object_get(res, "cpu"), 0);
	double m = sc_qty_mem(json_object_get(res, "memory"), 0);
	*cpu_milli = c > 0 ? (int64_t)llround(c * 1000) : 0;
	*mem = m > 0 ? (int64_t)m : 0;
}

void sc_node_status(json_t *node, char *out, size_t outsz)
{
	json_t *ready = json_object_get(json_object_get(node, "status"), "ready");
	int cordoned =
	    json_is_true(json_object_get(json_object_get(node, "spec"), "unschedulable"));
	snprintf(out, outsz, "%s%s", json_is_false(ready) ? "NotReady" : "Ready",
	         cordoned ? ",SchedulingDisabled" : "");
}

double sc_node_gpu_mem(json_t *node)
{
	double m = sc_qty_mem(
	    json_object_get(json_object_get(json_object_get(node, "spec"), "gpus"), "memory"), 0);
	return m > 0 ? m : 0;
}

void sc_obj_labels(json_t *obj, char *out, size_t outsz)
{
	json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels"), *v;
	const char *k;
	size_t n = 0;
	out[0] = '\0';
	json_object_foreach(labels, k, v)
	{
		if (n < outsz)
			n += (size_t)snprintf(out + n, outsz - n, "%s%s=%s", n ? "," : "", k,
			                      json_is_string(v) ? json_string_value(v) : "");
	}
	if (!out[0])
		snprintf(out, outsz, "<none>");
}

static double qty(json_t *v, int mem, int kai)
{
	int64_t x;
	if (json_is_number(v)) {
		double d = json_number_value(v);
		return kai ? (mem ? d * 1e6 : d / 1000.0) : d;
	}
	if (!json_is_string(v))
		return -1;
	const char *s = json_string_value(v);
	if (mem ? sc_quantity_memory(s, SC_QTY_NEGATIVE, &x) < 0
	        : sc_quantity_cpu(s, SC_QTY_NEGATIVE, &x) < 0)
		return -1;
	return mem ? (double)x : (double)x / 1000.0;
}

double sc_qty_cpu(json_t *v, int kai)
{
	return qty(v, 0, kai);
}

double sc_qty_mem(json_t *v, int kai)
{
	return qty(v, 1, kai);
}

void sc_fmt_bytes(char *out, size_t outsz, double bytes)
{
	static const char *const units[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi"};
	int u = 0;
	if (!(bytes >= 0)) {
		snprintf(out, outsz, "-");
		return;
	}
	while (bytes >= 1024 && u < 5) {
		bytes /= 1024;
		u++;
	}
	if (bytes == floor(bytes))
		snprintf(out, outsz, "%.0f%s", bytes, units[u]);
	else
		snprintf(out, outsz, "%.1f%s", bytes, units[u]);
}

void sc_fmt_res(char *out, size_t outsz, json_t *r, const char *res, int bytes)
{
	json_t *v = json_object_get(r, res);
	if (!v || json_is_null(v))
		snprintf(out, outsz, "-");
	else if (bytes)
		sc_fmt_bytes(out, outsz, json_number_value(v));
	else
		sc_fmt_num(out, outsz, json_number_value(v), 0);
}
