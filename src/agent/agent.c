/* `starcloud agent`: registers this node, keeps its lease alive, runs the
 * pods the scheduler binds here and reports on them (docs/AGENT.md).
 *
 * Start-up: discover GPUs (NVML, else --gpus) -> open the status port ->
 * register the Node (create, or patch labels and capacity so a drain's
 * cordon survives) -> heartbeat every --heartbeat (the server expires the
 * lease after three missed ones) -> list + watch jobs and deployments.
 * A heartbeat carries every pod's report; a change sends one at once. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/state.h"
#include "agent/status.h"
#include "agent/sync.h"
#include "agent/probe.h"
#include "base/alloc.h"
#include "base/log.h"
#include "agent/agent_opts.h"
#include "agent/guard.h"
#include "agent/pod.h"
#include "agent/cgname.h"
#include "agent/cgv1.h"
#include "agent/devcg.h"
#include "agent/podenv.h"
#include "agent/podstore.h"
#include "base/version.h"
#include "net/sdnotify.h"
#include "net/tlsreload.h"
#include "starcloud/error.h"

#define TICK_MS 1000
#define GC_EVERY_TICKS 600 /* old pod folders: checked every ten minutes */

static void url_of(sc_agent_t *a, char *out, size_t outsz, const char *fmt, const char *arg)
{
	int n = snprintf(out, outsz, "%s", a->server);
	snprintf(out + n, outsz - (size_t)n, fmt, arg);
}

/* Moves a->server to the next URL of --server (HA control plane). */
static void sc__agent_next_server(sc_agent_t *a)
{
	const char *p = a->o.server;
	size_t count = 0, i = 0;
	for (const char *q = p; q; q = strchr(q + 1, ','))
		count++;
	a->server_idx = (a->server_idx + 1) % count;
	while (i++ < a->server_idx)
		p = strchr(p, ',') + 1;
	snprintf(a->server, sizeof(a->server), "%.*s", (int)strcspn(p, ","), p);
}

static void request(sc_agent_t *a, const char *method, const char *url, json_t *body,
                    sc_hfetch_done_fn done, sc_hcli_req_t **out)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	sc_hfetch_t o = {.method = method,
	                 .url = url,
	                 .token = a->o.token,
	                 .body = text,
	                 .body_len = text ? strlen(text) : 0,
	                 .timeout_ms = a->o.heartbeat_ms * 2 + 1000,
	                 .done = done,
	                 .ud = a};
	sc_hcli_req_t *r = NULL;
	if (sc_hfetch(a->http, &o, &r) < 0) {
		sc_log_error("cannot send %s %s (a bad --server URL?)", method, url);
		r = NULL;
	}
	if (out)
		*out = r;
	free(text);
}

/* ---- reports and heartbeats -------------------------------------------- */

static json_t *conditions(sc_agent_t *a)
{
	int gpu_ok = a->gpus.error[0] == '\0';
	return json_pack("[{s:s,s:s},{s:s,s:s,s:s}]", "type", "Ready", "status", "True", "type",
	                 "GPUHealthy", "status", gpu_ok ? "True" : "False", "message",
	                 a->gpus.error);
}

static json_t *report_body(sc_agent_t *a)
{
	json_t *pods = json_array();
	/* A pod being stopped is listed too, marked stopping: the server moves
	 * a pod to another node only once this node no longer lists it, so it
	 * never runs on two nodes at once (the soak of issue 23). */
	for (sc_pod_t *p = a->pods; p; p = p->next) {
		json_t *r = sc__pod_report(p);
		if (p->stopping)
			json_object_set_new(r, "stopping", json_true());
		json_array_append_new(pods, r);
	}
	json_t *b = json_pack("{s:s,s:I,s:o,s:o,s:o,s:s}", "address", a->advertise, "leaseSeconds",
	                      (json_int_t)((a->o.heartbeat_ms * 3 + 999) / 1000), "conditions",
	                      conditions(a), "devices", sc_gpu_devices_json(&a->gpus), "pods", pods,
	                      "gpuSource", a->gpus.source);
	json_object_set_new(b, "leaseMillis", json_integer((json_int_t)(a->o.heartbeat_ms * 3)));
	json_object_set_new(b, "fenceMillis", json_integer((json_int_t)a->o.fence_ms));
	if (a->tls)
		json_object_set_new(b, "statusTls",
		                    json_true()); /* the server reads logs over https */
	return b;
}

