#include "core/statement.h"

#include <string.h>

void sc__stmt_open(sc_stmt_t *st, sc_sched_t *s)
{
	memset(st, 0, sizeof(*st));
	st->s = s;
}

/* A log's buffer that no statement needs goes to the cycle's spares
 * (when they are full, in place of the smallest one that is smaller). */
static void spare_put(sc_sched_t *s, stmt_op_t *ops, size_t cap)
{
	int slot = -1;
	if (!ops)
		return;
	if (s->nstmt_spare < SC_STMT_SPARES)
		slot = s->nstmt_spare++;
	else
		for (int i = 0; i < SC_STMT_SPARES; i++)
			if (s->stmt_spare_cap[i] < cap &&
			    (slot < 0 || s->stmt_spare_cap[i] < s->stmt_spare_cap[slot]))
				slot = i;
	if (slot >= 0) {
		s->stmt_spare[slot] = ops;
		s->stmt_spare_cap[slot] = cap;
	}
}

/* An empty log hands its buffer back: the next statement, or this one
 * when it logs again, takes the largest spare. */
static void release_log(sc_stmt_t *st)
{
	spare_put(st->s, st->ops, st->cap);
	st->ops = NULL;
	st->cap = 0;
}

static void take_spare(sc_stmt_t *st)
{
	sc_sched_t *s = st->s;
	int best = -1;
	for (int i = 0; i < s->nstmt_spare; i++)
		if (best < 0 || s->stmt_spare_cap[i] > s->stmt_spare_cap[best])
			best = i;
	if (best < 0)
		return;
	st->ops = s->stmt_spare[best];
	st->cap = s->stmt_spare_cap[best];
	s->nstmt_spare--;
	s->stmt_spare[best] = s->stmt_spare[s->nstmt_spare];
	s->stmt_spare_cap[best] = s->stmt_spare_cap[s->nstmt_spare];
}

static int push(sc_stmt_t *st, const stmt_op_t *op)
{
	if (!st->ops)
		take_spare(st);
	if (st->nops == st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 16;
		stmt_op_t *n = sc_arena_alloc(st->s->arena, cap * sizeof(*n));
		if (!n)
			return SC_ENOMEM;
		if (st->nops)
			memcpy(n, st->ops, st->nops * sizeof(*n));
		spare_put(st->s, st->ops, st->cap);
		st->ops = n;
		st->cap = cap;
	}
	st->ops[st->nops++] = *op;
	return 0;
}

/* A pipelined allocation's record of what it took: from the cycle's list
 * of records no log holds any more, or new. */
static sc_pipe_t *pipe_take(sc_sched_t *s)
{
	sc_pipe_t *p = s->pipe_free;
	if (!p)
		return sc_arena_alloc(s->arena, sizeof(*p));
	memcpy(&s->pipe_free, p, sizeof(void *));
	return p;
}

static void pipe_put(sc_sched_t *s, sc_pipe_t *p)
{
	if (!p)
		return;
	memcpy(p, &s->pipe_free, sizeof(void *));
	s->pipe_free = p;
}

/* The pod's record of where it is (spod_t.at), made on its first
 * placement; SC_ENOMEM before anything changed. */
static int need_at(sc_sched_t *s, spod_t *p)
{
	if (!p->at && !(p->at = sc_arena_alloc(s->arena, sizeof(*p->at))))
		return SC_ENOMEM;
	return 0;
}

static const sc_request_t *pod_req(sc_sched_t *s, int job, int pod)
{
	const sjob_t *j = &s->jobs[job];
	return &j->spec->tasks[j->pods[pod].task].req;
}

/* Moves a pod's resources into or out of its queue's accounting. */
static void account(sc_sched_t *s, int job, int pod, const sc_assign_t *a, int sign)
{
	sjob_t *j = &s->jobs[job];
	const sc_node_view_t *n = sc_cluster_node(s->cluster, a->node);
	res3_t r = sc__pod_res(s, pod_req(s, job, pod), n);
	for (int k = 0; k < SC_RES_COUNT; k++)
		j->alloc.v[k] += sign * r.v[k];
	j->nrunning += sign;
	j->touched = true;
	if (j->queue >= 0)
		sc__queue_add(s, j->queue, &r, !j->preemptible, sign);
}

