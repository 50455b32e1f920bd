/* The services every module of the agent uses (state.h). */
#include "agent/state.h"

#include <string.h>

#define REPORT_DELAY_MS 20

uint64_t sc__agent_now_ms(sc_agent_t *a)
{
	uv_update_time(a->loop);
	return uv_now(a->loop);
}

int sc__agent_lease_holds(sc_agent_t *a)
{
	return !a->fenced && a->fence_at && sc__agent_now_ms(a) < a->fence_at;
}

/* Changes close together share one report. */
void sc__agent_report_soon(sc_agent_t *a)
{
	if (a->report_cb && !uv_is_active((uv_handle_t *)&a->report_timer))
		uv_timer_start(&a->report_timer, a->report_cb, REPORT_DELAY_MS, 0);
}

void sc__agent_resync_soon(sc_agent_t *a)
{
	if (a->resync_cb && !a->stopping && !uv_is_active((uv_handle_t *)&a->resync_timer))
		uv_timer_start(&a->resync_timer, a->resync_cb, 0, 0);
}

sc_pod_t *sc__pod_find(sc_agent_t *a, const char *job, const char *name)
{
	for (sc_pod_t *p = a->pods; p; p = p->next)
		if (strcmp(p->job, job) == 0 && strcmp(p->name, name) == 0)
			return p;
	return NULL;
}
