/* Node agent internals shared by the files of src/agent/.
 *
 *   agent.c   options, start-up, signals, heartbeat and status reports
 *   sync.c    list + watch of jobs and deployments, desired pods, fencing
 *   pod.c     one pod = one process group: spawn, env, logs, cgroups,
 *             restarts with back-off, graceful stop
 *   probe.c   startup / liveness / readiness probes (http, tcp, exec)
 *   status.c  the agent's status port: /healthz, /pods, /logs
 *   gpu.c     GPU discovery (NVML or declared)
 *
 * One event loop, one thread: every callback runs on the loop, so the pod
 * list is never touched concurrently. */
#ifndef SC_AGENT_AGENT_H
#define SC_AGENT_AGENT_H

#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "agent/gpu.h"
#include "base/parse.h"
#include "net/http.h"
#include "net/httpc.h"
#include "starcloud/buf.h"

#define SC_AGENT_NAME_MAX 253
#define SC_AGENT_MSG_MAX 256

typedef struct sc_agent sc_agent_t;
typedef struct sc_pod sc_pod_t;
typedef struct sc_probe sc_probe_t;

typedef struct sc_agent_opts {
	const char *server; /* http://host:port, no trailing slash */
	const char *token;
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
	uint64_t grace_ms;         /* default termination grace period */
	size_t log_max;            /* bytes per log file before rotation */
	uint64_t pod_retention_ms; /* folders of finished pods kept this long */
	int keep_pods;             /* and at most this many of them */
	int drain;                 /* stop pods on SIGTERM */
	int fence;                 /* stop pods when the lease cannot be renewed */
	const char *config;        /* --config FILE */
	int check_config;          /* --check-config: check, print, exit */
} sc_agent_opts_t;

/* One watched collection (jobs or deployments). */
typedef struct sc_watch {
	sc_agent_t *a;
	const char *plural; /* "jobs" */
	const char *kind;   /* "Job" */
	sc_httpc_req_t *req;
	sc_buf_t buf;  /* partial line of the stream */
	int64_t rev;   /* last revision seen; 0: list first */
	json_t *cache; /* name -> latest object (owned) */
	uv_timer_t retry;
} sc_watch_t;

struct sc_agent {
	uv_loop_t *loop;
	sc_agent_opts_t o;
	sc_gpu_inv_t gpus;
	sc_httpc_t *http;
	sc_http_server_t *status;
	sc_pod_t *pods;
	size_t npods;
	sc_watch_t watches[2];
	uv_timer_t hb_timer, report_timer, tick_timer, resync_timer, fence_timer;
	uv_signal_t sigterm, sigint;
	uv_timer_t watchdog; /* systemd WatchdogSec= pings (net/sdnotify.h) */
	sc_httpc_req_t *report_req;
	int registered;
	int report_again;     /* a change came while a report was in flight */
	int hb_failing;       /* the last heartbeat failed */
	uint64_t last_hb_ok;  /* uv_now of the last accepted heartbeat */
	uint64_t report_sent; /* uv_now when the in-flight report was sent */
	int fenced;           /* pods stopped for a lost lease: start none */
	int stopping;
	int cgroup_ok;
	unsigned ticks; /* seconds since start, for hourly chores */
	char cgroup_root[256];
	char advertise[128];
	char server[520]; /* the server in use, from --server URL1,URL2 */
	size_t server_idx;
};

/* ---- agent.c ---- */
/* Asks for a status report soon (a pod changed). */
void sc__agent_report_soon(sc_agent_t *a);
uint64_t sc__agent_now_ms(sc_agent_t *a);

/* ---- sync.c ---- */
/* Initialises the watch handles (once, before anything can fail). */
void sc__sync_init(sc_agent_t *a);
void sc__sync_start(sc_agent_t *a);
/* Lists and watches again from scratch (after the server came back). */
void sc__sync_restart(sc_agent_t *a);
void sc__sync_stop(sc_agent_t *a);
/* Reconciles every cached object soon (a stopped pod made room). */
void sc__sync_resync(sc_agent_t *a);
/* Closes the watch handles and frees the caches. */
void sc__sync_free(sc_agent_t *a);

/* ---- status.c ---- */
int sc__status_start(sc_agent_t *a);

#endif
