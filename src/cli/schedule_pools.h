/* Node pools in `starcloud schedule` (docs/AUTOSCALING.md): after each
 * cycle, the core's scale-up and scale-down plans are added to the output
 * ("scaleUp", "scaleDown", and "waitingFor" on the pending jobs they
 * concern, whose reason then says what they wait for); with --cycles N the
 * nodes a plan asks for join before the next cycle, as if provisioning took
 * no time (scale-down is reported, not carried out: its delay is the
 * server's and the simulator's business). */
#ifndef STARCLOUD_CLI_SCHEDULE_POOLS_H
#define STARCLOUD_CLI_SCHEDULE_POOLS_H

#include <jansson.h>
#include <stdbool.h>

#include "starcloud/arena.h"
#include "starcloud/autoscale.h"
#include "starcloud/manifest.h"

typedef struct sc__pools {
	sc_pool_t *pools; /* owned copies of the set's pools' core part */
	size_t n;
	int *add;              /* the last plan's request per pool */
	int *joined;           /* per pool: nodes added by this run */
	sc_node_spec_t *nodes; /* the world's nodes once some joined (owned) */
	sc_arena_t *arena;     /* names of joined nodes */
} sc__pools_t;

/* Reads the set's NodePools (borrowed strings: the set must outlive p).
 * 0 or SC_ENOMEM; p->n == 0 when there are none. */
int sc__pools_init(sc__pools_t *p, sc_manifest_set_t *set);
void sc__pools_free(sc__pools_t *p);

/* Plans after the decisions d of a cycle on s; adds them to cj (the
 * cycle's JSON, may be NULL) or prints them when table is set. 0, or an
 * SC_E* code with the reason on stderr. */
int sc__pools_cycle(sc__pools_t *p, const sc_snapshot_t *s, const sc_decisions_t *d, json_t *cj,
                    bool table);

/* Before the next cycle: the nodes the last plan asked for join snap
 * (named <pool>-new-<k>, the template's labels). 0 or SC_ENOMEM. */
int sc__pools_join(sc__pools_t *p, sc_snapshot_t *snap);

#endif
