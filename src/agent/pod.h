/* A pod on this node: one process in its own process group, restarted by
 * the job's restartPolicy with exponential back-off, watched by probes.
 *
 * Phases reported to the server: Running (started, or waiting to restart),
 * Succeeded, Failed. A pod the server no longer assigns here is stopped
 * (SIGTERM to the group, SIGKILL after the grace period) and forgotten. */
#ifndef SC_AGENT_POD_H
#define SC_AGENT_POD_H

#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "agent/agent.h"

enum sc_probe_kind { SC_PROBE_STARTUP = 0, SC_PROBE_LIVENESS, SC_PROBE_READINESS, SC_PROBE_KINDS };
enum sc_restart { SC_RESTART_ALWAYS = 0, SC_RESTART_ONFAILURE, SC_RESTART_NEVER };
enum sc_pod_state {
	SC_PS_RUNNING = 0, /* process alive */
	SC_PS_BACKOFF,     /* waiting to restart */
	SC_PS_SUCCEEDED,
	SC_PS_FAILED,
};

struct sc_pod {
	sc_pod_t *next;
	sc_agent_t *a;
	char kind[16]; /* "Job" or "Deployment" */
	char job[SC_AGENT_NAME_MAX + 1];
	char name[SC_AGENT_NAME_MAX + 1];
	int64_t generation;  /* assignment generation, 0 if none */
	char started_at[40]; /* binding time (identity without generation) */
	json_t *task;        /* owned: command, args, env, workingDir, probes... */
	json_t *binding;     /* owned: the status.pods entry */
	int restart_policy;
	int backoff_limit;
	uint64_t grace_ms;

	uv_process_t proc;
	int pid;                        /* the process (group leader), 0 if none */
	unsigned long long start_ticks; /* its start time: guards against pid reuse */
	int adopted;                    /* started by an earlier agent: not our child */
	int pidfd;                      /* adopted: readable when it exits, or -1 */
	uv_poll_t pidpoll;
	int alive;        /* the process is running */
	int state;        /* enum sc_pod_state */
	int stopping;     /* being stopped for good */
	int restart_kill; /* killed by a failed probe: restart */
	int started;      /* startup probe passed (or none) */
	int ready;
	int restarts, failures, exit_code, has_exit;
	char message[SC_AGENT_MSG_MAX];
	uint64_t started_ms;
	uint64_t backoff_ms;
	uv_timer_t timer; /* back-off or grace period */
	sc_probe_t *probes[SC_PROBE_KINDS];
	int log_fd;
	char dir[512];
	int closing;   /* finished: handles are being closed */
	int proc_open; /* proc is initialised and not yet closed */
	int handles_open;
};

/* Creates and starts a pod. kind, job (borrowed strings); task and binding
 * (borrowed, copied); spec is the job's spec for restartPolicy etc. */
sc_pod_t *sc__pod_start(sc_agent_t *a, const char *kind, const char *job, json_t *spec,
                        json_t *task, json_t *binding);
/* Takes over a pod an earlier agent started (its record, borrowed, from
 * podstore.c) whose process is still running: no second copy starts. The
 * process is not our child, so its exit is seen through a pidfd (or the
 * once-a-second tick) and its exit status is unknown. */
sc_pod_t *sc__pod_adopt(sc_agent_t *a, json_t *rec);
/* Stops a pod for a lost lease: as sc__pod_stop, with the grace period
 * cut to half a heartbeat so it is gone before the server's lease ends. */
void sc__pod_fence(sc_pod_t *p);
/* Stops a pod for good; it unlinks and frees itself once the process is
 * gone. reason goes to the agent's log. */
void sc__pod_stop(sc_pod_t *p, const char *reason);
/* The pod's report for the server (new reference). */
json_t *sc__pod_report(const sc_pod_t *p);
/* A probe's verdict: kind failed threshold times (ok=0) or passed success
 * threshold times (ok=1). msg describes the last result. */
void sc__pod_probe_verdict(sc_pod_t *p, int kind, int ok, const char *msg);
/* Once a second: log rotation; exits of adopted pods without a pidfd. */
void sc__pods_tick(sc_agent_t *a);
sc_pod_t *sc__pod_find(sc_agent_t *a, const char *job, const char *name);

/* ---- probe.c ---- */
/* Creates the probe of kind from its manifest object (borrowed); NULL
 * when the task has none. */
sc_probe_t *sc__probe_new(sc_pod_t *p, int kind, json_t *spec);
/* (Re)starts probing after the process started. */
void sc__probe_start(sc_probe_t *pr);
/* Stops probing (process gone). */
void sc__probe_stop(sc_probe_t *pr);
/* Stops and frees (asynchronously). Accepts NULL. */
void sc__probe_free(sc_probe_t *pr);

#endif
