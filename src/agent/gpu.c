/* GPU discovery: NVML through dlopen, or declared GPUs (see gpu.h).
 *
 * Only the handful of NVML entry points below are used, each looked up by
 * name, so the agent neither links against nor needs the NVIDIA headers; the
 * types are the documented ABI (handles are opaque pointers, nvmlMemory_t is
 * three unsigned long longs). A test builds a small fake library with the
 * same symbols (tests/e2e/fake_nvml.c) and points --nvml-lib at it. */
#include "agent/gpu.h"
#include "agent/gpudecl.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "starcloud/error.h"

_Static_assert(SC_GPU_DECL_MAX <= SC_GPU_MAX, "a declaration must fit the inventory");

typedef void *nvml_dev_t;
typedef struct {
	unsigned long long total, free, used;
} nvml_memory_t;
typedef struct {
	unsigned int gpu, memory; /* percent */
} nvml_util_t;
#define NVML_TEMPERATURE_GPU 0

typedef struct nvml {
	void *lib;
	int (*init)(void);
	int (*shutdown)(void);
	int (*count)(unsigned int *);
	int (*handle)(unsigned int, nvml_dev_t *);
	int (*name)(nvml_dev_t, char *, unsigned int);
	int (*uuid)(nvml_dev_t, char *, unsigned int);
	int (*memory)(nvml_dev_t, nvml_memory_t *);
	int (*mig_mode)(nvml_dev_t, unsigned int *, unsigned int *);
	int (*mig_max)(nvml_dev_t, unsigned int *);
	int (*mig_handle)(nvml_dev_t, unsigned int, nvml_dev_t *);
	int (*gi_id)(nvml_dev_t, unsigned int *);
	int (*ci_id)(nvml_dev_t, unsigned int *);
	/* Sampling only (optional: an old driver may lack one). */
	int (*util)(nvml_dev_t, nvml_util_t *);
	int (*temp)(nvml_dev_t, int, unsigned int *);
	int (*power)(nvml_dev_t, unsigned int *); /* milliwatts */
	int (*minor)(nvml_dev_t, unsigned int *); /* N of /dev/nvidiaN */
} nvml_t;

/* "NVIDIA A100-SXM4-80GB" with 80 GiB -> "A100-80GB": the family, then the
 * memory, which is how manifests name models (gpuModels, Node spec). */
static void normalise_model(const char *name, uint64_t memory, char *out, size_t outsz)
{
	if (strncmp(name, "NVIDIA ", 7) == 0)
		name += 7;
	size_t n = strcspn(name, "- ");
	if (n == 0 || n > 40)
		n = strlen(name) > 40 ? 40 : strlen(name);
	unsigned long gb = (unsigned long)((memory + (1ull << 29)) >> 30);
	if (gb)
		snprintf(out, outsz, "%.*s-%luGB", (int)n, name, gb);
	else
		snprintf(out, outsz, "%.*s", (int)n, name);
}

