/* A pod's devices cgroup (see devcg.h). */
#include "agent/devcg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent/cgkill.h"
#include "agent/cgv1.h"
#include "agent/devbpf.h"
#include "base/log.h"
#include "base/parse.h"
#include "starcloud/error.h"

#define MAX_NODES 256
#define NO_GPU (-1) /* a control node (nvidiactl, nvidia-uvm, ...) */

typedef struct devnode {
	char type; /* 'c' or 'b' */
	unsigned major, minor;
	int gpu; /* N of /dev/nvidiaN, NO_GPU for the shared nodes */
} devnode_t;

static void add_node(devnode_t *nodes, int *n, const struct stat *st, int gpu)
{
	if (*n >= MAX_NODES || !(S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)))
		return;
	nodes[*n] = (devnode_t){.type = S_ISCHR(st->st_mode) ? 'c' : 'b',
	                        .major = major(st->st_rdev),
	                        .minor = minor(st->st_rdev),
	                        .gpu = gpu};
	(*n)++;
}

/* The NVIDIA nodes of dir (and dir/nvidia-caps). */
static int list_nodes(const char *dir, devnode_t *nodes)
{
	static const char *const shared[] = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
	                                     "nvidia-modeset"};
	char path[1100];
	struct stat st;
	int n = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		/* nvidiaN, N digits only (no sign, no space). */
		const char *digits = strncmp(e->d_name, "nvidia", 6) == 0 ? e->d_name + 6 : "";
		int gpu = NO_GPU;
		if (*digits && strspn(digits, "0123456789") == strlen(digits) &&
		    sc_parse_int(digits, 0, 99999, &gpu) < 0)
			gpu = NO_GPU;
		int known = gpu != NO_GPU;
		for (size_t i = 0; i < sizeof(shared) / sizeof(shared[0]); i++)
			known |= strcmp(e->d_name, shared[i]) == 0;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (known && lstat(path, &st) == 0)
			add_node(nodes, &n, &st, gpu);
	}
	if (d)
		closedir(d);
	snprintf(path, sizeof(path), "%s/nvidia-caps", dir);
	if ((d = opendir(path))) {
		while ((e = readdir(d))) {
			char cap[1400];
			snprintf(cap, sizeof(cap), "%s/%s", path, e->d_name);
			if (e->d_name[0] != '.' && lstat(cap, &st) == 0)
				add_node(nodes, &n, &st, NO_GPU);
		}
		closedir(d);
	}
	return n;
}

static void not_enforced(const char *dir, const char *why)
{
	sc_log_warn("%s: a pod can open every GPU's device node in %s (GPU isolation NOT "
	            "enforced beyond CUDA_VISIBLE_DEVICES)",
	            why, dir);
}

/* cgroup v2 (the pods' limits are there: podenv.c): a BPF program per
 * pod cgroup (devbpf.h), if this process may load one. */
static void v2_init(sc_agent_t *a, const char *dir, int n)
{
	if (!sc__devbpf_usable()) {
		char why[300];
		snprintf(why, sizeof(why),
		         "cgroup v2: cannot load a BPF device program (%s; it needs "
		         "CAP_SYS_ADMIN)",
		         strerror(errno));
		if (n)
			not_enforced(dir, why);
		return;
	}
	a->devbpf_ok = 1;
	sc_log_info("cgroup v2: pods see only their GPUs' nodes of %s (%d found now), through "
	            "a BPF device program per pod",
	            dir, n);
}

void sc__devcg_init(sc_agent_t *a)
{
	char mnt[512], own[512], allow[600];
	devnode_t nodes[MAX_NODES];
	const char *dir = a->o.dev_dir ? a->o.dev_dir : "/dev";
	int n = list_nodes(dir, nodes);
	if (a->cgroup_ok) {
		v2_init(a, dir, n);
		return;
	}
	if (!sc__cgv1_mount("devices", mnt, sizeof(mnt)) ||
	    !sc__cgv1_own("devices", own, sizeof(own)) ||
	    snprintf(a->devcg_root, sizeof(a->devcg_root), "%s/%s", mnt, a->cgroup_name) >=
	        (int)sizeof(a->devcg_root) ||
	    snprintf(a->devcg_home, sizeof(a->devcg_home), "%s%s/cgroup.procs", mnt,
	             strcmp(own, "/") == 0 ? "" : own) >= (int)sizeof(a->devcg_home)) {
		if (n)
			not_enforced(dir, "no cgroup v1 devices controller");
		return;
	}
	a->devcg_ok = 1;
	if (n == 0)
		return; /* nothing to hide yet: the folder is made at the first need */
	/* The kernel wants CAP_SYS_ADMIN for any rule: find out now, not at
	 * the first pod. Allowing everything again is a no-op here (EINVAL
	 * once pod cgroups exist below: the check passed then too). */
	snprintf(allow, sizeof(allow), "%s/devices.allow", a->devcg_root);
	if ((mkdir(a->devcg_root, 0755) < 0 && errno != EEXIST) ||
	    (sc__cgv1_write(allow, "a") < 0 && errno != EINVAL)) {
		char why[700];
		snprintf(why, sizeof(why),
		         "cannot write device rules in %s (%s; they need "
		         "CAP_SYS_ADMIN and a writable /sys/fs/cgroup)",
		         a->devcg_root, strerror(errno));
		not_enforced(dir, why);
		rmdir(a->devcg_root);
		a->devcg_ok = 0;
		return;
	}
	sc_log_info("devices cgroup: pods see only their GPUs' nodes of %s (%d found now), "
	            "under %s",
	            dir, n, a->devcg_root);
}

