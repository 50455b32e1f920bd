/* From the caller's snapshot to the cycle's model: queue tree, priority
 * classes, jobs with their pods, and the cluster with running pods taken
 * out of it. Problems that make the snapshot meaningless (a queue whose
 * parent does not exist, a cycle in the tree, two nodes of one name) fail
 * the cycle with a message; problems of one job (unknown queue or priority
 * class) leave that job pending with the reason, so one bad object cannot
 * stop a whole cluster from being scheduled. */
#include <stdio.h>
#include <string.h>

#include "core/sched.h"
#include "starcloud/autoscale.h"

/* Built-in priority classes: KAI's (train 50, build-preemptible 75,
 * build 100, inference 125) and three generic names. "normal", the default,
 * is preemptible so that ordinary jobs may use idle over-quota resources. */
static const sc_prio_class_t builtin_classes[] = {
    {"best-effort", 10, 1},       {"normal", 50, 1}, {"train", 50, 1},
    {"build-preemptible", 75, 1}, {"build", 100, 0}, {"inference", 125, 0},
    {"critical", 200, 0},
};
#define NBUILTIN (sizeof(builtin_classes) / sizeof(builtin_classes[0]))

static int fail(sc_sched_t *s, const char *fmt, const char *a, const char *b)
{
	if (s->msg && s->msgsize)
		snprintf(s->msg, s->msgsize, fmt, a, b ? b : "");
	return SC_EINVAL;
}

res3_t sc__pod_res(const sc_sched_t *s, const sc_request_t *r, const sc_node_view_t *n)
{
	res3_t v = {{0, (double)r->cpu_milli, (double)r->memory}};
	if (r->mig) {
		/* Not placed yet: the profile name says its class (1g.10gb is in
		 * both tables with the same compute, so either answer is right). */
		const sc_mig_profile_t *p = n ? sc_mig_profile(r->mig, n->spec->gpu_memory) : NULL;
		if (!n)
			p = sc_mig_profile(r->mig, (int64_t)80 << 30);
		if (!n && !p)
			p = sc_mig_profile(r->mig, (int64_t)40 << 30);
		v.v[SC_RES_GPU] = p ? p->compute / 7.0 : 1.0 / 7.0;
	} else if (r->gpus > 0)
		v.v[SC_RES_GPU] = r->gpus;
	else if (r->gpu_milli > 0)
		v.v[SC_RES_GPU] = r->gpu_milli / 1000.0;
	else if (r->gpu_memory > 0 && n && n->spec->gpu_memory > 0)
		v.v[SC_RES_GPU] = sc_request_share_milli(r, n) / 1000.0;
	else if (r->gpu_memory > 0 && s->max_gpu_memory > 0) {
		/* Not placed yet: measured against the largest device, the
		 * smallest share it can turn out to be. */
		double m = (double)r->gpu_memory / (double)s->max_gpu_memory;
		v.v[SC_RES_GPU] = m > 1 ? 1 : m;
	}
	return v;
}

/* ---- priority classes ---------------------------------------------- */

static int build_classes(sc_sched_t *s)
{
	const sc_snapshot_t *snap = s->snap;
	s->classes = sc_arena_calloc(s->arena, NBUILTIN + snap->nclasses, sizeof(sc_prio_class_t));
	if (!s->classes)
		return SC_ENOMEM;
	memcpy(s->classes, builtin_classes, sizeof(builtin_classes));
	s->nclasses = NBUILTIN;
	for (size_t i = 0; i < snap->nclasses; i++) {
		const sc_prio_class_t *c = &snap->classes[i];
		size_t k = 0;
		while (k < s->nclasses && strcmp(s->classes[k].name, c->name) != 0)
			k++;
		s->classes[k] = *c; /* user classes override built-ins */
		if (k == s->nclasses)
			s->nclasses++;
	}
	return 0;
}

static const sc_prio_class_t *find_class(const sc_sched_t *s, const char *name)
{
	for (size_t k = 0; k < s->nclasses; k++)
		if (strcmp(s->classes[k].name, name) == 0)
			return &s->classes[k];
	return NULL;
}

/* The class of that name as a snapshot sees it (its own classes override
 * the built-in ones), or NULL. */
static const sc_prio_class_t *snapshot_class(const sc_snapshot_t *snap, const char *name)
{
	for (size_t i = snap->nclasses; i > 0; i--)
		if (snap->classes[i - 1].name && strcmp(snap->classes[i - 1].name, name) == 0)
			return &snap->classes[i - 1];
	for (size_t k = 0; k < NBUILTIN; k++)
		if (strcmp(builtin_classes[k].name, name) == 0)
			return &builtin_classes[k];
	return NULL;
}

