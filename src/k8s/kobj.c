/* Decoding Kubernetes objects into the scheduler's compact structs (see
 * kobj.h). */
#include "k8s/kobj.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/parse.h"
#include "base/quantity.h"
#include "starcloud/error.h"

#define GPU_RES "nvidia.com/gpu"
#define ANN_GROUP "pod-group-name"
#define ANN_FRACTION "gpu-fraction"
#define ANN_GPU_MEMORY "gpu-memory"
#define ANN_FRACTION_DEVICES "gpu-fraction-num-devices"
#define LABEL_QUEUE "kai.scheduler/queue"
#define LABEL_QUEUE_OLD "runai/queue"
#define LABEL_GPU_MODEL "nvidia.com/gpu.product"
#define LABEL_GPU_MEMORY "nvidia.com/gpu.memory"
#define MIB (1024 * 1024)

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...)
{
	char *s;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		sc_oom();
	return s;
}

/* obj.a.b... ; NULL when any step is missing. */
static json_t *at(json_t *o, const char *a, const char *b)
{
	o = json_object_get(o, a);
	return b ? json_object_get(o, b) : o;
}

static const char *str_at(json_t *o, const char *a, const char *b)
{
	json_t *v = at(o, a, b);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static const char *str_of(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static int64_t time_at(json_t *o, const char *a, const char *b)
{
	const char *s = str_at(o, a, b);
	int64_t t = 0;
	if (s && sc_quantity_time(s, &t) < 0)
		t = 0;
	return t;
}

/* Records the first problem only: that is the one the user must fix first. */
static void set_bad(char **bad, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_bad(char **bad, const char *fmt, ...)
{
	if (*bad)
		return;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(bad, fmt, ap) < 0)
		sc_oom();
	va_end(ap);
}

static int count_of(const char *s, int64_t *out)
{
	int64_t v;
	int rc = sc_quantity_memory(s, 0, &v);
	if (rc < 0)
		return rc;
	*out = v;
	return 0;
}

/* ---- pods --------------------------------------------------------------- */

typedef struct podres {
	int64_t cpu, mem, gpus;
} podres_t;

/* Adds one container's requests (limits where a request is missing, as
 * the API server defaults them). */
static void container_res(json_t *c, const char *where, podres_t *r, char **bad)
{
	json_t *req = at(c, "resources", "requests"), *lim = at(c, "resources", "limits");
	const char *cpu = str_of(req, "cpu"), *mem = str_of(req, "memory"),
	           *gpu = str_of(req, GPU_RES);
	int64_t v;
	if (!cpu)
		cpu = str_of(lim, "cpu");
	if (!mem)
		mem = str_of(lim, "memory");
	if (!gpu)
		gpu = str_of(lim, GPU_RES);
	if (cpu) {
		if (sc_quantity_cpu(cpu, 0, &v) < 0)
			set_bad(bad, "%s.resources.requests.cpu: cannot read \"%s\"", where, cpu);
		else
			r->cpu += v;
	}
	if (mem) {
		if (sc_quantity_memory(mem, 0, &v) < 0)
			set_bad(bad, "%s.resources.requests.memory: cannot read \"%s\"", where,
			        mem);
		else
			r->mem += v;
	}
	if (gpu) {
		if (count_of(gpu, &v) < 0 || v > SC_K8S_MAX_GPUS)
			set_bad(bad, "%s.resources.requests[%s]: expected 0..%d, got \"%s\"", where,
			        GPU_RES, SC_K8S_MAX_GPUS, gpu);
		else
			r->gpus += v;
	}
	const char *key;
	json_t *val;
	json_object_foreach(req, key, val)
	{
		if (strncmp(key, "nvidia.com/mig-", 15) == 0)
			set_bad(
			    bad,
			    "%s.resources.requests[%s]: MIG instances are not scheduled in "
			    "Kubernetes mode (request nvidia.com/gpu, or one device's share with "
			    "the gpu-fraction or gpu-memory annotation)",
			    where, key);
	}
}

/* Kubernetes' effective request: the larger of the sum over containers and
 * the largest init container (they run one at a time, before), plus the
 * pod overhead. */
static void pod_resources(json_t *spec, sc_kpod_t *p)
{
	podres_t sum = {0}, init = {0}, one, over = {0};
	json_t *c;
	size_t i;
	char where[64];
	json_array_foreach(json_object_get(spec, "containers"), i, c)
	{
		snprintf(where, sizeof(where), "spec.containers[%zu]", i);
		container_res(c, where, &sum, &p->bad);
	}
	json_array_foreach(json_object_get(spec, "initContainers"), i, c)
	{
		one = (podres_t){0};
		snprintf(where, sizeof(where), "spec.initContainers[%zu]", i);
		container_res(c, where, &one, &p->bad);
		init.cpu = one.cpu > init.cpu ? one.cpu : init.cpu;
		init.mem = one.mem > init.mem ? one.mem : init.mem;
		init.gpus = one.gpus > init.gpus ? one.gpus : init.gpus;
	}
	json_t *oh = json_object_get(spec, "overhead");
	if (oh) {
		json_t *wrap = json_pack("{s:{s:O}}", "resources", "requests", oh);
		container_res(wrap, "spec.overhead", &over, &p->bad);
		json_decref(wrap);
	}
	p->req.cpu_milli = (sum.cpu > init.cpu ? sum.cpu : init.cpu) + over.cpu;
	p->req.memory = (sum.mem > init.mem ? sum.mem : init.mem) + over.mem;
	int64_t g = sum.gpus > init.gpus ? sum.gpus : init.gpus;
	if (g > SC_K8S_MAX_GPUS)
		set_bad(&p->bad, "spec: requests %lld %s, more than %d", (long long)g, GPU_RES,
		        SC_K8S_MAX_GPUS);
	else
		p->req.gpus = (int)g;
}

/* KAI's GPU-sharing annotations: gpu-fraction (0, 1] and gpu-memory (MiB),
 * only on pods that do not also ask for whole devices. */
static void pod_shares(json_t *ann, sc_kpod_t *p)
{
	const char *frac = str_of(ann, ANN_FRACTION), *mem = str_of(ann, ANN_GPU_MEMORY);
	if ((frac || mem) && p->req.gpus > 0) {
		set_bad(&p->bad,
		        "annotation %s: the pod also requests %s; a share is part of one "
		        "device",
		        frac ? ANN_FRACTION : ANN_GPU_MEMORY, GPU_RES);
		return;
	}
	if (frac && mem) {
		set_bad(&p->bad, "annotations %s and %s: give one of them, not both", ANN_FRACTION,
		        ANN_GPU_MEMORY);
		return;
	}
	if (frac) {
		double f = 0;
		if (sc_parse_num(frac, 0, 1, &f) < 0 || f <= 0)
			set_bad(&p->bad, "annotation %s: expected a number in (0, 1], got \"%s\"",
			        ANN_FRACTION, frac);
		else if (f >= 0.9995)
			p->req.gpus = 1; /* a whole device, as KAI treats 1 */
		else
			p->req.gpu_milli = (int)fmax(1, round(f * 1000));
	}
	if (mem) {
		int64_t v = 0;
		if (sc_parse_i64(mem, 1, (int64_t)1 << 30, &v) < 0)
			set_bad(&p->bad,
			        "annotation %s: expected a positive number of MiB, got \"%s\"",
			        ANN_GPU_MEMORY, mem);
		else
			p->req.gpu_memory = v * MIB;
	}
	if (str_of(ann, ANN_FRACTION_DEVICES))
		set_bad(&p->bad,
		        "annotation %s: shares over several devices are not supported (request "
		        "whole devices with nvidia.com/gpu, or a share of one device)",
		        ANN_FRACTION_DEVICES);
}

/* Our own binding annotations: device indices and share. A malformed value
 * (written by hand) is ignored: the scheduler then picks devices itself. */
static void pod_devices(json_t *ann, sc_kpod_t *p)
{
	const char *g = str_of(ann, SC_K8S_ANN_GPUS), *s = str_of(ann, SC_K8S_ANN_SHARE);
	uint64_t v;
	while (g && *g && p->ngpus < SC_K8S_MAX_GPUS) {
		if (sc_parse_digits(&g, SC_K8S_MAX_GPUS - 1, &v) < 0 || (*g && *g != ',')) {
			p->ngpus = 0;
			break;
		}
		p->gpus[p->ngpus++] = (int)v;
		if (*g)
			g++;
	}
	if (s && sc_parse_int(s, 1, SC_GPU_MILLI - 1, &p->share_milli) < 0)
		p->share_milli = 0;
}

static void add_selector(sc_kpod_t *p, const char *k, const char *v)
{
	sc_label_t *n = sc_xrealloc(p->selector, (p->nselector + 1) * sizeof(*n));
	p->selector = n;
	p->selector[p->nselector++] = (sc_label_t){sc_xstrdup(k), sc_xstrdup(v)};
}

/* nodeSelector, plus required node affinity where it says the same thing
 * (one term, `In` with one value per key). Anything else that is required
 * cannot be honoured by the core and is refused rather than ignored; the
 * preferred kinds are soft and are ignored. */
static void pod_affinity(json_t *spec, sc_kpod_t *p)
{
	const char *k;
	json_t *v, *aff = json_object_get(spec, "affinity");
	json_object_foreach(json_object_get(spec, "nodeSelector"), k, v)
	{
		if (json_is_string(v))
			add_selector(p, k, json_string_value(v));
	}
	if (at(aff, "podAffinity", "requiredDuringSchedulingIgnoredDuringExecution") ||
	    at(aff, "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")) {
		set_bad(&p->bad, "spec.affinity: required pod (anti-)affinity is not supported by "
		                 "this scheduler");
		return;
	}
	json_t *req = at(at(aff, "nodeAffinity", NULL),
	                 "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms");
	if (!req)
		return;
	const char *where =
	    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
	if (json_array_size(req) != 1 || json_object_get(json_array_get(req, 0), "matchFields")) {
		set_bad(&p->bad, "%s: only one term of matchExpressions is supported", where);
		return;
	}
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(json_array_get(req, 0), "matchExpressions"), i, e)
	{
		const char *key = str_of(e, "key"), *op = str_of(e, "operator");
		json_t *vals = json_object_get(e, "values");
		if (!key || !op || strcmp(op, "In") != 0 || json_array_size(vals) != 1 ||
		    !json_is_string(json_array_get(vals, 0))) {
			set_bad(&p->bad,
			        "%s.nodeSelectorTerms[0].matchExpressions[%zu]: only `In` "
			        "with one value is supported",
			        where, i);
			return;
		}
		add_selector(p, key, json_string_value(json_array_get(vals, 0)));
	}
}

static void pod_tolerations(json_t *spec, sc_kpod_t *p)
{
	json_t *tols = json_object_get(spec, "tolerations"), *t;
	size_t i, n = json_array_size(tols);
	if (!n)
		return;
	p->tols = sc_xcalloc(n, sizeof(*p->tols));
	json_array_foreach(tols, i, t)
	{
		const char *key = str_of(t, "key"), *op = str_of(t, "operator");
		const char *eff = str_of(t, "effect");
		sc_ktoleration_t *o = &p->tols[p->ntols++];
		o->key = key && *key ? sc_xstrdup(key) : NULL;
		o->value = sc_xstrdup(str_of(t, "value"));
		o->effect = eff && *eff ? sc_xstrdup(eff) : NULL;
		o->exists = op && strcmp(op, "Exists") == 0;
	}
}

bool sc_ktoleration_matches(const sc_kpod_t *p, const sc_ktaint_t *t)
{
	for (size_t i = 0; i < p->ntols; i++) {
		const sc_ktoleration_t *o = &p->tols[i];
		if (o->effect && strcmp(o->effect, t->effect) != 0)
			continue;
		if (!o->key) {
			if (o->exists)
				return true;
			continue;
		}
		if (strcmp(o->key, t->key) != 0)
			continue;
		if (o->exists || strcmp(o->value ? o->value : "", t->value ? t->value : "") == 0)
			return true;
	}
	return false;
}

static int pod_phase(const char *s)
{
	if (!s || strcmp(s, "Pending") == 0)
		return SC_KP_PENDING;
	if (strcmp(s, "Running") == 0)
		return SC_KP_RUNNING;
	if (strcmp(s, "Succeeded") == 0)
		return SC_KP_SUCCEEDED;
	if (strcmp(s, "Failed") == 0)
		return SC_KP_FAILED;
	return SC_KP_UNKNOWN;
}

static void pod_condition(json_t *status, sc_kpod_t *p)
{
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(status, "conditions"), i, c)
	{
		const char *type = str_of(c, "type"), *st = str_of(c, "status");
		const char *reason = str_of(c, "reason");
		if (!type || strcmp(type, "PodScheduled") != 0)
			continue;
		p->cond_unsched = st && strcmp(st, "False") == 0 && reason &&
		                  strcmp(reason, "Unschedulable") == 0;
		p->cond_msg = sc_xstrdup(str_of(c, "message"));
		return;
	}
}

