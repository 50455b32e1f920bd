/* Node pools: what-ifs on template nodes that tell a caller which nodes to
 * add and which may go (issue 18, docs/AUTOSCALING.md).
 *
 * The core stays pure: nothing here starts or stops a machine. A caller (the
 * server's pool controller, the simulator, `starcloud schedule`) runs a
 * scheduling cycle with sc_scheduler_run(), then asks
 *   sc_scaleup_plan()   which new nodes of which pool would let the work that
 *                       is still waiting run, decided by the same allocate
 *                       action (fair-share order, gangs whole, topology,
 *                       queue limits and quotas, selectors) on the cluster
 *                       plus template nodes;
 *   sc_scaledown_plan() which pool nodes are empty, or could be emptied by
 *                       moving their pods elsewhere, without going below a
 *                       pool's minimum.
 * The caller owns the timing: join timeouts, provisioning delays and the
 * scaleDownAfter delay are its business.
 *
 * A node belongs to pool P when it carries the label SC_POOL_LABEL = P.
 *
 * Ownership: every input pointer is borrowed for the call; a plan is owned
 * by the caller and freed with its free function (which accepts NULL).
 * Strings in a plan are borrowed from the snapshot it was made from. */
#ifndef STARCLOUD_AUTOSCALE_H
#define STARCLOUD_AUTOSCALE_H

#include "starcloud/core.h"

/* The node label that names a node's pool. */
#define SC_POOL_LABEL "starcloud.dev/pool"

typedef struct sc_pool {
	const char *name;
	/* What one new node looks like: cpu, memory, GPUs (count, model,
	 * memory, MIG) and labels (SC_POOL_LABEL is added when missing). Its
	 * name, not_ready and unschedulable are ignored. */
	sc_node_spec_t tmpl;
	int min_nodes;    /* >= 0 */
	int max_nodes;    /* < 0: no limit in nodes */
	int64_t max_gpus; /* < 0: no limit in GPUs */
	/* Cost of one node, to prefer the cheaper of two pools that both
	 * fit; <= 0 means the template's GPU count (1 for a node without). */
	double cost;
	/* Nodes requested that have not joined the snapshot yet: they count
	 * towards the limits and the waiting work may use them for free. */
	int in_flight;
	/* Member nodes in the snapshot on their way out (cordoned by the
	 * caller to be deleted): they no longer count towards min_nodes. */
	int removing;
} sc_pool_t;

/* ---- scale-up --------------------------------------------------------- */

/* Job `job` (index into the snapshot's jobs) is placed on `nodes` template
 * nodes of pool `pool` in the what-if: nodes in flight and new ones. */
typedef struct sc_pool_wait {
	size_t job;
	size_t pool;
	int nodes;
	int new_nodes; /* of which not requested yet */
} sc_pool_wait_t;

typedef struct sc_scaleup {
	int *add;       /* per pool (npools entries): nodes to request now */
	int *below_min; /* per pool: of those, what reaches min_nodes */
	int *headroom;  /* per pool: nodes the limits still allowed */
	sc_pool_wait_t *waits;
	size_t nwaits;
	size_t npools;
	size_t template_nodes; /* template nodes the what-if was given */
} sc_scaleup_t;

/* The cheapest set of new nodes that lets the work left unplaced by the
 * decisions d (made by a cycle on s) run: s with d applied (bindings run,
 * evicted and releasing pods gone), plus pools[i].in_flight nodes and up to
 * the pool's limits of new template nodes, scheduled by the allocate action
 * alone; new nodes the what-if used are requested. Template nodes are
 * offered cheapest first (cost per node, then pool order), and the
 * scheduler's binpack fills a node before it opens another, so the set is
 * greedy-cheapest, not a proven minimum. Work that waits for quota, a
 * queue limit, a selector or GPU model no pool has stays unplaced in the
 * what-if too, so it asks for nothing. Pools below min_nodes ask for the
 * difference as well. Returns 0, SC_EINVAL (with msg) or SC_ENOMEM. */
int sc_scaleup_plan(const sc_snapshot_t *s, const sc_decisions_t *d, const sc_pool_t *pools,
                    size_t npools, sc_scaleup_t **out, char *msg, size_t msgsize);
void sc_scaleup_free(sc_scaleup_t *p);

/* ---- scale-down ------------------------------------------------------- */

/* Whether job j of s may be evicted: its own preemptible setting, else its
 * priority class's (the snapshot's classes override the built-in ones),
 * else class value < 100; an unknown class reads as "normal". */
bool sc_job_preemptible(const sc_snapshot_t *s, size_t j);

typedef struct sc_scaledown_node {
	const char *node; /* borrowed from the snapshot */
	size_t pool;
	int moves; /* pods that must move first (0: empty) */
} sc_scaledown_node_t;

typedef struct sc_scaledown {
	sc_scaledown_node_t *nodes;
	size_t n;
	size_t checks; /* move what-ifs run */
} sc_scaledown_t;

typedef struct sc_scaledown_opts {
	/* Consider nodes whose pods could move elsewhere, not only empty ones. */
	bool moves;
	/* Only nodes with at most this share of their GPUs (or CPU, for a
	 * node without GPUs) allocated are tried for moves (0.5, as the
	 * cluster-autoscaler's utilisation threshold). */
	double util_threshold;
	/* Move what-ifs per call, at most (each is an allocate run). */
	int max_checks;
} sc_scaledown_opts_t;

void sc_scaledown_opts_default(sc_scaledown_opts_t *o);

/* Pool nodes that could be deleted now, after the decisions d of a cycle on
 * s: ready or not, not cordoned, not reserved for a waiting job, nothing
 * bound there this cycle, no pod still releasing; either empty, or (with
 * opts->moves) every pod on it preemptible, of a job without a required
 * topology, and placeable on the other nodes by the allocate action
 * (gangs stay whole: the job's other pods keep their places) with the
 * nodes listed before it gone too. At most members - removing + in_flight
 * - min_nodes per pool; empty nodes first, then the emptiest. Returns 0,
 * SC_EINVAL (with msg) or SC_ENOMEM. */
int sc_scaledown_plan(const sc_snapshot_t *s, const sc_decisions_t *d, const sc_pool_t *pools,
                      size_t npools, const sc_scaledown_opts_t *opts, sc_scaledown_t **out,
                      char *msg, size_t msgsize);
void sc_scaledown_free(sc_scaledown_t *p);

#endif
