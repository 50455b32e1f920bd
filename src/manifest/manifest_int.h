/* Internals of the manifest layer (manifest*.c): the reader that walks a
 * json_t object keeping the current field path for errors, and the decoded
 * objects as they wait to be committed to a set. */
#ifndef STARCLOUD_MANIFEST_INT_H
#define STARCLOUD_MANIFEST_INT_H

#include <jansson.h>
#include <stdbool.h>

#include "base/yamljson.h"
#include "starcloud/arena.h"
#include "starcloud/manifest.h"

#define SC__PATH_MAX 256

/* Where an object came from, and the positions of the fields that name
 * other objects: those are checked only at snapshot time, when every file
 * has been added, and the error must still point at the field. */
typedef struct sc__pos {
	int line, col;
} sc__pos_t;

typedef struct sc__origin {
	const char *file; /* arena copy, or NULL */
	sc__pos_t at;     /* the object */
	sc__pos_t ref[2]; /* job: queue, priorityClass; queue: parentQueue */
} sc__origin_t;

/* A reader walks one object. The path is relative to the object (what the
 * user sees); prefix locates the object inside its document (e.g. "[3]"
 * for the fourth element of a JSON array). */
typedef struct sc__rd {
	sc_arena_t *arena; /* where decoded strings and arrays go */
	sc_manifest_error_t *err;
	const sc_yj_docs_t *docs; /* NULL for an object without a file */
	size_t doc;
	const char *file;
	char prefix[32];
	char path[SC__PATH_MAX];
	size_t plen;
	char object[160];
} sc__rd_t;

/* ---- decoded objects ---- */

typedef struct sc__node {
	sc_node_spec_t spec;
	sc__origin_t o;
} sc__node_t;

typedef struct sc__queue {
	sc_queue_spec_t spec;
	sc__origin_t o;
} sc__queue_t;

typedef struct sc__class {
	sc_prio_class_t spec;
	sc__origin_t o;
} sc__class_t;

typedef struct sc__job {
	sc_job_spec_t spec;
	sc__origin_t o;
} sc__job_t;

typedef struct sc__pool {
	sc_nodepool_t spec;
	sc__origin_t o;
} sc__pool_t;

/* A growable array of one of the structs above. */
typedef struct sc__vec {
	void *items;
	size_t n, cap, size;
} sc__vec_t;

/* The objects of one add, committed together or not at all. */
typedef struct sc__batch {
	sc__vec_t nodes, queues, classes, jobs, pools;
	bool has_config, has_topology;
	sc_config_t config; /* defaults with the SchedulerConfig applied */
	const char *const *levels;
	size_t nlevels;
	sc__origin_t config_o, topology_o;
} sc__batch_t;

int sc__vec_push(sc__vec_t *v, const void *item);
void sc__batch_init(sc__batch_t *b);
/* Frees the batch's arrays (not the arena their objects point into). */
void sc__batch_free(sc__batch_t *b);
/* Decodes one object of any kind into b (manifest.c). */
int sc__decode_object(sc__rd_t *rd, json_t *obj, sc__batch_t *b);

/* ---- reader (manifest_read.c) ----
 * Getters return 1 when the field was present and stored, 0 when it was
 * absent (and not required; *out untouched), or a negative SC_E* code with
 * the error filled at the field's path. */
typedef size_t sc__mark_t;
sc__mark_t sc__rd_push(sc__rd_t *rd, const char *key);
sc__mark_t sc__rd_push_index(sc__rd_t *rd, size_t i);
void sc__rd_pop(sc__rd_t *rd, sc__mark_t m);
int sc__rd_fail(sc__rd_t *rd, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The position of a field below the current path (or of the path itself
 * when sub is NULL). */
sc__pos_t sc__rd_pos(const sc__rd_t *rd, const char *sub);

int sc__rd_fields(sc__rd_t *rd, json_t *obj, const char *const *allowed);
int sc__get_object(sc__rd_t *rd, json_t *obj, const char *key, bool req, json_t **out);
int sc__get_array(sc__rd_t *rd, json_t *obj, const char *key, bool req, json_t **out);
int sc__get_str(sc__rd_t *rd, json_t *obj, const char *key, bool req, const char **out);
int sc__get_name(sc__rd_t *rd, json_t *obj, const char *key, bool req, const char **out);
int sc__get_int(sc__rd_t *rd, json_t *obj, const char *key, bool req, int64_t min, int64_t max,
                int64_t *out);
int sc__get_num(sc__rd_t *rd, json_t *obj, const char *key, bool req, double min, double max,
                double *out);
int sc__get_bool(sc__rd_t *rd, json_t *obj, const char *key, bool req, bool *out);
int sc__get_cpu(sc__rd_t *rd, json_t *obj, const char *key, bool req, unsigned flags, int64_t *out);
int sc__get_mem(sc__rd_t *rd, json_t *obj, const char *key, bool req, unsigned flags, int64_t *out);
int sc__get_dur(sc__rd_t *rd, json_t *obj, const char *key, bool req, int64_t *out);
int sc__get_time(sc__rd_t *rd, json_t *obj, const char *key, bool req, int64_t *out);
int sc__get_enum(sc__rd_t *rd, json_t *obj, const char *key, bool req, const char *const *names,
                 int *out);
int sc__get_labels(sc__rd_t *rd, json_t *obj, const char *key, sc_label_t **out, size_t *n);
int sc__get_strs(sc__rd_t *rd, json_t *obj, const char *key, bool req, const char ***out,
                 size_t *n);
/* A MIG profile name such as "1g.10gb". */
bool sc__mig_profile_ok(const char *s);

/* ---- kinds (manifest_kinds.c, manifest_job.c) ----
 * Each decodes obj (already checked to be an object with apiVersion and
 * kind) into the batch. */
int sc__decode_node(sc__rd_t *rd, json_t *obj, sc__batch_t *b);
int sc__decode_queue(sc__rd_t *rd, json_t *obj, sc__batch_t *b, bool kai);
int sc__decode_class(sc__rd_t *rd, json_t *obj, sc__batch_t *b);
int sc__decode_config(sc__rd_t *rd, json_t *obj, sc__batch_t *b);
int sc__decode_topology(sc__rd_t *rd, json_t *obj, sc__batch_t *b);
int sc__decode_job(sc__rd_t *rd, json_t *obj, sc__batch_t *b);
int sc__decode_deployment(sc__rd_t *rd, json_t *obj, sc__batch_t *b);
/* manifest_autoscale.c */
int sc__decode_nodepool(sc__rd_t *rd, json_t *obj, sc__batch_t *b);
/* spec.autoscaling of a Deployment: 0 when absent, 1 when present (with
 * *min_replicas, the count an offline run schedules), or SC_E*. */
int sc__decode_autoscaling(sc__rd_t *rd, json_t *spec, int64_t *min_replicas);
/* disaggregation.ROLE.autoscaling of ro (role "prefill" or "decode"), the
 * same way: 1 with *min_replicas set, 0 when absent, or an error. */
int sc__decode_role_autoscaling(sc__rd_t *rd, json_t *ro, const char *role, int64_t *min_replicas);
/* A Node's (or a NodePool template's) gpus: {count, model, memory, mig}. */
int sc__decode_node_gpus(sc__rd_t *rd, json_t *spec, sc_node_spec_t *n);
/* metadata: name (required), labels, creationTimestamp and the Kubernetes
 * bookkeeping fields (ignored). Sets rd->object to "<kind> <name>". */
int sc__decode_metadata(sc__rd_t *rd, json_t *obj, const char *kind, const char **name,
                        sc_label_t **labels, size_t *nlabels, int64_t *created);

#endif
