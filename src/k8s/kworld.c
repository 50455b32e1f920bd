/* Cache + local state -> the core's snapshot, and core pod names -> pods
 * (see kworld.h for the rules). Everything is allocated from the cycle's
 * arena; nothing here does I/O. Pods are visited in creation order (ties by
 * key) and nodes and queues in name order, so the same cluster always gives
 * the same snapshot and therefore the same decisions. */
#include "k8s/kworld.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starcloud/error.h"

#define OTHER_PRIORITY 2147483647
#define OTHER_CLASS_VALUE 2100000000 /* above Kubernetes' system classes */

typedef struct wpod {
	sc_kpod_t *pod;
	const sc_klocal_t *local;
	const char *node; /* bound, assumed or nominated node, or NULL */
	long nidx;        /* its index, or -1 */
	int phase;        /* enum sc_pod_phase */
	int task, replica;
	const sc_label_t *sel;
	size_t nsel;
	int *gpus;
	size_t ngpus;
	int milli;
	struct wpod *next;      /* in its job */
	struct wpod *node_next; /* running on the same node */
} wpod_t;

typedef struct wjob {
	const char *name;
	const char *queue;
	const char *cls;
	int preemptible, min_member;
	int64_t created;
	const char *topo_req, *topo_pref;
	bool foreign;
	wpod_t *head, *tail;
	size_t n;
} wjob_t;

typedef struct taint {
	const sc_ktaint_t *t;
	const char *label;
} taint_t;

typedef struct ctx {
	sc_arena_t *a;
	const sc_kcache_t *c;
	const sc_kmap_t *local;
	const sc_kworld_opts_t *o;
	sc_kworld_t *w;
	/* nodes */
	sc_node_spec_t *nodes;
	size_t nnodes;
	sc_strmap_t node_idx;
	taint_t *taints;
	size_t ntaints;
	wpod_t **on_node; /* running pods per node */
	/* queues: name -> NULL (usable) or why not */
	sc_strmap_t queue_idx;
	const char **queue_bad;
	const char **queue_root; /* the original problem up the tree */
	sc_queue_spec_t *queues;
	size_t nqueues;
	/* classes */
	sc_prio_class_t *classes;
	size_t nclasses, capclasses;
	sc_strmap_t class_idx;
	const char *default_class;
	/* jobs */
	wjob_t *jobs;
	size_t njobs;
	sc_strmap_t job_idx;
	sc_strmap_t job_names;
	size_t nours; /* pods of ours in jobs */
} ctx_t;

#define ENOMEM_IF(x)                                                                               \
	do {                                                                                       \
		if (!(x))                                                                          \
			return SC_ENOMEM;                                                          \
	} while (0)

static int cmp_str(const void *a, const void *b)
{
	return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

/* The map's values in key order. Every cached struct starts with its key,
 * which is what cmp_str compares. */
static void **sorted_values(sc_arena_t *a, const sc_kmap_t *m)
{
	void **v = sc_arena_calloc(a, m->len + 1, sizeof(*v));
	size_t n = 0;
	if (!v)
		return NULL;
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(m, &it);)
		v[n++] = it.val;
	qsort(v, n, sizeof(*v), cmp_str);
	return v;
}

/* ---- nodes and taints --------------------------------------------------- */

static bool same_taint(const sc_ktaint_t *x, const sc_ktaint_t *y)
{
	return strcmp(x->key, y->key) == 0 && strcmp(x->effect, y->effect) == 0 &&
	       strcmp(x->value ? x->value : "", y->value ? y->value : "") == 0;
}

static long taint_index(const ctx_t *x, const sc_ktaint_t *t)
{
	for (size_t i = 0; i < x->ntaints; i++)
		if (same_taint(x->taints[i].t, t))
			return (long)i;
	return -1;
}

static int collect_taints(ctx_t *x, sc_knode_t **nodes, size_t n)
{
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += nodes[i]->ntaints;
	ENOMEM_IF(x->taints = sc_arena_calloc(x->a, total + 1, sizeof(*x->taints)));
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < nodes[i]->ntaints; k++) {
			const sc_ktaint_t *t = &nodes[i]->taints[k];
			if (taint_index(x, t) >= 0)
				continue;
			taint_t *d = &x->taints[x->ntaints];
			d->t = t;
			ENOMEM_IF(d->label =
			              sc_arena_printf(x->a, SC_KW_TAINT_LABEL "%zu", x->ntaints));
			x->ntaints++;
		}
	return 0;
}

