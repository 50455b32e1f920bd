/* Pod CPU, memory and pids limits on cgroup v1 (docs/SECURITY.md), the
 * hosts without a cgroup v2 hierarchy holding those controllers (podenv.c
 * sets them there). Each pod gets, in every v1 hierarchy that has the
 * controller, CTL/OWN/starcloud-NODE/JOB.POD, OWN being the agent's own
 * cgroup there (so the pods stay inside whatever limits the agent runs
 * under):
 *   cpu     cpu.cfs_period_us 100000, cpu.cfs_quota_us = cores x 100000
 *           (the task's resources.cpu; none when it has none);
 *   memory  memory.limit_in_bytes (and memory.memsw.limit_in_bytes where
 *           swap is accounted, so swap is no way around it) = the task's
 *           resources.memory; the kernel's OOM killer ends a pod above it
 *           and the agent reports reason OOMKilled (memory.oom_control's
 *           oom_kill count went up);
 *   pids    pids.max = --pod-pids-max;
 *   freezer no limit: it stops the pod whole when it is killed (cgkill.h),
 *           so a child that left the pod's process group, or one born
 *           during the kill, does not outlive it.
 * The same values cgroup v2 gets as cpu.max, memory.max and pids.max.
 *
 * The pod must be inside before it runs any code (a child forked before
 * the agent moved it would escape), and libuv has no hook between fork and
 * exec: so the agent's forking thread joins the pod's cgroups (v1 takes
 * one thread at a time: the `tasks` file), forks, and goes back at once;
 * the child is born inside. Its exec probes are born there too
 * (sc__cgv1_join), so its limits hold them and they cannot escape them. */
#ifndef SC_AGENT_CGV1_H
#define SC_AGENT_CGV1_H

#include "agent/state.h"

/* Finds the cpu, memory and pids hierarchies and makes the agent's folder
 * in each; says at start-up what is not enforced. */
void sc__cgv1_init(sc_agent_t *a);
/* Before the fork of pod p (spawn.h): makes or updates its cgroups with the task's
 * limits (millicores, bytes; 0: none) and moves the calling thread in. 1 when it did (call
 * sc__cgv1_leave right after the fork), 0 when there is nothing to enter,
 * SC_EIO when a limit or the move failed (the thread is back home then). */
int sc__cgv1_enter(sc_pod_t *p, int64_t cpu_milli, int64_t mem_bytes);
/* Before the fork of one of p's exec probes: moves the calling thread into
 * the pod's existing cgroups, limits untouched. As sc__cgv1_enter: 1 (call
 * sc__cgv1_leave after the fork), 0, or SC_EIO (back home: run nothing). */
int sc__cgv1_join(sc_pod_t *p);
/* Helpers of every cgroup module (devcg.c, podenv.c too). Writes text to
 * a cgroup file: 0, or SC_EIO with errno kept. */
int sc__cgv1_write(const char *path, const char *text);
/* The mount point of the v1 hierarchy holding controller ctl; the
 * agent's own cgroup in it ("/" or "/system.slice/..."). 1 when found. */
int sc__cgv1_mount(const char *ctl, char *out, size_t outsz);
int sc__cgv1_own(const char *ctl, char *out, size_t outsz);
/* The value of key in a flat-keyed cgroup file ("key N" lines, v1 or v2:
 * memory.oom_control, memory.events, cpu.stat), or -1. */
long long sc__cg_key(const char *path, const char *key);
/* Moves the calling thread back to the agent's own cgroups. */
void sc__cgv1_leave(sc_agent_t *a, int entered);
/* How many processes the kernel's OOM killer ended in p's memory cgroup
 * (cumulative), or -1 when unknown. */
long long sc__cgv1_oom_kills(const sc_pod_t *p);
/* Removes the pod's cgroups (once its main process is gone), killing what
 * is left in them first (sc__cg_kill_all). */
void sc__cgv1_remove(sc_pod_t *p);
/* Removes the agent's folders when no pod cgroup is left in them. */
void sc__cgv1_close(sc_agent_t *a);

#endif
