/* `starcloud server [--listen 127.0.0.1:7070] [--data-dir DIR]`: the control
 * plane daemon. Opens the store, mints the first admin token, serves the
 * API and runs the scheduling loop on one libuv loop until SIGINT/SIGTERM. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "base/flagfile.h"
#include "net/sdnotify.h"
#include "base/cmdline.h"
#include "net/tlsflags.h"
#include "net/tlsreload.h"
#include "base/log.h"
#include "base/version.h"
#include "server/cache.h"
#include "server/deploy.h"
#include "server/flow.h"
#include "server/ha.h"
#include "server/metrics.h"
#include "server/pool.h"
#include "server/server.h"
#include "server/watch.h"
#include "server/schedstat.h"
#include "starcloud/error.h"

typedef struct opts {
	sc_hostport_t listen;
	const char *data_dir;
	const char *store;       /* --store URL, or NULL: SQLite in data_dir */
	const char *etcd_prefix; /* --etcd-prefix */
	int leader_ttl;          /* --leader-ttl seconds */
	size_t max_body;
	const char *admin_token_file; /* --admin-token-file */
	const char *config;           /* --config */
	int check_config;             /* --check-config */
	size_t max_object, queue_max_jobs, queue_max_deployments;
	size_t max_conns, max_conns_per_client;
	size_t flow_queue;
	int no_flow; /* --no-flow-control (hidden: the benchmark's "before") */
	size_t watch_buffer;
	uint64_t flow_wait;                                  /* ms */
	uint64_t header_timeout, body_timeout, idle_timeout; /* ms */
	uint64_t watch_timeout_ms;
	int metrics_public;
	size_t audit_max;
	sc_tls_serve_flags_t tls;
	int agents_need_cert;
	const char *agent_ca;
} opts_t;

