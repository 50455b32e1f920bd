/* Decoders for the workload kinds: Job and Deployment (a served model,
 * decoded into a serving job whose tasks are "main", or "prefill" and
 * "decode" when disaggregated), with their tasks, resources, probes and the
 * status of existing pods. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/quantity.h"
#include "base/parse.h"
#include "manifest/manifest_int.h"
#include "starcloud/cluster.h"

/* The most replicas one task may have: far above any real gang, low enough
 * that a typo (1e9) is refused before the core allocates per-pod state. */
#define MAX_REPLICAS 100000

static int oom(sc__rd_t *rd)
{
	return sc__rd_fail(rd, SC_ENOMEM, "out of memory");
}

/* ---- resources --------------------------------------------------------- */

/* gpu, gpuFraction, gpuMemory and mig are alternatives: a pod asks for whole
 * devices, or a share of one device, or a MIG slice. */
static int one_gpu_kind(sc__rd_t *rd, const char *key, const char **first)
{
	if (!*first) {
		*first = key;
		return 0;
	}
	sc__mark_t m = sc__rd_push(rd, key);
	(void)m;
	return sc__rd_fail(rd, SC_EINVAL,
	                   "only one of gpu, gpuFraction, gpuMemory and mig may be "
	                   "set (%s is set too)",
	                   *first);
}

static int decode_gpu_share(sc__rd_t *rd, json_t *res, sc_request_t *r, const char **kind)
{
	double frac;
	const char *mig;
	int rc = sc__get_num(rd, res, "gpuFraction", false, 0, 1, &frac);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		long milli = lround(frac * 1000);
		if (milli < 1 || milli > 999) {
			sc__rd_push(rd, "gpuFraction");
			return sc__rd_fail(rd, SC_EINVAL,
			                   "expected a share strictly between 0 and 1 (at least "
			                   "0.001, at most 0.999), got %g",
			                   frac);
		}
		if ((rc = one_gpu_kind(rd, "gpuFraction", kind)) < 0)
			return rc;
		r->gpu_milli = (int)milli;
	}
	if ((rc = sc__get_mem(rd, res, "gpuMemory", false, 0, &r->gpu_memory)) < 0)
		return rc;
	if (rc == 1) {
		if ((rc = one_gpu_kind(rd, "gpuMemory", kind)) < 0)
			return rc;
		if (r->gpu_memory == 0) {
			sc__rd_push(rd, "gpuMemory");
			return sc__rd_fail(rd, SC_EINVAL, "expected a positive memory quantity");
		}
	}
	if ((rc = sc__get_str(rd, res, "mig", false, &mig)) < 0)
		return rc;
	if (rc == 1) {
		if ((rc = one_gpu_kind(rd, "mig", kind)) < 0)
			return rc;
		if (!sc__mig_profile_ok(mig)) {
			sc__rd_push(rd, "mig");
			return sc__rd_fail(rd, SC_EINVAL,
			                   "\"%s\" is not a MIG profile such as 1g.10gb", mig);
		}
		r->mig = mig;
	}
	return 0;
}

static int decode_resources(sc__rd_t *rd, json_t *task, sc_task_spec_t *t)
{
	static const char *const fields[] = {"cpu",       "memory", "gpu",       "gpuFraction",
	                                     "gpuMemory", "mig",    "gpuModels", NULL};
	sc_request_t *r = &t->req;
	const char *kind = NULL;
	json_t *res;
	int64_t gpus = 0;
	int rc = sc__get_object(rd, task, "resources", false, &res);
	if (rc <= 0)
		return rc; /* a pod with no resources is valid (best effort) */
	sc__mark_t m = sc__rd_push(rd, "resources");
	if ((rc = sc__rd_fields(rd, res, fields)) < 0 ||
	    (rc = sc__get_cpu(rd, res, "cpu", false, 0, &r->cpu_milli)) < 0 ||
	    (rc = sc__get_mem(rd, res, "memory", false, 0, &r->memory)) < 0)
		return rc;
	json_t *g = json_object_get(res, "gpu");
	if (g && json_is_real(g) && json_real_value(g) != floor(json_real_value(g))) {
		sc__rd_push(rd, "gpu");
		return sc__rd_fail(rd, SC_EINVAL,
		                   "expected a non-negative whole number of GPUs, "
		                   "got %g (use gpuFraction for a share of one GPU)",
		                   json_real_value(g));
	}
	if ((rc = sc__get_int(rd, res, "gpu", false, 0, 1024, &gpus)) < 0)
		return rc;
	if (gpus > 0)
		kind = "gpu";
	r->gpus = (int)gpus;
	if ((rc = decode_gpu_share(rd, res, r, &kind)) < 0 ||
	    (rc = sc__get_strs(rd, res, "gpuModels", false, (const char ***)&t->gpu_models,
	                       &t->ngpu_models)) < 0)
		return rc;
	sc__rd_pop(rd, m);
	return 0;
}

