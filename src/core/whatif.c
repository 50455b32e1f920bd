/* The world after a cycle's decisions, for the autoscaler's what-ifs. See
 * whatif.h. */
#include "core/whatif.h"

#include <string.h>

bool sc__node_has_label(const sc_node_spec_t *n, const char *key, const char *value)
{
	for (size_t i = 0; i < n->nlabels; i++)
		if (n->labels[i].key && n->labels[i].value && strcmp(n->labels[i].key, key) == 0)
			return strcmp(n->labels[i].value, value) == 0;
	return false;
}

static size_t job_replicas(const sc_job_spec_t *j)
{
	size_t n = 0;
	for (size_t t = 0; t < j->ntasks; t++)
		n += j->tasks[t].replicas > 0 ? (size_t)j->tasks[t].replicas : 0;
	return n;
}

static long find_status(const sc_whatif_t *w, size_t j, const char *pod)
{
	for (size_t k = 0; k < w->jobs[j].npods; k++)
		if (w->pods[j][k].name && strcmp(w->pods[j][k].name, pod) == 0)
			return (long)k;
	return -1;
}

static void remove_status(sc_whatif_t *w, size_t j, size_t k)
{
	sc_pod_status_t *p = w->pods[j];
	memmove(p + k, p + k + 1, (w->jobs[j].npods - k - 1) * sizeof(*p));
	w->jobs[j].npods--;
}

/* Room for one more status of job j (statuses are few beyond the
 * replicas: the array grows by doubling in the arena). */
static int reserve_status(sc_whatif_t *w, size_t j)
{
	if (w->jobs[j].npods < w->podcap[j])
		return 0;
	size_t cap = w->podcap[j] ? w->podcap[j] * 2 : 4;
	sc_pod_status_t *np = sc_arena_calloc(w->arena, cap, sizeof(*np));
	if (!np)
		return SC_ENOMEM;
	if (w->jobs[j].npods)
		memcpy(np, w->pods[j], w->jobs[j].npods * sizeof(*np));
	w->pods[j] = np;
	w->jobs[j].pods = np;
	w->podcap[j] = cap;
	return 0;
}

int sc__whatif_set_pod(sc_whatif_t *w, size_t j, const char *pod, const sc_binding_t *b,
                       int64_t now)
{
	long k = find_status(w, j, pod);
	if (!b) {
		if (k >= 0)
			remove_status(w, j, (size_t)k);
		return 0;
	}
	if (k < 0) {
		if (reserve_status(w, j) < 0)
			return SC_ENOMEM;
		k = (long)w->jobs[j].npods++;
	}
	w->pods[j][k] = (sc_pod_status_t){
	    .name = pod,
	    .phase = SC_POD_RUNNING,
	    .node = b->node,
	    .gpus = b->gpus,
	    .ngpus = b->ngpus,
	    .gpu_milli = b->gpu_milli,
	    .gpu_memory = b->gpu_memory,
	    .mig_gpu = b->mig_gpu,
	    .mig_start = b->mig_start,
	    .mig_profile = b->mig_profile,
	    .started_at = now,
	};
	return 0;
}

static int copy_nodes(sc_whatif_t *w, const sc_snapshot_t *s, size_t extra)
{
	w->capnodes = s->nnodes + extra;
	w->nodes = sc_arena_calloc(w->arena, w->capnodes + 1, sizeof(*w->nodes));
	if (!w->nodes || sc_strmap_init(&w->node_index, s->nnodes + 1) < 0)
		return SC_ENOMEM;
	if (s->nnodes)
		memcpy(w->nodes, s->nodes, s->nnodes * sizeof(*w->nodes));
	w->nnodes = s->nnodes;
	for (size_t i = 0; i < s->nnodes; i++)
		if (s->nodes[i].name &&
		    sc_strmap_put(&w->node_index, s->nodes[i].name, (uint32_t)i) == SC_ENOMEM)
			return SC_ENOMEM;
	return 0;
}

/* Copies job j's statuses, leaving out releasing ones when asked. */
static int copy_job(sc_whatif_t *w, const sc_snapshot_t *s, size_t j, bool drop_releasing)
{
	const sc_job_spec_t *in = &s->jobs[j];
	w->jobs[j] = *in;
	w->podcap[j] = in->npods + 2;
	w->pods[j] = sc_arena_calloc(w->arena, w->podcap[j], sizeof(sc_pod_status_t));
	if (!w->pods[j])
		return SC_ENOMEM;
	size_t n = 0;
	for (size_t k = 0; k < in->npods; k++)
		if (!(drop_releasing && in->pods[k].phase == SC_POD_RELEASING))
			w->pods[j][n++] = in->pods[k];
	w->jobs[j].pods = w->pods[j];
	w->jobs[j].npods = n;
	return 0;
}

