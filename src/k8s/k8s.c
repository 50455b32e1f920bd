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
#include <stddef.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "k8s/k8s_int.h"
#include "starcloud/error.h"
#include "starcloud/manifest.h"

/* ---- clock and log ------------------------------------------------------ */

double sc__k8s_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t sc__k8s_wall(void)
{
	return (int64_t)time(NULL);
}

void sc__k8s_log(sc_k8s_t *k, const char *level, const char *fmt, ...)
{
	char ts[48], line[2048];
	va_list ap;
	sc__k8s_microtime(ts, sizeof(ts));
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s %-5s k8s: %s\n", ts, level, line);
	(void)k;
}

/* ---- options ------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: starcloud k8s [--kubeconfig FILE [--context NAME]] [options]\n"
		"Schedules the pods of a Kubernetes cluster whose spec.schedulerName is ours,\n"
		"with KAI's Queues and PodGroups (scheduling.run.ai). Without --kubeconfig or\n"
		"--server it uses the in-cluster service account.\n"
		"  --kubeconfig FILE       kubeconfig (token, token file or client certificate)\n"
		"  --context NAME          its context (default: current-context)\n"
		"  --server URL            API server, with --token-file FILE and --ca FILE\n"
		"  --scheduler-name NAME   pods' spec.schedulerName to schedule (default starcloud)\n"
		"  --default-queue NAME    queue of pods that name none (default \"default\")\n"
		"  --config FILE           SchedulerConfig and Topology manifests\n"
		"  --leader-elect          run as one of several replicas (Lease election)\n"
		"  --lease-namespace NS    (default: the context's or service account's namespace)\n"
		"  --lease-name NAME       (default starcloud-scheduler)\n"
		"  --identity ID           (default HOSTNAME_PID)\n"
		"  --lease-duration DUR    (default 15s)\n"
		"  --renew-deadline DUR    stop writing this long after the last renewal\n"
		"                          (default 10s, less than the lease duration)\n"
		"  --retry-period DUR      lease read/renew period (default 2s)\n"
		"  --period DUR            cycle period while pods wait (default 1s)\n"
		"  --min-interval DUR      shortest time between cycles (default 100ms)\n"
		"  --nominate-timeout DUR  wait for evicted pods to go before deciding again\n"
		"                          (default 5m)\n"
		"  --max-inflight N        concurrent API writes (default 64)\n"
		"  --no-events             do not write Events\n"
		"Durations take ms, s, m, h (250ms, 2s, 5m).\n");
}

/* "250ms", "2s", "1.5m", "1h" -> seconds; strict: a number and a unit. */
static int duration(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno || !isfinite(v) || v < 0 || (s[0] < '0' || s[0] > '9'))
		return SC_EINVAL;
	double mul = strcmp(end, "ms") == 0 ? 0.001
		     : strcmp(end, "s") == 0 ? 1
		     : strcmp(end, "m") == 0 ? 60
		     : strcmp(end, "h") == 0 ? 3600
					     : -1;
	if (mul < 0 || v * mul > 86400 * 7)
		return SC_EINVAL;
	*out = v * mul;
	return 0;
}

static int bad_value(const char *flag, const char *v, const char *want)
{
	fprintf(stderr, "starcloud k8s: %s: expected %s, got \"%s\"\n", flag, want, v);
	return SC_EXIT_USAGE;
}