/* ---- probes (validated here; the agent runs them) ---------------------- */

/* scheme: plain or TLS, in Kubernetes' spelling (probes: HTTP, HTTPS) or
 * in lower case. */
static int decode_scheme(sc__rd_t *rd, json_t *o, const char *plain, const char *tls)
{
	json_t *v = json_object_get(o, "scheme");
	const char *s = json_string_value(v);
	if (!v || (s && (strcasecmp(s, plain) == 0 || strcasecmp(s, tls) == 0)))
		return 0;
	sc__rd_push(rd, "scheme");
	return sc__rd_fail(rd, SC_EINVAL, "expected %s or %s", plain, tls);
}

static int decode_probe_action(sc__rd_t *rd, json_t *probe, int *nactions)
{
	static const char *const http_fields[] = {"path", "port", "scheme", NULL};
	static const char *const tcp_fields[] = {"port", NULL};
	static const char *const exec_fields[] = {"command", NULL};
	static const char *const names[] = {"http", "tcp", "exec", NULL};
	static const char *const *const fields[] = {http_fields, tcp_fields, exec_fields};
	for (int i = 0; names[i]; i++) {
		json_t *a;
		int64_t port;
		const char *path = "/", **cmd;
		size_t n;
		int rc = sc__get_object(rd, probe, names[i], false, &a);
		if (rc < 0)
			return rc;
		if (!rc)
			continue;
		sc__mark_t m = sc__rd_push(rd, names[i]);
		if (++*nactions > 1)
			return sc__rd_fail(rd, SC_EINVAL,
			                   "only one of http, tcp and exec may be set");
		if ((rc = sc__rd_fields(rd, a, fields[i])) < 0 ||
		    (i < 2 && (rc = sc__get_int(rd, a, "port", true, 1, 65535, &port)) < 0) ||
		    (i == 0 && (rc = sc__get_str(rd, a, "path", false, &path)) < 0) ||
		    (i == 2 && (rc = sc__get_strs(rd, a, "command", true, &cmd, &n)) < 0))
			return rc;
		if (i == 0 && (rc = decode_scheme(rd, a, "HTTP", "HTTPS")) < 0)
			return rc;
		if (i == 0 && json_object_get(a, "path") && path[0] != '/') {
			sc__rd_push(rd, "path");
			return sc__rd_fail(rd, SC_EINVAL, "expected a path starting with '/'");
		}
		sc__rd_pop(rd, m);
	}
	return 0;
}

static int decode_probes(sc__rd_t *rd, json_t *task)
{
	static const char *const kinds[] = {"liveness", "readiness", "startup", NULL};
	static const char *const fields[] = {"http",
	                                     "tcp",
	                                     "exec",
	                                     "periodSeconds",
	                                     "failureThreshold",
	                                     "successThreshold",
	                                     "timeoutSeconds",
	                                     "initialDelaySeconds",
	                                     NULL};
	static const char *const ints[] = {"periodSeconds", "failureThreshold", "successThreshold",
	                                   "timeoutSeconds", NULL};
	json_t *probes, *p;
	int64_t v;
	int rc = sc__get_object(rd, task, "probes", false, &probes);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "probes");
	if ((rc = sc__rd_fields(rd, probes, kinds)) < 0)
		return rc;
	for (int k = 0; kinds[k]; k++) {
		int nactions = 0;
		if ((rc = sc__get_object(rd, probes, kinds[k], false, &p)) <= 0) {
			if (rc < 0)
				return rc;
			continue;
		}
		sc__mark_t mk = sc__rd_push(rd, kinds[k]);
		if ((rc = sc__rd_fields(rd, p, fields)) < 0 ||
		    (rc = decode_probe_action(rd, p, &nactions)) < 0 ||
		    (rc = sc__get_int(rd, p, "initialDelaySeconds", false, 0, 86400, &v)) < 0)
			return rc;
		for (int i = 0; ints[i]; i++)
			if ((rc = sc__get_int(rd, p, ints[i], false, 1, 86400, &v)) < 0)
				return rc;
		if (nactions == 0)
			return sc__rd_fail(rd, SC_EINVAL, "expected one of http, tcp or exec");
		sc__rd_pop(rd, mk);
	}
	sc__rd_pop(rd, m);
	return 0;
}

/* ---- tasks ------------------------------------------------------------- */

/* How the agent starts the process: args follow command, workingDir is an
 * absolute path; a command must name a program (docs/AGENT.md). */