static int build_node(ctx_t *x, const sc_knode_t *kn, sc_node_spec_t *ns)
{
	sc_label_t *l = sc_arena_calloc(x->a, kn->nlabels + x->ntaints + 1, sizeof(*l));
	ENOMEM_IF(l);
	if (kn->nlabels)
		memcpy(l, kn->labels, kn->nlabels * sizeof(*l));
	size_t nl = kn->nlabels;
	for (size_t i = 0; i < x->ntaints; i++) {
		bool has = false;
		for (size_t k = 0; k < kn->ntaints && !has; k++)
			has = same_taint(&kn->taints[k], x->taints[i].t);
		if (!has)
			l[nl++] = (sc_label_t){x->taints[i].label, "true"};
	}
	*ns = (sc_node_spec_t){
	    .name = kn->key,
	    .labels = l,
	    .nlabels = nl,
	    .cpu_milli = kn->cpu_milli,
	    .memory = kn->memory,
	    .gpu_count = kn->gpus,
	    .gpu_model = kn->gpus ? (kn->gpu_model ? kn->gpu_model : "gpu") : NULL,
	    .gpu_memory = kn->gpu_memory,
	    .not_ready = !kn->ready,
	    .unschedulable = kn->unschedulable,
	};
	return 0;
}

static int build_nodes(ctx_t *x)
{
	size_t n = x->c->nodes.len;
	sc_knode_t **nodes = (sc_knode_t **)sorted_values(x->a, &x->c->nodes);
	ENOMEM_IF(nodes);
	int rc = collect_taints(x, nodes, n);
	if (rc < 0)
		return rc;
	ENOMEM_IF(x->nodes = sc_arena_calloc(x->a, n + 1, sizeof(*x->nodes)));
	ENOMEM_IF(x->on_node = sc_arena_calloc(x->a, n + 1, sizeof(*x->on_node)));
	if ((rc = sc_strmap_init(&x->node_idx, n)) < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if ((rc = build_node(x, nodes[i], &x->nodes[i])) < 0 ||
		    (rc = sc_strmap_put(&x->node_idx, nodes[i]->key, (uint32_t)i)) < 0)
			return rc;
	}
	x->nnodes = n;
	return 0;
}

/* The pod's node selector plus a label for each taint it does not
 * tolerate. */
static int pod_selector(ctx_t *x, wpod_t *wp)
{
	sc_kpod_t *p = wp->pod;
	size_t extra = 0;
	for (size_t i = 0; i < x->ntaints; i++)
		extra += !sc_ktoleration_matches(p, x->taints[i].t);
	if (!extra) {
		wp->sel = p->selector;
		wp->nsel = p->nselector;
		return 0;
	}
	sc_label_t *l = sc_arena_calloc(x->a, p->nselector + extra, sizeof(*l));
	ENOMEM_IF(l);
	if (p->nselector)
		memcpy(l, p->selector, p->nselector * sizeof(*l));
	size_t n = p->nselector;
	for (size_t i = 0; i < x->ntaints; i++)
		if (!sc_ktoleration_matches(p, x->taints[i].t))
			l[n++] = (sc_label_t){x->taints[i].label, "true"};
	wp->sel = l;
	wp->nsel = n;
	return 0;
}

/* ---- queues and classes ------------------------------------------------- */

/* Why queue i cannot hold jobs (NULL when it can): its own error, a missing
 * or unusable parent, or a cycle. A child names only its parent, whose own
 * reason its jobs carry, so messages stay short in a deep tree.
 * state: 0 new, 1 visiting, 2 done. */
