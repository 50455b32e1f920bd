/* Stopping every process of a pod's cgroups (docs/SECURITY.md): what the
 * agent does when a pod's process ends or it stops a pod, and what the pod
 * guard (guard.h) does when the node's lease lapses.
 *
 * A pod leads its own process group, but a child that calls setsid() or
 * setpgid() leaves it, and a signal to the group misses it. Every process
 * of a pod is born in the pod's cgroups and cannot leave them (it is not
 * root), so the cgroups, not the group, say what is the pod's. A kill by
 * the list in cgroup.procs races a pod that forks (a child born after the
 * list is read is missed), so the cgroup is stopped first:
 *   v2 with cgroup.kill (Linux 5.14): the kernel kills all, new children
 *      too;
 *   v2 without it: cgroup.freeze, SIGKILL to each, thaw;
 *   v1 freezer (cgv1.c puts each pod in one): freezer.state FROZEN,
 *      SIGKILL to each, THAWED;
 *   any other cgroup: SIGKILL to each, in rounds until none is left.
 * A frozen process cannot fork, so the list of a frozen cgroup is whole;
 * it dies when thawed. These helpers know nothing of the agent, so the
 * guard uses them too. */
#ifndef SC_AGENT_CGKILL_H
#define SC_AGENT_CGKILL_H

/* Sends sig to every process listed in DIR/cgroup.procs but skip (0:
 * none). Returns how many were signalled; 0 when the folder is gone. */
int sc__cg_signal(const char *dir, int sig, int skip);
/* 1 when dir is a cgroup (DIR/cgroup.procs exists). */
int sc__cg_exists(const char *dir);
/* 1 when DIR/cgroup.procs lists a process other than skip. */
int sc__cg_populated(const char *dir, int skip);
/* Kills every process in the cgroup folder dir but skip (0: none; a
 * cgroup holding skip is never frozen), stopping the cgroup first as
 * above, then waits (about two seconds at most) until it is empty so
 * that it can be removed. 1 when it is empty (or gone), else 0. */
int sc__cg_kill_all(const char *dir, int skip);

#endif