static int decode_process(sc__rd_t *rd, json_t *o, size_t ncmd)
{
	const char **args, *dir, *first;
	size_t nargs;
	int rc;
	if ((rc = sc__get_strs(rd, o, "args", false, &args, &nargs)) < 0)
		return rc;
	if (json_object_get(o, "args") && !json_object_get(o, "command")) {
		sc__rd_push(rd, "args");
		return sc__rd_fail(rd, SC_EINVAL, "args need a command");
	}
	first = json_string_value(json_array_get(json_object_get(o, "command"), 0));
	if (json_object_get(o, "command") && (!first || !first[0])) {
		sc__rd_push(rd, "command");
		return sc__rd_fail(rd, SC_EINVAL,
		                   "expected a non-empty list whose first "
		                   "element names a program");
	}
	if ((rc = sc__get_str(rd, o, "workingDir", false, &dir)) < 0)
		return rc;
	if (json_object_get(o, "workingDir") && dir[0] != '/') {
		sc__rd_push(rd, "workingDir");
		return sc__rd_fail(rd, SC_EINVAL, "expected an absolute path");
	}
	return 0;
}

/* The body of a task, shared with a Deployment's templates. */
static int decode_task_body(sc__rd_t *rd, json_t *o, sc_task_spec_t *t)
{
	const char **cmd;
	size_t ncmd;
	sc_label_t *env, *sel = NULL;
	size_t nenv;
	int64_t port;
	int rc;
	/* port: where a serving replica listens (docs/SERVING.md); the agent
	 * passes it as STARCLOUD_PORT. */
	if ((rc = sc__get_strs(rd, o, "command", false, &cmd, &ncmd)) < 0 ||
	    (rc = sc__get_int(rd, o, "port", false, 1, 65535, &port)) < 0 ||
	    (rc = decode_scheme(rd, o, "http", "https")) < 0 ||
	    (rc = decode_process(rd, o, ncmd)) < 0 ||
	    (rc = sc__get_labels(rd, o, "env", &env, &nenv)) < 0 ||
	    (rc = decode_resources(rd, o, t)) < 0 ||
	    (rc = sc__get_labels(rd, o, "nodeSelector", &sel, &t->nselector)) < 0 ||
	    (rc = decode_probes(rd, o)) < 0)
		return rc;
	t->selector = sel;
	return 0;
}

static int decode_task(sc__rd_t *rd, json_t *o, sc_task_spec_t *t)
{
	static const char *const fields[] = {"name",       "replicas",     "command", "env",
	                                     "resources",  "nodeSelector", "probes",  "args",
	                                     "workingDir", "port",         "scheme",  NULL};
	int64_t replicas = 1;
	int rc;
	if (!json_is_object(o))
		return sc__rd_fail(rd, SC_EINVAL, "expected an object (a task)");
	t->name = "main";
	if ((rc = sc__rd_fields(rd, o, fields)) < 0 ||
	    (rc = sc__get_name(rd, o, "name", false, &t->name)) < 0 ||
	    (rc = sc__get_int(rd, o, "replicas", false, 0, MAX_REPLICAS, &replicas)) < 0 ||
	    (rc = decode_task_body(rd, o, t)) < 0)
		return rc;
	t->replicas = (int)replicas;
	return 0;
}

static int decode_tasks(sc__rd_t *rd, json_t *spec, sc_job_spec_t *j)
{
	json_t *arr, *o;
	size_t i;
	int rc = sc__get_array(rd, spec, "tasks", true, &arr);
	if (rc < 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "tasks");
	if (json_array_size(arr) == 0 || json_array_size(arr) > 64)
		return sc__rd_fail(rd, SC_EINVAL, "expected 1 to 64 tasks");
	sc_task_spec_t *t = sc_arena_calloc(rd->arena, json_array_size(arr), sizeof(*t));
	if (!t)
		return oom(rd);
	json_array_foreach(arr, i, o)
	{
		sc__mark_t mi = sc__rd_push_index(rd, i);
		if ((rc = decode_task(rd, o, &t[i])) < 0)
			return rc;
		for (size_t k = 0; k < i; k++)
			if (strcmp(t[k].name, t[i].name) == 0) {
				sc__rd_push(rd, "name");
				return sc__rd_fail(rd, SC_EINVAL,
				                   "task name \"%s\" is used twice (tasks without "
				                   "a name are called main)",
				                   t[i].name);
			}
		sc__rd_pop(rd, mi);
	}
	sc__rd_pop(rd, m);
	j->tasks = t;
	j->ntasks = json_array_size(arr);
	return 0;
}

/* ---- status ------------------------------------------------------------ */

/* A pod's name must be "<job>-<task>-<index>" for a task of this job and an
 * index below its replicas: the core matches pods to tasks by name. */
static bool pod_of_job(const sc_job_spec_t *j, const char *pod)
{
	size_t jl = strlen(j->name);
	const char *dash = strrchr(pod, '-');
	if (strncmp(pod, j->name, jl) == 0 && pod[jl] == '-' && dash && dash > pod + jl + 1) {
		const char *end = dash + 1;
		uint64_t idx = 0;
		int ok = sc_parse_digits(&end, INT32_MAX, &idx) == 0 && !*end;
		for (size_t t = 0; t < j->ntasks && ok; t++) {
			const sc_task_spec_t *tk = &j->tasks[t];
			if (strlen(tk->name) == (size_t)(dash - pod - (long)jl - 1) &&
			    strncmp(pod + jl + 1, tk->name, strlen(tk->name)) == 0 &&
			    idx < (uint64_t)tk->replicas)
				return true;
		}
	}
	return false;
}

