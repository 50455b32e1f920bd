/* Time mode of `starcloud simulate` (`--time`): jobs arrive and finish
 * over time and the real scheduler core decides who runs.
 *
 * The simulator keeps the jobs' state (waiting for arrival, pending,
 * running with its pods' nodes and devices, done). At every event time
 * (an arrival or a completion, rounded up to the `tick` grid) it takes a
 * snapshot of the arrived, unfinished jobs (running pods as
 * sc_pod_status_t), calls sc_scheduler_run with the actions allocate,
 * reclaim and preempt, and applies the decisions: an eviction stops the
 * whole gang (it keeps its progress and waits again, as with checkpointing
 * schedulers), a job whose every pod is bound starts and will finish after
 * its remaining run time. Queues are the jobs' queues, each with an equal
 * deserved share of the GPUs (quota = GPUs / queues, weight 1, no limit),
 * so the core's fair share, cross-queue reclaim and in-queue preemption
 * (normal over best-effort) are all active.
 *
 * With node pools the cluster is the pools' nodes (and any fixed ones): it
 * starts from the pools' minimum, the core's scale-up plan after each
 * cycle requests nodes that join `provision_delay` later, and the
 * scale-down plan (empty nodes only: pods do not move here) removes a node
 * that stayed empty for the pool's scaleDownAfter.
 *
 * Metrics: queue wait (first start minus arrival; mean, p50, p95, p99), job
 * completion time (finish minus arrival), makespan (last finish minus first
 * arrival), GPU allocation over time and its time-weighted mean, and Jain's
 * fairness index over queues of x_q = integral of allocated GPUs / integral
 * of the core's fair share (1 = every queue got its fair share). */
#ifndef SC_SIM_TIMESIM_H
#define SC_SIM_TIMESIM_H

#include <stddef.h>
#include <stdint.h>

#include "sim/jobs.h"
#include "starcloud/autoscale.h"
#include "starcloud/core.h"

/* Who decides. SC_TSIM_STARCLOUD: the scheduler core (queues, fair share,
 * gangs, reclaim, preemption). SC_TSIM_FCFS: the baseline of a stock
 * Kubernetes scheduler, pod by pod: pods in order of their job's arrival,
 * each placed on the fitting node with the most free GPUs (spread first,
 * kube-scheduler's LeastAllocated) as soon as it fits, a pod that fits
 * nowhere skipped for the ones after it; no gangs (a job's pods start as
 * they fit and hold their GPUs while it waits for the rest: the job runs
 * only once every pod is placed), no queues or fair share, no preemption,
 * no GPU sharing between jobs beyond what the request says. */
enum sc_tsim_policy { SC_TSIM_STARCLOUD = 0, SC_TSIM_FCFS };

/* A node pool in the simulation (docs/AUTOSCALING.md): the core's part
 * (template, limits, cost) and the delay before an idle node goes. */
typedef struct sc_tsim_pool {
	sc_pool_t pool; /* in_flight and removing are the simulator's */
	int64_t scale_down_after;
} sc_tsim_pool_t;

typedef struct sc_tsim_config {
	const sc_node_spec_t *nodes; /* borrowed; fixed nodes (may be none with pools) */
	size_t nnodes;
	int64_t tick; /* cycle grid, seconds (>= 1) */
	int policy;   /* enum sc_tsim_policy */
	/* Node pools: the cluster starts from their minimum; after each cycle
	 * the core's scale-up plan requests nodes, which join provision_delay
	 * seconds later, and empty pool nodes go after scale_down_after. */
	const sc_tsim_pool_t *pools; /* borrowed */
	size_t npools;
	int64_t provision_delay;
	/* Runs the compaction action after allocate, reclaim and preempt
	 * (SchedulerConfig's defaults, with this packThreshold, 0 = 0.7, and
	 * targetGpus): a moved job loses the run time the action's cost
	 * assumes (its run time here, at most compaction.checkpointEvery). */
	bool compaction;
	double pack_threshold;
	int target_gpus;
	int large_gpus; /* jobs of at least this many GPUs are "large" (0 = 8) */
	/* Called after every cycle with the jobs finished (done or never
	 * fitting) out of all, and the simulated seconds so far; NULL: none.
	 * The simulator reads no clock: a caller that reports progress to a
	 * person times it (cli_simtime.c throttles to a few lines a second). */
	void (*progress)(void *ud, size_t finished, size_t jobs, int64_t sim_seconds);
	void *progress_ud;
} sc_tsim_config_t;

typedef struct sc_tsim_point {
	int64_t t;   /* seconds since the first arrival */
	double util; /* GPU allocated, % of the GPUs present */
	double busy; /* GPU held by jobs that run, % (FCFS: less than util while
	              * part of a job's pods wait for the rest) */
	size_t pending, running;
	int gpus; /* GPUs of the nodes present */
} sc_tsim_point_t;

typedef struct sc_tsim_job {
	int64_t arrival, start, finish; /* start/finish -1 when never */
	int preemptions;
	size_t queue; /* index into queues */
} sc_tsim_job_t;

typedef struct sc_tsim_stats {
	double mean, p50, p95, p99;
} sc_tsim_stats_t;

typedef struct sc_tsim_queue {
	char name[64];
	size_t jobs, finished;
	sc_tsim_stats_t wait, jct;
	double gpu_seconds;  /* integral of allocated GPUs */
	double fair_seconds; /* integral of the core's fair share */
} sc_tsim_queue_t;

typedef struct sc_tsim_result {
	size_t jobs, finished, never_fit, preemptions, cycles;
	sc_tsim_stats_t wait, jct;
	/* Jobs of at least large_gpus GPUs (pods x GPUs): how many finished,
	 * and their queue wait. */
	size_t large_finished;
	sc_tsim_stats_t wait_large;
	/* Compaction: pods moved, and the GPU-seconds of work the moved jobs
	 * lost. */
	size_t moves;
	double lost_gpu_seconds;
	int64_t makespan;
	double util_mean; /* time-weighted, % */
	double busy_mean; /* time-weighted GPU of running jobs, % */
	/* FCFS: jobs left waiting with part of their pods placed when nothing
	 * else could happen (no arrival, nothing running): each waits for GPUs
	 * that others like it hold, for ever. */
	size_t stuck;
	double jain;    /* -1 for FCFS, which has no fair share */
	int total_gpus; /* GPUs present at the start */
	/* Cluster size: GPU-hours paid (nodes count from their request to
	 * their removal: a cloud bills the boot), and the GPUs present, largest
	 * and time-weighted mean over the run. */
	double gpu_hours;
	int gpus_max;
	double gpus_mean;
	int64_t provision_delay;
	size_t nodes_requested, nodes_removed;
	sc_tsim_queue_t *queues;
	size_t nqueues;
	sc_tsim_point_t *series; /* one point per cycle */
	size_t nseries;
	sc_tsim_job_t *job; /* per input job, same order */
	double wall_seconds;
} sc_tsim_result_t;

/* Runs the simulation. Jobs that can never fit (a gang larger than the
 * cluster) are counted in never_fit and left out. Errors: SC_EINVAL with a
 * message (no nodes, a core error), SC_ENOMEM. Free with sc_tsim_result_free. */
int sc_tsim_run(const sc_tjobs_t *jobs, const sc_tsim_config_t *c, sc_tsim_result_t *res, char *msg,
                size_t msgsize);
void sc_tsim_result_free(sc_tsim_result_t *r);

#endif
