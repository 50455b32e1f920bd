/* A pod's folder, log, environment and cgroup (see podenv.h).
 *
 * Device assignment reaches the process through the environment, as the
 * NVIDIA container runtime does: CUDA_VISIBLE_DEVICES and
 * NVIDIA_VISIBLE_DEVICES list the device UUIDs when NVML gave them (indices
 * otherwise), a MIG pod gets its MIG instance, and a GPU share gets its
 * share and memory limit both as STARCLOUD_* variables and as the CUDA MPS
 * client variables that enforce them when an MPS daemon runs. */
#include "agent/podenv.h"

#include "agent/cgkill.h"
#include "agent/cgv1.h"
#include "agent/devcg.h"
#include "base/alloc.h"
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/quantity.h"
#include "starcloud/error.h"

/* ---- folder and log ---------------------------------------------------- */

/* The pod's current log file path. */
static void sc__pod_log_path(const sc_pod_t *p, int rotated, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s/output.log%s", p->dir, rotated ? ".1" : "");
}

int sc__podenv_prepare(sc_pod_t *p)
{
	char log[1100];
	if (snprintf(p->dir, sizeof(p->dir), "%s/pods/%s/%s", p->a->o.data_dir, p->job, p->name) >=
	        (int)sizeof(p->dir) ||
	    sc__podsec_dirs(p) < 0)
		return SC_EIO;
	sc__pod_log_path(p, 0, log, sizeof(log));
	/* Only the agent reads it (and hands it to the server); the pod
	 * writes through the descriptor it inherits. */
	p->log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	return p->log_fd < 0 ? SC_EIO : 0;
}