static int check_pod_name(sc__rd_t *rd, const sc_job_spec_t *j, const char *pod)
{
	if (pod_of_job(j, pod))
		return 0;
	return sc__rd_fail(rd, SC_EINVAL,
	                   "\"%s\" is not a pod of this job (expected %s-<task>-<index> with "
	                   "index below the task's replicas)",
	                   pod, j->name);
}

static int decode_pod_gpus(sc__rd_t *rd, json_t *o, sc_pod_status_t *p)
{
	json_t *arr, *v;
	size_t i;
	int rc = sc__get_array(rd, o, "gpus", false, &arr);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "gpus");
	if (json_array_size(arr) > SC_MAX_GPUS)
		return sc__rd_fail(rd, SC_EINVAL, "more than %d devices", SC_MAX_GPUS);
	int *g = sc_arena_calloc(rd->arena, json_array_size(arr) + 1, sizeof(int));
	if (!g)
		return oom(rd);
	json_array_foreach(arr, i, v)
	{
		sc__mark_t mi = sc__rd_push_index(rd, i);
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) >= SC_MAX_GPUS)
			return sc__rd_fail(rd, SC_EINVAL, "expected a device index in 0..%d",
			                   SC_MAX_GPUS - 1);
		g[i] = (int)json_integer_value(v);
		for (size_t k = 0; k < i; k++)
			if (g[k] == g[i])
				return sc__rd_fail(rd, SC_EINVAL, "device %d is listed twice",
				                   g[i]);
		sc__rd_pop(rd, mi);
	}
	sc__rd_pop(rd, m);
	p->gpus = g;
	p->ngpus = json_array_size(arr);
	return 0;
}

static int decode_pod_mig(sc__rd_t *rd, json_t *o, sc_pod_status_t *p)
{
	static const char *const fields[] = {"gpu", "profile", "start", NULL};
	json_t *mig;
	int64_t gpu = 0, start = 0;
	int rc = sc__get_object(rd, o, "mig", false, &mig);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "mig");
	if ((rc = sc__rd_fields(rd, mig, fields)) < 0 ||
	    (rc = sc__get_int(rd, mig, "gpu", true, 0, SC_MAX_GPUS - 1, &gpu)) < 0 ||
	    (rc = sc__get_str(rd, mig, "profile", true, &p->mig_profile)) < 0 ||
	    (rc = sc__get_int(rd, mig, "start", false, 0, 7, &start)) < 0)
		return rc;
	if (!sc__mig_profile_ok(p->mig_profile)) {
		sc__rd_push(rd, "profile");
		return sc__rd_fail(rd, SC_EINVAL, "expected a MIG profile such as 1g.10gb");
	}
	p->mig_gpu = (int)gpu;
	p->mig_start = (int)start;
	sc__rd_pop(rd, m);
	return 0;
}

/* What the node agent reports about a pod; checked, not used by the core. */
static int decode_pod_report(sc__rd_t *rd, json_t *o)
{
	bool ready;
	int64_t v;
	const char *msg;
	int rc;
	/* An agent with nothing to say reports message "" (every running pod
	 * does): refusing it excluded the job from the scheduler's snapshot, so
	 * its GPUs looked free and were given again (the soak of issue 23). */
	json_t *m = json_object_get(o, "message");
	bool empty_msg = json_is_string(m) && json_string_length(m) == 0;
	if ((rc = sc__get_bool(rd, o, "ready", false, &ready)) < 0 ||
	    (rc = sc__get_int(rd, o, "restarts", false, 0, INT32_MAX, &v)) < 0 ||
	    (rc = sc__get_int(rd, o, "exitCode", false, -255, 255, &v)) < 0 ||
	    (!empty_msg && (rc = sc__get_str(rd, o, "message", false, &msg)) < 0) ||
	    (rc = sc__get_str(rd, o, "reason", false, &msg)) < 0 ||
	    (rc = sc__get_int(rd, o, "generation", false, 0, INT64_MAX, &v)) < 0 ||
	    (rc = sc__get_int(rd, o, "port", false, 1, 65535, &v)) < 0)
		return rc;
	return 0;
}

/* from: {node, seen}, the node a moved pod leaves, which the server waits
 * for to stop it before the pod starts again, and how many heartbeats of
 * it the server had taken then (server/sched_move.c). */
static int decode_pod_from(sc__rd_t *rd, json_t *o)
{
	static const char *const fields[] = {"node", "seen", NULL};
	json_t *from;
	const char *node;
	int64_t seen;
	int rc = sc__get_object(rd, o, "from", false, &from);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "from");
	if ((rc = sc__rd_fields(rd, from, fields)) < 0 ||
	    (rc = sc__get_name(rd, from, "node", true, &node)) < 0 ||
	    (rc = sc__get_int(rd, from, "seen", false, 0, INT64_MAX, &seen)) < 0)
		return rc;
	sc__rd_pop(rd, m);
	return 0;
}

