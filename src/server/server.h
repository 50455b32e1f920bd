/* Control plane internals shared by the files of src/server/.
 *
 * One sc_server_t per process: the event loop, the store, the HTTP server,
 * metrics and the scheduling loop. Everything runs on the loop's thread,
 * so a handler's read-modify-write against the store is never interleaved
 * with another writer. */
#ifndef SC_SERVER_SERVER_H
#define SC_SERVER_SERVER_H

#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "net/http.h"
#include "starcloud/manifest.h"
#include "store/store.h"

#define SC_API_PREFIX "/api/v1/"
#define SC_KEY_PREFIX "/registry/"
#define SC_MAX_NAME 253
#define SC_MAX_TOKEN_QUEUES 32

typedef struct sc_metrics sc_metrics_t;
typedef struct sc_sched sc_sched_t;
typedef struct sc_cache sc_cache_t;
typedef struct sc_ha sc_ha_t;
typedef struct sc_flow sc_flow_t;
typedef struct sc_watch_hub sc_watch_hub_t;
typedef struct sc_scaler sc_scaler_t;
typedef struct sc_schedstat sc_schedstat_t;
typedef struct sc_audit sc_audit_t;
typedef struct sc_logproxy sc_logproxy_t;

/* An object kind served under /api/v1/<plural>. */
typedef struct sc_kind {
	const char *plural; /* "jobs" */
	const char *kind;   /* "Job" */
	int queue_scoped;   /* tenants see only objects whose spec.queue is theirs */
	int readonly;       /* written by the server only (events) */
} sc_kind_t;

/* agent: a node agent's credential, bound to one node: it may register and
 * heartbeat that node (and so report its pods) and read jobs and
 * deployments, nothing else (docs/AGENT.md). */
enum sc_role { SC_ROLE_NONE = 0, SC_ROLE_ADMIN, SC_ROLE_TENANT, SC_ROLE_VIEWER, SC_ROLE_AGENT };

/* Who is calling, from the bearer token. */
typedef struct sc_principal {
	int role;
	char id[24];
	char queues[SC_MAX_TOKEN_QUEUES][SC_MAX_NAME + 1];
	size_t nqueues;
	char node[SC_MAX_NAME + 1]; /* agent tokens: the node they act for */
	char address[300];          /* agent tokens: the status address an admin fixed, or "" */
	int64_t expires;            /* unix seconds after which the token is refused; 0: never */
} sc_principal_t;

/* Keys of agent_pods (sc_server_t) that are no pod (every pod's key holds
 * a '/'): "any pod" (a node that has not called in since this server
 * started), and the number of the node's heartbeats taken. */
#define SC_AGENT_PODS_UNKNOWN "*"
#define SC_AGENT_PODS_SEQ "#"

/* Security settings from the server's flags (docs/SECURITY.md). */
typedef struct sc_server_sec {
	uint64_t watch_timeout_ms; /* a watch ends after this; the client resumes */
	int metrics_public;        /* /metrics without a token */
	int agents_need_cert;      /* agent tokens only with their node's client certificate */
} sc_server_sec_t;

