/* Time-mode simulator on the real scheduler core. See timesim.h. */
#include "sim/timesim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/timepool.h"
#include "starcloud/cluster.h"

enum jstate { J_FUTURE = 0, J_PENDING, J_RUNNING, J_DONE, J_NEVER };

/* Where one running pod is. */
typedef struct tpod {
	char name[96];
	uint32_t node;
	int gpus[SC_MAX_GPUS];
	int ngpus;
	int gpu_milli;
} tpod_t;

typedef struct tjob {
	const sc_tjob_t *in;
	int state;
	int64_t start, start_first, finish, remaining;
	int64_t moved_at; /* last compaction move, 0 = never */
	int preemptions;
	size_t queue;
	tpod_t *pods; /* while running: in->pods entries */
	int bound;    /* bindings received this cycle */
	/* FCFS: the pods placed so far (a job waits with them held). */
	sc_assign_t *asg;
	int placed;
} tjob_t;

typedef struct tsim {
	const sc_tjobs_t *jobs;
	const sc_tsim_config_t *c;
	tjob_t *j;
	size_t *by_arrival;
	size_t next_arrival;
	char (*qname)[64];
	size_t nq;
	sc_queue_spec_t *queues;
	sc_tnodes_t nodes;  /* fixed and pool nodes (timepool.c) */
	int64_t used_milli; /* GPU milli held by pods (FCFS: of waiting jobs too) */
	int64_t run_milli;  /* GPU milli held by the pods of running jobs */
	sc_cluster_t *cl;   /* FCFS: the cluster's free resources (fixed nodes only) */
	double *q_used;     /* GPUs held per queue */
	double *q_fair;     /* last cycle's fair share per queue */
	/* Per-cycle scratch. */
	size_t *active;
	sc_job_spec_t *specs;
	sc_task_spec_t *tasks;
	sc_pod_status_t *status;
	sc_scheduler_t *sch;
	int64_t t0;
	size_t done; /* jobs finished so far, for progress */
} tsim_t;

/* ---- setup ---------------------------------------------------------------- */

static int64_t pod_milli(const sc_tjob_t *j)
{
	return j->gpus > 0 ? (int64_t)j->gpus * SC_GPU_MILLI : j->gpu_milli;
}

static size_t queue_index(tsim_t *s, const char *name)
{
	for (size_t q = 0; q < s->nq; q++)
		if (strcmp(s->qname[q], name) == 0)
			return q;
	snprintf(s->qname[s->nq], sizeof(s->qname[0]), "%s", name);
	return s->nq++;
}

static const tsim_t *sort_ctx;

