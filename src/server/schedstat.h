/* The scheduler's own figures, for people (`starcloud top`, `describe
 * queue`) and the dashboard (queue bars, history charts):
 *
 *   GET /api/v1/scheduler/status
 *     {"kind":"SchedulerStatus", "cycle":{"time","durationSeconds"},
 *      "cluster":{"nodes","gpus","allocatedGpus"},
 *      "queues":[{"name","parent","leaf","pendingJobs","fairShare","allocated",
 *                 "requested","quota","limit"}]}
 *     each resource object as explain's: {"gpu": devices, "cpu": cores,
 *     "memory": bytes}, null for unlimited. Shares and MIG slices count as
 *     the core counts them (a fraction of a device), deployments included,
 *     parents summed over their children: exactly what the last cycle
 *     decided with. "cycle" is null before the first cycle (and on an HA
 *     follower, which does not schedule).
 *   GET /api/v1/scheduler/history[?since=UNIX_SECONDS]
 *     {"kind":"SchedulerHistory","intervalSeconds":10,"samples":[{"time",
 *      "gpus","allocatedGpus","queues":{"q":{"allocated","requested",
 *      "pending"}}}]}: one sample per 10 s of cycles, the last hour, kept in
 *     a ring in memory (gone at a restart; Prometheus keeps the long
 *     history). allocated and requested are GPU devices, pending is jobs.
 *
 *   GET /api/v1/scheduler/devices
 *     {"kind":"DeviceUse","nodes":{"gpu-01":[1000,1000,750,0]}}: per node, the
 *     milli of each device held by any job's or deployment's pods (whole
 *     1000, shares their part, MIG instances their slices of 7), without
 *     saying whose: a tenant's GPU map draws other queues' use from it.
 *
 * Any token but an agent's may read them; a tenant sees its own queues only (the cluster
 * totals too, as on /metrics). Fed by sched.c after each committed cycle,
 * on the loop thread. */
#ifndef SC_SERVER_SCHEDSTAT_H
#define SC_SERVER_SCHEDSTAT_H

#include "server/server.h"
#include "starcloud/core.h"

#define SC_HISTORY_INTERVAL_S 10
#define SC_HISTORY_SAMPLES 360 /* an hour */

typedef struct sc_schedstat sc_schedstat_t;

sc_schedstat_t *sc__schedstat_new(void);
void sc__schedstat_free(sc_schedstat_t *st);

/* One cycle's figures, prepared on the cycle's worker thread (a walk over
 * the pending jobs) so the loop thread only swaps them in. */
typedef struct sc_schedstat_cycle {
	size_t nodes;
	double gpus, allocated;
	sc_queue_report_t *queues; /* names and parents owned */
	size_t *pending;           /* per queue, children's added to their parents */
	size_t nqueues;
} sc_schedstat_cycle_t;

/* Fills c from decisions d over snapshot snap (both borrowed; what is kept
 * is copied). Any thread. */
void sc__schedstat_prepare(sc_schedstat_cycle_t *c, const sc_snapshot_t *snap,
                           const sc_decisions_t *d);
/* Frees what c holds and zeroes it; accepts a zeroed c. */
void sc__schedstat_cycle_free(sc_schedstat_cycle_t *c);
/* Records a finished cycle at unix time now (seconds): its duration and
 * the figures c (taken: c is zeroed). Loop thread. */
void sc__schedstat_record(sc_schedstat_t *st, int64_t now, double seconds, sc_schedstat_cycle_t *c);
/* A periodic tick at now that ran no cycle (nothing changed): the last
 * cycle's figures still hold, so the history gets its sample for this
 * interval from them. Nothing before the first cycle. */
void sc__schedstat_idle(sc_schedstat_t *st, int64_t now);

/* Routes /api/v1/scheduler/ on s's HTTP server. */
int sc__schedstat_register(sc_server_t *s, sc_schedstat_t *st);

#endif