typedef struct sc_server {
	uv_loop_t *loop;
	sc_store_t *store;
	sc_http_server_t *http;
	sc_metrics_t *metrics;
	sc_sched_t *sched;
	sc_cache_t *cache;     /* decoded objects, kept current by a store watch */
	sc_ha_t *ha;           /* leader election on etcd (ha.c) */
	sc_flow_t *flow;       /* flow control per principal (flow.c) */
	sc_watch_hub_t *watch; /* watch streams; revocation, timeouts (watch.c) */
	sc_schedstat_t *stat;  /* the scheduler's figures and history (schedstat.c) */
	sc_audit_t *audit;     /* who did what (audit.c) */
	sc_logproxy_t *logs;   /* pod logs fetched from agents (logs.c) */
	sc_server_sec_t sec;
	sc_tls_ctx_t *tls;        /* the listener's TLS context, or NULL */
	sc_tls_ctx_t *agent_tls;  /* client context for agents' https status ports */
	char node_key_secret[65]; /* derives each node's status-port key (nodekey.c) */
	uv_signal_t sigint, sigterm;
	uv_timer_t watchdog;          /* systemd WatchdogSec= pings (net/sdnotify.h) */
	const char *admin_token_file; /* --admin-token-file, or NULL: print it */
	uv_check_t commit;            /* group commit at the end of each loop iteration */
	uv_timer_t probe;             /* while the storage refuses writes (commit.c) */
	int ready;
	/* Node -> {"<kind>/<job>/<pod>": true}: the pods with a live process
	 * (running or still stopping) its agent listed in its last heartbeat,
	 * and those of a lapsed node the store bound there when they were
	 * evicted (agent_api.c, still_listed); a node given up
	 * (lease + fence time) is left out. Loop thread (agent_api.c); each
	 * cycle takes a copy (sched.c, read in sched_move.c) to move a pod only once its old
	 * node no longer runs it. Owned; NULL before the first heartbeat. A
	 * node known from before this server started that has not called in
	 * yet holds SC_AGENT_PODS_UNKNOWN: it may run anything. */
	json_t *agent_pods;
	/* What sc__sched_kick runs: sched.c's, set while the loop is up. */
	void (*kick)(struct sc_server *s);
	/* What sc__sched_writing runs: sched.c's, set while the loop is up. */
	void (*writing)(struct sc_server *s, const char *key, int on);
	size_t max_object;          /* bytes of an object as stored (API writes) */
	size_t queue_max[2];        /* jobs, deployments per queue unless the Queue says */
	int64_t durable_rev;        /* every write up to this revision is on disk */
	int64_t committed_rev;      /* every write up to this one is committed (commit.c) */
	int64_t void_from, void_to; /* revisions (void_from, void_to] were undone */
	int pipelined;              /* the store's fsync runs on a worker thread */
	int flushing;               /* that fsync is in flight */
	int stopping;
	unsigned long rollbacks_seen; /* store->rollbacks already dealt with */
	unsigned long store_epoch;    /* moves when the store undid writes */
	int storage_error;            /* < 0 while writes are refused */
	unsigned long long commit_failures;
	struct sc_pools *pools;   /* the node pool controller (pool_ctl.c) */
	struct sc_scaler *scaler; /* Deployments' load reports (deploy_scale.c) */
	char self_url[128];       /* how a local process reaches this API */
	const char *self_ca;      /* the CA such a process trusts it with (--agent-ca), or NULL */
	const char *data_dir;     /* --data-dir (borrowed) */
} sc_server_t;

/* The files below the API, which the others use and which use none of
 * them: kinds.c, reply.c, now.c, load.c, kick.c, and jobstatus.c (jobstatus.h). */

/* ---- kinds.c ---- */
const sc_kind_t *sc__kind_by_plural(const char *plural, size_t len);
const sc_kind_t *sc__kind_by_name(const char *kind);
/* Builds the key of an object. */
void sc__object_key(const sc_kind_t *k, const char *name, char *out, size_t outsz);
/* Sets metadata.resourceVersion to the store's revision, as text (no-op
 * for NULL or an object without metadata). */
void sc__object_set_rv(json_t *obj, int64_t mod_rev);
/* The string member key of o, or "" (absent, not a string, o NULL):
 * borrowed from o. */
const char *sc__str_of(json_t *o, const char *key);

