/* Probes: startup, liveness and readiness, each an http GET (2xx/3xx is a
 * success), a tcp connect or an exec (status 0), every periodSeconds with a
 * timeoutSeconds deadline; failureThreshold consecutive failures or
 * successThreshold consecutive successes give a verdict to the pod
 * (its on_verdict, pod.c), which decides what it means.
 *
 * Each check is an "attempt" allocated on its own: stopping a probe only
 * detaches its attempt in flight, which then finishes (closes its handles)
 * without reporting, so a probe never waits for a slow target. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/probe.h"
#include "base/alloc.h"
#include "agent/backoff.h"
#include "agent/cgv1.h"
#include "agent/devcg.h"
#include "agent/podenv.h"
#include "agent/spawn.h"
#include "starcloud/error.h"

#define MAX_EXEC_ARGS 64

enum { PT_HTTP = 0, PT_TCP, PT_EXEC };

typedef struct attempt attempt_t;

struct sc_probe {
	sc_pod_t *p;
	int kind, type;
	char path[512];
	int port;
	int https;   /* http probe with scheme HTTPS */
	json_t *cmd; /* owned */
	uint64_t period_ms, timeout_ms, initial_ms;
	int fail_thr, succ_thr;
	sc_threshold_t thr;
	int running;
	uv_timer_t timer;
	attempt_t *cur;
};

struct attempt {
	sc_probe_t *pr; /* NULL once detached */
	int type;
	int done;
	int handles;
	sc_hcli_req_t *http;
	uv_tcp_t tcp;
	uv_connect_t conn;
	sc_child_t child; /* exec: running while child.h is set and open */
	uv_timer_t deadline;
};

/* ---- verdicts ---------------------------------------------------------- */

static void probe_result(sc_probe_t *pr, int ok, const char *msg)
{
	int v = sc_threshold_add(&pr->thr, ok, pr->fail_thr, pr->succ_thr);
	if (v >= 0)
		pr->p->on_verdict(pr->p, pr->kind, v, v ? "" : msg);
}

/* ---- attempts ---------------------------------------------------------- */

static void attempt_unref(attempt_t *at)
{
	if (--at->handles == 0)
		free(at);
}

static void on_attempt_closed(uv_handle_t *h)
{
	attempt_unref(h->data);
}

static void on_child_closed(sc_child_t *c)
{
	attempt_unref(c->data);
}

/* An exec attempt's process is closed by its exit (on_exec_exit), never
 * before: it must be reaped, and its group killed. */
static void attempt_close(attempt_t *at)
{
	if (at->handles == 0) {
		free(at);
		return;
	}
	uv_close((uv_handle_t *)&at->deadline, on_attempt_closed);
	if (at->type == PT_TCP)
		uv_close((uv_handle_t *)&at->tcp, on_attempt_closed);
}

/* Reports once, then releases the attempt. */
static void attempt_end(attempt_t *at, int ok, const char *msg)
{
	if (at->done)
		return;
	at->done = 1;
	sc_probe_t *pr = at->pr;
	if (pr) {
		pr->cur = NULL;
		probe_result(pr, ok, msg);
	}
	if (at->type == PT_HTTP)
		free(at);
	else
		attempt_close(at);
}

static void on_http(int status, const char *body, size_t len, void *ud)
{
	attempt_t *at = ud;
	char msg[96];
	if (status == SC_ECANCELED && at->pr) {
		/* The agent is closing its client: no verdict on the pod. */
		at->pr->cur = NULL;
		at->pr = NULL;
	}
	if (status < 0)
		snprintf(msg, sizeof(msg), "http GET failed: %s", sc_strerror(status));
	else
		snprintf(msg, sizeof(msg), "http GET returned %d", status);
	at->http = NULL;
	attempt_end(at, status >= 200 && status < 400, msg);
}

static void on_deadline(uv_timer_t *t)
{
	attempt_t *at = t->data;
	/* The whole group: a child the probe left behind goes too. */
	if (at->type == PT_EXEC && at->child.pid > 0)
		kill(-at->child.pid, SIGKILL);
	attempt_end(at, 0, "timed out");
}

static void on_connect(uv_connect_t *c, int status)
{
	attempt_t *at = c->data;
	char msg[96];
	snprintf(msg, sizeof(msg), "tcp connect failed: %s", status ? uv_strerror(status) : "");
	attempt_end(at, status == 0, msg);
}

