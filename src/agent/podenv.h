/* What a pod's process starts with: its folder and log file, its
 * environment (task env, pod identity, devices) and its cgroup. */
#ifndef SC_AGENT_PODENV_H
#define SC_AGENT_PODENV_H

#include "agent/spawn.h"
#include "agent/state.h"

#define SC_PODENV_MAX 512

typedef struct sc_podenv {
	char *vars[SC_PODENV_MAX + 1]; /* owned "K=V" strings, NULL-terminated */
	size_t n;
	char cwd[1024];
} sc_podenv_t;

/* Creates the pod's folder and opens its log (append). 0 or SC_EIO. */
int sc__podenv_prepare(sc_pod_t *p);
/* Fills env for the next start. SC_ETOOBIG when over SC_PODENV_MAX. */
int sc__podenv_build(sc_pod_t *p, sc_podenv_t *env);
void sc__podenv_free(sc_podenv_t *env);
/* How a process of the pod starts (its main process and its exec probes
 * alike): argv in env's folder and environment, as the pod's user
 * (podsec.h). out_fd: its stdout and stderr, -1 for /dev/null. The
 * result borrows argv and env. */
sc_spawn_opts_t sc__podenv_spawn_opts(const sc_pod_t *p, char **argv, sc_podenv_t *env, int out_fd);
/* Copy-truncate rotation when the log passed the size cap: the process
 * keeps its O_APPEND descriptor and goes on writing at the new end. */
void sc__podenv_rotate(sc_pod_t *p);
/* Checks once whether pods get cgroup v2 cgroups (a->cgroup_ok) and
 * whether limits can be set there (a->cgroup_limits); else cgroup v1.
 * The folders are named a->cgroup_name (cgname.h). */
void sc__podenv_cgroup_init(sc_agent_t *a);
/* Moves pid into a new cgroup with the task's cpu and memory limits and
 * its device program (cgroup v2; on v1 the pod is born inside, cgv1.h).
 * 0, also when a limit could not be set (logged), or SC_EIO when device
 * rules are in use and the pod could not be put under them: it must not
 * run. */
int sc__podenv_cgroup_enter(sc_pod_t *p, int pid);
/* Moves pid (one of p's exec probes, waiting at its gate) into the pod's
 * existing cgroup v2, limits untouched. 0 (also without cgroup v2) or
 * SC_EIO: the probe must not run. */
int sc__podenv_cgroup_join(sc_pod_t *p, int pid);
/* The task's resources.cpu in millicores and resources.memory in bytes
 * (0 when not given): the limits of its cgroup, v1 or v2. */
void sc__podenv_limits(const sc_pod_t *p, int64_t *cpu_milli, int64_t *mem_bytes);
/* OOM kills so far in the pod's memory cgroup (v2 memory.events, v1
 * memory.oom_control), -1 when unknown. */
long long sc__podenv_oom_kills(const sc_pod_t *p);
/* The folders of every cgroup p's processes are born in or moved to (v2,
 * v1 freezer first, the other v1 controllers, devices), whether or not
 * they exist now: what stopping the pod must empty (cgkill.h) and what
 * its record tells the guard (podstore.c). Returns how many (<= max). */
#define SC_PODENV_CGDIR 800
int sc__podenv_cgroup_dirs(const sc_pod_t *p, char (*dirs)[SC_PODENV_CGDIR], int max);
/* Signals every process of p's cgroups (cgkill.h) but the agent, once. */
void sc__podenv_cgroup_signal(const sc_pod_t *p, int sig);
/* Kills every process of p's cgroups but the agent, freezing them first
 * (cgkill.h); the folders stay. */
void sc__podenv_cgroup_kill(const sc_pod_t *p);
/* Removes the pod's cgroups, v2 and v1 (once its main process is gone),
 * killing what is left in them first (cgkill.h). */
void sc__podenv_cgroup_remove(sc_pod_t *p);

#endif
