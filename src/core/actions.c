#include "core/actions.h"

/* Actions are a table indexed by enum sc_action so that adding one is a
 * one-line change. */
typedef int (*action_fn)(sc_sched_t *s);

static const action_fn actions[SC_ACT_COUNT] = {
    [SC_ACT_ALLOCATE] = sc__allocate,      [SC_ACT_CONSOLIDATE] = sc__consolidate,
    [SC_ACT_RECLAIM] = sc__reclaim,        [SC_ACT_PREEMPT] = sc__preempt,
    [SC_ACT_STALE_GANG] = sc__stale_gangs, [SC_ACT_COMPACT] = sc__compact,
};

int sc__run_action(sc_sched_t *s, int action)
{
	if (action < 0 || action >= SC_ACT_COUNT)
		return SC_EINVAL;
	return actions[action] ? actions[action](s) : 0;
}