static void on_exec_exit(sc_child_t *c, int status, int sig)
{
	attempt_t *at = c->data;
	char msg[96];
	/* Nothing of a probe outlives it: what it left in its group ends (its
	 * id is not reused before the reap, spawn.h; -1: already reaped). */
	if (status >= 0 || sig)
		kill(-c->pid, SIGKILL);
	sc__child_close(c);
	if (sig)
		snprintf(msg, sizeof(msg), "exec killed by signal %d", sig);
	else
		snprintf(msg, sizeof(msg), "exec exited with status %d", status);
	attempt_end(at, status == 0 && sig == 0, msg);
}

static int start_tcp(sc_probe_t *pr, attempt_t *at)
{
	struct sockaddr_in sa;
	uv_ip4_addr("127.0.0.1", pr->port, &sa);
	uv_tcp_init(pr->p->a->loop, &at->tcp);
	at->tcp.data = at;
	at->handles++;
	at->conn.data = at;
	return uv_tcp_connect(&at->conn, &at->tcp, (struct sockaddr *)&sa, on_connect);
}

/* Forks the probe inside the pod's cgroups (v1, devices: born there),
 * waiting at its gate (spawn.h). 0 or a negative errno. */
static int fork_in_pod(sc_pod_t *p, const sc_spawn_opts_t *so, sc_child_t *c)
{
	int lim = sc__cgv1_join(p);
	if (lim < 0)
		return UV_EPERM;
	int in = sc__devcg_enter(p);
	if (in < 0) {
		sc__cgv1_leave(p->a, lim);
		return UV_EPERM;
	}
	int rc = sc__spawn_gated(so, c);
	sc__devcg_leave(p->a, in);
	sc__cgv1_leave(p->a, lim);
	return rc;
}

/* As the pod's own process runs (docs/AGENT.md, "Probes"): its user, its
 * folder, its environment (never the agent's, which may hold its token),
 * inside its cgroups (v2: moved before it runs anything), in a process
 * group of its own that the deadline kills whole. */
static int start_exec(sc_probe_t *pr, attempt_t *at)
{
	sc_pod_t *p = pr->p;
	char *argv[MAX_EXEC_ARGS + 1];
	size_t i, n = 0;
	json_t *v;
	sc_podenv_t env;
	json_array_foreach(pr->cmd, i, v)
	{
		if (n < MAX_EXEC_ARGS)
			argv[n++] = (char *)json_string_value(v);
	}
	argv[n] = NULL;
	if (sc__podenv_build(p, &env) < 0)
		return UV_E2BIG;
	sc_spawn_opts_t so = sc__podenv_spawn_opts(p, argv, &env, -1);
	at->child.data = at;
	at->child.on_exit = on_exec_exit;
	at->child.on_closed = on_child_closed;
	int rc = fork_in_pod(p, &so, &at->child);
	if (rc == 0 && sc__podenv_cgroup_join(p, at->child.pid) < 0) {
		sc__spawn_cancel(&at->child);
		rc = UV_EPERM;
	}
	if (rc == 0)
		rc = sc__spawn_release(&at->child);
	sc__podenv_free(&env);
	if (rc < 0)
		return rc; /* nothing to watch: reaped */
	sc__child_watch(p->a->loop, &at->child);
	at->handles++;
	return 0;
}

static void attempt_start(sc_probe_t *pr)
{
	attempt_t *at = sc_xcalloc(1, sizeof(*at));
	char url[700];
	int rc = 0;
	at->pr = pr;
	at->type = pr->type;
	pr->cur = at;
	if (pr->type == PT_HTTP) {
		/* HTTPS as Kubernetes probes it: the pod's certificate is not
		 * verified (it is named for its clients, not for 127.0.0.1), so
		 * probes have a client of their own (agent.c: a->probe_http). */
		snprintf(url, sizeof(url), "%s://127.0.0.1:%d%s", pr->https ? "https" : "http",
		         pr->port, pr->path);
		sc_hfetch_t o = {.url = url,
		                 .timeout_ms = pr->timeout_ms,
		                 .max_body = 64 * 1024,
		                 .done = on_http,
		                 .ud = at};
		if (sc_hfetch(pr->p->a->probe_http, &o, &at->http) < 0)
			attempt_end(at, 0, "cannot start the http request");
		return;
	}
	uv_timer_init(pr->p->a->loop, &at->deadline);
	at->deadline.data = at;
	at->handles = 1;
	uv_timer_start(&at->deadline, on_deadline, pr->timeout_ms, 0);
	rc = pr->type == PT_TCP ? start_tcp(pr, at) : start_exec(pr, at);
	if (rc < 0) {
		char msg[128];
		snprintf(msg, sizeof(msg), "%s: %s", pr->type == PT_TCP ? "tcp" : "exec",
		         uv_strerror(rc));
		attempt_end(at, 0, msg);
	}
}