bool sc_job_preemptible(const sc_snapshot_t *snap, size_t j)
{
	const sc_job_spec_t *js = &snap->jobs[j];
	if (js->preemptible >= 0)
		return js->preemptible != 0;
	const sc_prio_class_t *pc =
	    snapshot_class(snap, js->priority_class ? js->priority_class : "normal");
	if (!pc)
		pc = snapshot_class(snap, "normal");
	return pc->preemptible >= 0 ? pc->preemptible != 0 : pc->value < 100;
}

/* ---- queues -------------------------------------------------------- */

static double eff_quota(double q)
{
	return q < 0 ? SC_UNLIMITED : q;
}

/* KAI: limit -1 is unlimited; 0 (or unset) means nothing above quota. */
static double eff_limit(double limit, double quota)
{
	if (limit < 0)
		return SC_UNLIMITED;
	if (limit == 0)
		return quota < 0 ? SC_UNLIMITED : quota;
	return limit;
}

static int link_queues(sc_sched_t *s)
{
	int *nchild = sc_arena_calloc(s->arena, (size_t)s->nqueues + 1, sizeof(int));
	if (!nchild)
		return SC_ENOMEM;
	for (int i = 0; i < s->nqueues; i++) {
		squeue_t *q = &s->queues[i];
		q->parent = -1;
		if (!q->spec->parent || !*q->spec->parent) {
			s->nroots++;
			continue;
		}
		long p = sc_strmap_get(&s->queue_names, q->spec->parent);
		if (p < 0)
			return fail(s, "queue %s: spec.parentQueue: no queue named %s",
			            q->spec->name, q->spec->parent);
		q->parent = (int)p;
		nchild[p]++;
	}
	s->roots = sc_arena_calloc(s->arena, (size_t)s->nroots + 1, sizeof(int));
	if (!s->roots)
		return SC_ENOMEM;
	s->nroots = 0;
	for (int i = 0; i < s->nqueues; i++) {
		squeue_t *q = &s->queues[i];
		q->children = sc_arena_calloc(s->arena, (size_t)nchild[i] + 1, sizeof(int));
		if (!q->children)
			return SC_ENOMEM;
	}
	for (int i = 0; i < s->nqueues; i++) {
		squeue_t *q = &s->queues[i];
		if (q->parent < 0)
			s->roots[s->nroots++] = i;
		else
			s->queues[q->parent].children[s->queues[q->parent].nchildren++] = i;
	}
	/* Depth, and a cycle check: a chain longer than the queue count loops. */
	for (int i = 0; i < s->nqueues; i++) {
		int d = 0;
		for (int p = s->queues[i].parent; p >= 0; p = s->queues[p].parent)
			if (++d > s->nqueues)
				return fail(
				    s, "queue %s: spec.parentQueue: the queue tree has a cycle%s",
				    s->queues[i].spec->name, "");
		s->queues[i].depth = d;
		s->queues[i].leaf = s->queues[i].nchildren == 0;
	}
	return 0;
}

static int build_queues(sc_sched_t *s)
{
	const sc_snapshot_t *snap = s->snap;
	s->nqueues = (int)snap->nqueues;
	s->queues = sc_arena_calloc(s->arena, snap->nqueues + 1, sizeof(squeue_t));
	if (!s->queues)
		return SC_ENOMEM;
	int rc = sc_strmap_init(&s->queue_names, snap->nqueues);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < snap->nqueues; i++) {
		const sc_queue_spec_t *qs = &snap->queues[i];
		squeue_t *q = &s->queues[i];
		if (!qs->name || !*qs->name)
			return fail(s, "queue #%s: metadata.name: missing%s", "?", NULL);
		rc = sc_strmap_put(&s->queue_names, qs->name, (uint32_t)i);
		if (rc == SC_EEXISTS)
			return fail(s, "queue %s: metadata.name: defined twice%s", qs->name, NULL);
		if (rc < 0)
			return rc;
		q->spec = qs;
		q->order = i;
		q->heap_pos = -1;
		for (int r = 0; r < SC_RES_COUNT; r++) {
			q->quota.v[r] = eff_quota(qs->res[r].quota);
			q->limit.v[r] = eff_limit(qs->res[r].limit, qs->res[r].quota);
			q->weight.v[r] = qs->res[r].weight < 0 ? 0 : qs->res[r].weight;
		}
	}
	return link_queues(s);
}

