/* Killing a pod's cgroups whole (see cgkill.h). */
#include "agent/cgkill.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

#define WAIT_ROUNDS 200 /* of 10 ms: how long a cgroup may take to empty */

static void pause_10ms(void)
{
	struct timespec ts = {0, 10 * 1000 * 1000};
	nanosleep(&ts, NULL);
}

static void file_in(const char *dir, const char *name, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s/%s", dir, name);
}

static int exists(const char *dir, const char *name)
{
	char path[1100];
	file_in(dir, name, path, sizeof(path));
	return access(path, F_OK) == 0;
}

static int put(const char *dir, const char *name, const char *text)
{
	char path[1100];
	file_in(dir, name, path, sizeof(path));
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* The first line of DIR/name, newline dropped; "" when unreadable. */
static void get(const char *dir, const char *name, char *out, size_t outsz)
{
	char path[1100];
	file_in(dir, name, path, sizeof(path));
	FILE *f = fopen(path, "re");
	out[0] = '\0';
	if (f && !fgets(out, (int)outsz, f))
		out[0] = '\0';
	if (f)
		fclose(f);
	out[strcspn(out, "\n")] = '\0';
}

/* Calls fn on each pid of DIR/cgroup.procs but skip; how many it took. */
static int each_proc(const char *dir, int skip, int (*fn)(int pid, int arg), int arg)
{
	char path[1100];
	int pid, n = 0;
	file_in(dir, "cgroup.procs", path, sizeof(path));
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	while (fscanf(f, "%d", &pid) == 1)
		if (pid > 1 && pid != skip && fn(pid, arg))
			n++;
	fclose(f);
	return n;
}

static int send_sig(int pid, int sig)
{
	return kill(pid, sig) == 0;
}

static int one(int pid, int arg)
{
	return 1;
}

int sc__cg_signal(const char *dir, int sig, int skip)
{
	return each_proc(dir, skip, send_sig, sig);
}

int sc__cg_exists(const char *dir)
{
	return exists(dir, "cgroup.procs");
}

int sc__cg_populated(const char *dir, int skip)
{
	return each_proc(dir, skip, one, 0) > 0;
}

/* 1 when skip (the agent) has a process in the cgroup: freezing it
 * would freeze the agent. */
static int holds(const char *dir, int skip)
{
	return skip > 0 && each_proc(dir, 0, one, 0) > each_proc(dir, skip, one, 0);
}

/* Freezes the cgroup (v2 cgroup.freeze or v1 freezer.state) and waits up
 * to a second for it to be frozen. 1 when it was asked to freeze (thaw it
 * after), 0 when it has no freezer. */
static int freeze(const char *dir, int v2)
{
	char state[128];
	if (put(dir, v2 ? "cgroup.freeze" : "freezer.state", v2 ? "1" : "FROZEN") < 0)
		return 0;
	for (int i = 0; i < 100; i++) {
		if (v2) {
			char path[1100], k[64];
			long long v = 0;
			int frozen = 0;
			file_in(dir, "cgroup.events", path, sizeof(path));
			FILE *f = fopen(path, "re");
			while (f && fscanf(f, "%63s %lld", k, &v) == 2)
				frozen |= strcmp(k, "frozen") == 0 && v == 1;
			if (f)
				fclose(f);
			if (frozen)
				return 1;
		} else {
			get(dir, "freezer.state", state, sizeof(state));
			if (strcmp(state, "FROZEN") == 0)
				return 1;
		}
		pause_10ms();
	}
	/* A process in the kernel (D state) holds the freeze back: the kill
	 * goes ahead, and the rounds below catch a child born meanwhile. */
	sc_log_warn("%s: not frozen after 1 s; killing it anyway", dir);
	return 1;
}

int sc__cg_kill_all(const char *dir, int skip)
{
	int v2 = exists(dir, "cgroup.freeze"), frozen = 0;
	if (!sc__cg_populated(dir, skip))
		return 1;
	if (!holds(dir, skip)) {
		if (exists(dir, "cgroup.kill") && put(dir, "cgroup.kill", "1") == 0)
			goto wait;
		if (v2 || exists(dir, "freezer.state"))
			frozen = freeze(dir, v2);
	}
	sc__cg_signal(dir, SIGKILL, skip);
	if (frozen)
		put(dir, v2 ? "cgroup.freeze" : "freezer.state", v2 ? "0" : "THAWED");
wait:
	for (int round = 0; round < WAIT_ROUNDS; round++) {
		/* Without a freezer a child forked after the list was read is
		 * missed: every round kills what is listed now. */
		if (!sc__cg_signal(dir, SIGKILL, skip))
			return 1;
		pause_10ms();
	}
	return !sc__cg_populated(dir, skip);
}
