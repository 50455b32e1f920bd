/* Pod records and pod-folder retention (see podstore.h). */
#include "agent/podstore.h"
#include "base/alloc.h"
#include "base/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/podenv.h"
#include "agent/retention.h"
#include "starcloud/error.h"

#define RECORD "pod.json"
#define MAX_RECORD (4u << 20)
#define MAX_FOLDERS 100000

/* ---- processes --------------------------------------------------------- */

/* State letter and start time (field 22, clock ticks after boot) of pid
 * from /proc/PID/stat. The command name (field 2) may hold spaces and
 * parentheses, so parsing starts after its last ')'. */
static int proc_stat(int pid, char *state, unsigned long long *ticks)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return SC_ENOTFOUND;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	char *rp = n > 0 ? (buf[n] = '\0', strrchr(buf, ')')) : NULL;
	if (!rp || sscanf(rp + 1,
	                  " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
	                  "%*d %*d %*d %*d %llu",
	                  state, ticks) != 2)
		return SC_EIO;
	return 0;
}

int sc__proc_alive(int pid, unsigned long long ticks)
{
	char state;
	unsigned long long t;
	if (pid <= 0 || proc_stat(pid, &state, &t) < 0)
		return 0;
	return state != 'Z' && state != 'X' && (ticks == 0 || t == ticks);
}

/* ---- records ----------------------------------------------------------- */

static void record_path(const sc_pod_t *p, char *out, size_t outsz, const char *suffix)
{
	snprintf(out, outsz, "%s/" RECORD "%s", p->dir, suffix);
}

static json_t *record_of(const sc_pod_t *p, unsigned long long ticks)
{
	return json_pack("{s:s,s:s,s:s,s:i,s:I,s:i,s:i,s:i,s:i,s:I,s:O,s:O}", "kind", p->kind,
	                 "job", p->job, "name", p->name, "pid", p->pid, "startTicks",
	                 (json_int_t)ticks, "restarts", p->restarts, "failures", p->failures,
	                 "restartPolicy", p->restart_policy, "backoffLimit", p->backoff_limit,
	                 "graceMillis", (json_int_t)p->grace_ms, "task", p->task, "binding",
	                 p->binding);
}

/* "cgroups": the folders the guard empties when it fences the pod
 * (guard.h), so that what left the pod's process group goes too. */
static void add_cgroups(const sc_pod_t *p, json_t *rec)
{
	char dirs[SC_CGV1_NCTL + 2][SC_PODENV_CGDIR];
	int n = sc__podenv_cgroup_dirs(p, dirs, SC_CGV1_NCTL + 2);
	json_t *list = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(list, json_string(dirs[i]));
	json_object_set_new(rec, "cgroups", list);
}

int sc__podstore_save(const sc_pod_t *p)
{
	char tmp[700], path[700], state;
	unsigned long long ticks = 0;
	/* The process may already be gone; its record is then useless but
	 * harmless (adoption checks the process again). */
	if (proc_stat(p->pid, &state, &ticks) < 0)
		ticks = 0;
	((sc_pod_t *)p)->start_ticks = ticks;
	json_t *rec = record_of(p, ticks);
	sc__podsec_save(p, rec);
	add_cgroups(p, rec);
	record_path(p, tmp, sizeof(tmp), ".tmp");
	record_path(p, path, sizeof(path), "");
	/* 0600: the record holds the task's env, which may carry secrets. */
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	int rc = rec && fd >= 0 && json_dumpfd(rec, fd, JSON_COMPACT) == 0 ? 0 : SC_EIO;
	if (fd >= 0 && close(fd) < 0)
		rc = SC_EIO;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = SC_EIO;
	json_decref(rec);
	return rc;
}

void sc__podstore_forget(const sc_pod_t *p)
{
	char path[700];
	record_path(p, path, sizeof(path), "");
	unlink(path);
}

static int int_of(json_t *rec, const char *key)
{
	return (int)json_integer_value(json_object_get(rec, key));
}

void sc__podstore_settings(sc_pod_t *p, json_t *rec)
{
	p->pid = int_of(rec, "pid");
	p->start_ticks = (unsigned long long)json_integer_value(json_object_get(rec, "startTicks"));
	p->restarts = int_of(rec, "restarts");
	p->failures = int_of(rec, "failures");
	p->restart_policy = int_of(rec, "restartPolicy");
	p->backoff_limit = int_of(rec, "backoffLimit");
	p->grace_ms = (uint64_t)json_integer_value(json_object_get(rec, "graceMillis"));
}