static int nvml_load(const char *libpath, nvml_t *n, sc_gpu_inv_t *out)
{
	memset(n, 0, sizeof(*n));
	n->lib = dlopen(libpath ? libpath : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!n->lib)
		return SC_ENOTFOUND;
#define SYM(field, name) *(void **)&n->field = dlsym(n->lib, name)
	SYM(init, "nvmlInit_v2");
	SYM(shutdown, "nvmlShutdown");
	SYM(count, "nvmlDeviceGetCount_v2");
	SYM(handle, "nvmlDeviceGetHandleByIndex_v2");
	SYM(name, "nvmlDeviceGetName");
	SYM(uuid, "nvmlDeviceGetUUID");
	SYM(memory, "nvmlDeviceGetMemoryInfo");
	SYM(mig_mode, "nvmlDeviceGetMigMode");
	SYM(mig_max, "nvmlDeviceGetMaxMigDeviceCount");
	SYM(mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex");
	SYM(gi_id, "nvmlDeviceGetGpuInstanceId");
	SYM(ci_id, "nvmlDeviceGetComputeInstanceId");
	SYM(util, "nvmlDeviceGetUtilizationRates");
	SYM(temp, "nvmlDeviceGetTemperature");
	SYM(power, "nvmlDeviceGetPowerUsage");
	SYM(minor, "nvmlDeviceGetMinorNumber");
#undef SYM
	if (!n->init || !n->count || !n->handle || !n->name || !n->uuid || !n->memory) {
		snprintf(out->error, sizeof(out->error), "NVML library lacks required symbols");
		return SC_EIO;
	}
	return 0;
}

/* "NVIDIA A100-SXM4-40GB MIG 1g.5gb" -> "1g.5gb". */
static void mig_profile(const char *name, char *out, size_t outsz)
{
	const char *p = strstr(name, "MIG ");
	snprintf(out, outsz, "%s", p ? p + 4 : "");
}

static void nvml_migs(nvml_t *n, nvml_dev_t h, sc_gpu_dev_t *d)
{
	unsigned int cur = 0, pending = 0, max = 0;
	if (!n->mig_mode || n->mig_mode(h, &cur, &pending) != 0 || cur != 1)
		return;
	d->mig_mode = 1;
	if (!n->mig_max || !n->mig_handle || n->mig_max(h, &max) != 0)
		return;
	for (unsigned int i = 0; i < max && d->nmig < SC_MIG_MAX; i++) {
		nvml_dev_t mh;
		char name[96] = "";
		if (n->mig_handle(h, i, &mh) != 0)
			continue;
		sc_gpu_mig_t *m = &d->mig[d->nmig++];
		unsigned int id;
		m->gi = m->ci = -1;
		if (n->uuid(mh, m->uuid, sizeof(m->uuid)) != 0)
			m->uuid[0] = '\0';
		if (n->name(mh, name, sizeof(name)) == 0)
			mig_profile(name, m->profile, sizeof(m->profile));
		if (n->gi_id && n->gi_id(mh, &id) == 0)
			m->gi = (int)id;
		if (n->ci_id && n->ci_id(mh, &id) == 0)
			m->ci = (int)id;
	}
}

static int nvml_device(nvml_t *n, unsigned int i, sc_gpu_dev_t *d, sc_gpu_inv_t *out)
{
	nvml_dev_t h;
	nvml_memory_t mem = {0};
	int e;
	memset(d, 0, sizeof(*d));
	d->index = (int)i;
	if ((e = n->handle(i, &h)) != 0 || (e = n->name(h, d->name, sizeof(d->name))) != 0 ||
	    (e = n->uuid(h, d->uuid, sizeof(d->uuid))) != 0 || (e = n->memory(h, &mem)) != 0) {
		snprintf(out->error, sizeof(out->error), "NVML error %d on device %u", e, i);
		return SC_EIO;
	}
	d->name[sizeof(d->name) - 1] = d->uuid[sizeof(d->uuid) - 1] = '\0';
	d->memory = mem.total;
	/* NVML numbers devices by PCI order, the driver its nodes by probe
	 * order: the two usually agree, but device cgroups need the node. */
	unsigned int minor;
	d->minor = n->minor && n->minor(h, &minor) == 0 ? (int)minor : (int)i;
	normalise_model(d->name, d->memory, d->model, sizeof(d->model));
	nvml_migs(n, h, d);
	return 0;
}

int sc_gpu_discover_nvml(const char *libpath, sc_gpu_inv_t *out)
{
	nvml_t n;
	unsigned int count = 0;
	int rc, e;
	memset(out, 0, sizeof(*out));
	out->source = "none";
	if ((rc = nvml_load(libpath, &n, out)) < 0)
		goto out;
	if ((e = n.init()) != 0 || (e = n.count(&count)) != 0) {
		snprintf(out->error, sizeof(out->error), "NVML initialisation failed (error %d)",
		         e);
		rc = SC_EIO;
		goto out;
	}
	if (count > SC_GPU_MAX)
		count = SC_GPU_MAX;
	for (unsigned int i = 0; i < count; i++)
		if ((rc = nvml_device(&n, i, &out->dev[i], out)) < 0)
			goto out;
	out->count = (int)count;
	out->source = "nvml";
	rc = 0;
out:
	if (n.lib) {
		if (n.shutdown && n.init)
			n.shutdown();
		dlclose(n.lib);
	}
	return rc;
}

int sc_gpu_parse_decl(const char *decl, sc_gpu_inv_t *out)
{
	sc_gpu_decl_t d;
	memset(out, 0, sizeof(*out));
	out->source = "declared";
	if (sc_gpu_decl_parse(decl, &d) < 0)
		return SC_EINVAL;
	for (int i = 0; i < d.count; i++) {
		sc_gpu_dev_t *dev = &out->dev[i];
		dev->index = dev->minor = i;
		snprintf(dev->model, sizeof(dev->model), "%s", d.model);
		snprintf(dev->name, sizeof(dev->name), "%s", d.model);
		dev->memory = d.memory;
		dev->mig_mode = d.mig;
	}
	out->count = d.count;
	return 0;
}

json_t *sc_gpu_node_spec(const sc_gpu_inv_t *inv)
{
	if (inv->count == 0)
		return json_pack("{s:i}", "count", 0);
	const sc_gpu_dev_t *d = &inv->dev[0];
	json_t *g = json_pack("{s:i,s:s,s:I,s:b}", "count", inv->count, "model", d->model, "memory",
	                      (json_int_t)d->memory, "mig", d->mig_mode);
	if (!d->memory)
		json_object_del(g, "memory");
	return g;
}

static json_t *mig_json(const sc_gpu_dev_t *d)
{
	json_t *a = json_array();
	for (int i = 0; i < d->nmig; i++)
		json_array_append_new(a, json_pack("{s:s,s:s,s:i,s:i}", "uuid", d->mig[i].uuid,
		                                   "profile", d->mig[i].profile, "gpuInstance",
		                                   d->mig[i].gi, "computeInstance", d->mig[i].ci));
	return a;
}

json_t *sc_gpu_devices_json(const sc_gpu_inv_t *inv)
{
	json_t *a = json_array();
	for (int i = 0; i < inv->count; i++) {
		const sc_gpu_dev_t *d = &inv->dev[i];
		json_t *o =
		    json_pack("{s:i,s:s,s:s,s:I,s:b}", "index", d->index, "uuid", d->uuid, "model",
		              d->model, "memory", (json_int_t)d->memory, "mig", d->mig_mode);
		if (d->nmig)
			json_object_set_new(o, "migInstances", mig_json(d));
		json_array_append_new(a, o);
	}
	return a;
}

/* ---------------------------------------------------------------------
 * Sampling for /metrics
 * ------------------------------------------------------------------- */

struct sc_gpu_sampler {
	nvml_t n;
	sc_gpu_inv_t scratch; /* nvml_load's error text */
};

sc_gpu_sampler_t *sc_gpu_sampler_open(const char *libpath)
{
	sc_gpu_sampler_t *s = sc_xcalloc(1, sizeof(*s));
	if (nvml_load(libpath, &s->n, &s->scratch) < 0 || s->n.init() != 0) {
		sc_gpu_sampler_close(s);
		return NULL;
	}
	return s;
}

void sc_gpu_sampler_close(sc_gpu_sampler_t *s)
{
	if (!s)
		return;
	if (s->n.lib) {
		if (s->n.shutdown)
			s->n.shutdown();
		dlclose(s->n.lib);
	}
	free(s);
}

int sc_gpu_sample(sc_gpu_sampler_t *s, int index, sc_gpu_sample_t *out)
{
	nvml_dev_t h;
	nvml_memory_t mem;
	nvml_util_t u;
	unsigned int v;
	out->util = out->mem_util = out->temp = -1;
	out->fb_used = out->fb_free = -1;
	out->power = -1;
	if (!s || index < 0 || s->n.handle((unsigned int)index, &h) != 0)
		return SC_EIO;
	if (s->n.memory(h, &mem) == 0) {
		out->fb_used = (int64_t)mem.used;
		out->fb_free = (int64_t)mem.free;
	}
	if (s->n.util && s->n.util(h, &u) == 0) {
		out->util = (int)u.gpu;
		out->mem_util = (int)u.memory;
	}
	if (s->n.temp && s->n.temp(h, NVML_TEMPERATURE_GPU, &v) == 0)
		out->temp = (int)v;
	if (s->n.power && s->n.power(h, &v) == 0)
		out->power = v / 1000.0;
	return 0;
}
