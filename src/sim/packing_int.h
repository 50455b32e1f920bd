/* The packing simulator's prepared workload, shared by packing.c (the
 * runs) and bound.c (the upper bound over the same arrivals). Internal to
 * src/sim: callers outside use the opaque sc_sim_workload_t of packing.h. */
#ifndef SC_SIM_PACKING_INT_H
#define SC_SIM_PACKING_INT_H

#include <stddef.h>
#include <stdint.h>

#include "sim/frag.h"
#include "sim/packing.h"
#include "starcloud/core.h"

/* A distinct gpu_spec: its text and the model names it allows. */
typedef struct sc__sim_spec {
	const char *text; /* borrowed from the trace */
	char **models;    /* owned */
	int nmodels;      /* 0: any model */
} sc__sim_spec_t;

typedef struct sc__sim_pod {
	const char *name; /* borrowed from the trace */
	sc_request_t req; /* cpu and memory as in the trace; gpus or gpu_milli */
	int spec;         /* index into specs; 0 = "" (any model) */
	int64_t milli;    /* total GPU milli requested */
	int per_gpu;      /* milli per GPU (the reference's MilliGpu) */
} sc__sim_pod_t;

struct sc_sim_workload {
	char name[128];
	sc_node_spec_t *nodes; /* name order; names and models borrowed */
	size_t nnodes;
	sc__sim_pod_t *pods; /* name order */
	size_t npods;
	sc__sim_spec_t *specs; /* sorted by text, so ids order like strings */
	int nspecs;
	sc_pod_shape_t *shapes; /* per pod, models unresolved */
	int total_gpus;
};

/* The pods of run (w, c) in arrival order: shuffled with c->seed and
 * inflated or trimmed to c->target, exactly as sc_sim_packing_run places
 * them. *order (malloc'd, caller frees) points into w->pods. Returns 0
 * or SC_ENOMEM. */
int sc__sim_arrivals(const sc_sim_workload_t *w, const sc_sim_config_t *c,
                     const sc__sim_pod_t ***order, size_t *n);

#endif
