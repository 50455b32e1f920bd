/* Packing simulator. See packing.h for the method. */
#include "sim/packing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/frag.h"
#include "sim/packing_int.h"
#include "sim/policies.h"
#include "sim/rng.h"
#include "starcloud/cluster.h"

#define MIB ((int64_t)1 << 20)
#define MAX_MODELS 64
#define NBUCKETS 256 /* arrived-demand percent buckets kept while running */

typedef sc__sim_spec_t spec_t;
typedef sc__sim_pod_t pod_t;

/* ---- preparing a workload ---------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_node(const void *a, const void *b)
{
	return strcmp(((const sc_node_spec_t *)a)->name, ((const sc_node_spec_t *)b)->name);
}

static int cmp_pod(const void *a, const void *b)
{
	return strcmp(((const pod_t *)a)->name, ((const pod_t *)b)->name);
}

/* Splits "A|B|A" into its distinct non-empty names. */
static int spec_parse(spec_t *s, const char *text)
{
	s->text = text;
	s->nmodels = 0;
	s->models = calloc(strlen(text) / 2 + 1, sizeof(char *));
	if (!s->models)
		return SC_ENOMEM;
	const char *p = text;
	while (*p) {
		const char *e = strchr(p, '|');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len > 0) {
			char *m = strndup(p, len);
			if (!m)
				return SC_ENOMEM;
			s->models[s->nmodels++] = m;
		}
		p += len + (e ? 1 : 0);
	}
	return 0;
}

static int find_spec(const sc_sim_workload_t *w, const char *text)
{
	int lo = 0, hi = w->nspecs - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		int c = strcmp(text, w->specs[mid].text);
		if (c == 0)
			return mid;
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return 0;
}

static int build_specs(sc_sim_workload_t *w, const sc_trace_pods_t *pods)
{
	const char **texts = malloc((pods->n + 1) * sizeof(char *));
	if (!texts)
		return SC_ENOMEM;
	texts[0] = "";
	for (size_t i = 0; i < pods->n; i++)
		texts[i + 1] = pods->v[i].gpu_spec;
	qsort(texts, pods->n + 1, sizeof(char *), cmp_str);
	size_t n = 0;
	for (size_t i = 0; i <= pods->n; i++)
		if (n == 0 || strcmp(texts[n - 1], texts[i]) != 0)
			texts[n++] = texts[i];
	int rc = 0;
	w->specs = calloc(n, sizeof(spec_t));
	if (!w->specs)
		rc = SC_ENOMEM;
	for (size_t i = 0; rc == 0 && i < n; i++, w->nspecs++)
		rc = spec_parse(&w->specs[i], texts[i]);
	free(texts);
	return rc;
}

static void fill_node(sc_node_spec_t *s, const sc_trace_node_t *t)
{
	memset(s, 0, sizeof(*s));
	s->name = t->name;
	s->cpu_milli = t->cpu_milli;
	s->memory = t->memory_mib * MIB;
	s->gpu_count = t->gpu;
	s->gpu_model = t->gpu > 0 ? t->model : NULL;
}

static void fill_pod(const sc_sim_workload_t *w, pod_t *p, sc_pod_shape_t *sh,
                     const sc_trace_pod_t *t)
{
	memset(p, 0, sizeof(*p));
	p->name = t->name;
	p->req.cpu_milli = t->cpu_milli;
	p->req.memory = t->memory_mib * MIB;
	/* A share is one GPU with less than all of it; otherwise whole GPUs
	 * (the reader guarantees num_gpu > 1 means gpu_milli == 1000). */
	if (t->num_gpu == 1 && t->gpu_milli < SC_GPU_MILLI)
		p->req.gpu_milli = t->gpu_milli;
	else
		p->req.gpus = t->num_gpu;
	p->spec = t->num_gpu > 0 ? find_spec(w, t->gpu_spec) : 0;
	p->per_gpu = t->gpu_milli;
	p->milli = (int64_t)t->num_gpu * t->gpu_milli;
	sh->cpu = t->cpu_milli;
	sh->milli = t->gpu_milli;
	sh->num = t->num_gpu;
	/* Typical pods keep the spec even for CPU pods: the reference keys
	 * shapes by all four fields. */
	sh->spec = find_spec(w, t->gpu_spec);
	sh->models = ~(uint64_t)0;
}

