/* libstarcloud scheduler core: snapshot + time in, decisions out.
 *
 * The core is pure: it does no I/O, keeps no globals and reads no clock.
 * A caller (the CLI, the server, the simulator) fills an sc_snapshot_t with
 * plain structs, calls sc_schedule(), and applies the sc_decisions_t it gets.
 *
 * Units used everywhere in this header:
 *   cpu       millicores (int64)
 *   memory    bytes (int64)
 *   gpu       whole devices (int) or a share of one device in milli (1..999)
 *   time      seconds since the Unix epoch (int64)
 *
 * Ownership: every pointer in the input structs is borrowed for the duration
 * of the call; nothing is kept after sc_schedule() returns. Decisions are
 * owned by the caller and released with sc_decisions_free(). */
#ifndef STARCLOUD_CORE_H
#define STARCLOUD_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starcloud/error.h"

typedef struct sc_label {
	const char *key;
	const char *value;
} sc_label_t;

/* ---- nodes ---------------------------------------------------------- */

enum sc_mig_mode {
	SC_MIG_NONE = 0,
	SC_MIG_DYNAMIC, /* the scheduler chooses instances */
	SC_MIG_FIXED,   /* one fixed list of instances per device */
};

/* A fixed MIG layout of one device: profile names such as "3g.20gb". */
typedef struct sc_mig_layout {
	const char *const *profiles;
	size_t nprofiles;
} sc_mig_layout_t;

typedef struct sc_node_spec {
	const char *name;         /* unique, required */
	const sc_label_t *labels; /* topology levels are ordinary labels */
	size_t nlabels;
	int64_t cpu_milli;                 /* allocatable CPU */
	int64_t memory;                    /* allocatable memory, bytes */
	int gpu_count;                     /* devices, indices 0..gpu_count-1 */
	const char *gpu_model;             /* e.g. "A100-80GB"; NULL when no GPU */
	int64_t gpu_memory;                /* per device, bytes */
	int mig_mode;                      /* enum sc_mig_mode */
	const sc_mig_layout_t *mig_layout; /* SC_MIG_FIXED: gpu_count entries */
	bool not_ready;                    /* lease expired etc.: nothing is placed */
	bool unschedulable;                /* cordoned: running pods stay */
} sc_node_spec_t;

/* ---- queues and priority classes ------------------------------------ */

enum sc_resource { SC_RES_GPU = 0, SC_RES_CPU, SC_RES_MEM, SC_RES_COUNT };

/* One resource of a queue, in core units (gpu: devices, may be fractional;
 * cpu: millicores; memory: bytes). quota < 0 means unlimited; limit < 0
 * means unlimited, limit == 0 means nothing above quota (KAI's rule). */
typedef struct sc_queue_res {
	double quota;
	double limit;
	double weight; /* overQuotaWeight, >= 0 */
} sc_queue_res_t;

typedef struct sc_queue_spec {
	const char *name;
	const char *parent; /* NULL for a top-level queue */
	int priority;       /* default 100 */
	sc_queue_res_t res[SC_RES_COUNT];
	int64_t preempt_min_runtime; /* seconds, 0 = none */
	int64_t reclaim_min_runtime;
	int64_t created; /* seconds; ties go to input order */
} sc_queue_spec_t;

typedef struct sc_prio_class {
	const char *name;
	int value;
	int preemptible; /* 1, 0, or -1 = value < 100 */
} sc_prio_class_t;

/* ---- jobs and pods -------------------------------------------------- */

/* Per-pod request. At most one of gpus, gpu_milli, gpu_memory, mig is set. */
typedef struct sc_request {
	int64_t cpu_milli;
	int64_t memory;
	int gpus;           /* whole devices */
	int gpu_milli;      /* share of one device, 1..999 */
	int64_t gpu_memory; /* share of one device by memory, bytes */
	const char *mig;    /* MIG profile, e.g. "1g.10gb" */
} sc_request_t;

typedef struct sc_task_spec {
	const char *name;
	int replicas;
	sc_request_t req;
	const char *const *gpu_models; /* allowed models; none = any */
	size_t ngpu_models;
	const sc_label_t *selector; /* node labels that must match */
	size_t nselector;
} sc_task_spec_t;

enum sc_pod_phase {
	SC_POD_PENDING = 0,
	SC_POD_RUNNING,   /* bound or running: holds its resources */
	SC_POD_RELEASING, /* being evicted/terminated: still holds them */
	SC_POD_SUCCEEDED,
	SC_POD_FAILED,
	/* Bound onto resources still being released, waiting for them (KAI's
	 * Pipelined): holds its resources like a running pod; a share placed
	 * on its device is pipelined too. */
	SC_POD_PIPELINED,
};

