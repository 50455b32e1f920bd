/* Certificate rotation without a restart, written once for every daemon
 * (server, agent, gateway, worker): what an operator used to cert-manager,
 * Envoy's SDS or `nginx -s reload` expects.
 *
 * A daemon names each TLS context it made from files (its listener's
 * --tls-cert/--tls-key/--tls-client-ca, its client side's --ca and client
 * certificate). From then on:
 *
 *   - SIGHUP reloads every one of them at once;
 *   - every --tls-reload-interval (default 2 s; 0: never) the files are
 *     stat()ed, and a context
 *     whose files changed (inode, size, mtime or ctime: cert-manager and
 *     Kubernetes secret volumes replace files by rename, an editor may
 *     write in place) is reloaded once the change has held for one more
 *     look, so a certificate and key replaced one after the other are read
 *     as a pair.
 *
 * A reload that fails (net/tls.h: sc_tls_ctx_reload) keeps the context in
 * use, logs an error naming the file, and is not tried again until a file
 * changes again (or the next SIGHUP). New connections use the new
 * certificate; established ones keep theirs. /metrics carries
 *
 *   starcloud_tls_reload_total{context,result="ok|error"}       counter
 *   starcloud_tls_certificate_expiry_timestamp_seconds{context} gauge
 *
 * so an alert can fire on failed reloads and before a certificate
 * expires.
 *
 * One set per process (a daemon has one loop); the handles are unref'd,
 * so they never keep a loop alive. */
#ifndef SC_NET_TLSRELOAD_H
#define SC_NET_TLSRELOAD_H

#include <stdint.h>
#include <uv.h>

#include "net/tls.h"
#include "starcloud/buf.h"

#define SC_TLS_RELOAD_POLL_MS 2000 /* until sc_tls_reload_interval */
#define SC_TLS_RELOAD_MAX 4
#define SC_TLS_RELOAD_FILES 4

/* Watches ctx under name ("listener", "client": borrowed, a literal);
 * NULL or a context not made from files is ignored. The first call starts
 * the SIGHUP handler and the poll timer on loop, even with nothing to
 * watch: `systemctl reload` (SIGHUP) must never stop a daemon that serves
 * plain HTTP, whose default action for it would be to exit. ctx stays the
 * caller's and must outlive sc_tls_reload_stop. */
void sc_tls_reload_watch(uv_loop_t *loop, const char *name, sc_tls_ctx_t *ctx);
/* The two families above, a sample per watched context (HELP and TYPE
 * alone when there is none: no TLS). */
void sc_tls_reload_metrics(sc_buf_t *b);
/* A context made another way (k8s mode: from a kubeconfig and the files it
 * names): remake(ud, ctx, ...) makes it again (sc_tls_ctx_reload_pem), on
 * SIGHUP and when one of paths (borrowed; at most SC_TLS_RELOAD_FILES,
 * NULLs skipped) changes. 0 or < 0 with err set, as sc_tls_ctx_reload. */
typedef int (*sc_tls_remake_fn)(void *ud, sc_tls_ctx_t *ctx, char *err, size_t errsz);
void sc_tls_reload_watch_with(uv_loop_t *loop, const char *name, sc_tls_ctx_t *ctx,
                              const char *const *paths, size_t npaths, sc_tls_remake_fn remake,
                              void *ud);
/* How often the files are looked at, in ms (0: only on SIGHUP); takes
 * effect at once. */
void sc_tls_reload_interval(uint64_t ms);
/* Stops watching (closes the handles; run the loop once more to finish
 * closing them) before the contexts are freed. */
void sc_tls_reload_stop(void);

#endif
