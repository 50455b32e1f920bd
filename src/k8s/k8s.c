/* `starcloud k8s`: Starcloud's scheduler for a Kubernetes cluster.
 *
 * The event loop holds five list+watch streams (kwatch.c) that keep the
 * cache current, the leader election timer (kelect.c), and the cycle timer.
 * A cycle runs when something changed (at most every --min-interval) or,
 * while pods wait, every --period: the cache becomes a snapshot
 * (kworld.c), the core decides exactly as `starcloud schedule` does, and
 * kapply.c turns its decisions into API writes. Only the leader runs
 * cycles and writes; standbys keep their caches warm so a takeover is
 * immediate. docs/KUBERNETES.md describes it for users. */
#include "k8s/k8s.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/cmdline.h"
#include "base/flagfile.h"
#include "base/log.h"
#include "cli/cli.h"
#include "k8s/k8s_int.h"
#include "net/tlsreload.h"
#include "base/version.h"
#include "starcloud/error.h"
#include "starcloud/manifest.h"

/* ---- clock and log ------------------------------------------------------ */

static int64_t wall_clock(void)
{
	return (int64_t)time(NULL);
}

/* ---- options ------------------------------------------------------------ */

#define OPTS sc_k8s_opts_t

static const sc_flag_t k8s_flags[] = {
    SC_FLAGS_CONFIG(OPTS),
    {.kind = SC_FLAG_SECTION, .help = "The API server (default: the in-cluster service account)"},
    {.name = "--kubeconfig",
     SC_FLAG_AT(STR, OPTS, kubeconfig),
     .meta = "FILE",
     .help = "a kubeconfig with a token, a token file or a client certificate"},
    {.name = "--context",
     SC_FLAG_AT(STR, OPTS, context),
     .meta = "NAME",
     .help = "its context (default: current-context)"},
    {.name = "--server",
     SC_FLAG_AT(STR, OPTS, server),
     .meta = "URL",
     .help = "the API server (https), with --token-file and --ca"},
    {.name = "--token-file",
     SC_FLAG_AT(STR, OPTS, token_file),
     .meta = "FILE",
     .help = "bearer token, read again every minute (tokens rotate)"},
    {.name = "--ca", SC_FLAG_AT(STR, OPTS, ca_file), .meta = "FILE", .help = "CA bundle (PEM)"},
    {.name = "--service-account-dir",
     SC_FLAG_AT(STR, OPTS, sa_dir),
     .meta = "DIR",
     .def = "/var/run/secrets/kubernetes.io/serviceaccount",
     .help = "in-cluster: where the token, ca.crt and namespace are mounted"},
    {.kind = SC_FLAG_SECTION, .help = "Scheduling"},
    {.name = "--scheduler-name",
     SC_FLAG_AT(STR, OPTS, scheduler),
     .meta = "NAME",
     .def = "starcloud",
     .help = "schedule the pods whose spec.schedulerName is this"},
    {.name = "--default-queue",
     SC_FLAG_AT(STR, OPTS, default_queue),
     .meta = "NAME",
     .def = "default",
     .help = "queue of pods that name none (implicit when no Queue has the name)"},
    {.name = "--scheduler-config",
     SC_FLAG_AT(STR, OPTS, sched_config),
     .meta = "FILE",
     .help = "SchedulerConfig and Topology manifests (docs/MANIFESTS.md)"},
    {.name = "--period",
     SC_FLAG_AT(DURATION, OPTS, period_ms),
     .min = 10,
     .max = 3600e3,
     .def = "1s",
     .help = "cycle period while pods wait"},
    {.name = "--min-interval",
     SC_FLAG_AT(DURATION, OPTS, min_interval_ms),
     .max = 60e3,
     .def = "100ms",
     .help = "shortest time between two cycles"},
    {.name = "--nominate-timeout",
     SC_FLAG_AT(DURATION, OPTS, nominate_timeout_ms),
     .min = 1000,
     .max = 86400e3,
     .def = "5m",
     .help = "how long a pipelined pod waits for its victims to go"},
    {.name = "--max-inflight",
     SC_FLAG_AT(INT, OPTS, max_inflight),
     .min = 1,
     .max = 1024,
     .def = "64",
     .help = "API writes in flight at once"},
    {.name = "--no-events", SC_FLAG_AT(BOOL, OPTS, no_events), .help = "do not write Events"},
    {.kind = SC_FLAG_SECTION, .help = "Leader election (several replicas, one writes)"},
    {.name = "--leader-elect",
     SC_FLAG_AT(BOOL, OPTS, leader_elect),
     .help = "take part in the election on a coordination.k8s.io Lease"},
    {.name = "--lease-namespace",
     SC_FLAG_AT(STR, OPTS, lease_ns),
     .meta = "NS",
     .help = "the Lease's namespace (default: the kubeconfig's or service account's)"},
    {.name = "--lease-name",
     SC_FLAG_AT(STR, OPTS, lease_name),
     .meta = "NAME",
     .def = "starcloud-scheduler",
     .help = "the Lease's name"},
    {.name = "--identity",
     SC_FLAG_AT(STR, OPTS, identity),
     .meta = "ID",
     .help = "this replica in the Lease (default HOSTNAME_PID)"},
    {.name = "--lease-duration",
     SC_FLAG_AT(DURATION, OPTS, lease_duration_ms),
     .min = 1000,
     .max = 600e3,
     .def = "15s",
     .help = "a standby takes over this long after the last renewal"},
    {.name = "--renew-deadline",
     SC_FLAG_AT(DURATION, OPTS, renew_deadline_ms),
     .min = 500,
     .max = 600e3,
     .def = "10s",
     .help = "the leader stops writing this long after its last renewal\n"
             "(shorter than --lease-duration)"},
    {.name = "--retry-period",
     SC_FLAG_AT(DURATION, OPTS, retry_period_ms),
     .min = 100,
     .max = 60e3,
     .def = "2s",
     .help = "how often the Lease is read and renewed"},
};

