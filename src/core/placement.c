/* Placing the pods of one job inside an open statement.
 *
 * Filters, in the order a node is rejected: schedulable, node selector, GPU
 * model, topology domain, spread cap, then resources. Scoring is the
 * indexed binpack or spread search of the cluster model. A job with a
 * required topology level is tried one domain at a time, best domain first,
 * and rolled back from each domain where its gang does not fit; a preferred
 * level is tried the same way and then dropped. */
#include <string.h>

#include "core/statement.h"
#include "core/reservation.h"

typedef struct place_ctx {
	sc_sched_t *s;
	int job;
	const topo_level_t *level; /* domain constraint, or NULL */
	int domain;
	int cap;      /* pods of this job per node, 0 = none */
	int task_cap; /* pods of the task being placed per node, 0 = none */
	int first;    /* the task's pods: first .. first + task_pods - 1 */
	int task_pods;
} place_ctx_t;

/* Pods of the job among lo .. hi-1 placed on node. */
static int pods_on_node(const place_ctx_t *x, int lo, int hi, uint32_t node)
{
	const sjob_t *jb = &x->s->jobs[x->job];
	int n = 0;
	for (int p = lo; p < hi; p++)
		if ((jb->pods[p].phase == SC_POD_RUNNING ||
		     jb->pods[p].phase == SC_POD_RELEASING) &&
		    sc__pod_at(&jb->pods[p])->node == node)
			n++;
	return n;
}

static bool accept_node(void *ctx, const sc_node_view_t *n)
{
	const place_ctx_t *x = ctx;
	if (x->level && x->level->node_domain[n->index] != x->domain)
		return false;
	if (x->cap > 0 && pods_on_node(x, 0, x->s->jobs[x->job].total, n->index) >= x->cap)
		return false;
	if (x->task_cap > 0 &&
	    pods_on_node(x, x->first, x->first + x->task_pods, n->index) >= x->task_cap)
		return false;
	return sc__reservation_allows(x->s, x->job, n->index);
}

/* Resolves a task's allowed models and selector into a filter; ids must
 * have room for SC_MAX_MODEL_FILTER entries. */
void sc__task_filter(const sc_sched_t *s, const sc_task_spec_t *t, int *ids, sc_filter_t *f)
{
	memset(f, 0, sizeof(*f));
	bool gpu = t->req.gpus > 0 || t->req.gpu_milli > 0 || t->req.gpu_memory > 0;
	if (gpu && t->ngpu_models) {
		size_t n = 0;
		for (size_t k = 0; k < t->ngpu_models && n < SC_MAX_MODEL_FILTER; k++) {
			/* "" is how nodes without a model are interned: a job
			 * that names models never matches them. */
			if (!t->gpu_models[k] || !*t->gpu_models[k])
				continue;
			int id = sc_cluster_model_id(s->cluster, t->gpu_models[k]);
			if (id >= 0)
				ids[n++] = id;
		}
		f->models = ids;
		f->nmodels = n;
	}
	f->selector = t->selector;
	f->nselector = t->nselector;
}

static void task_filter(const sc_sched_t *s, const sc_task_spec_t *t, int *ids, sc_filter_t *f,
                        place_ctx_t *x)
{
	sc__task_filter(s, t, ids, f);
	f->accept = accept_node;
	f->accept_ctx = x;
}

static int spread_cap(const sc_sched_t *s, const sjob_t *j)
{
	int factor = j->spec->spread_factor;
	if (factor <= 0 && j->spec->serving)
		factor = s->snap->config.serving_spread;
	if (factor <= 1 || j->total <= 1)
		return 0;
	return (j->total + factor - 1) / factor;
}

/* The spread holds for each task too, beside the job-wide cap: a task's
 * replicas are what stands in for each other (a Deployment's tasks are its
 * roles and versions). With the job-wide cap alone, a disaggregated
 * Deployment's 2 prefill and 2 decode pods met a spread of 2 with each role
 * on one node, and one node's loss took every decode replica at once (the
 * soak of issue 23). */