static const char *queue_check(ctx_t *x, sc_kqueue_t **qs, size_t i, char *state)
{
	if (state[i] == 2)
		return x->queue_bad[i];
	if (state[i] == 1)
		return sc_arena_printf(
		    x->a, "queue %s: spec.parentQueue: the queue tree has a cycle", qs[i]->key);
	state[i] = 1;
	const char *bad = qs[i]->bad, *root = bad;
	const char *parent = qs[i]->set ? qs[i]->spec.parent : NULL;
	if (!bad && parent) {
		long p = sc_strmap_get(&x->queue_idx, parent);
		const char *pb = p >= 0 ? queue_check(x, qs, (size_t)p, state) : NULL;
		if (p < 0) {
			bad = root =
			    sc_arena_printf(x->a, "queue %s: spec.parentQueue: no queue named %s",
			                    qs[i]->key, parent);
		} else if (pb && strstr(pb, "has a cycle")) {
			bad = root = pb;
		} else if (pb) {
			root = x->queue_root[p] ? x->queue_root[p] : pb;
			bad = sc_arena_printf(x->a, "queue %s: parent queue %s cannot be used: %s",
			                      qs[i]->key, parent, root);
		}
	}
	state[i] = 2;
	x->queue_root[i] = root;
	return x->queue_bad[i] = bad;
}

static int build_queues(ctx_t *x)
{
	size_t n = x->c->queues.len;
	sc_kqueue_t **qs = (sc_kqueue_t **)sorted_values(x->a, &x->c->queues);
	char *state = sc_arena_calloc(x->a, n + 1, 1);
	int rc;
	ENOMEM_IF(qs && state);
	ENOMEM_IF(x->queue_bad = sc_arena_calloc(x->a, n + 1, sizeof(char *)));
	ENOMEM_IF(x->queue_root = sc_arena_calloc(x->a, n + 1, sizeof(char *)));
	ENOMEM_IF(x->queues = sc_arena_calloc(x->a, n + 3, sizeof(*x->queues)));
	if ((rc = sc_strmap_init(&x->queue_idx, n + 2)) < 0)
		return rc;
	for (size_t i = 0; i < n; i++)
		if ((rc = sc_strmap_put(&x->queue_idx, qs[i]->key, (uint32_t)i)) < 0)
			return rc;
	for (size_t i = 0; i < n; i++)
		if (!queue_check(x, qs, i, state))
			x->queues[x->nqueues++] = qs[i]->spec;
	/* The default queue need not exist: pods that name no queue then share
	 * one with no quota and no limit (KAI would leave them pending). */
	if (sc_strmap_get(&x->queue_idx, x->o->default_queue) < 0) {
		sc_queue_spec_t *d = &x->queues[x->nqueues++];
		*d = (sc_queue_spec_t){.name = x->o->default_queue, .priority = 100};
		for (int r = 0; r < SC_RES_COUNT; r++)
			d->res[r] = (sc_queue_res_t){.quota = 0, .limit = -1, .weight = 1};
	}
	sc_queue_spec_t *o = &x->queues[x->nqueues++];
	*o = (sc_queue_spec_t){.name = SC_KW_OTHER, .priority = OTHER_PRIORITY};
	for (int r = 0; r < SC_RES_COUNT; r++)
		o->res[r] = (sc_queue_res_t){.quota = -1, .limit = -1, .weight = 0};
	return 0;
}

/* Why a job in queue name cannot be scheduled, or NULL. An unknown queue
 * is left to the core, which says so in the job's reason. */
static const char *queue_reason(const ctx_t *x, const char *name)
{
	long i = sc_strmap_get(&x->queue_idx, name);
	return i >= 0 ? x->queue_bad[i] : NULL;
}

static int add_class(ctx_t *x, const char *name, int value, int preemptible)
{
	if (x->nclasses == x->capclasses) {
		size_t cap = x->capclasses ? x->capclasses * 2 : 64;
		sc_prio_class_t *n = sc_arena_calloc(x->a, cap, sizeof(*n));
		ENOMEM_IF(n);
		if (x->nclasses)
			memcpy(n, x->classes, x->nclasses * sizeof(*n));
		x->classes = n;
		x->capclasses = cap;
	}
	x->classes[x->nclasses] = (sc_prio_class_t){name, value, preemptible};
	return sc_strmap_put(&x->class_idx, name, (uint32_t)x->nclasses++);
}

