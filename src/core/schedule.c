/* sc_schedule(): one cycle from snapshot to decisions.
 *
 * The cycle's scratch lives in one arena that is freed at the end; the
 * decisions handed back live in an arena of their own, so the caller frees
 * them with one call and nothing of the cycle outlives it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sched.h"
#include "base/alloc.h"
#include "core/actions.h"

typedef struct decisions_impl {
	sc_decisions_t pub; /* first, so the public pointer is the impl */
	sc_arena_t *arena;
} decisions_impl_t;

void sc_decisions_free(sc_decisions_t *d)
{
	if (!d)
		return;
	decisions_impl_t *impl = (decisions_impl_t *)d;
	sc_arena_free(impl->arena);
	free(impl);
}

/* ---- decisions ----------------------------------------------------- */

static int copy_binding(sc_sched_t *s, sc_arena_t *a, const decision_t *d, sc_binding_t *b)
{
	sjob_t *j = &s->jobs[d->job];
	const sc_node_view_t *n = sc_cluster_node(s->cluster, d->to.node);
	b->job = j->index;
	b->pod = sc_arena_strdup(a, sc__pod_name(s, &s->jobs[d->job], d->pod));
	b->node = sc_arena_strdup(a, n->spec->name);
	b->ngpus = (size_t)d->to.ngpus;
	b->gpus = sc_arena_calloc(a, b->ngpus + 1, sizeof(int));
	if (!b->pod || !b->gpus || !b->node)
		return SC_ENOMEM;
	for (int k = 0; k < d->to.ngpus; k++)
		b->gpus[k] = d->to.gpus[k];
	if (d->to.mig_slices > 0) {
		b->mig_profile = sc_arena_strdup(a, j->spec->tasks[j->pods[d->pod].task].req.mig);
		b->mig_gpu = d->to.gpus[0];
		b->mig_start = d->to.mig_start;
	}
	b->gpu_milli = d->to.gpu_milli;
	b->gpu_memory = d->to.gpu_memory;
	b->pipelined = d->pipelined;
	return 0;
}

static int copy_eviction(sc_sched_t *s, sc_arena_t *a, const decision_t *d, sc_eviction_t *e)
{
	sjob_t *j = &s->jobs[d->job];
	e->job = j->index;
	e->pod = sc_arena_strdup(a, sc__pod_name(s, &s->jobs[d->job], d->pod));
	e->node = sc_arena_strdup(a, sc_cluster_node(s->cluster, d->from_node)->spec->name);
	e->action = d->action;
	e->by = d->by >= 0 ? sc_arena_strdup(a, s->jobs[d->by].spec->name) : NULL;
	e->reason = sc_arena_strdup(a, d->reason ? d->reason : "");
	if (d->move)
		e->to = sc_arena_strdup(a, sc_cluster_node(s->cluster, d->to.node)->spec->name);
	/* A compaction move lets the pod checkpoint first. */
	if (d->action == SC_ACT_COMPACT)
		e->grace_period = s->snap->config.compaction.grace_period;
	return e->pod && e->reason ? 0 : SC_ENOMEM;
}

static const char *pending_reason(const sc_sched_t *s, const sjob_t *j)
{
	if (j->bad)
		return j->bad;
	if (j->reason)
		return j->reason;
	if (!j->done)
		return "not considered: the allocate action did not run";
	return "not enough free resources";
}

static int copy_reservation(const sc_sched_t *s, sc_arena_t *a, const sjob_t *jb, sc_pending_t *p)
{
	if (!jb->nreserved)
		return 0;
	p->reserved_nodes = sc_arena_calloc(a, (size_t)jb->nreserved, sizeof(char *));
	if (!p->reserved_nodes)
		return SC_ENOMEM;
	for (int k = 0; k < jb->nreserved; k++) {
		const char *n = sc_cluster_node(s->cluster, jb->reserved[k])->spec->name;
		if (!(p->reserved_nodes[k] = sc_arena_strdup(a, n)))
			return SC_ENOMEM;
	}
	p->nreserved = (size_t)jb->nreserved;
	p->expected_start = jb->reservation == INT64_MAX ? -1 : jb->reservation;
	return 0;
}

/* The jobs left pending, each with its reason (and reservation). */
static int copy_pending(const sc_sched_t *s, sc_decisions_t *out, sc_arena_t *a)
{
	const char *last_src = NULL, *last_copy = NULL;
	for (int j = 0; j < s->njobs; j++) {
		const sjob_t *jb = &s->jobs[j];
		if (jb->npending == 0 || jb->nrunning >= jb->min_member)
			continue;
		sc_pending_t *p = &out->pending[out->npending++];
		p->job = jb->index;
		if (copy_reservation(s, a, jb, p) < 0)
			return SC_ENOMEM;
		/* Jobs of one shape share one reason string: copy it once. */
		const char *why = pending_reason(s, jb);
		if (why == last_src) {
			p->reason = last_copy;
			continue;
		}
		p->reason = sc_arena_strdup(a, why);
		if (!p->reason)
			return SC_ENOMEM;
		last_src = why;
		last_copy = p->reason;
	}
	return 0;
}

