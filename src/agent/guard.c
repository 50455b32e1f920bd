/* The pod guard (guard.h): fences a node's pods when its agent stops
 * renewing the lease, whether the agent is cut off, frozen or dead. */
#include "agent/guard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/cgkill.h"
#include "agent/podstore.h"
#include "base/cmdline.h"
#include "base/flags.h"
#include "base/log.h"
#include "base/parse.h"
#include "base/version.h"
#include "starcloud/error.h"

#define LEASE_FILE "lease"
#define LOCK_FILE "guard.lock"
#define LOG_FILE "guard.log"
#define POLL_MS 50 /* how late after the deadline the guard may act */
#define MAX_PODS 4096

uint64_t sc__mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void path_of(const char *dir, const char *name, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s/%s", dir, name);
}

/* ---- the lease file ---------------------------------------------------- */

int sc__guard_write_lease(const char *data_dir, const sc_guard_lease_t *l)
{
	char path[1100], tmp[1100], text[128];
	path_of(data_dir, LEASE_FILE, path, sizeof(path));
	path_of(data_dir, LEASE_FILE ".tmp", tmp, sizeof(tmp));
	int n =
	    snprintf(text, sizeof(text), "%llu %llu %s %d\n", (unsigned long long)l->deadline_ms,
	             (unsigned long long)l->grace_ms, l->stop ? "stop" : "run", l->agent_pid);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return SC_EIO;
	int ok = write(fd, text, (size_t)n) == n;
	close(fd);
	/* No fsync: the deadline is about this boot only (a monotonic clock);
	 * after a crash of the machine there are no pods to fence. */
	return ok && rename(tmp, path) == 0 ? 0 : SC_EIO;
}

/* Reads DATA/lease; SC_ENOTFOUND when there is none, SC_EPARSE when it is
 * not a lease. */
static int read_lease(const char *data_dir, sc_guard_lease_t *out)
{
	char path[1100], text[128], *f[4];
	path_of(data_dir, LEASE_FILE, path, sizeof(path));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return SC_ENOTFOUND;
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return SC_EPARSE;
	text[n] = '\0';
	char *save = NULL;
	f[0] = strtok_r(text, " \n", &save);
	f[1] = strtok_r(NULL, " \n", &save);
	f[2] = strtok_r(NULL, " \n", &save);
	f[3] = strtok_r(NULL, " \n", &save); /* the agent's pid; older agents: none */
	out->agent_pid = 0;
	if (!f[2] || sc_parse_u64(f[0], 0, UINT64_MAX, &out->deadline_ms) < 0 ||
	    sc_parse_u64(f[1], 0, UINT64_MAX, &out->grace_ms) < 0 ||
	    (f[3] && sc_parse_int(f[3], 0, INT32_MAX, &out->agent_pid) < 0))
		return SC_EPARSE;
	out->stop = strcmp(f[2], "stop") == 0;
	return 0;
}

/* ---- the lock ---------------------------------------------------------- */

static int lock_open(const char *data_dir)
{
	char path[1100];
	path_of(data_dir, LOCK_FILE, path, sizeof(path));
	return open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
}

int sc__guard_running(const char *data_dir)
{
	int fd = lock_open(data_dir);
	if (fd < 0)
		return 0;
	int held = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd); /* releases it if we took it */
	return held;
}

