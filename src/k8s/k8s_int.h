/* Internals of `starcloud k8s` shared by its modules:
 *   k8s.c     options, the event loop, the scheduling cycle
 *   kapi.c    requests to the API server (URL, token, TLS, HTTP/2)
 *   kwatch.c  list + watch per resource kind, into the cache
 *   klease.c  leader election on a coordination.k8s.io Lease
 *   kapply.c  decisions -> bindings, evictions, conditions, events
 * One libuv loop runs everything; nothing here is thread-safe. */
#ifndef SC_K8S_INT_H
#define SC_K8S_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "k8s/kcache.h"
#include "k8s/kconfig.h"
#include "k8s/klease.h"
#include "k8s/kworld.h"
#include "net/hfetch.h"
#include "net/tls.h"
#include "starcloud/arena.h"
#include "starcloud/core.h"

typedef struct sc_k8s_opts {
	const char *kubeconfig; /* NULL: flags, then in-cluster */
	const char *context;
	const char *server; /* --server (with --token-file / --ca) */
	const char *token_file;
	const char *ca_file;
	const char *sa_dir;        /* in-cluster: the service account's files */
	const char *scheduler;     /* spec.schedulerName; default "starcloud" */
	const char *default_queue; /* default "default" */
	const char *sched_config;  /* SchedulerConfig / Topology manifests */
	const char *config;        /* --config: these options as YAML */
	int check_config;
	int leader_elect;
	const char *lease_ns, *lease_name, *identity;
	int max_inflight; /* concurrent writes */
	int no_events;
	/* As the flags give them (milliseconds)... */
	uint64_t lease_duration_ms, renew_deadline_ms, retry_period_ms;
	uint64_t period_ms, min_interval_ms, nominate_timeout_ms;
	/* ...and as the code uses them (seconds). */
	double lease_duration, renew_deadline, retry_period;
	double period;           /* longest time between cycles with work */
	double min_interval;     /* shortest time between two cycles */
	double nominate_timeout; /* give up waiting for victims */
	bool events;             /* write Events */
} sc_k8s_opts_t;

typedef struct sc_kwatch sc_kwatch_t;
typedef struct sc_kwriter sc_kwriter_t;
typedef struct sc_kstatus sc_kstatus_t;

typedef struct sc_k8s_stats {
	unsigned long cycles, bound, bind_failed, evicted, evict_failed, patched, events;
	unsigned long relists, watch_restarts;
	unsigned long status_written, status_conflicts; /* PodGroup and Queue status */
	double cycle_max_s, cycle_last_s;
} sc_k8s_stats_t;

typedef struct sc_k8s sc_k8s_t;

/* Leader election's request state (kelect.c). */
typedef struct sc_kelect {
	bool busy;
	bool release; /* giving the lease up on shutdown */
	double sent_at;
	sc_klease_rec_t rec; /* the Lease as last read or written */
	void (*released)(sc_k8s_t *k);
} sc_kelect_t;

struct sc_k8s {
	sc_k8s_opts_t o;
	uv_loop_t *loop;
	sc_hcli_t *http;
	sc_kconfig_t cfg;
	sc_tls_ctx_t *tls;             /* to the API server, from the kubeconfig */
	sc_config_t config;            /* core configuration (defaults + --config) */
	sc_manifest_set_t *config_set; /* owns config's strings */
	sc_kcache_t cache;
	sc_kmap_t local;     /* pod key -> sc_klocal_t */
	sc_kmap_t explained; /* pod key -> last condition message sent */
	sc_kwatch_t *watch[SC_KK_COUNT];
	sc_klease_t lease;
	sc_kelect_t el;
	sc_kwriter_t *writer;
	sc_kstatus_t *status;
	sc_scheduler_t *sched;
	sc_arena_t *arena;
	uv_timer_t cycle_timer, lease_timer, token_timer, stats_timer;
	uv_signal_t sigterm, sigint;
	bool dirty;                     /* something changed since the last cycle */
	void (*kick)(struct sc_k8s *k); /* k8s.c's: arm the cycle timer */
	double last_cycle;              /* monotonic end of the last cycle */
	bool stopping;
	int exit_code;
	sc_k8s_stats_t st;
};

/* ---- kloop.c ---- */
double sc__k8s_now(void); /* monotonic seconds */
/* Something changed: run a cycle soon (at most every min_interval). */
void sc__k8s_kick(sc_k8s_t *k);
/* True while this replica may write (leading, lease not expired). */
bool sc__k8s_may_write(sc_k8s_t *k);

