/* Internal state of one scheduling cycle.
 *
 * sc_schedule() turns the caller's snapshot into this model (queues as a
 * tree with per-resource accounting, jobs with their pods, the cluster's
 * free state), runs the configured actions, and copies the outcome into an
 * sc_decisions_t. Everything here lives in the cycle's arena, except the
 * cluster (malloc'd, freed at the end of the cycle). */
#ifndef SC_CORE_SCHED_H
#define SC_CORE_SCHED_H

#include "base/strmap.h"
#include "core/cluster_int.h"
#include "starcloud/arena.h"
#include "starcloud/core.h"

#define SC_UNLIMITED 1e300
/* Long-waiting jobs given a reservation per cycle (reserve.c). */
#define SC_MAX_RESERVATIONS 4

typedef struct sc_sched sc_sched_t;

/* Scratch buffers that searches repeated for every preemptor reuse instead
 * of taking fresh arena memory each time (sc__scratch). */
enum {
	SC_SCR_UNITS,
	SC_SCR_ORDER,
	SC_SCR_VO,
	SC_SCR_VOKEY,
	SC_SCR_SET,
	SC_SCR_SET2,
	SC_SCR_SET3,
	SC_SCR_UNITS2,
	SC_SCR_UNITS3,
	SC_SCR_FLAGS,
	SC_SCR_REPL,
	SC_SCR_LEFT,
	SC_SCR_LEFTU,
	SC_SCRATCH_SLOTS
};
typedef struct sc_stmt sc_stmt_t;

/* Resource vector in queue units: gpu devices, cpu millicores, bytes. */
typedef struct res3 {
	double v[SC_RES_COUNT];
} res3_t;

typedef struct squeue {
	const sc_queue_spec_t *spec;
	int parent; /* index or -1 */
	int *children;
	int nchildren;
	int depth;
	bool leaf;
	res3_t quota; /* SC_UNLIMITED for -1 */
	res3_t limit; /* effective, SC_UNLIMITED when none */
	res3_t weight;
	res3_t allocated; /* running + releasing + this cycle */
	res3_t alloc_nonpreempt;
	res3_t requested; /* allocated + pending */
	res3_t fair;
	res3_t allocatable; /* KAI's allocatable share, after fair share */
	size_t order;       /* input order, for ties */
	int njobs_all;      /* leaf: jobs of the queue */
	/* Job order state (queue_order.c). */
	int *heap; /* children with jobs, a heap in queue order */
	int nheap, heap_cap;
	int heap_pos; /* position in the parent's heap, -1 none */
	int *jobs;    /* leaf: jobs in job order, from next_job */
	int njobs, jobs_cap, next_job;
	/* leaf: all its jobs by priority, age and input order, sorted once
	 * per cycle (queue_order.c); each sc__order_init filters them. */
	int *sorted;
	int nsorted;
	int *back; /* leaf: a heap of jobs put back */
	int nback;
	int head; /* leaf: the job it offers next, -1 none */
	/* Its terms in the queue order with the job it offers (queue_order.c:
	 * refreshed whenever its path is re-sorted, so that comparing two
	 * queues reads them instead of computing them again). */
	bool k_over, k_within, k_zero;
	double k_share, k_share0;
	const res3_t *k_req; /* the step request of the job it offers, or NULL */
	res3_t k_inv;        /* 1 / each resource's allocatable share (dominant share) */
} squeue_t;

/* Placement of one pod decided or found in the snapshot. */
typedef struct spod {
	const char *name;
	int task;
	int replica;
	int phase;       /* sc_pod_phase; PENDING when not placed */
	bool placed_now; /* bound in this cycle */
	bool evicted_now;
	int64_t started_at;
	const sc_pod_status_t *status; /* from the snapshot, or NULL */
	/* Where the pod runs or was last placed (read it with sc__pod_at):
	 * in the cycle's arena, made when the pod is first found running or
	 * placed, NULL before. Most pods of a big cluster wait and are never
	 * placed in a cycle; an assignment inside every pod took 96 of its
	 * 144 bytes: ~100 MB of the arena at 10,000 nodes (~1,060,000 pods,
	 * 1.5 % of them running in bench server's world). */
	sc_assign_t *at;
} spod_t;

/* All zeros: where a pod that was never placed is (node 0, no devices). */
extern const sc_assign_t sc__no_assign;