/* The state of one existing pod of a job. Pods of a job that are not listed
 * are pending. */
typedef struct sc_pod_status {
	const char *name; /* "<job>-<task>-<index>" */
	int phase;        /* enum sc_pod_phase */
	const char *node;
	const int *gpus; /* device indices held (whole or shared) */
	size_t ngpus;
	int gpu_milli;          /* for a share pod */
	int64_t gpu_memory;     /* for a memory share pod */
	int mig_gpu, mig_start; /* for a MIG pod: device and start slot */
	const char *mig_profile;
	int64_t started_at; /* seconds, 0 = unknown */
	/* When compaction last moved the pod here (seconds, 0 = never): the
	 * action's cooldown and its moves-per-hour bound read it. */
	int64_t moved_at;
} sc_pod_status_t;

enum sc_placement_policy {
	SC_PLACE_DEFAULT = 0, /* the cluster's setting */
	SC_PLACE_BINPACK,
	SC_PLACE_SPREAD,
};

typedef struct sc_job_spec {
	const char *name;
	const char *queue;          /* a leaf queue */
	const char *priority_class; /* NULL = "normal" */
	int preemptible;            /* 1, 0, or -1 = from the class */
	int min_member;             /* 0 = every replica of every task */
	int64_t created;
	int placement;             /* enum sc_placement_policy */
	int spread_factor;         /* replicas over at least N nodes; 0 = default */
	bool serving;              /* pods of a Deployment (default spread 2) */
	const char *topo_required; /* a topology level (label key) or NULL */
	const char *topo_preferred;
	int64_t expected_runtime; /* seconds, 0 = unknown */
	int64_t staleness_grace;  /* seconds, < 0 = default (60) */
	int64_t stale_since;      /* 0 = not stale */
	const sc_task_spec_t *tasks;
	size_t ntasks;
	const sc_pod_status_t *pods;
	size_t npods;
} sc_job_spec_t;

/* ---- configuration -------------------------------------------------- */

enum sc_action {
	SC_ACT_ALLOCATE = 0,
	SC_ACT_CONSOLIDATE,
	SC_ACT_RECLAIM,
	SC_ACT_PREEMPT,
	SC_ACT_STALE_GANG,
	SC_ACT_COMPACT, /* beyond KAI: empty lightly used nodes for big work */
	SC_ACT_COUNT,
};

/* How reclaim and preempt choose victims (SchedulerConfig victims.search). */
enum sc_victim_search {
	SC_VICTIMS_MINIMAL = 0, /* cheapest set: exact on small cases, pruned on large */
	SC_VICTIMS_ORDERED,     /* KAI's: accumulate in victim order, first set that works */
};

/* Compaction (SchedulerConfig compaction, beyond KAI): nodes whose GPUs
 * are allocated below pack_threshold are emptied onto fuller nodes when the
 * whole GPUs so freed serve waiting work (or target_gpus) and are worth
 * more than the run time the moves lose. */
typedef struct sc_compaction {
	bool enabled;             /* true */
	int max_moves_cycle;      /* pods moved per cycle, 8 */
	int max_moves_hour;       /* pods moved in any hour (by moved_at), 24 */
	int64_t min_runtime;      /* seconds a pod runs before it may move, 600 */
	int64_t cooldown;         /* seconds before a moved pod moves again, 3600 */
	int64_t grace_period;     /* seconds a moved pod has to checkpoint, 30 */
	int64_t checkpoint_every; /* run time lost by a move is at most this, 1800 */
	int64_t horizon;          /* seconds a freed GPU is worth, 3600 */
	int target_gpus;          /* keep room for a job this big, 0 = waiting work only */
} sc_compaction_t;

typedef struct sc_config {
	int actions[SC_ACT_COUNT + 1]; /* run in this order */
	size_t nactions;
	int gpu_placement; /* SC_PLACE_BINPACK or SC_PLACE_SPREAD */
	int cpu_placement;
	int device_placement;               /* binpack = pack shares, spread = spread */
	double pack_threshold;              /* 0.7 */
	int serving_spread;                 /* 2 */
	double reclaim_tolerance;           /* 0.2 */
	double preempt_util_threshold;      /* 0.8 */
	int consolidation_max;              /* 16 */
	int64_t reservation_after;          /* seconds, 1800; 0 = no reservations */
	const char *const *topology_levels; /* widest first */
	size_t ntopology_levels;
	int victim_search; /* enum sc_victim_search, SC_VICTIMS_MINIMAL */
	/* KAI's allowConsolidatingReclaim: victims that reclaim places again
	 * elsewhere do not count against the victim queues' shares (false). */
	bool reclaim_consolidating;
	sc_compaction_t compaction;
} sc_config_t;