static void count_unplaced(sc_whatif_t *w)
{
	w->unplaced = 0;
	for (size_t j = 0; j < w->snap.njobs; j++) {
		size_t held = 0, total = job_replicas(&w->jobs[j]);
		for (size_t k = 0; k < w->jobs[j].npods; k++)
			held += w->pods[j][k].phase != SC_POD_PENDING;
		w->unplaced += total > held ? total - held : 0;
	}
}

int sc__whatif_build(sc_whatif_t *w, const sc_snapshot_t *s, const sc_decisions_t *d,
                     size_t extra_nodes, bool drop_releasing)
{
	memset(w, 0, sizeof(*w));
	if (!(w->arena = sc_arena_new(0)) || copy_nodes(w, s, extra_nodes) < 0)
		return SC_ENOMEM;
	w->snap = *s;
	w->jobs = sc_arena_calloc(w->arena, s->njobs + 1, sizeof(*w->jobs));
	w->pods = sc_arena_calloc(w->arena, s->njobs + 1, sizeof(*w->pods));
	w->podcap = sc_arena_calloc(w->arena, s->njobs + 1, sizeof(*w->podcap));
	if (!w->jobs || !w->pods || !w->podcap)
		return SC_ENOMEM;
	for (size_t j = 0; j < s->njobs; j++)
		if (copy_job(w, s, j, drop_releasing) < 0)
			return SC_ENOMEM;
	/* Evictions first: a consolidation move is an eviction and a binding
	 * of the same pod, and the binding must win. */
	for (size_t e = 0; d && e < d->nevictions; e++)
		if (d->evictions[e].job < s->njobs)
			sc__whatif_set_pod(w, d->evictions[e].job, d->evictions[e].pod, NULL,
			                   s->now);
	for (size_t b = 0; d && b < d->nbindings; b++)
		if (d->bindings[b].job < s->njobs &&
		    sc__whatif_set_pod(w, d->bindings[b].job, d->bindings[b].pod, &d->bindings[b],
		                       s->now) < 0)
			return SC_ENOMEM;
	w->snap.nodes = w->nodes;
	w->snap.nnodes = w->nnodes;
	w->snap.jobs = w->jobs;
	count_unplaced(w);
	return 0;
}

void sc__whatif_free(sc_whatif_t *w)
{
	if (!w)
		return;
	sc_strmap_free(&w->node_index);
	sc_arena_free(w->arena);
	memset(w, 0, sizeof(*w));
}

long sc__whatif_add_node(sc_whatif_t *w, const sc_node_spec_t *n)
{
	if (w->nnodes >= w->capnodes) {
		size_t cap = w->capnodes * 2 + 8;
		sc_node_spec_t *nn = sc_arena_calloc(w->arena, cap + 1, sizeof(*nn));
		if (!nn)
			return -1;
		memcpy(nn, w->nodes, w->nnodes * sizeof(*nn));
		w->nodes = nn;
		w->snap.nodes = nn;
		w->capnodes = cap;
	}
	w->nodes[w->nnodes] = *n;
	w->snap.nnodes = ++w->nnodes;
	return (long)w->nnodes - 1;
}

int sc__whatif_freeze(sc_whatif_t *w, size_t j)
{
	const sc_job_spec_t *js = &w->jobs[j];
	size_t held = 0;
	for (size_t k = 0; k < js->npods; k++)
		held += w->pods[j][k].phase != SC_POD_PENDING;
	if (held >= job_replicas(js))
		return 0;
	for (size_t t = 0; t < js->ntasks; t++) {
		const char *task = js->tasks[t].name ? js->tasks[t].name : "task";
		for (int r = 0; r < js->tasks[t].replicas; r++) {
			char *name = sc_arena_printf(w->arena, "%s-%s-%d", js->name, task, r);
			if (!name)
				return SC_ENOMEM;
			long k = find_status(w, j, name);
			if (k >= 0 && w->pods[j][k].phase != SC_POD_PENDING)
				continue;
			if (k < 0) {
				if (reserve_status(w, j) < 0)
					return SC_ENOMEM;
				k = (long)w->jobs[j].npods++;
			}
			w->pods[j][k] = (sc_pod_status_t){.name = name, .phase = SC_POD_SUCCEEDED};
		}
	}
	return 0;
}

int sc__whatif_allocate(sc_whatif_t *w, sc_decisions_t **out, char *msg, size_t msgsize)
{
	sc_snapshot_t snap = w->snap;
	snap.config.actions[0] = SC_ACT_ALLOCATE;
	snap.config.nactions = 1;
	/* Reservations hold nodes for work that waited long; a what-if asks
	 * only whether the work fits. */
	snap.config.reservation_after = 0;
	return sc_schedule(&snap, out, msg, msgsize);
}
