/* Startup, liveness and readiness probes of a pod: http, tcp or exec,
 * each on its own timer; a verdict goes to the pod's on_verdict (probe.c). */
#ifndef SC_AGENT_PROBE_H
#define SC_AGENT_PROBE_H

#include <jansson.h>

#include "agent/state.h"

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
