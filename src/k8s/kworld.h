/* The scheduler's view of a Kubernetes cluster, and its translation into the
 * core's snapshot (the same sc_snapshot_t `starcloud schedule` builds from
 * manifests), plus the way back from the core's decisions to pods.
 *
 * Jobs. A PodGroup (KAI's scheduling.run.ai/v2alpha2, named by a pod's
 * `pod-group-name` annotation or label) is one job: minMember, queue,
 * priorityClassName, preemptibility and topologyConstraint come from it. A
 * pod of ours without a group is a job of one pod, in the queue its
 * `kai.scheduler/queue` label names (else the default queue). A job's pods
 * are split into tasks by identical request and node constraints, so the
 * core's failure cache (per job shape) works across jobs as it does for
 * manifests.
 *
 * Pods bound by anyone else (another scheduler, the kubelet for static pods)
 * hold their node's resources: each is a job of its own in a hidden queue
 * (SC_KW_OTHER) with an unlimited quota and a non-preemptible class above
 * every other, so fair share divides only what they leave and no action
 * ever moves or evicts them.
 *
 * Taints. The core has node selectors, not taints; each distinct
 * NoSchedule/NoExecute taint i becomes a label "starcloud.dev/untainted-i"
 * on every node WITHOUT it, and a pod that does not tolerate taint i selects
 * that label. That is exact: a pod may use a node iff the node has none of
 * the taints it does not tolerate.
 *
 * Ownership: the world borrows the cache and the local state for its
 * lifetime; everything it builds lives in the arena given to
 * sc_kworld_build (reset it after the cycle's decisions are applied). */
#ifndef SC_K8S_KWORLD_H
#define SC_K8S_KWORLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strmap.h"
#include "k8s/kcache.h"
#include "starcloud/arena.h"
#include "starcloud/core.h"

#define SC_KW_OTHER "starcloud.dev/other"
#define SC_KW_TAINT_LABEL "starcloud.dev/untainted-"

typedef struct sc_kworld_opts {
	const char *scheduler; /* spec.schedulerName that is ours */
	const char *default_queue;
	const sc_config_t *config; /* actions, placement, topology levels */
	int64_t now;               /* wall clock, seconds */
} sc_kworld_opts_t;

/* A pod the world leaves out of the snapshot, and why (a malformed
 * annotation, a missing PodGroup, an invalid queue...). */
typedef struct sc_kheld {
	sc_kpod_t *pod;
	const char *reason;
} sc_kheld_t;

typedef struct sc_kworld {
	sc_snapshot_t snap;
	/* Per job j: its pods of ours are pods[first[j] .. first[j+1]-1]. */
	sc_kpod_t **pods;
	size_t *first;
	bool *foreign;     /* per job: a hidden job of someone else's pod */
	sc_strmap_t names; /* core pod name -> index into pods */
	sc_kheld_t *held;
	size_t nheld;
	size_t nforeign;
} sc_kworld_t;

/* Builds the snapshot from the cache and local state (a map of pod key ->
 * sc_klocal_t). Returns 0 or SC_ENOMEM (the arena ran out). */
int sc_kworld_build(sc_arena_t *a, const sc_kcache_t *c, const sc_kmap_t *local,
                    const sc_kworld_opts_t *o, sc_kworld_t *w);

/* The pod a core pod name stands for, or NULL. */
sc_kpod_t *sc_kworld_pod(const sc_kworld_t *w, const char *core_name);

/* Frees what the world holds outside the arena (its name index). */
void sc_kworld_free(sc_kworld_t *w);

#endif