sc_kpod_t *sc_kpod_decode(json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata"), *spec = json_object_get(obj, "spec");
	json_t *status = json_object_get(obj, "status");
	json_t *labels = json_object_get(md, "labels"), *ann = json_object_get(md, "annotations");
	const char *ns = str_of(md, "namespace"), *name = str_of(md, "name");
	if (!ns || !name || !*ns || !*name)
		return NULL;
	sc_kpod_t *p = sc_xcalloc(1, sizeof(*p));
	p->key = xprintf("%s/%s", ns, name);
	p->nsname = sc_xstrdup(p->key);
	p->nsname[strlen(ns)] = '\0';
	p->ns = p->nsname;
	p->name = p->nsname + strlen(ns) + 1;
	p->uid = sc_xstrdup(str_of(md, "uid"));
	p->created = time_at(md, "creationTimestamp", NULL);
	p->deleting = json_is_string(json_object_get(md, "deletionTimestamp"));
	const char *node = str_of(spec, "nodeName");
	p->node = node && *node ? sc_xstrdup(node) : NULL;
	p->scheduler = sc_xstrdup(str_of(spec, "schedulerName"));
	p->prio_class = sc_xstrdup(str_of(spec, "priorityClassName"));
	json_t *prio = json_object_get(spec, "priority");
	p->priority = json_is_integer(prio) ? (int)json_integer_value(prio) : 0;
	p->phase = pod_phase(str_of(status, "phase"));
	p->started = time_at(status, "startTime", NULL);
	const char *g = str_of(ann, ANN_GROUP);
	if (!g)
		g = str_of(labels, ANN_GROUP);
	p->group = g && *g ? sc_xstrdup(g) : NULL;
	const char *q = str_of(labels, LABEL_QUEUE);
	if (!q)
		q = str_of(labels, LABEL_QUEUE_OLD);
	p->queue = q && *q ? sc_xstrdup(q) : NULL;
	pod_resources(spec, p);
	pod_shares(ann, p);
	pod_devices(ann, p);
	pod_affinity(spec, p);
	pod_tolerations(spec, p);
	pod_condition(status, p);
	return p;
}

