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
};

bool sc__filter_pass(const sc_filter_t *f, const sc_node_view_t *n);
void sc__cluster_force_take(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a);

/* mig.c */
int sc__mig_choose(const sc_node_view_t *n, const char *profile, int *dev, int *start);
int64_t sc__mig_milli(const sc_mig_profile_t *p);

#endif