static int decode_pod(sc__rd_t *rd, json_t *o, const sc_job_spec_t *j, sc_pod_status_t *p)
{
	/* ready .. generation are reported by the node agent (docs/AGENT.md). */
	/* port: a serving pod's, given by the server; movedAt: set by the
	 * server with a compaction move (the action's cooldown reads it). */
	static const char *const fields[] = {
	    "name",       "phase",     "node",  "gpus",     "gpuShare", "gpuMemory",
	    "mig",        "startedAt", "ready", "restarts", "exitCode", "message",
	    "generation", "movedAt",   "from",  "reason",   "port",     NULL};
	static const char *const phases[] = {"Pending", "Running",   "Releasing", "Succeeded",
	                                     "Failed",  "Pipelined", NULL};
	int64_t share = 0;
	int rc;
	if (!json_is_object(o))
		return sc__rd_fail(rd, SC_EINVAL, "expected an object (a pod)");
	if ((rc = sc__rd_fields(rd, o, fields)) < 0 ||
	    (rc = sc__get_str(rd, o, "name", true, &p->name)) < 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "name");
	if ((rc = check_pod_name(rd, j, p->name)) < 0)
		return rc;
	sc__rd_pop(rd, m);
	/* The enum's order matches enum sc_pod_phase. */
	if ((rc = sc__get_enum(rd, o, "phase", true, phases, &p->phase)) < 0 ||
	    (rc = sc__get_name(rd, o, "node",
	                       p->phase == SC_POD_RUNNING || p->phase == SC_POD_RELEASING ||
	                           p->phase == SC_POD_PIPELINED,
	                       &p->node)) < 0 ||
	    (rc = decode_pod_gpus(rd, o, p)) < 0 ||
	    (rc = sc__get_int(rd, o, "gpuShare", false, 1, 999, &share)) < 0 ||
	    (rc = sc__get_mem(rd, o, "gpuMemory", false, 0, &p->gpu_memory)) < 0 ||
	    (rc = decode_pod_mig(rd, o, p)) < 0 ||
	    (rc = sc__get_time(rd, o, "startedAt", false, &p->started_at)) < 0 ||
	    (rc = sc__get_time(rd, o, "movedAt", false, &p->moved_at)) < 0 ||
	    (rc = decode_pod_report(rd, o)) < 0 || (rc = decode_pod_from(rd, o)) < 0)
		return rc;
	p->gpu_milli = (int)share;
	return 0;
}

static int decode_status(sc__rd_t *rd, json_t *obj, sc_job_spec_t *j, bool deployment)
{
	/* pods and staleSince are the cluster's state; the rest is what the
	 * server writes for people (phase, reason, conditions, a reservation;
	 * a Deployment's rollout bookkeeping), accepted so that what `get -o
	 * yaml` prints loads again, and not read. */
	static const char *const fields[] = {"pods",       "staleSince",    "phase",     "reason",
	                                     "conditions", "reservation",   "templates", "rollout",
	                                     "endpoints",  "stableVersion", NULL};
	json_t *status, *pods = NULL, *o;
	size_t i;
	int rc = sc__get_object(rd, obj, "status", false, &status);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "status");
	if ((rc = sc__rd_fields(rd, status, fields)) < 0 ||
	    (rc = sc__get_time(rd, status, "staleSince", false, &j->stale_since)) < 0 ||
	    (rc = sc__get_array(rd, status, "pods", false, &pods)) < 0)
		return rc;
	if (pods) {
		sc__mark_t mp = sc__rd_push(rd, "pods");
		sc_pod_status_t *p =
		    sc_arena_calloc(rd->arena, json_array_size(pods) + 1, sizeof(*p));
		size_t n = 0;
		if (!p)
			return oom(rd);
		json_array_foreach(pods, i, o)
		{
			/* A stored Deployment's pods may belong to versioned tasks
			 * ("main-v1") that only the server's view of it has
			 * (server/deploy_view.c): `get -o yaml` output loads with
			 * those left out; pods of the spec's own tasks are read. */
			const char *name = json_string_value(json_object_get(o, "name"));
			if (deployment && name && !pod_of_job(j, name))
				continue;
			sc__mark_t mi = sc__rd_push_index(rd, i);
			if ((rc = decode_pod(rd, o, j, &p[n])) < 0)
				return rc;
			for (size_t k = 0; k < n; k++)
				if (strcmp(p[k].name, p[n].name) == 0)
					return sc__rd_fail(rd, SC_EINVAL, "pod %s is listed twice",
					                   p[n].name);
			sc__rd_pop(rd, mi);
			n++;
		}
		j->pods = p;
		j->npods = n;
		sc__rd_pop(rd, mp);
	}
	sc__rd_pop(rd, m);
	return 0;
}

