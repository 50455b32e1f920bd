/* Scheduler configuration defaults and action names. */
#include <string.h>

#include "starcloud/core.h"

static const char *const action_names[SC_ACT_COUNT] = {
    [SC_ACT_ALLOCATE] = "allocate",
    [SC_ACT_CONSOLIDATE] = "consolidation",
    [SC_ACT_RECLAIM] = "reclaim",
    [SC_ACT_PREEMPT] = "preempt",
    [SC_ACT_STALE_GANG] = "stalegangeviction",
    [SC_ACT_COMPACT] = "compaction",
};

void sc_config_default(sc_config_t *c)
{
	memset(c, 0, sizeof(*c));
	/* KAI's order: place what fits, then defragment, then take back
	 * fair shares, then let priority in, then clean up broken gangs;
	 * compaction (beyond KAI) last, on what is left waiting. */
	for (int a = 0; a < SC_ACT_COUNT; a++)
		c->actions[a] = a;
	c->nactions = SC_ACT_COUNT;
	c->gpu_placement = SC_PLACE_BINPACK;
	c->cpu_placement = SC_PLACE_BINPACK;
	c->device_placement = SC_PLACE_BINPACK;
	c->pack_threshold = 0.7;
	c->serving_spread = 2;
	c->reclaim_tolerance = 0.2;
	c->preempt_util_threshold = 0.8;
	c->consolidation_max = 16;
	c->reservation_after = 30 * 60;
	/* Conservative: a few moves, never of young or recently moved pods,
	 * and only when the freed GPUs are worth the run time lost. */
	c->compaction = (sc_compaction_t){.enabled = true,
	                                  .max_moves_cycle = 8,
	                                  .max_moves_hour = 24,
	                                  .min_runtime = 600,
	                                  .cooldown = 3600,
	                                  .grace_period = 30,
	                                  .checkpoint_every = 1800,
	                                  .horizon = 3600,
	                                  .target_gpus = 0};
}

const char *sc_action_name(int action)
{
	return action >= 0 && action < SC_ACT_COUNT ? action_names[action] : "unknown";
}

int sc_action_parse(const char *name)
{
	for (int a = 0; a < SC_ACT_COUNT; a++)
		if (strcmp(action_names[a], name) == 0)
			return a;
	/* Short forms people type on the command line. */
	if (strcmp(name, "consolidate") == 0)
		return SC_ACT_CONSOLIDATE;
	if (strcmp(name, "compact") == 0)
		return SC_ACT_COMPACT;
	if (strcmp(name, "stale-gang") == 0 || strcmp(name, "stalegang") == 0)
		return SC_ACT_STALE_GANG;
	return -1;
}
