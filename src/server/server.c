/* `starcloud server [--listen 127.0.0.1:7070] [--data-dir DIR]`: the control
 * plane daemon. Opens the store, mints the first admin token, serves the
 * API and runs the scheduling loop on one libuv loop until SIGINT/SIGTERM. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/sdnotify.h"
#include "server/cache.h"
#include "server/deploy.h"
#include "server/ha.h"
#include "server/metrics.h"
#include "server/server.h"
#include "starcloud/error.h"

#define DEFAULT_LISTEN "127.0.0.1:7070"
#define DEFAULT_DATA_DIR "starcloud-data"

typedef struct opts {
	char host[64];
	int port;
	const char *data_dir;
	const char *store;       /* --store URL, or NULL: SQLite in data_dir */
	const char *etcd_prefix; /* --etcd-prefix */
	int leader_ttl;          /* --leader-ttl seconds */
	size_t max_body;
} opts_t;

void sc__now_rfc3339(char *out, size_t outsz)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, outsz, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: starcloud server [--listen HOST:PORT] [--data-dir DIR] [--max-body BYTES]\n"
		   "                        [--store sqlite:PATH|etcd://H:P[,H:P...]]\n"
		   "                        [--etcd-prefix /starcloud/] [--leader-ttl 5]\n"
		   "  --listen    address to serve the API on (default " DEFAULT_LISTEN ")\n"
		   "  --data-dir  where the store lives (default ./" DEFAULT_DATA_DIR ")\n"
		   "  --max-body  largest request body accepted (default 1048576)\n"
		   "  --store     sqlite:PATH (default: the data dir) or etcd://host:port,...\n"
		   "              (several servers, one elected leader; docs/HA.md)\n"
		   "  --etcd-prefix  etcd key prefix (default /starcloud/)\n"
		   "  --leader-ttl   leader lease in seconds, 2..60 (default 5)\n");
}

/* Splits HOST:PORT; only IPv4 literals (the API is for loopback and LANs
 * behind a proxy). */
static int parse_listen(const char *s, opts_t *o)
{
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(o->host))
		return SC_EINVAL;
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end || port < 0 || port > 65535 || colon[1] == '\0')
		return SC_EINVAL;
	snprintf(o->host, sizeof(o->host), "%.*s", (int)(colon - s), s);
	o->port = (int)port;
	return 0;
}

static int parse_opts(int argc, char **argv, opts_t *o)
{
	parse_listen(DEFAULT_LISTEN, o);
	o->data_dir = DEFAULT_DATA_DIR;
	o->max_body = 1024 * 1024;
	o->store = o->etcd_prefix = NULL;
	o->leader_ttl = 5;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 1;
		} else if (strcmp(a, "--listen") == 0 && v) {
			if (parse_listen(v, o) < 0) {
				fprintf(stderr, "server: --listen: expected HOST:PORT, got \"%s\"\n", v);
				return SC_EINVAL;
			}
			i++;
		} else if (strcmp(a, "--data-dir") == 0 && v) {
			o->data_dir = v;
			i++;
		} else if (strcmp(a, "--store") == 0 && v) {
			o->store = v;
			i++;
		} else if (strcmp(a, "--etcd-prefix") == 0 && v) {
			o->etcd_prefix = v;
			i++;
		} else if (strcmp(a, "--leader-ttl") == 0 && v) {
			char *end;
			long n = strtol(v, &end, 10);
			if (*end || n < 2 || n > 60) {
				fprintf(stderr, "server: --leader-ttl: expected 2..60 seconds\n");
				return SC_EINVAL;
			}
			o->leader_ttl = (int)n;
			i++;
		} else if (strcmp(a, "--max-body") == 0 && v) {
			char *end;
			long long n = strtoll(v, &end, 10);
			if (*end || n < 1024 || n > (64LL << 20)) {
				fprintf(stderr, "server: --max-body: expected 1024..67108864\n");
				return SC_EINVAL;
			}
			o->max_body = (size_t)n;
			i++;
		} else {
			fprintf(stderr, "server: unknown or incomplete option \"%s\"\n", a);
			usage(stderr);
			return SC_EINVAL;
		}
	}
	return 0;
}

static void on_signal(uv_signal_t *h, int signum)
{
	sc_server_t *s = h->data;
	fprintf(stderr, "server: signal %d, shutting down\n", signum);
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
		fprintf(stderr, "server: store sync failed; exiting\n");
		abort();
	}
	sc_http_flush(s->http);
}

static int setup(sc_server_t *s, const opts_t *o)
{
	int rc = sc__ha_open_store(o->store, o->data_dir, o->etcd_prefix, &s->store);
	if (rc == SC_EINVAL)
		fprintf(stderr, "server: --store: expected sqlite:PATH or etcd://HOST:PORT[,...]"
				" and --etcd-prefix /a/b/\n");
	if (rc < 0)
		return rc;
	if ((rc = sc__auth_init(s)) < 0 || (rc = sc_store_sync(s->store)) < 0 ||
	    (rc = sc__cache_open(s->store, &s->cache)) < 0)
		return rc;
	sc_http_limits_t lim = { .max_body_bytes = o->max_body, .idle_timeout_ms = 60000 };
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
	    (rc = sc__agent_api_register(s)) < 0 ||
	    (rc = sc__metrics_register(s)) < 0 || (rc = sc__ui_register(s)) < 0)
		return rc;
	if ((rc = sc_http_listen(s->http, o->host, o->port)) < 0) {
		fprintf(stderr, "server: cannot listen on %s:%d\n", o->host, o->port);
		return rc;
	}
	char id[128];
	snprintf(id, sizeof(id), "%s:%d", o->host, sc_http_port(s->http));
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
	opts_t o;
	int rc = parse_opts(argc, argv, &o);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	sc_server_t s = { 0 };
	s.loop = uv_default_loop();
	rc = setup(&s, &o);
	if (rc < 0) {
		fprintf(stderr, "server: start failed: %s\n", sc_strerror(rc));
		goto out;
	}
	fprintf(stderr, "server: listening on http://%s:%d (data in %s)\n", o.host,
		sc_http_port(s.http), o.store ? o.store : o.data_dir);
	/* Ready for systemd once the API answers on a migrated store (a
	 * follower of an HA pair is ready too: it serves reads and forwards
	 * nothing). The watchdog then checks that the loop keeps turning. */
	sc_sd_watchdog_start(s.loop, &s.watchdog);
	sc_sd_notifyf("READY=1\nSTATUS=serving the API on http://%s:%d, store %s", o.host,
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
	return rc < 0 ? 1 : 0;
}
