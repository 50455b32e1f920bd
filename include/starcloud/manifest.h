/* Manifests: Kubernetes-style objects (apiVersion, kind, metadata, spec)
 * decoded and validated into the core's input structs.
 *
 * A set collects objects from files or single JSON objects and turns them
 * into an sc_snapshot_t. Decoding is pure (no file I/O): the caller reads
 * the file and passes its text. Each add is all-or-nothing: when one object
 * of a text is bad, none of that text's objects are added, and the error
 * names the file, line, column, object and field path, e.g.
 *   jobs.yaml:14:7: Job llama: spec.tasks[0].resources.gpu: expected a
 *   non-negative whole number
 *
 * Kinds: Node, Queue (starcloud.dev/v1 and scheduling.run.ai/v2), PriorityClass,
 * Job, Deployment (decoded into a serving job), SchedulerConfig, Topology,
 * NodePool (not part of a snapshot: sc_manifest_nodepools).
 * Field rules and units are in docs/MANIFESTS.md and interface.md.
 *
 * Ownership: the set owns every object and string it decodes; pointers in a
 * snapshot filled by sc_manifest_snapshot() are borrowed from the set and stay
 * valid until the next add or sc_manifest_set_free(). */
#ifndef STARCLOUD_MANIFEST_H
#define STARCLOUD_MANIFEST_H

#include <jansson.h>
#include <stddef.h>

#include "starcloud/autoscale.h"
#include "starcloud/core.h"

typedef struct sc_manifest_set sc_manifest_set_t;

/* Where and why an add or a snapshot failed. Every field is "" / 0 when
 * unknown (e.g. no file for an object given as JSON). */
typedef struct sc_manifest_error {
	int code; /* the negative SC_E* code returned */
	char file[256];
	int line, col;    /* 1-based */
	char object[192]; /* "Job llama" */
	char path[256];   /* "spec.tasks[0].resources.gpu" */
	char msg[512];    /* what was expected */
} sc_manifest_error_t;

/* Writes "file:line:col: object: path: msg" (parts that are unknown are
 * left out) into buf; returns buf. */
char *sc_manifest_error_format(const sc_manifest_error_t *e, char *buf, size_t size);

/* Returns NULL when out of memory. */
sc_manifest_set_t *sc_manifest_set_new(void);
/* Frees the set and everything it owns; accepts NULL. */
void sc_manifest_set_free(sc_manifest_set_t *set);

/* Parses YAML or JSON text (see base/yamljson.h; the text is borrowed) and
 * adds every object in it: documents separated by `---`, or a JSON/YAML
 * array of objects. filename (borrowed, copied) is used in errors. An empty
 * text adds nothing and succeeds. Returns the number of objects added, or
 * SC_EPARSE (malformed text), SC_ETOOBIG (input limits), SC_EINVAL (an
 * invalid object), SC_EEXISTS (a duplicate name), SC_ENOMEM; err is filled
 * on failure and may be NULL. */
int sc_manifest_add_text(sc_manifest_set_t *set, const char *filename, const char *text, size_t len,
                         sc_manifest_error_t *err);

/* Adds one object (borrowed; nothing is kept after the call), as the server
 * does with an API body. Same errors as sc_manifest_add_text, without a
 * position. Returns 1 on success. */
int sc_manifest_add_json(sc_manifest_set_t *set, json_t *obj, sc_manifest_error_t *err);

/* Adds every object decoded in src to s without decoding it again, so a
 * caller can decode each object once (into a set of its own) and assemble
 * many snapshots from the results, as the server's scheduling loop does
 * with objects that did not change. The decoded objects are copied; the
 * strings and arrays they point to are borrowed from src, which must not
 * be freed or added to before s is freed. Name clashes are refused as in
 * sc_manifest_add_json (SC_EEXISTS, s unchanged). Returns the number of
 * objects added, or SC_EEXISTS or SC_ENOMEM. */
int sc_manifest_add_set(sc_manifest_set_t *s, const sc_manifest_set_t *src,
                        sc_manifest_error_t *err);