static const sc_command_t k8s_cmd = {
    .name = "k8s",
    .args = "[--kubeconfig FILE [--context NAME]] [options]",
    .about = "Schedules the pods of a Kubernetes cluster whose spec.schedulerName is ours, with\n"
             "KAI's Queues and PodGroups (scheduling.run.ai); docs/KUBERNETES.md.",
    .footer = "Durations take ms, s, m, h (250ms, 2s, 5m).",
    .flags = k8s_flags,
    .nflags = sizeof(k8s_flags) / sizeof(k8s_flags[0]),
};

static int usage_error(const char *msg)
{
	fprintf(stderr, "starcloud k8s: %s\n", msg);
	return SC_EXIT_USAGE;
}

/* Returns 0 to run, 1 after --help, or an exit status. */
static int parse_opts(int argc, char **argv, sc_k8s_opts_t *o)
{
	memset(o, 0, sizeof(*o));
	int rc = sc_flags_parse(&k8s_cmd, o, argc, argv, NULL);
	if (rc == 1)
		return 1;
	if (rc < 0)
		return SC_EXIT_USAGE;
	o->lease_duration = (double)o->lease_duration_ms / 1000;
	o->renew_deadline = (double)o->renew_deadline_ms / 1000;
	o->retry_period = (double)o->retry_period_ms / 1000;
	o->period = (double)o->period_ms / 1000;
	o->min_interval = (double)o->min_interval_ms / 1000;
	o->nominate_timeout = (double)o->nominate_timeout_ms / 1000;
	o->events = !o->no_events;
	if (o->leader_elect && o->renew_deadline_ms >= o->lease_duration_ms)
		return usage_error("--renew-deadline: must be shorter than --lease-duration");
	if (o->kubeconfig && o->server)
		return usage_error("--kubeconfig and --server: give one of them");
	if ((o->token_file || o->ca_file) && !o->server)
		return usage_error("--token-file and --ca go with --server");
	if (o->context && !o->kubeconfig)
		return usage_error("--context goes with --kubeconfig");
	return 0;
}

