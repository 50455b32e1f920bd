#include "core/actions.h"

/* Actions are a table indexed by enum sc_action so that adding one is a
 * one-line change. Reclaim, preempt, consolidation and stale-gang eviction
 * are not implemented yet (issue 3): they are skipped and the README says
 * so; allocate never evicts anything. */
typedef int (*action_fn)(sc_sched_t *s);

static const action_fn actions[SC_ACT_COUNT] = {
	[SC_ACT_ALLOCATE] = sc__allocate,
};

int sc__run_action(sc_sched_t *s, int action)
{
	if (action < 0 || action >= SC_ACT_COUNT)
		return SC_EINVAL;
	return actions[action] ? actions[action](s) : 0;
}