static int parse_opts(int argc, char **argv, sc_k8s_opts_t *o)
{
	static const struct {
		const char *flag;
		size_t off;
	} strs[] = {
		{"--kubeconfig", offsetof(sc_k8s_opts_t, kubeconfig)},
		{"--context", offsetof(sc_k8s_opts_t, context)},
		{"--server", offsetof(sc_k8s_opts_t, server)},
		{"--token-file", offsetof(sc_k8s_opts_t, token_file)},
		{"--ca", offsetof(sc_k8s_opts_t, ca_file)},
		{"--scheduler-name", offsetof(sc_k8s_opts_t, scheduler)},
		{"--default-queue", offsetof(sc_k8s_opts_t, default_queue)},
		{"--config", offsetof(sc_k8s_opts_t, config_file)},
		{"--lease-namespace", offsetof(sc_k8s_opts_t, lease_ns)},
		{"--lease-name", offsetof(sc_k8s_opts_t, lease_name)},
		{"--identity", offsetof(sc_k8s_opts_t, identity)},
	};
	static const struct {
		const char *flag;
		size_t off;
		double min;
	} durs[] = {
		{"--lease-duration", offsetof(sc_k8s_opts_t, lease_duration), 1},
		{"--renew-deadline", offsetof(sc_k8s_opts_t, renew_deadline), 0.5},
		{"--retry-period", offsetof(sc_k8s_opts_t, retry_period), 0.1},
		{"--period", offsetof(sc_k8s_opts_t, period), 0.01},
		{"--min-interval", offsetof(sc_k8s_opts_t, min_interval), 0},
		{"--nominate-timeout", offsetof(sc_k8s_opts_t, nominate_timeout), 1},
	};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
		char name[64];
		bool done = false;
		int skip = 1; /* the value is the next argument */
		if (eq) {
			/* --flag=value, as a Deployment's args often have it */
			snprintf(name, sizeof(name), "%.*s", (int)(eq - a), a);
			a = name;
			v = eq + 1;
			skip = 0;
		}
		if (strcmp(a, "--leader-elect") == 0 && !eq) {
			o->leader_elect = true;
			continue;
		}
		if (strcmp(a, "--no-events") == 0 && !eq) {
			o->events = false;
			continue;
		}
		for (size_t k = 0; k < sizeof(strs) / sizeof(strs[0]) && !done; k++) {
			if (strcmp(a, strs[k].flag) != 0)
				continue;
			if (!v || !*v)
				return bad_value(a, v ? v : "", "a value");
			*(const char **)((char *)o + strs[k].off) = v;
			i += skip;
			done = true;
		}
		for (size_t k = 0; k < sizeof(durs) / sizeof(durs[0]) && !done; k++) {
			if (strcmp(a, durs[k].flag) != 0)
				continue;
			double d;
			if (!v || duration(v, &d) < 0 || d < durs[k].min)
				return bad_value(a, v ? v : "", "a duration such as 2s or 250ms");
			*(double *)((char *)o + durs[k].off) = d;
			i += skip;
			done = true;
		}
		if (!done && strcmp(a, "--max-inflight") == 0) {
			char *end;
			long n = v ? strtol(v, &end, 10) : 0;
			if (!v || *end || end == v || n < 1 || n > 1024)
				return bad_value(a, v ? v : "", "a number from 1 to 1024");
			o->max_inflight = (int)n;
			i += skip;
			done = true;
		}
		if (!done) {
			fprintf(stderr, "starcloud k8s: unknown option \"%s\" (see --help)\n", a);
			return SC_EXIT_USAGE;
		}
	}
	if (o->leader_elect && o->renew_deadline >= o->lease_duration) {
		fprintf(stderr, "starcloud k8s: --renew-deadline (%gs) must be shorter than "
				"--lease-duration (%gs)\n",
			o->renew_deadline, o->lease_duration);
		return SC_EXIT_USAGE;
	}
	if (o->kubeconfig && o->server) {
		fprintf(stderr, "starcloud k8s: --kubeconfig and --server: give one of them\n");
		return SC_EXIT_USAGE;
	}
	if ((o->token_file || o->ca_file) && !o->server) {
		fprintf(stderr, "starcloud k8s: --token-file and --ca go with --server\n");
		return SC_EXIT_USAGE;
	}
	return SC_EXIT_OK;
}

/* ---- configuration ------------------------------------------------------ */