static inline const sc_assign_t *sc__pod_at(const spod_t *p)
{
	return p->at ? p->at : &sc__no_assign;
}

typedef struct sjob {
	const sc_job_spec_t *spec;
	size_t index; /* into the snapshot */
	int queue;    /* leaf queue index, -1 when unknown */
	int priority;
	bool preemptible;
	int min_member;
	int total;    /* replicas of all tasks */
	spod_t *pods; /* total entries, task-major */
	int nrunning; /* running + releasing pods */
	int npending;
	res3_t pod_req_sum_pending;
	/* The next allocation step (KAI's GetTasksToAllocate): the pods that
	 * bring the job to minMember, or one pod once it is there. */
	int step;
	res3_t step_req;
	res3_t alloc;       /* resources held */
	const char *reason; /* pending reason when it stays pending */
	const char *bad;    /* a reason the job cannot be scheduled at all */
	uint64_t signature; /* shape hash for failure caching */
	uint64_t shape;     /* its spec's part (sc__job_shape), when shape_ok */
	bool shape_ok;
	bool done;           /* tried this cycle */
	bool touched;        /* a pod was placed or evicted this cycle */
	int nevicted_now;    /* its pods with evicted_now (statement.c keeps it) */
	int64_t reservation; /* expected start of its reservation, 0 none */
	uint32_t *reserved;  /* the reservation's nodes */
	int nreserved;
} sjob_t;

typedef struct topo_level {
	const char *key;
	int ndomains;
	const char **domain_names;
	int *node_domain; /* per node, -1 when the label is missing */
} topo_level_t;

/* A decided binding or eviction, kept in order of decision. */
typedef struct decision {
	int kind; /* 0 binding, 1 eviction */
	int job;
	int pod;
	int action;
	int by; /* job index or -1 */
	const char *reason;
	uint32_t from_node;
	sc_assign_t to; /* binding target */
	bool pipelined;
	bool move; /* consolidation move: eviction + rebind */
} decision_t;

#define SC_STMT_SPARES 4

struct sc_sched {
	const sc_snapshot_t *snap;
	sc_arena_t *arena;
	sc_cluster_t *cluster;
	squeue_t *queues;
	int nqueues;
	int *roots;
	int nroots;
	sc_strmap_t queue_names;
	sjob_t *jobs;
	int njobs;
	sc_prio_class_t *classes;
	size_t nclasses;
	topo_level_t *levels;
	int nlevels;
	res3_t capacity;
	int64_t max_gpu_memory; /* largest device, bytes */
	decision_t *decisions;
	size_t ndecisions, capdecisions;
	/* Failure cache for this cycle: signatures of jobs that did not fit
	 * and their reasons (allocate only ever shrinks free capacity, so a
	 * shape that failed once fails again). */
	uint64_t *fail_sig;
	const char **fail_reason;
	size_t nfail, capfail;
	size_t placements_tried;
	size_t jobs_considered;
	size_t signature_skips;
	int *reserved_by; /* per node: job holding a reservation, -1 */
	/* Consolidation of a job with a topology constraint: while dom_level
	 * is set, job dom_job's pods may only go to nodes of domain dom_domain
	 * (moves.c's pod filter). */
	const topo_level_t *dom_level;
	int dom_job, dom_domain;
	int64_t *reserved_until;                /* per node: the reservation's expected start */
	int64_t res_until[SC_MAX_RESERVATIONS]; /* each reservation's start */
	int nres;
	int res_cand[SC_MAX_RESERVATIONS]; /* jobs that may get a reservation */
	int nres_cand;
	struct ending *ending; /* running jobs by expected end (reserve.c) */
	int nending;
	bool quiet;                      /* simulating: no explanations */
	void *scratch[SC_SCRATCH_SLOTS]; /* reusable buffers (sc__scratch) */
	size_t scratch_cap[SC_SCRATCH_SLOTS];
	bool presorted; /* every leaf's `sorted` is made (queue_order.c) */
	size_t commits; /* statements committed so far (statement.c) */
	/* Preemptors whose victim search failed since commit number
	 * vfail_commits, by sc__vfail_key (evict.c); empty slots are 0. */
	uint64_t *vfail;
	size_t nvfail, capvfail, vfail_commits;
	int *order_tmp;     /* scratch of sc__order_init: 2 x the largest leaf */
	int *running;       /* jobs holding pods, grouped by leaf queue */
	int *running_start; /* per queue (nqueues + 1 entries) */
	/* Statements' logs that emptied (statement.c), and pipelined
	 * allocations' records no log holds any more, for the next statement
	 * to take: an action opens a statement per job and a victim search
	 * tries many sets, so without reuse a cycle's arena kept a log (16
	 * entries of 144 bytes or more) and records for every attempt. */
	void *stmt_spare[SC_STMT_SPARES];
	size_t stmt_spare_cap[SC_STMT_SPARES];
	int nstmt_spare;
	void *pipe_free; /* a list through the records' first bytes */
	char *msg;
	size_t msgsize;
};