/* ---- settings shared by Job and Deployment ----------------------------- */

static int decode_topology_req(sc__rd_t *rd, json_t *spec, sc_job_spec_t *j)
{
	static const char *const fields[] = {"required", "preferred", NULL};
	json_t *t;
	int rc = sc__get_object(rd, spec, "topology", false, &t);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "topology");
	if ((rc = sc__rd_fields(rd, t, fields)) < 0 ||
	    (rc = sc__get_str(rd, t, "required", false, &j->topo_required)) < 0 ||
	    (rc = sc__get_str(rd, t, "preferred", false, &j->topo_preferred)) < 0)
		return rc;
	if (!j->topo_required && !j->topo_preferred)
		return sc__rd_fail(rd, SC_EINVAL, "expected required, preferred or both");
	sc__rd_pop(rd, m);
	return 0;
}

static int decode_settings(sc__rd_t *rd, json_t *spec, sc_job_spec_t *j, sc__origin_t *o)
{
	static const char *const placements[] = {"default", "binpack", "spread", NULL};
	bool pre;
	int64_t spread = 0;
	int rc;
	o->ref[0] = sc__rd_pos(rd, "queue");
	o->ref[1] = sc__rd_pos(rd, "priorityClass");
	j->preemptible = -1;
	if ((rc = sc__get_name(rd, spec, "queue", true, &j->queue)) < 0 ||
	    (rc = sc__get_name(rd, spec, "priorityClass", false, &j->priority_class)) < 0 ||
	    (rc = sc__get_bool(rd, spec, "preemptible", false, &pre)) < 0)
		return rc;
	if (rc == 1)
		j->preemptible = pre;
	if ((rc = sc__get_enum(rd, spec, "placement", false, placements, &j->placement)) < 0 ||
	    (rc = sc__get_int(rd, spec, "spreadFactor", false, 1, MAX_REPLICAS, &spread)) < 0 ||
	    (rc = decode_topology_req(rd, spec, j)) < 0)
		return rc;
	j->spread_factor = (int)spread;
	return 0;
}

static int64_t total_replicas(const sc_job_spec_t *j)
{
	int64_t n = 0;
	for (size_t i = 0; i < j->ntasks; i++)
		n += j->tasks[i].replicas;
	return n;
}

/* ---- Job --------------------------------------------------------------- */

/* Settings only the node agent and the server's agent API use (docs/AGENT.md). */
static int decode_agent_settings(sc__rd_t *rd, json_t *spec)
{
	static const char *const gang[] = {"FailJob", "RestartGang", NULL};
	int policy, rc;
	int64_t v;
	if ((rc = sc__get_enum(rd, spec, "gangPolicy", false, gang, &policy)) < 0 ||
	    (rc = sc__get_int(rd, spec, "backoffLimit", false, 0, SC_BACKOFF_LIMIT_MAX, &v)) < 0 ||
	    (rc = sc__get_int(rd, spec, "terminationGracePeriodSeconds", false, 0,
	                      SC_GRACE_SECONDS_MAX, &v)) < 0 ||
	    (rc = sc__get_int(rd, spec, "runAsUser", false, 0, 2147483646, &v)) < 0)
		return rc;
	return 0;
}

int sc__decode_job(sc__rd_t *rd, json_t *obj, sc__batch_t *b)
{
	static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", "status", NULL};
	static const char *const fields[] = {"queue",           "priorityClass",
	                                     "preemptible",     "minMember",
	                                     "placement",       "spreadFactor",
	                                     "topology",        "restartPolicy",
	                                     "expectedRuntime", "stalenessGracePeriod",
	                                     "tasks",           "gangPolicy",
	                                     "backoffLimit",    "terminationGracePeriodSeconds",
	                                     "runAsUser",       NULL};
	static const char *const restart[] = {"Always", "OnFailure", "Never", NULL};
	sc__job_t job = {0};
	sc_job_spec_t *j = &job.spec;
	json_t *spec;
	int64_t min = 0;
	int policy, rc;

	job.o.at = sc__rd_pos(rd, NULL);
	j->staleness_grace = -1;
	if ((rc = sc__rd_fields(rd, obj, top)) < 0 ||
	    (rc = sc__decode_metadata(rd, obj, "Job", &j->name, NULL, NULL, &j->created)) < 0 ||
	    (rc = sc__get_object(rd, obj, "spec", true, &spec)) < 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "spec");
	if ((rc = sc__rd_fields(rd, spec, fields)) < 0 ||
	    (rc = decode_settings(rd, spec, j, &job.o)) < 0 ||
	    (rc = sc__get_enum(rd, spec, "restartPolicy", false, restart, &policy)) < 0 ||
	    (rc = sc__get_dur(rd, spec, "expectedRuntime", false, &j->expected_runtime)) < 0 ||
	    (rc = sc__get_dur(rd, spec, "stalenessGracePeriod", false, &j->staleness_grace)) < 0 ||
	    (rc = decode_tasks(rd, spec, j)) < 0 ||
	    (rc = sc__get_int(rd, spec, "minMember", false, 0, MAX_REPLICAS, &min)) < 0 ||
	    (rc = decode_agent_settings(rd, spec)) < 0)
		return rc;
	if (min > total_replicas(j)) {
		sc__rd_push(rd, "minMember");
		return sc__rd_fail(rd, SC_EINVAL,
		                   "minMember %lld is more than the job's %lld replicas",
		                   (long long)min, (long long)total_replicas(j));
	}
	j->min_member = (int)min;
	sc__rd_pop(rd, m);
	if ((rc = decode_status(rd, obj, j, false)) < 0)
		return rc;
	return sc__vec_push(&b->jobs, &job) ? oom(rd) : 0;
}