static void send_report(sc_agent_t *a);
static void do_register(sc_agent_t *a);
static void fence_arm(sc_agent_t *a);
static void guard_renew(sc_agent_t *a);

static void on_report(int status, const char *body, size_t len, void *ud)
{
	sc_agent_t *a = ud;
	a->report_req = NULL;
	if (status == SC_ECANCELED)
		return; /* the agent is stopping */
	json_t *resp = status == 200 ? json_loadb(body, len, 0, NULL) : NULL;
	int lost = json_is_true(json_object_get(resp, "leaseWasLost"));
	const char *key = json_string_value(json_object_get(resp, "statusKey"));
	if (key && strlen(key) < sizeof(a->status_key))
		snprintf(a->status_key, sizeof(a->status_key), "%s", key);
	json_decref(resp);
	if (status == 200) {
		int was_fenced = a->fenced;
		a->fenced = 0;
		if (a->hb_failing || lost || was_fenced) {
			sc_log_info("server reachable again: listing and watching anew");
			sc__sync_restart(a);
		}
		a->hb_failing = 0;
		a->last_hb_ok = sc__agent_now_ms(a);
		fence_arm(a);
		guard_renew(a);
	} else {
		/* The server's own words when it refuses (a client too old for
		 * it: base/version.h), so the log says what to do. */
		json_t *err = status >= 400 ? json_loadb(body, len, 0, NULL) : NULL;
		const char *why =
		    json_string_value(json_object_get(json_object_get(err, "error"), "message"));
		if (!a->hb_failing)
			sc_log_warn("heartbeat failed (%d%s%s)", status,
			            status < 0 ? ": server unreachable"
			            : why      ? ": "
			                       : "",
			            why ? why : "");
		json_decref(err);
		a->hb_failing = 1;
		/* Unreachable, or a follower (503): try the next server; the
		 * success there lists and watches anew. */
		if (status < 0 || status == 503)
			sc__agent_next_server(a);
		if (status == 404) {
			a->registered = 0;
			do_register(a);
			return;
		}
	}
	if (a->report_again) {
		a->report_again = 0;
		send_report(a);
	}
}

static void send_report(sc_agent_t *a)
{
	char url[1024];
	if (!a->registered)
		return;
	if (a->report_req) {
		a->report_again = 1;
		return;
	}
	json_t *b = report_body(a);
	a->report_sent = sc__agent_now_ms(a);
	url_of(a, url, sizeof(url), "/api/v1/agents/%s/heartbeat", a->o.name);
	request(a, "POST", url, b, on_report, &a->report_req);
	json_decref(b);
}

static void on_report_timer(uv_timer_t *t)
{
	send_report(t->data);
}

/* Fencing (docs/AGENT.md, "Restarts and fencing"). A node whose lease
 * lapsed is given up by the server: it marks the node NotReady when the
 * lease expires and gives its pods away lease + --fence-time after the
 * last heartbeat it received. The node stops them first, at the fence
 * deadline: the send time of the last heartbeat the server took + lease +
 * half the fence time (the send time is before the server's receive time,
 * so this is at least half the fence time ahead of the server), and kills
 * what is left a quarter of the fence time later. Two stop them: the agent
 * itself (this timer: it also starts nothing while fenced) and the pod
 * guard (guard.c), which does it even when the agent is dead or frozen;
 * the deadline reaches the guard through DATA/lease after each heartbeat
 * the server took. The in-flight request may time out much later, so the
 * deadline has its own timer rather than waiting for a failed heartbeat. */
static uint64_t fence_deadline(sc_agent_t *a)
{
	return a->report_sent + a->o.heartbeat_ms * 3 + a->o.fence_ms / 2;
}

static void on_fence(uv_timer_t *t)
{
	sc_agent_t *a = t->data;
	if (a->fenced || a->stopping)
		return;
	a->fenced = 1;
	sc_log_warn("lease not renewed for %llu ms: stopping every pod (fencing)",
	            (unsigned long long)(sc__agent_now_ms(a) - a->last_hb_ok));
	for (sc_pod_t *p = a->pods, *next; p; p = next) {
		next = p->next;
		sc__pod_fence(p);
	}
}