/* ---- configuration ------------------------------------------------------ */

/* The API server's address, credentials and TLS material from the flags
 * (a kubeconfig, --server/--token-file/--ca, or the service account) into
 * c; err says what is wrong. At start, and again for a TLS reload. */
static int read_api_config(const sc_k8s_opts_t *o, sc_kconfig_t *c, char *err, size_t errsz)
{
	int rc = 0;
	if (o->kubeconfig)
		return sc_kconfig_load(o->kubeconfig, o->context, c, err, errsz);
	if (!o->server)
		return sc_kconfig_in_cluster(o->sa_dir, c, err, errsz);
	if (strncmp(o->server, "https://", 8) != 0) {
		snprintf(err, errsz, "--server: expected an https:// URL");
		rc = SC_EINVAL;
	}
	c->server = sc_xstrdup(o->server);
	c->namespace = sc_xstrdup("default");
	if (rc == 0 && o->token_file) {
		c->token_file = sc_xstrdup(o->token_file);
		rc = sc_kconfig_refresh_token(c);
		if (rc < 0)
			snprintf(err, errsz, "--token-file %s: %s", o->token_file, sc_strerror(rc));
	}
	if (rc >= 0 && o->ca_file) {
		char msg[600];
		rc = sc_kconfig_read_file(o->ca_file, &c->ca_pem, &c->ca_len, msg, sizeof(msg));
		if (rc < 0)
			snprintf(err, errsz, "--ca %s", msg);
		c->ca_file = sc_xstrdup(o->ca_file);
	}
	return rc < 0 ? rc : 0;
}

static int load_api_config(sc_k8s_t *k)
{
	char err[1200];
	int rc = read_api_config(&k->o, &k->cfg, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "starcloud k8s: %s\n", err);
		return SC_EXIT_USAGE;
	}
	if (strncmp(k->cfg.server, "https://", 8) != 0) {
		fprintf(stderr, "starcloud k8s: %s: the API server must be reached over https\n",
		        k->cfg.server);
		return SC_EXIT_USAGE;
	}
	if (k->cfg.insecure)
		sc_log_warn("insecure-skip-tls-verify: the API server's certificate is "
		            "NOT checked");
	sc_tls_pem_t pem;
	sc_kconfig_tls(&k->cfg, &pem);
	if (sc_tls_client_ctx_pem(&pem, &k->tls, err, sizeof(err)) < 0) {
		fprintf(stderr, "starcloud k8s: the kubeconfig's %s\n", err);
		return SC_EXIT_USAGE;
	}
	return SC_EXIT_OK;
}

/* SIGHUP or a changed file (net/tlsreload.h): the configuration is read
 * again and only its TLS material (CA, client certificate and key) taken;
 * the server address and token stay as they are (the token has its own
 * refresh). */
static int remake_tls(void *ud, sc_tls_ctx_t *ctx, char *err, size_t errsz)
{
	sc_k8s_t *k = ud;
	sc_kconfig_t c;
	memset(&c, 0, sizeof(c));
	int rc = read_api_config(&k->o, &c, err, errsz);
	if (rc == 0) {
		sc_tls_pem_t pem;
		sc_kconfig_tls(&c, &pem);
		rc = sc_tls_ctx_reload_pem(ctx, &pem, err, errsz);
	}
	sc_kconfig_free(&c);
	return rc;
}

/* --scheduler-config: SchedulerConfig and Topology only; everything else about the
 * cluster comes from the API. */