/* True when some node has GPU model `model`. */
static bool model_known(const sc_sim_workload_t *w, const char *model)
{
	for (size_t i = 0; i < w->nnodes; i++)
		if (w->nodes[i].gpu_count > 0 && strcmp(w->nodes[i].gpu_model, model) == 0)
			return true;
	return false;
}

/* A pod list the run cannot measure, or a gpu_spec naming a model no node
 * has (a typo would otherwise turn those pods into silent failures). */
static int check_pods(const sc_sim_workload_t *w, const sc_trace_pods_t *pods, char *msg,
                      size_t msgsize)
{
	int64_t milli = 0;
	for (size_t i = 0; i < pods->n; i++)
		milli += (int64_t)pods->v[i].num_gpu * pods->v[i].gpu_milli;
	if (milli == 0) {
		snprintf(msg, msgsize,
		         "%s: no GPU pods (%zu pods, none asks for a GPU): the packing "
		         "simulation measures GPU allocation against GPU demand",
		         w->name, pods->n);
		return SC_EINVAL;
	}
	for (int s = 0; s < w->nspecs; s++)
		for (int k = 0; k < w->specs[s].nmodels; k++) {
			const char *m = w->specs[s].models[k];
			if (model_known(w, m))
				continue;
			const char *pod = "?";
			for (size_t i = 0; i < pods->n && pod[0] == '?'; i++)
				if (pods->v[i].num_gpu > 0 &&
				    strcmp(pods->v[i].gpu_spec, w->specs[s].text) == 0)
					pod = pods->v[i].name;
			if (pod[0] == '?')
				continue; /* only CPU pods carry it, and they ignore it */
			snprintf(msg, msgsize,
			         "%s: pod %s: gpu_spec \"%s\": no node has GPU model \"%s\"",
			         w->name, pod, w->specs[s].text, m);
			return SC_EINVAL;
		}
	return 0;
}

int sc_sim_workload_new(const sc_trace_nodes_t *nodes, const sc_trace_pods_t *pods,
                        const char *name, sc_sim_workload_t **out, char *msg, size_t msgsize)
{
	*out = NULL;
	sc_sim_workload_t *w = calloc(1, sizeof(*w));
	if (!w)
		return SC_ENOMEM;
	snprintf(w->name, sizeof(w->name), "%s", name);
	w->nodes = calloc(nodes->n ? nodes->n : 1, sizeof(sc_node_spec_t));
	w->pods = calloc(pods->n ? pods->n : 1, sizeof(pod_t));
	w->shapes = calloc(pods->n ? pods->n : 1, sizeof(sc_pod_shape_t));
	int rc = !w->nodes || !w->pods || !w->shapes ? SC_ENOMEM : build_specs(w, pods);
	if (rc < 0)
		goto fail;
	w->nnodes = nodes->n;
	for (size_t i = 0; i < nodes->n; i++) {
		fill_node(&w->nodes[i], &nodes->v[i]);
		w->total_gpus += nodes->v[i].gpu;
	}
	qsort(w->nodes, w->nnodes, sizeof(*w->nodes), cmp_node);
	w->npods = pods->n;
	for (size_t i = 0; i < pods->n; i++)
		fill_pod(w, &w->pods[i], &w->shapes[i], &pods->v[i]);
	/* Shapes are only counted, so their order need not follow the pods'. */
	qsort(w->pods, w->npods, sizeof(*w->pods), cmp_pod);
	if (w->total_gpus == 0) {
		snprintf(msg, msgsize, "%s: the node list has no GPU", name);
		rc = SC_EINVAL;
		goto fail;
	}
	rc = check_pods(w, pods, msg, msgsize);
	if (rc < 0)
		goto fail;
	*out = w;
	return 0;
fail:
	sc_sim_workload_free(w);
	return rc;
}

void sc_sim_workload_free(sc_sim_workload_t *w)
{
	if (!w)
		return;
	for (int i = 0; i < w->nspecs; i++) {
		for (int k = 0; k < w->specs[i].nmodels; k++)
			free(w->specs[i].models[k]);
		free(w->specs[i].models);
	}
	free(w->specs);
	free(w->nodes);
	free(w->pods);
	free(w->shapes);
	free(w);
}

const char *sc_sim_workload_name(const sc_sim_workload_t *w)
{
	return w->name;
}