static void fence_arm(sc_agent_t *a)
{
	uint64_t now = sc__agent_now_ms(a), deadline = fence_deadline(a);
	a->fence_at = deadline;
	uv_timer_start(&a->fence_timer, on_fence, deadline > now ? deadline - now : 0, 0);
}

/* Tells the pod guard the new fence deadline (in the machine's monotonic
 * clock: the loop's clock is private to this process) and makes sure one
 * runs. */
static void guard_renew(sc_agent_t *a)
{
	uint64_t now = sc__agent_now_ms(a), deadline = fence_deadline(a);
	sc_guard_lease_t l = {.deadline_ms = sc__mono_ms() + (deadline > now ? deadline - now : 0),
	                      .grace_ms = a->o.fence_ms / 4,
	                      .agent_pid = (int)getpid()};
	if (sc__guard_write_lease(a->o.data_dir, &l) < 0) {
		sc_log_warn("cannot write %s/lease: the pod guard cannot fence this node's pods "
		            "if the agent dies",
		            a->o.data_dir);
		return;
	}
	if (sc__guard_ensure(a->o.data_dir) < 0)
		sc_log_warn("cannot start the pod guard");
}

static void on_heartbeat(uv_timer_t *t)
{
	send_report(t->data);
}

/* ---- registration ------------------------------------------------------ */

static json_t *node_object(sc_agent_t *a)
{
	json_t *labels = json_object();
	sc__agent_labels(a->o.labels, labels);
	return json_pack("{s:s,s:s,s:{s:s,s:o},s:{s:f,s:I,s:o}}", "apiVersion", "starcloud.dev/v1",
	                 "kind", "Node", "metadata", "name", a->o.name, "labels", labels, "spec",
	                 "cpu", (double)a->o.cpu_milli / 1000.0, "memory", (json_int_t)a->o.memory,
	                 "gpus", sc_gpu_node_spec(&a->gpus));
}

static void registered(sc_agent_t *a)
{
	if (a->registered)
		return;
	a->registered = 1;
	a->last_hb_ok = a->report_sent = sc__agent_now_ms(a);
	fence_arm(a);
	sc_log_info("registered with %s (%d GPUs, %s)", a->server, a->gpus.count, a->gpus.source);
	uv_timer_start(&a->hb_timer, on_heartbeat, 0, a->o.heartbeat_ms);
	sc__sync_start(a);
}

static void on_register_timer(uv_timer_t *t);

static void on_patched(int status, const char *body, size_t len, void *ud)
{
	sc_agent_t *a = ud;
	if (status == SC_ECANCELED)
		return; /* the agent is stopping */
	if (status == 200) {
		registered(a);
		return;
	}
	sc_log_warn("cannot update Node %s (%d): %.*s", a->o.name, status,
	            (int)(len > 300 ? 300 : len), body);
	uv_timer_start(&a->hb_timer, on_register_timer, a->o.heartbeat_ms, 0);
}

static void on_created(int status, const char *body, size_t len, void *ud)
{
	sc_agent_t *a = ud;
	char url[1024];
	if (status == SC_ECANCELED)
		return; /* the agent is stopping */
	if (status == 201) {
		registered(a);
		return;
	}
	if (status == 409) {
		/* Exists: a merge patch of labels and capacity keeps what others
		 * set (a drain's cordon, annotations). */
		json_t *n = node_object(a);
		json_object_del(n, "apiVersion");
		json_object_del(n, "kind");
		url_of(a, url, sizeof(url), "/api/v1/nodes/%s", a->o.name);
		request(a, "PATCH", url, n, on_patched, NULL);
		json_decref(n);
		return;
	}
	sc_log_warn("cannot register Node %s (%d): %.*s", a->o.name, status,
	            (int)(len > 300 ? 300 : len), body);
	uv_timer_start(&a->hb_timer, on_register_timer, a->o.heartbeat_ms, 0);
}

static void on_register_timer(uv_timer_t *t)
{
	do_register(t->data);
}

static void do_register(sc_agent_t *a)
{
	char url[1024];
	if (a->stopping)
		return;
	uv_timer_stop(&a->hb_timer);
	json_t *n = node_object(a);
	url_of(a, url, sizeof(url), "/api/v1/nodes%s", "");
	request(a, "POST", url, n, on_created, NULL);
	json_decref(n);
}

