/* The node agent's state: the agent and its pods, as every file of
 * src/agent/ sees them, and the few services they all use. The modules sit
 * on top of this file and below agent.c, which starts them:
 *
 *   state.c    this header's functions (the loop's clock, pod lookup, and
 *              asking for a report or a reconcile through the timers)
 *   podenv.c   a pod's folder, logs, environment, cgroups (v2)
 *   cgv1.c     pod limits on cgroup v1
 *   podstore.c pod records on disk (adoption), retention of old folders
 *   probe.c    startup / liveness / readiness probes (http, tcp, exec)
 *   spawn.c    gated start of a pod's processes: nothing runs before its
 *              record is written (pod and exec probes)
 *   pod.c      one pod = one process group: spawn, restarts with back-off,
 *              graceful stop (uses podenv, podstore, probe, spawn)
 *   sync.c     list + watch of jobs and deployments, desired pods (uses pod)
 *   agent_metrics.c  /metrics: pods, the server link, NVML device figures
 *   status.c   the agent's status port: /healthz, /pods, /logs, /metrics
 *              (uses pod, agent_metrics)
 *   agent.c    start-up, signals, heartbeat and status reports
 *   gpu.c, agent_opts.c, pod_serving.c, backoff.c, gpudecl.c, retention.c
 *
 * One event loop, one thread: every callback runs on the loop, so the pod
 * list is never touched concurrently. */
#ifndef SC_AGENT_STATE_H
#define SC_AGENT_STATE_H

#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "agent/gpu.h"
#include "agent/podsec.h"
#include "agent/spawn.h"
#include "base/parse.h"
#include "net/http.h"
#include "net/hfetch.h"
#include "starcloud/manifest.h" /* SC_RESTART_* */
#include "net/tlsflags.h"
#include "starcloud/buf.h"

typedef struct sc_agent sc_agent_t;
typedef struct sc_pod sc_pod_t;
typedef struct sc_probe sc_probe_t;

#define SC_AGENT_NAME_MAX 253
#define SC_AGENT_MSG_MAX 512 /* room for two paths (podreach.h) */

/* The cgroup v1 controllers each pod is put in (cgv1.c): its limits, and
 * the freezer that stops it whole (cgkill.h). */
enum { SC_CGV1_CPU, SC_CGV1_MEMORY, SC_CGV1_PIDS, SC_CGV1_FREEZER, SC_CGV1_NCTL };

typedef struct sc_agent sc_agent_t;
typedef struct sc_pod sc_pod_t;
typedef struct sc_probe sc_probe_t;

typedef struct sc_agent_opts {
	const char *server; /* http://host:port, no trailing slash */
	const char *token;  /* points at sc_agent_t.token once resolved */
	const char *token_file;
	const char *name;
	const char *gpus;   /* declared GPUs, or NULL */
	const char *labels; /* k=v,... or NULL */
	const char *data_dir;
	const char *nvml_lib;  /* NULL: libnvidia-ml.so.1 (or $STARCLOUD_NVML_LIB) */
	const char *advertise; /* host:port the server and CLI use to reach us */
	sc_hostport_t listen;  /* the status port */
	int64_t cpu_milli;
	int64_t memory;
	uint64_t heartbeat_ms; /* lease renewal; the lease is 3 of these */
	uint64_t backoff_base_ms, backoff_max_ms, backoff_reset_ms;
	uint64_t grace_ms;              /* default termination grace period */
	size_t log_max;                 /* bytes per log file before rotation */
	uint64_t pod_retention_ms;      /* folders of finished pods kept this long */
	int keep_pods;                  /* and at most this many of them */
	int drain;                      /* stop pods on SIGTERM */
	int fence;                      /* --fence-on-lease-loss: accepted, fencing is always on */
	uint64_t fence_ms;              /* --fence-time: the server waits lease + this */
	const char *config;             /* --config FILE */
	int check_config;               /* --check-config: check, print, exit */
	int pod_uid_base;               /* pods run as uid base + n (podsec.c) */
	int pod_pids_max;               /* pids.max of each pod (v1 or v2) */
	const char *ca;                 /* CA of an https:// server */
	const char *metrics_token_file; /* the scrape secret of /metrics */
	int metrics_public;             /* /metrics without a credential */
	const char *dev_dir;            /* where the GPU device nodes are (/dev) */
	const char *client_cert, *client_key; /* mTLS towards the server */
	sc_tls_serve_flags_t tls;             /* the status port */
} sc_agent_opts_t;

