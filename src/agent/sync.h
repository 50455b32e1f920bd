/* The agent's view of what should run here: a list and then a watch of
 * jobs and deployments, turned into pods started and stopped (sync.c). */
#ifndef SC_AGENT_SYNC_H
#define SC_AGENT_SYNC_H

#include "agent/state.h"

/* Initialises the watch handles (once, before anything can fail). */
void sc__sync_init(sc_agent_t *a);
void sc__sync_start(sc_agent_t *a);
/* Lists and watches again from scratch (after the server came back). */
void sc__sync_restart(sc_agent_t *a);
void sc__sync_stop(sc_agent_t *a);
/* Closes the watch handles and frees the caches. */
void sc__sync_free(sc_agent_t *a);

#endif