static int build_classes(ctx_t *x)
{
	sc_kclass_t **cs = (sc_kclass_t **)sorted_values(x->a, &x->c->classes);
	int rc;
	ENOMEM_IF(cs);
	if ((rc = sc_strmap_init(&x->class_idx, x->c->classes.len + 16)) < 0)
		return rc;
	for (size_t i = 0; i < x->c->classes.len; i++) {
		if ((rc = add_class(x, cs[i]->key, cs[i]->value, -1)) < 0)
			return rc;
		if (cs[i]->global_default && !x->default_class)
			x->default_class = cs[i]->key;
	}
	return add_class(x, SC_KW_OTHER, OTHER_CLASS_VALUE, 0);
}

/* The class a job runs at. A name the API server knows but our cache does
 * not (yet) is taken at the value admission wrote into the pod. */
static const char *job_class(ctx_t *x, const char *name, const sc_kpod_t *p)
{
	if (!name)
		name = p->prio_class;
	if (!name)
		return x->default_class; /* NULL = the core's "normal" (50), KAI's default */
	if (sc_strmap_get(&x->class_idx, name) < 0 && add_class(x, name, p->priority, -1) < 0)
		return NULL;
	return name;
}

/* ---- jobs --------------------------------------------------------------- */

static int cmp_pod(const void *a, const void *b)
{
	const sc_kpod_t *x = *(sc_kpod_t *const *)a, *y = *(sc_kpod_t *const *)b;
	if (x->created != y->created)
		return x->created < y->created ? -1 : 1;
	return strcmp(x->key, y->key);
}

static void job_append(wjob_t *j, wpod_t *wp)
{
	if (j->tail)
		j->tail->next = wp;
	else
		j->head = wp;
	j->tail = wp;
	j->n++;
}

static wjob_t *new_job(ctx_t *x, const char *name)
{
	wjob_t *j = &x->jobs[x->njobs++];
	memset(j, 0, sizeof(*j));
	j->name = name;
	j->preemptible = -1;
	j->min_member = 1;
	return j;
}

/* Someone else's pod, or one of ours we cannot schedule but that holds
 * resources: a one-pod job in the hidden queue. */
static int add_foreign(ctx_t *x, wpod_t *wp)
{
	const char *name = sc_arena_printf(x->a, SC_KW_OTHER "/%s", wp->pod->key);
	ENOMEM_IF(name);
	wjob_t *j = new_job(x, name);
	j->foreign = true;
	j->queue = SC_KW_OTHER;
	j->cls = SC_KW_OTHER;
	j->preemptible = 0;
	j->created = wp->pod->created;
	wp->sel = NULL;
	wp->nsel = 0;
	job_append(j, wp);
	x->w->nforeign++;
	return 0;
}

static int hold(ctx_t *x, sc_kpod_t *p, const char *why)
{
	ENOMEM_IF(why);
	x->w->held[x->w->nheld++] = (sc_kheld_t){p, why};
	return 0;
}

/* The job a pod of ours belongs to, created on first use. */
static wjob_t *job_for(ctx_t *x, sc_kpod_t *p, const sc_kgroup_t *g)
{
	const char *key = sc_arena_printf(x->a, "%c %s", g ? 'g' : 'p', g ? g->key : p->key);
	if (!key)
		return NULL;
	long i = sc_strmap_get(&x->job_idx, key);
	if (i >= 0)
		return &x->jobs[i];
	/* A group and a lone pod may share a name in a namespace; the core
	 * wants job names unique. */
	const char *name = g ? g->key : p->key;
	if (sc_strmap_get(&x->job_names, name) >= 0 &&
	    !(name = sc_arena_printf(x->a, "%s#pod", name)))
		return NULL;
	if (sc_strmap_put(&x->job_idx, key, (uint32_t)x->njobs) < 0 ||
	    sc_strmap_put(&x->job_names, name, (uint32_t)x->njobs) < 0)
		return NULL;
	wjob_t *j = new_job(x, name);
	j->queue = (g && g->queue) ? g->queue : (!g && p->queue) ? p->queue : x->o->default_queue;
	j->cls = job_class(x, g ? g->prio_class : NULL, p);
	j->created = g ? g->created : p->created;
	if (g) {
		j->preemptible = g->preemptible;
		j->min_member = g->min_member > 0 ? g->min_member : 1;
		j->topo_req = g->topo_required;
		j->topo_pref = g->topo_preferred;
	}
	return j;
}

/* Places one pod of ours: into its job, into the hidden queue (when it holds
 * resources but cannot be scheduled by us), or on the held list. */
