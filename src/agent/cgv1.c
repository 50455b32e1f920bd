/* Pod limits on cgroup v1 (see cgv1.h). */
#include "agent/cgv1.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/cgkill.h"
#include "base/log.h"
#include "starcloud/error.h"

#define CFS_PERIOD_US 100000

static const char *const ctl_names[SC_CGV1_NCTL] = {"cpu", "memory", "pids", "freezer"};

int sc__cgv1_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return SC_EIO;
	ssize_t n = write(fd, text, strlen(text));
	int saved = errno;
	close(fd);
	errno = saved;
	return n == (ssize_t)strlen(text) ? 0 : SC_EIO;
}

/* Whether the comma-separated list holds word. */
static int has_word(char *list, const char *word)
{
	for (char *save, *o = strtok_r(list, ",", &save); o; o = strtok_r(NULL, ",", &save))
		if (strcmp(o, word) == 0)
			return 1;
	return 0;
}

int sc__cgv1_mount(const char *ctl, char *out, size_t outsz)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	int found = 0;
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPER */
		char root[1024], mnt[1024], fstype[64], super[1024];
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %1023s %1023s", root, mnt) != 2 ||
		    sscanf(dash + 3, "%63s %*s %1023s", fstype, super) != 2)
			continue;
		if (strcmp(fstype, "cgroup") == 0 && has_word(super, ctl) &&
		    (size_t)snprintf(out, outsz, "%s", mnt) < outsz)
			found = 1;
	}
	fclose(f);
	return found;
}

int sc__cgv1_own(const char *ctl, char *out, size_t outsz)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[4096];
	int found = 0;
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		/* N:CONTROLLERS:PATH */
		char *c = strchr(line, ':'), *p = c ? strchr(c + 1, ':') : NULL;
		if (!p)
			continue;
		*p++ = '\0';
		p[strcspn(p, "\n")] = '\0';
		if (has_word(c + 1, ctl) && (size_t)snprintf(out, outsz, "%s", p) < outsz)
			found = 1;
	}
	fclose(f);
	return found;
}

static int cgv1_find(const char *ctl, char *mnt, size_t mntsz, char *own, size_t ownsz)
{
	return sc__cgv1_mount(ctl, mnt, mntsz) && sc__cgv1_own(ctl, own, ownsz);
}

void sc__cgv1_init(sc_agent_t *a)
{
	char mnt[512], own[512], test[700];
	int n = 0;
	for (int c = 0; c < SC_CGV1_NCTL; c++) {
		a->cgv1[c].ok = 0;
		if (!cgv1_find(ctl_names[c], mnt, sizeof(mnt), own, sizeof(own)))
			continue;
		const char *o = strcmp(own, "/") == 0 ? "" : own;
		if (snprintf(a->cgv1[c].root, sizeof(a->cgv1[c].root), "%s%s/%s", mnt, o,
		             a->cgroup_name) >= (int)sizeof(a->cgv1[c].root) ||
		    snprintf(a->cgv1[c].home, sizeof(a->cgv1[c].home), "%s%s/tasks", mnt, o) >=
		        (int)sizeof(a->cgv1[c].home))
			continue;
		/* Writable at all? Made now, removed at exit when empty. */
		snprintf(test, sizeof(test), "%s/tasks", a->cgv1[c].root);
		if ((mkdir(a->cgv1[c].root, 0755) < 0 && errno != EEXIST) || access(test, W_OK)) {
			sc_log_warn("cgroup v1 %s: cannot make %s (%s)", ctl_names[c],
			            a->cgv1[c].root, strerror(errno));
			continue;
		}
		a->cgv1[c].ok = 1;
		n++;
	}
	if (!a->cgv1[SC_CGV1_CPU].ok || !a->cgv1[SC_CGV1_MEMORY].ok)
		sc_log_warn("cgroup v1: no writable %s%s%s controller: pod %s limits are NOT "
		            "enforced",
		            a->cgv1[SC_CGV1_CPU].ok ? "" : "cpu",
		            !a->cgv1[SC_CGV1_CPU].ok && !a->cgv1[SC_CGV1_MEMORY].ok ? " or " : "",
		            a->cgv1[SC_CGV1_MEMORY].ok ? "" : "memory",
		            a->cgv1[SC_CGV1_CPU].ok ? "memory" : "CPU");
	if (!a->cgv1[SC_CGV1_PIDS].ok)
		sc_log_warn("cgroup v1: no writable pids controller: pod process counts are NOT "
		            "limited");
	if (!a->cgv1[SC_CGV1_FREEZER].ok)
		sc_log_warn("cgroup v1: no writable freezer controller: a pod that forks fast may "
		            "outrun the kill that stops it (cgkill.h)");
	if (n)
		sc_log_info("cgroup v1: pod limits under %s (cpu), %s (memory), %s (pids)",
		            a->cgv1[SC_CGV1_CPU].ok ? a->cgv1[SC_CGV1_CPU].root : "-",
		            a->cgv1[SC_CGV1_MEMORY].ok ? a->cgv1[SC_CGV1_MEMORY].root : "-",
		            a->cgv1[SC_CGV1_PIDS].ok ? a->cgv1[SC_CGV1_PIDS].root : "-");
}