/* A record is usable when its fields have the types adoption needs and
 * it names the folder it was found in (a copied folder must not make us
 * adopt someone else's process). */
static int record_valid(json_t *rec, const char *job, const char *pod)
{
	const char *kind = json_string_value(json_object_get(rec, "kind"));
	const char *j = json_string_value(json_object_get(rec, "job"));
	const char *n = json_string_value(json_object_get(rec, "name"));
	int pol = int_of(rec, "restartPolicy");
	return kind && (!strcmp(kind, "Job") || !strcmp(kind, "Deployment")) && j &&
	       !strcmp(j, job) && n && !strcmp(n, pod) && int_of(rec, "pid") > 0 &&
	       pol >= SC_RESTART_ALWAYS && pol <= SC_RESTART_NEVER &&
	       json_is_object(json_object_get(rec, "task")) &&
	       json_is_object(json_object_get(rec, "binding"));
}

/* The record of DATA/pods/JOB/POD when it is valid and its process still
 * runs (new reference), else NULL; gone is set when the record names a
 * process that ended. warn: log a record that is not valid. */
static json_t *live_record(const sc_agent_t *a, const char *job, const char *pod, int *gone,
                           int warn)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/pods/%s/%s/" RECORD, a->o.data_dir, job, pod);
	json_t *rec = json_load_file(path, 0, NULL);
	*gone = 0;
	if (!rec)
		return NULL;
	if (!record_valid(rec, job, pod)) {
		if (warn)
			sc_log_warn("%s: not a valid pod record; ignored", path);
	} else if (!sc__proc_alive(int_of(rec, "pid"), (unsigned long long)json_integer_value(
	                                                   json_object_get(rec, "startTicks")))) {
		*gone = 1;
	} else {
		return rec;
	}
	json_decref(rec);
	return NULL;
}

