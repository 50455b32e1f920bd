/* The cluster model: free resources per node and per GPU device, and the
 * placement engine that both the scheduler and the simulator use.
 *
 * An sc_cluster_t is built from node specs and then changed by taking and
 * giving back resources (sc_cluster_take / sc_cluster_give). The scheduler's
 * statements record takes so they can be rolled back; the simulator's packing
 * mode only takes. Nodes are kept in an index by (GPU model, whole devices
 * free) so that a search touches only nodes that can hold the request.
 *
 * Placement policies are tables of function pointers (sc_policy_t) chosen by
 * name: the built-in "binpack" and "spread" and, from the simulator, the FGD
 * paper's policies. */
#ifndef STARCLOUD_CLUSTER_H
#define STARCLOUD_CLUSTER_H

#include "starcloud/core.h"

#define SC_MAX_GPUS 16    /* devices per node */
#define SC_GPU_MILLI 1000 /* one whole device */

typedef struct sc_cluster sc_cluster_t;

/* Read-only view of one node's state. Valid until the next change. */
typedef struct sc_node_view {
	const sc_node_spec_t *spec; /* borrowed from sc_cluster_new's caller */
	uint32_t index;
	int model;        /* interned GPU model id, -1 when no GPU */
	int64_t cpu_free; /* millicores */
	int64_t mem_free; /* bytes */
	int gpu_count;
	int whole_free;                /* devices with nothing on them */
	int16_t gpu_free[SC_MAX_GPUS]; /* free milli per device (0..1000) */
	int64_t gpu_mem_free[SC_MAX_GPUS];
	uint8_t gpu_shared[SC_MAX_GPUS]; /* share pods on the device */
	uint8_t mig_used[SC_MAX_GPUS];   /* MIG: memory slices in use (bit i = slice i) */
	bool schedulable;                /* ready and not cordoned */
	/* Resources held by pods being released (Releasing in the snapshot,
	 * or evicted in this cycle) that no pod has yet been pipelined onto.
	 * They are counted as taken above; a pipelined placement may use them
	 * (KAI's releasing resources). */
	int64_t cpu_rel, mem_rel;
	int16_t gpu_rel[SC_MAX_GPUS]; /* milli per device */
	int64_t gpu_mem_rel[SC_MAX_GPUS];
	uint8_t shared_rel[SC_MAX_GPUS]; /* share pods being released on the device */
	uint8_t mig_rel[SC_MAX_GPUS];    /* MIG slices being released */
	uint8_t gpu_wait[SC_MAX_GPUS];   /* pods pipelined onto the device, waiting */
} sc_node_view_t;

/* Where one pod goes: a node and, for GPU pods, the devices. A share pod
 * has ngpus == 1 and gpu_milli set (for a memory share, gpu_memory too and
 * gpu_milli is the memory's share of the device, rounded up). */
typedef struct sc_assign {
	uint32_t node;
	int ngpus;
	int gpus[SC_MAX_GPUS];
	int gpu_milli;
	int64_t gpu_memory;
	int mig_start;  /* MIG pods: first memory slice; gpus[0] = device */
	int mig_slices; /* MIG pods: memory slices taken, 0 for others */
} sc_assign_t;

/* Builds a cluster; nodes (and the strings in them) are borrowed and must
 * outlive it. Returns NULL when out of memory, or when a node has more than
 * SC_MAX_GPUS devices (err then gets SC_ERANGE). */
sc_cluster_t *sc_cluster_new(const sc_node_spec_t *nodes, size_t n, int *err);
void sc_cluster_free(sc_cluster_t *c);

size_t sc_cluster_nnodes(const sc_cluster_t *c);
const sc_node_view_t *sc_cluster_node(const sc_cluster_t *c, size_t i);
/* The node index of a name, or -1. */
long sc_cluster_find_node(const sc_cluster_t *c, const char *name);
/* The interned id of a GPU model, or -1 when no node has it. */
int sc_cluster_model_id(const sc_cluster_t *c, const char *model);
int sc_cluster_nmodels(const sc_cluster_t *c);
const char *sc_cluster_model_name(const sc_cluster_t *c, int id);
/* Totals over schedulable nodes: GPUs in milli, cpu in milli, memory bytes. */
void sc_cluster_totals(const sc_cluster_t *c, int64_t *gpu_milli, int64_t *cpu_milli, int64_t *mem);
/* Totals currently allocated (same units). */
void sc_cluster_used(const sc_cluster_t *c, int64_t *gpu_milli, int64_t *cpu_milli, int64_t *mem);

