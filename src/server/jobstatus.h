/* The stored status of a Job or Deployment, read and written in one place
 * (issue 21: the layout was spelled out with json_object_get in every file
 * that looked at it).
 *
 * status: phase (Pending, Running, Succeeded, Failed, Evicted), reason,
 * conditions, staleSince, and pods[], one entry per pod that exists:
 *   name        "<job>-<task>-<index>"
 *   phase       Running (bound, started or starting), Releasing (being
 *               stopped: still holds its devices), Succeeded, Failed,
 *               Pipelined (bound onto devices still being released)
 *   node, gpus, gpuShare, gpuMemory, mig    where it runs, what it holds
 *   startedAt, generation (the revision its binding was decided on: the
 *   agent's fencing), movedAt (a compaction move), port (a Deployment's),
 *   from {node, seen} (a move: the node it leaves, which must stop it
 *   first, and how many heartbeats of it the server had taken then)
 *                                        written by the scheduling loop
 *   ready, restarts, exitCode, message   reported by the node's agent
 * The scheduling loop writes bindings and evictions (sched_plan.c), the
 * agent API what agents report (agent_api.c), the deployment controller
 * the pods it retires (deploy_ctl.c); every reader decodes an entry with
 * sc__jobst_pod.
 *
 * All pointers returned are borrowed from the object passed in and live as
 * long as it does unchanged. */
#ifndef SC_SERVER_JOBSTATUS_H
#define SC_SERVER_JOBSTATUS_H

#include <stdbool.h>

#include <jansson.h>

enum sc_podphase {
	SC_PP_OTHER = 0, /* absent, or a text this server does not write */
	SC_PP_RUNNING,
	SC_PP_RELEASING,
	SC_PP_SUCCEEDED,
	SC_PP_FAILED,
	/* Bound onto devices still being released, waiting for them (a
	 * compaction move's pod): holds them like a running pod. */
	SC_PP_PIPELINED,
};

/* One entry of status.pods, decoded. */
typedef struct sc_jobst_pod {
	const char *name;       /* "" when absent */
	int phase;              /* enum sc_podphase */
	const char *node;       /* "" when not bound */
	const char *started_at; /* "" when unknown */
	json_t *generation;     /* NULL for bindings older than generations */
	bool ready;             /* the agent reported it ready */
	json_int_t port;        /* a Deployment pod's port; 0 when none */
} sc_jobst_pod_t;

/* status.pods of a stored Job or Deployment, or NULL. */
json_t *sc__jobst_pods(json_t *obj);
/* status.phase, or "" before the first cycle wrote one. */
const char *sc__jobst_phase(json_t *obj);

/* Decodes entry e; SC_EINVAL (and *out zeroed, its strings "") when e is
 * not an object. */
int sc__jobst_pod(json_t *e, sc_jobst_pod_t *out);
/* The entry of pods named name (*at: its index, may be NULL), or NULL. */
json_t *sc__jobst_find(json_t *pods, const char *name, size_t *at);
/* The pod holds its devices (Running, Releasing or Pipelined). */
bool sc__jobst_holds(const sc_jobst_pod_t *p);

/* The phase a text names (SC_PP_OTHER for any other). */
int sc__jobst_phase_parse(const char *text);
/* Sets entry e's phase and, when message is not NULL, its message. */
void sc__jobst_set_phase(json_t *e, int phase, const char *message);

/* The GPUs entry e holds: whole devices, a share's fraction of each (gpuShare
 * of 1000), a MIG slice's sevenths. */
double sc__jobst_gpus(json_t *e);

typedef struct sc_jobst_counts {
	int running, releasing, succeeded, failed, pipelined;
} sc_jobst_counts_t;

/* How many entries of pods are in each phase. */
sc_jobst_counts_t sc__jobst_count(json_t *pods);

#endif
