/* The reservation rule, apart from the action that makes reservations
 * (reserve.c), so that placement and explain can ask it without a loop
 * back into the action that calls them. */
#ifndef SC_CORE_RESERVATION_H
#define SC_CORE_RESERVATION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/sched.h"

/* Whether job may take node this cycle: the node is not reserved, is
 * reserved for job, or job's declared runtime ends before the reservation's
 * expected start (backfill that never delays the waiting job). */
bool sc__reservation_allows(const sc_sched_t *s, int job, uint32_t node);
/* Whether the job's declared runtime ends by `until` (INT64_MAX: never), the
 * condition for backfilling onto a node reserved until then. */
bool sc__ends_before(const sc_sched_t *s, int job, int64_t until);

#endif
