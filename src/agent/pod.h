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

#include "agent/state.h"

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
 * cut to a quarter of the fence time so it is gone before the server gives
 * it away (agent.c). */
void sc__pod_fence(sc_pod_t *p);
/* Stops a pod for good; it unlinks and frees itself once the process is
 * gone. reason goes to the agent's log. */
void sc__pod_stop(sc_pod_t *p, const char *reason);
/* The pod's report for the server (new reference). */
json_t *sc__pod_report(const sc_pod_t *p);
/* Once a second: log rotation; exits of adopted pods without a pidfd. */
void sc__pods_tick(sc_agent_t *a);

#endif
