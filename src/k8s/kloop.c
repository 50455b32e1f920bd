/* What the modules of src/k8s ask of the control loop (k8s_int.h,
 * "kloop.c"): the time, whether this replica may write, and a cycle soon.
 * The loop (k8s.c) hands in what a kick runs, so the watches, the writer
 * and the election, which it starts, do not call back up into it. */
#include <time.h>

#include "k8s/k8s_int.h"

double sc__k8s_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

bool sc__k8s_may_write(sc_k8s_t *k)
{
	if (k->stopping)
		return false;
	if (!k->o.leader_elect)
		return true;
	return sc_klease_valid(&k->lease, sc__k8s_now());
}

void sc__k8s_kick(sc_k8s_t *k)
{
	k->dirty = true;
	if (!k->stopping && k->kick)
		k->kick(k);
}