static int pod_dir(const sc_pod_t *p, int c, char *out, size_t outsz)
{
	return snprintf(out, outsz, "%s/%s.%s", p->a->cgv1[c].root, p->job, p->name) >= (int)outsz
	           ? SC_ETOOBIG
	           : 0;
}

static int write_in(const char *dir, const char *file, long long v)
{
	char path[900], val[32];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	snprintf(val, sizeof(val), "%lld", v);
	return sc__cgv1_write(path, val);
}

/* memory.memsw.limit_in_bytes may never be below memory.limit_in_bytes:
 * the order of the two writes depends on which way the limit moves. */
static int set_memory(const char *dir, long long bytes)
{
	char memsw[900];
	snprintf(memsw, sizeof(memsw), "%s/memory.memsw.limit_in_bytes", dir);
	int sw = access(memsw, F_OK) == 0;
	if (write_in(dir, "memory.limit_in_bytes", bytes) == 0)
		return sw ? write_in(dir, "memory.memsw.limit_in_bytes", bytes) : 0;
	if (!sw || write_in(dir, "memory.memsw.limit_in_bytes", bytes) < 0)
		return SC_EIO;
	return write_in(dir, "memory.limit_in_bytes", bytes);
}

static const char *path_in(const char *dir, const char *file, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s/%s", dir, file);
	return out;
}

/* Millicores as a CFS quota per period; the kernel's least is 1 ms. */
static long long quota_us(int64_t milli)
{
	long long q = (long long)milli * (CFS_PERIOD_US / 1000);
	return q < 1000 ? 1000 : q;
}

/* The limits of controller c in dir: none is -1 (no limit). */
static int set_limits(const sc_pod_t *p, int c, const char *dir, int64_t cpu, int64_t mem)
{
	char path[900];
	if (c == SC_CGV1_CPU)
		return write_in(dir, "cpu.cfs_period_us", CFS_PERIOD_US) < 0
		           ? SC_EIO
		           : write_in(dir, "cpu.cfs_quota_us", cpu > 0 ? quota_us(cpu) : -1);
	if (c == SC_CGV1_MEMORY)
		return set_memory(dir, mem > 0 ? (long long)mem : -1);
	if (c == SC_CGV1_FREEZER) /* a kill cut short (cgkill.h) left it frozen */
		return sc__cgv1_write(path_in(dir, "freezer.state", path, sizeof(path)), "THAWED");
	int max = p->a->o.pod_pids_max;
	if (max > 0)
		return write_in(dir, "pids.max", max);
	return sc__cgv1_write(path_in(dir, "pids.max", path, sizeof(path)), "max");
}

/* The pod's folder under the agent's, which is made again if it is gone:
 * an agent of the same node name on this machine (a test run beside
 * another, a copy started by mistake) removes it at exit when it is empty,
 * and every later pod then failed to start ("No such file or directory"). */
