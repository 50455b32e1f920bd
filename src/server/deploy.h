/* Deployments: the serving side of the control plane (docs/SERVING.md).
 *
 * A Deployment is kept running as a serving job whose tasks are its live
 * (version, role) pairs: "main-v1" (role both), or "prefill-v1" and
 * "decode-v1" when disaggregated; during a canary the new version's tasks
 * sit beside the stable ones ("main-v2"). Pods are "<deployment>-<task>-<i>".
 *
 * Server-owned status fields (besides the scheduling loop's phase, reason,
 * conditions and pods):
 *   templates     {task: {version, role, replicas, template}}: what each
 *                 task runs, so a replacement pod of the stable version runs
 *                 the stable template after spec.template moved on; read by
 *                 the node agent;
 *   rollout       {stable, canary, step, steps, weights, phase,
 *                 lastTransition, reason, analysis, evidence, pausedBy};
 *   endpoints     [{url, pod, node, version, role, ready}], ready replicas;
 *   stableVersion the gateway's name for rollout.stable.
 *
 * deploy_view.c derives the live tasks (the plan) and the scheduler's view;
 * deploy_ctl.c runs the controller (steps, promotion, clean-up, endpoints)
 * and the write hook that starts a canary; rollout.c is the API. */
#ifndef SC_SERVER_DEPLOY_H
#define SC_SERVER_DEPLOY_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "server/server.h"
#include "starcloud/buf.h"
#include "starcloud/manifest.h"

#define SC_DEPLOY_DEFAULT_PORT 9000
#define SC_DEPLOY_VERSION_MAX 63 /* longest version string accepted */
#define SC_DEPLOY_TASK_MAX 48    /* task names: role + "-" + slug */
#define SC_DEPLOY_MAX_TASKS 4    /* two versions x two roles */
#define SC_DEPLOY_DEFAULT_WINDOW 60
#define SC_DEPLOY_DEFAULT_MAX_ERROR 0.05
#define SC_DEPLOY_DEFAULT_MIN_REQUESTS 20 /* canary requests a step needs */

/* Status keys the deployment controller owns; the scheduling loop keeps
 * them when it rewrites a status. NULL-terminated. */
extern const char *const sc__deploy_status_keys[];

/* One live (version, role) pair. */
typedef struct sc_deploy_task {
	char name[SC_DEPLOY_TASK_MAX + 1];
	char version[SC_DEPLOY_VERSION_MAX + 1];
	const char *role; /* "both", "prefill", "decode" (static) */
	int replicas;     /* pods wanted now (those draining included) */
	int serving;      /* of them, those that serve: the endpoints (SC_SCALE_DRAIN_S) */
	int full;         /* replicas of the version at 100 % */
	bool canary;
	json_t *tpl; /* borrowed effective template, or NULL */
} sc_deploy_task_t;

typedef struct sc_deploy_plan {
	sc_deploy_task_t t[SC_DEPLOY_MAX_TASKS];
	size_t n;
	char stable[SC_DEPLOY_VERSION_MAX + 1];
	char canary[SC_DEPLOY_VERSION_MAX + 1]; /* "" without a live canary */
	int weight;                             /* canary traffic, percent */
	/* spec.autoscaling: the autoscaler's count (status.autoscaling.replicas,
	 * minReplicas before its first decision) for every version at 100 %,
	 * instead of spec.replicas; -1 without autoscaling. */
	int autoscaled;
	/* The same per role of a disaggregated Deployment
	 * (spec.disaggregation.ROLE.autoscaling, status.autoscaling.ROLE.replicas):
	 * [0] prefill, [1] decode; -1 for a role not autoscaled. */
	int role_autoscaled[2];
	/* The counts held while a scale-down drains (sc__deploy_role_held):
	 * [0] whole, [1] prefill, [2] decode; -1 when not autoscaled. */
	int held[3];
} sc_deploy_plan_t;

/* ---- deploy_view.c ---- */
/* The replica count an autoscaled Deployment runs at 100 %, or -1. */
int sc__deploy_autoscaled(json_t *dep);
/* The same for role ("both", "prefill" or "decode") of dep: -1 when that
 * role is not autoscaled. */
int sc__deploy_role_autoscaled(json_t *dep, const char *role);
/* Scale-down drain: after an autoscaler's lower count the replicas it
 * leaves out leave the endpoints at once (the gateways stop choosing them)
 * but stay in the plan, GPUs held, until status.autoscaling[.ROLE].drain
 * {from, until} expires SC_SCALE_DRAIN_S later; then they are released, so
 * the requests at them end there (a stream still running then is resumed
 * by the gateway on another decode replica). The count the role's pods are
 * kept at: the autoscaler's, or drain.from while it lasts. */
#define SC_SCALE_DRAIN_S 5
int sc__deploy_role_held(json_t *dep, const char *role);
/* The autoscaled roles of dep, into roles (at most 2; static strings):
 * {"both"}, or the disaggregated roles that have autoscaling. */
size_t sc__deploy_scaled_roles(json_t *dep, const char **roles);
/* spec.version as a string ("1" when absent; integers printed). */
void sc__deploy_version(json_t *dep, char *out, size_t outsz);
/* Live tasks of dep from its spec and status. Templates are borrowed from
 * dep. Returns 0 or SC_EINVAL (a version too long). */
int sc__deploy_plan(json_t *dep, sc_deploy_plan_t *p);
/* The task of pod "<dep>-<task>-<i>" in p, with its index; NULL if none. */
const sc_deploy_task_t *sc__deploy_task_of(const sc_deploy_plan_t *p, const char *dep,
                                           const char *pod, long *index);
