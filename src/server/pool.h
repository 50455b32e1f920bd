/* Node pools in the control plane (docs/AUTOSCALING.md).
 *
 * The scheduling cycle decides, the pool controller acts:
 *   loop thread   sc__pool_input() reads the NodePools (and the Nodes'
 *                 readiness) from the cache into a self-contained input;
 *   worker        sc__pool_plan() runs the core's scale-up and scale-down
 *                 plans on the cycle's snapshot and decisions and rewrites
 *                 the pending reasons of the jobs that wait for pool nodes
 *                 ("waiting for 3 nodes of pool h100 (requested 40 s ago)");
 *   loop thread   sc__pool_act() (after the cycle's commit, leader only)
 *                 brings each NodePool's status up to date: requests nodes
 *                 through the provider, notices joins, gives up on nodes
 *                 that do not join in time, starts the scale-down timers,
 *                 cordons and empties nodes idle for scaleDownAfter and
 *                 deletes them once empty; events and metrics for each step.
 *
 * NodePool status (the server's; a user's write keeps it):
 *   nodes:  [{name, phase: Requested|Joined|Removing, requestedAt,
 *            joinedAt, idleSince, removingSince}]
 *   joined, requested, removing, gpus, joinFailures, lastScaleUp,
 *   lastScaleDown, message
 * A node of the pool is any Node labelled starcloud.dev/pool=<pool>; only
 * those in status.nodes (made by the pool) are ever deleted by it.
 *
 * Providers (pool_exec.c): exec runs the pool's create or delete command
 * for one node with the pool and node in the environment; dev starts and
 * stops `starcloud agent` processes with the template's GPUs, as
 * `starcloud dev` does, as children of the server. */
#ifndef SC_SERVER_POOL_H
#define SC_SERVER_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "server/sched_int.h"
#include "server/server.h"
#include "starcloud/buf.h"
#include "starcloud/autoscale.h"
#include "starcloud/manifest.h"

#define SC_POOL_MAX 64 /* pools one cycle plans for */

/* One pool as a cycle sees it. */
typedef struct sc_pool_in {
	sc_nodepool_t np; /* decoded spec; strings in the input's set */
	char name[SC_MAX_NAME + 1];
	int64_t rev;            /* the NodePool's revision read */
	int64_t oldest_request; /* requestedAt of the oldest node in flight, or 0 */
	/* Results of the worker. */
	int add, below_min;
	int waiting_jobs;
} sc_pool_in_t;

typedef struct sc_pool_cycle {
	sc_manifest_set_t *set; /* owns the decoded pools' strings */
	sc_pool_in_t *p;
	size_t n;
	int64_t now;
	/* Worker results: scale-down candidates (names owned), pods per pool
	 * node (names owned; pool nodes only), new reasons (owned). */
	char **down;
	size_t ndown;
	json_t *pods_on; /* node name -> pods held there (integer) */
	json_t *busy;    /* nodes holding pods of jobs the snapshot left out */
	char **reasons;
	size_t nreasons;
	json_t *waits; /* job name -> [{pool, nodes, requestedAt}] */
	char error[256];
	int refs; /* sc__pool_act and its status writes in flight (pool_ctl.c) */
} sc_pool_cycle_t;

/* ---- pool_plan.c ---- */
/* Loop thread: NULL when there is no NodePool (nothing to plan). */
sc_pool_cycle_t *sc__pool_input(sc_server_t *s, int64_t now);
/* Worker thread: plans on the cycle's snapshot (of world) and decisions (d's pending
 * reasons may be pointed at pc->reasons). A node that holds a pod of a job
 * the snapshot left out (a status the decoder refused) is never offered
 * for removal: the core cannot see that pod. 0 or SC_E* (pc->error). */
int sc__pool_plan(sc_pool_cycle_t *pc, const sc_snapshot_t *snap, const sc_world_t *world,
                  sc_decisions_t *d);
void sc__pool_cycle_free(sc_pool_cycle_t *pc);

/* ---- pool_exec.c: providers ---- */
typedef struct sc_pool_exec sc_pool_exec_t;
/* Called on the loop thread when an action ends: ok, and the last lines of
 * its output for an event when it failed. */
typedef void (*sc_pool_done_fn)(sc_server_t *s, const char *pool, const char *node, bool create,
                                bool ok, const char *output);
sc_pool_exec_t *sc__pool_exec_new(sc_server_t *s, sc_pool_done_fn done);
/* Stops the dev agents this server started and frees e (loop thread). */
void sc__pool_exec_free(sc_pool_exec_t *e);
/* Starts creating (or deleting) node `node` of pool np. 0, or SC_E*. */
int sc__pool_exec_start(sc_pool_exec_t *e, const sc_nodepool_t *np, const char *node, bool create);

/* ---- pool_ctl.c ---- */
int sc__pool_start(sc_server_t *s);
void sc__pool_stop(sc_server_t *s);
/* Loop thread, after a committed cycle (leader): acts on pc's plans.
 * Takes pc: it is freed once the status writes it started are answered
 * (the store's asynchronous calls: the loop never waits for etcd). */
void sc__pool_act(sc_server_t *s, sc_pool_cycle_t *pc);
/* The pools' part of /metrics. */
void sc__pool_metrics(sc_server_t *s, sc_buf_t *b);

#endif