/* ---- kapi.c ---- */
/* Starts a request to path (below the server URL). body may be NULL;
 * ctype NULL means JSON. The response is buffered up to max_body (0 =
 * 4 MiB) unless on_data is set (a stream). NULL when it cannot start. */
sc_hcli_req_t *sc__k8s_request(sc_k8s_t *k, const char *method, const char *path, const char *ctype,
                               const char *body, size_t len, long timeout_ms, size_t max_body,
                               sc_hfetch_data_fn on_data, sc_hfetch_done_fn done, void *ud);
/* A Status answer's message ("pods \"x\" not found"), or the start of the
 * body, in buf. */
const char *sc__k8s_status_msg(const char *body, size_t len, char *buf, size_t size);
/* The wall clock in RFC 3339: with microseconds (Kubernetes MicroTime,
 * for Leases) or in whole seconds (Time, for conditions and Events). */
void sc__k8s_microtime(char *buf, size_t size);
void sc__k8s_time(char *buf, size_t size);
/* Percent-encodes s for a URL query or path segment. */
void sc__k8s_escape(const char *s, char *buf, size_t size);

/* ---- kelect.c ---- */
/* Starts reading the Lease every retry period. */
void sc__kelect_start(sc_k8s_t *k);
/* Gives the lease up (holder "") so a standby takes over at once; calls
 * released() when the write is answered. Returns false when there is
 * nothing to release (released() is then not called). */
bool sc__kelect_release(sc_k8s_t *k, void (*released)(sc_k8s_t *k));

/* ---- kwatch.c ---- */
sc_kwatch_t *sc__kwatch_new(sc_k8s_t *k, int kind);
void sc__kwatch_start(sc_kwatch_t *w);
void sc__kwatch_free(sc_kwatch_t *w);
bool sc__kwatch_synced(const sc_kwatch_t *w);

/* ---- kapply.c ---- */
sc_kwriter_t *sc__kwriter_new(sc_k8s_t *k);
void sc__kwriter_free(sc_kwriter_t *w);
/* Applies one cycle's decisions made on world (both borrowed for the
 * call): queues bindings, evictions, conditions and events. */
void sc__kwriter_apply(sc_kwriter_t *w, const sc_kworld_t *world, const sc_decisions_t *d);
/* Before a cycle: settles local state against the cache (bindings seen,
 * evictions done, nominations whose node is now free: those are bound). */
void sc__kwriter_reconcile(sc_kwriter_t *w);
/* Frees the local state and the explanations sent. */
void sc__klocal_clear(sc_k8s_t *k);
/* Leadership lost: drops every queued write and the local state. */
void sc__kwriter_drop(sc_kwriter_t *w);
/* Nominations waiting for their nodes. */
size_t sc__kwriter_nominated(const sc_kwriter_t *w);
/* A JSON merge patch of path (owned by the call, as is body), queued after
 * bindings and evictions; patched(k, key, status, body) is called with the
 * answer unless leadership is lost first (the write is then dropped). With
 * ev, that Event is written once the API server accepted the patch. */
typedef void (*sc_kwriter_patched_fn)(sc_k8s_t *k, const char *key, int status, const char *body,
                                      size_t len);
typedef struct sc_kwriter_event {
	const char *api, *kind; /* the involved object's; static strings */
	const char *type, *reason, *msg;
} sc_kwriter_event_t;
void sc__kwriter_patch(sc_kwriter_t *w, const char *key, const char *uid, char *path, json_t *body,
                       sc_kwriter_patched_fn patched, const sc_kwriter_event_t *ev);

/* ---- kstatus.c ---- */
/* PodGroup and Queue status, written back after each cycle's decisions
 * were applied: phase, pod counts, scheduling conditions with the pending
 * reason, and KAI's allocated/requested resources. Only what changed is
 * written, at most every few seconds per object, conditional on the
 * resourceVersion seen (a 409 waits for the watch to show the newer
 * object). Returns true when a write was put off (a cycle should follow). */
sc_kstatus_t *sc__kstatus_new(sc_k8s_t *k);
void sc__kstatus_free(sc_kstatus_t *s);
bool sc__kstatus_apply(sc_kstatus_t *s, const sc_kworld_t *world, const sc_decisions_t *d);
/* Is the status the watch now shows for key (a PodGroup or Queue of the
 * cache kind) the one this scheduler last wrote? Someone else's change is
 * answered by a cycle that writes ours again; our own echo is not. */
bool sc__kstatus_echo(sc_kstatus_t *s, int cache_kind, const char *key);
/* Leadership lost: forget what was sent. */
void sc__kstatus_drop(sc_kstatus_t *s);

#endif