void sc__queue_add(sc_sched_t *s, int q, const res3_t *r, bool nonpreempt, int sign)
{
	for (; q >= 0; q = s->queues[q].parent)
		for (int k = 0; k < SC_RES_COUNT; k++) {
			s->queues[q].allocated.v[k] += sign * r->v[k];
			if (nonpreempt)
				s->queues[q].alloc_nonpreempt.v[k] += sign * r->v[k];
		}
}

/* ---- jobs and pods ------------------------------------------------- */

/* The replica number a pod name ends with: canonical decimal (what
 * sc__pod_name prints), below `replicas`; -1 otherwise. */
static int replica_of(const char *p, int replicas)
{
	if (*p < '0' || *p > '9' || (p[0] == '0' && p[1]))
		return -1;
	long r = 0;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		r = r * 10 + (*p - '0');
		if (r >= replicas)
			return -1;
	}
	return (int)r;
}

/* The pod a status names: "<job>-<task>-<replica>", as sc__pod_name prints
 * it, or -1. A status is parsed once instead of every pod's name being
 * printed and compared with every status: that was a third of a cycle's
 * time and quadratic in a job's size. The replica must be all digits, so a
 * task whose name extends another's ("w" and "w-1") is still told apart. */
static int status_pod(const sc_job_spec_t *js, const char *name)
{
	if (!js->name)
		return -1;
	size_t jl = strlen(js->name);
	if (strncmp(name, js->name, jl) != 0 || name[jl] != '-')
		return -1;
	const char *rest = name + jl + 1;
	int base = 0;
	for (size_t t = 0; t < js->ntasks; t++) {
		const char *task = js->tasks[t].name ? js->tasks[t].name : "task";
		int reps = js->tasks[t].replicas > 0 ? js->tasks[t].replicas : 0;
		size_t tl = strlen(task);
		if (strncmp(rest, task, tl) == 0 && rest[tl] == '-') {
			int r = replica_of(rest + tl + 1, reps);
			if (r >= 0)
				return base + r;
		}
		base += reps;
	}
	return -1;
}

/* Each pod's status (NULL when none names it; the first wins), in an
 * arena array of j->total entries. */
static const sc_pod_status_t **match_statuses(sc_sched_t *s, const sjob_t *j)
{
	const sc_job_spec_t *js = j->spec;
	const sc_pod_status_t **st = sc_arena_calloc(s->arena, (size_t)j->total + 1, sizeof(*st));
	if (!st)
		return NULL;
	for (size_t k = 0; k < js->npods; k++) {
		int p = js->pods[k].name ? status_pod(js, js->pods[k].name) : -1;
		if (p >= 0 && p < j->total && !st[p])
			st[p] = &js->pods[k];
	}
	return st;
}

/* Turns a pod status into an assignment on its node; false when the node
 * is unknown (the pod is then treated as lost and pending again). */
static bool status_assign(sc_sched_t *s, const sc_request_t *r, const sc_pod_status_t *ps,
                          sc_assign_t *a)
{
	long n = ps->node ? sc_cluster_find_node(s->cluster, ps->node) : -1;
	if (n < 0)
		return false;
	memset(a, 0, sizeof(*a));
	a->node = (uint32_t)n;
	const sc_node_view_t *nv = sc_cluster_node(s->cluster, (size_t)n);
	if (r->mig) {
		const sc_mig_profile_t *p = sc_mig_profile(r->mig, nv->spec->gpu_memory);
		if (!p)
			return false;
		a->gpus[0] = ps->mig_gpu;
		a->ngpus = 1;
		a->mig_start = ps->mig_start;
		a->mig_slices = p->size;
		return true;
	}
	for (size_t k = 0; k < ps->ngpus && k < SC_MAX_GPUS; k++)
		a->gpus[a->ngpus++] = ps->gpus[k];
	if (r->gpus == 0 && (r->gpu_milli > 0 || r->gpu_memory > 0)) {
		a->gpu_milli = ps->gpu_milli > 0 ? ps->gpu_milli : sc_request_share_milli(r, nv);
		if (a->gpu_milli > SC_GPU_MILLI)
			a->gpu_milli = SC_GPU_MILLI;
		a->gpu_memory = ps->gpu_memory > 0 ? ps->gpu_memory : r->gpu_memory;
	}
	return true;
}

