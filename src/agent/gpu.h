/* GPU discovery for the node agent.
 *
 * Two sources, one result: NVML (libnvidia-ml.so.1, loaded with dlopen so
 * the binary runs on machines without a driver) or a declaration on the
 * command line (--gpus 8xA100-80GB, 2xH100-80GB:mig). Everything after
 * discovery (the Node spec, device environment for pods) reads only the
 * sc_gpu_inv_t, whichever source filled it. */
#ifndef SC_AGENT_GPU_H
#define SC_AGENT_GPU_H

#include <stdint.h>

#include <jansson.h>

#define SC_GPU_MAX 64
#define SC_MIG_MAX 8

typedef struct sc_gpu_mig {
	char uuid[96];    /* "MIG-..." from NVML, "" when declared */
	char profile[32]; /* "1g.10gb" when NVML names it */
	int gi, ci;       /* GPU and compute instance ids, -1 when unknown */
} sc_gpu_mig_t;

typedef struct sc_gpu_dev {
	int index;
	int minor;       /* its node is /dev/nvidiaMINOR (NVML; the index when declared) */
	char uuid[96];   /* "GPU-..." from NVML, "" when declared */
	char model[96];  /* normalised: "A100-80GB" */
	char name[96];   /* as NVML reports it ("NVIDIA A100-SXM4-80GB") */
	uint64_t memory; /* bytes */
	int mig_mode;    /* 1 when MIG is enabled */
	sc_gpu_mig_t mig[SC_MIG_MAX];
	int nmig;
} sc_gpu_dev_t;

typedef struct sc_gpu_inv {
	sc_gpu_dev_t dev[SC_GPU_MAX];
	int count;
	const char *source; /* "nvml", "declared" or "none" */
	char error[256];    /* why NVML failed, for the node's GPU condition */
} sc_gpu_inv_t;

/* Loads NVML from libpath (NULL: "libnvidia-ml.so.1") and lists the devices.
 * SC_ENOTFOUND when the library is absent, SC_EIO when it fails (the reason
 * is in out->error), 0 on success. */
int sc_gpu_discover_nvml(const char *libpath, sc_gpu_inv_t *out);
/* Parses "NxMODEL[:mig]" (N 0..64, MODEL like A100-80GB whose "-NNGB"
 * suffix gives the memory). SC_EINVAL on bad input. */
int sc_gpu_parse_decl(const char *decl, sc_gpu_inv_t *out);
/* Live figures of the devices, for the agent's /metrics: NVML stays
 * loaded (initialised once) while the agent runs. Opaque. */
typedef struct sc_gpu_sampler sc_gpu_sampler_t;

/* One device's figures; a field NVML could not give is negative. */
typedef struct sc_gpu_sample {
	int util;        /* % of the last sample period the GPU was busy */
	int mem_util;    /* % of it the memory was read or written */
	int64_t fb_used; /* bytes of device memory in use */
	int64_t fb_free; /* bytes free */
	int temp;        /* GPU core temperature, degrees C */
	double power;    /* watts drawn */
} sc_gpu_sample_t;

/* Opens NVML at libpath (as sc_gpu_discover_nvml) for sampling; NULL when
 * it cannot be loaded or initialised (declared GPUs: nothing to measure).
 * Free with sc_gpu_sampler_close (NULL is fine). */
sc_gpu_sampler_t *sc_gpu_sampler_open(const char *libpath);
void sc_gpu_sampler_close(sc_gpu_sampler_t *s);
/* Reads device index's figures now. 0, or SC_EIO when the device cannot
 * be read at all (the sample is then all -1). */
int sc_gpu_sample(sc_gpu_sampler_t *s, int index, sc_gpu_sample_t *out);

/* Node spec.gpus for the inventory: {count, model, memory, mig}. New ref. */
json_t *sc_gpu_node_spec(const sc_gpu_inv_t *inv);
/* Node status.devices: one object per device. New reference. */
json_t *sc_gpu_devices_json(const sc_gpu_inv_t *inv);

#endif
