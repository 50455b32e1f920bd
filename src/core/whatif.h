/* The world after a cycle's decisions, as a snapshot of its own that a
 * what-if may change (extra nodes, nodes gone, pods moved) and schedule
 * again through the public entry point sc_scheduler_run().
 *
 * The autoscaler's what-ifs (scaleup.c, scaledown.c) build on it. It uses
 * only the public snapshot and decision structs, so it does not depend on
 * how the actions work inside. Everything lives in w->arena; queues,
 * classes, tasks and strings are borrowed from the original snapshot and
 * decisions, which must outlive w. */
#ifndef SC_CORE_WHATIF_H
#define SC_CORE_WHATIF_H

#include <stdbool.h>

#include "base/strmap.h"
#include "starcloud/arena.h"
#include "starcloud/core.h"

typedef struct sc_whatif {
	sc_arena_t *arena;
	sc_snapshot_t snap;    /* nodes and jobs point at the arrays below */
	sc_node_spec_t *nodes; /* the snapshot's, then room for extra ones */
	size_t nnodes, capnodes;
	sc_job_spec_t *jobs;    /* copies of the snapshot's */
	sc_pod_status_t **pods; /* per job: its statuses (arena) */
	size_t *podcap;         /* per job: room in pods[j] */
	sc_strmap_t node_index; /* node name -> index, over the snapshot's nodes */
	size_t unplaced;        /* pods neither running, releasing nor done */
} sc_whatif_t;

/* Builds w from s with d applied: evicted pods are gone, bound pods run on
 * their nodes (a consolidation move ends on its new node); with
 * drop_releasing, pods that were releasing are gone too (what a cycle a
 * moment later sees). Room is made for extra_nodes more nodes. Returns 0
 * or SC_ENOMEM; free with sc__whatif_free even on failure. */
int sc__whatif_build(sc_whatif_t *w, const sc_snapshot_t *s, const sc_decisions_t *d,
                     size_t extra_nodes, bool drop_releasing);
void sc__whatif_free(sc_whatif_t *w);

/* Adds a node (spec copied, strings borrowed); returns its index or -1
 * when out of memory. */
long sc__whatif_add_node(sc_whatif_t *w, const sc_node_spec_t *n);

/* Marks every pod of job j that is not running, releasing or done as done
 * (Succeeded), so that allocate leaves the job as it is. 0 or SC_ENOMEM. */
int sc__whatif_freeze(sc_whatif_t *w, size_t j);

/* Sets pod status k of job j to run on node with the binding's devices
 * (strings borrowed), or removes it when b is NULL. */
int sc__whatif_set_pod(sc_whatif_t *w, size_t j, const char *pod, const sc_binding_t *b,
                       int64_t now);

/* Runs the allocate action alone on w's snapshot (reservations off). */
int sc__whatif_allocate(sc_whatif_t *w, sc_decisions_t **out, char *msg, size_t msgsize);

/* True when node n carries label key=value. */
bool sc__node_has_label(const sc_node_spec_t *n, const char *key, const char *value);

#endif