static int load_sched_config(sc_k8s_t *k)
{
	sc_config_default(&k->config);
	if (!k->o.sched_config)
		return SC_EXIT_OK;
	char *text = NULL, err[1200];
	size_t len;
	sc_manifest_error_t me;
	sc_snapshot_t snap;
	if (sc_kconfig_read_file(k->o.sched_config, &text, &len, err, sizeof(err)) < 0) {
		fprintf(stderr, "starcloud k8s: --scheduler-config: %s\n", err);
		return SC_EXIT_USAGE;
	}
	k->config_set = sc_manifest_set_new();
	int rc = k->config_set
	             ? sc_manifest_add_text(k->config_set, k->o.sched_config, text, len, &me)
	             : SC_ENOMEM;
	free(text);
	if (rc >= 0 && (size_t)rc != sc_manifest_count(k->config_set, "SchedulerConfig") +
	                                 sc_manifest_count(k->config_set, "Topology")) {
		fprintf(stderr,
		        "starcloud k8s: --scheduler-config %s: only SchedulerConfig and Topology "
		        "objects belong here (nodes, queues and pods come from the API)\n",
		        k->o.sched_config);
		return SC_EXIT_USAGE;
	}
	if (rc >= 0)
		rc = sc_manifest_snapshot(k->config_set, 0, &snap, &me);
	if (rc < 0) {
		fprintf(stderr, "starcloud k8s: --scheduler-config: %s\n",
		        sc_manifest_error_format(&me, err, sizeof(err)));
		return SC_EXIT_USAGE;
	}
	k->config = snap.config;
	return SC_EXIT_OK;
}

/* ---- the cycle ---------------------------------------------------------- */

static bool synced(sc_k8s_t *k)
{
	for (int i = 0; i < SC_KK_COUNT; i++)
		if (!sc__kwatch_synced(k->watch[i]))
			return false;
	return true;
}

static void cycle_cb(uv_timer_t *t);

static void arm(sc_k8s_t *k, double in)
{
	uint64_t ms = in <= 0 ? 0 : (uint64_t)ceil(in * 1000);
	if (uv_is_active((uv_handle_t *)&k->cycle_timer) &&
	    uv_timer_get_due_in(&k->cycle_timer) <= ms)
		return;
	uv_timer_start(&k->cycle_timer, cycle_cb, ms, 0);
}

/* What sc__k8s_kick (kloop.c) runs: a cycle soon, at most every
 * min_interval. */
static void kick(sc_k8s_t *k)
{
	double wait = k->last_cycle + k->o.min_interval - sc__k8s_now();
	arm(k, wait);
}

static void run_cycle(sc_k8s_t *k)
{
	double t0 = sc__k8s_now();
	sc_kworld_t world;
	sc_decisions_t *d = NULL;
	char msg[1024];
	k->dirty = false;
	sc__kwriter_reconcile(k->writer);
	sc_arena_reset(k->arena);
	sc_kworld_opts_t wo = {
	    .scheduler = k->o.scheduler,
	    .default_queue = k->o.default_queue,
	    .config = &k->config,
	    .now = wall_clock(),
	};
	int rc = sc_kworld_build(k->arena, &k->cache, &k->local, &wo, &world);
	if (rc == 0)
		rc = sc_scheduler_run(k->sched, &world.snap, &d, msg, sizeof(msg));
	if (rc < 0) {
		sc_log_error("cycle failed: %s%s%s", sc_strerror(rc), msg[0] ? ": " : "",
		             rc == SC_EINVAL ? msg : "");
	} else {
		sc__kwriter_apply(k->writer, &world, d);
	}
	/* Status after the decisions: it counts the bindings just sent. */
	bool status_later = rc >= 0 && sc__kstatus_apply(k->status, &world, d);
	bool waiting = d && (d->npending || world.nheld);
	sc_decisions_free(d);
	sc_kworld_free(&world);
	k->last_cycle = sc__k8s_now();
	k->st.cycles++;
	k->st.cycle_last_s = k->last_cycle - t0;
	if (k->st.cycle_last_s > k->st.cycle_max_s)
		k->st.cycle_max_s = k->st.cycle_last_s;
	/* Time alone changes decisions (minimum runtimes, stale gangs,
	 * reservations) and victims leave: look again while anything waits. */
	if (waiting || status_later || sc__kwriter_nominated(k->writer))
		arm(k, k->o.period);
	if (k->dirty)
		sc__k8s_kick(k);
}

