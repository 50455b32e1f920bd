/* `starcloud describe` and `explain`: human summaries (see describe.h).
 *
 * A description is "Label:  value" lines, then tables under headings, as
 * kubectl describe prints them. Every figure is read from what the server
 * returned; a field the server does not have is "<none>", never guessed. */
#include "cli/describe.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/version.h"
#include "cli/client_print.h"
#include "cli/objinfo.h"
#include "cli/table.h"

#define LABEL_W 15

static void field(const char *label, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void field(const char *label, const char *fmt, ...)
{
	char v[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	int pad = LABEL_W - (int)strlen(label);
	printf("%s:%*s%s\n", label, pad < 1 ? 1 : pad, "", v[0] ? v : "<none>");
}

/* Prints a table indented under a heading, or "<none>" beside it. */
static void section(const char *title, sc_table_t *t)
{
	if (!sc_table_rows(t)) {
		field(title, "<none>");
		return;
	}
	printf("%s:\n", title);
	sc_table_margin(t, 2);
	sc_table_print(t, stdout, 0);
}

static json_t *fetch(sc_cli_get_fn get, void *ud, const char *path)
{
	json_t *doc = NULL;
	long st = get(ud, path, &doc);
	if (st == 200)
		return doc;
	json_decref(doc);
	return NULL;
}

static void created(json_t *o, int64_t now)
{
	char ag[32];
	sc_fmt_age(ag, sizeof(ag), sc_obj_age(o, NULL, now));
	field("Created", "%s (%s ago)", sc_obj_str(o, "metadata", "creationTimestamp", NULL), ag);
}

static void labels(json_t *o)
{
	char l[1024];
	sc_obj_labels(o, l, sizeof(l));
	field("Labels", "%s", l);
}

/* ---- events --------------------------------------------------------- */

static int by_time(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	int c = strcmp(sc_obj_str(x, "lastTimestamp", NULL, NULL),
	               sc_obj_str(y, "lastTimestamp", NULL, NULL));
	if (c)
		return c;
	return strcmp(sc_obj_str(x, "metadata", "name", NULL),
	              sc_obj_str(y, "metadata", "name", NULL));
}

/* Events whose object is kind/name, oldest first (the last 20). */
static void events(sc_cli_get_fn get, void *ud, const char *kind, const char *name, int64_t now)
{
	json_t *doc = fetch(get, ud, "/api/v1/events"), *e;
	size_t i, n = 0;
	json_t **v = sc_xcalloc(json_array_size(json_object_get(doc, "items")) + 1, sizeof(*v));
	json_array_foreach(json_object_get(doc, "items"), i, e)
	{
		if (strcmp(sc_obj_str(e, "involvedObject", "name", NULL), name) == 0 &&
		    strcmp(sc_obj_str(e, "involvedObject", "kind", NULL), kind) == 0)
			v[n++] = e;
	}
	qsort(v, n, sizeof(*v), by_time);
	sc_table_t *t =
	    sc_table_new(4, (const char *const[]){"LAST SEEN", "TYPE", "REASON", "MESSAGE"});
	for (size_t k = n > 20 ? n - 20 : 0; k < n; k++) {
		char ag[32];
		sc_fmt_age(ag, sizeof(ag),
		           sc_obj_age(v[k], sc_obj_str(v[k], "lastTimestamp", NULL, NULL), now));
		sc_table_addf(t, 0, "%s\t%s\t%s\t%s", ag, sc_obj_str(v[k], "type", NULL, NULL),
		              sc_obj_str(v[k], "reason", NULL, NULL),
		              sc_obj_str(v[k], "message", NULL, NULL));
	}
	if (!doc)
		field("Events", "<cannot be read with this token>");
	else
		section("Events", t);
	sc_table_free(t);
	free(v);
	json_decref(doc);
}

/* ---- a pod's GPUs ----------------------------------------------------- */

/* "0,1", "2 (500m)", "0: 3g.20gb", "-". */
static void pod_gpu_text(json_t *p, char *out, size_t outsz)
{
	json_t *mig = json_object_get(p, "mig"), *g, *share = json_object_get(p, "gpuShare");
	size_t i, n = 0;
	out[0] = '\0';
	if (json_is_object(mig)) {
		snprintf(out, outsz, "%lld: %s",
		         (long long)json_integer_value(json_object_get(mig, "gpu")),
		         sc_obj_str(mig, "profile", NULL, NULL));
		return;
	}
	json_array_foreach(json_object_get(p, "gpus"), i, g)
	{
		if (n < outsz)
			n += (size_t)snprintf(out + n, outsz - n, "%s%lld", i ? "," : "",
			                      (long long)json_integer_value(g));
	}
	if (json_is_number(share) && n < outsz)
		snprintf(out + n, outsz - n, " (%lldm)", (long long)json_number_value(share));
	if (!out[0])
		snprintf(out, outsz, "-");
}

/* What one replica asks of GPUs, as written: "2", "0.5 share", "20Gi of
 * one", "MIG 1g.10gb", "-". */
static void task_gpu_text(json_t *task, char *out, size_t outsz)
{
	json_t *r = json_object_get(task, "resources"), *v;
	char b[64];
	if ((v = json_object_get(r, "gpu")) && json_is_number(v))
		sc_fmt_num(out, outsz, json_number_value(v), 0);
	else if ((v = json_object_get(r, "gpuFraction")) && json_is_number(v)) {
		sc_fmt_num(b, sizeof(b), json_number_value(v), 0);
		snprintf(out, outsz, "%.32s of one", b);
	} else if ((v = json_object_get(r, "gpuMemory")))
		snprintf(out, outsz, "%s of one", json_is_string(v) ? json_string_value(v) : "?");
	else if ((v = json_object_get(r, "mig")) && json_is_string(v))
		snprintf(out, outsz, "MIG %s", json_string_value(v));
	else
		snprintf(out, outsz, "-");
}

static void command_text(json_t *task, char *out, size_t outsz)
{
	json_t *v;
	size_t i, n = 0;
	out[0] = '\0';
	json_array_foreach(json_object_get(task, "command"), i, v)
	{
		if (n < outsz)
			n += (size_t)snprintf(out + n, outsz - n, "%s%s", i ? " " : "",
			                      json_is_string(v) ? json_string_value(v) : "?");
	}
	if (n >= 60 && outsz > 64)
		snprintf(out + 57, outsz - 57, "...");
}

/* ---- nodes ------------------------------------------------------------ */

typedef struct dev_use {
	int whole;
	int milli;  /* shares */
	int slices; /* MIG compute slices of 7 */
	char pods[512];
} dev_use_t;

static void add_pod_name(dev_use_t *d, const char *pod, const char *extra)
{
	size_t n = strlen(d->pods);
	if (n < sizeof(d->pods))
		snprintf(d->pods + n, sizeof(d->pods) - n, "%s%s%s", n ? ", " : "", pod, extra);
}

/* Accounts one pod on the node: its devices and the pods table. */
static void node_pod(json_t *owner, const char *kind, json_t *p, double dev_mem, dev_use_t *dev,
                     int ndev, sc_table_t *pods, double *gpus, int64_t *cpu, int64_t *mem,
                     int64_t now)
{
	const char *pod = sc_obj_str(p, "name", NULL, NULL);
	json_t *mig = json_object_get(p, "mig"), *share = json_object_get(p, "gpuShare"), *g;
	int64_t c = 0, m = 0;
	size_t i;
	char gt[64], ct[32], mt[32], ag[32], extra[64];
	sc_task_cpu_mem(sc_pod_task(owner, pod), &c, &m);
	*cpu += c;
	*mem += m;
	*gpus += sc_pod_gpus(p, dev_mem);
	if (json_is_object(mig)) {
		long d = (long)json_integer_value(json_object_get(mig, "gpu"));
		const char *prof = sc_obj_str(mig, "profile", NULL, NULL);
		if (d >= 0 && d < ndev) {
			dev[d].slices += prof[0] >= '1' && prof[0] <= '7' ? prof[0] - '0' : 1;
			snprintf(extra, sizeof(extra), " (%s)", prof);
			add_pod_name(&dev[d], pod, extra);
		}
	} else {
		json_array_foreach(json_object_get(p, "gpus"), i, g)
		{
			long d = (long)json_integer_value(g);
			if (d < 0 || d >= ndev)
				continue;
			if (json_is_number(share)) {
				dev[d].milli += (int)json_number_value(share);
				snprintf(extra, sizeof(extra), " (%lldm)",
				         (long long)json_number_value(share));
			} else if (json_object_get(p, "gpuMemory")) {
				dev[d].milli += (int)(1000 * sc_pod_gpus(p, dev_mem));
				snprintf(extra, sizeof(extra), " (memory share)");
			} else {
				dev[d].whole = 1;
				extra[0] = '\0';
			}
			add_pod_name(&dev[d], pod, extra);
		}
	}
	pod_gpu_text(p, gt, sizeof(gt));
	sc_fmt_num(ct, sizeof(ct), (double)c / 1000.0, 0);
	sc_fmt_bytes(mt, sizeof(mt), (double)m);
	sc_fmt_age(ag, sizeof(ag), sc_obj_age(p, sc_obj_str(p, "startedAt", NULL, NULL), now));
	sc_table_addf(pods, 0, "%s\t%s/%s\t%s\t%s\t%s\t%s\t%s\t%s", pod, kind,
	              sc_obj_str(owner, "metadata", "name", NULL),
	              sc_obj_str(owner, "spec", "queue", NULL), sc_obj_str(p, "phase", NULL, NULL),
	              gt, ct, mt, ag);
}

static void pct_field(char *out, size_t outsz, double used, double cap, int bytes)
{
	char u[32], c[32];
	if (bytes) {
		sc_fmt_bytes(u, sizeof(u), used);
		sc_fmt_bytes(c, sizeof(c), cap);
	} else {
		sc_fmt_num(u, sizeof(u), used, 0);
		sc_fmt_num(c, sizeof(c), cap, 0);
	}
	if (cap > 0)
		snprintf(out, outsz, "%s of %s (%.0f%%)", u, c, 100.0 * used / cap);
	else
		snprintf(out, outsz, "%s of %s", u, c);
}

/* describe_node's pods: those of jobs and deployments holding resources
 * on node name (running, releasing, or pipelined onto it), added to pods
 * and summed into dev, gpus, cpu and mem. 0 when a list could not be read
 * (a tenant's token sees only its queues): the sums are then partial. */
static int node_pods(sc_cli_get_fn get, void *ud, const char *name, double dev_mem, dev_use_t *dev,
                     int ndev, sc_table_t *pods, double *gpus, int64_t *cpu, int64_t *mem,
                     int64_t now)
{
	static const char *const owners[][2] = {{"/api/v1/jobs", "job"},
	                                        {"/api/v1/deployments", "deployment"}};
	int visible = 1;
	for (size_t k = 0; k < 2; k++) {
		json_t *doc = fetch(get, ud, owners[k][0]), *o, *p;
		size_t i, j;
		visible &= doc != NULL;
		json_array_foreach(json_object_get(doc, "items"), i, o)
		{
			json_array_foreach(json_object_get(json_object_get(o, "status"), "pods"), j,
			                   p)
			{
				if (strcmp(sc_obj_str(p, "node", NULL, NULL), name) == 0 &&
				    sc_pod_holds(p))
					node_pod(o, owners[k][1], p, dev_mem, dev, ndev, pods, gpus,
					         cpu, mem, now);
			}
		}
		json_decref(doc);
	}
	return visible;
}

/* One row a device: whole, its MIG slices, its shared fraction, or free. */
static sc_table_t *devices_table(const dev_use_t *dev, int ndev)
{
	sc_table_t *devs = sc_table_new(3, (const char *const[]){"GPU", "IN USE", "PODS", NULL});
	for (int d = 0; d < ndev; d++) {
		char use[32];
		if (dev[d].whole)
			snprintf(use, sizeof(use), "whole");
		else if (dev[d].slices)
			snprintf(use, sizeof(use), "MIG %d/7", dev[d].slices);
		else if (dev[d].milli)
			snprintf(use, sizeof(use), "shared %d%%", (dev[d].milli + 5) / 10);
		else
			snprintf(use, sizeof(use), "free");
		sc_table_addf(devs, 0, "%d\t%s\t%s", d, use, dev[d].pods[0] ? dev[d].pods : "-");
	}
	return devs;
}

static int describe_node(json_t *node, sc_cli_get_fn get, void *ud, int64_t now)
{
	json_t *spec = json_object_get(node, "spec"), *g = json_object_get(spec, "gpus");
	const char *name = sc_obj_str(node, "metadata", "name", NULL);
	int ndev = (int)json_integer_value(json_object_get(g, "count"));
	double dev_mem = sc_node_gpu_mem(node),
	       cpu_cap = sc_qty_cpu(json_object_get(spec, "cpu"), 0);
	double mem_cap = sc_qty_mem(json_object_get(spec, "memory"), 0), gpus = 0;
	int64_t cpu = 0, mem = 0;
	char st[64], dm[32], cm[32], a[96], b[96], c[96];
	ndev = ndev < 0 ? 0 : ndev > 64 ? 64 : ndev;
	dev_use_t *dev = sc_xcalloc((size_t)ndev + 1, sizeof(*dev));
	sc_table_t *pods =
	    sc_table_new(9, (const char *const[]){"NAME", "OWNER", "QUEUE", "PHASE", "GPUS", "CPU",
	                                          "MEMORY", "AGE", NULL});
	int visible = node_pods(get, ud, name, dev_mem, dev, ndev, pods, &gpus, &cpu, &mem, now);
	field("Name", "%s", name);
	labels(node);
	sc_node_status(node, st, sizeof(st));
	field("Status", "%s", st);
	created(node, now);
	field("Address", "%s", sc_obj_str(node, "status", "address", NULL));
	field("Agent", "%s", sc_obj_str(node, "status", "agent", "version"));
	sc_fmt_bytes(dm, sizeof(dm), dev_mem);
	sc_fmt_bytes(cm, sizeof(cm), mem_cap);
	json_t *mig = json_object_get(g, "mig");
	field("Capacity", "cpu %g, memory %s, GPUs %d x %s (%s each)%s%s", cpu_cap, cm, ndev,
	      json_is_string(json_object_get(g, "model"))
	          ? json_string_value(json_object_get(g, "model"))
	          : "-",
	      dev_mem > 0 ? dm : "memory unknown",
	      json_is_string(mig) || json_is_object(mig) || json_is_true(mig) ? ", MIG " : "",
	      json_is_string(mig)   ? json_string_value(mig)
	      : json_is_object(mig) ? "layout"
	      : json_is_true(mig)   ? "enabled"
	                            : "");
	pct_field(a, sizeof(a), gpus, ndev, 0);
	pct_field(b, sizeof(b), (double)cpu / 1000.0, cpu_cap, 0);
	pct_field(c, sizeof(c), (double)mem, mem_cap, 1);
	field("Allocated", "GPUs %s, cpu %s, memory %s%s", a, b, c,
	      visible ? "" : " (pods of queues this token cannot see are not counted)");
	sc_table_t *devs = devices_table(dev, ndev);
	section("Devices", devs);
	section("Pods", pods);
	events(get, ud, "Node", name, now);
	sc_table_free(devs);
	sc_table_free(pods);
	free(dev);
	return 0;
}

/* ---- jobs and deployments -------------------------------------------- */

static void tasks_table(json_t *o)
{
	json_t *spec = json_object_get(o, "spec"), *t;
	json_t *tasks = json_object_get(spec, "tasks");
	size_t i;
	sc_table_t *tt = sc_table_new(
	    6, (const char *const[]){"TASK", "REPLICAS", "CPU", "MEMORY", "GPU", "COMMAND"});
	json_t *one = tasks ? NULL : json_object_get(spec, "template");
	json_t *list = tasks ? json_incref(tasks) : json_pack("[O*]", one);
	json_array_foreach(list, i, t)
	{
		int64_t c, m;
		char ct[32], mt[32], gt[64], cmd[128];
		json_t *r = json_object_get(t, "replicas");
		long reps = tasks ? (r ? (long)json_integer_value(r) : 1) : sc_job_replicas(o);
		sc_task_cpu_mem(t, &c, &m);
		sc_fmt_num(ct, sizeof(ct), (double)c / 1000.0, 0);
		sc_fmt_bytes(mt, sizeof(mt), (double)m);
		task_gpu_text(t, gt, sizeof(gt));
		command_text(t, cmd, sizeof(cmd));
		sc_table_addf(tt, 0, "%s\t%ld\t%s\t%s\t%s\t%s",
		              tasks ? sc_obj_str(t, "name", NULL, NULL) : "serve", reps,
		              c ? ct : "-", m ? mt : "-", gt, cmd[0] ? cmd : "-");
	}
	json_decref(list);
	section("Tasks", tt);
	sc_table_free(tt);
}

static void pods_table(json_t *o, int64_t now)
{
	json_t *p;
	size_t i;
	sc_table_t *t = sc_table_new(
	    7, (const char *const[]){"POD", "PHASE", "NODE", "GPUS", "READY", "RESTARTS", "AGE"});
	json_array_foreach(json_object_get(json_object_get(o, "status"), "pods"), i, p)
	{
		char gt[64], ag[32];
		json_t *ready = json_object_get(p, "ready"), *rs = json_object_get(p, "restarts");
		pod_gpu_text(p, gt, sizeof(gt));
		sc_fmt_age(ag, sizeof(ag),
		           sc_obj_age(p, sc_obj_str(p, "startedAt", NULL, NULL), now));
		sc_table_addf(t, 0, "%s\t%s\t%s\t%s\t%s\t%lld\t%s",
		              sc_obj_str(p, "name", NULL, NULL), sc_obj_str(p, "phase", NULL, NULL),
		              sc_str_or(sc_obj_str(p, "node", NULL, NULL), "-"), gt,
		              json_is_boolean(ready) ? (json_is_true(ready) ? "true" : "false")
		                                     : "-",
		              (long long)json_integer_value(rs), ag);
	}
	section("Pods", t);
	sc_table_free(t);
}

static void conditions_table(json_t *o)
{
	json_t *c;
	size_t i;
	sc_table_t *t = sc_table_new(
	    5, (const char *const[]){"TYPE", "STATUS", "REASON", "LAST TRANSITION", "MESSAGE"});
	json_array_foreach(json_object_get(json_object_get(o, "status"), "conditions"), i, c)
	{
		sc_table_addf(t, 0, "%s\t%s\t%s\t%s\t%s", sc_obj_str(c, "type", NULL, NULL),
		              sc_obj_str(c, "status", NULL, NULL),
		              sc_obj_str(c, "reason", NULL, NULL),
		              sc_obj_str(c, "lastTransitionTime", NULL, NULL),
		              sc_obj_str(c, "message", NULL, NULL));
	}
	section("Conditions", t);
	sc_table_free(t);
}

static void rollout_fields(json_t *o)
{
	json_t *ro = json_object_get(json_object_get(o, "status"), "rollout"), *w;
	if (!json_is_object(ro)) {
		field("Rollout", "<none>");
		return;
	}
	w = json_object_get(json_object_get(ro, "weights"), sc_obj_str(ro, "canary", NULL, NULL));
	char weight[32] = "";
	if (json_is_number(w))
		snprintf(weight, sizeof(weight), ", canary weight %g%%", json_number_value(w));
	field("Rollout", "%s (stable v%s%s%s%s)%s%s", sc_obj_str(ro, "phase", NULL, NULL),
	      sc_str_or(sc_obj_str(ro, "stable", NULL, NULL), "?"),
	      sc_obj_str(ro, "canary", NULL, NULL)[0] ? ", canary v" : "",
	      sc_obj_str(ro, "canary", NULL, NULL), weight,
	      sc_obj_str(ro, "reason", NULL, NULL)[0] ? ": " : "",
	      sc_obj_str(ro, "reason", NULL, NULL));
}

static int describe_job(const char *res, json_t *o, sc_cli_get_fn get, void *ud, int64_t now)
{
	int dep = strcmp(res, "deployments") == 0;
	json_t *spec = json_object_get(o, "spec");
	const char *name = sc_obj_str(o, "metadata", "name", NULL);
	const char *status = sc_job_status(o);
	long held = sc_job_pods(o, NULL), total = sc_job_replicas(o);
	json_t *min = json_object_get(spec, "minMember");
	char g[32];
	field("Name", "%s", name);
	field("Kind", "%s", dep ? "Deployment" : "Job");
	field("Queue", "%s", sc_obj_str(spec, "queue", NULL, NULL));
	field("Priority", "%s",
	      sc_str_or(sc_obj_str(spec, "priorityClass", NULL, NULL), "normal (default)"));
	labels(o);
	created(o, now);
	sc_fmt_num(g, sizeof(g), sc_job_gpus(o, 0), 0);
	field("Status", "%s, %ld of %ld pods running, %s GPUs held", status, held, total, g);
	if (sc_obj_str(o, "status", "reason", NULL)[0])
		field("Reason", "%s", sc_obj_str(o, "status", "reason", NULL));
	if (dep) {
		json_t *v = json_object_get(spec, "version");
		field("Model", "%s version %s", sc_obj_str(spec, "model", NULL, NULL),
		      json_is_string(v) ? json_string_value(v) : "1");
		rollout_fields(o);
	} else {
		field("Gang", "at least %lld of %ld pods together",
		      min ? (long long)json_integer_value(min) : (long long)total, total);
		field("Restart", "%s",
		      sc_str_or(sc_obj_str(spec, "restartPolicy", NULL, NULL),
		                "OnFailure (default)"));
	}
	tasks_table(o);
	pods_table(o, now);
	conditions_table(o);
	/* While it waits (not all its pods hold resources and it has not
	 * finished), why: the server's explanation. */
	if (strcmp(status, "Succeeded") != 0 && strcmp(status, "Failed") != 0 && held < total) {
		char path[600];
		snprintf(path, sizeof(path), "/api/v1/%s/%s/explain", res, name);
		json_t *e = fetch(get, ud, path);
		if (e) {
			printf("Why pending:\n");
			sc_cli_explain_print(e, res, 1);
			json_decref(e);
		}
	}
	events(get, ud, dep ? "Deployment" : "Job", name, now);
	return 0;
}

/* ---- queues ----------------------------------------------------------- */

/* A value as written in YAML (strings unquoted); NULL for none. Free it. */
static char *scalar(json_t *v)
{
	if (!v)
		return NULL;
	if (json_is_string(v))
		return sc_xstrdup(json_string_value(v));
	return json_dumps(v, JSON_ENCODE_ANY);
}

static int describe_queue(json_t *q, sc_cli_get_fn get, void *ud, int64_t now)
{
	const char *name = sc_obj_str(q, "metadata", "name", NULL);
	json_t *spec = json_object_get(q, "spec"), *all = fetch(get, ud, "/api/v1/queues"), *o;
	json_t *pr = json_object_get(spec, "priority");
	size_t i, n = 0;
	char kids[1024] = "";
	json_array_foreach(json_object_get(all, "items"), i, o)
	{
		if (strcmp(sc_obj_str(o, "spec", "parentQueue", NULL), name) == 0 &&
		    n < sizeof(kids))
			n += (size_t)snprintf(kids + n, sizeof(kids) - n, "%s%s", n ? ", " : "",
			                      sc_obj_str(o, "metadata", "name", NULL));
	}
	json_decref(all);
	field("Name", "%s", name);
	field("Parent", "%s", sc_obj_str(spec, "parentQueue", NULL, NULL));
	field("Children", "%s", kids);
	field("Priority", "%lld", pr ? (long long)json_integer_value(pr) : 0LL);
	labels(q);
	created(q, now);
	sc_table_t *t = sc_table_new(
	    4, (const char *const[]){"RESOURCE", "QUOTA", "LIMIT", "OVER-QUOTA WEIGHT"});
	static const char *const res[] = {"gpu", "cpu", "memory"};
	for (size_t r = 0; r < 3; r++) {
		json_t *x = json_object_get(json_object_get(spec, "resources"), res[r]);
		char *qt = scalar(json_object_get(x, "quota"));
		char *lt = scalar(json_object_get(x, "limit"));
		json_t *w = json_object_get(x, "overQuotaWeight");
		char wt[32];
		sc_fmt_num(wt, sizeof(wt), w ? json_number_value(w) : 1, 0);
		sc_table_addf(t, 0, "%s\t%s\t%s\t%s", res[r], qt ? qt : "(default)",
		              lt ? lt : "(default)", wt);
		free(qt);
		free(lt);
	}
	printf("Spec (as written; defaults in docs/MANIFESTS.md):\n");
	sc_table_margin(t, 2);
	sc_table_print(t, stdout, 0);
	sc_table_free(t);
	json_t *st = fetch(get, ud, "/api/v1/scheduler/status"), *qs = NULL;
	json_array_foreach(json_object_get(st, "queues"), i, o)
	{
		if (strcmp(sc_obj_str(o, "name", NULL, NULL), name) == 0)
			qs = o;
	}
	if (!qs) {
		field("Scheduler", "no figures for this queue yet (not in the last cycle)");
	} else {
		printf("Scheduler (last cycle, %s):\n", sc_obj_str(st, "cycle", "time", NULL));
		t = sc_table_new(6, (const char *const[]){"RESOURCE", "FAIR SHARE", "ALLOCATED",
		                                          "REQUESTED", "QUOTA", "LIMIT"});
		static const char *const lbl[] = {"gpu", "cpu (cores)", "memory"};
		for (size_t r = 0; r < 3; r++) {
			char a[32], b[32], c[32], d[32], e[32];
			sc_fmt_res(a, sizeof(a), json_object_get(qs, "fairShare"), res[r], r == 2);
			sc_fmt_res(b, sizeof(b), json_object_get(qs, "allocated"), res[r], r == 2);
			sc_fmt_res(c, sizeof(c), json_object_get(qs, "requested"), res[r], r == 2);
			sc_fmt_res(d, sizeof(d), json_object_get(qs, "quota"), res[r], r == 2);
			sc_fmt_res(e, sizeof(e), json_object_get(qs, "limit"), res[r], r == 2);
			sc_table_addf(t, 0, "%s\t%s\t%s\t%s\t%s\t%s", lbl[r], a, b, c, d, e);
		}
		sc_table_margin(t, 2);
		sc_table_print(t, stdout, 0);
		sc_table_free(t);
		field("Pending jobs", "%lld",
		      (long long)json_integer_value(json_object_get(qs, "pendingJobs")));
	}
	json_decref(st);
	events(get, ud, "Queue", name, now);
	return 0;
}

/* ---- entry ------------------------------------------------------------ */

int sc_cli_describe_run(const char *res, const char *name, sc_cli_get_fn get, void *ud)
{
	char path[600];
	json_t *obj = NULL;
	int64_t now = (int64_t)time(NULL);
	snprintf(path, sizeof(path), "/api/v1/%s/%s", res, name);
	long st = get(ud, path, &obj);
	if (st != 200) {
		json_t *e = json_object_get(obj, "error");
		const char *msg = sc_obj_str(e, "message", NULL, NULL);
		if (st > 0)
			fprintf(stderr, "starcloud: %s/%s: %ld %s\n", res, name, st,
			        msg[0] ? msg : "request failed");
		json_decref(obj);
		return st == 400 ? SC_EXIT_USAGE : SC_EXIT_FAIL;
	}
	int rc = 0;
	if (strcmp(res, "nodes") == 0)
		rc = describe_node(obj, get, ud, now);
	else if (strcmp(res, "jobs") == 0 || strcmp(res, "deployments") == 0)
		rc = describe_job(res, obj, get, ud, now);
	else if (strcmp(res, "queues") == 0)
		rc = describe_queue(obj, get, ud, now);
	else
		sc_cli_yaml_print(obj, 0, 0);
	json_decref(obj);
	return rc ? SC_EXIT_FAIL : SC_EXIT_OK;
}

/* ---------------------------------------------------------------------
 * explain
 * ------------------------------------------------------------------- */

static void res_text(json_t *r, char *out, size_t outsz)
{
	static const char *const keys[] = {"cpu",       "memory", "gpu", "gpuFraction",
	                                   "gpuMemory", "mig",    NULL};
	size_t n = 0;
	out[0] = '\0';
	for (size_t i = 0; keys[i]; i++) {
		json_t *v = json_object_get(r, keys[i]);
		char *s = v ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
		if (s && n < outsz) {
			if (json_is_string(v)) /* unquoted, as written in YAML */
				n += (size_t)snprintf(out + n, outsz - n, "%s%s %s", n ? ", " : "",
				                      keys[i], json_string_value(v));
			else
				n += (size_t)snprintf(out + n, outsz - n, "%s%s %s", n ? ", " : "",
				                      keys[i], s);
		}
		free(s);
	}
	if (!out[0])
		snprintf(out, outsz, "no resources (best effort)");
}

static void gpu_fig(char *out, size_t outsz, const char *label, json_t *r)
{
	json_t *g = json_object_get(r, "gpu");
	char v[32];
	if (!g || json_is_null(g))
		snprintf(out, outsz, "%s none", label);
	else {
		sc_fmt_num(v, sizeof(v), json_number_value(g), 0);
		snprintf(out, outsz, "%s %s", label, v);
	}
}

void sc_cli_explain_print(json_t *e, const char *res, int in_describe)
{
	json_t *asks = json_object_get(e, "asks"), *q = json_object_get(e, "queueStatus"), *t;
	const char *phase = sc_obj_str(e, "phase", NULL, NULL);
	const char *reason = sc_obj_str(e, "reason", NULL, NULL);
	size_t i;
	int dep = strcmp(res, "deployments") == 0;
	const char *ind = in_describe ? "  " : "";
	if (!in_describe) /* describe has said all this above */
		printf("%s %s (queue %s): %s\n", dep ? "Deployment" : "Job",
		       sc_obj_str(e, "job", NULL, NULL), sc_obj_str(e, "queue", NULL, NULL),
		       phase[0] ? phase : "Unknown");
	if (!reason[0]) {
		/* Only a waiting job has a pending reason; say what the phase means. */
		reason = strcmp(phase, "Succeeded") == 0 ? "finished: every pod succeeded"
		         : strcmp(phase, "Failed") == 0  ? "finished: it failed (see its events)"
		         : strcmp(phase, "Running") == 0 ? "running: nothing holds it back"
		                                         : "no reason reported yet";
	}
	printf("%sReason:   %s\n", ind, reason);
	long long pods = (long long)json_integer_value(json_object_get(asks, "pods"));
	long long min = (long long)json_integer_value(json_object_get(asks, "minMember"));
	printf("%sAsks:     %lld pod%s", ind, pods, pods == 1 ? "" : "s");
	if (min && min != pods)
		printf(" (at least %lld together)", min);
	else if (pods > 1)
		printf(" (all together)");
	printf(", %lld whole GPUs in all\n",
	       (long long)json_integer_value(json_object_get(asks, "gpus")));
	json_array_foreach(json_object_get(asks, "tasks"), i, t)
	{
		char rt[512];
		res_text(json_object_get(t, "resources"), rt, sizeof(rt));
		printf("%s  %s %s: %lld x %s\n", ind, dep ? "template" : "task",
		       sc_obj_str(t, "name", NULL, NULL),
		       (long long)json_integer_value(json_object_get(t, "replicas")), rt);
	}
	if (!json_is_object(q)) {
		printf("%sQueue:    no figures yet (not in the last scheduling cycle)\n", ind);
		return;
	}
	char a[48], b[48], c[48], d[48], f[48];
	gpu_fig(a, sizeof(a), "fair share", json_object_get(q, "fairShare"));
	gpu_fig(b, sizeof(b), "allocated", json_object_get(q, "allocated"));
	gpu_fig(c, sizeof(c), "requested", json_object_get(q, "requested"));
	gpu_fig(d, sizeof(d), "quota", json_object_get(q, "quota"));
	gpu_fig(f, sizeof(f), "limit", json_object_get(q, "limit"));
	printf("%sQueue %s, GPUs: %s, %s, %s, %s, %s\n", ind, sc_obj_str(q, "name", NULL, NULL), a,
	       b, c, d, f);
}