static void add_pending(sc_sched_t *s, sjob_t *j, const sc_request_t *r)
{
	res3_t v = sc__pod_res(s, r, NULL);
	for (int k = 0; k < SC_RES_COUNT; k++)
		j->pod_req_sum_pending.v[k] += v.v[k];
	j->npending++;
}

const sc_assign_t sc__no_assign;

const char *sc__pod_name(sc_sched_t *s, sjob_t *j, int p)
{
	spod_t *pod = &j->pods[p];
	if (!pod->name) {
		const char *task = j->spec->tasks[pod->task].name;
		pod->name = sc_arena_printf(s->arena, "%s-%s-%d", j->spec->name,
		                            task ? task : "task", pod->replica);
	}
	return pod->name;
}

static int build_pods(sc_sched_t *s, sjob_t *j)
{
	const sc_job_spec_t *js = j->spec;
	j->pods = sc_arena_calloc(s->arena, (size_t)j->total + 1, sizeof(spod_t));
	if (!j->pods)
		return SC_ENOMEM;
	const sc_pod_status_t **st = NULL;
	if (js->npods && !(st = match_statuses(s, j)))
		return SC_ENOMEM;
	int p = 0;
	for (size_t t = 0; t < js->ntasks; t++) {
		const sc_task_spec_t *ts = &js->tasks[t];
		for (int r = 0; r < ts->replicas; r++, p++) {
			spod_t *pod = &j->pods[p];
			pod->task = (int)t;
			pod->replica = r;
			/* A name is printed only when needed (sc__pod_name);
			 * a pod with a status has that status's. */
			const sc_pod_status_t *ps = st ? st[p] : NULL;
			if (ps)
				pod->name = ps->name;
			pod->status = ps;
			pod->phase = ps ? ps->phase : SC_POD_PENDING;
			/* A pipelined pod holds its place like a running one;
			 * its device is marked as waiting (pipeline.c). */
			bool waiting = pod->phase == SC_POD_PIPELINED;
			if (waiting)
				pod->phase = SC_POD_RUNNING;
			if (pod->phase == SC_POD_RUNNING || pod->phase == SC_POD_RELEASING) {
				/* What status_assign wrote stays, even when it
				 * failed: the pod is then pending there. */
				sc_assign_t a = {0};
				bool known = status_assign(s, &ts->req, ps, &a);
				if (!(pod->at = sc_arena_alloc(s->arena, sizeof(a))))
					return SC_ENOMEM;
				*pod->at = a;
				if (!known) {
					pod->phase = SC_POD_PENDING;
				} else {
					pod->started_at = ps->started_at;
					sc__cluster_force_take(s->cluster, &ts->req, &a);
					if (pod->phase == SC_POD_RELEASING)
						sc__cluster_release(s->cluster, &ts->req, &a);
					if (waiting)
						sc__cluster_mark_waiting(s->cluster, &a);
					const sc_node_view_t *nv =
					    sc_cluster_node(s->cluster, a.node);
					res3_t v = sc__pod_res(s, &ts->req, nv);
					for (int k = 0; k < SC_RES_COUNT; k++)
						j->alloc.v[k] += v.v[k];
					j->nrunning++;
				}
			}
			if (pod->phase == SC_POD_PENDING)
				add_pending(s, j, &ts->req);
		}
	}
	return 0;
}

/* The part of a job's failure-cache signature that its spec decides
 * (allocate.c's signature()): made when the job is built, while its spec is
 * in the CPU's cache, not when allocate reaches the job. */
uint64_t sc__job_shape(const sjob_t *j)
{
	const sc_job_spec_t *js = j->spec;
	uint64_t h = sc__mix(0, (uint64_t)j->min_member);
	h = sc__mix(h, (uint64_t)js->placement);
	h = sc__mix(h, (uint64_t)js->spread_factor * 2 + js->serving);
	h = sc__mix_str(sc__mix_str(h, js->topo_required), js->topo_preferred);
	for (size_t t = 0; t < js->ntasks; t++) {
		const sc_task_spec_t *ts = &js->tasks[t];
		h = sc__mix_str(h, ts->name);
		h = sc__mix(h, (uint64_t)ts->replicas);
		h = sc__mix(h, (uint64_t)ts->req.cpu_milli);
		h = sc__mix(h, (uint64_t)ts->req.memory);
		h = sc__mix(h, (uint64_t)ts->req.gpus);
		h = sc__mix(h, (uint64_t)ts->req.gpu_milli);
		h = sc__mix(h, (uint64_t)ts->req.gpu_memory);
		h = sc__mix_str(h, ts->req.mig);
		for (size_t k = 0; k < ts->ngpu_models; k++)
			h = sc__mix_str(h, ts->gpu_models[k]);
		for (size_t k = 0; k < ts->nselector; k++)
			h = sc__mix_str(sc__mix_str(h, ts->selector[k].key), ts->selector[k].value);
	}
	return h;
}

