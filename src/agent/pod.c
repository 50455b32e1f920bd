/* Pods: processes, restarts, graceful stops (see pod.h); the environment,
 * logs and cgroups a process starts with are in podenv.c. */
#include "agent/pod.h"
#include "base/alloc.h"
#include "base/log.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/cgv1.h"
#include "agent/devcg.h"
#include "agent/podenv.h"
#include "agent/podreach.h"
#include "agent/podstore.h"
#include "agent/probe.h"
#include "agent/backoff.h"
#include "starcloud/error.h"

#define MAX_ARGS 256

static void pod_spawn(sc_pod_t *p);

static const char *state_name(int s)
{
	static const char *const names[] = {"Running", "Running", "Succeeded", "Failed"};
	return names[s];
}

json_t *sc__pod_report(const sc_pod_t *p)
{
	json_t *r = json_pack("{s:s,s:s,s:s,s:s,s:b,s:i,s:s}", "kind", p->kind, "job", p->job,
	                      "name", p->name, "phase", state_name(p->state), "ready",
	                      p->ready && p->state == SC_PS_RUNNING, "restarts", p->restarts,
	                      "message", p->message);
	if (p->generation)
		json_object_set_new(r, "generation", json_integer(p->generation));
	if (p->started_at[0])
		json_object_set_new(r, "startedAt", json_string(p->started_at));
	if (p->has_exit)
		json_object_set_new(r, "exitCode", json_integer(p->exit_code));
	if (p->has_exit && p->reason[0])
		json_object_set_new(r, "reason", json_string(p->reason));
	return r;
}

static void set_message(sc_pod_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_message(sc_pod_t *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->message, sizeof(p->message), fmt, ap);
	va_end(ap);
}

static void changed(sc_pod_t *p)
{
	sc__agent_report_soon(p->a);
}

/* ---- freeing ----------------------------------------------------------- */

/* Handles: the timer (always), the child's watcher (while spawned) and an
 * adopted process's pidfd poll. The pod is freed when it is finished and
 * the last of them has closed. */
static void handle_closed(sc_pod_t *p)
{
	if (--p->handles_open > 0 || !p->closing)
		return;
	json_decref(p->task);
	json_decref(p->binding);
	free(p);
}

static void on_handle_closed(uv_handle_t *h)
{
	sc_pod_t *p = h->data;
	if (h == (uv_handle_t *)&p->pidpoll) {
		close(p->pidfd);
		p->pidfd = -1;
	}
	handle_closed(p);
}

static void on_child_closed(sc_child_t *c)
{
	sc_pod_t *p = c->data;
	p->proc_open = 0;
	handle_closed(p);
}

static void pod_unlink(sc_pod_t *p)
{
	sc_agent_t *a = p->a;
	for (sc_pod_t **pp = &a->pods; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			a->npods--;
			break;
		}
}

/* The process is gone and the pod is not wanted: release everything. */
static void pod_finish(sc_pod_t *p)
{
	if (p->closing)
		return;
	p->closing = 1;
	pod_unlink(p);
	for (int k = 0; k < SC_PROBE_KINDS; k++)
		sc__probe_free(p->probes[k]);
	if (p->log_fd >= 0)
		close(p->log_fd);
	sc__podenv_cgroup_remove(p);
	sc__devcg_remove(p);
	sc__podstore_forget(p);
	sc_log_info("pod %s/%s stopped", p->job, p->name);
	sc__agent_report_soon(p->a);
	sc__agent_resync_soon(p->a);
	uv_close((uv_handle_t *)&p->timer, on_handle_closed);
}

/* ---- restarts ---------------------------------------------------------- */

static void on_backoff(uv_timer_t *t)
{
	sc_pod_t *p = t->data;
	if (p->stopping || p->alive)
		return;
	if (p->proc_open) {
		uv_timer_start(&p->timer, on_backoff, 10, 0);
		return;
	}
	p->restarts++;
	pod_spawn(p);
}

/* Doubling delay from base to max; a pod that ran healthy for the reset
 * time starts again from base. */
