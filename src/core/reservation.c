#include "core/reservation.h"

bool sc__ends_before(const sc_sched_t *s, int job, int64_t until)
{
	int64_t rt = s->jobs[job].spec->expected_runtime;
	return until != INT64_MAX && rt > 0 && s->snap->now + rt <= until;
}

bool sc__reservation_allows(const sc_sched_t *s, int job, uint32_t node)
{
	if (!s->reserved_by || s->reserved_by[node] < 0 || s->reserved_by[node] == job)
		return true;
	return sc__ends_before(s, job, s->reserved_until[node]);
}
