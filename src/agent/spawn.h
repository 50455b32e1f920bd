/* Starting a pod's processes (the pod itself and its exec probes) so that
 * none of the tenant's code runs before the agent has recorded it.
 *
 * libuv's uv_spawn execs at once: an agent frozen (SIGSTOP) or killed
 * between the fork and the pod's record (podstore.h) left a running pod
 * that neither its guard nor a restarted agent knew, and the server
 * started a second copy elsewhere. Here the child does all that comes
 * before the exec (its own session, stdio, folder, user), then waits on a
 * pipe, the gate; the agent records the pod, moves the child into its
 * cgroup (v2), checks that its lease still holds, and only then opens it:
 *   - the agent dies before the gate opens: the pipe's only writer is
 *     gone, the child reads end-of-file and exits without running anything;
 *   - the agent is frozen: the child waits and runs nothing; thawed, the
 *     agent finds its lease lapsed and closes the gate instead; once the
 *     record is written, the guard fences the waiting child as any pod.
 * At most one child waits at a gate at a time (the fork, the record and the
 * release are one synchronous step of the loop), so no other child holds a
 * copy of the gate's write end to keep it open.
 *
 * The child is the agent's but not libuv's: its exit is watched with a
 * pidfd polled by the loop (a 100 ms timer on kernels without pidfd_open),
 * seen first without reaping (waitid WNOWAIT), so on_exit may still signal
 * its process group safely (its id cannot be reused yet), then reaped. */
#ifndef SC_AGENT_SPAWN_H
#define SC_AGENT_SPAWN_H

#include <sys/types.h>

#include <uv.h>

typedef struct sc_spawn_opts {
	char **argv; /* borrowed; argv[0] is looked up in env's PATH */
	char **env;  /* borrowed: the child's whole environment */
	const char *cwd;
	int set_ids; /* drop supplementary groups, then setgid(gid), setuid(uid) */
	uid_t uid;
	gid_t gid;
	int out_fd; /* the child's stdout and stderr; -1: /dev/null (stdin always) */
} sc_spawn_opts_t;

typedef struct sc_child sc_child_t;

struct sc_child {
	int pid;   /* leads its own session and process group; 0 when none */
	int gate;  /* the gate's write end while the child waits, else -1 */
	int err;   /* reads the child's errno if its set-up or exec fails, else -1 */
	int pidfd; /* while watched, or -1 */
	uv_poll_t poll;
	uv_timer_t timer;
	uv_handle_t *h; /* the watcher in use (poll or timer), NULL when none */
	/* The child ended: its exit status, or the signal that killed it
	 * (status -1: reaped by someone else, unknown). */
	void (*on_exit)(sc_child_t *c, int status, int sig);
	void (*on_closed)(sc_child_t *c);
	void *data; /* the caller's */
};

/* Forks a child that prepares itself as o says and waits at the gate.
 * 0, or a negative errno (uv_strerror names it) when it cannot fork; the
 * caller then owns nothing. Forks from the calling thread (whose cgroup
 * v1 memberships the child inherits: cgv1.h, devcg.h). */
int sc__spawn_gated(const sc_spawn_opts_t *o, sc_child_t *c);
/* Opens the gate and waits for the exec: 0 when it happened (or the child
 * died waiting: its watcher says so), else a negative errno of the failed
 * set-up or exec; the child has then exited and is reaped (c->pid is 0). */
int sc__spawn_release(sc_child_t *c);
/* Closes the gate without opening it: the child is killed and reaped
 * before this returns, having run nothing. */
void sc__spawn_cancel(sc_child_t *c);
/* After a successful release: calls on_exit (once) when the child ends. */
void sc__child_watch(uv_loop_t *loop, sc_child_t *c);
/* Stops watching; on_closed (may be NULL) follows once the handle closed.
 * Does nothing to the process. A second call does nothing. */
void sc__child_close(sc_child_t *c);

#endif
