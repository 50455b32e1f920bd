/* The time-mode simulator's nodes: fixed ones and those of node pools,
 * which are requested, join after the provisioning delay, and go after
 * staying empty for their pool's scaleDownAfter (docs/AUTOSCALING.md).
 *
 * Decisions come from the core (sc_scaleup_plan, sc_scaledown_plan); this
 * module keeps time and the node table. A node's index never changes and
 * its name is never reused, so a running pod refers to its node by index. */
#ifndef SC_SIM_TIMEPOOL_H
#define SC_SIM_TIMEPOOL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/strmap.h"
#include "sim/timesim.h"

enum { SC_TN_PROVISIONING = 0, SC_TN_UP, SC_TN_GONE };

typedef struct sc_tnode {
	sc_node_spec_t spec; /* name owned */
	int pool;            /* index into the pools, -1 for a fixed node */
	int state;
	int64_t join_at;    /* provisioning: when it joins */
	int64_t idle_since; /* listed by the scale-down plan since, or -1 */
} sc_tnode_t;

typedef struct sc_tnodes {
	sc_tnode_t *v;
	size_t n, cap;
	sc_strmap_t by_name;
	const sc_tsim_pool_t *pools;
	size_t npools;
	int64_t delay;
	sc_pool_t *plan_pools; /* the pools as the core sees them this cycle */
	int *made;             /* per pool: nodes made so far (names) */
	sc_node_spec_t *snap;  /* the nodes present, for a snapshot */
	size_t nsnap;
	int gpus_up;     /* GPUs of the nodes present */
	int gpus_billed; /* ... and of those requested */
	size_t requested, removed;
} sc_tnodes_t;

/* Fixed nodes and every pool's minimum, present at `now`. 0, SC_ENOMEM. */
int sc__tnodes_init(sc_tnodes_t *t, const sc_tsim_config_t *c, int64_t now);
void sc__tnodes_free(sc_tnodes_t *t);
/* Requested nodes whose time has come join. */
void sc__tnodes_join(sc_tnodes_t *t, int64_t now);
/* Fills t->snap with the nodes present. 0 or SC_ENOMEM. */
int sc__tnodes_snapshot(sc_tnodes_t *t);
/* The node of that name, or -1. */
long sc__tnodes_find(const sc_tnodes_t *t, const char *name);
/* After the decisions d of a cycle on snap: requests the nodes the
 * scale-up plan asks for, and removes pool nodes the scale-down plan has
 * listed for their pool's delay. 0, or SC_E* with msg. */
int sc__tnodes_plan(sc_tnodes_t *t, const sc_snapshot_t *snap, const sc_decisions_t *d, int64_t now,
                    char *msg, size_t msgsize);
/* The next time a node joins or may go, or INT64_MAX. */
int64_t sc__tnodes_next(const sc_tnodes_t *t);
/* GPUs the pools (and fixed nodes) can ever hold for a pod of request r,
 * models allowed by ok(model); *one: a node of that kind holds one pod. */
int64_t sc__tnodes_capacity(const sc_tnodes_t *t, const sc_request_t *r,
                            bool (*ok)(const void *, const char *), const void *ctx, bool *one);

#endif