int sc__guard_ensure(const char *data_dir)
{
	char exe[1024], logp[1100];
	if (sc__guard_running(data_dir))
		return 0;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return SC_EIO;
	exe[n] = '\0';
	path_of(data_dir, LOG_FILE, logp, sizeof(logp));
	int logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (logfd < 0 || nullfd < 0) {
		if (logfd >= 0)
			close(logfd);
		if (nullfd >= 0)
			close(nullfd);
		return SC_EIO;
	}
	/* Double fork: the guard is not our child (nothing to reap when it
	 * exits, and it is not in the agent's process group or session). Only
	 * async-signal-safe calls between fork and exec. */
	pid_t pid = fork();
	if (pid == 0) {
		if (setsid() < 0 || fork() != 0)
			_exit(0);
		dup2(nullfd, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		char *argv[] = {exe, "guard", "--data-dir", (char *)data_dir, NULL};
		execv(exe, argv);
		_exit(127);
	}
	close(logfd);
	close(nullfd);
	if (pid < 0)
		return SC_EIO;
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return 0;
}

/* ---- fencing ----------------------------------------------------------- */

#define MAX_CGROUPS 6 /* v2, or v1 freezer, cpu, memory, pids; devices */

typedef struct victim {
	int pid;
	unsigned long long ticks;
	char name[520];
	int ncg;
	char cg[MAX_CGROUPS][800];
} victim_t;

/* A cgroup folder from a record is used only when it is one the agent
 * makes for this pod (.../starcloud-NODE-HASH/JOB.POD, cgname.h): the guard runs as root
 * and kills what it lists. */
static int cgroup_ok(const char *dir, const char *job, const char *pod)
{
	char tail[520];
	size_t n = strlen(dir), t;
	snprintf(tail, sizeof(tail), "/%s.%s", job, pod);
	t = strlen(tail);
	return dir[0] == '/' && n > t && strcmp(dir + n - t, tail) == 0 &&
	       strstr(dir, "/starcloud-") && !strstr(dir, "/../") && !strstr(dir, "/./");
}

static void take_cgroups(victim_t *v, json_t *rec, const char *job, const char *pod)
{
	size_t i;
	json_t *d;
	v->ncg = 0;
	json_array_foreach(json_object_get(rec, "cgroups"), i, d)
	{
		const char *dir = json_string_value(d);
		if (v->ncg < MAX_CGROUPS && dir && strlen(dir) < sizeof(v->cg[0]) &&
		    cgroup_ok(dir, job, pod))
			snprintf(v->cg[v->ncg++], sizeof(v->cg[0]), "%s", dir);
	}
}

/* Whether anything of the pod runs: its main process, or any process in
 * its cgroups (a child that left its group, its main process gone). */
static int victim_alive(const victim_t *v, int skip)
{
	if (v->pid > 1 && sc__proc_alive(v->pid, v->ticks))
		return 1;
	for (int i = 0; i < v->ncg; i++)
		if (sc__cg_populated(v->cg[i], skip))
			return 1;
	return 0;
}

/* The recorded pods of which something still runs. */
static size_t live_pods(const char *data_dir, int skip, victim_t *v, size_t max)
{
	char dir[1100];
	size_t n = 0;
	snprintf(dir, sizeof(dir), "%s/pods", data_dir);
	DIR *jobs = opendir(dir);
	struct dirent *j, *p;
	while (jobs && (j = readdir(jobs))) {
		char jdir[1400];
		if (j->d_name[0] == '.')
			continue;
		snprintf(jdir, sizeof(jdir), "%s/%s", dir, j->d_name);
		DIR *pods = opendir(jdir);
		while (pods && (p = readdir(pods)) && n < max) {
			char rp[1800];
			if (p->d_name[0] == '.')
				continue;
			snprintf(rp, sizeof(rp), "%s/%s/pod.json", jdir, p->d_name);
			json_t *rec = json_load_file(rp, 0, NULL);
			if (!rec)
				continue;
			v[n].pid = (int)json_integer_value(json_object_get(rec, "pid"));
			v[n].ticks = (unsigned long long)json_integer_value(
			    json_object_get(rec, "startTicks"));
			take_cgroups(&v[n], rec, j->d_name, p->d_name);
			snprintf(v[n].name, sizeof(v[n].name), "%s/%s", j->d_name, p->d_name);
			if (victim_alive(&v[n], skip))
				n++;
			json_decref(rec);
		}
		if (pods)
			closedir(pods);
	}
	if (jobs)
		closedir(jobs);
	return n;
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* sig to the pod's process group (its main process checked against its
 * start time first, so a reused pid is never hit) and, once, to every
 * process of its cgroups but the agent's: each of them lists them all,
 * the first that exists is read. */
static void signal_pod(const victim_t *v, int sig, int skip)
{
	if (v->pid > 1 && sc__proc_alive(v->pid, v->ticks))
		kill(-v->pid, sig);
	for (int i = 0; i < v->ncg; i++)
		if (sc__cg_exists(v->cg[i])) {
			sc__cg_signal(v->cg[i], sig, skip);
			return;
		}
}

/* SIGTERM (and SIGCONT) to every live pod, SIGKILL to what is left of it
 * after grace_ms: its group, then its cgroups frozen and emptied. */
static void fence_all(const char *data_dir, const sc_guard_lease_t *l, uint64_t late_ms)
{
	static victim_t v[MAX_PODS];
	int skip = l->agent_pid;
	size_t n = live_pods(data_dir, skip, v, MAX_PODS);
	sc_log_warn("the node's lease was not renewed (%llu ms past the fence deadline): "
	            "stopping %zu pod%s",
	            (unsigned long long)late_ms, n, n == 1 ? "" : "s");
	for (size_t i = 0; i < n; i++) {
		sc_log_info("pod %s (pid %d, %d cgroup%s): SIGTERM", v[i].name, v[i].pid, v[i].ncg,
		            v[i].ncg == 1 ? "" : "s");
		signal_pod(&v[i], SIGTERM, skip);
		signal_pod(&v[i], SIGCONT, skip); /* a stopped process acts on it only so */
	}
	uint64_t end = sc__mono_ms() + l->grace_ms;
	for (;;) {
		size_t alive = 0;
		for (size_t i = 0; i < n; i++)
			alive += victim_alive(&v[i], skip);
		if (!alive || sc__mono_ms() >= end)
			break;
		sleep_ms(10);
	}
	for (size_t i = 0; i < n; i++) {
		if (!victim_alive(&v[i], skip))
			continue;
		sc_log_warn("pod %s (pid %d): grace over, SIGKILL", v[i].name, v[i].pid);
		if (v[i].pid > 1 && sc__proc_alive(v[i].pid, v[i].ticks))
			kill(-v[i].pid, SIGKILL);
		for (int c = 0; c < v[i].ncg; c++)
			if (!sc__cg_kill_all(v[i].cg[c], skip))
				sc_log_warn("pod %s: %s still holds processes", v[i].name,
				            v[i].cg[c]);
	}
	/* The pods' cgroups go too (an agent killed for good never removes
	 * them); one that still holds a process stays. An agent that starts
	 * the pod again makes them again. */
	for (size_t i = 0; i < n; i++)
		for (int c = 0; c < v[i].ncg; c++)
			if (!sc__cg_populated(v[i].cg[c], -1))
				rmdir(v[i].cg[c]);
}

/* ---- the process ------------------------------------------------------- */

typedef struct guard_opts {
	const char *data_dir;
} guard_opts_t;

static const sc_flag_t guard_flags[] = {
    {.name = "--data-dir",
     SC_FLAG_AT(STR, guard_opts_t, data_dir),
     .meta = "DIR",
     .help = "the agent's data folder (its lease file and pod records)"},
};

static const sc_command_t guard_cmd = {
    .name = "guard",
    .args = "--data-dir DIR",
    .about = "Stops the node's pods when its agent has not renewed the node's lease\n"
             "for the fence time (docs/AGENT.md). The agent starts it; it outlives\n"
             "agent restarts and exits once nothing is left to guard.",
    .flags = guard_flags,
    .nflags = sizeof(guard_flags) / sizeof(guard_flags[0]),
};

int sc_guard_main(int argc, char **argv)
{
	guard_opts_t o = {0};
	static victim_t scratch[MAX_PODS];
	int rc = sc_flags_parse(&guard_cmd, &o, argc, argv, NULL);
	if (rc != 0)
		return rc > 0 ? SC_EXIT_OK : SC_EXIT_USAGE;
	if (!o.data_dir) {
		fprintf(stderr, "starcloud guard: --data-dir: required\n");
		return SC_EXIT_USAGE;
	}
	sc_log_open("guard");
	int lock = lock_open(o.data_dir);
	if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0)
		return SC_EXIT_OK; /* another guard has this folder */
	/* Signals meant for the agent's terminal or service do not stop us. */
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	sc_log_info("guarding the pods of %s (pid %d)", o.data_dir, (int)getpid());
	uint64_t fenced_for = 0;
	for (;;) {
		sc_guard_lease_t l = {0};
		int have = read_lease(o.data_dir, &l) == 0;
		if (have && l.stop) {
			sc_log_info("the agent asked me to stop");
			break;
		}
		/* The agent writes the lease before it starts a guard: without
		 * one (the folder was removed) there is nothing left to guard once
		 * no recorded pod runs. */
		if (!have && live_pods(o.data_dir, l.agent_pid, scratch, MAX_PODS) == 0) {
			sc_log_info("no lease and no pod: exiting");
			break;
		}
		uint64_t now = sc__mono_ms();
		if (have && l.deadline_ms && now >= l.deadline_ms) {
			/* Fenced at the deadline, and again while a recorded pod
			 * runs: an agent frozen in a pod's start writes its record
			 * later, and its process waits for the agent (spawn.h). */
			size_t live = live_pods(o.data_dir, l.agent_pid, scratch, MAX_PODS);
			if (fenced_for != l.deadline_ms || live) {
				fence_all(o.data_dir, &l, now - l.deadline_ms);
				fenced_for = l.deadline_ms;
			}
			/* Lapsed and nothing runs: nothing to guard until an agent
			 * renews the lease, and it starts a guard then. */
			if (live_pods(o.data_dir, l.agent_pid, scratch, MAX_PODS) == 0) {
				sc_log_info("no pod runs and the lease has lapsed: exiting");
				break;
			}
		}
		sleep_ms(POLL_MS);
	}
	close(lock);
	return SC_EXIT_OK;
}
