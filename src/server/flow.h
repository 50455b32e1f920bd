/* Flow control of API requests per principal, after Kubernetes' API
 * priority and fairness (flow.c explains the rules; docs/CONTROL_PLANE.md).
 *
 * Agents, admins and the unauthenticated health and metrics endpoints run
 * at once; tenants' (and viewers', and anonymous) requests wait in one
 * queue per principal and are served fairly by handler time at the end of
 * each loop iteration; a principal over its share gets 429 + Retry-After.
 *
 * Threading: the event-loop thread only. */
#ifndef SC_SERVER_FLOW_H
#define SC_SERVER_FLOW_H

#include <stddef.h>
#include <stdint.h>

typedef struct sc_server sc_server_t;
typedef struct sc_flow sc_flow_t;

typedef struct sc_flow_opts {
	size_t queue_len;     /* waiting requests per principal; more get 429 */
	uint64_t max_wait_ms; /* a request waiting longer gets 429 */
} sc_flow_opts_t;

typedef struct sc_flow_stats {
	unsigned long long immediate; /* requests that ran at once (system lane) */
	unsigned long long queued;    /* requests that waited in a principal's queue */
	unsigned long long rejected_full, rejected_wait; /* 429s by reason */
	size_t waiting;                                  /* requests waiting now */
} sc_flow_stats_t;

/* Puts flow control in front of s->http's routes (sc_http_set_gate). */
sc_flow_t *sc__flow_new(sc_server_t *s, const sc_flow_opts_t *o);
/* Runs waiting requests, fairly, within the iteration's budget; those that
 * do not fit wait for the next iteration (which then does not sleep). */
void sc__flow_run(sc_flow_t *f);
const sc_flow_stats_t *sc__flow_stats(const sc_flow_t *f);
/* Closes the flow's handles and frees it once they are closed (after the
 * HTTP server closed its connections); accepts NULL. */
void sc__flow_close(sc_flow_t *f);

#endif
