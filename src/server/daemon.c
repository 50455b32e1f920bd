/* `starcloud server [--listen 127.0.0.1:7070] [--data-dir DIR]`: the control
 * plane daemon. Opens the store, mints the first admin token, serves the
 * API and runs the scheduling loop on one libuv loop until SIGINT/SIGTERM. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/flagfile.h"
#include "net/sdnotify.h"
#include "base/cmdline.h"
#include "base/log.h"
#include "base/version.h"
#include "server/cache.h"
#include "server/deploy.h"
#include "server/ha.h"
#include "server/metrics.h"
#include "server/server.h"
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
     .def = "1048576",
     .help = "largest request body accepted"},
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
};

static const sc_command_t server_cmd = {
    .name = "server",
    .about = "The control plane: the REST API, the store, the scheduling loop and the\n"
             "controllers (docs/CONTROL_PLANE.md). Prints an admin token once.",
    .flags = server_flags,
    .nflags = sizeof(server_flags) / sizeof(server_flags[0]),
};

static void on_signal(uv_signal_t *h, int signum)
{
	sc_server_t *s = h->data;
	sc_log_info("signal %d, shutting down", signum);
	sc_sd_notify("STOPPING=1");
	uv_close((uv_handle_t *)&s->watchdog, NULL);
	sc__sched_stop(s);
	sc__ha_stop(s);
	if (sc_store_sync(s->store) == 0)
		sc_http_flush(s->http); /* answer what is already durable */
	sc_http_server_close(s->http);
	s->http = NULL;
	uv_close((uv_handle_t *)&s->commit, NULL);
	uv_close((uv_handle_t *)&s->sigint, NULL);
	uv_close((uv_handle_t *)&s->sigterm, NULL);
}

/* Group commit: runs after each loop iteration has handled its I/O. The
 * answers of that iteration were held by the HTTP layer; one fsync makes
 * all their writes durable, then they go out. Persist before
 * acknowledging, at the cost of one fsync per iteration, not per write. */
static void on_commit(uv_check_t *h)
{
	sc_server_t *s = h->data;
	if (!s->http || !sc_http_holding(s->http)) {
		if (s->store)
			sc_store_sync(s->store); /* the scheduler's own writes */
		return;
	}
	if (sc_store_sync(s->store) < 0) {
		/* Nothing may be acknowledged that is not on disk. */
		sc_log_error("store sync failed; exiting");
		abort(); /* not an out-of-memory: leave a core to look at */
	}
	sc_http_flush(s->http);
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

static int setup(sc_server_t *s, const opts_t *o)
{
	int rc = sc__ha_open_store(o->store, o->data_dir, o->etcd_prefix, &s->store);
	if (rc == SC_EINVAL)
		fprintf(stderr, "starcloud server: --store: expected sqlite:PATH or "
		                "etcd://HOST:PORT[,...] and --etcd-prefix /a/b/\n");
	if (rc < 0)
		return rc;
	if ((rc = sc__auth_init(s)) < 0 || (rc = sc_store_sync(s->store)) < 0 ||
	    (rc = sc__cache_open(s->store, &s->cache)) < 0)
		return rc;
	sc_http_limits_t lim = {.max_body_bytes = o->max_body, .idle_timeout_ms = 60000};
	s->http = sc_http_server_new(s->loop, &lim);
	s->metrics = sc__metrics_new();
	if (!s->http || !s->metrics)
		return SC_ENOMEM;
	sc_http_set_observer(s->http, sc__metrics_observe_http, s->metrics);
	sc_http_set_batching(s->http, 1);
	uv_check_init(s->loop, &s->commit);
	s->commit.data = s;
	uv_check_start(&s->commit, on_commit);
	uv_unref((uv_handle_t *)&s->commit);
	if ((rc = sc__api_register(s)) < 0 || (rc = sc__auth_register(s)) < 0 ||
	    (rc = sc__agent_api_register(s)) < 0 || (rc = sc__metrics_register(s)) < 0 ||
	    (rc = sc__ui_register(s)) < 0)
		return rc;
	if ((rc = sc_http_listen(s->http, o->listen.host, o->listen.port)) < 0) {
		sc_log_error("cannot listen on %s:%d", o->listen.host, o->listen.port);
		return rc;
	}
	char id[128];
	snprintf(id, sizeof(id), "%s:%d", o->listen.host, sc_http_port(s->http));
	if ((rc = sc__ha_start(s, id, o->leader_ttl)) < 0 || (rc = sc__sched_start(s)) < 0 ||
	    (rc = sc__deploy_start(s)) < 0)
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
	rc = setup(&s, &o);
	if (rc < 0) {
		sc_log_error("start failed: %s", sc_strerror(rc));
		goto out;
	}
	sc_log_info("listening on http://%s:%d (data in %s)", o.listen.host, sc_http_port(s.http),
	            o.store ? o.store : o.data_dir);
	/* Ready for systemd once the API answers on a migrated store (a
	 * follower of an HA pair is ready too: it serves reads and forwards
	 * nothing). The watchdog then checks that the loop keeps turning. */
	sc_sd_watchdog_start(s.loop, &s.watchdog);
	sc_sd_notifyf("READY=1\nSTATUS=serving the API on http://%s:%d, store %s", o.listen.host,
	              sc_http_port(s.http), o.store ? o.store : o.data_dir);
	uv_run(s.loop, UV_RUN_DEFAULT);
out:
	sc__sched_stop(&s);
	sc__ha_stop(&s);
	sc_http_server_close(s.http);
	uv_run(s.loop, UV_RUN_NOWAIT);
	sc__cache_close(s.cache);
	sc__ha_free(&s);
	sc_store_close(s.store);
	sc__metrics_free(s.metrics);
	return rc < 0 ? SC_EXIT_FAIL : SC_EXIT_OK;
}
