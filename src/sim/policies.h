/* The FGD paper's placement policies, and ours, as sc_policy_t tables.
 *
 * Each policy scores a node for a pod the way the reference simulator's
 * kube-scheduler plugin does (hkust-adsl/kubernetes-scheduler-simulator,
 * pkg/simulator/plugin/<name>_score.go), including its integer score range
 * 0..100: equal scores are frequent and are broken by node order, which the
 * packing simulator randomises per seed exactly as the reference does (it
 * prefixes node names with a random permutation and prefers the smallest).
 * Device choice inside a node also follows the reference: FGD and `default`
 * pick the device themselves, `random` picks a random device that fits, the
 * others take the fullest device that fits (best fit).
 *
 *   random        a uniformly random node that fits
 *   dotprod       Tetris: smallest dot product of free and requested
 *                 (cpu, gpu), both normalised by the largest node shape
 *   gpuclustering nodes already running pods of the same GPU count first
 *   gpupacking    shared devices first, then used nodes, then empty nodes
 *   bestfit       least weighted free cpu + gpu left after placement
 *   fgd           least growth of fragmentation against typical pods
 *   default       ours: see docs/SIMULATOR.md */
#ifndef SC_SIM_POLICIES_H
#define SC_SIM_POLICIES_H

#include <stddef.h>
#include <stdint.h>

#include "sim/frag.h"
#include "starcloud/cluster.h"

/* What a policy may look at besides the cluster (all borrowed; they must
 * outlive the policy). */
typedef struct sc_sim_env {
	sc_frag_t *frag; /* typical pods and current per-node values */
	const sc_cluster_t *cluster;
	uint64_t seed; /* for random choices */
	/* Every pod shape of the workload with its frequency, models
	 * resolved for this cluster; `default` needs it, others ignore it. */
	const sc_typical_t *shapes;
	size_t nshapes;
} sc_sim_env_t;

/* Creates the named policy for one run. Returns 0, SC_EINVAL for an unknown
 * name, or SC_ENOMEM. Free with sc_sim_policy_free. */
int sc_sim_policy_new(const char *name, const sc_sim_env_t *env, sc_policy_t **out);
void sc_sim_policy_free(sc_policy_t *p);

/* The names, in the reference's order, `default` last; NULL-terminated. */
extern const char *const sc_sim_policy_names[];
/* True when `name` is one of them. */
bool sc_sim_policy_known(const char *name);

#endif