void sc_kpod_free(sc_kpod_t *p)
{
	if (!p)
		return;
	free(p->key);
	free(p->nsname);
	free(p->uid);
	free(p->node);
	free(p->scheduler);
	free(p->group);
	free(p->queue);
	free(p->prio_class);
	for (size_t i = 0; i < p->nselector; i++) {
		free((char *)p->selector[i].key);
		free((char *)p->selector[i].value);
	}
	free(p->selector);
	for (size_t i = 0; i < p->ntols; i++) {
		free(p->tols[i].key);
		free(p->tols[i].value);
		free(p->tols[i].effect);
	}
	free(p->tols);
	free(p->cond_msg);
	free(p->bad);
	free(p);
}

/* ---- nodes -------------------------------------------------------------- */

sc_knode_t *sc_knode_decode(json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata"), *spec = json_object_get(obj, "spec");
	json_t *status = json_object_get(obj, "status");
	const char *name = str_of(md, "name"), *k;
	json_t *v;
	if (!name || !*name)
		return NULL;
	sc_knode_t *n = sc_xcalloc(1, sizeof(*n));
	n->key = sc_xstrdup(name);
	json_t *labels = json_object_get(md, "labels");
	n->labels = sc_xcalloc(json_object_size(labels) + 1, sizeof(*n->labels));
	json_object_foreach(labels, k, v)
	{
		if (json_is_string(v))
			n->labels[n->nlabels++] =
			    (sc_label_t){sc_xstrdup(k), sc_xstrdup(json_string_value(v))};
	}
	const char *model = str_of(labels, LABEL_GPU_MODEL),
	           *gmem = str_of(labels, LABEL_GPU_MEMORY);
	n->gpu_model = sc_xstrdup(model);
	int64_t mib;
	if (gmem && sc_parse_i64(gmem, 1, (int64_t)1 << 30, &mib) == 0)
		n->gpu_memory = mib * MIB;
	json_t *alloc = json_object_get(status, "allocatable");
	if (!alloc)
		alloc = json_object_get(status, "capacity");
	const char *cpu = str_of(alloc, "cpu"), *mem = str_of(alloc, "memory");
	const char *gpu = str_of(alloc, GPU_RES);
	int64_t q;
	if (cpu && sc_quantity_cpu(cpu, 0, &q) == 0)
		n->cpu_milli = q;
	if (mem && sc_quantity_memory(mem, 0, &q) == 0)
		n->memory = q;
	if (gpu && count_of(gpu, &q) == 0)
		n->gpus = q > SC_K8S_MAX_GPUS ? SC_K8S_MAX_GPUS : (int)q;
	json_t *us = json_object_get(spec, "unschedulable");
	n->unschedulable = json_is_true(us);
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(status, "conditions"), i, c)
	{
		const char *type = str_of(c, "type"), *st = str_of(c, "status");
		if (type && strcmp(type, "Ready") == 0)
			n->ready = st && strcmp(st, "True") == 0;
	}
	json_t *taints = json_object_get(spec, "taints");
	n->taints = sc_xcalloc(json_array_size(taints) + 1, sizeof(*n->taints));
	json_array_foreach(taints, i, c)
	{
		const char *key = str_of(c, "key"), *eff = str_of(c, "effect");
		if (!key || !eff ||
		    (strcmp(eff, "NoSchedule") != 0 && strcmp(eff, "NoExecute") != 0))
			continue;
		n->taints[n->ntaints++] =
		    (sc_ktaint_t){sc_xstrdup(key), sc_xstrdup(str_of(c, "value")), sc_xstrdup(eff)};
	}
	return n;
}