int sc_sim_workload_gpus(const sc_sim_workload_t *w)
{
	return w->total_gpus;
}

void sc_sim_config_default(sc_sim_config_t *c)
{
	c->policy = "default";
	c->seed = 42;
	c->target = 1.3;
	c->coverage = 0.95;
}

/* ---- one run ------------------------------------------------------------ */

typedef struct run {
	const sc_sim_workload_t *w;
	sc_rng_t rng;
	const pod_t **order; /* pods to place, in arrival order */
	size_t norder;
	sc_node_spec_t *nodes; /* in the run's random order */
	sc_cluster_t *cluster;
	/* Per spec: allowed model ids for the cluster's filter. */
	int (*spec_ids)[MAX_MODELS];
	int *spec_nids;
	uint64_t *spec_mask;
	sc_frag_t *frag;
	sc_policy_t *policy;
	/* Curve accumulators per arrived percent. */
	double sum_alloc[NBUCKETS], sum_frag[NBUCKETS];
	long count[NBUCKETS];
} run_t;

/* Fisher-Yates over the name-ordered pods. */
static int shuffle_pods(run_t *r)
{
	const sc_sim_workload_t *w = r->w;
	r->order = malloc((w->npods ? w->npods : 1) * sizeof(*r->order));
	if (!r->order)
		return SC_ENOMEM;
	for (size_t i = 0; i < w->npods; i++)
		r->order[i] = &w->pods[i];
	r->norder = w->npods;
	for (size_t i = w->npods; i > 1; i--) {
		size_t j = (size_t)sc_rng_below(&r->rng, i);
		const pod_t *t = r->order[i - 1];
		r->order[i - 1] = r->order[j];
		r->order[j] = t;
	}
	return 0;
}

/* Removes random pods until the request is at most the target. */
static void tune_down(run_t *r, int64_t *total, double target)
{
	while ((double)*total > target && r->norder > 0) {
		size_t k = (size_t)sc_rng_below(&r->rng, r->norder);
		*total -= r->order[k]->milli;
		memmove(&r->order[k], &r->order[k + 1], (r->norder - k - 1) * sizeof(*r->order));
		r->norder--;
	}
}

/* Appends copies of random original pods while they fit under the target.
 * Like the reference, the stop test uses the drawn pod's per-GPU request,
 * so a multi-GPU pod may overshoot slightly; the curves then simply reach
 * a little past the target. */
static int tune_up(run_t *r, int64_t *total, double target)
{
	const sc_sim_workload_t *w = r->w;
	size_t cap = r->norder;
	for (;;) {
		const pod_t *p = &w->pods[sc_rng_below(&r->rng, w->npods)];
		if ((double)(*total + p->per_gpu) > target)
			return 0;
		if (r->norder == cap) {
			cap = cap * 2 + 16;
			const pod_t **n = realloc(r->order, cap * sizeof(*n));
			if (!n)
				return SC_ENOMEM;
			r->order = n;
		}
		r->order[r->norder++] = p;
		*total += p->milli;
	}
}

static int inflate(run_t *r, double ratio)
{
	if (ratio <= 0 || r->w->npods == 0)
		return 0;
	int64_t total = 0;
	for (size_t i = 0; i < r->norder; i++)
		total += r->order[i]->milli;
	double target = ratio * (double)r->w->total_gpus * SC_GPU_MILLI;
	if ((double)total > target)
		tune_down(r, &total, target);
	else if ((double)total < target && total > 0)
		return tune_up(r, &total, target);
	return 0;
}

/* Places node i (name order) at a random position: equal scores then go to
 * a random node, as the reference's random name prefixes make them. */
static int permute_nodes(run_t *r)
{
	const sc_sim_workload_t *w = r->w;
	size_t n = w->nnodes;
	r->nodes = malloc((n ? n : 1) * sizeof(*r->nodes));
	if (!r->nodes)
		return SC_ENOMEM;
	memcpy(r->nodes, w->nodes, n * sizeof(*r->nodes));
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)sc_rng_below(&r->rng, i);
		sc_node_spec_t t = r->nodes[i - 1];
		r->nodes[i - 1] = r->nodes[j];
		r->nodes[j] = t;
	}
	return 0;
}