static int make_pod_dir(const sc_agent_t *a, int c, const char *dir)
{
	if (mkdir(dir, 0755) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT || (mkdir(a->cgv1[c].root, 0755) < 0 && errno != EEXIST))
		return SC_EIO;
	return mkdir(dir, 0755) == 0 || errno == EEXIST ? 0 : SC_EIO;
}

/* Moves the calling thread into the pod's cgroups. With limits (the pod's
 * start) each folder is made and its limits written first; without (an
 * exec probe joining a running pod) the folders must exist already. */
static int move_in(sc_pod_t *p, int limits, int64_t cpu_milli, int64_t mem_bytes)
{
	sc_agent_t *a = p->a;
	char dir[800], tasks[900], tid[32];
	int entered = 0;
	snprintf(tid, sizeof(tid), "%ld", (long)syscall(SYS_gettid));
	for (int c = 0; c < SC_CGV1_NCTL; c++) {
		if (!a->cgv1[c].ok)
			continue;
		if (pod_dir(p, c, dir, sizeof(dir)) < 0)
			goto fail;
		if (limits) {
			if (make_pod_dir(a, c, dir) < 0 ||
			    set_limits(p, c, dir, cpu_milli, mem_bytes) < 0)
				goto fail;
			if (c == SC_CGV1_MEMORY)
				p->oom_base = sc__cgv1_oom_kills(p);
		}
		snprintf(tasks, sizeof(tasks), "%s/tasks", dir);
		if (sc__cgv1_write(tasks, tid) < 0)
			goto fail;
		entered = 1;
	}
	return entered;
fail:
	sc_log_error("pod %s/%s: cannot %s %s (%s)", p->job, p->name,
	             limits ? "set its cgroup v1 limits in" : "enter its cgroup v1", dir,
	             strerror(errno));
	sc__cgv1_leave(a, 1);
	return SC_EIO;
}

int sc__cgv1_enter(sc_pod_t *p, int64_t cpu_milli, int64_t mem_bytes)
{
	return move_in(p, 1, cpu_milli, mem_bytes);
}

int sc__cgv1_join(sc_pod_t *p)
{
	return move_in(p, 0, 0, 0);
}

void sc__cgv1_leave(sc_agent_t *a, int entered)
{
	char tid[32];
	if (entered <= 0)
		return;
	snprintf(tid, sizeof(tid), "%ld", (long)syscall(SYS_gettid));
	for (int c = 0; c < SC_CGV1_NCTL; c++)
		if (a->cgv1[c].ok && sc__cgv1_write(a->cgv1[c].home, tid) < 0)
			sc_log_error("cannot move the agent back to its %s cgroup (%s): %s",
			             ctl_names[c], a->cgv1[c].home, strerror(errno));
}

long long sc__cgv1_oom_kills(const sc_pod_t *p)
{
	char dir[800], path[900];
	if (!p->a->cgv1[SC_CGV1_MEMORY].ok || pod_dir(p, SC_CGV1_MEMORY, dir, sizeof(dir)) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/memory.oom_control", dir);
	return sc__cg_key(path, "oom_kill");
}

long long sc__cg_key(const char *path, const char *key)
{
	char k[64];
	long long v, out = -1;
	FILE *f = fopen(path, "re");
	while (f && fscanf(f, "%63s %lld", k, &v) == 2)
		if (strcmp(k, key) == 0)
			out = v;
	if (f)
		fclose(f);
	return out;
}

void sc__cgv1_remove(sc_pod_t *p)
{
	char dir[800];
	for (int c = 0; c < SC_CGV1_NCTL; c++)
		if (p->a->cgv1[c].ok && pod_dir(p, c, dir, sizeof(dir)) == 0) {
			sc__cg_kill_all(dir, getpid());
			rmdir(dir); /* fails while a process of it lives on: kept */
		}
}

void sc__cgv1_close(sc_agent_t *a)
{
	for (int c = 0; c < SC_CGV1_NCTL; c++)
		if (a->cgv1[c].ok)
			rmdir(a->cgv1[c].root);
}
