#include "agent/podsec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/pod.h"
#include "base/log.h"
#include "starcloud/error.h"

#define UIDS_FILE "uids.json"
#define MAX_QUEUES 100000

static int mkdir_mode(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return SC_EIO;
	/* An existing folder from an older agent gets the mode too. */
	return chmod(path, mode) < 0 ? SC_EIO : 0;
}

static void uids_path(const sc_agent_t *a, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s/" UIDS_FILE, a->o.data_dir);
}

static int uids_save(sc_agent_t *a)
{
	char path[1100], tmp[1110];
	uids_path(a, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return SC_EIO;
	int rc = json_dumpfd(a->uids, fd, JSON_COMPACT) == 0 && fsync(fd) == 0 ? 0 : SC_EIO;
	close(fd);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = SC_EIO;
	return rc;
}

/* A pod's uid must be able to pass through every folder above its work
 * folder; say so at start-up rather than let pods fail one by one. */
static void warn_untraversable(const char *dir)
{
	/* realpath writes up to PATH_MAX: a smaller buffer is an overflow
	 * that _FORTIFY_SOURCE (the Debian package's build) aborts on. */
	char path[PATH_MAX], *slash;
	struct stat st;
	if (!realpath(dir, path))
		return;
	while ((slash = strrchr(path, '/')) && slash != path) {
		*slash = '\0';
		if (stat(path, &st) == 0 && !(st.st_mode & S_IXOTH)) {
			sc_log_warn("%s is not traversable by other users (mode %03o): pods, which "
			            "run as their own uids, cannot reach their folders below it",
			            path, (unsigned)(st.st_mode & 0777));
			return;
		}
	}
}

/* Whether this process may start pods as other users: root with
 * CAP_SETUID, CAP_SETGID and CAP_CHOWN effective (a systemd unit may run
 * root with a bounded capability set, deploy/systemd). */
static int can_switch_users(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	unsigned long long eff = 0;
	int found = 0;
	while (f && !found && fgets(line, sizeof(line), f))
		found = sscanf(line, "CapEff: %llx", &eff) == 1;
	if (f)
		fclose(f);
	const unsigned long long need = 1ull << 0 | 1ull << 6 | 1ull << 7; /* CHOWN SETGID SETUID */
	if (geteuid() != 0)
		return 0;
	if (found && (eff & need) != need) {
		sc_log_warn("running as root without CAP_SETUID, CAP_SETGID and CAP_CHOWN "
		            "(CapEff %llx): pods cannot be given their own uids",
		            eff);
		return 0;
	}
	return 1;
}

int sc__podsec_init(sc_agent_t *a)
{
	char path[1100];
	a->switch_users = can_switch_users();
	/* The folder is traversable (pods reach their work/ folder below it)
	 * but not listable or readable by others. */
	if (mkdir_mode(a->o.data_dir, a->switch_users ? 0711 : 0700) < 0) {
		sc_log_error("cannot prepare the data dir %s: %s", a->o.data_dir, strerror(errno));
		return SC_EIO;
	}
	snprintf(path, sizeof(path), "%s/pods", a->o.data_dir);
	if (mkdir_mode(path, a->switch_users ? 0711 : 0700) < 0) {
		sc_log_error("cannot prepare %s: %s", path, strerror(errno));
		return SC_EIO;
	}
	uids_path(a, path, sizeof(path));
	a->uids = json_load_file(path, 0, NULL);
	if (!json_is_object(a->uids)) {
		json_decref(a->uids);
		a->uids = json_object();
	}
	if (a->switch_users) {
		sc_log_info("pods run as uid %d and up, one per queue (gid the same)",
		            a->o.pod_uid_base);
		warn_untraversable(a->o.data_dir);
	} else
		sc_log_warn("cannot switch users: pods run as the agent's own user (uid %u) and "
		            "can read its token and data; pod isolation is NOT enforced",
		            (unsigned)geteuid());
	return 0;
}

/* The uid of queue on this node: given once, in first-seen order. */
static uid_t queue_uid(sc_agent_t *a, const char *queue)
{
	json_t *v = json_object_get(a->uids, queue);
	if (json_is_integer(v))
		return (uid_t)json_integer_value(v);
	size_t n = json_object_size(a->uids);
	if (n >= MAX_QUEUES)
		n = MAX_QUEUES - 1; /* never reached in practice: shared last uid */
	uid_t uid = (uid_t)a->o.pod_uid_base + (uid_t)n;
	json_object_set_new(a->uids, queue, json_integer(uid));
	if (uids_save(a) < 0)
		sc_log_warn("cannot save %s/" UIDS_FILE ": queue uids may change after a restart",
		            a->o.data_dir);
	return uid;
}

void sc__podsec_assign(sc_pod_t *p, json_t *spec)
{
	sc_agent_t *a = p->a;
	json_t *run = json_object_get(spec, "runAsUser");
	const char *queue = json_string_value(json_object_get(spec, "queue"));
	memset(&p->sec, 0, sizeof(p->sec));
	if (!a->switch_users)
		return;
	p->sec.set = 1;
	/* The server admitted runAsUser against the queue's podSecurity. */
	p->sec.uid = json_is_integer(run) ? (uid_t)json_integer_value(run)
	                                  : queue_uid(a, queue ? queue : "");
	p->sec.gid = (gid_t)p->sec.uid;
}

void sc__podsec_workdir(const sc_pod_t *p, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s/work", p->dir);
}

int sc__podsec_dirs(sc_pod_t *p)
{
	char job[800], work[600];
	mode_t mode = p->a->switch_users ? 0711 : 0700;
	snprintf(job, sizeof(job), "%s/pods/%s", p->a->o.data_dir, p->job);
	if (mkdir_mode(job, mode) < 0 || mkdir_mode(p->dir, mode) < 0)
		return SC_EIO;
	sc__podsec_workdir(p, work, sizeof(work));
	if (mkdir(work, 0700) < 0 && errno != EEXIST)
		return SC_EIO;
	if (p->sec.set) {
		/* lchown: the pod owns work/ and could have put a link there
		 * before an earlier restart; never follow it. */
		struct stat st;
		if (lstat(work, &st) < 0 || !S_ISDIR(st.st_mode) ||
		    lchown(work, p->sec.uid, p->sec.gid) < 0 || chmod(work, 0700) < 0)
			return SC_EIO;
	}
	return 0;
}

void sc__podsec_save(const sc_pod_t *p, json_t *rec)
{
	if (!p->sec.set)
		return;
	json_object_set_new(rec, "uid", json_integer(p->sec.uid));
	json_object_set_new(rec, "gid", json_integer(p->sec.gid));
}

void sc__podsec_load(sc_pod_t *p, json_t *rec)
{
	json_t *uid = json_object_get(rec, "uid"), *gid = json_object_get(rec, "gid");
	memset(&p->sec, 0, sizeof(p->sec));
	if (!p->a->switch_users || !json_is_integer(uid) || !json_is_integer(gid))
		return;
	p->sec.set = 1;
	p->sec.uid = (uid_t)json_integer_value(uid);
	p->sec.gid = (gid_t)json_integer_value(gid);
}