static void task_spread(const sc_sched_t *s, const sjob_t *j, int first, int replicas,
                        place_ctx_t *x)
{
	int factor = j->spec->spread_factor;
	if (factor <= 0 && j->spec->serving)
		factor = s->snap->config.serving_spread;
	x->first = first;
	x->task_pods = replicas;
	x->task_cap = factor > 1 && replicas > 1 && j->spec->ntasks > 1
	                  ? (replicas + factor - 1) / factor
	                  : 0;
}

static bool job_spread(const sc_sched_t *s, const sjob_t *j)
{
	int p = j->spec->placement ? j->spec->placement : s->snap->config.gpu_placement;
	return p == SC_PLACE_SPREAD;
}

/* Would this share open a whole idle device while packing? KAI's GPU
 * sharing would rather wait on a shared device being released. */
static bool opens_device(const sc_sched_t *s, const sc_request_t *r, const sc_assign_t *a,
                         int devpol)
{
	if (devpol != SC_DEV_PACK || r->mig || r->gpus > 0 || (!r->gpu_milli && !r->gpu_memory) ||
	    !sc__cluster_has_releasing(s->cluster))
		return false;
	const sc_node_view_t *n = sc_cluster_node(s->cluster, a->node);
	return n->gpu_free[a->gpus[0]] == SC_GPU_MILLI;
}

/* Places the job's next step (jb->step pending pods, in task order). Once
 * a pod of a task finds no node, the task's later pods are not tried: free
 * capacity only shrinks within the job, so they would fail too. The first
 * failure of each task is explained while the job's tentative pods are
 * still in place. */
static int place_pods(sc_sched_t *s, sc_stmt_t *st, place_ctx_t *x, const char **why)
{
	sjob_t *jb = &s->jobs[x->job];
	const sc_job_spec_t *js = jb->spec;
	bool spread = job_spread(s, jb);
	int devpol =
	    s->snap->config.device_placement == SC_PLACE_SPREAD ? SC_DEV_SPREAD : SC_DEV_PACK;
	int placed = 0, p = 0;
	for (size_t t = 0; t < js->ntasks && placed < jb->step; t++) {
		const sc_task_spec_t *ts = &js->tasks[t];
		int ids[SC_MAX_MODEL_FILTER];
		sc_filter_t f;
		task_filter(s, ts, ids, &f, x);
		task_spread(s, jb, p, ts->replicas, x);
		bool failed = false;
		for (int r = 0; r < ts->replicas; r++, p++) {
			if (failed || placed >= jb->step || jb->pods[p].phase != SC_POD_PENDING)
				continue;
			sc_assign_t a;
			s->placements_tried++;
			int rc =
			    sc_cluster_best_indexed(s->cluster, &ts->req, &f, spread, devpol, &a);
			if (rc == 0 && opens_device(s, &ts->req, &a, devpol) &&
			    sc__cluster_shared_pipe(s->cluster, &ts->req, &f, &a) == 0) {
				rc = sc__stmt_allocate_pipe(st, x->job, p, &a);
			} else if (rc == 0) {
				rc = sc__stmt_allocate(st, x->job, p, &a);
				/* Beside a pod that waits for its place: waits too. */
				if (rc == 0 && a.gpu_milli > 0 &&
				    sc_cluster_node(s->cluster, a.node)->gpu_wait[a.gpus[0]])
					st->ops[st->nops - 1].pipelined = true;
			} else if (rc == SC_ENOFIT && sc__cluster_has_releasing(s->cluster)) {
				/* KAI's pipelineTaskToNode: onto resources being
				 * released, to start once they are free. */
				rc = sc__cluster_best_pipe(s->cluster, &ts->req, &f, spread, devpol,
				                           &a);
				if (rc == 0)
					rc = sc__stmt_allocate_pipe(st, x->job, p, &a);
			}
			if (rc == SC_ENOMEM)
				return rc;
			if (rc == 0) {
				placed++;
				continue;
			}
			failed = true;
			if (why && !*why && !s->quiet)
				*why = sc__explain_task(s, x->job, (int)t, jb->nrunning,
				                        jb->min_member, &f);
		}
	}
	return placed;
}