static int is_entry(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

typedef int (*folder_fn)(sc_agent_t *a, const char *job, const char *pod, void *arg);

/* Calls fn on every folder DATA/pods/JOB/POD; the sum of what it returns. */
static int each_folder(sc_agent_t *a, folder_fn fn, void *arg)
{
	char dir[1024];
	int n = 0;
	snprintf(dir, sizeof(dir), "%s/pods", a->o.data_dir);
	DIR *jobs = opendir(dir);
	struct dirent *j, *p;
	while (jobs && (j = readdir(jobs))) {
		char jdir[1300];
		if (!is_entry(j))
			continue;
		snprintf(jdir, sizeof(jdir), "%s/%s", dir, j->d_name);
		DIR *pods = opendir(jdir);
		while (pods && (p = readdir(pods)))
			if (is_entry(p))
				n += fn(a, j->d_name, p->d_name, arg);
		if (pods)
			closedir(pods);
	}
	if (jobs)
		closedir(jobs);
	return n;
}

typedef struct adopter {
	sc_pod_t *(*adopt)(sc_agent_t *a, json_t *rec);
} adopter_t;

/* One folder: adopts its pod when the recorded process still runs; 1 when
 * adopted. */
static int adopt_one(sc_agent_t *a, const char *job, const char *pod, void *arg)
{
	char path[1200];
	int gone;
	json_t *rec = live_record(a, job, pod, &gone, 1);
	if (gone) {
		/* the process ended while no agent watched it */
		snprintf(path, sizeof(path), "%s/pods/%s/%s/" RECORD, a->o.data_dir, job, pod);
		unlink(path);
	}
	if (!rec || sc__pod_find(a, job, pod)) { /* already ours: cannot happen at start-up */
		json_decref(rec);
		return 0;
	}
	((adopter_t *)arg)->adopt(a, rec);
	json_decref(rec);
	return 1;
}

int sc__podstore_adopt_all(sc_agent_t *a, sc_pod_t *(*adopt)(sc_agent_t *a, json_t *rec))
{
	adopter_t ad = {adopt};
	int n = each_folder(a, adopt_one, &ad);
	if (n)
		sc_log_info("adopted %d running pod%s from an earlier agent", n, n == 1 ? "" : "s");
	return n;
}

/* 1 when pid's cgroup in some hierarchy is .../NAME/JOB.POD. */
static int proc_in_cgroup(int pid, const char *name, const char *job, const char *pod)
{
	char path[64], line[2048], tail[800];
	int found = 0;
	size_t t = (size_t)snprintf(tail, sizeof(tail), "/%s/%s.%s", name, job, pod);
	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	FILE *f = t < sizeof(tail) ? fopen(path, "re") : NULL;
	while (f && !found && fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\n");
		found = n >= t && memcmp(line + n - t, tail, t) == 0;
	}
	if (f)
		fclose(f);
	return found;
}

static int in_cgroup_one(sc_agent_t *a, const char *job, const char *pod, void *arg)
{
	int gone, found;
	json_t *rec = live_record(a, job, pod, &gone, 0);
	found = rec && proc_in_cgroup(int_of(rec, "pid"), arg, job, pod);
	json_decref(rec);
	return found;
}

int sc__podstore_in_cgroup(sc_agent_t *a, const char *name)
{
	return each_folder(a, in_cgroup_one, (void *)name) > 0;
}

/* ---- retention --------------------------------------------------------- */

/* Sized as a dirent name (longer ones are skipped anyway). */
typedef struct folder {
	char job[sizeof(((struct dirent *)0)->d_name)];
	char pod[sizeof(((struct dirent *)0)->d_name)];
} folder_t;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* Removes a folder and everything under it (pods write what they like
 * into their working folder), never following symlinks out of it. */
static void remove_tree(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Last use of a pod folder: the newest of the folder and its log. */
static int64_t last_use(const char *dir)
{
	char log[1700];
	struct stat st;
	int64_t t = stat(dir, &st) == 0 ? (int64_t)st.st_mtime : 0;
	snprintf(log, sizeof(log), "%s/output.log", dir);
	if (stat(log, &st) == 0 && (int64_t)st.st_mtime > t)
		t = (int64_t)st.st_mtime;
	return t;
}

/* Folders of pods that are not in the agent's list, with their last use. */
static size_t list_idle(sc_agent_t *a, folder_t **out, int64_t **mtimes)
{
	char dir[1024], path[1600];
	size_t n = 0, cap = 0;
	snprintf(dir, sizeof(dir), "%s/pods", a->o.data_dir);
	DIR *jobs = opendir(dir);
	struct dirent *j, *p;
	*out = NULL;
	*mtimes = NULL;
	while (jobs && (j = readdir(jobs))) {
		char jdir[1300];
		if (!is_entry(j) || strlen(j->d_name) > SC_AGENT_NAME_MAX)
			continue;
		snprintf(jdir, sizeof(jdir), "%s/%s", dir, j->d_name);
		DIR *pods = opendir(jdir);
		while (pods && (p = readdir(pods)) && n < MAX_FOLDERS) {
			if (!is_entry(p) || strlen(p->d_name) > SC_AGENT_NAME_MAX ||
			    sc__pod_find(a, j->d_name, p->d_name))
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				*out = sc_xreallocarray(*out, cap, sizeof(**out));
				*mtimes = sc_xreallocarray(*mtimes, cap, sizeof(**mtimes));
			}
			snprintf((*out)[n].job, sizeof((*out)[n].job), "%s", j->d_name);
			snprintf((*out)[n].pod, sizeof((*out)[n].pod), "%s", p->d_name);
			snprintf(path, sizeof(path), "%s/%s", jdir, p->d_name);
			(*mtimes)[n++] = last_use(path);
		}
		if (pods)
			closedir(pods);
	}
	if (jobs)
		closedir(jobs);
	return n;
}

void sc__podstore_gc(sc_agent_t *a)
{
	folder_t *f;
	int64_t *mt;
	char path[1600];
	size_t n = list_idle(a, &f, &mt), removed = 0;
	unsigned char *rm = n ? sc_xcalloc(n, 1) : NULL;
	if (n)
		removed = sc_retention_select(mt, n, (int64_t)time(NULL),
		                              (int64_t)(a->o.pod_retention_ms / 1000),
		                              a->o.keep_pods, rm);
	for (size_t i = 0; i < n; i++) {
		if (!rm[i])
			continue;
		snprintf(path, sizeof(path), "%s/pods/%s/%s", a->o.data_dir, f[i].job, f[i].pod);
		remove_tree(path);
		snprintf(path, sizeof(path), "%s/pods/%s", a->o.data_dir, f[i].job);
		rmdir(path); /* the job's folder, once empty */
	}
	if (removed)
		sc_log_info("removed %zu old pod folder%s (retention)", removed,
		            removed == 1 ? "" : "s");
	free(f);
	free(mt);
	free(rm);
}