static int job_setup(sc_sched_t *s, sjob_t *j)
{
	const sc_job_spec_t *js = j->spec;
	long q = js->queue ? sc_strmap_get(&s->queue_names, js->queue) : -1;
	j->queue = -1;
	if (q < 0)
		j->bad = sc_arena_printf(s->arena, "queue %s does not exist",
		                         js->queue ? js->queue : "(none)");
	else if (!s->queues[q].leaf)
		j->bad = sc_arena_printf(
		    s->arena, "queue %s is a parent queue; only leaf queues hold jobs", js->queue);
	else
		j->queue = (int)q;
	const char *cname = js->priority_class ? js->priority_class : "normal";
	const sc_prio_class_t *pc = find_class(s, cname);
	if (!pc) {
		j->bad = sc_arena_printf(s->arena, "priority class %s does not exist", cname);
		pc = find_class(s, "normal");
	}
	j->priority = pc->value;
	int pre = js->preemptible >= 0 ? js->preemptible : pc->preemptible;
	j->preemptible = pre >= 0 ? pre != 0 : pc->value < 100;
	for (size_t t = 0; t < js->ntasks; t++)
		j->total += js->tasks[t].replicas > 0 ? js->tasks[t].replicas : 0;
	j->min_member = js->min_member > 0 ? js->min_member : j->total;
	if (j->min_member > j->total)
		j->bad = sc_arena_printf(s->arena, "minMember %d is more than the job's %d pods",
		                         j->min_member, j->total);
	int rc = build_pods(s, j);
	if (rc == 0 && j->npending > 0 && j->nrunning == 0) {
		j->shape = sc__job_shape(j); /* allocate looks it up (allocate.c) */
		j->shape_ok = true;
	}
	return rc;
}

static int build_jobs(sc_sched_t *s)
{
	const sc_snapshot_t *snap = s->snap;
	s->njobs = (int)snap->njobs;
	s->jobs = sc_arena_calloc(s->arena, snap->njobs + 1, sizeof(sjob_t));
	if (!s->jobs)
		return SC_ENOMEM;
	for (size_t i = 0; i < snap->njobs; i++) {
		sjob_t *j = &s->jobs[i];
		j->spec = &snap->jobs[i];
		j->index = i;
		if (!j->spec->name || !*j->spec->name)
			return fail(s, "job #%s: metadata.name: missing%s", "?", NULL);
		int rc = job_setup(s, j);
		if (rc < 0)
			return rc;
		if (j->queue >= 0) {
			squeue_t *q = &s->queues[j->queue];
			sc__queue_add(s, j->queue, &j->alloc, !j->preemptible, +1);
			for (int qq = j->queue; qq >= 0; qq = s->queues[qq].parent)
				for (int k = 0; k < SC_RES_COUNT; k++)
					s->queues[qq].requested.v[k] += j->pod_req_sum_pending.v[k];
			q->njobs_all++;
		}
	}
	for (int i = 0; i < s->nqueues; i++)
		for (int k = 0; k < SC_RES_COUNT; k++)
			s->queues[i].requested.v[k] += s->queues[i].allocated.v[k];
	return 0;
}

/* ---- topology ------------------------------------------------------ */

static int build_level(sc_sched_t *s, topo_level_t *l, const char *key)
{
	size_t n = sc_cluster_nnodes(s->cluster);
	l->key = key;
	l->node_domain = sc_arena_calloc(s->arena, n + 1, sizeof(int));
	l->domain_names = sc_arena_calloc(s->arena, n + 1, sizeof(char *));
	if (!l->node_domain || !l->domain_names)
		return SC_ENOMEM;
	sc_strmap_t seen = {0};
	int rc = sc_strmap_init(&seen, 64);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const sc_node_spec_t *ns = sc_cluster_node(s->cluster, i)->spec;
		const char *v = NULL;
		for (size_t k = 0; k < ns->nlabels && !v; k++)
			if (strcmp(ns->labels[k].key, key) == 0)
				v = ns->labels[k].value;
		l->node_domain[i] = -1;
		if (!v)
			continue;
		long d = sc_strmap_get(&seen, v);
		if (d < 0) {
			d = l->ndomains++;
			l->domain_names[d] = v;
			rc = sc_strmap_put(&seen, v, (uint32_t)d);
		}
		l->node_domain[i] = (int)d;
	}
	sc_strmap_free(&seen);
	return rc;
}