int sc__stmt_allocate(sc_stmt_t *st, int job, int pod, const sc_assign_t *a)
{
	sc_sched_t *s = st->s;
	spod_t *p = &s->jobs[job].pods[pod];
	int rc = need_at(s, p);
	if (rc < 0)
		return rc;
	rc = sc_cluster_take(s->cluster, pod_req(s, job, pod), a);
	if (rc < 0)
		return rc;
	stmt_op_t op = {
	    .kind = OP_ALLOC, .job = job, .pod = pod, .assign = *a, .prev_phase = p->phase};
	rc = push(st, &op);
	if (rc < 0) {
		sc_cluster_give(s->cluster, pod_req(s, job, pod), a);
		return rc;
	}
	p->phase = SC_POD_RUNNING;
	*p->at = *a;
	p->placed_now = true;
	s->jobs[job].npending--;
	account(s, job, pod, a, +1);
	return 0;
}

int sc__stmt_allocate_pipe(sc_stmt_t *st, int job, int pod, const sc_assign_t *a)
{
	sc_sched_t *s = st->s;
	spod_t *p = &s->jobs[job].pods[pod];
	sc_pipe_t *used = need_at(s, p) < 0 ? NULL : pipe_take(s);
	if (!used)
		return SC_ENOMEM;
	int rc = sc__cluster_take_pipe(s->cluster, pod_req(s, job, pod), a, used);
	if (rc < 0) {
		pipe_put(s, used);
		return rc;
	}
	stmt_op_t op = {.kind = OP_ALLOC,
	                .job = job,
	                .pod = pod,
	                .assign = *a,
	                .prev_phase = p->phase,
	                .pipelined = sc__pipe_any(used),
	                .pipe = used};
	rc = push(st, &op);
	if (rc < 0) {
		sc__cluster_give_pipe(s->cluster, pod_req(s, job, pod), a, used);
		pipe_put(s, used);
		return rc;
	}
	p->phase = SC_POD_RUNNING;
	*p->at = *a;
	p->placed_now = true;
	s->jobs[job].npending--;
	account(s, job, pod, a, +1);
	return 0;
}

void sc__stmt_pipeline_job(sc_stmt_t *st, int job)
{
	int piped = 0;
	for (size_t i = 0; i < st->nops; i++)
		piped +=
		    st->ops[i].kind == OP_ALLOC && st->ops[i].job == job && st->ops[i].pipelined;
	const sjob_t *j = &st->s->jobs[job];
	if (!piped || j->nrunning - piped >= j->min_member)
		return;
	for (size_t i = 0; i < st->nops; i++)
		if (st->ops[i].kind == OP_ALLOC && st->ops[i].job == job)
			st->ops[i].pipelined = true;
}

int sc__stmt_evict(sc_stmt_t *st, int job, int pod, int action, int by, const char *reason)
{
	sc_sched_t *s = st->s;
	spod_t *p = &s->jobs[job].pods[pod];
	if (p->phase != SC_POD_RUNNING || !p->at)
		return SC_EINVAL;
	stmt_op_t op = {.kind = OP_EVICT,
	                .job = job,
	                .pod = pod,
	                .assign = *p->at,
	                .prev_phase = p->phase,
	                .action = action,
	                .by = by,
	                .reason = reason};
	int rc = push(st, &op);
	if (rc < 0)
		return rc;
	sc__cluster_release(s->cluster, pod_req(s, job, pod), p->at);
	account(s, job, pod, p->at, -1);
	p->phase = SC_POD_PENDING;
	p->evicted_now = true;
	s->jobs[job].nevicted_now++;
	s->jobs[job].npending++;
	return 0;
}

size_t sc__stmt_mark(const sc_stmt_t *st)
{
	return st->nops;
}

