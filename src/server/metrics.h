/* Prometheus metrics of the control plane (text exposition format 0.0.4).
 *
 * Counters and histograms live in plain arrays: the daemon has one thread,
 * so no atomics are needed, and the label sets are small and bounded (API
 * routes, methods, codes; queues from the last cycle). */
#ifndef SC_SERVER_METRICS_H
#define SC_SERVER_METRICS_H

#include <stddef.h>

#include "server/server.h"

/* One queue's figures from the last scheduling cycle (GPU devices). */
typedef struct sc_queue_metrics {
	char name[SC_MAX_NAME + 1];
	double quota, fair_share, allocated, requested;
} sc_queue_metrics_t;

/* Records a finished cycle: its duration, what it decided, and the queue
 * figures (copied). evictions[a] counts evictions by action a; drained
 * counts pods evicted from drained nodes. */
void sc__metrics_cycle(sc_metrics_t *m, double seconds, size_t placements, const size_t *evictions,
                       size_t nactions, size_t drained, size_t pending,
                       const sc_queue_metrics_t *queues, size_t nqueues);
/* Adds compaction's moves of a cycle: GPUs released on the nodes they left,
 * and the run time they cost in GPU-seconds. */
void sc__metrics_compaction(sc_metrics_t *m, double gpus, double lost_gpu_seconds);
/* Counts objects a cycle decoded itself (not handed over by the API). */
void sc__metrics_decodes(sc_metrics_t *m, size_t decoded);
/* Records how long a job waited from creation to its first placement. */
void sc__metrics_wait(sc_metrics_t *m, double seconds);
/* A queue's oldest waiting job: its creation time (0: none waits). */
typedef struct sc_queue_wait {
	char name[SC_MAX_NAME + 1];
	int64_t since;
} sc_queue_wait_t;

/* Takes the last cycle's cluster gauges: exposition text and the queues'
 * oldest waits (both owned), printed as ages at scrape time. */
void sc__metrics_state(sc_metrics_t *m, char *state, sc_queue_wait_t *queues, size_t nqueues);
/* The loop's state: busy (a cycle runs or changes wait) and the changes
 * noted since the last cycle took its input. */
void sc__metrics_loop(sc_metrics_t *m, int busy, size_t changes);
/* Adds skipped cycles, commit parts and deferred reasons; sets the kept
 * snapshot's size (< 0: unchanged). */
void sc__metrics_loop_counts(sc_metrics_t *m, size_t skipped, size_t parts, size_t deferred,
                             double world_bytes);
/* Counts a canary rollback; reason is "error_rate", "gateway" or "abort". */
void sc__metrics_rollback(sc_metrics_t *m, const char *reason);

#endif