static uint64_t next_backoff(sc_pod_t *p)
{
	const sc_agent_opts_t *o = &p->a->o;
	uint64_t ran = sc__agent_now_ms(p->a) - p->started_ms;
	p->backoff_ms = sc_backoff_next(p->backoff_ms, ran, o->backoff_base_ms, o->backoff_max_ms,
	                                o->backoff_reset_ms);
	return p->backoff_ms;
}

/* Decides what follows an exit by the restart policy. */
static void after_exit(sc_pod_t *p, int failed)
{
	int restart = p->restart_policy == SC_RESTART_ALWAYS ||
	              (p->restart_policy == SC_RESTART_ONFAILURE && failed);
	if (failed)
		p->failures++;
	if (restart && failed && p->failures > p->backoff_limit) {
		restart = 0;
		size_t n = strlen(p->message);
		snprintf(p->message + n, sizeof(p->message) - n, "; back-off limit %d reached",
		         p->backoff_limit);
	}
	if (!restart) {
		p->state = failed ? SC_PS_FAILED : SC_PS_SUCCEEDED;
		return;
	}
	uint64_t delay = next_backoff(p);
	p->state = SC_PS_BACKOFF;
	size_t n = strlen(p->message);
	snprintf(p->message + n, sizeof(p->message) - n, "; restarting in %.1fs",
	         (double)delay / 1000.0);
	uv_timer_start(&p->timer, on_backoff, delay, 0);
}

/* Logged once what follows is decided, so the line says what the agent
 * does next ("; restarting in 0.4s", "; back-off limit 3 reached"). */
static void log_exit(const sc_pod_t *p)
{
	sc_log_info("pod %s/%s: %s", p->job, p->name, p->message);
}

/* Common to both ways a process ends (our child, or adopted): reaps
 * what it left in its group, stops the probes. 0 when the pod was being
 * stopped for good (and is now finished). */
static int process_gone(sc_pod_t *p)
{
	/* Reap whatever the main process left behind in its group, and in its
	 * cgroups what left the group (setsid): a restart starts clean, as a
	 * container's does. */
	kill(-p->pid, SIGKILL);
	sc__podenv_cgroup_kill(p);
	p->alive = 0;
	p->ready = 0;
	p->adopted = 0;
	uv_timer_stop(&p->timer);
	for (int k = 0; k < SC_PROBE_KINDS; k++)
		sc__probe_stop(p->probes[k]);
	if (p->stopping) {
		pod_finish(p);
		return 0;
	}
	return 1;
}

/* An adopted process ended. It was not our child, so its status is
 * unknown: it counts as a failure (a restart under Always or OnFailure). */
static void adopted_exit(sc_pod_t *p)
{
	if (!p->alive || !p->adopted)
		return;
	if (p->pidfd >= 0) {
		uv_poll_stop(&p->pidpoll);
		uv_close((uv_handle_t *)&p->pidpoll, on_handle_closed);
	}
	int killed = p->restart_kill;
	if (!process_gone(p))
		return;
	if (!killed)
		set_message(p, "%s", "exited while adopted (status unknown)");
	p->has_exit = 0;
	p->restart_kill = 0;
	after_exit(p, 1);
	log_exit(p);
	changed(p);
}

static void on_pidfd(uv_poll_t *h, int status, int events)
{
	adopted_exit(h->data);
}

static void on_exit_cb(sc_child_t *c, int status, int sig)
{
	sc_pod_t *p = c->data;
	sc__child_close(c);
	if (!process_gone(p))
		return;
	p->has_exit = 1;
	p->exit_code = sig ? 128 + sig : (int)status;
	int failed = status != 0 || sig != 0 || p->restart_kill;
	/* The kernel's OOM killer sends SIGKILL and counts it in the pod's
	 * memory cgroup: Kubernetes' reason OOMKilled. */
	long long ooms = sig == SIGKILL ? sc__podenv_oom_kills(p) : -1;
	int oom = ooms > 0 && ooms > p->oom_base;
	snprintf(p->reason, sizeof(p->reason), "%s", oom ? "OOMKilled" : "");
	if (oom) {
		int64_t cpu, mem;
		sc__podenv_limits(p, &cpu, &mem);
		set_message(p,
		            "OOMKilled: the kernel killed it above its memory limit (%lld bytes)",
		            (long long)mem);
	} else if (p->restart_kill)
		; /* the probe's message stays */
	else if (sig)
		set_message(p, "killed by signal %d", sig);
	else
		set_message(p, "exited with status %d", (int)status);
	p->restart_kill = 0;
	after_exit(p, failed);
	log_exit(p);
	changed(p);
}

