/* The pieces of moving pods to make room (actions.h): the movable pods by
 * node, clearing a node of the fewest of them so that a request fits, and
 * placing evicted pods again. Consolidation uses them; so can any other
 * action that moves pods (a compaction, say).
 *
 * A move is an eviction followed by a placement of the same pod in one
 * statement; the statement reports it as one decision, and a pod placed
 * again where it was as none (KAI's Unevict). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/actions.h"
#include "core/reservation.h"
#include "core/statement.h"

static const sc_request_t *req_of(const sc_sched_t *s, int j, int p)
{
	return &s->jobs[j].spec->tasks[s->jobs[j].pods[p].task].req;
}

bool sc__movable(const sc_sched_t *s, int j, int p)
{
	const sjob_t *jb = &s->jobs[j];
	/* A gang running below minMember is stale-gang eviction's to take:
	 * moving its pods would bind a pod that is then evicted again. */
	return jb->preemptible && jb->nrunning >= jb->min_member &&
	       jb->pods[p].phase == SC_POD_RUNNING && !jb->pods[p].placed_now &&
	       !jb->pods[p].evicted_now;
}

int sc__movable_index(sc_sched_t *s, sc_node_pods_t *np)
{
	size_t n = sc_cluster_nnodes(s->cluster);
	np->start = sc_arena_calloc(s->arena, n + 2, sizeof(int));
	if (!np->start)
		return SC_ENOMEM;
	int total = 0;
	for (int j = 0; j < s->njobs; j++)
		for (int p = 0; p < s->jobs[j].total; p++)
			if (sc__movable(s, j, p)) {
				np->start[sc__pod_at(&s->jobs[j].pods[p])->node + 1]++;
				total++;
			}
	for (size_t i = 1; i <= n; i++)
		np->start[i] += np->start[i - 1];
	np->list = sc_arena_calloc(s->arena, 2 * (size_t)total + 2, sizeof(int));
	int *fill = sc_arena_calloc(s->arena, n + 1, sizeof(int));
	if (!np->list || !fill)
		return SC_ENOMEM;
	for (int j = 0; j < s->njobs; j++)
		for (int p = 0; p < s->jobs[j].total; p++)
			if (sc__movable(s, j, p)) {
				uint32_t node = sc__pod_at(&s->jobs[j].pods[p])->node;
				int at = np->start[node] + fill[node]++;
				np->list[2 * at] = j;
				np->list[2 * at + 1] = p;
			}
	return 0;
}

/* Reservations hold in every action: a node reserved for a long-waiting
 * job takes neither the job's pods nor moved ones (unless backfill). A job
 * consolidated into one topology domain stays in it. */
static bool pod_node_ok(void *ctx, const sc_node_view_t *n)
{
	const sc_pod_filter_t *x = ctx;
	const sc_sched_t *s = x->s;
	if (s->dom_level && s->dom_job == x->job &&
	    s->dom_level->node_domain[n->index] != s->dom_domain)
		return false;
	return sc__reservation_allows(s, x->job, n->index);
}

void sc__pod_filter(const sc_sched_t *s, int j, int p, sc_pod_filter_t *x)
{
	sc__task_filter(s, &s->jobs[j].spec->tasks[s->jobs[j].pods[p].task], x->ids, &x->f);
	x->s = s;
	x->job = j;
	x->f.accept = pod_node_ok;
	x->f.accept_ctx = x;
}

int sc__place_pod(sc_sched_t *s, sc_stmt_t *st, int j, int p)
{
	sc_assign_t a;
	sc_pod_filter_t x;
	sc__pod_filter(s, j, p, &x);
	s->placements_tried++;
	int rc = sc_cluster_best_indexed(s->cluster, req_of(s, j, p), &x.f, false, SC_DEV_PACK, &a);
	if (rc == 0)
		return sc__stmt_allocate(st, j, p, &a);
	if (rc != SC_ENOFIT || !sc__cluster_has_releasing(s->cluster))
		return rc;
	rc = sc__cluster_best_pipe(s->cluster, req_of(s, j, p), &x.f, false, SC_DEV_PACK, &a);
	return rc == 0 ? sc__stmt_allocate_pipe(st, j, p, &a) : rc;
}

int sc__replace_evicted(sc_sched_t *s, sc_stmt_t *st, size_t from)
{
	size_t end = st->nops;
	for (size_t i = from; i < end; i++) {
		if (st->ops[i].kind != OP_EVICT)
			continue;
		int rc = sc__place_pod(s, st, st->ops[i].job, st->ops[i].pod);
		if (rc < 0)
			return rc == SC_ENOMEM ? rc : 0;
	}
	return 1;
}

/* Which movable pod of a node goes first: KAI's in-queue victim order
 * (lower priority, newer job), then fewer GPUs. (Subsets are tried by
 * size first, so this only orders subsets of one size.) */