void sc_knode_free(sc_knode_t *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->nlabels; i++) {
		free((char *)n->labels[i].key);
		free((char *)n->labels[i].value);
	}
	free(n->labels);
	for (size_t i = 0; i < n->ntaints; i++) {
		free(n->taints[i].key);
		free(n->taints[i].value);
		free(n->taints[i].effect);
	}
	free(n->taints);
	free(n->gpu_model);
	free(n->key);
	free(n);
}

/* ---- PodGroups, Queues, PriorityClasses --------------------------------- */

static void meta_decode(sc_kmeta_t *m, json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata"), *st = json_object_get(obj, "status");
	const char *uid = str_of(md, "uid"), *rv = str_of(md, "resourceVersion");
	m->uid = uid ? sc_xstrdup(uid) : NULL;
	m->rv = rv ? sc_xstrdup(rv) : NULL;
	m->status = json_is_object(st) ? json_incref(st) : NULL;
	json_t *d = json_pack("{s:O?,s:O?}", "spec", json_object_get(obj, "spec"), "labels",
	                      json_object_get(md, "labels"));
	m->spec_digest = d ? json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(d);
	if (!m->spec_digest)
		sc_oom();
}

static void meta_free(sc_kmeta_t *m)
{
	free(m->uid);
	free(m->rv);
	json_decref(m->status);
	free(m->spec_digest);
}