static void cycle_cb(uv_timer_t *t)
{
	sc_k8s_t *k = t->data;
	if (k->stopping || !synced(k) || !sc__k8s_may_write(k))
		return;
	run_cycle(k);
}

/* ---- timers and signals ------------------------------------------------- */

static void token_cb(uv_timer_t *t)
{
	sc_k8s_t *k = t->data;
	int rc = sc_kconfig_refresh_token(&k->cfg);
	if (rc == 1)
		sc_log_info("token reloaded from %s", k->cfg.token_file);
	else if (rc < 0)
		sc_log_warn("token file %s: %s; keeping the old token", k->cfg.token_file,
		            sc_strerror(rc));
}

static void stats_cb(uv_timer_t *t)
{
	sc_k8s_t *k = t->data;
	sc_k8s_stats_t *s = &k->st;
	sc_log_info("%s; %zu pods, %zu nodes cached; cycles %lu (last %.3f s, max %.3f s); "
	            "bound %lu (%lu refused), evicted %lu (%lu refused), conditions %lu, "
	            "events %lu, status %lu (%lu conflicts), relists %lu",
	            k->stopping            ? "stopped"
	            : sc__k8s_may_write(k) ? "leading"
	                                   : "standby",
	            k->cache.pods.len, k->cache.nodes.len, s->cycles, s->cycle_last_s,
	            s->cycle_max_s, s->bound, s->bind_failed, s->evicted, s->evict_failed,
	            s->patched, s->events, s->status_written, s->status_conflicts, s->relists);
}

static void on_closed_noop(uv_handle_t *h)
{
	(void)h;
}

static void stop_loop(sc_k8s_t *k)
{
	uv_stop(k->loop);
}

static void on_signal(uv_signal_t *s, int signum)
{
	sc_k8s_t *k = s->data;
	if (k->stopping) {
		uv_stop(k->loop);
		return;
	}
	sc_log_info("signal %d: stopping", signum);
	k->stopping = true;
	uv_timer_stop(&k->cycle_timer);
	/* Giving the lease up lets a standby take over now rather than after
	 * the lease runs out. */
	if (!(k->o.leader_elect && sc__kelect_release(k, stop_loop)))
		uv_stop(k->loop);
}

/* ---- main --------------------------------------------------------------- */

