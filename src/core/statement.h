/* Statement: the transaction through which every action changes the cycle's
 * state, as in KAI. Allocations and evictions are applied at once to the
 * cluster and the queue accounting (so later placements see them), and
 * logged; rollback undoes the log in reverse, commit turns it into
 * decisions. An action handles one job at a time inside one statement. */
#ifndef SC_CORE_STATEMENT_H
#define SC_CORE_STATEMENT_H

#include "core/sched.h"

enum { OP_ALLOC = 1, OP_EVICT = 2 };

typedef struct stmt_op {
	int kind;
	int job;
	int pod;
	sc_assign_t assign; /* where the pod was (evict) or goes (alloc) */
	int prev_phase;
	int action; /* evictions: enum sc_action */
	int by;
	const char *reason;
	bool pipelined;  /* allocations onto resources being released */
	sc_pipe_t *pipe; /* a pipelined allocation: what came from the pool */
} stmt_op_t;

struct sc_stmt {
	sc_sched_t *s;
	stmt_op_t *ops;
	size_t nops, cap;
};

void sc__stmt_open(sc_stmt_t *st, sc_sched_t *s);
/* Takes the pod's resources at a; SC_ENOFIT if they are not free. */
int sc__stmt_allocate(sc_stmt_t *st, int job, int pod, const sc_assign_t *a);
/* The same onto idle plus releasing resources (KAI's pipelineTaskToNode);
 * the allocation is pipelined when it used releasing ones. */
int sc__stmt_allocate_pipe(sc_stmt_t *st, int job, int pod, const sc_assign_t *a);
/* Marks a running pod evicted: its resources go to the releasing pool (a
 * pipelined pod may take them; nothing is bound onto them). */
int sc__stmt_evict(sc_stmt_t *st, int job, int pod, int action, int by, const char *reason);
/* KAI's ShouldPipelineJob: when a pod of the job was pipelined and its
 * pods not pipelined stay below minMember, all its new pods are. */
void sc__stmt_pipeline_job(sc_stmt_t *st, int job);
/* A mark to roll back to. */
size_t sc__stmt_mark(const sc_stmt_t *st);
void sc__stmt_rollback(sc_stmt_t *st, size_t mark);
/* Records every logged operation as a decision and empties the log. */
int sc__stmt_commit(sc_stmt_t *st);

#endif