bool sc_kmeta_same_spec(const sc_kmeta_t *a, const sc_kmeta_t *b)
{
	return a->spec_digest && b->spec_digest && strcmp(a->spec_digest, b->spec_digest) == 0 &&
	       a->uid && b->uid && strcmp(a->uid, b->uid) == 0;
}

sc_kgroup_t *sc_kgroup_decode(json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata"), *spec = json_object_get(obj, "spec");
	const char *ns = str_of(md, "namespace"), *name = str_of(md, "name");
	if (!ns || !name || !*ns || !*name)
		return NULL;
	sc_kgroup_t *g = sc_xcalloc(1, sizeof(*g));
	g->key = xprintf("%s/%s", ns, name);
	g->name = sc_xstrdup(name);
	meta_decode(&g->meta, obj);
	g->created = time_at(md, "creationTimestamp", NULL);
	json_t *mm = json_object_get(spec, "minMember");
	if (mm &&
	    (!json_is_integer(mm) || json_integer_value(mm) < 0 || json_integer_value(mm) > 100000))
		set_bad(&g->bad, "PodGroup %s: spec.minMember: expected 0..100000", g->key);
	else
		g->min_member = mm ? (int)json_integer_value(mm) : 0;
	const char *q = str_of(spec, "queue");
	g->queue = q && *q ? sc_xstrdup(q) : NULL;
	const char *pc = str_of(spec, "priorityClassName");
	g->prio_class = pc && *pc ? sc_xstrdup(pc) : NULL;
	const char *pre = str_of(spec, "preemptibility");
	g->preemptible = -1;
	if (pre && strcmp(pre, "preemptible") == 0)
		g->preemptible = 1;
	else if (pre && strcmp(pre, "non-preemptible") == 0)
		g->preemptible = 0;
	else if (pre && *pre)
		set_bad(&g->bad,
		        "PodGroup %s: spec.preemptibility: expected preemptible or "
		        "non-preemptible, got \"%s\"",
		        g->key, pre);
	json_t *tc = json_object_get(spec, "topologyConstraint");
	const char *req = str_of(tc, "requiredTopologyLevel"),
	           *pref = str_of(tc, "preferredTopologyLevel");
	g->topo_required = req && *req ? sc_xstrdup(req) : NULL;
	g->topo_preferred = pref && *pref ? sc_xstrdup(pref) : NULL;
	if (json_array_size(json_object_get(spec, "subGroups")))
		set_bad(&g->bad, "PodGroup %s: spec.subGroups: not supported by this scheduler",
		        g->key);
	return g;
}