/* The scheduler's view of a Deployment: a serving Job whose tasks are the
 * plan's, with the pods of those tasks (new reference). */
json_t *sc__deploy_view(json_t *dep);
/* The templates entries for version v of spec (one per role), named so
 * they differ from every task in avoid (may be NULL); added to out. */
void sc__deploy_record(json_t *spec, const char *v, json_t *avoid, json_t *out);
/* Rollout settings: effective steps (ending at 100), window (s), max rate,
 * canary requests a step needs. */
size_t sc__deploy_steps(json_t *dep, int *steps, size_t max);
int64_t sc__deploy_window(json_t *dep);
double sc__deploy_max_error(json_t *dep);
int64_t sc__deploy_min_requests(json_t *dep);

/* ---- deploy_ctl.c ---- */
int sc__deploy_start(sc_server_t *s);
/* One pass over every Deployment. Also run right after each scheduling
 * cycle, in the same loop callback, so no API request sees a status the
 * scheduler wrote that the controller has not completed yet. */
void sc__deploy_tick(sc_server_t *s);
/* API write hook: obj (a Deployment about to be stored, status settled)
 * replaces old (NULL on create). Records templates and starts, retargets
 * or ends a canary when spec.version changed. */
void sc__deploy_on_write(json_t *old, json_t *obj);
/* Brings obj's controller-owned status up to date at time now (s):
 * rollout steps, promotion, clean-up of pods no longer wanted, endpoints.
 * nodes maps node name -> address (borrowed); events (may be NULL) gets
 * new Event objects. */
void sc__deploy_reconcile(sc_server_t *s, json_t *obj, json_t *nodes, int64_t now, json_t *events);
/* Rollout transitions (rollout.c and the controller). reason is copied. */
void sc__deploy_rollback(sc_server_t *s, json_t *obj, const char *reason, const char *why,
                         json_t *events);
void sc__deploy_promote(json_t *obj, int64_t now);
void sc__deploy_pause(json_t *obj, bool pause, int64_t now);
/* A gateway's analysis report of the live canary: adds it to the step's
 * evidence (requests, errors, the time of the last report). */
void sc__deploy_evidence_add(json_t *obj, json_int_t requests, json_int_t errors, int64_t now);
/* Writes obj (conditional on rev; serialised now) and events in one
 * transaction without waiting for the store (store.h); on success kicks
 * the scheduler, then fn(res, ud) (fn may be NULL; a conflict, an API
 * write or a heartbeat first, is the next tick's for the controller). */
void sc__deploy_save(sc_server_t *s, json_t *obj, int64_t rev, json_t *events, sc_store_done_fn fn,
                     void *ud);
/* Node name -> address ("" when unknown) for every node (new reference). */
json_t *sc__deploy_node_addresses(sc_server_t *s);

/* ---- deploy_scale.c: replica autoscaling (spec.autoscaling) ---- */
#define SC_SCALE_GATEWAY_MAX 128 /* longest gateway id in a report */

/* What a gateway saw of one Deployment's model since its last report. */
typedef struct sc_scale_signal {
	long long inflight; /* requests at the replicas now */
	long long queued;   /* requests held at the gateway, waiting for a replica */
	long long busy;     /* replicas with a request in flight */
	long long requests; /* requests that ended in the interval */
	double ttft_p95;    /* seconds, over the interval; 0 without requests */
	/* One role of a disaggregated Deployment (0 for a whole replica):
	 * prompt tokens of the requests waiting for or in their prefill, and
	 * the decode replicas' generated tokens per second over the interval. */
	long long prompt_tokens;
	double tps;
} sc_scale_signal_t;

/* Keeps gateway's latest report for Deployment dep (loop thread); dep is
 * the autoscaler's key: the name, or "name/prefill", "name/decode" for the
 * roles of a disaggregated one (deploy_ctl.c). */
void sc__scale_report(sc_server_t *s, const char *dep, const char *gateway,
                      const sc_scale_signal_t *sig, int64_t now);
/* The replica count Deployment dep should have now, from its current count
 * and the fresh reports (as: its decoded spec.autoscaling); *sig gets the
 * summed signal and why a sentence when the count changes. */
int sc__scale_decide(sc_server_t *s, const char *dep, const sc_autoscaling_t *as, int current,
                     int64_t now, sc_scale_signal_t *sig, char *why, size_t whysz);
/* Counts a decision for /metrics. */
void sc__scale_count(sc_server_t *s, bool up);
/* Forgets Deployments not seen for an hour. */
void sc__scale_sweep(sc_server_t *s, int64_t now);
void sc__scale_metrics(sc_server_t *s, sc_buf_t *b);
void sc__scale_free(sc_server_t *s);

/* ---- rollout.c ---- */
/* GET|POST /api/v1/deployments/{name}/rollout and POST .../rollout/report. */
void sc__rollout_api(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who, const char *name,
                     const char *sub);

/* ---- sched_write.c hooks ---- */
/* The "host:port" pairs the deployment pods deps (stored objects) hold,
 * for sc__deploy_bind_port; addrs maps node names to their addresses
 * (kept under ""). New reference. */
json_t *sc__deploy_ports_in_use(json_t *addrs, json_t *deps);
/* Picks a port for a new pod entry np of deployment obj on its node, not
 * used by another deployment pod there, and marks it in used (from
 * sc__deploy_ports_in_use, kept across one cycle). */
void sc__deploy_bind_port(json_t *obj, json_t *np, json_t *used);
/* Copies the controller-owned keys of old status into st. */
void sc__deploy_keep_status(json_t *old, json_t *st);

#endif