/* Model ids depend on node order, so specs are resolved per run. */
static int resolve_specs(run_t *r, char *msg, size_t msgsize)
{
	const sc_sim_workload_t *w = r->w;
	if (sc_cluster_nmodels(r->cluster) > MAX_MODELS) {
		snprintf(msg, msgsize, "%s: more than %d GPU models", w->name, MAX_MODELS);
		return SC_EINVAL;
	}
	r->spec_ids = calloc((size_t)w->nspecs, sizeof(*r->spec_ids));
	r->spec_nids = calloc((size_t)w->nspecs, sizeof(int));
	r->spec_mask = calloc((size_t)w->nspecs, sizeof(uint64_t));
	if (!r->spec_ids || !r->spec_nids || !r->spec_mask)
		return SC_ENOMEM;
	for (int s = 0; s < w->nspecs; s++) {
		const spec_t *sp = &w->specs[s];
		if (sp->nmodels == 0) {
			r->spec_mask[s] = ~(uint64_t)0;
			continue;
		}
		for (int k = 0; k < sp->nmodels; k++) {
			int id = sc_cluster_model_id(r->cluster, sp->models[k]);
			if (id < 0 || (r->spec_mask[s] >> id & 1))
				continue; /* a model no node has, or repeated */
			r->spec_ids[s][r->spec_nids[s]++] = id;
			r->spec_mask[s] |= (uint64_t)1 << id;
		}
	}
	return 0;
}

static int setup_frag(run_t *r, double coverage)
{
	const sc_sim_workload_t *w = r->w;
	sc_typical_t *t = NULL;
	int nt = sc_typical_pods(w->shapes, w->npods, coverage, &t);
	if (nt < 0)
		return nt;
	for (int k = 0; k < nt; k++)
		t[k].shape.models = r->spec_mask[t[k].shape.spec];
	r->frag = sc_frag_new(t, (size_t)nt, w->nnodes);
	free(t);
	if (!r->frag)
		return SC_ENOMEM;
	for (size_t i = 0; i < w->nnodes; i++)
		sc_frag_update(r->frag, sc_cluster_node(r->cluster, i));
	return 0;
}

static void record(run_t *r, int64_t arrived, int64_t used)
{
	double cap = (double)r->w->total_gpus * SC_GPU_MILLI;
	/* The reference rounds the arrived share to a whole percent (Python's
	 * round: half to even, as rint does) and the allocation to 0.01. */
	double k = rint(100.0 * (double)arrived / cap);
	if (k < 0 || k >= NBUCKETS)
		return;
	int b = (int)k;
	r->sum_alloc[b] += rint(10000.0 * (double)used / cap) / 100.0;
	r->sum_frag[b] += 100.0 * sc_frag_total(r->frag) / cap;
	r->count[b]++;
}

/* Mean of bucket k, or of k-1..k+1 when k is empty (the reference's
 * fallback), or NAN. */
static double bucket_mean(const run_t *r, const double *sum, int k)
{
	if (r->count[k] > 0)
		return sum[k] / (double)r->count[k];
	double s = 0;
	long n = 0;
	for (int j = k - 1; j <= k + 1; j++)
		if (j >= 0 && j < NBUCKETS) {
			s += sum[j];
			n += r->count[j];
		}
	return n > 0 ? s / (double)n : NAN;
}

static void place_all(run_t *r, sc_sim_result_t *res)
{
	int64_t arrived = 0, used = 0;
	sc_filter_t f = {0};
	static const int none = -1; /* models list for "no model allowed" */
	for (size_t i = 0; i < r->norder; i++) {
		const pod_t *p = r->order[i];
		arrived += p->milli;
		bool gpu = p->milli > 0;
		f.models = gpu && r->w->specs[p->spec].nmodels > 0
		               ? (r->spec_nids[p->spec] > 0 ? r->spec_ids[p->spec] : &none)
		               : NULL;
		f.nmodels = f.models ? (size_t)r->spec_nids[p->spec] : 0;
		sc_assign_t a;
		if (sc_cluster_best(r->cluster, &p->req, &f, r->policy, &a) == 0 &&
		    sc_cluster_take(r->cluster, &p->req, &a) == 0) {
			const sc_node_view_t *n = sc_cluster_node(r->cluster, a.node);
			if (r->policy->taken)
				r->policy->taken(r->policy->ctx, r->cluster, n, &p->req, &a);
			sc_frag_update(r->frag, n);
			used += p->milli;
		} else {
			res->failed_pods++;
		}
		record(r, arrived, used);
	}
	double cap = (double)r->w->total_gpus * SC_GPU_MILLI;
	res->final_alloc = 100.0 * (double)used / cap;
	res->arrived_pct = 100.0 * (double)arrived / cap;
}