/* ---- reply.c ---- */
/* Sends {"error":{...}}; field may be NULL. */
void sc__api_error(sc_http_req_t *r, int code, const char *reason, const char *field,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Sends a JSON document (consumes doc). */
void sc__api_json(sc_http_req_t *r, int code, json_t *doc);
/* Answers a failed store call rc: 503 ServiceUnavailable when the store
 * could not be reached (SC_EUNAVAIL: nothing was written; retry, maybe on
 * another server), else 500 "what: <error>". */
void sc__api_store_error(sc_http_req_t *r, int rc, const char *what);

/* ---- now.c ---- */
/* RFC 3339 UTC time of now, or of t (seconds since the epoch), into out. */
void sc__now_rfc3339(char *out, size_t outsz);
void sc__rfc3339(int64_t t, char *out, size_t outsz);

/* ---- load.c ---- */
/* Reading comes from the cache (cache.h), which every write this server
 * has been answered for has reached, with either store. */
/* A copy of object `name` of kind k to change, and its revision; NULL when
 * absent. New reference. */
json_t *sc__object_copy(sc_server_t *s, const sc_kind_t *k, const char *name, int64_t *mod_rev);
/* The same for the object that `who` may see; when it is absent or
 * hidden, answers r (404, no existence leak) and returns NULL. */
json_t *sc__api_load(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who,
                     const sc_kind_t *k, const char *name, int64_t *mod_rev);

/* Calls fn with every object of kind k (name and parsed object, both
 * borrowed for the call), parsed once per revision. fn must not write the
 * store (collect names, act after). 0. */
typedef void (*sc_object_fn)(sc_server_t *s, const char *name, json_t *obj, void *ud);
int sc__objects_each(sc_server_t *s, const sc_kind_t *k, sc_object_fn fn, void *ud);

/* Writes obj (borrowed; serialised now) as object `name` of kind k under
 * the condition expect, without waiting for the store (store.h); on
 * success asks for a cycle, then fn(res, ud) on the loop thread (fn may be
 * NULL). */
void sc__object_save(sc_server_t *s, const sc_kind_t *k, json_t *obj, int64_t expect,
                     sc_store_done_fn fn, void *ud);

/* ---- kick.c ---- */
/* Asks for a cycle soon (after a change); nothing while the loop is down. */
void sc__sched_kick(sc_server_t *s);
/* An API write of key is with the store (on), or was answered (off): its
 * change calls for no cycle by itself, since the writer kicks one when it
 * answers, after handing the cache the decoding its validation made (with
 * etcd the change arrives before the answer: a cycle between the two would
 * decode the object again). */
void sc__sched_writing(sc_server_t *s, const char *key, int on);

/* ---- api.c ---- */
int sc__api_register(sc_server_t *s);
/* ---- agent_api.c: node heartbeats, leases, pod reports ---- */
int sc__agent_api_register(sc_server_t *s);

/* ---- list.c ---- */
/* Answers a list (not a watch) of kind k from the cache, with ?limit= and
 * ?continue= paging; large lists are streamed. */
void sc__list_serve(sc_server_t *s, sc_http_req_t *r, const sc_kind_t *k, const sc_principal_t *who,
                    const char *sel);

/* ---- watch.c ---- */
/* bookmarks: the client asked for allowWatchBookmarks (a BOOKMARK event
 * every few seconds while nothing else is sent). */
void sc__watch_start(sc_server_t *s, sc_http_req_t *r, const sc_kind_t *k,
                     const sc_principal_t *who, const char *selector, int64_t from_rev,
                     int bookmarks);
/* Label selector "k=v,k2!=v2,k3": 1 when obj matches, 0 when not. */
int sc__selector_match(const char *selector, json_t *obj);
/* Checks a selector's syntax: 0, or SC_EINVAL with what is wrong in msg
 * ("labelSelector: \"a b\": ..."). */
int sc__selector_why(const char *selector, char *msg, size_t msgsz);

/* ---- auth.c ---- */
/* 1 when the principal's token has expired at unix time now. */
int sc__auth_expired(const sc_principal_t *who, int64_t now);
/* Creates the admin token at first start and prints it once. */
int sc__auth_init(sc_server_t *s);
/* Fills who from the Authorization header; 0, or SC_EINVAL (no valid token).
 * Answers nothing (flow.c classifies requests with it). */
int sc__auth_check(sc_server_t *s, sc_http_req_t *r, sc_principal_t *who);
/* The gate of every API request: refuses a Starcloud client too old for
 * this server (400 ClientTooOld, base/version.h), then authenticates
 * (401). On failure the request is answered and < 0 returned. */
int sc__auth_request(sc_server_t *s, sc_http_req_t *r, sc_principal_t *who);
/* 1 when a tenant may see an object of kind k (or a queue-scoped kind is
 * not involved), from the object's spec.queue or, for queues, its name. */
int sc__auth_can_see(const sc_principal_t *who, const sc_kind_t *k, json_t *obj);
int sc__auth_has_queue(const sc_principal_t *who, const char *queue);
int sc__auth_register(sc_server_t *s);
const char *sc__role_name(int role);
/* Mints an agent token bound to node (for the dev node pool provider) and
 * stores it through the store's asynchronous calls; fn gets 0 and the
 * secret (borrowed for the call) and id (names it for
 * sc__auth_token_delete) once it is stored, or < 0 (SC_EUNAVAIL when the
 * store closed first). fn runs exactly once, perhaps before this returns
 * (SQLite). */
typedef void (*sc_token_fn)(int rc, const char *secret, const char *id, void *ud);
void sc__auth_agent_token(sc_server_t *s, const char *node, sc_token_fn fn, void *ud);
/* Revokes the token of that id, without waiting for the store; missing is
 * fine. */
void sc__auth_token_delete(sc_server_t *s, const char *id);

/* ---- validate.c ---- */
/* Validates an object of kind k with the manifest decoder; on failure fills
 * field (the dotted path) and msg ("Job x: path: what was expected") and
 * returns SC_EINVAL. one may be NULL; otherwise, on success, *one (owned
 * by the caller, NULL for kinds the loop decodes from another view) is obj
 * decoded as the scheduling loop would decode it, and vh (when not NULL)
 * its view's digest: valid for a stored object only if it is stored
 * exactly as validated (sc__cache_give_decoded). */
int sc__validate_decode(const sc_kind_t *k, json_t *obj, char *field, size_t fieldsz, char *msg,
                        size_t msgsz, sc_manifest_obj_t **one, uint64_t vh[2]);
/* A digest of a decoder view (its canonical text): two views with equal
 * digests decode alike, so a follower keeps a decoding while it holds. */
void sc__view_digest(json_t *view, uint64_t out[2]);
/* The object as the decoder sees it: for jobs and deployments, status keeps
 * only the fields the scheduler reads back (pods, staleSince); the rest of
 * status (phase, reason, conditions) is written by the server for people.
 * An empty pods list, and a status left empty, are dropped (the same to
 * the decoder), so views compare equal when the decoder's input is.
 * Returns a new reference (obj itself when nothing is set aside). */
json_t *sc__decoder_view(const sc_kind_t *k, json_t *obj);

/* 1 when s is a valid object name (DNS subdomain rules). */
int sc__name_valid(const char *s);

/* ---- ops.c ---- */
/* 1 when kind k has the subresource sub ("explain", "drain"). */
int sc__subresource_known(const sc_kind_t *k, const char *sub);
/* Answers a request to /api/v1/<plural>/<name>/<sub>. */
void sc__subresource(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who,
                     const sc_kind_t *k, const char *name, const char *sub);

/* ---- metrics.c ---- */
sc_metrics_t *sc__metrics_new(void);
void sc__metrics_free(sc_metrics_t *m);
void sc__metrics_observe_http(const char *method, const char *route, int status, double seconds,
                              void *ud);
int sc__metrics_register(sc_server_t *s);

/* ---- commit.c: group commit, storage failures ---- */
void sc__commit_start(sc_server_t *s);
void sc__commit_stop(sc_server_t *s);

/* ---- sched.c ---- */
int sc__sched_start(sc_server_t *s);
void sc__sched_stop(sc_server_t *s);

/* ---- admit.c ---- */
/* Checks of a job or deployment that need server state (pod name length,
 * spec.runAsUser against its queue's spec.podSecurity); answers 400 and
 * returns < 0 when it may not be written. */
int sc__admit(sc_server_t *s, sc_http_req_t *r, const sc_kind_t *k, json_t *obj);

/* ---- audit.c: one JSON line per write and per denied request ---- */
/* Opens DIR/audit.log (rotated at max_bytes into audit.log.1). */
int sc__audit_open(sc_server_t *s, const char *dir, size_t max_bytes);
void sc__audit_close(sc_server_t *s);
/* Records a request that was answered with status (0: still open). who may
 * be NULL (no valid token). Reads are recorded only when denied. */
void sc__audit_request(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who, int status);

/* ---- nodekey.c: the server's credential towards agents ---- */
/* Loads (or creates, once per cluster) the secret node keys derive from. */
int sc__nodekey_init(sc_server_t *s);
/* The key of one node: HMAC-SHA256(secret, node) in hex (65 bytes). The
 * agent of that node learns it from its heartbeat answers and accepts
 * only it on /pods and /logs. */
void sc__nodekey(const sc_server_t *s, const char *node, char out[65]);

/* ---- logs.c: GET /api/v1/jobs/{name}/logs through the server ---- */
int sc__logs_register(sc_server_t *s);
void sc__logs_close(sc_server_t *s);
/* Answers a logs request for a job or deployment the caller may read. */
void sc__logs_serve(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who, const sc_kind_t *k,
                    const char *name);

/* ---- ui.c ---- */
int sc__ui_register(sc_server_t *s);

/* ---- daemon.c: flags, start-up, group commit, shutdown ---- */
int sc_server_main(int argc, char **argv);

#endif