static int copy_queues(const sc_sched_t *s, sc_decisions_t *out, sc_arena_t *a)
{
	for (int q = 0; q < s->nqueues; q++) {
		const squeue_t *sq = &s->queues[q];
		sc_queue_report_t *r = &out->queues[out->nqueues++];
		r->name = sc_arena_strdup(a, sq->spec->name);
		r->parent =
		    sq->parent >= 0 ? sc_arena_strdup(a, s->queues[sq->parent].spec->name) : NULL;
		if (!r->name || (sq->parent >= 0 && !r->parent))
			return SC_ENOMEM;
		r->leaf = sq->leaf;
		for (int k = 0; k < SC_RES_COUNT; k++) {
			r->fair_share[k] = sq->fair.v[k];
			r->allocated[k] = sq->allocated.v[k];
			r->requested[k] = sq->requested.v[k];
			r->quota[k] = sq->quota.v[k] >= SC_UNLIMITED ? -1 : sq->quota.v[k];
			r->limit[k] = sq->limit.v[k] >= SC_UNLIMITED ? -1 : sq->limit.v[k];
		}
	}
	return 0;
}

static int build_decisions(sc_sched_t *s, sc_decisions_t *out, sc_arena_t *a)
{
	size_t nb = 0, ne = 0, np = 0;
	for (size_t i = 0; i < s->ndecisions; i++) {
		if (s->decisions[i].kind == 0)
			nb++;
		else
			ne++;
	}
	/* A consolidation move is both an eviction and a binding. */
	for (size_t i = 0; i < s->ndecisions; i++)
		nb += s->decisions[i].move;
	for (int j = 0; j < s->njobs; j++)
		np += s->jobs[j].npending > 0 && s->jobs[j].nrunning < s->jobs[j].min_member;
	out->bindings = sc_arena_calloc(a, nb + 1, sizeof(sc_binding_t));
	out->evictions = sc_arena_calloc(a, ne + 1, sizeof(sc_eviction_t));
	out->pending = sc_arena_calloc(a, np + 1, sizeof(sc_pending_t));
	out->queues = sc_arena_calloc(a, (size_t)s->nqueues + 1, sizeof(sc_queue_report_t));
	if (!out->bindings || !out->evictions || !out->pending || !out->queues)
		return SC_ENOMEM;
	for (size_t i = 0; i < s->ndecisions; i++) {
		const decision_t *d = &s->decisions[i];
		int rc = 0;
		if (d->kind == 0 || d->move)
			rc = copy_binding(s, a, d, &out->bindings[out->nbindings++]);
		if (rc == 0 && d->kind == 1)
			rc = copy_eviction(s, a, d, &out->evictions[out->nevictions++]);
		if (rc < 0)
			return rc;
	}
	if (copy_pending(s, out, a) < 0 || copy_queues(s, out, a) < 0)
		return SC_ENOMEM;
	out->placements_tried = s->placements_tried;
	out->jobs_considered = s->jobs_considered;
	out->signature_skips = s->signature_skips;
	return 0;
}

/* ---- the cycle ----------------------------------------------------- */

static int run_actions(sc_sched_t *s)
{
	const sc_config_t *c = &s->snap->config;
	for (size_t i = 0; i < c->nactions; i++) {
		int rc = sc__run_action(s, c->actions[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int sc_snapshot_validate(const sc_snapshot_t *snap, char *msg, size_t msgsize)
{
	sc_sched_t s = {.msg = msg, .msgsize = msgsize};
	s.arena = sc_arena_new(0);
	if (!s.arena)
		return SC_ENOMEM;
	int rc = sc__sched_build(&s, snap);
	sc__sched_release(&s);
	sc_arena_free(s.arena);
	return rc;
}

struct sc_scheduler {
	sc_arena_t *arena;
};

sc_scheduler_t *sc_scheduler_new(void)
{
	sc_scheduler_t *sch = sc_calloc(1, sizeof(*sch));
	if (!sch)
		return NULL;
	sch->arena = sc_arena_new(1 << 20);
	if (!sch->arena) {
		free(sch);
		return NULL;
	}
	return sch;
}

void sc_scheduler_free(sc_scheduler_t *sch)
{
	if (!sch)
		return;
	sc_arena_free(sch->arena);
	free(sch);
}

void sc_scheduler_fail_after(sc_scheduler_t *sch, long n)
{
	sc_arena_fail_after(sch->arena, n);
}

int sc_scheduler_run(sc_scheduler_t *sch, const sc_snapshot_t *snap, sc_decisions_t **out,
                     char *msg, size_t msgsize)
{
	int rc = SC_ENOMEM;
	*out = NULL;
	if (msg && msgsize)
		msg[0] = 0;
	sc_sched_t s = {.msg = msg, .msgsize = msgsize, .arena = sch->arena};
	decisions_impl_t *impl = sc_calloc(1, sizeof(*impl));
	if (!impl || !(impl->arena = sc_arena_new(0)))
		goto error;
	rc = sc__sched_build(&s, snap);
	if (rc < 0)
		goto error;
	sc__fairshare(&s);
	rc = run_actions(&s);
	if (rc < 0)
		goto error;
	rc = build_decisions(&s, &impl->pub, impl->arena);
	if (rc < 0)
		goto error;
	sc__sched_release(&s);
	sc_arena_reset(sch->arena);
	*out = &impl->pub;
	return 0;
error:
	if (rc == SC_ENOMEM && msg && msgsize)
		snprintf(msg, msgsize, "out of memory");
	sc__sched_release(&s);
	sc_arena_reset(sch->arena);
	if (impl)
		sc_arena_free(impl->arena);
	free(impl);
	return rc;
}

int sc_schedule(const sc_snapshot_t *snap, sc_decisions_t **out, char *msg, size_t msgsize)
{
	sc_scheduler_t *sch = sc_scheduler_new();
	if (!sch) {
		*out = NULL;
		if (msg && msgsize)
			snprintf(msg, msgsize, "out of memory");
		return SC_ENOMEM;
	}
	int rc = sc_scheduler_run(sch, snap, out, msg, msgsize);
	sc_scheduler_free(sch);
	return rc;
}
