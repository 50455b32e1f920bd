/* Synthetic clusters and workloads for benchmarks (`starcloud bench`).
 *
 * Deterministic for a seed. Everything a world points to is owned by it and
 * freed with sc_synth_free(). */
#ifndef SC_SIM_SYNTH_H
#define SC_SIM_SYNTH_H

#include <stdint.h>

#include "starcloud/core.h"

typedef struct sc_synth sc_synth_t;

/* The allocation benchmark: nnodes x 8 GPUs (A100/H100, 32 nodes a rack,
 * two zones), 1,110 queues in a three-level tree (10 x 10 x 10), njobs
 * pending jobs: 50 % single pods of 1-8 GPUs, 30 % gangs of 2-64 pods of
 * 4 or 8 GPUs, 20 % shares of 0.1-0.9 GPU. Only allocate is configured:
 * nothing runs, so nothing could be evicted. NULL when out of memory. */
sc_synth_t *sc_synth_pending(size_t nnodes, size_t njobs, uint64_t seed);

/* The preemption benchmark: nnodes x 8 GPUs full with two 4-GPU
 * low-priority preemptible pods per node, and npending high-priority gangs
 * (1-2 pods x 4 GPUs) in the same nqueues queues; all five actions. */
sc_synth_t *sc_synth_preempt(size_t nnodes, size_t npending, size_t nqueues);

const sc_snapshot_t *sc_synth_snapshot(const sc_synth_t *w);
void sc_synth_free(sc_synth_t *w);

#endif
