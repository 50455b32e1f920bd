/* A test fixture standing in for libnvidia-ml.so.1: two "A100-SXM4-80GB"
 * devices, the second in MIG mode with two 1g.10gb instances. It exports
 * exactly the NVML entry points the agent looks up (src/agent/gpu.c).
 * Live figures (for the agent's /metrics), per device 0 / 1: utilisation
 * 37 / 81 %, memory utilisation 12 / 40 %, 10 / 20 GiB of 80 used, 55 / 61
 * degrees C, 250.5 / 301.25 W. */
#include <stdio.h>
#include <string.h>

typedef struct {
	unsigned long long total, free, used;
} mem_t;

/* Handles: 0x100 + device; MIG handles 0x200 + 16 * device + instance. */
static long idx(void *h)
{
	return (long)h;
}

int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetCount_v2(unsigned int *n);
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h);
int nvmlDeviceGetName(void *h, char *out, unsigned int len);
int nvmlDeviceGetUUID(void *h, char *out, unsigned int len);
int nvmlDeviceGetMemoryInfo(void *h, mem_t *m);
int nvmlDeviceGetMigMode(void *h, unsigned int *cur, unsigned int *pending);
int nvmlDeviceGetMaxMigDeviceCount(void *h, unsigned int *n);
int nvmlDeviceGetMigDeviceHandleByIndex(void *h, unsigned int i, void **mh);
int nvmlDeviceGetGpuInstanceId(void *h, unsigned int *id);
int nvmlDeviceGetComputeInstanceId(void *h, unsigned int *id);
typedef struct {
	unsigned int gpu, memory;
} util_t;
int nvmlDeviceGetUtilizationRates(void *h, util_t *u);
int nvmlDeviceGetTemperature(void *h, int sensor, unsigned int *t);
int nvmlDeviceGetPowerUsage(void *h, unsigned int *mw);
int nvmlDeviceGetMinorNumber(void *h, unsigned int *minor);

/* The driver numbered the nodes the other way round: device 0 is
 * /dev/nvidia1 and device 1 is /dev/nvidia0 (device cgroups must follow
 * the node, not the index). */
int nvmlDeviceGetMinorNumber(void *h, unsigned int *minor)
{
	long i = idx(h) - 0x100;
	if (i < 0 || i >= 2)
		return 2;
	*minor = (unsigned int)(1 - i);
	return 0;
}

int nvmlInit_v2(void)
{
	return 0;
}

int nvmlShutdown(void)
{
	return 0;
}

int nvmlDeviceGetCount_v2(unsigned int *n)
{
	*n = 2;
	return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h)
{
	if (i >= 2)
		return 2;
	*h = (void *)(0x100L + i);
	return 0;
}

int nvmlDeviceGetName(void *h, char *out, unsigned int len)
{
	if (idx(h) >= 0x200)
		snprintf(out, len, "NVIDIA A100-SXM4-80GB MIG 1g.10gb");
	else
		snprintf(out, len, "NVIDIA A100-SXM4-80GB");
	return 0;
}

int nvmlDeviceGetUUID(void *h, char *out, unsigned int len)
{
	long v = idx(h);
	if (v >= 0x200)
		snprintf(out, len, "MIG-fake-%ld-%ld", (v - 0x200) / 16, (v - 0x200) % 16);
	else
		snprintf(out, len, "GPU-fake-%04ld", v - 0x100);
	return 0;
}

int nvmlDeviceGetMemoryInfo(void *h, mem_t *m)
{
	m->total = 80ULL << 30;
	m->used = idx(h) == 0x100 ? 10ULL << 30 : idx(h) == 0x101 ? 20ULL << 30 : 0;
	m->free = m->total - m->used;
	return 0;
}

int nvmlDeviceGetMigMode(void *h, unsigned int *cur, unsigned int *pending)
{
	*cur = *pending = idx(h) == 0x101;
	return 0;
}

int nvmlDeviceGetMaxMigDeviceCount(void *h, unsigned int *n)
{
	*n = idx(h) == 0x101 ? 2 : 0;
	return 0;
}

int nvmlDeviceGetMigDeviceHandleByIndex(void *h, unsigned int i, void **mh)
{
	*mh = (void *)(0x200L + 16 * (idx(h) - 0x100) + i);
	return 0;
}

int nvmlDeviceGetGpuInstanceId(void *h, unsigned int *id)
{
	*id = (unsigned int)((idx(h) - 0x200) % 16) + 1;
	return 0;
}

int nvmlDeviceGetComputeInstanceId(void *h, unsigned int *id)
{
	*id = 0;
	return 0;
}

int nvmlDeviceGetUtilizationRates(void *h, util_t *u)
{
	if (idx(h) != 0x100 && idx(h) != 0x101)
		return 3; /* NVML_ERROR_NOT_SUPPORTED, as on a MIG instance */
	u->gpu = idx(h) == 0x100 ? 37 : 81;
	u->memory = idx(h) == 0x100 ? 12 : 40;
	return 0;
}

int nvmlDeviceGetTemperature(void *h, int sensor, unsigned int *t)
{
	if (sensor != 0)
		return 2;
	*t = idx(h) == 0x100 ? 55 : 61;
	return 0;
}

int nvmlDeviceGetPowerUsage(void *h, unsigned int *mw)
{
	*mw = idx(h) == 0x100 ? 250500 : 301250;
	return 0;
}