/* Fills *out from the set: nodes, queues, classes and jobs in input order
 * (their created times are metadata.creationTimestamp, or 0 so that
 * document order decides), config = sc_config_default() with the
 * SchedulerConfig and Topology objects applied, and now. Checks references
 * that may cross files (a job's queue exists and is a leaf, a queue's parent
 * exists and forms no cycle, a job's priority class exists) and reports them
 * at the field that names them. Returns 0, SC_EINVAL or SC_ENOTFOUND. */
int sc_manifest_snapshot(sc_manifest_set_t *set, int64_t now, sc_snapshot_t *out,
                         sc_manifest_error_t *err);

/* ---- NodePool (docs/AUTOSCALING.md) ---- */
enum sc_pool_provider { SC_PROVIDER_DEV = 0, SC_PROVIDER_EXEC };
#define SC_POOL_SCALE_DOWN_AFTER 600 /* seconds, when not given */
#define SC_POOL_JOIN_TIMEOUT_EXEC 600
#define SC_POOL_JOIN_TIMEOUT_DEV 120
#define SC_POOL_MAX_ARGS 64

typedef struct sc_nodepool {
	/* The core's part: name, template (labels include SC_POOL_LABEL),
	 * minNodes (raised to cover minGPUs), maxNodes and maxGPUs (-1 when
	 * not given), cost; in_flight and removing are 0. */
	sc_pool_t pool;
	int64_t scale_down_after; /* seconds */
	int64_t join_timeout;     /* seconds */
	int provider;             /* enum sc_pool_provider */
	/* exec: the commands run to create and to delete one node (argv). */
	const char *const *create;
	size_t ncreate;
	const char *const *remove;
	size_t nremove;
	int64_t created;
} sc_nodepool_t;

/* The set's NodePools in input order; the array is the set's, valid until
 * the next call, add or free. Returns the count. */
size_t sc_manifest_nodepools(sc_manifest_set_t *set, const sc_nodepool_t **out);

/* How a pending job's wait for pool nodes is written, in pending reasons,
 * explain and every report: "waiting for 3 nodes of pool h100 (requested
 * 40 s ago)"; age < 0 (nothing requested yet, offline) says "(to be
 * requested)". Returns buf. */
char *sc_pool_wait_text(char *buf, size_t size, const char *pool, int nodes, int64_t age);

/* ---- Deployment.spec.autoscaling (docs/AUTOSCALING.md) ---- */
enum sc_autoscale_target {
	SC_AS_NONE = 0,
	SC_AS_INFLIGHT,
	SC_AS_QUEUE,
	SC_AS_TTFT,
	SC_AS_PROMPT_TOKENS, /* prefill: prompt tokens waiting or in prefill, per replica */
	SC_AS_TPS            /* decode: generated tokens per second, per replica */
};
#define SC_AS_MAX_REPLICAS 10000
#define SC_AS_STABILIZATION 60 /* seconds before a scale-down, when not given */

typedef struct sc_autoscaling {
	int target;            /* enum sc_autoscale_target; NONE: no autoscaling */
	int min_replicas;      /* 0 parks the deployment when idle */
	int max_replicas;      /* >= max(1, min) */
	double value;          /* per replica (requests, tokens, tokens/s), or seconds (TTFT p95) */
	int64_t stabilization; /* seconds a lower count must hold before it applies */
} sc_autoscaling_t;

/* Reads spec.autoscaling of a stored Deployment back (spec borrowed, may
 * be NULL) with the decoder's defaults; target NONE when absent or when
 * the decoder would refuse it. */
void sc_deploy_autoscaling(json_t *spec, sc_autoscaling_t *out);
/* The same for one role of a disaggregated Deployment
 * (spec.disaggregation.ROLE.autoscaling, role "prefill" or "decode"); role
 * "both" (or NULL) reads spec.autoscaling. */
void sc_deploy_role_autoscaling(json_t *spec, const char *role, sc_autoscaling_t *out);