/* ---- lifecycle --------------------------------------------------------- */

static void on_tick(uv_timer_t *t)
{
	sc_agent_t *a = t->data;
	sc__pods_tick(a);
	if (++a->ticks % GC_EVERY_TICKS == 0)
		sc__podstore_gc(a);
	/* A guard that died (or was killed) is replaced while pods run under a
	 * live lease; with a lapsed lease it has exited on purpose. */
	if (a->npods && !a->fenced && !a->stopping && !a->hb_failing &&
	    sc__agent_now_ms(a) < fence_deadline(a) && !sc__guard_running(a->o.data_dir))
		guard_renew(a);
	if (a->stopping && a->npods == 0) {
		if (a->o.drain) {
			/* Drained: nothing left to guard. */
			sc_guard_lease_t l = {.stop = 1};
			sc__guard_write_lease(a->o.data_dir, &l);
		}
		uv_stop(a->loop);
	}
}

static void close_all(sc_agent_t *a)
{
	sc__sync_stop(a);
	uv_timer_stop(&a->hb_timer);
	uv_timer_stop(&a->report_timer);
	uv_timer_stop(&a->fence_timer);
	uv_close((uv_handle_t *)&a->sigterm, NULL);
	uv_close((uv_handle_t *)&a->sigint, NULL);
	if (a->status)
		sc_http_server_close(a->status);
	a->status = NULL;
}

static void on_signal(uv_signal_t *h, int signum)
{
	sc_agent_t *a = h->data;
	if (a->stopping)
		return;
	a->stopping = 1;
	sc_sd_notify("STOPPING=1");
	sc_log_info("signal %d: no new pods; %s", signum,
	            a->o.drain ? "stopping every pod (--drain)" : "leaving running pods alone");
	sc__sync_stop(a);
	if (!a->o.drain) {
		uv_stop(a->loop);
		return;
	}
	for (sc_pod_t *p = a->pods, *next; p; p = next) {
		next = p->next;
		sc__pod_stop(p, "agent draining");
	}
	if (a->npods == 0)
		uv_stop(a->loop);
}

static int setup(sc_agent_t *a)
{
	int rc;
	if ((rc = sc__podsec_init(a)) < 0 || (rc = sc__status_start(a)) < 0)
		return rc;
	sc__cgname_init(a);
	sc__podenv_cgroup_init(a);
	sc__devcg_init(a);
	/* Before the first list: pods still running from an earlier agent are
	 * taken over, so the reconcile after the list keeps them (same
	 * assignment) or stops them, and never starts a second copy. */
	sc__podstore_adopt_all(a, sc__pod_adopt);
	sc__podstore_gc(a);
	sc_tls_reload_watch(a->loop, "listener", a->tls);
	sc_tls_reload_watch(a->loop, "client", a->tls_client);
	uv_timer_start(&a->tick_timer, on_tick, TICK_MS, TICK_MS);
	uv_signal_start(&a->sigterm, on_signal, SIGTERM);
	uv_signal_start(&a->sigint, on_signal, SIGINT);
	do_register(a);
	return 0;
}

/* Without --drain the pods outlive us: close their handles without
 * touching the processes (they lead their own sessions). */
static void release_pods(sc_agent_t *a)
{
	for (sc_pod_t *p = a->pods; p; p = p->next) {
		for (int k = 0; k < SC_PROBE_KINDS; k++)
			sc__probe_free(p->probes[k]);
		if (p->proc_open) {
			p->child.on_closed = NULL;
			sc__child_close(&p->child);
		}
		if (p->pidfd >= 0 && !uv_is_closing((uv_handle_t *)&p->pidpoll)) {
			uv_close((uv_handle_t *)&p->pidpoll, NULL);
			close(p->pidfd);
		}
		uv_close((uv_handle_t *)&p->timer, NULL);
		if (p->log_fd >= 0)
			close(p->log_fd);
	}
}

static void free_pods(sc_agent_t *a)
{
	while (a->pods) {
		sc_pod_t *p = a->pods;
		a->pods = p->next;
		json_decref(p->task);
		json_decref(p->binding);
		free(p);
	}
}

