/* Scheduling actions, dispatched by name in the configured order. */
#ifndef SC_CORE_ACTIONS_H
#define SC_CORE_ACTIONS_H

#include "core/sched.h"

/* Runs one action (enum sc_action) on the cycle's state. */
int sc__run_action(sc_sched_t *s, int action);

int sc__reclaim(sc_sched_t *s);
int sc__preempt(sc_sched_t *s);
int sc__stale_gangs(sc_sched_t *s);
int sc__consolidate(sc_sched_t *s);

#endif