static const sc_flag_t server_flags[] = {
    {.name = "--listen",
     SC_FLAG_AT(ADDR, opts_t, listen),
     .def = "127.0.0.1:7070",
     .help = "address to serve the API on"},
    {.name = "--data-dir",
     SC_FLAG_AT(STR, opts_t, data_dir),
     .meta = "DIR",
     .def = "starcloud-data",
     .help = "where the store lives"},
    {.name = "--max-body",
     SC_FLAG_AT(SIZE, opts_t, max_body),
     .min = 1024,
     .max = 64 << 20,
     .def = "3Mi",
     .help = "largest request body accepted (413)"},
    {.name = "--max-object-size",
     SC_FLAG_AT(SIZE, opts_t, max_object),
     .min = 1024,
     .max = 64 << 20,
     .def = "1536Ki",
     .help = "largest object stored, after a patch is applied (413; etcd's\n"
             "request limit is 1.5 MiB)"},
    {.name = "--queue-max-jobs",
     SC_FLAG_AT(SIZE, opts_t, queue_max_jobs),
     .meta = "N",
     .max = 10000000,
     .def = "20000",
     .help = "jobs a queue may hold unless its spec.maxObjects.jobs says (403)"},
    {.name = "--queue-max-deployments",
     SC_FLAG_AT(SIZE, opts_t, queue_max_deployments),
     .meta = "N",
     .max = 10000000,
     .def = "2000",
     .help = "deployments a queue may hold unless its spec.maxObjects says (403)"},
    {.name = "--store",
     SC_FLAG_AT(STR, opts_t, store),
     .meta = "sqlite:PATH|etcd://H:P[,H:P...]",
     .help = "sqlite:PATH (default: the data dir) or etcd://host:port,...\n(several servers, "
             "one elected leader; docs/HA.md)"},
    {.name = "--etcd-prefix",
     SC_FLAG_AT(STR, opts_t, etcd_prefix),
     .meta = "PREFIX",
     .help = "etcd key prefix (default /starcloud/)"},
    {.name = "--leader-ttl",
     SC_FLAG_AT(INT, opts_t, leader_ttl),
     .meta = "SECONDS",
     .min = 2,
     .max = 60,
     .def = "5",
     .help = "leader lease"},
    {.name = "--admin-token-file",
     SC_FLAG_AT(STR, opts_t, admin_token_file),
     .meta = "FILE",
     .help = "write the first admin token to FILE (mode 0600)\ninstead of printing it"},
    SC_FLAGS_CONFIG(opts_t),
    {.kind = SC_FLAG_SECTION, .help = "Connections (docs/CONTROL_PLANE.md)"},
    {.name = "--max-conns",
     SC_FLAG_AT(SIZE, opts_t, max_conns),
     .meta = "N",
     .min = 4,
     .max = 1 << 20,
     .def = "1024",
     .help = "open connections at most; past it the longest idle one closes,\n"
             "or a new one gets 503"},
    {.name = "--max-conns-per-client",
     SC_FLAG_AT(SIZE, opts_t, max_conns_per_client),
     .meta = "N",
     .min = 1,
     .max = 1 << 20,
     .def = "256",
     .help = "open connections from one address at most; past it that\n"
             "address's longest idle one closes, or a new one gets 429"},
    {.name = "--header-timeout",
     SC_FLAG_AT(DURATION, opts_t, header_timeout),
     .min = 100,
     .max = 3600e3,
     .def = "10s",
     .help = "a request's head must arrive within this of its first byte (408)"},
    {.name = "--body-timeout",
     SC_FLAG_AT(DURATION, opts_t, body_timeout),
     .min = 100,
     .max = 3600e3,
     .def = "30s",
     .help = "a request's body must arrive within this of its head (408)"},
    {.name = "--idle-timeout",
     SC_FLAG_AT(DURATION, opts_t, idle_timeout),
     .min = 100,
     .max = 86400e3,
     .def = "60s",
     .help = "a keep-alive connection idle this long is closed"},
    {.name = "--flow-queue",
     SC_FLAG_AT(SIZE, opts_t, flow_queue),
     .meta = "N",
     .min = 1,
     .max = 100000,
     .def = "64",
     .help = "requests of one tenant (token) waiting for their fair share at\n"
             "most; more get 429 with Retry-After"},
    {.name = "--flow-wait",
     SC_FLAG_AT(DURATION, opts_t, flow_wait),
     .min = 10,
     .max = 600e3,
     .def = "5s",
     .help = "a tenant's request waiting longer than this for its share gets 429"},
    {.name = "--no-flow-control",
     SC_FLAG_AT(BOOL, opts_t, no_flow),
     .help = "no flow control, and every answer waits for the group commit (as before\n"
             "issue 16; for benchmarks only)",
     .flags = SC_FLAG_HIDDEN},
    {.name = "--watch-buffer",
     SC_FLAG_AT(SIZE, opts_t, watch_buffer),
     .min = 64 << 10,
     .max = 1 << 30,
     .def = "8Mi",
     .help = "events a watch may have queued and unsent; a client further\n"
             "behind is cut off (410: resume from its last resourceVersion)"},
    {.kind = SC_FLAG_SECTION, .help = "Security (docs/SECURITY.md)"},
    {.name = "--watch-timeout",
     SC_FLAG_AT(DURATION, opts_t, watch_timeout_ms),
     .min = 1000,
     .max = 7 * 86400e3,
     .def = "30m",
     .help = "a watch ends after this (the client resumes from its\nresourceVersion)"},
    {.name = "--metrics-public",
     SC_FLAG_AT(BOOL, opts_t, metrics_public),
     .help = "serve /metrics without a token (default: admin or viewer)"},
    {.name = "--audit-max",
     SC_FLAG_AT(SIZE, opts_t, audit_max),
     .min = 4096,
     .def = "100Mi",
     .help = "DATA/audit.log is rotated to audit.log.1 at this size"},
    SC_TLS_SERVE_FLAGS(opts_t, tls),
    SC_TLS_CLIENT_CA_FLAG(opts_t, tls),
    {.name = "--agent-ca",
     SC_FLAG_AT(STR, opts_t, agent_ca),
     .meta = "FILE",
     .help = "CA of the agents' https status ports (else the system's CAs;\n"
             "reloaded on SIGHUP and when the file changes)"},
    {.name = "--agents-need-cert",
     SC_FLAG_AT(BOOL, opts_t, agents_need_cert),
     .help = "agent tokens count only on connections with a client\ncertificate of their node "
             "(CN node:NAME; needs --tls-client-ca)"},
};

static const sc_command_t server_cmd = {
    .name = "server",
    .about = "The control plane: the REST API, the store, the scheduling loop and the\n"
             "controllers (docs/CONTROL_PLANE.md). Prints an admin token once.",
    .flags = server_flags,
    .nflags = sizeof(server_flags) / sizeof(server_flags[0]),
};

/* Every connection is a descriptor: without room for --max-conns of them
 * (plus the store's and libuv's own) accept() fails with EMFILE and libuv
 * drops connections before the caps can pick which one closes. */
static void raise_fd_limit(size_t conns)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	rlim_t want = (rlim_t)conns + 256;
	if (rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < want)
		sc_log_warn("open-file limit %llu is below --max-conns %zu + 256: connections past "
		            "it are refused",
		            (unsigned long long)rl.rlim_cur, conns);
}