static int add_ours(ctx_t *x, wpod_t *wp)
{
	sc_kpod_t *p = wp->pod;
	const sc_kgroup_t *g = NULL;
	const char *why = p->bad;
	if (!why && p->group) {
		char key[600];
		snprintf(key, sizeof(key), "%s/%s", p->ns, p->group);
		g = sc_kmap_get(&x->c->groups, key);
		if (!g)
			why = sc_arena_printf(x->a, "PodGroup %s does not exist (yet)", key);
		else if (g->bad)
			why = g->bad;
	}
	if (!why) {
		const char *q = g ? g->queue : p->queue;
		why = queue_reason(x, q ? q : x->o->default_queue);
	}
	if (why)
		return wp->node ? add_foreign(x, wp) : hold(x, p, why);
	int rc = pod_selector(x, wp);
	if (rc < 0)
		return rc;
	wjob_t *j = job_for(x, p, g);
	ENOMEM_IF(j);
	job_append(j, wp);
	x->nours++;
	return 0;
}

/* The local state of a pod, if it is about the same pod (same uid). */
static const sc_klocal_t *local_of(const ctx_t *x, const sc_kpod_t *p)
{
	const sc_klocal_t *l = sc_kmap_get(x->local, p->key);
	if (!l || (l->uid && p->uid && strcmp(l->uid, p->uid) != 0))
		return NULL;
	return l;
}

static int classify(ctx_t *x, sc_kpod_t *p)
{
	if (p->phase == SC_KP_SUCCEEDED || p->phase == SC_KP_FAILED)
		return 0;
	bool ours = p->scheduler && strcmp(p->scheduler, x->o->scheduler) == 0;
	const sc_klocal_t *l = ours ? local_of(x, p) : NULL;
	const char *node = p->node;
	if (!node && l && (l->kind == SC_KL_BINDING || l->kind == SC_KL_NOMINATED))
		node = l->node;
	if (!node && (!ours || p->deleting))
		return 0; /* not ours to place, or going away */
	long ni = node ? sc_strmap_get(&x->node_idx, node) : -1;
	if (node && ni < 0)
		return 0; /* on a node we do not know: holds nothing we count */
	wpod_t *wp = sc_arena_calloc(x->a, 1, sizeof(*wp));
	ENOMEM_IF(wp);
	wp->pod = p;
	wp->local = l;
	wp->node = node;
	wp->nidx = ni;
	wp->phase = !node                                               ? SC_POD_PENDING
	            : (p->deleting || (l && l->kind == SC_KL_EVICTING)) ? SC_POD_RELEASING
	                                                                : SC_POD_RUNNING;
	if (node) {
		wp->node_next = x->on_node[ni];
		x->on_node[ni] = wp;
	}
	return ours ? add_ours(x, wp) : add_foreign(x, wp);
}

static int build_jobs(ctx_t *x)
{
	size_t n = x->c->pods.len;
	sc_kpod_t **pods = sc_arena_calloc(x->a, n + 1, sizeof(*pods));
	size_t k = 0;
	int rc;
	ENOMEM_IF(pods);
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(&x->c->pods, &it);)
		pods[k++] = it.val;
	qsort(pods, n, sizeof(*pods), cmp_pod);
	ENOMEM_IF(x->jobs = sc_arena_calloc(x->a, n + 1, sizeof(*x->jobs)));
	ENOMEM_IF(x->w->held = sc_arena_calloc(x->a, n + 1, sizeof(*x->w->held)));
	if ((rc = sc_strmap_init(&x->job_idx, n)) < 0 ||
	    (rc = sc_strmap_init(&x->job_names, n)) < 0)
		return rc;
	for (size_t i = 0; i < n; i++)
		if ((rc = classify(x, pods[i])) < 0)
			return rc;
	return 0;
}

/* ---- devices of running pods -------------------------------------------- */

/* Devices for the running pods of one node: first those whose devices are
 * known (our annotations, or our own decision not yet seen back), then
 * whole-device pods on the lowest free devices, then shares on the fullest
 * device they fit. A pod bound by someone else has no device the API shows,
 * so this is an accounting choice; only the counts matter to the kubelet. */