/* A buffer of at least `bytes` for slot `slot`, reused from call to call
 * (its contents are not kept); NULL when out of memory. */
void *sc__scratch(sc_sched_t *s, int slot, size_t bytes);

/* Hashing for the failure cache's signatures (allocate.c, snapshot.c). */
static inline uint64_t sc__mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h;
}

static inline uint64_t sc__mix_str(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = sc__mix(h, (unsigned char)*s);
	return sc__mix(h, 0xff);
}

/* snapshot.c: the spec's part of a job's failure-cache signature. */
uint64_t sc__job_shape(const sjob_t *j);

/* snapshot.c */
int sc__sched_build(sc_sched_t *s, const sc_snapshot_t *snap);
void sc__sched_release(sc_sched_t *s);
const char *sc__pod_name(sc_sched_t *s, sjob_t *j, int p);
res3_t sc__pod_res(const sc_sched_t *s, const sc_request_t *r, const sc_node_view_t *n);
int sc__record(sc_sched_t *s, const decision_t *d);

/* fairshare.c */
void sc__fairshare(sc_sched_t *s);

/* queue_order.c: the order in which actions visit jobs. init fills it
 * with the pending jobs for which want() is true; pop takes the next job
 * (-1 when none is left), push puts a job back (after a pop only); touch
 * re-sorts a queue whose accounting changed. */
int sc__order_init(sc_sched_t *s, bool (*want)(sc_sched_t *, int, void *), void *ctx);
int sc__order_pop(sc_sched_t *s);
int sc__order_push(sc_sched_t *s, int j);
void sc__order_touch(sc_sched_t *s, int q);
/* KAI's queue order (GetQueueOrderResult) of queues ia and ib with explicit
 * holdings: wa/wb with the job (quota and zero-share rules), da/db for the
 * dominant share (victim order subtracts victims); < 0 when ia goes first. */
int sc__queue_cmp_with(const sc_sched_t *s, int ia, int ib, const res3_t *wa, const res3_t *wb,
                       const res3_t *da, const res3_t *db);
/* KAI's GetAllocatableShare. */
res3_t sc__allocatable(const squeue_t *q);

/* placement.c: tries to place job j's next step (jb->step pods, see
 * queue_order.c) inside the open statement; returns the number placed. */
int sc__place_job(sc_sched_t *s, sc_stmt_t *st, int j);
/* Whether placing `placed` pods completed the job's step. */
static inline bool sc__step_done(const sjob_t *jb, int placed)
{
	return jb->step > 0 && placed >= jb->step;
}
#define SC_MAX_MODEL_FILTER 64
void sc__task_filter(const sc_sched_t *s, const sc_task_spec_t *t, int *ids, sc_filter_t *f);

/* explain.c */
const char *sc__explain_task(sc_sched_t *s, int j, int task, int placed, int needed,
                             const sc_filter_t *f);

/* reserve.c: prepare picks the cycle's candidates (allocate calls it
 * first); reserve_job reserves nodes for job j after it failed for room,
 * when it is a candidate and its queue stays within its fair share.
 * reservation.c: who may use a reserved node (reservation.h). */
int sc__reserve_prepare(sc_sched_t *s);
int sc__reserve_job(sc_sched_t *s, int j);

/* allocate.c */
int sc__allocate(sc_sched_t *s);

/* accounting */
void sc__queue_add(sc_sched_t *s, int q, const res3_t *r, bool nonpreempt, int sign);
bool sc__res_fits_limit(const sc_sched_t *s, int q, const res3_t *add, char *why, size_t n);

#endif