/* ---- starting ---------------------------------------------------------- */

static int build_args(sc_pod_t *p, char **argv)
{
	size_t n = 0, i;
	json_t *v;
	json_array_foreach(json_object_get(p->task, "command"), i, v)
	{
		if (n < MAX_ARGS && json_is_string(v))
			argv[n++] = (char *)json_string_value(v);
	}
	json_array_foreach(json_object_get(p->task, "args"), i, v)
	{
		if (n < MAX_ARGS && json_is_string(v))
			argv[n++] = (char *)json_string_value(v);
	}
	argv[n] = NULL;
	return n ? 0 : SC_EINVAL;
}

static void start_probes(sc_pod_t *p)
{
	p->started = p->probes[SC_PROBE_STARTUP] == NULL;
	p->ready = p->started && p->probes[SC_PROBE_READINESS] == NULL;
	if (!p->started) {
		sc__probe_start(p->probes[SC_PROBE_STARTUP]);
		return;
	}
	sc__probe_start(p->probes[SC_PROBE_LIVENESS]);
	sc__probe_start(p->probes[SC_PROBE_READINESS]);
}

static void spawn_failed(sc_pod_t *p, const char *what, int err)
{
	set_message(p, "cannot start: %s: %s", what, uv_strerror(err));
	p->reason[0] = '\0';
	p->has_exit = 1;
	p->exit_code = 127;
	after_exit(p, 1);
	log_exit(p);
	changed(p);
}

/* The pod's user cannot reach its program (podreach.h): as Kubernetes'
 * CreateContainerError, the pod fails before any process exists, and its
 * restart policy decides whether it is tried again (the folder may be
 * opened meanwhile). */
static void unreachable(sc_pod_t *p, const char *why, int rc)
{
	set_message(p, "cannot start: %s", why);
	snprintf(p->reason, sizeof(p->reason), "%s", "CreateContainerError");
	p->has_exit = 1;
	/* The shell's codes: not found, found but cannot be run. */
	p->exit_code = rc == SC_ENOTFOUND ? 127 : 126;
	after_exit(p, 1);
	log_exit(p);
	changed(p);
}

/* Test hook (docs/AGENT.md): with STARCLOUD_AGENT_SPAWN_STOP_FILE=PATH,
 * when PATH exists and names this point of a pod's start ("after-fork",
 * "after-record"), the agent removes it and stops itself (SIGSTOP) there,
 * as an agent frozen at that instant would be. The e2e tests freeze or kill
 * it there to show that no pod runs unrecorded, and none runs twice. */
static void test_stop_at(const char *point)
{
	const char *path = getenv("STARCLOUD_AGENT_SPAWN_STOP_FILE");
	char text[32] = "";
	FILE *f = path ? fopen(path, "re") : NULL;
	if (!f)
		return;
	if (!fgets(text, sizeof(text), f))
		text[0] = '\0';
	fclose(f);
	text[strcspn(text, "\n")] = '\0';
	if (strcmp(text, point) != 0)
		return;
	unlink(path);
	sc_log_warn("test hook: the agent stops itself %s of a pod's process", point);
	raise(SIGSTOP);
}

/* Forks the pod's process inside its cgroups (v1: born there, cgv1.h and
 * devcg.h), waiting at its gate (spawn.h). 0, or a negative errno. */