/* One watched collection (jobs or deployments). */
typedef struct sc_watch {
	sc_agent_t *a;
	const char *plural; /* "jobs" */
	const char *kind;   /* "Job" */
	sc_hcli_req_t *req;
	sc_buf_t buf;                     /* partial line of the stream */
	int64_t rev;                      /* last revision seen; 0: list first */
	json_t *cache;                    /* name -> latest object (owned) */
	json_t *paging;                   /* the list being read, page by page (owned), or NULL */
	int64_t list_rev;                 /* the first page's revision */
	char cont[SC_AGENT_NAME_MAX + 1]; /* the next page's token */
	uv_timer_t retry;
} sc_watch_t;

struct sc_agent {
	uv_loop_t *loop;
	sc_agent_opts_t o;
	sc_gpu_inv_t gpus;
	sc_gpu_sampler_t *sampler; /* NVML for /metrics, NULL with declared GPUs */
	sc_hcli_t *http;           /* the loop's HTTP client (net/hclient.h) */
	sc_http_server_t *status;
	sc_pod_t *pods;
	size_t npods;
	sc_watch_t watches[2];
	uv_timer_t hb_timer, report_timer, tick_timer, resync_timer, fence_timer;
	/* What the two timers run, set by their owners at start-up (agent.c
	 * sends reports, sync.c reconciles): the modules below them ask
	 * through sc__agent_report_soon and sc__agent_resync_soon. */
	uv_timer_cb report_cb, resync_cb;
	uv_signal_t sigterm, sigint;
	uv_timer_t watchdog; /* systemd WatchdogSec= pings (net/sdnotify.h) */
	sc_hcli_req_t *report_req;
	int registered;
	int report_again;     /* a change came while a report was in flight */
	int hb_failing;       /* the last heartbeat failed */
	uint64_t last_hb_ok;  /* uv_now of the last accepted heartbeat */
	uint64_t report_sent; /* uv_now when the in-flight report was sent */
	int fenced;           /* pods stopped for a lost lease: start none */
	uint64_t fence_at;    /* uv_now of the fence deadline armed last; 0: none */
	int stopping;
	int cgroup_ok;     /* cgroup v2: each pod gets a cgroup there */
	int cgroup_limits; /* ... with cpu and memory limits (the controllers are on) */
	int cgroup_pids;   /* the pids controller is on: pids.max per pod */
	unsigned ticks;    /* seconds since start, for hourly chores */
	/* The name of the agent's folder under every cgroup hierarchy (v2,
	 * each v1 controller, devices): starcloud-NODE-HASH (cgname.h). */
	char cgroup_name[256];
	char cgroup_root[300]; /* /sys/fs/cgroup/cgroup_name */
	/* cgroup v1 limits (cgv1.c), used where v2 has no controllers. */
	struct {
		int ok;         /* the controller's hierarchy is writable */
		char root[512]; /* CTL/OWN/cgroup_name */
		char home[600]; /* CTL/OWN/tasks: where the agent's thread returns */
	} cgv1[SC_CGV1_NCTL];
	int devcg_ok;         /* pods get devices cgroups (devcg.c) */
	int devbpf_ok;        /* cgroup v2: pods get BPF device programs (devbpf.h) */
	char devcg_root[512]; /* DEVICES/cgroup_name */
	char devcg_home[600]; /* the agent's own cgroup.procs there */
	char advertise[128];
	char server[520]; /* the server in use, from --server URL1,URL2 */
	size_t server_idx;
	char token[512];          /* our credential (--token-file, $STARCLOUD_TOKEN) */
	char status_key[65];      /* the server's credential on our status port; "" */
	char metrics_token[512];  /* --metrics-token-file's secret, or "" */
	int switch_users;         /* root: pods run as their own uid (podsec.c) */
	json_t *uids;             /* queue -> uid given on this node (podsec.c) */
	sc_tls_ctx_t *tls;        /* the status port's, or NULL */
	sc_tls_ctx_t *tls_client; /* https to the server: --ca, --client-cert/key */
	sc_hcli_t *probe_http;    /* HTTP probes of pods: https without verification */
	sc_tls_ctx_t *probe_tls;  /* (Kubernetes' scheme: HTTPS), its context */
};

