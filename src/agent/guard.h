/* The pod guard: a small process per node that outlives the agent and
 * stops the node's pods when the node's lease has not been renewed for the
 * fence time (docs/AGENT.md, "Restarts and fencing").
 *
 * Why a process of its own: pods must outlive an agent restart (they are
 * adopted), so when only the agent dies nobody would stop them, and once
 * the server gives their gang to another node two copies run. The guard
 * does not start or watch pods; it reads two things from the agent's data
 * folder and does one thing:
 *   DATA/lease   written by the agent after each heartbeat the server took:
 *                the fence deadline (CLOCK_MONOTONIC milliseconds, a clock
 *                every process of the machine shares) and the kill grace;
 *   DATA/pods/JOB/POD/pod.json   the pod records (podstore.c): pid,
 *                process start time and the pod's cgroup folders;
 * and once the deadline passes it sends SIGTERM to every recorded pod's
 * process group and to every process in its cgroups (a child that called
 * setsid() is no longer in the group, but cannot leave the cgroups), then
 * SIGKILL after the grace, freezing each cgroup first so that a pod that
 * forks cannot outrun it (cgkill.h). Where a pod has no cgroup (no
 * writable hierarchy) only its process group is fenced. The server gives a node's
 * pods away only after lease + fence time, later than the deadline by half
 * the fence time, so the copies never overlap.
 *
 * One guard per data folder (an flock on DATA/guard.lock). The agent starts
 * it (sc__guard_ensure) and it exits by itself once the deadline has passed
 * and no recorded pod runs, or when the agent writes "stop" (a draining
 * agent that stopped every pod). */
#ifndef SC_AGENT_GUARD_H
#define SC_AGENT_GUARD_H

#include <stdint.h>

typedef struct sc_guard_lease {
	uint64_t deadline_ms; /* CLOCK_MONOTONIC ms; 0: none yet */
	uint64_t grace_ms;    /* SIGTERM -> SIGKILL when fencing */
	int stop;             /* the agent asks the guard to exit */
	/* Never signalled by the guard: while it forks a pod, the agent's
	 * thread is in the pod's cgroups (cgv1.h). 0: unknown. */
	int agent_pid;
} sc_guard_lease_t;

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t sc__mono_ms(void);
/* Agent side: writes DATA/lease (tmp + rename). 0 or SC_EIO. */
int sc__guard_write_lease(const char *data_dir, const sc_guard_lease_t *l);
/* 1 when a guard holds DATA/guard.lock. */
int sc__guard_running(const char *data_dir);
/* Starts a guard for data_dir unless one runs: this binary, detached (its
 * own session, not our child), output to DATA/guard.log. 0 or < 0. */
int sc__guard_ensure(const char *data_dir);
/* `starcloud guard --data-dir DIR` (started by the agent). */
int sc_guard_main(int argc, char **argv);

#endif