static int fork_gated(sc_pod_t *p, const sc_spawn_opts_t *so, const char **what)
{
	int64_t cpu, mem;
	sc__podenv_limits(p, &cpu, &mem);
	int lim = sc__cgv1_enter(p, cpu, mem);
	if (lim < 0) {
		*what = "CPU and memory limits (cgroup v1)";
		return UV_EPERM;
	}
	int in = sc__devcg_enter(p);
	if (in < 0) {
		sc__cgv1_leave(p->a, lim);
		*what = "GPU isolation (devices cgroup)";
		return UV_EPERM;
	}
	int rc = sc__spawn_gated(so, &p->child);
	sc__devcg_leave(p->a, in);
	sc__cgv1_leave(p->a, lim);
	*what = "fork";
	return rc;
}

/* The child waits at its gate: its record first, then it may run. Nothing
 * of the pod runs unless its record is on disk (the guard fences by it, a
 * restarted agent adopts by it) and the node's lease still holds (else
 * the server may have given the pod away: the agent was frozen). */
static int record_then_release(sc_pod_t *p, const char **what)
{
	p->pid = p->child.pid;
	/* v2: moved before it runs anything (v1: born inside). */
	if (sc__podenv_cgroup_enter(p, p->pid) < 0) {
		sc__spawn_cancel(&p->child);
		*what = "GPU isolation (cgroup v2 device program)";
		return UV_EPERM;
	}
	if (sc__podstore_save(p) < 0) {
		sc__spawn_cancel(&p->child);
		sc__podstore_forget(p);
		*what = "its record (pod.json)";
		return UV_EIO;
	}
	test_stop_at("after-record");
	if (!sc__agent_lease_holds(p->a)) {
		sc__spawn_cancel(&p->child);
		sc__podstore_forget(p);
		return 1;
	}
	int rc = sc__spawn_release(&p->child);
	if (rc < 0)
		sc__podstore_forget(p);
	return rc;
}

/* Not started for a lapsed lease: the fence (agent.c) stops the pod next;
 * until then it waits as in a back-off, counting no failure. */
static void lease_lapsed(sc_pod_t *p)
{
	sc_log_warn("pod %s/%s: not started: the node's lease lapsed while it was being "
	            "started",
	            p->job, p->name);
	p->pid = 0;
	p->state = SC_PS_BACKOFF;
	set_message(p, "%s", "not started: the node's lease lapsed");
	uv_timer_start(&p->timer, on_backoff, p->a->o.backoff_base_ms, 0);
	changed(p);
}

static void pod_spawn(sc_pod_t *p)
{
	char why[SC_AGENT_MSG_MAX];
	char *argv[MAX_ARGS + 1];
	sc_podenv_t env;
	const char *what = NULL;
	if (build_args(p, argv) < 0) {
		spawn_failed(p, "command", UV_EINVAL);
		return;
	}
	if (sc__podenv_build(p, &env) < 0) {
		spawn_failed(p, "environment", UV_E2BIG);
		return;
	}
	int asked = json_object_get(p->task, "workingDir") != NULL;
	int reach = sc__podreach_check(&p->sec, argv, env.vars, env.cwd, asked, why, sizeof(why));
	if (reach < 0) {
		sc__podenv_free(&env);
		unreachable(p, why, reach);
		return;
	}
	/* Its own session (setsid): the pod leads its own process group, so
	 * a stop reaches every process it started, and the agent's signals
	 * do not. Not root (podsec.h): the child drops root's supplementary
	 * groups before it changes user. */
	sc_spawn_opts_t so = sc__podenv_spawn_opts(p, argv, &env, p->log_fd);
	p->child.data = p;
	p->child.on_exit = on_exit_cb;
	p->child.on_closed = on_child_closed;
	int rc = fork_gated(p, &so, &what);
	if (rc == 0) {
		test_stop_at("after-fork");
		what = argv[0];
		rc = record_then_release(p, &what);
	}
	sc__podenv_free(&env);
	if (rc == 1) {
		lease_lapsed(p);
		return;
	}
	if (rc < 0) {
		p->pid = 0;
		spawn_failed(p, what, rc);
		return;
	}
	sc__child_watch(p->a->loop, &p->child);
	p->proc_open = 1;
	p->handles_open++;
	p->alive = 1;
	p->state = SC_PS_RUNNING;
	p->started_ms = sc__agent_now_ms(p->a);
	set_message(p, "%s", "");
	sc_log_info("pod %s/%s started (pid %d, restarts %d)", p->job, p->name, p->pid,
	            p->restarts);
	start_probes(p);
	changed(p);
}