static void run_free(run_t *r)
{
	sc_sim_policy_free(r->policy);
	sc_frag_free(r->frag);
	sc_cluster_free(r->cluster);
	free(r->spec_ids);
	free(r->spec_nids);
	free(r->spec_mask);
	free(r->nodes);
	free(r->order);
}

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run_setup(run_t *r, const sc_sim_config_t *c, char *msg, size_t msgsize)
{
	/* Stream 1 drives the workload (shuffle, inflation, node order) so
	 * that every policy sees the same pods for the same seed. */
	sc_rng_seed(&r->rng, c->seed, 1);
	int rc = shuffle_pods(r);
	if (rc == 0)
		rc = inflate(r, c->target);
	if (rc == 0)
		rc = permute_nodes(r);
	if (rc < 0)
		return rc;
	r->cluster = sc_cluster_new(r->nodes, r->w->nnodes, &rc);
	if (!r->cluster) {
		snprintf(msg, msgsize, "%s: cannot build the cluster: %s", r->w->name,
		         sc_strerror(rc));
		return rc;
	}
	rc = resolve_specs(r, msg, msgsize);
	if (rc == 0)
		rc = setup_frag(r, c->coverage);
	if (rc < 0)
		return rc;
	/* Every shape, not only the typical 95 %: the `default` policy's
	 * restricted shapes are rare ones (scarce.h). */
	sc_typical_t *all = NULL;
	int nall = sc_typical_pods(r->w->shapes, r->w->npods, 1.0, &all);
	if (nall < 0)
		return nall;
	for (int k = 0; k < nall; k++)
		all[k].shape.models = r->spec_mask[all[k].shape.spec];
	sc_sim_env_t env = {.frag = r->frag,
	                    .cluster = r->cluster,
	                    .seed = c->seed,
	                    .shapes = all,
	                    .nshapes = (size_t)nall};
	rc = sc_sim_policy_new(c->policy, &env, &r->policy);
	free(all);
	if (rc == SC_EINVAL)
		snprintf(msg, msgsize, "unknown policy \"%s\"", c->policy);
	return rc;
}

int sc__sim_arrivals(const sc_sim_workload_t *w, const sc_sim_config_t *c,
                     const sc__sim_pod_t ***order, size_t *n)
{
	/* The first steps of run_setup, on the same stream: the pods come
	 * out in the order a run with this seed places them. */
	run_t r;
	memset(&r, 0, sizeof(r));
	r.w = w;
	sc_rng_seed(&r.rng, c->seed, 1);
	int rc = shuffle_pods(&r);
	if (rc == 0)
		rc = inflate(&r, c->target);
	if (rc < 0) {
		free(r.order);
		return rc;
	}
	*order = r.order;
	*n = r.norder;
	return 0;
}

int sc_sim_packing_run(const sc_sim_workload_t *w, const sc_sim_config_t *c, sc_sim_result_t *res,
                       char *msg, size_t msgsize)
{
	double t0 = now_seconds();
	memset(res, 0, sizeof(*res));
	run_t *r = calloc(1, sizeof(*r));
	if (!r)
		return SC_ENOMEM;
	r->w = w;
	int rc = run_setup(r, c, msg, msgsize);
	if (rc == 0) {
		snprintf(res->workload, sizeof(res->workload), "%s", w->name);
		snprintf(res->policy, sizeof(res->policy), "%s", c->policy);
		res->seed = c->seed;
		res->total_gpus = w->total_gpus;
		res->pods = r->norder;
		place_all(r, res);
		for (int k = 0; k <= SC_SIM_CURVE_MAX; k++) {
			res->alloc[k] = bucket_mean(r, r->sum_alloc, k);
			res->frag[k] = bucket_mean(r, r->sum_frag, k);
		}
		res->frag_states = sc_frag_memo_size(r->frag);
	}
	run_free(r);
	free(r);
	res->wall_seconds = now_seconds() - t0;
	return rc;
}

double sc_sim_curve_at(const double *curve, int k)
{
	return k >= 0 && k <= SC_SIM_CURVE_MAX ? curve[k] : NAN;
}
