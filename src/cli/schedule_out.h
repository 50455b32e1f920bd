/* Output of `starcloud schedule`: a readable table per cycle, or one JSON
 * object (interface.md) for the whole run. */
#ifndef STARCLOUD_CLI_SCHEDULE_OUT_H
#define STARCLOUD_CLI_SCHEDULE_OUT_H

#include <jansson.h>
#include <stdbool.h>

#include "starcloud/core.h"

typedef struct sc__out {
	bool json;
	int ncycles;
	json_t *placed;    /* pod -> binding still in place, in binding order */
	json_t *evictions; /* every eviction of the run */
	json_t *cycles;    /* one decisions object per cycle (when ncycles > 1) */
	json_t *final;
} sc__out_t;

int sc__out_init(sc__out_t *o, bool json, int ncycles);
/* Records (json) or prints (table) one cycle's decisions, both borrowed. */
int sc__out_cycle(sc__out_t *o, const sc_snapshot_t *s, const sc_decisions_t *d, int index,
                  bool last);
/* The last cycle's decisions object (borrowed; JSON only, else NULL), for
 * additions such as the node pools' plans (schedule_pools.c). */
json_t *sc__out_last(sc__out_t *o);
/* Prints the JSON object; nothing for tables. */
int sc__out_finish(sc__out_t *o);
void sc__out_free(sc__out_t *o);

#endif
