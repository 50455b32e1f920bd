/* The objects the watches keep current, and what this scheduler did that
 * the watches have not shown yet.
 *
 * Keys: pods and PodGroups "namespace/name", the others "name". The cache
 * owns every object in it. A relist (after a 410 Gone, or at start) brackets
 * the listed objects between sc_kcache_begin_list and sc_kcache_end_list;
 * the end removes every object of that kind the list did not contain (it
 * was deleted while nobody watched). */
#ifndef SC_K8S_KCACHE_H
#define SC_K8S_KCACHE_H

#include <stdbool.h>

#include <jansson.h>

#include "k8s/kmap.h"
#include "k8s/kobj.h"

enum sc_kkind { SC_KK_POD = 0, SC_KK_NODE, SC_KK_QUEUE, SC_KK_GROUP, SC_KK_CLASS, SC_KK_COUNT };

typedef struct sc_kcache {
	sc_kmap_t pods, nodes, queues, groups, classes;
	sc_kmap_t seen[SC_KK_COUNT]; /* keys listed so far during a relist */
	bool listing[SC_KK_COUNT];
	unsigned long changes; /* bumped on every change */
} sc_kcache_t;

void sc_kcache_init(sc_kcache_t *c);
/* Frees every object; accepts NULL. */
void sc_kcache_free(sc_kcache_t *c);

/* Stores (or, with deleted, removes) obj of a kind, from a list or a watch
 * event. Returns 1 when stored or removed, 2 when stored but only the
 * status of a PodGroup or Queue changed (nothing to schedule again for), 0
 * when there was nothing to remove, SC_EPARSE when obj is not an object of
 * that kind. */
int sc_kcache_apply(sc_kcache_t *c, int kind, bool deleted, json_t *obj);

void sc_kcache_begin_list(sc_kcache_t *c, int kind);
/* Returns how many objects were removed. */
size_t sc_kcache_end_list(sc_kcache_t *c, int kind);

/* ---- local state -------------------------------------------------------- */

enum sc_klocal_kind {
	SC_KL_BINDING = 1, /* binding sent or done: the pod holds its node */
	SC_KL_NOMINATED,   /* pipelined: waits for the node's victims to go */
	SC_KL_EVICTING,    /* eviction sent: the pod is Releasing */
};

typedef struct sc_klocal {
	char *key;  /* pod key; owned */
	char *uid;  /* the pod's uid when decided; owned */
	int kind;   /* enum sc_klocal_kind */
	char *node; /* BINDING, NOMINATED; owned */
	int gpus[SC_K8S_MAX_GPUS];
	int ngpus;
	int share_milli;
	double since; /* monotonic seconds */
	bool acked;   /* the API server accepted the request */
} sc_klocal_t;

void sc_klocal_free(sc_klocal_t *l);

#endif
