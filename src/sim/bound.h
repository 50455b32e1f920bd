/* An upper bound on the GPU that any placement policy can allocate for one
 * packing run's arrivals (`starcloud simulate --bound`).
 *
 * The simulator's policies (and the reference's kube-scheduler) place every
 * pod that fits somewhere when it arrives; they choose only where. Pods never
 * leave, so the cluster only fills. The bound rests on two facts that hold
 * for every such policy:
 *
 * 1. Forced pods. A pod fails only if, when it arrives, every node it may
 *    use is blocked for it: too little free CPU, or memory, or no room on
 *    the GPUs (for a share: every device already holds more than 1000 - s
 *    milli; for k whole GPUs: fewer than k untouched devices). Blocking a
 *    node costs resources: CPU beyond cpu - c, memory beyond mem - m,
 *    touched devices and (for shares) milli on every device. The pods that
 *    arrived before it are all the resources there are, so when even all of
 *    them cannot pay for blocking every allowed node (each node counted
 *    under the cheapest of its ways, by a fractional knapsack, which can
 *    only overstate what blocking is possible), the pod is placed by every
 *    policy. Early in a run every pod is forced; in OpenB's runs most pods
 *    that arrive before about two thirds of capacity are.
 *
 * 2. Packing. The final placement, grouped by node type (identical nodes)
 *    and pod class (identical requests), satisfies linear constraints per
 *    node type: CPU and memory; devices (every device holds a whole-GPU
 *    pod, or shares with exactly one above 500 milli, or shares of at most
 *    500 milli, or nothing); the shares beside a big share s fit in its
 *    1000 - s; a pod of more than half a node's GPUs is alone on it.
 *
 * The bound is the optimum of the linear relaxation: the most GPU milli
 * over fractional counts per (class, node type, device kind) that meet the
 * packing constraints, take every forced pod, and take no more pods of a
 * class than arrived. Any policy's final placement is one such point, so
 * its allocation is at most the optimum. The value is taken from the dual
 * (weak duality, evaluated on the solver's row duals): any dual point
 * bounds the optimum from above, so an inexact solver cannot make the
 * bound too small. The LP is solved with GLPK's simplex. */
#ifndef SC_SIM_BOUND_H
#define SC_SIM_BOUND_H

#include <stdbool.h>
#include <stddef.h>

#include "sim/packing.h"

typedef struct sc_sim_bound {
	char workload[128];
	uint64_t seed;
	double bound_pct;   /* upper bound on GPU allocated after the last pod,
	                     * % of capacity (rounded up to 0.01) */
	double offline_pct; /* the same without forced pods (the offline
	                     * relaxation: what any subset of the pods could fill) */
	double arrived_pct; /* GPU demand of all arrivals, % of capacity */
	double forced_pct;  /* GPU demand of the forced pods, % of capacity */
	size_t pods, forced_pods, never_fit_pods;
	double first_unforced_pct; /* arrived demand at the first pod not forced */
	int lp_rows, lp_cols;
	double wall_seconds;
} sc_sim_bound_t;

/* Computes the bound for the arrivals of run (w, c) (c->policy is not
 * used). Errors: SC_ENOMEM; SC_EINVAL with a message if the LP solver
 * fails (the LP has a feasible point by construction, so that is a bug). */
int sc_sim_bound(const sc_sim_workload_t *w, const sc_sim_config_t *c, sc_sim_bound_t *out,
                 char *msg, size_t msgsize);

/* For tests: whether each of the run's arrivals (sc__sim_arrivals order) is
 * forced (placed by every policy) and whether it can ever fit. forced and
 * fits get n entries (malloc'd by the caller: n from sc__sim_arrivals). */
int sc__sim_forced(const sc_sim_workload_t *w, const sc_sim_config_t *c, bool *forced, bool *fits,
                   size_t n);

#endif
