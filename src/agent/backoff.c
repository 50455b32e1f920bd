/* Back-off and probe thresholds (see backoff.h). Kept apart from the agent
 * so unit tests can check the arithmetic without processes or a loop. */
#include "agent/backoff.h"

uint64_t sc_backoff_next(uint64_t cur, uint64_t ran_ms, uint64_t base_ms, uint64_t max_ms,
                         uint64_t reset_ms)
{
	if (cur == 0 || ran_ms >= reset_ms)
		return base_ms < max_ms ? base_ms : max_ms;
	return cur > max_ms / 2 ? max_ms : cur * 2;
}

void sc_threshold_init(sc_threshold_t *t)
{
	t->fails = t->succs = 0;
	t->verdict = -1;
}

int sc_threshold_add(sc_threshold_t *t, int ok, int fail_thr, int succ_thr)
{
	if (ok) {
		t->fails = 0;
		if (++t->succs >= succ_thr && t->verdict != 1)
			return t->verdict = 1;
		return -1;
	}
	t->succs = 0;
	if (++t->fails >= fail_thr && t->verdict != 0)
		return t->verdict = 0;
	return -1;
}