void sc__stmt_rollback(sc_stmt_t *st, size_t mark)
{
	sc_sched_t *s = st->s;
	while (st->nops > mark) {
		stmt_op_t *op = &st->ops[--st->nops];
		spod_t *p = &s->jobs[op->job].pods[op->pod];
		const sc_request_t *r = pod_req(s, op->job, op->pod);
		if (op->kind == OP_ALLOC) {
			if (op->pipe) {
				sc__cluster_give_pipe(s->cluster, r, &op->assign, op->pipe);
				pipe_put(s, op->pipe);
			} else
				sc_cluster_give(s->cluster, r, &op->assign);
			account(s, op->job, op->pod, &op->assign, -1);
			p->placed_now = false;
			s->jobs[op->job].npending++;
		} else {
			/* The evicted pod's resources leave the releasing pool;
			 * the later pipelined allocations that used them were
			 * undone first. */
			sc__cluster_unrelease(s->cluster, r, &op->assign);
			account(s, op->job, op->pod, &op->assign, +1);
			p->evicted_now = false;
			s->jobs[op->job].nevicted_now--;
			s->jobs[op->job].npending--;
		}
		p->phase = op->prev_phase;
		/* p->at was made by the op's allocation, or was there before
		 * its eviction. */
		*p->at = op->assign;
	}
	if (st->nops == 0)
		release_log(st);
}

/* An eviction followed by an allocation of the same pod is a move (a
 * consolidation, or a victim that KAI's solver placed again): one eviction
 * carrying the new node, plus the binding there. */
static long move_target(const sc_stmt_t *st, size_t i)
{
	const stmt_op_t *op = &st->ops[i];
	if (op->kind != OP_EVICT)
		return -1;
	for (size_t k = i + 1; k < st->nops; k++)
		if (st->ops[k].kind == OP_ALLOC && st->ops[k].job == op->job &&
		    st->ops[k].pod == op->pod)
			return (long)k;
	return -1;
}

static bool same_place(const sc_assign_t *a, const sc_assign_t *b)
{
	if (a->node != b->node || a->ngpus != b->ngpus || a->gpu_milli != b->gpu_milli ||
	    a->mig_slices != b->mig_slices || (a->mig_slices && a->mig_start != b->mig_start))
		return false;
	for (int k = 0; k < a->ngpus; k++)
		if (a->gpus[k] != b->gpus[k])
			return false;
	return true;
}

int sc__stmt_commit(sc_stmt_t *st)
{
	char *skip = st->nops ? sc_arena_calloc(st->s->arena, st->nops, 1) : NULL;
	if (st->nops && !skip)
		return SC_ENOMEM;
	for (size_t i = 0; i < st->nops; i++) {
		const stmt_op_t *op = &st->ops[i];
		if (skip[i])
			continue;
		decision_t d = {.job = op->job,
		                .pod = op->pod,
		                .by = op->by,
		                .reason = op->reason,
		                .action = op->action};
		long to = move_target(st, i);
		if (to >= 0 && same_place(&op->assign, &st->ops[to].assign)) {
			/* Evicted and placed again where it was (KAI's Unevict):
			 * nothing happens to the pod. */
			skip[to] = 1;
			continue;
		}
		if (op->kind == OP_ALLOC) {
			d.kind = 0;
			d.to = op->assign;
			d.pipelined = op->pipelined;
		} else {
			d.kind = 1;
			d.from_node = op->assign.node;
			if (to >= 0) {
				d.move = true;
				d.to = st->ops[to].assign;
				d.pipelined = st->ops[to].pipelined;
				skip[to] = 1;
			} else {
				/* The victim stays pending; say why. */
				st->s->jobs[op->job].reason = op->reason;
			}
		}
		int rc = sc__record(st->s, &d);
		if (rc < 0)
			return rc;
	}
	/* Committed: nothing rolls these back any more. */
	for (size_t i = 0; i < st->nops; i++)
		pipe_put(st->s, st->ops[i].pipe);
	st->nops = 0;
	release_log(st);
	st->s->commits++;
	return 0;
}
