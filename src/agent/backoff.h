/* Restart back-off arithmetic (the node agent's pod restarts). Pure. */
#ifndef SC_AGENT_BACKOFF_H
#define SC_AGENT_BACKOFF_H

#include <stdint.h>

/* The next delay after one of cur ms (0: first restart) for a process that
 * ran ran_ms: base when it is the first or the process ran at least
 * reset_ms (it was healthy, so the count starts over), else cur doubled,
 * at most max_ms. Never overflows. */
uint64_t sc_backoff_next(uint64_t cur, uint64_t ran_ms, uint64_t base_ms, uint64_t max_ms,
                         uint64_t reset_ms);

/* Consecutive-result thresholds of a probe: a verdict comes after
 * fail_thr failures in a row (0) or succ_thr successes in a row (1), and
 * only when it differs from the last verdict. */
typedef struct sc_threshold {
	int fails, succs;
	int verdict; /* -1 none yet, 0 failed, 1 passed */
} sc_threshold_t;

void sc_threshold_init(sc_threshold_t *t);
/* Counts one result (ok 1 or 0); returns the new verdict, or -1 when this
 * result does not change it. */
int sc_threshold_add(sc_threshold_t *t, int ok, int fail_thr, int succ_thr);

#endif
