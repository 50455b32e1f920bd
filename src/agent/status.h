/* The agent's status port: /healthz, /pods, /logs (status.c). */
#ifndef SC_AGENT_STATUS_H
#define SC_AGENT_STATUS_H

#include "agent/state.h"

/* Listens on --listen and serves the port; < 0 when it cannot listen. */
int sc__status_start(sc_agent_t *a);

#endif