enum sc_probe_kind { SC_PROBE_STARTUP = 0, SC_PROBE_LIVENESS, SC_PROBE_READINESS, SC_PROBE_KINDS };
enum sc_pod_state {
	SC_PS_RUNNING = 0, /* process alive */
	SC_PS_BACKOFF,     /* waiting to restart */
	SC_PS_SUCCEEDED,
	SC_PS_FAILED,
};

struct sc_pod {
	sc_pod_t *next;
	sc_agent_t *a;
	char kind[16]; /* "Job" or "Deployment" */
	char job[SC_AGENT_NAME_MAX + 1];
	char name[SC_AGENT_NAME_MAX + 1];
	int64_t generation;  /* assignment generation, 0 if none */
	char started_at[40]; /* binding time (identity without generation) */
	json_t *task;        /* owned: command, args, env, workingDir, probes... */
	json_t *binding;     /* owned: the status.pods entry */
	int restart_policy;
	int backoff_limit;
	uint64_t grace_ms;

	sc_child_t child;               /* the process we started (spawn.h) */
	int pid;                        /* the process (group leader), 0 if none */
	unsigned long long start_ticks; /* its start time: guards against pid reuse */
	int adopted;                    /* started by an earlier agent: not our child */
	int pidfd;                      /* adopted: readable when it exits, or -1 */
	uv_poll_t pidpoll;
	int alive;        /* the process is running */
	int state;        /* enum sc_pod_state */
	int stopping;     /* being stopped for good */
	int restart_kill; /* killed by a failed probe: restart */
	int started;      /* startup probe passed (or none) */
	int ready;
	int restarts, failures, exit_code, has_exit;
	long long oom_base; /* OOM kills in its memory cgroup when it started, -1 unknown */
	char reason[24];    /* why the last process ended, as Kubernetes: OOMKilled; "" */
	char message[SC_AGENT_MSG_MAX];
	uint64_t started_ms;
	uint64_t backoff_ms;
	uv_timer_t timer; /* back-off or grace period */
	sc_probe_t *probes[SC_PROBE_KINDS];
	/* A probe's verdict goes here (pod.c's, set when the pod is made). */
	void (*on_verdict)(sc_pod_t *p, int kind, int ok, const char *msg);
	int log_fd;
	char dir[512];
	sc_podsec_t sec; /* the uid and gid it runs as (podsec.c) */
	int closing;     /* finished: handles are being closed */
	int proc_open;   /* child's watcher is open and not yet closed */
	int handles_open;
};

/* The loop's clock, brought up to date. */
uint64_t sc__agent_now_ms(sc_agent_t *a);
/* Asks for a status report soon (a pod changed). */
void sc__agent_report_soon(sc_agent_t *a);
/* 1 while the node's lease holds (a fence deadline is armed and ahead, and
 * the pods are not fenced): a pod's process may be let run (spawn.h). */
int sc__agent_lease_holds(sc_agent_t *a);
/* Reconciles every watched object soon (a stopped pod made room). */
void sc__agent_resync_soon(sc_agent_t *a);
/* The pod job/name on this node, or NULL. */
sc_pod_t *sc__pod_find(sc_agent_t *a, const char *job, const char *name);

#endif