/* Free GPU milli (or CPU for CPU-only jobs) per domain of a level. */
static int64_t *domain_free(sc_sched_t *s, const topo_level_t *l, bool gpu)
{
	int64_t *fr = sc_arena_calloc(s->arena, (size_t)l->ndomains + 1, sizeof(int64_t));
	if (!fr)
		return NULL;
	size_t n = sc_cluster_nnodes(s->cluster);
	for (size_t i = 0; i < n; i++) {
		const sc_node_view_t *v = sc_cluster_node(s->cluster, i);
		int d = l->node_domain[i];
		if (d < 0 || !v->schedulable)
			continue;
		if (gpu)
			for (int g = 0; g < v->gpu_count; g++)
				fr[d] += v->gpu_free[g];
		else
			fr[d] += v->cpu_free;
	}
	return fr;
}

static const topo_level_t *find_level(const sc_sched_t *s, const char *key)
{
	for (int k = 0; key && k < s->nlevels; k++)
		if (strcmp(s->levels[k].key, key) == 0)
			return &s->levels[k];
	return NULL;
}

/* The domain that already holds a running pod of the job, or -1. */
static int held_domain(const sc_sched_t *s, const sjob_t *jb, const topo_level_t *l)
{
	for (int p = 0; p < jb->total; p++)
		if (jb->pods[p].phase == SC_POD_RUNNING || jb->pods[p].phase == SC_POD_RELEASING)
			return l->node_domain[sc__pod_at(&jb->pods[p])->node];
	return -1;
}

/* Tries the domains of level l in order of preference: binpack takes the
 * fullest domain with enough free room for the pending pods, spread the
 * emptiest. Returns pods placed (gang satisfied), 0 if no domain works. */
static int place_in_domains(sc_sched_t *s, sc_stmt_t *st, place_ctx_t *x, const topo_level_t *l,
                            const char **why)
{
	sjob_t *jb = &s->jobs[x->job];
	bool gpu = jb->step_req.v[SC_RES_GPU] > 0;
	int64_t need = gpu ? (int64_t)(jb->step_req.v[SC_RES_GPU] * 1000 + 0.5)
	                   : (int64_t)jb->step_req.v[SC_RES_CPU];
	int64_t *fr = domain_free(s, l, gpu);
	char *tried = sc_arena_calloc(s->arena, (size_t)l->ndomains + 1, 1);
	if (!fr || !tried)
		return SC_ENOMEM;
	int only = held_domain(s, jb, l);
	bool spread = job_spread(s, jb);
	x->level = l;
	for (;;) {
		int best = -1;
		for (int d = 0; d < l->ndomains; d++) {
			if (tried[d] || (only >= 0 && d != only))
				continue;
			if (best < 0 || (spread ? fr[d] > fr[best] : fr[d] < fr[best]))
				if (fr[d] >= need)
					best = d;
		}
		if (best < 0)
			break;
		tried[best] = 1;
		x->domain = best;
		size_t mark = sc__stmt_mark(st);
		int placed = place_pods(s, st, x, NULL);
		if (placed < 0)
			return placed;
		if (sc__step_done(jb, placed))
			return placed;
		sc__stmt_rollback(st, mark);
	}
	x->level = NULL;
	if (why && !*why)
		*why = sc_arena_printf(s->arena, "no %s has room for %d pods of the gang together",
		                       l->key, jb->step);
	return 0;
}

int sc__place_job(sc_sched_t *s, sc_stmt_t *st, int j)
{
	sjob_t *jb = &s->jobs[j];
	place_ctx_t x = {.s = s, .job = j, .cap = spread_cap(s, jb)};
	const char *why = NULL;
	const topo_level_t *req = find_level(s, jb->spec->topo_required);
	const topo_level_t *pref = find_level(s, jb->spec->topo_preferred);
	int placed;
	/* The preferred level narrower than the required one is tried first;
	 * both share the domain walk. */
	if (pref) {
		placed = place_in_domains(s, st, &x, pref, NULL);
		if (placed != 0)
			goto out;
	}
	if (req)
		placed = place_in_domains(s, st, &x, req, &why);
	else
		placed = place_pods(s, st, &x, &why);
out:
	if (placed >= 0 && !sc__step_done(jb, placed) && !jb->reason)
		jb->reason = why;
	return placed;
}