static int assign_node(ctx_t *x, size_t ni)
{
	int used[SC_MAX_GPUS] = {0};
	int ndev = x->nodes[ni].gpu_count;
	for (int pass = 0; pass < 3; pass++)
		for (wpod_t *wp = x->on_node[ni]; wp; wp = wp->node_next) {
			const sc_kpod_t *p = wp->pod;
			const int *known = p->gpus;
			int nknown = p->ngpus, milli = p->share_milli;
			if (wp->local && !p->node) {
				known = wp->local->gpus;
				nknown = wp->local->ngpus;
				milli = wp->local->share_milli;
			}
			bool share = p->req.gpus == 0 && (p->req.gpu_milli || p->req.gpu_memory);
			int want = share ? 1 : p->req.gpus;
			if (!want || wp->gpus)
				continue;
			bool ok = nknown == want;
			for (int k = 0; ok && k < nknown; k++)
				ok = known[k] < ndev;
			if (pass == 0 && !ok)
				continue;
			if (pass == 1 && share)
				continue;
			ENOMEM_IF(wp->gpus = sc_arena_calloc(x->a, (size_t)want, sizeof(int)));
			wp->ngpus = (size_t)want;
			if (share)
				wp->milli = milli > 0              ? milli
				            : p->req.gpu_milli > 0 ? p->req.gpu_milli
				            : x->nodes[ni].gpu_memory > 0
				                ? (int)((p->req.gpu_memory * SC_GPU_MILLI +
				                         x->nodes[ni].gpu_memory - 1) /
				                        x->nodes[ni].gpu_memory)
				                : 0;
			for (int k = 0; k < want; k++) {
				int d = 0;
				if (pass == 0) {
					d = known[k];
				} else if (!share) {
					while (d < ndev - 1 && used[d] > 0)
						d++;
				} else {
					int need = wp->milli > 0 ? wp->milli : 1, best = -1;
					for (int e = 0; e < ndev; e++)
						if (used[e] + need <= SC_GPU_MILLI &&
						    (best < 0 || used[e] > used[best]))
							best = e;
					d = best < 0 ? 0 : best;
				}
				wp->gpus[k] = d;
				used[d] += share ? (wp->milli > 0 ? wp->milli : 1) : SC_GPU_MILLI;
			}
		}
	return 0;
}

/* ---- the snapshot ------------------------------------------------------- */

static bool same_shape(const wpod_t *a, const wpod_t *b)
{
	const sc_request_t *x = &a->pod->req, *y = &b->pod->req;
	if (x->cpu_milli != y->cpu_milli || x->memory != y->memory || x->gpus != y->gpus ||
	    x->gpu_milli != y->gpu_milli || x->gpu_memory != y->gpu_memory || a->nsel != b->nsel)
		return false;
	for (size_t i = 0; i < a->nsel; i++)
		if (strcmp(a->sel[i].key, b->sel[i].key) != 0 ||
		    strcmp(a->sel[i].value, b->sel[i].value) != 0)
			return false;
	return true;
}