static int pod_has_gpu(const sc_pod_t *p, int minor)
{
	const sc_gpu_inv_t *inv = &p->a->gpus;
	json_t *mig = json_object_get(p->binding, "mig"), *v;
	size_t i;
	if (json_is_object(mig)) {
		json_int_t g = json_integer_value(json_object_get(mig, "gpu"));
		return (g >= 0 && g < inv->count ? inv->dev[g].minor : g) == minor;
	}
	json_array_foreach(json_object_get(p->binding, "gpus"), i, v)
	{
		json_int_t g = json_integer_value(v);
		if ((g >= 0 && g < inv->count ? inv->dev[g].minor : g) == minor)
			return 1;
	}
	return 0;
}

static int pod_has_any_gpu(const sc_pod_t *p)
{
	return json_is_object(json_object_get(p->binding, "mig")) ||
	       json_array_size(json_object_get(p->binding, "gpus")) > 0;
}

/* Writes the pod's rules into dir: deny what is not its own, allow (undo
 * an earlier incarnation's deny) what is. */
static int write_rules(const sc_pod_t *p, const char *dir, const devnode_t *nodes, int n)
{
	char allow[900], deny[900], rule[64];
	int any = pod_has_any_gpu(p);
	snprintf(allow, sizeof(allow), "%s/devices.allow", dir);
	snprintf(deny, sizeof(deny), "%s/devices.deny", dir);
	for (int i = 0; i < n; i++) {
		int mine = nodes[i].gpu == NO_GPU ? any : pod_has_gpu(p, nodes[i].gpu);
		snprintf(rule, sizeof(rule), "%c %u:%u rwm", nodes[i].type, nodes[i].major,
		         nodes[i].minor);
		if (sc__cgv1_write(mine ? allow : deny, rule) < 0)
			return SC_EIO;
	}
	return 0;
}

static int pod_dir(const sc_pod_t *p, char *out, size_t outsz)
{
	return snprintf(out, outsz, "%s/%s.%s", p->a->devcg_root, p->job, p->name) >= (int)outsz
	           ? SC_ETOOBIG
	           : 0;
}

int sc__devcg_enter(sc_pod_t *p)
{
	sc_agent_t *a = p->a;
	devnode_t nodes[MAX_NODES];
	char dir[800], procs[900], pid[32];
	if (!a->devcg_ok)
		return 0;
	int n = list_nodes(a->o.dev_dir ? a->o.dev_dir : "/dev", nodes), hidden = 0;
	for (int i = 0; i < n; i++)
		hidden |=
		    nodes[i].gpu == NO_GPU ? !pod_has_any_gpu(p) : !pod_has_gpu(p, nodes[i].gpu);
	if (!hidden)
		return 0;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if (pod_dir(p, dir, sizeof(dir)) < 0 ||
	    (mkdir(a->devcg_root, 0755) < 0 && errno != EEXIST) ||
	    (mkdir(dir, 0755) < 0 && errno != EEXIST) || write_rules(p, dir, nodes, n) < 0 ||
	    (snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir),
	     sc__cgv1_write(procs, pid) < 0)) {
		sc_log_error("pod %s/%s: cannot set its devices cgroup %s (%s): not started, it "
		             "would see every GPU",
		             p->job, p->name, dir, strerror(errno));
		return SC_EIO;
	}
	return 1;
}

int sc__devcg_v2_attach(sc_pod_t *p, const char *dir)
{
	devnode_t nodes[MAX_NODES];
	sc_devrule_t deny[MAX_NODES];
	if (!p->a->devbpf_ok)
		return 0;
	int n = list_nodes(p->a->o.dev_dir ? p->a->o.dev_dir : "/dev", nodes), k = 0;
	int any = pod_has_any_gpu(p);
	for (int i = 0; i < n; i++)
		if (!(nodes[i].gpu == NO_GPU ? any : pod_has_gpu(p, nodes[i].gpu)))
			deny[k++] = (sc_devrule_t){nodes[i].type, nodes[i].major, nodes[i].minor};
	/* Attached even with nothing to deny: it replaces the program of an
	 * earlier start of the pod, which may have hidden its GPU now. */
	if (sc__devbpf_attach(dir, deny, k) < 0) {
		sc_log_error("pod %s/%s: cannot attach its device program to %s (%s): not "
		             "started, it would see every GPU",
		             p->job, p->name, dir, strerror(errno));
		return SC_EIO;
	}
	return 0;
}

void sc__devcg_leave(sc_agent_t *a, int entered)
{
	char pid[32];
	if (entered <= 0)
		return;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if (sc__cgv1_write(a->devcg_home, pid) < 0)
		sc_log_error("cannot move the agent back to its devices cgroup (%s): %s",
		             a->devcg_home, strerror(errno));
}

void sc__devcg_remove(sc_pod_t *p)
{
	char dir[800];
	if (p->a->devcg_ok && pod_dir(p, dir, sizeof(dir)) == 0) {
		sc__cg_kill_all(dir, getpid());
		rmdir(dir); /* fails while a process of it lives on: kept */
	}
}

void sc__devcg_close(sc_agent_t *a)
{
	if (a->devcg_ok)
		rmdir(a->devcg_root);
}
