/* The packing simulator of `starcloud simulate` (the FGD paper's method).
 *
 * A workload (a node list and a pod list) is prepared once and then run
 * any number of times, one run per (policy, seed), possibly in parallel:
 * a prepared workload is read-only and runs share nothing else.
 *
 * One run: the pods, in name order, are shuffled with the seed, then
 * inflated (or trimmed) by re-sampling until their GPU request reaches
 * `target` x the cluster's GPU capacity, as the reference's
 * TunePodsByNodeTotalResource does. The nodes are put in a random order
 * (the reference's tie-break between equal scores). Pods are then placed
 * one at a time through the core's cluster model and placement search
 * (sc_cluster_best with the policy's sc_policy_t) and never leave; a pod
 * that fits nowhere fails. After every pod the run records the allocated
 * GPU share against the arrived GPU demand, both as % of capacity, and the
 * cluster's fragmentation; the curves average these per integer percent of
 * arrived demand as the reference's analysis scripts do. */
#ifndef SC_SIM_PACKING_H
#define SC_SIM_PACKING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/trace.h"

#define SC_SIM_CURVE_MAX 130 /* percent of arrived demand reported */

typedef struct sc_sim_workload sc_sim_workload_t;

/* Prepares a workload. nodes and pods are borrowed and must outlive it;
 * name (e.g. "openb_pod_list_default") is copied. Errors: SC_EINVAL with a
 * message (no GPU in the cluster, no GPU pod in the list, a GPU pod's
 * gpu_spec naming a model no node has), SC_ENOMEM. More than 64 GPU
 * models is found when a run starts. */
int sc_sim_workload_new(const sc_trace_nodes_t *nodes, const sc_trace_pods_t *pods,
                        const char *name, sc_sim_workload_t **out, char *msg, size_t msgsize);
void sc_sim_workload_free(sc_sim_workload_t *w);
const char *sc_sim_workload_name(const sc_sim_workload_t *w);
int sc_sim_workload_gpus(const sc_sim_workload_t *w);

typedef struct sc_sim_config {
	const char *policy; /* a name from sc_sim_policy_names */
	uint64_t seed;
	double target;   /* inflate to target x GPU capacity; <= 0: as is */
	double coverage; /* typical pods' share of the trace (0.95) */
} sc_sim_config_t;

/* Fills c with the defaults: policy "default", seed 42, target 1.3,
 * coverage 0.95. */
void sc_sim_config_default(sc_sim_config_t *c);

typedef struct sc_sim_result {
	char workload[128];
	char policy[32];
	uint64_t seed;
	int total_gpus;
	size_t pods; /* after inflation */
	size_t failed_pods;
	/* Per integer percent of arrived GPU demand (index 0..130): allocated
	 * GPU and fragmented GPU, % of capacity; NAN where nothing arrived. */
	double alloc[SC_SIM_CURVE_MAX + 1];
	double frag[SC_SIM_CURVE_MAX + 1];
	double final_alloc; /* after the last pod, % of capacity */
	double arrived_pct; /* total arrived demand, % of capacity */
	double wall_seconds;
	size_t frag_states; /* distinct node states memoised */
} sc_sim_result_t;

/* Runs one packing simulation. Errors: SC_EINVAL (unknown policy, message
 * in msg), SC_ENOMEM. */
int sc_sim_packing_run(const sc_sim_workload_t *w, const sc_sim_config_t *c, sc_sim_result_t *res,
                       char *msg, size_t msgsize);

/* The value of a curve at percent k, NAN when absent. */
double sc_sim_curve_at(const double *curve, int k);

#endif