static int load_api_config(sc_k8s_t *k)
{
	char err[1200];
	int rc;
	if (k->o.kubeconfig) {
		rc = sc_kconfig_load(k->o.kubeconfig, k->o.context, &k->cfg, err, sizeof(err));
	} else if (k->o.server) {
		rc = 0;
		if (strncmp(k->o.server, "https://", 8) != 0) {
			snprintf(err, sizeof(err), "--server: expected an https:// URL");
			rc = SC_EINVAL;
		}
		k->cfg.server = strdup(k->o.server);
		k->cfg.namespace = strdup("default");
		if (rc == 0 && k->o.token_file) {
			k->cfg.token_file = strdup(k->o.token_file);
			rc = sc_kconfig_refresh_token(&k->cfg);
			if (rc < 0)
				snprintf(err, sizeof(err), "--token-file %s: %s", k->o.token_file,
					 sc_strerror(rc));
		}
		if (rc >= 0 && k->o.ca_file)
			rc = sc_kconfig_read_file(k->o.ca_file, &k->cfg.ca_pem, &k->cfg.ca_len, err,
						  sizeof(err));
	} else {
		rc = sc_kconfig_in_cluster(NULL, &k->cfg, err, sizeof(err));
	}
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
		sc__k8s_log(k, "warn", "insecure-skip-tls-verify: the API server's certificate is "
				       "NOT checked");
	sc_kconfig_tls(&k->cfg, &k->tls);
	return SC_EXIT_OK;
}

/* --config: SchedulerConfig and Topology only; everything else about the
 * cluster comes from the API. */
static int load_sched_config(sc_k8s_t *k)
{
	sc_config_default(&k->config);
	if (!k->o.config_file)
		return SC_EXIT_OK;
	char *text = NULL, err[1200];
	size_t len;
	sc_manifest_error_t me;
	sc_snapshot_t snap;
	if (sc_kconfig_read_file(k->o.config_file, &text, &len, err, sizeof(err)) < 0) {
		fprintf(stderr, "starcloud k8s: --config: %s\n", err);
		return SC_EXIT_USAGE;
	}
	k->config_set = sc_manifest_set_new();
	int rc = k->config_set ? sc_manifest_add_text(k->config_set, k->o.config_file, text, len, &me)
			       : SC_ENOMEM;
	free(text);
	if (rc >= 0 && (size_t)rc != sc_manifest_count(k->config_set, "SchedulerConfig") +
					     sc_manifest_count(k->config_set, "Topology")) {
		fprintf(stderr, "starcloud k8s: --config %s: only SchedulerConfig and Topology "
				"objects belong here (nodes, queues and pods come from the API)\n",
			k->o.config_file);
		return SC_EXIT_USAGE;
	}
	if (rc >= 0)
		rc = sc_manifest_snapshot(k->config_set, 0, &snap, &me);
	if (rc < 0) {
		fprintf(stderr, "starcloud k8s: --config: %s\n",
			sc_manifest_error_format(&me, err, sizeof(err)));
		return SC_EXIT_USAGE;
	}
	k->config = snap.config;
	return SC_EXIT_OK;
}

/* ---- the cycle ---------------------------------------------------------- */

bool sc__k8s_may_write(sc_k8s_t *k)
{
	if (k->stopping)
		return false;
	if (!k->o.leader_elect)
		return true;
	return sc_klease_valid(&k->lease, sc__k8s_now());
}

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

void sc__k8s_kick(sc_k8s_t *k)
{
	k->dirty = true;
	if (k->stopping)
		return;
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
		.now = sc__k8s_wall(),
	};
	int rc = sc_kworld_build(k->arena, &k->cache, &k->local, &wo, &world);
	if (rc == 0)
		rc = sc_scheduler_run(k->sched, &world.snap, &d, msg, sizeof(msg));
	if (rc < 0) {
		sc__k8s_log(k, "error", "cycle failed: %s%s%s", sc_strerror(rc), msg[0] ? ": " : "",
			    rc == SC_EINVAL ? msg : "");
	} else {
		sc__kwriter_apply(k->writer, &world, d);
	}
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
	if (waiting || sc__kwriter_nominated(k->writer))
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
		sc__k8s_log(k, "info", "token reloaded from %s", k->cfg.token_file);
	else if (rc < 0)
		sc__k8s_log(k, "warn", "token file %s: %s; keeping the old token",
			    k->cfg.token_file, sc_strerror(rc));
}