/* The job's run-time settings, read as the decoder validated them. */
static void pod_settings(sc_pod_t *p, const char *kind, json_t *spec)
{
	sc_job_runtime_t rt;
	sc_job_runtime(kind, spec, &rt);
	p->restart_policy = rt.restart_policy;
	p->backoff_limit = rt.backoff_limit;
	p->grace_ms = rt.grace_seconds >= 0 ? (uint64_t)rt.grace_seconds * 1000 : p->a->o.grace_ms;
}

static void sc__pod_probe_verdict(sc_pod_t *p, int kind, int ok, const char *msg);

/* A pod object without a process; linked into the agent's list. */
static sc_pod_t *pod_new(sc_agent_t *a, const char *kind, const char *job, json_t *task,
                         json_t *binding)
{
	sc_pod_t *p = sc_xcalloc(1, sizeof(*p));
	p->a = a;
	p->on_verdict = sc__pod_probe_verdict;
	p->log_fd = p->pidfd = -1;
	snprintf(p->kind, sizeof(p->kind), "%s", kind);
	snprintf(p->job, sizeof(p->job), "%s", job);
	snprintf(p->name, sizeof(p->name), "%s",
	         json_string_value(json_object_get(binding, "name")));
	json_t *gen = json_object_get(binding, "generation");
	p->generation = json_is_integer(gen) ? json_integer_value(gen) : 0;
	const char *st = json_string_value(json_object_get(binding, "startedAt"));
	snprintf(p->started_at, sizeof(p->started_at), "%s", st ? st : "");
	p->task = json_deep_copy(task);
	p->binding = json_deep_copy(binding);
	uv_timer_init(a->loop, &p->timer);
	p->timer.data = p;
	p->handles_open = 1;
	json_t *probes = json_object_get(task, "probes");
	static const char *const names[] = {"startup", "liveness", "readiness"};
	for (int k = 0; k < SC_PROBE_KINDS; k++)
		p->probes[k] = sc__probe_new(p, k, json_object_get(probes, names[k]));
	p->next = a->pods;
	a->pods = p;
	a->npods++;
	return p;
}

sc_pod_t *sc__pod_start(sc_agent_t *a, const char *kind, const char *job, json_t *spec,
                        json_t *task, json_t *binding)
{
	sc_pod_t *p = pod_new(a, kind, job, task, binding);
	pod_settings(p, kind, spec);
	sc__podsec_assign(p, spec);
	if (sc__podenv_prepare(p) < 0) {
		spawn_failed(p, "log file", UV_EIO);
		return p;
	}
	pod_spawn(p);
	return p;
}

/* Watches an adopted process: a pidfd polled by the loop when the kernel
 * has pidfd_open (5.3+), else the once-a-second tick. */
static void watch_adopted(sc_pod_t *p)
{
	p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	if (p->pidfd < 0)
		return;
	if (uv_poll_init(p->a->loop, &p->pidpoll, p->pidfd) < 0) {
		close(p->pidfd);
		p->pidfd = -1;
		return;
	}
	p->pidpoll.data = p;
	p->handles_open++;
	uv_poll_start(&p->pidpoll, UV_READABLE, on_pidfd);
}

sc_pod_t *sc__pod_adopt(sc_agent_t *a, json_t *rec)
{
	sc_pod_t *p = pod_new(a, json_string_value(json_object_get(rec, "kind")),
	                      json_string_value(json_object_get(rec, "job")),
	                      json_object_get(rec, "task"), json_object_get(rec, "binding"));
	sc__podstore_settings(p, rec);
	sc__podsec_load(p, rec);
	p->adopted = p->alive = 1;
	p->state = SC_PS_RUNNING;
	p->started_ms = sc__agent_now_ms(a);
	if (sc__podenv_prepare(p) < 0)
		sc_log_warn("pod %s/%s: cannot open its log", p->job, p->name);
	watch_adopted(p);
	sc_log_info("pod %s/%s adopted (pid %d, restarts %d)", p->job, p->name, p->pid,
	            p->restarts);
	start_probes(p);
	changed(p);
	return p;
}