static bool moves_first(const sc_sched_t *s, const sc_node_view_t *n, int ja, int pa, int jb,
                        int pb)
{
	const sjob_t *a = &s->jobs[ja], *b = &s->jobs[jb];
	if (a->priority != b->priority)
		return a->priority < b->priority;
	if (a->spec->created != b->spec->created)
		return a->spec->created > b->spec->created;
	double ga = sc__pod_res(s, req_of(s, ja, pa), n).v[SC_RES_GPU];
	double gb = sc__pod_res(s, req_of(s, jb, pb), n).v[SC_RES_GPU];
	if (ga != gb)
		return ga < gb;
	return ja != jb ? ja > jb : pa > pb;
}

#define EXACT_PODS 8   /* movable pods on a node up to which subsets are tried */
#define MAX_SUBSETS 64 /* fitting subsets of one node tried */

/* Evicts the pods idx[0..n) (positions in np->list) of a subset mask. */
static int evict_mask(sc_sched_t *s, sc_stmt_t *st, const sc_node_pods_t *np, const int *idx, int n,
                      unsigned mask, int action, int by, const char *why)
{
	for (int i = 0; i < n; i++) {
		if (!(mask >> i & 1))
			continue;
		int rc = sc__stmt_evict(st, np->list[2 * idx[i]], np->list[2 * idx[i] + 1], action,
		                        by, why);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* After a fitting set of evictions: the caller's completion (place the pod,
 * place the moved ones again); 1 keeps it, 0 asks for the next set. */
static int complete(sc_sched_t *s, sc_stmt_t *st, size_t mark, const sc_clear_done_t *done)
{
	return done ? done->fn(done->ctx, s, st, mark) : 1;
}

int sc__clear_node(sc_sched_t *s, sc_stmt_t *st, const sc_node_pods_t *np, uint32_t node,
                   const sc_request_t *req, int budget, int action, int by, const char *why,
                   const sc_clear_done_t *done)
{
	const sc_node_view_t *n = sc_cluster_node(s->cluster, node);
	sc_assign_t fit;
	if (sc__node_choose_pipe(n, req, SC_DEV_PACK, &fit) == 0)
		return 0;
	int idx[EXACT_PODS], m = 0;
	for (int k = np->start[node]; k < np->start[node + 1]; k++) {
		int j = np->list[2 * k], p = np->list[2 * k + 1];
		if (j == by || !sc__movable(s, j, p))
			continue; /* never the preemptor's own pods */
		if (m == EXACT_PODS) {
			m = -1; /* too many for subsets: the greedy below */
			break;
		}
		/* Kept in moves_first order. */
		int at = m++;
		for (; at > 0 && moves_first(s, n, j, p, np->list[2 * idx[at - 1]],
		                             np->list[2 * idx[at - 1] + 1]);
		     at--)
			idx[at] = idx[at - 1];
		idx[at] = k;
	}
	size_t mark = sc__stmt_mark(st);
	if (m > 0) {
		/* The fewest pods whose going lets req fit and whose moves
		 * work out; subsets of one size in moves_first order. */
		int tries = 0;
		for (int size = 1; size <= m && size <= budget; size++)
			for (unsigned mask = 1; mask < (1u << m) && tries < MAX_SUBSETS; mask++) {
				if (__builtin_popcount(mask) != size)
					continue;
				int rc = evict_mask(s, st, np, idx, m, mask, action, by, why);
				if (rc < 0)
					return rc == SC_ENOMEM ? rc : -1;
				if (sc__node_choose_pipe(n, req, SC_DEV_PACK, &fit) == 0) {
					tries++;
					rc = complete(s, st, mark, done);
					if (rc != 0)
						return rc < 0 ? rc : size;
				}
				sc__stmt_rollback(st, mark);
			}
		return -1;
	}
	int moved = 0;
	while (sc__node_choose_pipe(n, req, SC_DEV_PACK, &fit) < 0) {
		int best = -1;
		for (int k = np->start[node]; k < np->start[node + 1]; k++) {
			int j = np->list[2 * k], p = np->list[2 * k + 1];
			if (j == by || !sc__movable(s, j, p))
				continue;
			if (best < 0 ||
			    moves_first(s, n, j, p, np->list[2 * best], np->list[2 * best + 1]))
				best = k;
		}
		if (best < 0 || moved >= budget)
			return -1;
		int rc =
		    sc__stmt_evict(st, np->list[2 * best], np->list[2 * best + 1], action, by, why);
		if (rc < 0)
			return rc == SC_ENOMEM ? rc : -1;
		moved++;
	}
	int rc = complete(s, st, mark, done);
	if (rc <= 0)
		sc__stmt_rollback(st, mark);
	return rc < 0 ? rc : rc == 0 ? -1 : moved;
}