/* ---- Deployment -------------------------------------------------------- */

static int decode_template(sc__rd_t *rd, json_t *o, const char *key, bool req, sc_task_spec_t *t)
{
	static const char *const fields[] = {
	    "command",      "args",   "workingDir", "env",    "resources",
	    "nodeSelector", "probes", "port",       "scheme", NULL};
	json_t *tpl;
	int rc = sc__get_object(rd, o, key, req, &tpl);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, key);
	if ((rc = sc__rd_fields(rd, tpl, fields)) < 0 || (rc = decode_task_body(rd, tpl, t)) < 0)
		return rc;
	sc__rd_pop(rd, m);
	return 1;
}

static int decode_rollout(sc__rd_t *rd, json_t *spec)
{
	static const char *const fields[] = {
	    "steps",       "analysisWindow",          "maxErrorRate",
	    "minRequests", "earlyRollbackConfidence", NULL};
	json_t *r, *steps = NULL, *v;
	int64_t window, minreq;
	double rate, conf = 0;
	size_t i;
	int rc = sc__get_object(rd, spec, "rollout", false, &r);
	if (rc <= 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "rollout");
	if ((rc = sc__rd_fields(rd, r, fields)) < 0 ||
	    (rc = sc__get_dur(rd, r, "analysisWindow", false, &window)) < 0 ||
	    (rc = sc__get_num(rd, r, "maxErrorRate", false, 0, 1, &rate)) < 0 ||
	    (rc = sc__get_int(rd, r, "minRequests", false, 1, 1000000000, &minreq)) < 0 ||
	    (rc = sc__get_num(rd, r, "earlyRollbackConfidence", false, 0, 0.9999, &conf)) < 0 ||
	    (rc = sc__get_array(rd, r, "steps", false, &steps)) < 0)
		return rc;
	if (conf > 0 && conf < 0.5) {
		sc__rd_push(rd, "earlyRollbackConfidence");
		return sc__rd_fail(rd, SC_EINVAL,
		                   "expected 0 (off) or a confidence in 0.5..0.9999");
	}
	sc__rd_push(rd, "steps");
	json_int_t prev = 0;
	json_array_foreach(steps, i, v)
	{
		sc__mark_t mi = sc__rd_push_index(rd, i);
		if (!json_is_integer(v) || json_integer_value(v) <= prev ||
		    json_integer_value(v) > 100)
			return sc__rd_fail(rd, SC_EINVAL,
			                   "expected increasing percentages in 1..100");
		prev = json_integer_value(v);
		sc__rd_pop(rd, mi);
	}
	sc__rd_pop(rd, m);
	return 0;
}

/* disaggregation: {prefill: {replicas, template}, decode: {...}}; a role
 * without a template uses the Deployment's. */
static int decode_roles(sc__rd_t *rd, json_t *dis, const sc_task_spec_t *base, bool has_base,
                        sc_task_spec_t *t)
{
	static const char *const roles[] = {"prefill", "decode"};
	static const char *const fields[] = {"replicas", "template", "autoscaling", NULL};
	static const char *const top[] = {"prefill", "decode", NULL};
	json_t *r;
	int rc = sc__rd_fields(rd, dis, top);
	if (rc < 0)
		return rc;
	for (int i = 0; i < 2; i++) {
		int64_t replicas = 1;
		if ((rc = sc__get_object(rd, dis, roles[i], true, &r)) < 0)
			return rc;
		sc__mark_t m = sc__rd_push(rd, roles[i]);
		t[i] = *base;
		int64_t min = 0;
		int as;
		/* An autoscaled role runs its minimum offline; the server
		 * follows the load (docs/AUTOSCALING.md). */
		if ((rc = sc__rd_fields(rd, r, fields)) < 0 ||
		    (as = rc = sc__decode_role_autoscaling(rd, r, roles[i], &min)) < 0 ||
		    (rc = sc__get_int(rd, r, "replicas", false, 0, MAX_REPLICAS, &replicas)) < 0 ||
		    (rc = decode_template(rd, r, "template", !has_base, &t[i])) < 0)
			return rc;
		t[i].name = roles[i];
		t[i].replicas = (int)(as ? min : replicas);
		sc__rd_pop(rd, m);
	}
	return 0;
}

