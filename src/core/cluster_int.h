/* Internals of the cluster model shared by the core's modules. */
#ifndef SC_CORE_CLUSTER_INT_H
#define SC_CORE_CLUSTER_INT_H

#include "base/strmap.h"
#include "starcloud/cluster.h"

/* Largest-partial-share buckets (besides bucket 0 = none). */
#define PARTIAL_BUCKETS 16

typedef struct group {
	uint64_t *whole[SC_MAX_GPUS + 1];
	uint64_t *partial[PARTIAL_BUCKETS + 1];
	uint32_t nwhole[SC_MAX_GPUS + 1];
	uint32_t npartial[PARTIAL_BUCKETS + 1];
} group_t;

struct sc_cluster {
	sc_node_view_t *nodes;
	size_t nnodes;
	size_t nwords;     /* words per bitset */
	int8_t *key_whole; /* each node's current bucket keys */
	int8_t *key_partial;
	const char **models; /* interned model names (borrowed) */
	int nmodels;
	group_t *groups; /* [0] = no GPU, [m + 1] = model m */
	uint64_t *bits;
	sc_strmap_t names;
	int64_t mig_used_milli;
	int64_t used[3];  /* gpu milli (non-MIG), cpu milli, memory: all nodes */
	int64_t total[3]; /* the same capacity over schedulable nodes */
	/* Nodes holding releasing resources (pipeline.c): any; GPU ones (a
	 * GPU pod is pipelined where a GPU is being released); and those
	 * releasing only CPU or memory that have an idle GPU (where a GPU pod
	 * short of CPU or memory may wait), kept small so that a GPU pod's
	 * search never walks every node a pod left. */
	uint64_t *relbits, *relbits_gpu, *relbits_idle;
	/* Per node: GPU milli held beyond its devices (a snapshot's pods counted
	 * twice on one device; sc__cluster_settle_releasing pays it back). */
	int64_t *gpu_debt;
	/* The same per device (node * SC_MAX_GPUS + device): a debt is paid
	 * by the device it was run up on first, since for an agent the device
	 * numbers are real (NVIDIA_VISIBLE_DEVICES). */
	int32_t *dev_debt;
	size_t nrel;
	int64_t rel_gpu_milli; /* releasing GPU milli over schedulable nodes */
};

/* What a pipelined pod took from releasing resources, per device in the
 * order of its assignment, to give it back exactly on rollback. */
typedef struct sc_pipe {
	int64_t cpu, mem;
	int16_t gpu[SC_MAX_GPUS];
	int64_t gpu_mem[SC_MAX_GPUS];
	uint8_t mig;
} sc_pipe_t;

/* cluster.c internals shared with pipeline.c: every change to a node is
 * bracketed by index_del and index_add. */
void sc__index_add(sc_cluster_t *c, uint32_t i);
void sc__index_del(sc_cluster_t *c, uint32_t i);
void sc__recount_whole(sc_node_view_t *n);
uint32_t sc__bit_next(const uint64_t *b, size_t nwords, uint32_t from);
bool sc__is_share(const sc_request_t *r);

/* pipeline.c: releasing resources (KAI's Releasing pods and pipelining).
 * release/unrelease move a placed pod's resources into or out of the
 * releasing pool (they stay taken); best_pipe finds a node where the pod
 * fits into idle plus releasing resources (only nodes with some releasing
 * are visited) and chooses its devices; take_pipe/give_pipe take and give
 * back such a placement, recording in *used what came from the pool. */
/* cluster.c: keeps node i's relbits_idle bit true after its idle GPUs or
 * its releasing resources changed (sc__index_add and pipeline.c call it). */
void sc__pipe_note(sc_cluster_t *c, uint32_t i);
void sc__cluster_release(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a);
/* After the snapshot's pods are placed: releasing GPUs of an over-committed
 * node pay back its devices held twice (pipeline.c). */
void sc__cluster_settle_releasing(sc_cluster_t *c);
void sc__cluster_unrelease(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a);
bool sc__cluster_has_releasing(const sc_cluster_t *c);
/* A pod of the snapshot is pipelined there, waiting: shares placed on its
 * devices are pipelined too (KAI: the device is not reserved yet). */
void sc__cluster_mark_waiting(sc_cluster_t *c, const sc_assign_t *a);
int64_t sc__cluster_releasing_gpu(const sc_cluster_t *c);
int sc__cluster_best_pipe(const sc_cluster_t *c, const sc_request_t *r, const sc_filter_t *f,
                          bool spread, int device_policy, sc_assign_t *a);
/* For a share: a device already shared with a pod being released, where the
 * share fits once it is gone (KAI's GPU sharing packs onto such a device,
 * pipelined, before it opens a new one); the fullest such device. */
int sc__cluster_shared_pipe(const sc_cluster_t *c, const sc_request_t *r, const sc_filter_t *f,
                            sc_assign_t *a);
int sc__node_choose_pipe(const sc_node_view_t *n, const sc_request_t *r, int device_policy,
                         sc_assign_t *a);
int sc__cluster_take_pipe(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a,
                          sc_pipe_t *used);
void sc__cluster_give_pipe(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a,
                           const sc_pipe_t *used);
bool sc__pipe_any(const sc_pipe_t *used);

bool sc__filter_pass(const sc_filter_t *f, const sc_node_view_t *n);
void sc__cluster_force_take(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a);

/* mig.c */
int sc__mig_choose(const sc_node_view_t *n, const char *profile, int *dev, int *start);
int64_t sc__mig_milli(const sc_mig_profile_t *p);

#endif
