/* Watch streams (?watch=1 on a list), fanned out as Kubernetes' watch
 * cache does it (watch.c explains the rules; docs/CONTROL_PLANE.md).
 *
 * One hub per server follows the object cache (sc__cache_listen). Each
 * change is serialised once, as the object's shared answer bytes
 * (sc_wire_t, reference counted), and every watcher that may see it gets
 * a reference in its own bounded queue: no watcher parses or prints JSON,
 * and an event costs one buffer however many streams send it. A watcher
 * whose client reads too slowly (its queued and unsent events pass the
 * buffer limit) is cut off with an ERROR event (410, "too slow: resume
 * from resourceVersion N") and its references are dropped.
 *
 * Durability: events go to clients only once the write that made them is
 * durable (sc__watch_flush after the group commit's sync); after a failed
 * sync (sc__watch_rollback) every watcher that holds an event of the lost
 * writes is cut off, so no client ever sees a change the store lost.
 *
 * Threading: the event-loop thread only. */
#ifndef SC_SERVER_WATCH_H
#define SC_SERVER_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "server/server.h"

typedef struct sc_watch_hub sc_watch_hub_t;

typedef struct sc_watch_stats {
	size_t watchers;             /* open watch streams */
	unsigned long long events;   /* events queued to watchers */
	unsigned long long cut_slow; /* watchers cut off for being too slow */
	unsigned long long cut_lost; /* watchers cut off after a failed sync */
	size_t queued_bytes;         /* bytes of events queued, not yet sent */
} sc_watch_stats_t;

/* Follows s->cache and the token records (a deleted token ends its
 * watches; s->sec.watch_timeout_ms bounds every watch's life); buffer is
 * the per-watcher limit in bytes (queued plus unsent output; 0: 8 MiB).
 * 0, or < 0 when the store cannot be watched. */
int sc__watch_hub_new(sc_server_t *s, size_t buffer, sc_watch_hub_t **out);
/* Cuts every watcher off and frees the hub; accepts NULL. */
void sc__watch_hub_free(sc_watch_hub_t *h);
/* Every change up to revision durable is durable (and every change at all,
 * while the store holds none for its sync): send. */
void sc__watch_flush(sc_watch_hub_t *h, int64_t durable);
/* The writes after revision durable were lost (a failed sync): cut off the
 * watchers holding events of them. */
void sc__watch_rollback(sc_watch_hub_t *h, int64_t durable);
const sc_watch_stats_t *sc__watch_stats(sc_watch_hub_t *h);

#endif