static int decode_deployment_tasks(sc__rd_t *rd, json_t *spec, sc_job_spec_t *j)
{
	json_t *dis = NULL;
	sc_task_spec_t base = {.name = "main", .replicas = 1};
	int64_t replicas = 1;
	int rc, has_base;
	if ((rc = sc__get_object(rd, spec, "disaggregation", false, &dis)) < 0 ||
	    (has_base = decode_template(rd, spec, "template", !dis, &base)) < 0)
		return rc < 0 ? rc : has_base;
	sc_task_spec_t *t = sc_arena_calloc(rd->arena, 2, sizeof(*t));
	if (!t)
		return oom(rd);
	if (dis) {
		if (json_object_get(spec, "replicas")) {
			sc__rd_push(rd, "replicas");
			return sc__rd_fail(rd, SC_EINVAL,
			                   "a disaggregated Deployment sets "
			                   "replicas per role (prefill, decode)");
		}
		sc__mark_t m = sc__rd_push(rd, "disaggregation");
		if ((rc = decode_roles(rd, dis, &base, has_base, t)) < 0)
			return rc;
		sc__rd_pop(rd, m);
		j->ntasks = 2;
	} else {
		if ((rc = sc__get_int(rd, spec, "replicas", false, 0, MAX_REPLICAS, &replicas)) < 0)
			return rc;
		t[0] = base;
		t[0].replicas = (int)replicas;
		j->ntasks = 1;
	}
	j->tasks = t;
	return 0;
}

int sc__decode_deployment(sc__rd_t *rd, json_t *obj, sc__batch_t *b)
{
	static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", "status", NULL};
	static const char *const fields[] = {"queue",
	                                     "model",
	                                     "version",
	                                     "replicas",
	                                     "priorityClass",
	                                     "preemptible",
	                                     "placement",
	                                     "spreadFactor",
	                                     "topology",
	                                     "template",
	                                     "rollout",
	                                     "disaggregation",
	                                     "modelRepository",
	                                     "autoscaling",
	                                     "runAsUser",
	                                     "promptBytesPerToken",
	                                     NULL};
	sc__job_t job = {0};
	sc_job_spec_t *j = &job.spec;
	json_t *spec;
	const char *model, *version;
	int64_t min_replicas = 0;
	int rc = 0, autoscaled = 0;

	job.o.at = sc__rd_pos(rd, NULL);
	j->staleness_grace = -1;
	j->serving = true;
	/* Replicas of a served model start one by one: no gang. */
	j->min_member = 1;
	if ((rc = sc__rd_fields(rd, obj, top)) < 0 ||
	    (rc = sc__decode_metadata(rd, obj, "Deployment", &j->name, NULL, NULL, &j->created)) <
	        0 ||
	    (rc = sc__get_object(rd, obj, "spec", true, &spec)) < 0)
		return rc;
	sc__mark_t m = sc__rd_push(rd, "spec");
	json_t *ver = json_object_get(spec, "version");
	bool repo;
	if ((rc = sc__rd_fields(rd, spec, fields)) < 0 ||
	    (rc = sc__get_bool(rd, spec, "modelRepository", false, &repo)) < 0 ||
	    (rc = decode_settings(rd, spec, j, &job.o)) < 0 ||
	    (rc = sc__get_str(rd, spec, "model", true, &model)) < 0 ||
	    (!json_is_integer(ver) &&
	     (rc = sc__get_str(rd, spec, "version", false, &version)) < 0) ||
	    (rc = decode_rollout(rd, spec)) < 0 ||
	    (autoscaled = sc__decode_autoscaling(rd, spec, &min_replicas)) < 0 ||
	    (rc = decode_deployment_tasks(rd, spec, j)) < 0)
		return autoscaled < 0 ? autoscaled : rc;
	/* Offline, an autoscaled Deployment runs its minimum; the server
	 * follows the load (docs/AUTOSCALING.md). */
	if (autoscaled)
		((sc_task_spec_t *)j->tasks)[0].replicas = (int)min_replicas;
	int64_t uid;
	double bpt;
	/* The gateway's estimate of a prompt's tokens from its text before a
	 * replica counts them (docs/GATEWAY.md): 1 for a byte-level
	 * tokenizer, about 4 for English with a BPE one, CJK text near 1-2. */
	if ((rc = sc__get_int(rd, spec, "runAsUser", false, 0, 2147483646, &uid)) < 0 ||
	    (rc = sc__get_num(rd, spec, "promptBytesPerToken", false, 0.25, 64, &bpt)) < 0)
		return rc;
	if (total_replicas(j) == 0)
		j->min_member = 0;
	sc__rd_pop(rd, m);
	if ((rc = decode_status(rd, obj, j, true)) < 0)
		return rc;
	return sc__vec_push(&b->jobs, &job) ? oom(rd) : 0;
}