static bool level_known(const sc_sched_t *s, const char *key)
{
	for (int k = 0; k < s->nlevels; k++)
		if (strcmp(s->levels[k].key, key) == 0)
			return true;
	return false;
}

/* Builds a level for each topology key that a job uses. Without a Topology
 * object any node label may serve as a level, as the node's hostname label
 * does in Kubernetes. */
static int build_topology(sc_sched_t *s)
{
	const sc_config_t *c = &s->snap->config;
	size_t max = c->ntopology_levels + 2 * (size_t)s->njobs + 1;
	s->levels = sc_arena_calloc(s->arena, max, sizeof(topo_level_t));
	if (!s->levels)
		return SC_ENOMEM;
	for (int j = 0; j < s->njobs; j++) {
		const char *keys[2] = {s->jobs[j].spec->topo_required,
		                       s->jobs[j].spec->topo_preferred};
		for (int k = 0; k < 2; k++) {
			if (!keys[k] || level_known(s, keys[k]))
				continue;
			bool declared = c->ntopology_levels == 0;
			for (size_t l = 0; l < c->ntopology_levels; l++)
				declared |= strcmp(c->topology_levels[l], keys[k]) == 0;
			if (!declared) {
				s->jobs[j].bad = sc_arena_printf(
				    s->arena,
				    "topology level %s is not one of the cluster's levels",
				    keys[k]);
				continue;
			}
			int rc = build_level(s, &s->levels[s->nlevels++], keys[k]);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

/* ---- the whole snapshot ------------------------------------------- */

int sc__sched_build(sc_sched_t *s, const sc_snapshot_t *snap)
{
	int rc;
	s->snap = snap;
	s->cluster = sc_cluster_new(snap->nodes, snap->nnodes, &rc);
	if (!s->cluster) {
		if (rc == SC_EINVAL)
			return fail(s, "nodes: two nodes share a name%s%s", "", NULL);
		if (rc == SC_ERANGE)
			return fail(s, "nodes: spec.gpus.count: more than 16 devices on a node%s%s",
			            "", NULL);
		return rc;
	}
	int64_t g, c, m;
	sc_cluster_totals(s->cluster, &g, &c, &m);
	for (size_t i = 0; i < snap->nnodes; i++)
		if (snap->nodes[i].gpu_memory > s->max_gpu_memory)
			s->max_gpu_memory = snap->nodes[i].gpu_memory;
	s->capacity.v[SC_RES_GPU] = (double)g / SC_GPU_MILLI;
	s->capacity.v[SC_RES_CPU] = (double)c;
	s->capacity.v[SC_RES_MEM] = (double)m;
	if ((rc = build_classes(s)) < 0 || (rc = build_queues(s)) < 0 || (rc = build_jobs(s)) < 0 ||
	    (rc = build_topology(s)) < 0)
		return rc;
	sc__cluster_settle_releasing(s->cluster);
	return 0;
}

void sc__sched_release(sc_sched_t *s)
{
	sc_cluster_free(s->cluster);
	s->cluster = NULL;
	sc_strmap_free(&s->queue_names);
}

void *sc__scratch(sc_sched_t *s, int slot, size_t bytes)
{
	if (bytes > s->scratch_cap[slot]) {
		size_t cap = s->scratch_cap[slot] ? s->scratch_cap[slot] : 1024;
		while (cap < bytes)
			cap *= 2;
		void *p = sc_arena_alloc(s->arena, cap);
		if (!p)
			return NULL;
		s->scratch[slot] = p;
		s->scratch_cap[slot] = cap;
	}
	return s->scratch[slot];
}

int sc__record(sc_sched_t *s, const decision_t *d)
{
	if (s->ndecisions == s->capdecisions) {
		size_t cap = s->capdecisions ? s->capdecisions * 2 : 256;
		decision_t *n = sc_arena_alloc(s->arena, cap * sizeof(*n));
		if (!n)
			return SC_ENOMEM;
		if (s->ndecisions)
			memcpy(n, s->decisions, s->ndecisions * sizeof(*n));
		s->decisions = n;
		s->capdecisions = cap;
	}
	s->decisions[s->ndecisions++] = *d;
	return 0;
}