/* ---- one object, decoded on its own ----
 *
 * For a caller that keeps many objects and changes them one at a time (the
 * server's scheduling loop): each object is decoded and validated once, on
 * its own, into one small block that holds its struct and every string and
 * array the struct points to, and the caller assembles the core's snapshot
 * from the structs itself. Nothing here checks references between objects
 * (a job's queue, a queue's parent, a priority class): that is the
 * caller's part, as sc_manifest_snapshot's is for a set. */
typedef struct sc_manifest_obj sc_manifest_obj_t;

/* Decodes obj (borrowed; nothing is kept) as sc_manifest_add_json would.
 * Returns 0 and *out (owned by the caller), or SC_EINVAL (err filled) or
 * SC_ENOMEM. A SchedulerConfig or Topology decodes to an object with no
 * struct below (all four getters return NULL). */
int sc_manifest_decode(json_t *obj, sc_manifest_obj_t **out, sc_manifest_error_t *err);
/* The decoded struct of its kind, or NULL when o is another kind;
 * borrowed from o. A Deployment decodes to a serving job. */
const sc_node_spec_t *sc_manifest_obj_node(const sc_manifest_obj_t *o);
const sc_queue_spec_t *sc_manifest_obj_queue(const sc_manifest_obj_t *o);
const sc_prio_class_t *sc_manifest_obj_class(const sc_manifest_obj_t *o);
const sc_job_spec_t *sc_manifest_obj_job(const sc_manifest_obj_t *o);
/* Frees o and everything its struct points to; accepts NULL. */
void sc_manifest_obj_free(sc_manifest_obj_t *o);
/* 1 when name is one of the built-in priority classes a job may name
 * without a PriorityClass object ("normal", "train", ...). */
int sc_manifest_builtin_class(const char *name);

/* Object counts, for tests and messages. */
size_t sc_manifest_count(const sc_manifest_set_t *set, const char *kind);

/* A pending job's reservation as {"nodes": [...], "expectedStart": RFC 3339
 * or null}; NULL when out of memory. The caller owns the result. */
json_t *sc_reservation_json(const sc_pending_t *p);

/* Returns the `schedule -o json` object for decisions d made on snapshot s
 * (both borrowed), as interface.md specifies: bindings, evictions, pending
 * and queues (gpu in devices, cpu in cores, memory in bytes). The caller owns
 * the result. Returns NULL when out of memory. */
json_t *sc_decisions_to_json(const sc_snapshot_t *s, const sc_decisions_t *d);

/* ---- run-time settings of a Job or Deployment ----
 *
 * What the server and the node agents act on while a job runs. The decoder
 * validates these fields when an object is stored (with the limits below);
 * sc_job_runtime reads them back from the stored spec, with the decoder's
 * defaults, so the defaults and limits are written once. */
enum { SC_RESTART_ALWAYS = 0, SC_RESTART_ONFAILURE, SC_RESTART_NEVER };
#define SC_BACKOFF_LIMIT_DEFAULT 6
#define SC_BACKOFF_LIMIT_MAX 1000
#define SC_GRACE_SECONDS_MAX 3600

typedef struct sc_job_runtime {
	int restart_policy; /* SC_RESTART_*; when absent: Always for a Deployment
	                       (serving restarts), OnFailure for a Job */
	int gang_restart;   /* gangPolicy: RestartGang (1) or FailJob (0, default) */
	int backoff_limit;  /* restarts before the pod (or gang) fails the job */
	int grace_seconds;  /* terminationGracePeriodSeconds; -1 when absent */
} sc_job_runtime_t;

/* Reads the settings of a stored object of kind ("Job" or "Deployment")
 * from its spec (borrowed; may be NULL); a value the decoder would refuse
 * reads as the default. */
void sc_job_runtime(const char *kind, json_t *spec, sc_job_runtime_t *out);

/* The eviction action names used in that output ("reclaim", "preempt",
 * "consolidate", "stale-gang"); "allocate" for SC_ACT_ALLOCATE. */
const char *sc_eviction_action_name(int action);

#endif