int sc_agent_main(int argc, char **argv)
{
	sc_agent_t *a = sc_calloc(1, sizeof(*a));
	if (!a)
		return 1;
	int rc = sc__agent_parse(argc, argv, a);
	if (rc != 0) {
		free(a);
		return rc > 0 ? 0 : 2;
	}
	char who[SC_AGENT_NAME_MAX + 8];
	snprintf(who, sizeof(who), "agent %s", a->o.name);
	sc_log_open(who);
	a->server_idx = (size_t)-1;
	sc__agent_next_server(a);
	a->loop = uv_default_loop();
	sc_hcli_opts_t hco = {.max_idle_per_host = 8, .user_agent = SC_USER_AGENT("agent")};
	a->http = sc_xcheck(sc_hcli_new(a->loop, &hco));
	char terr[512];
	if (sc_tls_client_ctx(a->o.ca, a->o.client_cert, a->o.client_key, &a->tls_client, terr,
	                      sizeof(terr)) < 0) {
		fprintf(stderr, "starcloud agent: %s\n", terr);
		sc_hcli_close(a->http);
		free(a);
		return 2;
	}
	sc_hcli_set_tls(a->http, a->tls_client);
	sc_hcli_opts_t pco = {.max_idle_per_host = 2, .user_agent = SC_USER_AGENT("agent")};
	sc_tls_pem_t no_verify = {.insecure = 1};
	a->probe_http = sc_xcheck(sc_hcli_new(a->loop, &pco));
	if (sc_tls_client_ctx_pem(&no_verify, &a->probe_tls, terr, sizeof(terr)) < 0) {
		fprintf(stderr, "starcloud agent: probes: %s\n", terr);
		return 2;
	}
	sc_hcli_set_tls(a->probe_http, a->probe_tls);
	uv_timer_init(a->loop, &a->hb_timer);
	uv_timer_init(a->loop, &a->report_timer);
	a->report_cb = on_report_timer;
	uv_timer_init(a->loop, &a->tick_timer);
	uv_timer_init(a->loop, &a->fence_timer);
	a->hb_timer.data = a->report_timer.data = a->tick_timer.data = a->fence_timer.data = a;
	uv_signal_init(a->loop, &a->sigterm);
	uv_signal_init(a->loop, &a->sigint);
	a->sigterm.data = a->sigint.data = a;
	sc__sync_init(a);
	if ((rc = sc__agent_discover(a)) < 0 || (rc = setup(a)) < 0) {
		if (!a->status || !sc_http_listen_error(a->status)[0]) /* else said */
			sc_log_error("agent: start failed: %s", sc_strerror(rc));
		rc = 1;
		goto out;
	}
	/* Ready for systemd once the status port listens and adopted pods are
	 * back under watch; registration goes on in the background (a server
	 * that is down must not make the unit fail to start). */
	sc_sd_watchdog_start(a->loop, &a->watchdog);
	sc_sd_notifyf("READY=1\nSTATUS=node %s, server %s", a->o.name, a->server);
	uv_run(a->loop, UV_RUN_DEFAULT);
	rc = 0;
	uv_close((uv_handle_t *)&a->watchdog, NULL);
out:
	close_all(a);
	release_pods(a);
	uv_close((uv_handle_t *)&a->hb_timer, NULL);
	uv_close((uv_handle_t *)&a->report_timer, NULL);
	uv_close((uv_handle_t *)&a->tick_timer, NULL);
	uv_close((uv_handle_t *)&a->fence_timer, NULL);
	sc__sync_free(a);
	sc_hcli_close(a->http);
	sc_hcli_close(a->probe_http);
	sc_tls_reload_stop();
	uv_run(a->loop, UV_RUN_NOWAIT);
	free_pods(a);
	sc__devcg_close(a);
	sc__cgv1_close(a);
	if (a->cgroup_ok)
		rmdir(a->cgroup_root); /* kept while a pod's cgroup is left in it */
	sc_gpu_sampler_close(a->sampler);
	json_decref(a->uids);
	sc_tls_ctx_free(a->tls);
	sc_tls_ctx_free(a->tls_client);
	sc_tls_ctx_free(a->probe_tls);
	free(a);
	return rc;
}
