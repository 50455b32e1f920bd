/* High availability of the control plane on etcd (docs/HA.md).
 *
 * With an etcd store, every server serves the API and one of them, the
 * leader, runs the scheduling loop and the controllers. Leadership is the
 * etcd key <prefix>leader, created under this server's lease (TTL
 * --leader-ttl, default 5 s) only when absent; a tick every TTL/3 renews
 * the lease and re-checks the key. Leader work is bracketed by
 * sc__ha_leader_begin/end, which sets the store's fence, so each of its
 * writes is a txn that also requires the leader key's mod_revision to be
 * unchanged: a deposed leader's late write is refused by etcd.
 *
 * With SQLite the server is alone and always the leader. */
#ifndef SC_SERVER_HA_H
#define SC_SERVER_HA_H

#include <stdint.h>

#include "server/server.h"
#include "starcloud/buf.h"

/* Opens the store named by url ("sqlite:PATH" or "etcd://h:p[,h:p...]");
 * NULL url: SQLite in data_dir. */
int sc__ha_open_store(const char *url, const char *data_dir, const char *etcd_prefix,
                      sc_store_t **out);
/* The same, read-only when readonly is set (a backup's source: see
 * sc_store_sqlite_open_mode and sc_store_etcd_open_mode). */
int sc__ha_open_store_mode(const char *url, const char *data_dir, const char *etcd_prefix,
                           int readonly, sc_store_t **out);
/* Starts the election (etcd stores) and the change feed; registers the
 * HA metrics. id names this server in the leader key. */
int sc__ha_start(sc_server_t *s, const char *id, int ttl_s);
void sc__ha_stop(sc_server_t *s);
/* Frees what sc__ha_start allocated, after the loop closed its handles. */
void sc__ha_free(sc_server_t *s);
/* 1 when this server may do leader work now (then sc__ha_leader_end must
 * follow); 0 when it is a follower. */
int sc__ha_leader_begin(sc_server_t *s);
void sc__ha_leader_end(sc_server_t *s);
/* 1 when leader (always with SQLite). */
int sc__ha_is_leader(sc_server_t *s);
/* 1 while the store is etcd and etcd does not answer (calls fail at
 * once): reads answer 503 rather than a cache that may be stale. */
int sc__ha_store_down(sc_server_t *s);
/* /readyz (with etcd: answered once etcd has answered a quorum read, on
 * the store's calls thread) and the HA part of /metrics. */
void sc__ha_readyz(sc_server_t *s, sc_http_req_t *r);
void sc__ha_metrics(sc_server_t *s, sc_buf_t *b);

#endif