/* ---- stopping ---------------------------------------------------------- */

static void on_grace(uv_timer_t *t)
{
	sc_pod_t *p = t->data;
	if (p->alive) {
		sc_log_warn("pod %s/%s: grace period over, SIGKILL", p->job, p->name);
		kill(-p->pid, SIGKILL);
		sc__podenv_cgroup_kill(p);
	}
}

/* SIGTERM to the group now, SIGKILL after the grace period. SIGCONT
 * after the SIGTERM, as systemd does: a stopped process (SIGSTOP, a
 * debugger) cannot act on SIGTERM, so a hung replica its liveness probe
 * restarts sat out the whole grace period (3 of the soak's 10 s, issue
 * 23). */
static void terminate(sc_pod_t *p)
{
	/* The group, and the pod's processes that left it (cgkill.h). */
	kill(-p->pid, SIGTERM);
	sc__podenv_cgroup_signal(p, SIGTERM);
	kill(-p->pid, SIGCONT);
	sc__podenv_cgroup_signal(p, SIGCONT);
	uv_timer_start(&p->timer, on_grace, p->grace_ms, 0);
}

void sc__pod_fence(sc_pod_t *p)
{
	uint64_t cap = p->a->o.fence_ms / 4;
	if (p->grace_ms > cap)
		p->grace_ms = cap;
	sc__pod_stop(p, "lease lost: the server gives this node's pods away");
}

void sc__pod_stop(sc_pod_t *p, const char *reason)
{
	if (p->stopping)
		return;
	p->stopping = 1;
	sc_log_info("pod %s/%s: stopping (%s)", p->job, p->name, reason);
	uv_timer_stop(&p->timer);
	for (int k = 0; k < SC_PROBE_KINDS; k++)
		sc__probe_stop(p->probes[k]);
	if (p->alive)
		terminate(p);
	else
		pod_finish(p);
}

/* ---- probes ------------------------------------------------------------ */

/* A probe's verdict: kind failed threshold times (ok=0) or passed success
 * threshold times (ok=1). msg describes the last result. */
static void sc__pod_probe_verdict(sc_pod_t *p, int kind, int ok, const char *msg)
{
	if (!p->alive || p->stopping || p->restart_kill)
		return;
	if (kind == SC_PROBE_READINESS) {
		if (p->ready != ok) {
			p->ready = ok;
			if (!ok)
				set_message(p, "readiness probe failed: %s", msg);
			else
				set_message(p, "%s", "");
			changed(p);
		}
		return;
	}
	if (kind == SC_PROBE_STARTUP && ok) {
		p->started = 1;
		p->ready = p->probes[SC_PROBE_READINESS] == NULL;
		sc__probe_stop(p->probes[SC_PROBE_STARTUP]);
		sc__probe_start(p->probes[SC_PROBE_LIVENESS]);
		sc__probe_start(p->probes[SC_PROBE_READINESS]);
		changed(p);
		return;
	}
	if (ok)
		return;
	/* Liveness or startup failed: restart the process. */
	set_message(p, "%s probe failed: %s", kind == SC_PROBE_STARTUP ? "startup" : "liveness",
	            msg);
	sc_log_info("pod %s/%s: %s; killing it", p->job, p->name, p->message);
	p->restart_kill = 1;
	p->ready = 0;
	for (int k = 0; k < SC_PROBE_KINDS; k++)
		sc__probe_stop(p->probes[k]);
	terminate(p);
	changed(p);
}

void sc__pods_tick(sc_agent_t *a)
{
	for (sc_pod_t *p = a->pods, *next; p; p = next) {
		next = p->next;
		sc__podenv_rotate(p);
		if (p->adopted && p->alive && !sc__proc_alive(p->pid, p->start_ticks))
			adopted_exit(p);
	}
}
