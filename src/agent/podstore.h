/* What the agent keeps on disk about its pods, so that a restarted agent
 * adopts the pods still running instead of starting second copies, and so
 * that the folders of finished pods do not pile up.
 *
 * Each running pod has a record DATA/pods/JOB/POD/pod.json, written
 * (tmp + rename) every time its process starts: kind, job, pod, pid, the
 * process's start time in clock ticks (a pid alone could have been reused
 * by an unrelated process), restarts, failures, the settings taken from
 * the job spec, the task, the binding (whose generation or startedAt is
 * the assignment's identity) and the folders of its cgroups (the guard
 * empties them when it fences the pod). The record is removed when the pod stops for
 * good; the folder stays for its logs until retention removes it. */
#ifndef SC_AGENT_PODSTORE_H
#define SC_AGENT_PODSTORE_H

#include "agent/state.h"

/* Writes p's record. 0, or SC_EIO (the pod runs but cannot be adopted). */
int sc__podstore_save(const sc_pod_t *p);
/* Removes p's record (the pod is stopped for good). */
void sc__podstore_forget(const sc_pod_t *p);
/* Copies pid, start time, restarts, failures and the spec settings from
 * rec (borrowed) into p. */
void sc__podstore_settings(sc_pod_t *p, json_t *rec);
/* At start-up, before the first list: adopts every recorded pod whose
 * process still runs (the reconcile after the list then keeps or stops
 * it); records of processes that are gone are removed. Returns the number
 * of pods adopted. */
int sc__podstore_adopt_all(sc_agent_t *a, sc_pod_t *(*adopt)(sc_agent_t *a, json_t *rec));
/* 1 when the process of a pod recorded here still runs in a cgroup folder
 * named name (.../NAME/JOB.POD in any hierarchy): the pods an agent of an
 * earlier layout left running (cgname.h). */
int sc__podstore_in_cgroup(sc_agent_t *a, const char *name);
/* 1 when pid runs (not a zombie) and started at ticks (0: any start). */
int sc__proc_alive(int pid, unsigned long long ticks);
/* Removes the folders of pods that are not running here: those idle for
 * longer than --pod-retention, then the oldest beyond --keep-pods. */
void sc__podstore_gc(sc_agent_t *a);

#endif