void sc__podenv_rotate(sc_pod_t *p)
{
	struct stat st;
	char cur[1100], old[1100];
	if (p->log_fd < 0 || fstat(p->log_fd, &st) < 0 || (uint64_t)st.st_size <= p->a->o.log_max)
		return;
	sc__pod_log_path(p, 0, cur, sizeof(cur));
	sc__pod_log_path(p, 1, old, sizeof(old));
	/* Copy, then truncate: the process's O_APPEND writes land at the new
	 * end. A few bytes written between the two steps can be lost, as with
	 * logrotate's copytruncate; the cap matters more. */
	int in = open(cur, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int out = open(old, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	char buf[65536];
	ssize_t n;
	while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			break;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	if (ftruncate(p->log_fd, 0) < 0)
		sc_log_warn("pod %s/%s: cannot truncate its log", p->job, p->name);
}

/* ---- environment ------------------------------------------------------- */

static int add(sc_podenv_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int add(sc_podenv_t *e, const char *fmt, ...)
{
	if (e->n >= SC_PODENV_MAX)
		return SC_ETOOBIG;
	va_list ap;
	va_start(ap, fmt);
	int rc = vasprintf(&e->vars[e->n], fmt, ap);
	va_end(ap);
	if (rc < 0)
		sc_oom();
	e->vars[++e->n] = NULL;
	return 0;
}

void sc__podenv_free(sc_podenv_t *env)
{
	for (size_t i = 0; i < env->n; i++)
		free(env->vars[i]);
	env->n = 0;
}

sc_spawn_opts_t sc__podenv_spawn_opts(const sc_pod_t *p, char **argv, sc_podenv_t *env, int out_fd)
{
	return (sc_spawn_opts_t){.argv = argv,
	                         .env = env->vars,
	                         .cwd = env->cwd,
	                         .set_ids = p->sec.set,
	                         .uid = p->sec.uid,
	                         .gid = p->sec.gid,
	                         .out_fd = out_fd};
}

/* "a,b,c" of the UUIDs (when every device has one) or indices. */
static void device_list(sc_pod_t *p, json_t *gpus, char *out, size_t outsz)
{
	const sc_gpu_inv_t *inv = &p->a->gpus;
	size_t i, n = 0;
	json_t *v;
	int uuids = 1;
	json_array_foreach(gpus, i, v)
	{
		json_int_t g = json_integer_value(v);
		if (g < 0 || g >= inv->count || !inv->dev[g].uuid[0])
			uuids = 0;
	}
	out[0] = '\0';
	json_array_foreach(gpus, i, v)
	{
		json_int_t g = json_integer_value(v);
		if (n >= outsz - 1)
			break;
		if (uuids)
			n += (size_t)snprintf(out + n, outsz - n, "%s%s", i ? "," : "",
			                      inv->dev[g].uuid);
		else
			n += (size_t)snprintf(out + n, outsz - n, "%s%lld", i ? "," : "",
			                      (long long)g);
	}
}

/* The MIG instance for mig {gpu, profile, start}: the first instance of
 * that profile on the device; its UUID when NVML named it. */
static int add_mig(sc_pod_t *p, sc_podenv_t *e, json_t *mig)
{
	const sc_gpu_inv_t *inv = &p->a->gpus;
	json_int_t g = json_integer_value(json_object_get(mig, "gpu"));
	const char *prof = json_string_value(json_object_get(mig, "profile"));
	const char *dev = "";
	char idx[32];
	snprintf(idx, sizeof(idx), "%lld", (long long)g);
	if (g >= 0 && g < inv->count) {
		const sc_gpu_dev_t *d = &inv->dev[g];
		dev = d->uuid[0] ? d->uuid : idx;
		for (int i = 0; i < d->nmig; i++)
			if (prof && strcmp(d->mig[i].profile, prof) == 0 && d->mig[i].uuid[0]) {
				dev = d->mig[i].uuid;
				break;
			}
	}
	if (!dev[0])
		dev = idx;
	int rc = add(e, "CUDA_VISIBLE_DEVICES=%s", dev);
	if (!rc)
		rc = add(e, "NVIDIA_VISIBLE_DEVICES=%s", dev);
	if (!rc)
		rc = add(e, "STARCLOUD_MIG_GPU=%lld", (long long)g);
	if (!rc)
		rc = add(e, "STARCLOUD_MIG_PROFILE=%s", prof ? prof : "");
	if (!rc)
		rc = add(e, "STARCLOUD_MIG_START=%lld",
		         (long long)json_integer_value(json_object_get(mig, "start")));
	return rc;
}

/* A share: milli of one device and/or a memory amount. */
static int add_share(sc_pod_t *p, sc_podenv_t *e, json_t *b)
{
	json_int_t milli = json_integer_value(json_object_get(b, "gpuShare"));
	json_t *memj = json_object_get(b, "gpuMemory");
	int64_t mem = json_is_integer(memj) ? json_integer_value(memj) : 0;
	json_int_t g = json_integer_value(json_array_get(json_object_get(b, "gpus"), 0));
	int rc = 0;
	if (!mem && milli && g >= 0 && g < p->a->gpus.count)
		mem = (int64_t)(p->a->gpus.dev[g].memory * (uint64_t)milli / 1000);
	if (milli) {
		rc = add(e, "STARCLOUD_GPU_SHARE=%lld.%03lld", milli / 1000, milli % 1000);
		if (!rc)
			rc = add(e, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%lld", (milli + 9) / 10);
	}
	if (!rc && mem) {
		rc = add(e, "STARCLOUD_GPU_MEMORY=%lld", (long long)mem);
		if (!rc)
			rc = add(e, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%lldM",
			         (long long)(mem >> 20));
	}
	return rc;
}

static int add_devices(sc_pod_t *p, sc_podenv_t *e)
{
	json_t *b = p->binding, *mig = json_object_get(b, "mig");
	json_t *gpus = json_object_get(b, "gpus");
	char list[2048];
	int rc;
	if (json_is_object(mig))
		return add_mig(p, e, mig);
	if (!json_array_size(gpus))
		/* No GPU: hide every device, as the NVIDIA runtime does. */
		return add(e, "NVIDIA_VISIBLE_DEVICES=void");
	device_list(p, gpus, list, sizeof(list));
	if ((rc = add(e, "CUDA_VISIBLE_DEVICES=%s", list)) < 0 ||
	    (rc = add(e, "NVIDIA_VISIBLE_DEVICES=%s", list)) < 0)
		return rc;
	if (json_object_get(b, "gpuShare") || json_object_get(b, "gpuMemory"))
		return add_share(p, e, b);
	return 0;
}

static int add_task_env(sc_pod_t *p, sc_podenv_t *e)
{
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(p->task, "env"), k, v)
	{
		int rc;
		if (json_is_string(v))
			rc = add(e, "%s=%s", k, json_string_value(v));
		else if (json_is_integer(v))
			rc = add(e, "%s=%lld", k, (long long)json_integer_value(v));
		else if (json_is_real(v))
			rc = add(e, "%s=%g", k, json_real_value(v));
		else
			rc = add(e, "%s=%s", k, json_is_true(v) ? "true" : "false");
		if (rc < 0)
			return rc;
	}
	return 0;
}

int sc__podenv_build(sc_pod_t *p, sc_podenv_t *e)
{
	const char *path = getenv("PATH") ? getenv("PATH") : "/usr/local/bin:/usr/bin:/bin";
	/* A task's own PATH replaces the agent's, as env does in Kubernetes
	 * (two PATH= entries: getenv and execvp would take the first). */
	if (json_object_get(json_object_get(p->task, "env"), "PATH"))
		path = NULL;
	const char *wd = json_string_value(json_object_get(p->task, "workingDir"));
	char work[600];
	int rc;
	memset(e, 0, sizeof(*e));
	sc__podsec_workdir(p, work, sizeof(work));
	snprintf(e->cwd, sizeof(e->cwd), "%s", wd ? wd : work);
	/* Pods do not inherit the agent's environment (its token included):
	 * PATH and HOME only, then the task's env, then what we define. */
	if ((path && (rc = add(e, "PATH=%s", path)) < 0) || (rc = add(e, "HOME=%s", work)) < 0 ||
	    (rc = add_task_env(p, e)) < 0 || (rc = add(e, "STARCLOUD_JOB=%s", p->job)) < 0 ||
	    (rc = add(e, "STARCLOUD_POD=%s", p->name)) < 0 ||
	    (rc = add(e, "STARCLOUD_NODE=%s", p->a->o.name)) < 0 ||
	    (rc = add(e, "STARCLOUD_RESTARTS=%d", p->restarts)) < 0 ||
	    (rc = add_devices(p, e)) < 0) {
		sc__podenv_free(e);
		return rc;
	}
	return 0;
}

/* ---- cgroups ----------------------------------------------------------- */

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return SC_EIO;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : SC_EIO;
}

void sc__podenv_cgroup_init(sc_agent_t *a)
{
	const char *root = "/sys/fs/cgroup";
	char path[512];
	snprintf(path, sizeof(path), "%s/cgroup.controllers", root);
	if (access(path, R_OK) != 0) {
		/* No unified hierarchy with controllers: cgroup v1 (cgv1.c). */
		sc_log_info("cgroup v2 is not mounted at %s: pod limits through cgroup v1", root);
		sc__cgv1_init(a);
		return;
	}
	snprintf(a->cgroup_root, sizeof(a->cgroup_root), "%s/%s", root, a->cgroup_name);
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", root);
	/* pids bounds a fork bomb; a host without the controller still gets
	 * CPU and memory limits, and is told. */
	if (mkdir(a->cgroup_root, 0755) < 0 && errno != EEXIST) {
		sc_log_warn("cgroup v2 at %s is not writable (%s): pod CPU and memory limits "
		            "are NOT enforced",
		            root, strerror(errno));
		return;
	}
	/* Without the controllers (held by v1 hierarchies, or not delegated)
	 * each pod still gets a cgroup: it is stopped whole (cgkill.h) and its
	 * device program hangs there (devbpf.h). */
	a->cgroup_ok = 1;
	int pids = write_file(path, "+cpu +memory +pids") == 0;
	if (!pids && write_file(path, "+cpu +memory") < 0) {
		sc_log_warn("cgroup v2 at %s has no cpu and memory controllers to give (%s): pod "
		            "CPU and memory limits are NOT enforced",
		            root, strerror(errno));
		return;
	}
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", a->cgroup_root);
	pids = pids && write_file(path, "+cpu +memory +pids") == 0;
	if (!pids && write_file(path, "+cpu +memory") < 0) {
		sc_log_warn("cannot enable cpu and memory controllers under %s: pod limits "
		            "are NOT enforced",
		            a->cgroup_root);
		return;
	}
	a->cgroup_limits = 1;
	a->cgroup_pids = pids;
	if (!pids)
		sc_log_warn("cgroup v2 at %s has no pids controller: pod process counts are NOT "
		            "limited",
		            root);
	sc_log_info("cgroup v2: pod limits under %s", a->cgroup_root);
}

static int cgroup_path(const sc_pod_t *p, char *out, size_t outsz)
{
	return snprintf(out, outsz, "%s/%s.%s", p->a->cgroup_root, p->job, p->name) >= (int)outsz
	           ? SC_ETOOBIG
	           : 0;
}

/* Quantities in the manifest are numbers or strings ("500m", "4Gi"). */
static int64_t quantity(json_t *v, int memory)
{
	char text[64];
	int64_t out = 0;
	if (json_is_number(v))
		return memory ? (int64_t)json_number_value(v)
		              : (int64_t)(json_number_value(v) * 1000.0);
	if (!json_is_string(v))
		return 0;
	snprintf(text, sizeof(text), "%s", json_string_value(v));
	if ((memory ? sc_quantity_memory(text, 0, &out) : sc_quantity_cpu(text, 0, &out)) < 0)
		return 0;
	return out;
}

void sc__podenv_limits(const sc_pod_t *p, int64_t *cpu_milli, int64_t *mem_bytes)
{
	json_t *res = json_object_get(p->task, "resources");
	*cpu_milli = quantity(json_object_get(res, "cpu"), 0);
	*mem_bytes = quantity(json_object_get(res, "memory"), 1);
}

long long sc__podenv_oom_kills(const sc_pod_t *p)
{
	char dir[800], path[900];
	if (!p->a->cgroup_ok)
		return sc__cgv1_oom_kills(p);
	if (cgroup_path(p, dir, sizeof(dir)) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/memory.events", dir);
	return sc__cg_key(path, "oom_kill");
}

int sc__podenv_cgroup_enter(sc_pod_t *p, int pid)
{
	char dir[800], file[900], val[64];
	if (!p->a->cgroup_ok)
		return 0;
	int64_t cpu, mem;
	sc__podenv_limits(p, &cpu, &mem);
	if (cgroup_path(p, dir, sizeof(dir)) < 0 || (mkdir(dir, 0755) < 0 && errno != EEXIST))
		goto fail;
	/* Before the pod is in it: it must never run without its rules. */
	if (sc__devcg_v2_attach(p, dir) < 0)
		return SC_EIO;
	p->oom_base = sc__podenv_oom_kills(p);
	if (!p->a->cgroup_limits)
		cpu = mem = 0;
	if (cpu > 0) {
		snprintf(file, sizeof(file), "%s/cpu.max", dir);
		snprintf(val, sizeof(val), "%lld 100000", (long long)cpu * 100);
		if (write_file(file, val) < 0)
			goto fail;
	}
	if (mem > 0) {
		snprintf(file, sizeof(file), "%s/memory.max", dir);
		snprintf(val, sizeof(val), "%lld", (long long)mem);
		if (write_file(file, val) < 0)
			goto fail;
	}
	if (p->a->cgroup_pids && p->a->o.pod_pids_max > 0) {
		snprintf(file, sizeof(file), "%s/pids.max", dir);
		snprintf(val, sizeof(val), "%d", p->a->o.pod_pids_max);
		if (write_file(file, val) < 0)
			goto fail;
	}
	snprintf(file, sizeof(file), "%s/cgroup.procs", dir);
	snprintf(val, sizeof(val), "%d", pid);
	if (write_file(file, val) < 0)
		goto fail;
	return 0;
fail:
	sc_log_warn("pod %s/%s: cannot apply cgroup limits in %s: %s", p->job, p->name, dir,
	            strerror(errno));
	/* Outside its cgroup it would be outside its device program too. */
	return p->a->devbpf_ok ? SC_EIO : 0;
}

int sc__podenv_cgroup_join(sc_pod_t *p, int pid)
{
	char dir[800], file[900], val[32];
	if (!p->a->cgroup_ok)
		return 0;
	if (cgroup_path(p, dir, sizeof(dir)) < 0)
		return SC_EIO;
	snprintf(file, sizeof(file), "%s/cgroup.procs", dir);
	snprintf(val, sizeof(val), "%d", pid);
	if (write_file(file, val) < 0) {
		sc_log_warn("pod %s/%s: cannot move a probe into %s: %s", p->job, p->name, dir,
		            strerror(errno));
		return SC_EIO;
	}
	return 0;
}

static int add_dir(char (*dirs)[SC_PODENV_CGDIR], int n, int max, const char *root,
                   const sc_pod_t *p)
{
	if (n >= max || snprintf(dirs[n], SC_PODENV_CGDIR, "%s/%s.%s", root, p->job, p->name) >=
	                    SC_PODENV_CGDIR)
		return n;
	return n + 1;
}

int sc__podenv_cgroup_dirs(const sc_pod_t *p, char (*dirs)[SC_PODENV_CGDIR], int max)
{
	const sc_agent_t *a = p->a;
	int n = 0;
	static const int v1_order[] = {SC_CGV1_FREEZER, SC_CGV1_CPU, SC_CGV1_MEMORY, SC_CGV1_PIDS};
	if (a->cgroup_ok)
		n = add_dir(dirs, n, max, a->cgroup_root, p);
	for (size_t i = 0; i < sizeof(v1_order) / sizeof(v1_order[0]); i++)
		if (a->cgv1[v1_order[i]].ok)
			n = add_dir(dirs, n, max, a->cgv1[v1_order[i]].root, p);
	if (a->devcg_ok)
		n = add_dir(dirs, n, max, a->devcg_root, p);
	return n;
}

void sc__podenv_cgroup_signal(const sc_pod_t *p, int sig)
{
	char dirs[SC_CGV1_NCTL + 2][SC_PODENV_CGDIR];
	int n = sc__podenv_cgroup_dirs(p, dirs, SC_CGV1_NCTL + 2);
	/* Every process of the pod is in each of them: the first that exists
	 * lists them all (a handler must not get the signal five times). */
	for (int i = 0; i < n; i++)
		if (sc__cg_exists(dirs[i])) {
			sc__cg_signal(dirs[i], sig, getpid());
			return;
		}
}

void sc__podenv_cgroup_kill(const sc_pod_t *p)
{
	char dirs[SC_CGV1_NCTL + 2][SC_PODENV_CGDIR];
	int n = sc__podenv_cgroup_dirs(p, dirs, SC_CGV1_NCTL + 2);
	for (int i = 0; i < n; i++)
		sc__cg_kill_all(dirs[i], getpid());
}

void sc__podenv_cgroup_remove(sc_pod_t *p)
{
	char dir[800];
	if (p->a->cgroup_ok && cgroup_path(p, dir, sizeof(dir)) == 0) {
		sc__cg_kill_all(dir, getpid());
		rmdir(dir);
	}
	sc__cgv1_remove(p);
}