/* The share of one device, in milli, that a request asks for: 1000 per
 * whole GPU is not counted here (0 for whole-GPU and CPU-only pods). A memory
 * share is converted with the node's device memory, rounded up. */
int sc_request_share_milli(const sc_request_t *r, const sc_node_view_t *n);
/* GPU milli a request occupies on node n (whole devices x 1000, or its share). */
int64_t sc_request_gpu_milli(const sc_request_t *r, const sc_node_view_t *n);

/* True when the request's cpu, memory and GPU needs fit into node n's free
 * resources (labels, models and topology are the caller's filters). */
bool sc_node_fits(const sc_node_view_t *n, const sc_request_t *r);

/* Device choice inside a node. */
enum sc_device_policy {
	SC_DEV_PACK = 0, /* shares onto the fullest device that fits */
	SC_DEV_SPREAD,   /* shares onto the emptiest device */
};

/* MIG profiles. A device has 8 memory slices; a profile takes `size` of
 * them starting at one of its valid start slices, and `compute` of the 7
 * compute slices. The table depends on the device's memory (40 GB class or
 * 80 GB class, which A100-80GB and H100-80GB share). */
typedef struct sc_mig_profile {
	const char *name;
	int compute;
	int size;
	uint8_t starts; /* bit i set = may start at slice i */
} sc_mig_profile_t;

/* The profile of that name for a device of that memory, or NULL. */
const sc_mig_profile_t *sc_mig_profile(const char *name, int64_t device_memory);

/* Chooses devices on node n for request r (which must fit) and fills *a.
 * Whole GPUs never take a device that holds shares. Returns 0 or SC_ENOFIT. */
int sc_node_choose_devices(const sc_node_view_t *n, const sc_request_t *r, int device_policy,
                           sc_assign_t *a);

/* Takes (or gives back) the resources of one pod. take fails with SC_ENOFIT
 * and changes nothing when they are not free. */
int sc_cluster_take(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a);
void sc_cluster_give(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a);

/* ---- placement policies ------------------------------------------- */

/* A policy scores a node that fits (higher is better) and may choose the
 * devices; when it leaves a->ngpus == 0 for a GPU pod, the caller picks the
 * devices with the policy's device_policy. Returning -INFINITY rejects the
 * node. ctx is the policy's own state (borrowed). */
typedef struct sc_policy {
	const char *name;
	double (*score)(void *ctx, const sc_cluster_t *c, const sc_node_view_t *n,
	                const sc_request_t *r, sc_assign_t *a);
	/* Optional: told after every take so the policy can update its state. */
	void (*taken)(void *ctx, const sc_cluster_t *c, const sc_node_view_t *n,
	              const sc_request_t *r, const sc_assign_t *a);
	int device_policy;
	void *ctx;
} sc_policy_t;

/* Filters for a search. */
typedef struct sc_filter {
	const int *models; /* allowed model ids; NULL = any */
	size_t nmodels;
	const sc_label_t *selector; /* node labels that must match */
	size_t nselector;
	/* Optional extra predicate, e.g. a topology domain or a per-node cap. */
	bool (*accept)(void *ctx, const sc_node_view_t *n);
	void *accept_ctx;
} sc_filter_t;

/* The built-in policies by name ("binpack", "spread"); NULL if unknown. */
const sc_policy_t *sc_policy_builtin(const char *name);

/* Finds the best node for one pod: every node that passes the filter and
 * fits is scored by the policy; ties go to the lower node index. Fills *a
 * (node and devices). Returns 0, or SC_ENOFIT when no node fits. */
int sc_cluster_best(const sc_cluster_t *c, const sc_request_t *r, const sc_filter_t *f,
                    const sc_policy_t *p, sc_assign_t *a);

/* Fast path for the built-in policies: uses the free-capacity index so only
 * nodes that can hold the request are visited. spread = false is binpack. */
int sc_cluster_best_indexed(const sc_cluster_t *c, const sc_request_t *r, const sc_filter_t *f,
                            bool spread, int device_policy, sc_assign_t *a);

#endif
