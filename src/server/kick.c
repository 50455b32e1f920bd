/* Asking the scheduling loop for a cycle (server.h, "kick.c"): every writer
 * (the API, agent reports, the deployment controller, leader election)
 * calls this, and sched.c hands in what it runs, so none of them depends
 * on the loop that depends on them. */
#include "server/server.h"

void sc__sched_kick(sc_server_t *s)
{
	if (s->kick)
		s->kick(s);
}

void sc__sched_writing(sc_server_t *s, const char *key, int on)
{
	if (s->writing)
		s->writing(s, key, on);
}