static void on_signal(uv_signal_t *h, int signum)
{
	sc_server_t *s = h->data;
	sc_log_info("signal %d, shutting down", signum);
	sc_sd_notify("STOPPING=1");
	uv_close((uv_handle_t *)&s->watchdog, NULL);
	sc__sched_stop(s);
	sc__pool_stop(s); /* its dev agents stop with it */
	sc__ha_stop(s);
	sc__logs_close(s);
	if (sc_store_sync(s->store) == 0)
		sc_http_flush(s->http); /* answer what is already durable */
	sc__watch_hub_free(s->watch);
	json_decref(s->agent_pods);
	s->agent_pods = NULL;
	s->watch = NULL;
	sc_http_server_close(s->http);
	s->http = NULL;
	sc__flow_close(s->flow);
	s->flow = NULL;
	sc__commit_stop(s);
	uv_close((uv_handle_t *)&s->sigint, NULL);
	uv_close((uv_handle_t *)&s->sigterm, NULL);
}

/* What the store options must look like, checked before anything opens
 * (so --check-config and a start agree). */
static int check_store(const opts_t *o)
{
	const char *u = o->store, *p = o->etcd_prefix;
	size_t pl = p ? strlen(p) : 0;
	if (u &&
	    !((strncmp(u, "sqlite:", 7) == 0 && u[7]) || (strncmp(u, "etcd://", 7) == 0 && u[7]))) {
		fprintf(stderr,
		        "starcloud server: --store: expected sqlite:PATH or "
		        "etcd://HOST:PORT[,HOST:PORT...], got \"%s\"\n",
		        u);
		return SC_EINVAL;
	}
	if (p && (pl < 1 || pl > 200 || p[0] != '/' || p[pl - 1] != '/')) {
		fprintf(stderr,
		        "starcloud server: --etcd-prefix: expected /a/b/ (1 to 200 "
		        "characters, starting and ending with /), got \"%s\"\n",
		        p);
		return SC_EINVAL;
	}
	return 0;
}

/* The data dir holds the store and the audit log: nobody but the server's
 * user may read it (a pod runs as another user: docs/SECURITY.md). */
static int data_dir_private(const char *dir)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		sc_log_error("cannot create the data dir %s: %s", dir, strerror(errno));
		return SC_EIO;
	}
	if (chmod(dir, 0700) < 0) {
		sc_log_error("cannot make the data dir %s private: %s", dir, strerror(errno));
		return SC_EIO;
	}
	return 0;
}

static int setup(sc_server_t *s, const opts_t *o)
{
	s->sec.watch_timeout_ms = o->watch_timeout_ms;
	s->sec.metrics_public = o->metrics_public;
	s->sec.agents_need_cert = o->agents_need_cert;
	if (o->agents_need_cert && !o->tls.client_ca) {
		fprintf(stderr, "starcloud server: --agents-need-cert needs --tls-client-ca\n");
		return SC_EINVAL;
	}
	if (data_dir_private(o->data_dir) < 0)
		return SC_EIO;
	int rc = sc__ha_open_store(o->store, o->data_dir, o->etcd_prefix, &s->store);
	if (rc == SC_EINVAL)
		fprintf(stderr, "starcloud server: --store: expected sqlite:PATH or "
		                "etcd://HOST:PORT[,...] and --etcd-prefix /a/b/\n");
	if (rc < 0)
		return rc;
	sc_http_limits_t lim = {.max_body_bytes = o->max_body,
	                        .max_conns = o->max_conns,
	                        .max_conns_per_client = o->max_conns_per_client,
	                        .idle_timeout_ms = o->idle_timeout,
	                        .header_timeout_ms = o->header_timeout,
	                        .body_timeout_ms = o->body_timeout};
	s->http = sc_http_server_new(s->loop, &lim);
	if (!s->http)
		return SC_ENOMEM;
	/* The port first: a server that cannot listen must fail before its
	 * first start prints (and stores) an admin token nobody will see used.
	 * Nothing is served before the loop runs, after setup. */
	if ((rc = sc_http_listen(s->http, o->listen.host, o->listen.port)) < 0) {
		sc_log_error("cannot listen on %s:%d: %s", o->listen.host, o->listen.port,
		             sc_http_listen_error(s->http));
		return 1; /* said */
	}
	if ((rc = sc__auth_init(s)) < 0 || (rc = sc__nodekey_init(s)) < 0 ||
	    (rc = sc_store_sync(s->store)) < 0 || (rc = sc__cache_open(s->store, &s->cache)) < 0 ||
	    (rc = sc__audit_open(s, o->data_dir, o->audit_max)) < 0)
		return rc;
	s->metrics = sc__metrics_new();
	if (!s->metrics)
		return SC_ENOMEM;
	if ((rc = sc_tls_serve_setup("server", &o->tls, o->listen.host, s->http, &s->tls)) < 0)
		return rc;
	char err[512];
	if (sc_tls_client_ctx(o->agent_ca, NULL, NULL, &s->agent_tls, err, sizeof(err)) < 0) {
		fprintf(stderr, "starcloud server: %s\n", err);
		return SC_EINVAL;
	}
	sc_tls_reload_watch(s->loop, "listener", s->tls);
	sc_tls_reload_watch(s->loop, "client", s->agent_tls);
	sc_http_set_observer(s->http, sc__metrics_observe_http, s->metrics);
	sc_flow_opts_t fo = {.queue_len = o->flow_queue, .max_wait_ms = o->flow_wait};
	s->flow = o->no_flow ? NULL : sc__flow_new(s, &fo);
	if ((rc = sc__watch_hub_new(s, o->watch_buffer, &s->watch)) < 0)
		return rc;
	sc__commit_start(s);
	s->stat = sc__schedstat_new();
	if ((rc = sc__schedstat_register(s, s->stat)) < 0)
		return rc;
	if ((rc = sc__api_register(s)) < 0 || (rc = sc__auth_register(s)) < 0 ||
	    (rc = sc__agent_api_register(s)) < 0 || (rc = sc__metrics_register(s)) < 0 ||
	    (rc = sc__ui_register(s)) < 0 || (rc = sc__logs_register(s)) < 0)
		return rc;
	char id[128];
	snprintf(id, sizeof(id), "%s:%d", o->listen.host, sc_http_port(s->http));
	/* Local processes (the dev pool's agents, exec commands) reach the API
	 * on loopback when it listens on every address. */
	const char *host = strcmp(o->listen.host, "0.0.0.0") == 0 ? "127.0.0.1" : o->listen.host;
	snprintf(s->self_url, sizeof(s->self_url), "%s://%s:%d", s->tls ? "https" : "http", host,
	         sc_http_port(s->http));
	/* The dev pool's agents trust our certificate through the CA we trust
	 * theirs with (starcloud dev makes one CA for both). */
	s->self_ca = o->agent_ca;
	s->data_dir = o->data_dir;
	if ((rc = sc__ha_start(s, id, o->leader_ttl)) < 0 || (rc = sc__pool_start(s)) < 0 ||
	    (rc = sc__sched_start(s)) < 0 || (rc = sc__deploy_start(s)) < 0)
		return rc;
	uv_signal_init(s->loop, &s->sigint);
	uv_signal_init(s->loop, &s->sigterm);
	s->sigint.data = s->sigterm.data = s;
	uv_signal_start(&s->sigint, on_signal, SIGINT);
	uv_signal_start(&s->sigterm, on_signal, SIGTERM);
	return 0;
}