/* Fills c with the documented defaults (all five actions, binpack, ...). */
void sc_config_default(sc_config_t *c);
/* Action names as in manifests ("allocate", "consolidation", ...). */
const char *sc_action_name(int action);
/* Returns the action for a name, or -1. */
int sc_action_parse(const char *name);

/* ---- snapshot ------------------------------------------------------- */

typedef struct sc_snapshot {
	const sc_node_spec_t *nodes;
	size_t nnodes;
	const sc_queue_spec_t *queues;
	size_t nqueues;
	const sc_prio_class_t *classes; /* added to the built-in defaults */
	size_t nclasses;
	const sc_job_spec_t *jobs;
	size_t njobs;
	sc_config_t config;
	int64_t now;
} sc_snapshot_t;

/* ---- decisions ------------------------------------------------------ */

typedef struct sc_binding {
	size_t job; /* index into snapshot jobs */
	const char *pod;
	const char *node;
	int *gpus; /* device indices */
	size_t ngpus;
	int gpu_milli;          /* share pods: milli of the device */
	int64_t gpu_memory;     /* memory share pods: bytes */
	int mig_gpu, mig_start; /* MIG pods; mig_profile != NULL */
	const char *mig_profile;
	bool pipelined; /* onto resources still being released */
} sc_binding_t;

typedef struct sc_eviction {
	size_t job;
	const char *pod;
	const char *node;
	int action;     /* enum sc_action */
	const char *by; /* job that needed the room, or NULL */
	const char *reason;
	const char *to; /* consolidation: the pod's new node */
	/* Seconds the pod has to stop (SIGTERM first, so it may checkpoint);
	 * 0 = the agent's default. Compaction sets it. */
	int64_t grace_period;
} sc_eviction_t;

typedef struct sc_pending {
	size_t job;
	const char *reason;
	/* Nodes reserved for the job because it waited too long (see
	 * SchedulerConfig reservations.after), and when it is expected to
	 * start there: seconds, or -1 when running jobs give no runtime. */
	const char **reserved_nodes;
	size_t nreserved;
	int64_t expected_start;
} sc_pending_t;

typedef struct sc_queue_report {
	const char *name;
	const char *parent;
	bool leaf;
	double fair_share[SC_RES_COUNT]; /* core units */
	double allocated[SC_RES_COUNT];
	double requested[SC_RES_COUNT];
	double quota[SC_RES_COUNT];
	double limit[SC_RES_COUNT]; /* < 0 = unlimited */
} sc_queue_report_t;

typedef struct sc_decisions {
	sc_binding_t *bindings;
	size_t nbindings;
	sc_eviction_t *evictions;
	size_t nevictions;
	sc_pending_t *pending;
	size_t npending;
	sc_queue_report_t *queues;
	size_t nqueues;
	/* Per-cycle statistics, for benchmarks and /metrics. */
	size_t placements_tried;
	size_t jobs_considered;
	size_t signature_skips;
} sc_decisions_t;

/* Checks a snapshot for dangling references (unknown queue, parent, node,
 * priority class, topology level) and out-of-range values. On failure
 * returns SC_EINVAL and writes a message naming the object and field into
 * msg (msgsize bytes). */
int sc_snapshot_validate(const sc_snapshot_t *s, char *msg, size_t msgsize);

/* A scheduler keeps its scratch memory from one cycle to the next, so a
 * daemon that schedules every second does not pay for page faults each
 * time. It holds no scheduling state: every cycle starts from its snapshot.
 * Not thread-safe; use one per thread. */
typedef struct sc_scheduler sc_scheduler_t;

/* Returns a new scheduler, or NULL when out of memory. */
sc_scheduler_t *sc_scheduler_new(void);
/* Frees it; accepts NULL. Decisions it returned stay valid. */
void sc_scheduler_free(sc_scheduler_t *sch);
/* Runs one cycle, as sc_schedule(). */
int sc_scheduler_run(sc_scheduler_t *sch, const sc_snapshot_t *s, sc_decisions_t **out, char *msg,
                     size_t msgsize);

/* Test hook: the n-th block request of the scheduler's scratch arena from
 * now fails (0 = never), so a test can fail allocations one by one. */
void sc_scheduler_fail_after(sc_scheduler_t *sch, long n);

/* Runs one scheduling cycle (with a scheduler made for the call). On success *out holds the
 * decisions (free with sc_decisions_free). Errors: SC_EINVAL for an invalid snapshot (message in
 * msg), SC_ENOMEM. The result depends only on the snapshot. */
int sc_schedule(const sc_snapshot_t *s, sc_decisions_t **out, char *msg, size_t msgsize);

/* Frees decisions; accepts NULL. */
void sc_decisions_free(sc_decisions_t *d);

#endif