/* Splits a job's pods into tasks of one shape and fills its spec. */
static int job_spec(ctx_t *x, size_t ji, sc_job_spec_t *js, size_t *next_pod)
{
	wjob_t *j = &x->jobs[ji];
	sc_kworld_t *w = x->w;
	wpod_t **reps = sc_arena_calloc(x->a, j->n + 1, sizeof(*reps));
	int *count = sc_arena_calloc(x->a, j->n + 1, sizeof(int));
	sc_task_spec_t *tasks = sc_arena_calloc(x->a, j->n + 1, sizeof(*tasks));
	sc_pod_status_t *st = sc_arena_calloc(x->a, j->n + 1, sizeof(*st));
	size_t ntasks = 0, nst = 0;
	ENOMEM_IF(reps && count && tasks && st);
	for (wpod_t *wp = j->head; wp; wp = wp->next) {
		size_t t = 0;
		while (t < ntasks && !same_shape(reps[t], wp))
			t++;
		if (t == ntasks) {
			reps[ntasks++] = wp;
			tasks[t] = (sc_task_spec_t){
			    .name = j->foreign ? "pod" : sc_arena_printf(x->a, "t%zu", t),
			    .req = wp->pod->req,
			    .selector = wp->sel,
			    .nselector = wp->nsel,
			};
			ENOMEM_IF(tasks[t].name);
		}
		wp->task = (int)t;
		wp->replica = count[t]++;
	}
	for (size_t t = 0; t < ntasks; t++)
		tasks[t].replicas = count[t];
	w->first[ji] = *next_pod;
	for (wpod_t *wp = j->head; wp; wp = wp->next) {
		const char *name =
		    sc_arena_printf(x->a, "%s-%s-%d", j->name, tasks[wp->task].name, wp->replica);
		ENOMEM_IF(name);
		if (!j->foreign) {
			w->pods[*next_pod] = wp->pod;
			int rc = sc_strmap_put(&w->names, name, (uint32_t)*next_pod);
			if (rc < 0)
				return rc;
			(*next_pod)++;
		}
		if (wp->phase == SC_POD_PENDING)
			continue;
		st[nst++] = (sc_pod_status_t){
		    .name = name,
		    .phase = wp->phase,
		    .node = wp->node,
		    .gpus = wp->gpus,
		    .ngpus = wp->ngpus,
		    .gpu_milli = wp->milli,
		    .gpu_memory = wp->pod->req.gpu_memory,
		    .started_at = wp->pod->started,
		};
	}
	*js = (sc_job_spec_t){
	    .name = j->name,
	    .queue = j->queue,
	    .priority_class = j->cls,
	    .preemptible = j->preemptible,
	    .min_member = j->min_member,
	    .created = j->created,
	    .topo_required = j->topo_req,
	    .topo_preferred = j->topo_pref,
	    .staleness_grace = -1,
	    .tasks = tasks,
	    .ntasks = ntasks,
	    .pods = st,
	    .npods = nst,
	};
	w->foreign[ji] = j->foreign;
	return 0;
}

int sc_kworld_build(sc_arena_t *a, const sc_kcache_t *c, const sc_kmap_t *local,
                    const sc_kworld_opts_t *o, sc_kworld_t *w)
{
	ctx_t x = {.a = a, .c = c, .local = local, .o = o, .w = w};
	int rc;
	memset(w, 0, sizeof(*w));
	if ((rc = build_nodes(&x)) < 0 || (rc = build_queues(&x)) < 0 ||
	    (rc = build_classes(&x)) < 0 || (rc = build_jobs(&x)) < 0)
		goto done;
	for (size_t i = 0; i < x.nnodes; i++)
		if ((rc = assign_node(&x, i)) < 0)
			goto done;
	sc_job_spec_t *jobs = sc_arena_calloc(a, x.njobs + 1, sizeof(*jobs));
	w->pods = sc_arena_calloc(a, x.nours + 1, sizeof(*w->pods));
	w->first = sc_arena_calloc(a, x.njobs + 1, sizeof(*w->first));
	w->foreign = sc_arena_calloc(a, x.njobs + 1, sizeof(*w->foreign));
	rc = SC_ENOMEM;
	if (!jobs || !w->pods || !w->first || !w->foreign)
		goto done;
	if ((rc = sc_strmap_init(&w->names, x.nours + 1)) < 0)
		goto done;
	size_t next = 0;
	for (size_t j = 0; j < x.njobs; j++)
		if ((rc = job_spec(&x, j, &jobs[j], &next)) < 0)
			goto done;
	w->first[x.njobs] = next;
	w->snap = (sc_snapshot_t){
	    .nodes = x.nodes,
	    .nnodes = x.nnodes,
	    .queues = x.queues,
	    .nqueues = x.nqueues,
	    .classes = x.classes,
	    .nclasses = x.nclasses,
	    .jobs = jobs,
	    .njobs = x.njobs,
	    .config = *o->config,
	    .now = o->now,
	};
	rc = 0;
done:
	sc_strmap_free(&x.node_idx);
	sc_strmap_free(&x.queue_idx);
	sc_strmap_free(&x.class_idx);
	sc_strmap_free(&x.job_idx);
	sc_strmap_free(&x.job_names);
	return rc;
}

sc_kpod_t *sc_kworld_pod(const sc_kworld_t *w, const char *core_name)
{
	long i = sc_strmap_get(&w->names, core_name);
	return i >= 0 ? w->pods[i] : NULL;
}

void sc_kworld_free(sc_kworld_t *w)
{
	if (w)
		sc_strmap_free(&w->names);
}