int sc_server_main(int argc, char **argv)
{
	opts_t o = {0};
	sc_log_open("server");
	int rc = sc_flags_parse(&server_cmd, &o, argc, argv, NULL);
	if (rc != 0)
		return rc > 0 ? SC_EXIT_OK : SC_EXIT_USAGE;
	if (check_store(&o) < 0)
		return SC_EXIT_USAGE;
	if (o.check_config)
		return sc_flags_config_ok(&server_cmd, o.config);
	sc_server_t s = {0};
	s.admin_token_file = o.admin_token_file;
	s.loop = uv_default_loop();
	s.max_object = o.max_object;
	s.queue_max[0] = o.queue_max_jobs;
	s.queue_max[1] = o.queue_max_deployments;
	raise_fd_limit(o.max_conns);
	rc = setup(&s, &o);
	if (rc != 0) {
		if (rc < 0)
			sc_log_error("start failed: %s", sc_strerror(rc));
		rc = SC_EIO;
		goto out;
	}
	sc_log_info("listening on %s://%s:%d (data in %s)", s.tls ? "https" : "http", o.listen.host,
	            sc_http_port(s.http), o.store ? o.store : o.data_dir);
	/* Ready for systemd once the API answers on a migrated store (a
	 * follower of an HA pair is ready too: it serves reads and forwards
	 * nothing). The watchdog then checks that the loop keeps turning. */
	sc_sd_watchdog_start(s.loop, &s.watchdog);
	sc_sd_notifyf("READY=1\nSTATUS=serving the API on http://%s:%d, store %s", o.listen.host,
	              sc_http_port(s.http), o.store ? o.store : o.data_dir);
	uv_run(s.loop, UV_RUN_DEFAULT);
out:
	sc__sched_stop(&s);
	sc__pool_stop(&s);
	sc__scale_free(&s);
	sc__ha_stop(&s);
	sc__watch_hub_free(s.watch);
	sc__logs_close(&s);
	sc_http_server_close(s.http);
	sc__flow_close(s.flow);
	sc_tls_reload_stop();
	uv_run(s.loop, UV_RUN_NOWAIT);
	sc__cache_close(s.cache);
	sc__ha_free(&s);
	sc_store_close(s.store);
	sc__metrics_free(s.metrics);
	sc__schedstat_free(s.stat);
	sc__audit_close(&s);
	sc_tls_ctx_free(s.tls);
	sc_tls_ctx_free(s.agent_tls);
	return rc < 0 ? SC_EXIT_FAIL : SC_EXIT_OK;
}