static void stats_cb(uv_timer_t *t)
{
	sc_k8s_t *k = t->data;
	sc_k8s_stats_t *s = &k->st;
	sc__k8s_log(k, "info",
		    "%s; %zu pods, %zu nodes cached; cycles %lu (last %.3f s, max %.3f s); "
		    "bound %lu (%lu refused), evicted %lu (%lu refused), conditions %lu, "
		    "events %lu, relists %lu",
		    k->stopping ? "stopped" : sc__k8s_may_write(k) ? "leading" : "standby",
		    k->cache.pods.len,
		    k->cache.nodes.len, s->cycles, s->cycle_last_s, s->cycle_max_s, s->bound,
		    s->bind_failed, s->evicted, s->evict_failed, s->patched, s->events, s->relists);
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
	sc__k8s_log(k, "info", "signal %d: stopping", signum);
	k->stopping = true;
	uv_timer_stop(&k->cycle_timer);
	/* Giving the lease up lets a standby take over now rather than after
	 * the lease runs out. */
	if (!(k->o.leader_elect && sc__kelect_release(k, stop_loop)))
		uv_stop(k->loop);
}

/* ---- main --------------------------------------------------------------- */

static void defaults(sc_k8s_opts_t *o)
{
	memset(o, 0, sizeof(*o));
	o->scheduler = "starcloud";
	o->default_queue = "default";
	o->lease_name = "starcloud-scheduler";
	o->lease_duration = 15;
	o->renew_deadline = 10;
	o->retry_period = 2;
	o->period = 1;
	o->min_interval = 0.1;
	o->nominate_timeout = 300;
	o->max_inflight = 64;
	o->events = true;
}

static void run(sc_k8s_t *k)
{
	uv_loop_t loop;
	uv_loop_init(&loop);
	k->loop = &loop;
	k->http = sc_httpc_new(&loop);
	k->sched = sc_scheduler_new();
	k->arena = sc_arena_new(1 << 20);
	if (!k->http || !k->sched || !k->arena)
		abort();
	sc_httpc_set_max_host_connections(k->http, 16);
	k->writer = sc__kwriter_new(k);
	uv_timer_init(&loop, &k->cycle_timer);
	k->cycle_timer.data = k;
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
	sc__k8s_log(k, "info", "scheduling pods with schedulerName %s on %s%s", k->o.scheduler,
		    k->cfg.server, k->o.leader_elect ? " (leader election on)" : "");
	uv_run(&loop, UV_RUN_DEFAULT);

	stats_cb(&k->stats_timer);
	for (int i = 0; i < SC_KK_COUNT; i++)
		sc__kwatch_free(k->watch[i]);
	sc_httpc_free(k->http);
	sc__kwriter_free(k->writer);
	uv_close((uv_handle_t *)&k->cycle_timer, on_closed_noop);
	uv_close((uv_handle_t *)&k->token_timer, on_closed_noop);
	uv_close((uv_handle_t *)&k->stats_timer, on_closed_noop);
	uv_close((uv_handle_t *)&k->sigterm, on_closed_noop);
	uv_close((uv_handle_t *)&k->sigint, on_closed_noop);
	if (k->o.leader_elect)
		uv_close((uv_handle_t *)&k->lease_timer, on_closed_noop);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
}

int sc_k8s_main(int argc, char **argv)
{
	if (sc__cli_wants_help(argc, argv)) {
		usage(stdout);
		return SC_EXIT_OK;
	}
	sc_k8s_t *k = calloc(1, sizeof(*k));
	char ident[300];
	if (!k)
		return SC_EXIT_FAIL;
	defaults(&k->o);
	int rc = parse_opts(argc, argv, &k->o);
	if (rc == SC_EXIT_OK)
		rc = load_api_config(k);
	if (rc == SC_EXIT_OK)
		rc = load_sched_config(k);
	if (rc == SC_EXIT_OK) {
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
	free(k);
	return rc;
}