static void run(sc_k8s_t *k)
{
	uv_loop_t loop;
	uv_loop_init(&loop);
	k->loop = &loop;
	/* As many idle connections as writes may be in flight (kapply.c). */
	sc_hcli_opts_t hco = {.max_idle_per_host = (size_t)k->o.max_inflight + 8,
	                      .connect_timeout_ms = 5000,
	                      .user_agent = SC_USER_AGENT("k8s")};
	k->http = sc_hcli_new(&loop, &hco);
	k->sched = sc_scheduler_new();
	k->arena = sc_arena_new(1 << 20);
	if (!k->http || !k->sched || !k->arena)
		sc_oom();
	sc_hcli_set_tls(k->http, k->tls);
	const char *tls_files[] = {k->o.kubeconfig, k->cfg.ca_file, k->cfg.cert_file,
	                           k->cfg.key_file};
	sc_tls_reload_watch_with(&loop, "client", k->tls, tls_files, 4, remake_tls, k);
	k->writer = sc__kwriter_new(k);
	k->status = sc__kstatus_new(k);
	uv_timer_init(&loop, &k->cycle_timer);
	k->cycle_timer.data = k;
	k->kick = kick;
	uv_timer_init(&loop, &k->token_timer);
	k->token_timer.data = k;
	uv_timer_init(&loop, &k->stats_timer);
	k->stats_timer.data = k;
	uv_signal_init(&loop, &k->sigterm);
	uv_signal_init(&loop, &k->sigint);
	k->sigterm.data = k->sigint.data = k;
	uv_signal_start(&k->sigterm, on_signal, SIGTERM);
	uv_signal_start(&k->sigint, on_signal, SIGINT);
	if (k->cfg.token_file)
		uv_timer_start(&k->token_timer, token_cb, 60000, 60000);
	uv_timer_start(&k->stats_timer, stats_cb, 30000, 30000);
	for (int i = 0; i < SC_KK_COUNT; i++) {
		k->watch[i] = sc__kwatch_new(k, i);
		sc__kwatch_start(k->watch[i]);
	}
	if (k->o.leader_elect)
		sc__kelect_start(k);
	sc_log_info("scheduling pods with schedulerName %s on %s%s", k->o.scheduler, k->cfg.server,
	            k->o.leader_elect ? " (leader election on)" : "");
	uv_run(&loop, UV_RUN_DEFAULT);

	stats_cb(&k->stats_timer);
	for (int i = 0; i < SC_KK_COUNT; i++)
		sc__kwatch_free(k->watch[i]);
	sc_hcli_close(k->http); /* the writes in flight end (kapply.c op_done) */
	sc__kwriter_free(k->writer);
	sc__kstatus_free(k->status);
	k->status = NULL;
	uv_close((uv_handle_t *)&k->cycle_timer, on_closed_noop);
	uv_close((uv_handle_t *)&k->token_timer, on_closed_noop);
	uv_close((uv_handle_t *)&k->stats_timer, on_closed_noop);
	uv_close((uv_handle_t *)&k->sigterm, on_closed_noop);
	uv_close((uv_handle_t *)&k->sigint, on_closed_noop);
	sc_tls_reload_stop();
	if (k->o.leader_elect)
		uv_close((uv_handle_t *)&k->lease_timer, on_closed_noop);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
}

int sc_k8s_main(int argc, char **argv)
{
	sc_k8s_t *k = sc_xcalloc(1, sizeof(*k));
	char ident[300];
	sc_log_open("k8s");
	int rc = parse_opts(argc, argv, &k->o);
	if (rc == 1) {
		free(k);
		return SC_EXIT_OK;
	}
	if (rc == SC_EXIT_OK)
		rc = load_api_config(k);
	if (rc == SC_EXIT_OK)
		rc = load_sched_config(k);
	/* --check-config: the options, the kubeconfig and the scheduler
	 * configuration are what a start checks before it connects. */
	if (rc == SC_EXIT_OK && k->o.check_config) {
		rc = sc_flags_config_ok(&k8s_cmd, k->o.config);
	} else if (rc == SC_EXIT_OK) {
		if (!k->o.lease_ns)
			k->o.lease_ns = k->cfg.namespace ? k->cfg.namespace : "default";
		if (!k->o.identity) {
			char host[256] = "starcloud";
			gethostname(host, sizeof(host) - 1);
			snprintf(ident, sizeof(ident), "%s_%ld", host, (long)getpid());
			k->o.identity = ident;
		}
		sc_kcache_init(&k->cache);
		sc_kmap_init(&k->local);
		sc_kmap_init(&k->explained);
		run(k);
		rc = k->exit_code;
		sc__klocal_clear(k);
		sc_kcache_free(&k->cache);
	}
	sc_scheduler_free(k->sched);
	sc_arena_free(k->arena);
	sc_manifest_set_free(k->config_set);
	sc_kconfig_free(&k->cfg);
	sc_tls_ctx_free(k->tls);
	free(k);
	return rc;
}