void sc_kgroup_free(sc_kgroup_t *g)
{
	if (!g)
		return;
	free(g->key);
	free(g->name);
	free(g->queue);
	free(g->prio_class);
	free(g->topo_required);
	free(g->topo_preferred);
	free(g->bad);
	meta_free(&g->meta);
	free(g);
}

/* The queue through the manifest decoder, so that a KAI Queue means the
 * same here as in `starcloud schedule`. Only the fields a user writes are
 * passed on: the API adds bookkeeping (managedFields, status) that the
 * strict decoder would rightly refuse in a file. */
sc_kqueue_t *sc_kqueue_decode(json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata");
	const char *name = str_of(md, "name");
	if (!name || !*name)
		return NULL;
	sc_kqueue_t *q = sc_xcalloc(1, sizeof(*q));
	q->key = sc_xstrdup(name);
	meta_decode(&q->meta, obj);
	json_t *m = json_pack("{s:s}", "name", name);
	json_t *ts = json_object_get(md, "creationTimestamp");
	if (json_is_string(ts))
		json_object_set(m, "creationTimestamp", ts);
	json_t *doc = json_pack("{s:s,s:s,s:o}", "apiVersion", "scheduling.run.ai/v2", "kind",
	                        "Queue", "metadata", m);
	/* The parent is checked across all queues by the world (kworld.c); a
	 * set of one queue would call every parent missing. */
	json_t *spec = json_object_get(obj, "spec");
	json_t *parent = json_object_get(spec, "parentQueue");
	if (json_is_object(spec)) {
		spec = json_copy(spec);
		json_object_del(spec, "parentQueue");
		json_object_set_new(doc, "spec", spec);
	} else if (spec) {
		json_object_set(doc, "spec", spec);
	}
	if (parent && !json_is_null(parent) &&
	    (!json_is_string(parent) || !*json_string_value(parent))) {
		json_decref(doc);
		q->bad = xprintf("Queue %s: spec.parentQueue: expected a queue name", name);
		q->spec.name = q->key;
		return q;
	}
	q->parent = json_is_string(parent) ? sc_xstrdup(json_string_value(parent)) : NULL;
	sc_manifest_error_t err;
	sc_snapshot_t snap;
	q->set = sc_manifest_set_new();
	int rc = sc_manifest_add_json(q->set, doc, &err);
	json_decref(doc);
	if (rc >= 0)
		rc = sc_manifest_snapshot(q->set, 0, &snap, &err);
	if (rc < 0 || snap.nqueues != 1) {
		char buf[1200];
		q->bad = sc_xstrdup(sc_manifest_error_format(&err, buf, sizeof(buf)));
		sc_manifest_set_free(q->set);
		q->set = NULL;
		q->spec.name = q->key;
		return q;
	}
	q->spec = snap.queues[0];
	q->spec.parent = q->parent;
	return q;
}

void sc_kqueue_free(sc_kqueue_t *q)
{
	if (!q)
		return;
	sc_manifest_set_free(q->set);
	free(q->key);
	free(q->parent);
	free(q->bad);
	meta_free(&q->meta);
	free(q);
}

sc_kclass_t *sc_kclass_decode(json_t *obj)
{
	const char *name = str_at(obj, "metadata", "name");
	if (!name || !*name)
		return NULL;
	sc_kclass_t *c = sc_xcalloc(1, sizeof(*c));
	c->key = sc_xstrdup(name);
	json_t *v = json_object_get(obj, "value");
	c->value = json_is_integer(v) ? (int)json_integer_value(v) : 0;
	c->global_default = json_is_true(json_object_get(obj, "globalDefault"));
	return c;
}

void sc_kclass_free(sc_kclass_t *c)
{
	if (!c)
		return;
	free(c->key);
	free(c);
}