/* Leaves the attempt in flight to finish on its own (an exec probe's
 * process group is killed). */
static void attempt_detach(sc_probe_t *pr)
{
	attempt_t *at = pr->cur;
	if (!at)
		return;
	pr->cur = NULL;
	at->pr = NULL;
	if (at->type == PT_HTTP)
		sc_hcli_cancel(at->http); /* on_http frees it, reporting nothing */
	/* An exec probe's group goes now (its exit, not reaped yet, ends the
	 * attempt): a probe of a stopped pod, or of an agent that exits, must
	 * not live on in the pod's cgroups. */
	if (at->type == PT_EXEC && at->child.pid > 0 && !at->done)
		kill(-at->child.pid, SIGKILL);
}

/* ---- probe ------------------------------------------------------------- */

static void on_tick(uv_timer_t *t)
{
	sc_probe_t *pr = t->data;
	if (pr->running && !pr->cur)
		attempt_start(pr);
}

static uint64_t seconds(json_t *spec, const char *key, uint64_t dflt)
{
	json_t *v = json_object_get(spec, key);
	return json_is_integer(v) ? (uint64_t)json_integer_value(v) : dflt;
}

sc_probe_t *sc__probe_new(sc_pod_t *p, int kind, json_t *spec)
{
	json_t *http = json_object_get(spec, "http"), *tcp = json_object_get(spec, "tcp");
	json_t *ex = json_object_get(spec, "exec");
	if (!json_is_object(spec) || (!http && !tcp && !ex))
		return NULL;
	sc_probe_t *pr = sc_xcalloc(1, sizeof(*pr));
	pr->p = p;
	pr->kind = kind;
	pr->type = http ? PT_HTTP : tcp ? PT_TCP : PT_EXEC;
	json_t *a = http ? http : tcp;
	pr->port = (int)json_integer_value(json_object_get(a, "port"));
	const char *path = json_string_value(json_object_get(http, "path"));
	const char *scheme = json_string_value(json_object_get(http, "scheme"));
	pr->https = scheme && strcasecmp(scheme, "https") == 0;
	snprintf(pr->path, sizeof(pr->path), "%s", path ? path : "/");
	pr->cmd = json_incref(json_object_get(ex, "command"));
	pr->period_ms = seconds(spec, "periodSeconds", 10) * 1000;
	pr->timeout_ms = seconds(spec, "timeoutSeconds", 1) * 1000;
	pr->initial_ms = seconds(spec, "initialDelaySeconds", 0) * 1000;
	pr->fail_thr = (int)seconds(spec, "failureThreshold", 3);
	pr->succ_thr = (int)seconds(spec, "successThreshold", 1);
	sc_threshold_init(&pr->thr);
	uv_timer_init(p->a->loop, &pr->timer);
	pr->timer.data = pr;
	return pr;
}

void sc__probe_start(sc_probe_t *pr)
{
	if (!pr)
		return;
	attempt_detach(pr);
	sc_threshold_init(&pr->thr);
	pr->running = 1;
	uv_timer_start(&pr->timer, on_tick, pr->initial_ms, pr->period_ms);
}

void sc__probe_stop(sc_probe_t *pr)
{
	if (!pr)
		return;
	pr->running = 0;
	uv_timer_stop(&pr->timer);
	attempt_detach(pr);
}

static void on_probe_closed(uv_handle_t *h)
{
	sc_probe_t *pr = h->data;
	json_decref(pr->cmd);
	free(pr);
}

void sc__probe_free(sc_probe_t *pr)
{
	if (!pr)
		return;
	sc__probe_stop(pr);
	uv_close((uv_handle_t *)&pr->timer, on_probe_closed);
}