static int cmp_arrival(const void *a, const void *b)
{
	const sc_tjob_t *x = &sort_ctx->jobs->v[*(const size_t *)a];
	const sc_tjob_t *y = &sort_ctx->jobs->v[*(const size_t *)b];
	if (x->arrival != y->arrival)
		return x->arrival < y->arrival ? -1 : 1;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* Whether a node's GPU model is one the job allows (any, without a list). */
static bool model_allowed(const sc_tjob_t *j, const char *model)
{
	if (!j->nmodels)
		return true;
	for (size_t k = 0; k < j->nmodels; k++)
		if (model && strcmp(j->models[k], model) == 0)
			return true;
	return false;
}

static bool model_ok(const void *ctx, const char *model)
{
	return model_allowed(ctx, model);
}

/* Whether the gang fits the empty cluster at its largest (every pool at its
 * maximum): enough GPU on the nodes of an allowed model and one node that
 * holds a pod. Jobs that never could are left out: they would pend forever
 * and hide every other metric. */
static bool can_ever_fit(const tsim_t *s, const sc_tjob_t *j)
{
	sc_request_t r = {.cpu_milli = j->cpu_milli,
	                  .memory = j->memory,
	                  .gpus = j->gpus,
	                  .gpu_milli = j->gpus > 0 ? 0 : j->gpu_milli};
	bool one;
	int64_t gpus = sc__tnodes_capacity(&s->nodes, &r, model_ok, j, &one);
	return one && pod_milli(j) * j->pods <= gpus * SC_GPU_MILLI;
}

/* Each queue deserves an equal part of the GPUs present (with node pools
 * the part follows the cluster's size). */
static void setup_queues(tsim_t *s)
{
	for (size_t q = 0; q < s->nq; q++) {
		sc_queue_spec_t *qs = &s->queues[q];
		memset(qs, 0, sizeof(*qs));
		qs->name = s->qname[q];
		qs->priority = 100;
		qs->res[SC_RES_GPU] =
		    (sc_queue_res_t){(double)s->nodes.gpus_up / (double)s->nq, -1, 1};
		qs->res[SC_RES_CPU] = (sc_queue_res_t){-1, -1, 1};
		qs->res[SC_RES_MEM] = (sc_queue_res_t){-1, -1, 1};
	}
}

static int tsim_init(tsim_t *s, const sc_tjobs_t *jobs, const sc_tsim_config_t *c)
{
	size_t n = jobs->n ? jobs->n : 1;
	s->jobs = jobs;
	s->c = c;
	s->j = calloc(n, sizeof(*s->j));
	s->by_arrival = calloc(n, sizeof(size_t));
	s->qname = calloc(n, sizeof(*s->qname));
	s->active = calloc(n, sizeof(size_t));
	s->specs = calloc(n, sizeof(*s->specs));
	s->tasks = calloc(n, sizeof(*s->tasks));
	s->sch = sc_scheduler_new();
	if (!s->j || !s->by_arrival || !s->qname || !s->active || !s->specs || !s->tasks || !s->sch)
		return SC_ENOMEM;
	s->t0 = jobs->n ? INT64_MAX : 0;
	for (size_t i = 0; i < jobs->n; i++)
		s->t0 = jobs->v[i].arrival < s->t0 ? jobs->v[i].arrival : s->t0;
	if (sc__tnodes_init(&s->nodes, c, s->t0) < 0)
		return SC_ENOMEM;
	if (c->policy == SC_TSIM_FCFS) {
		int err = SC_ENOMEM;
		if (!(s->cl = sc_cluster_new(c->nodes, c->nnodes, &err)))
			return err;
	}
	size_t pods = 0;
	for (size_t i = 0; i < jobs->n; i++) {
		s->j[i].in = &jobs->v[i];
		s->j[i].queue = queue_index(s, jobs->v[i].queue);
		s->j[i].start_first = s->j[i].finish = -1;
		s->j[i].remaining = jobs->v[i].duration;
		s->j[i].state = can_ever_fit(s, &jobs->v[i]) ? J_FUTURE : J_NEVER;
		s->done += s->j[i].state == J_NEVER; /* finished before it starts */
		s->by_arrival[i] = i;
		pods += (size_t)jobs->v[i].pods;
	}
	s->status = calloc(pods ? pods : 1, sizeof(*s->status));
	s->queues = calloc(s->nq ? s->nq : 1, sizeof(*s->queues));
	s->q_used = calloc(s->nq ? s->nq : 1, sizeof(double));
	s->q_fair = calloc(s->nq ? s->nq : 1, sizeof(double));
	if (!s->status || !s->queues || !s->q_used || !s->q_fair)
		return SC_ENOMEM;
	setup_queues(s);
	sort_ctx = s;
	qsort(s->by_arrival, jobs->n, sizeof(size_t), cmp_arrival);
	sort_ctx = NULL;
	return 0;
}

static void tsim_free(tsim_t *s)
{
	for (size_t i = 0; s->j && i < s->jobs->n; i++) {
		free(s->j[i].pods);
		free(s->j[i].asg);
	}
	sc_cluster_free(s->cl);
	free(s->j);
	free(s->by_arrival);
	free(s->qname);
	free(s->active);
	free(s->specs);
	free(s->tasks);
	free(s->status);
	free(s->queues);
	free(s->q_used);
	free(s->q_fair);
	sc_scheduler_free(s->sch);
	sc__tnodes_free(&s->nodes);
}

/* ---- one cycle -------------------------------------------------------------- */

static void fill_task(sc_task_spec_t *t, const sc_tjob_t *in)
{
	memset(t, 0, sizeof(*t));
	t->name = "main";
	t->replicas = in->pods;
	t->req.cpu_milli = in->cpu_milli;
	t->req.memory = in->memory;
	t->req.gpus = in->gpus;
	t->req.gpu_milli = in->gpus > 0 ? 0 : in->gpu_milli;
	t->gpu_models = (const char *const *)in->models;
	t->ngpu_models = in->nmodels;
}

/* Builds the snapshot's job list: every arrived, unfinished job, running
 * pods as status. Returns the number of jobs. */
static size_t build_jobs(tsim_t *s, int64_t now)
{
	size_t na = 0, np = 0;
	for (size_t i = 0; i < s->jobs->n; i++) {
		tjob_t *j = &s->j[i];
		if (j->state != J_PENDING && j->state != J_RUNNING)
			continue;
		sc_job_spec_t *js = &s->specs[na];
		memset(js, 0, sizeof(*js));
		fill_task(&s->tasks[na], j->in);
		js->name = j->in->name;
		js->queue = s->qname[j->queue];
		js->priority_class = j->in->preemptible ? "best-effort" : "normal";
		js->preemptible = -1;
		js->min_member = j->in->pods; /* a gang: all or nothing */
		js->created = j->in->arrival;
		js->staleness_grace = -1;
		js->tasks = &s->tasks[na];
		js->ntasks = 1;
		js->expected_runtime = j->in->duration;
		if (j->state == J_RUNNING) {
			js->pods = &s->status[np];
			js->npods = (size_t)j->in->pods;
			for (int k = 0; k < j->in->pods; k++) {
				const tpod_t *p = &j->pods[k];
				s->status[np++] =
				    (sc_pod_status_t){.name = p->name,
				                      .phase = SC_POD_RUNNING,
				                      .node = s->nodes.v[p->node].spec.name,
				                      .gpus = p->gpus,
				                      .ngpus = (size_t)p->ngpus,
				                      .gpu_milli = p->gpu_milli,
				                      .started_at = j->start,
				                      .moved_at = j->moved_at};
			}
		}
		j->bound = 0;
		s->active[na++] = i;
	}
	(void)now;
	return na;
}

static sc_request_t request_of(const sc_tjob_t *in)
{
	return (sc_request_t){.cpu_milli = in->cpu_milli,
	                      .memory = in->memory,
	                      .gpus = in->gpus,
	                      .gpu_milli = in->gpus > 0 ? 0 : in->gpu_milli};
}

static void release(tsim_t *s, tjob_t *j)
{
	int64_t m = pod_milli(j->in) * j->in->pods;
	s->used_milli -= m;
	s->run_milli -= m;
	s->q_used[j->queue] -= (double)m / SC_GPU_MILLI;
	free(j->pods);
	j->pods = NULL;
	if (s->cl && j->asg) {
		sc_request_t r = request_of(j->in);
		for (int k = 0; k < j->placed; k++)
			sc_cluster_give(s->cl, &r, &j->asg[k]);
	}
	free(j->asg);
	j->asg = NULL;
	j->placed = 0;
}

/* An evicted gang keeps its progress (a checkpointing scheduler); a job
 * moved by compaction loses what the action's cost assumes: its run time
 * since it started here, at most checkpointEvery. */
static void evict(tsim_t *s, tjob_t *j, int64_t now, bool move, sc_tsim_result_t *r)
{
	if (j->state != J_RUNNING)
		return;
	int64_t ran = now - j->start, lost = 0;
	if (move) {
		sc_config_t d;
		sc_config_default(&d);
		lost = ran < d.compaction.checkpoint_every ? ran : d.compaction.checkpoint_every;
		r->lost_gpu_seconds +=
		    (double)lost * (double)(pod_milli(j->in) * j->in->pods) / SC_GPU_MILLI;
		j->moved_at = now;
	} else {
		j->preemptions++;
	}
	j->remaining -= ran - lost;
	if (j->remaining < 1)
		j->remaining = 1;
	j->state = J_PENDING;
	release(s, j);
}

/* Records one binding; the job starts once every pod is bound. */
static int bind(tsim_t *s, tjob_t *j, const sc_binding_t *b, int64_t now)
{
	if (j->state != J_PENDING)
		return 0;
	if (!j->pods) {
		j->pods = calloc((size_t)j->in->pods, sizeof(tpod_t));
		if (!j->pods)
			return SC_ENOMEM;
	}
	if (j->bound >= j->in->pods)
		return 0;
	tpod_t *p = &j->pods[j->bound++];
	snprintf(p->name, sizeof(p->name), "%s", b->pod);
	long ni = sc__tnodes_find(&s->nodes, b->node);
	p->node = ni < 0 ? 0 : (uint32_t)ni;
	p->ngpus = b->ngpus < SC_MAX_GPUS ? (int)b->ngpus : SC_MAX_GPUS;
	memcpy(p->gpus, b->gpus, (size_t)p->ngpus * sizeof(int));
	p->gpu_milli = b->gpu_milli;
	if (j->bound < j->in->pods)
		return 0;
	j->state = J_RUNNING;
	j->start = now;
	if (j->start_first < 0)
		j->start_first = now;
	j->finish = now + j->remaining;
	int64_t m = pod_milli(j->in) * j->in->pods;
	s->used_milli += m;
	s->run_milli += m;
	s->q_used[j->queue] += (double)m / SC_GPU_MILLI;
	return 0;
}

static int apply(tsim_t *s, const sc_decisions_t *d, int64_t now, sc_tsim_result_t *r)
{
	for (size_t e = 0; e < d->nevictions; e++) {
		const sc_eviction_t *ev = &d->evictions[e];
		bool move = ev->action == SC_ACT_COMPACT;
		r->moves += move;
		evict(s, &s->j[s->active[ev->job]], now, move, r);
	}
	for (size_t b = 0; b < d->nbindings; b++) {
		int rc = bind(s, &s->j[s->active[d->bindings[b].job]], &d->bindings[b], now);
		if (rc < 0)
			return rc;
	}
	/* A gang that got only part of its pods does not start: drop them. */
	for (size_t i = 0; i < s->jobs->n; i++)
		if (s->j[i].state == J_PENDING && s->j[i].pods) {
			free(s->j[i].pods);
			s->j[i].pods = NULL;
		}
	for (size_t q = 0; q < d->nqueues; q++)
		for (size_t k = 0; k < s->nq; k++)
			if (strcmp(d->queues[q].name, s->qname[k]) == 0)
				s->q_fair[k] = d->queues[q].fair_share[SC_RES_GPU];
	return 0;
}

/* ---- the FCFS baseline (a stock Kubernetes scheduler) ------------------------------ */

/* The job's allowed models as the cluster's ids; *any when it names none.
 * Returns how many of them the cluster has. */
static size_t model_ids(const tsim_t *s, const sc_tjob_t *in, int *ids, size_t cap, bool *any)
{
	size_t n = 0;
	*any = in->nmodels == 0 || pod_milli(in) == 0;
	for (size_t k = 0; !*any && k < in->nmodels && n < cap; k++) {
		int id = sc_cluster_model_id(s->cl, in->models[k]);
		if (id >= 0)
			ids[n++] = id;
	}
	return n;
}

/* Places as many of a waiting job's pods as fit, one by one, each on the
 * fitting node with the most free GPUs; the job starts when the last one
 * is placed. Returns SC_ENOMEM or 0. */
static int fcfs_place(tsim_t *s, tjob_t *j, int64_t now)
{
	const sc_tjob_t *in = j->in;
	if (!j->asg && !(j->asg = calloc((size_t)in->pods, sizeof(sc_assign_t))))
		return SC_ENOMEM;
	int ids[16];
	bool any;
	size_t nids = model_ids(s, in, ids, 16, &any);
	if (!any && nids == 0)
		return 0;
	sc_filter_t f = {.models = any ? NULL : ids, .nmodels = any ? 0 : nids};
	sc_request_t r = request_of(in);
	while (j->placed < in->pods) {
		sc_assign_t a;
		if (sc_cluster_best_indexed(s->cl, &r, &f, true, SC_DEV_SPREAD, &a) < 0 ||
		    sc_cluster_take(s->cl, &r, &a) < 0)
			return 0; /* the next pods of this job are alike: none fits */
		j->asg[j->placed++] = a;
		s->used_milli += pod_milli(in);
		s->q_used[j->queue] += (double)pod_milli(in) / SC_GPU_MILLI;
	}
	j->state = J_RUNNING;
	j->start = now;
	if (j->start_first < 0)
		j->start_first = now;
	j->finish = now + j->remaining;
	s->run_milli += pod_milli(in) * in->pods;
	return 0;
}

/* One pass over the arrived jobs in arrival order, as kube-scheduler's
 * queue takes pods by creation time: nothing blocks, a pod that does not
 * fit waits and later pods may go first. */
static int fcfs_cycle(tsim_t *s, int64_t now)
{
	for (size_t k = 0; k < s->next_arrival; k++) {
		tjob_t *j = &s->j[s->by_arrival[k]];
		if (j->state == J_PENDING) {
			int rc = fcfs_place(s, j, now);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

static int cycle(tsim_t *s, int64_t now, sc_tsim_result_t *r, char *msg, size_t msgsize)
{
	if (s->c->policy == SC_TSIM_FCFS)
		return fcfs_cycle(s, now);
	size_t na = build_jobs(s, now);
	memset(s->q_fair, 0, s->nq * sizeof(double));
	/* With pools a cycle runs without jobs too: idle nodes must go. */
	if (na == 0 && s->c->npools == 0)
		return 0;
	if (sc__tnodes_snapshot(&s->nodes) < 0)
		return SC_ENOMEM;
	setup_queues(s);
	sc_snapshot_t snap = {.nodes = s->nodes.snap,
	                      .nnodes = s->nodes.nsnap,
	                      .queues = s->queues,
	                      .nqueues = s->nq,
	                      .jobs = s->specs,
	                      .njobs = na,
	                      .now = now};
	sc_config_default(&snap.config);
	/* Consolidation and stale-gang handling need pods that move or fail
	 * on their own, which this replay has no model for. */
	snap.config.actions[0] = SC_ACT_ALLOCATE;
	snap.config.actions[1] = SC_ACT_RECLAIM;
	snap.config.actions[2] = SC_ACT_PREEMPT;
	snap.config.nactions = 3;
	/* Compaction moves whole gangs (or spare pods) itself, which this
	 * replay follows: a move restarts the job at once elsewhere. */
	if (s->c->compaction) {
		snap.config.actions[snap.config.nactions++] = SC_ACT_COMPACT;
		if (s->c->pack_threshold > 0)
			snap.config.pack_threshold = s->c->pack_threshold;
		snap.config.compaction.target_gpus = s->c->target_gpus;
	}
	sc_decisions_t *d = NULL;
	int rc = sc_scheduler_run(s->sch, &snap, &d, msg, msgsize);
	if (rc == 0)
		rc = apply(s, d, now, r);
	if (rc == 0)
		rc = sc__tnodes_plan(&s->nodes, &snap, d, now, msg, msgsize);
	sc_decisions_free(d);
	return rc;
}

/* ---- the event loop ------------------------------------------------------------ */

static int64_t next_event(tsim_t *s)
{
	int64_t t = INT64_MAX;
	if (s->next_arrival < s->jobs->n)
		t = s->jobs->v[s->by_arrival[s->next_arrival]].arrival;
	bool waiting = false;
	for (size_t i = 0; i < s->jobs->n; i++) {
		if (s->j[i].state == J_RUNNING && s->j[i].finish < t)
			t = s->j[i].finish;
		waiting |= s->j[i].state == J_PENDING;
	}
	/* Nodes joining or going matter while work is left: the run ends with
	 * its last job, as without pools. */
	if (t != INT64_MAX || waiting) {
		int64_t p = sc__tnodes_next(&s->nodes);
		t = p < t ? p : t;
	}
	return t;
}

/* Completions and arrivals up to `now`; returns the pending count. */
static size_t advance(tsim_t *s, int64_t now, size_t *running)
{
	size_t pending = 0;
	*running = 0;
	while (s->next_arrival < s->jobs->n &&
	       s->jobs->v[s->by_arrival[s->next_arrival]].arrival <= now) {
		tjob_t *j = &s->j[s->by_arrival[s->next_arrival++]];
		if (j->state == J_FUTURE)
			j->state = J_PENDING;
	}
	for (size_t i = 0; i < s->jobs->n; i++) {
		tjob_t *j = &s->j[i];
		if (j->state == J_RUNNING && j->finish <= now) {
			release(s, j);
			j->state = J_DONE;
			s->done++;
		}
		pending += j->state == J_PENDING;
		*running += j->state == J_RUNNING;
	}
	return pending;
}

static int push_point(sc_tsim_result_t *r, size_t *cap, const sc_tsim_point_t *p)
{
	if (r->nseries == *cap) {
		size_t nc = *cap ? *cap * 2 : 256;
		sc_tsim_point_t *v = realloc(r->series, nc * sizeof(*v));
		if (!v)
			return SC_ENOMEM;
		r->series = v;
		*cap = nc;
	}
	r->series[r->nseries++] = *p;
	return 0;
}

static int64_t round_up(int64_t t, int64_t tick)
{
	int64_t r = t % tick;
	return r == 0 ? t : t + (tick - r);
}

static int run_loop(tsim_t *s, sc_tsim_result_t *r, char *msg, size_t msgsize)
{
	int64_t tick = s->c->tick > 0 ? s->c->tick : 1;
	int64_t now = s->t0;
	size_t cap = 0;
	double util_int = 0, busy_int = 0, gpus_int = 0, billed_int = 0;
	for (;;) {
		size_t running;
		sc__tnodes_join(&s->nodes, now);
		size_t pending = advance(s, now, &running);
		/* A cycle also when only running jobs remain: the core's
		 * fair shares (for Jain's index) follow the demand; with pools,
		 * always: idle nodes go by the cycles' plans. */
		if (pending + running > 0 || s->c->npools > 0) {
			int rc = cycle(s, now, r, msg, msgsize);
			if (rc < 0)
				return rc;
			r->cycles++;
			pending = advance(s, now, &running);
		}
		if (s->c->progress)
			s->c->progress(s->c->progress_ud, s->done, s->jobs->n, now - s->t0);
		int up = s->nodes.gpus_up;
		double cap_milli = (double)up * SC_GPU_MILLI;
		sc_tsim_point_t pt = {now - s->t0,
		                      up > 0 ? 100.0 * (double)s->used_milli / cap_milli : 0,
		                      up > 0 ? 100.0 * (double)s->run_milli / cap_milli : 0,
		                      pending,
		                      running,
		                      up};
		r->gpus_max = up > r->gpus_max ? up : r->gpus_max;
		if (push_point(r, &cap, &pt) < 0)
			return SC_ENOMEM;
		int64_t next = next_event(s);
		if (next == INT64_MAX)
			break;
		next = round_up(next > now ? next : now + 1, tick);
		double dt = (double)(next - now);
		util_int += pt.util * dt;
		busy_int += pt.busy * dt;
		gpus_int += (double)up * dt;
		billed_int += (double)s->nodes.gpus_billed * dt;
		for (size_t q = 0; q < s->nq; q++) {
			r->queues[q].gpu_seconds += s->q_used[q] * dt;
			r->queues[q].fair_seconds += s->q_fair[q] * dt;
		}
		now = next;
	}
	int64_t span = now - s->t0;
	r->util_mean = span > 0 ? util_int / (double)span : 0;
	r->busy_mean = span > 0 ? busy_int / (double)span : 0;
	for (size_t i = 0; i < s->jobs->n; i++)
		r->stuck += s->j[i].state == J_PENDING;
	r->gpus_mean = span > 0 ? gpus_int / (double)span : s->nodes.gpus_up;
	r->gpu_hours = billed_int / 3600.0;
	r->nodes_requested = s->nodes.requested;
	r->nodes_removed = s->nodes.removed;
	return 0;
}

/* ---- metrics -------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentiles of v (sorted in place). */
static sc_tsim_stats_t stats_of(double *v, size_t n)
{
	sc_tsim_stats_t st = {0, 0, 0, 0};
	if (n == 0)
		return st;
	qsort(v, n, sizeof(double), cmp_double);
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	st.mean = sum / (double)n;
	st.p50 = v[(size_t)ceil(0.50 * (double)n) - 1];
	st.p95 = v[(size_t)ceil(0.95 * (double)n) - 1];
	st.p99 = v[(size_t)ceil(0.99 * (double)n) - 1];
	return st;
}

/* Wait and JCT statistics of queue q (or all when q == SIZE_MAX). */
static void job_stats(const tsim_t *s, const sc_tsim_result_t *r, size_t q, double *buf,
                      sc_tsim_stats_t *wait, sc_tsim_stats_t *jct, size_t *n)
{
	size_t k = 0;
	for (size_t i = 0; i < s->jobs->n; i++)
		if ((q == SIZE_MAX || r->job[i].queue == q) && r->job[i].finish >= 0)
			buf[k++] = (double)(r->job[i].start - r->job[i].arrival);
	*wait = stats_of(buf, k);
	k = 0;
	for (size_t i = 0; i < s->jobs->n; i++)
		if ((q == SIZE_MAX || r->job[i].queue == q) && r->job[i].finish >= 0)
			buf[k++] = (double)(r->job[i].finish - r->job[i].arrival);
	*jct = stats_of(buf, k);
	*n = k;
}

static void jain(sc_tsim_result_t *r)
{
	double sum = 0, sq = 0;
	size_t n = 0;
	for (size_t q = 0; q < r->nqueues; q++) {
		if (r->queues[q].fair_seconds <= 0)
			continue;
		double x = r->queues[q].gpu_seconds / r->queues[q].fair_seconds;
		sum += x;
		sq += x * x;
		n++;
	}
	r->jain = n > 0 && sq > 0 ? sum * sum / ((double)n * sq) : 1.0;
}

static int metrics(const tsim_t *s, sc_tsim_result_t *r)
{
	int64_t first = INT64_MAX, last = INT64_MIN;
	for (size_t i = 0; i < s->jobs->n; i++) {
		const tjob_t *j = &s->j[i];
		sc_tsim_job_t *o = &r->job[i];
		o->arrival = j->in->arrival;
		o->start = j->start_first;
		o->finish = j->state == J_DONE ? j->finish : -1;
		o->preemptions = j->preemptions;
		o->queue = j->queue;
		r->preemptions += (size_t)j->preemptions;
		r->never_fit += j->state == J_NEVER;
		r->queues[j->queue].jobs++;
		if (o->finish >= 0) {
			r->queues[j->queue].finished++;
			first = o->arrival < first ? o->arrival : first;
			last = o->finish > last ? o->finish : last;
		}
	}
	double *buf = malloc((s->jobs->n ? s->jobs->n : 1) * sizeof(double));
	if (!buf)
		return SC_ENOMEM;
	job_stats(s, r, SIZE_MAX, buf, &r->wait, &r->jct, &r->finished);
	int large = s->c->large_gpus > 0 ? s->c->large_gpus : 8;
	size_t nl = 0;
	for (size_t i = 0; i < s->jobs->n; i++)
		if (r->job[i].finish >= 0 &&
		    pod_milli(s->j[i].in) * s->j[i].in->pods >= (int64_t)large * SC_GPU_MILLI)
			buf[nl++] = (double)(r->job[i].start - r->job[i].arrival);
	r->wait_large = stats_of(buf, nl);
	r->large_finished = nl;
	for (size_t q = 0; q < r->nqueues; q++) {
		size_t n;
		job_stats(s, r, q, buf, &r->queues[q].wait, &r->queues[q].jct, &n);
	}
	free(buf);
	r->makespan = last >= first ? last - first : 0;
	if (s->c->policy == SC_TSIM_FCFS)
		r->jain = -1; /* no fair share to hold the queues against */
	else
		jain(r);
	return 0;
}

/* ---- entry -------------------------------------------------------------------------- */

int sc_tsim_run(const sc_tjobs_t *jobs, const sc_tsim_config_t *c, sc_tsim_result_t *res, char *msg,
                size_t msgsize)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	memset(res, 0, sizeof(*res));
	if (c->nnodes == 0 && c->npools == 0) {
		snprintf(msg, msgsize, "time mode: the cluster has no node");
		return SC_EINVAL;
	}
	if (c->npools > 0 && c->policy == SC_TSIM_FCFS) {
		/* The FCFS baseline places on a fixed cluster model of its own. */
		snprintf(msg, msgsize,
		         "--policy fcfs: not with --nodepools (a fixed cluster only)");
		return SC_EINVAL;
	}
	tsim_t s = {0};
	int rc = tsim_init(&s, jobs, c);
	if (rc == 0) {
		res->jobs = jobs->n;
		res->total_gpus = s.nodes.gpus_up;
		res->provision_delay = c->provision_delay;
		res->nqueues = s.nq;
		res->queues = calloc(s.nq ? s.nq : 1, sizeof(*res->queues));
		res->job = calloc(jobs->n ? jobs->n : 1, sizeof(*res->job));
		rc = !res->queues || !res->job ? SC_ENOMEM : 0;
		for (size_t q = 0; rc == 0 && q < s.nq; q++)
			snprintf(res->queues[q].name, sizeof(res->queues[q].name), "%s",
			         s.qname[q]);
	}
	if (rc == 0)
		rc = run_loop(&s, res, msg, msgsize);
	if (rc == 0)
		rc = metrics(&s, res);
	tsim_free(&s);
	if (rc < 0)
		sc_tsim_result_free(res);
	clock_gettime(CLOCK_MONOTONIC, &b);
	res->wall_seconds = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	return rc;
}

void sc_tsim_result_free(sc_tsim_result_t *r)
{
	if (!r)
		return;
	free(r->queues);
	free(r->series);
	free(r->job);
	r->queues = NULL;
	r->series = NULL;
	r->job = NULL;
}
