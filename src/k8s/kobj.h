/* Kubernetes objects as the scheduler keeps them: Pods, Nodes, KAI Queues
 * and PodGroups, PriorityClasses, decoded from the API's JSON into compact
 * structs (a cluster of 10,000 pods would otherwise keep ~30 MB of JSON).
 *
 * What is read (docs/KUBERNETES.md lists it for users):
 *   Pod       metadata.{namespace,name,uid,creationTimestamp,deletionTimestamp,
 *             labels,annotations}, spec.{nodeName,schedulerName,priority,
 *             priorityClassName,nodeSelector,tolerations,affinity.nodeAffinity,
 *             containers/initContainers[].resources,overhead},
 *             status.{phase,startTime,conditions[PodScheduled]}
 *             KAI: label kai.scheduler/queue (or runai/queue), annotation or
 *             label pod-group-name, annotations gpu-fraction and gpu-memory
 *             (MiB); ours: starcloud.dev/gpus and starcloud.dev/gpu-share,
 *             written at binding time.
 *   Node      labels (nvidia.com/gpu.product = model, nvidia.com/gpu.memory =
 *             MiB per device), spec.{unschedulable,taints},
 *             status.{allocatable,conditions[Ready]}
 *   Queue     scheduling.run.ai/v2, decoded by the manifest layer exactly as
 *             `starcloud schedule` decodes it
 *   PodGroup  scheduling.run.ai/v2alpha2 spec.{minMember,queue,
 *             priorityClassName,preemptibility,topologyConstraint}
 *   PriorityClass scheduling.k8s.io/v1 value, globalDefault
 *
 * A value the scheduler cannot use (a malformed annotation, an unsupported
 * affinity) never fails the decode: the object is kept with `bad` set to a
 * message naming the field, and its pods stay pending with that message.
 * Decoding fails only when the JSON is not a Kubernetes object at all.
 *
 * Ownership: every string and array in a decoded object is owned by it and
 * freed by the matching *_free function (which accepts NULL). */
#ifndef SC_K8S_KOBJ_H
#define SC_K8S_KOBJ_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "starcloud/cluster.h"
#include "starcloud/core.h"
#include "starcloud/manifest.h"

/* Annotations written on a pod at binding (through the Binding object):
 * the device indices and, for a share, its milli of the device. They let a
 * restarted scheduler, or its successor, see which device a share is on. */
#define SC_K8S_ANN_GPUS "starcloud.dev/gpus"
#define SC_K8S_ANN_SHARE "starcloud.dev/gpu-share"
#define SC_K8S_MAX_GPUS SC_MAX_GPUS /* devices per node and per pod (core limit) */

enum sc_kphase { SC_KP_PENDING = 0, SC_KP_RUNNING, SC_KP_SUCCEEDED, SC_KP_FAILED, SC_KP_UNKNOWN };

typedef struct sc_ktoleration {
	char *key; /* NULL with Exists = every key */
	char *value;
	char *effect; /* NULL = every effect */
	bool exists;  /* operator Exists (else Equal) */
} sc_ktoleration_t;

typedef struct sc_kpod {
	char *key;             /* "namespace/name" */
	const char *ns, *name; /* point into nsname */
	char *nsname;          /* "namespace\0name" */
	char *uid;
	char *node;      /* spec.nodeName, NULL when unbound */
	char *scheduler; /* spec.schedulerName */
	int phase;       /* enum sc_kphase */
	bool deleting;   /* metadata.deletionTimestamp set */
	int64_t created, started;
	sc_request_t req;     /* mig is never set */
	char *group;          /* pod-group-name, or NULL */
	char *queue;          /* queue label, or NULL */
	char *prio_class;     /* spec.priorityClassName, or NULL */
	int priority;         /* spec.priority (0 when absent) */
	sc_label_t *selector; /* nodeSelector + single-value In affinity */
	size_t nselector;
	sc_ktoleration_t *tols;
	size_t ntols;
	int gpus[SC_K8S_MAX_GPUS]; /* SC_K8S_ANN_GPUS, when ngpus > 0 */
	int ngpus;
	int share_milli;   /* SC_K8S_ANN_SHARE */
	bool cond_unsched; /* PodScheduled=False reason Unschedulable */
	char *cond_msg;    /* its message */
	char *bad;         /* why we cannot schedule it, or NULL */
} sc_kpod_t;

typedef struct sc_ktaint {
	char *key;
	char *value;
	char *effect; /* NoSchedule or NoExecute (PreferNoSchedule is dropped) */
} sc_ktaint_t;

typedef struct sc_knode {
	char *key; /* name */
	sc_label_t *labels;
	size_t nlabels;
	int64_t cpu_milli, memory;
	int gpus;
	char *gpu_model;    /* label nvidia.com/gpu.product, or NULL */
	int64_t gpu_memory; /* label nvidia.com/gpu.memory (MiB) in bytes */
	bool ready, unschedulable;
	sc_ktaint_t *taints;
	size_t ntaints;
} sc_knode_t;

/* What PodGroups and Queues carry besides their spec, for writing their
 * status back (kstatus.c): the uid and resourceVersion (a status patch is
 * conditional on it) and the status as last seen (a new reference). */
typedef struct sc_kmeta {
	char *uid, *rv;
	json_t *status;    /* NULL when absent */
	char *spec_digest; /* spec (and labels) as compact sorted JSON */
} sc_kmeta_t;

typedef struct sc_kgroup {
	char *key; /* "namespace/name" */
	char *name;
	sc_kmeta_t meta;
	int min_member;
	char *queue;
	char *prio_class;
	int preemptible; /* 1, 0, -1 = from the priority */
	char *topo_required, *topo_preferred;
	int64_t created;
	char *bad;
} sc_kgroup_t;

typedef struct sc_kqueue {
	char *key;              /* name */
	sc_manifest_set_t *set; /* the decoded queue (NULL when bad) */
	sc_queue_spec_t spec;   /* borrowed from set (parent: from this) */
	char *parent;           /* spec.parentQueue */
	char *bad;              /* "spec.resources.gpu.quota: ..." */
	sc_kmeta_t meta;
} sc_kqueue_t;

typedef struct sc_kclass {
	char *key; /* name */
	int value;
	bool global_default;
} sc_kclass_t;

/* Each decoder returns NULL when obj is not an object with metadata.name
 * (and, for pods and groups, metadata.namespace), or when out of memory. */
sc_kpod_t *sc_kpod_decode(json_t *obj);
sc_knode_t *sc_knode_decode(json_t *obj);
sc_kgroup_t *sc_kgroup_decode(json_t *obj);
sc_kqueue_t *sc_kqueue_decode(json_t *obj);
sc_kclass_t *sc_kclass_decode(json_t *obj);

void sc_kpod_free(sc_kpod_t *p);
void sc_knode_free(sc_knode_t *n);
void sc_kgroup_free(sc_kgroup_t *g);
void sc_kqueue_free(sc_kqueue_t *q);
void sc_kclass_free(sc_kclass_t *c);

/* Do a and b differ only in status and bookkeeping (what the scheduler
 * writes back), so that nothing it decides from changed? */
bool sc_kmeta_same_spec(const sc_kmeta_t *a, const sc_kmeta_t *b);

/* Does pod p tolerate taint t (Kubernetes' rule)? */
bool sc_ktoleration_matches(const sc_kpod_t *p, const sc_ktaint_t *t);

#endif
