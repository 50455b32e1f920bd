/* The agent's /metrics (see agent_metrics.h). */
#include "agent/agent_metrics.h"

#include <string.h>

#include "net/promtext.h"
#include "net/tlsreload.h"

#define MAX_HOLDERS 16 /* pods listed per device (a 7-way MIG split fits) */

/* The queue of the job or deployment a pod belongs to, from the objects the
 * agent watches (sync.c keeps them); "" when not (yet) known. */
static const char *pod_queue(const sc_agent_t *a, const sc_pod_t *p)
{
	for (size_t i = 0; i < sizeof(a->watches) / sizeof(a->watches[0]); i++) {
		const sc_watch_t *w = &a->watches[i];
		if (!w->kind || strcmp(w->kind, p->kind) != 0)
			continue;
		json_t *obj = json_object_get(w->cache, p->job);
		const char *q =
		    json_string_value(json_object_get(json_object_get(obj, "spec"), "queue"));
		return q ? q : "";
	}
	return "";
}

/* True when the pod's binding holds device index (whole, share or MIG). */
static int holds(const sc_pod_t *p, int index)
{
	json_t *mig = json_object_get(p->binding, "mig"), *g;
	size_t i;
	if (json_is_object(mig))
		return json_integer_value(json_object_get(mig, "gpu")) == index;
	json_array_foreach(json_object_get(p->binding, "gpus"), i, g)
	{
		if (json_integer_value(g) == index)
			return 1;
	}
	return 0;
}

static void pod_metrics(sc_agent_t *a, sc_buf_t *b)
{
	static const char *const states[] = {"running", "backoff", "succeeded", "failed"};
	size_t count[4] = {0};
	for (sc_pod_t *p = a->pods; p; p = p->next)
		if (p->state >= 0 && p->state < 4)
			count[p->state]++;
	sc_prom_family(b, "starcloud_agent_pods", "gauge",
	               "Pods on this node by state (running, backoff: waiting to restart, "
	               "succeeded, failed).");
	for (int i = 0; i < 4; i++)
		sc_buf_printf(b, "starcloud_agent_pods{state=\"%s\"} %zu\n", states[i], count[i]);
	sc_prom_family(b, "starcloud_agent_pod_restarts_total", "counter",
	               "Restarts of each pod's process on this node.");
	for (sc_pod_t *p = a->pods; p; p = p->next)
		sc_buf_printf(b, "starcloud_agent_pod_restarts_total{pod=\"%s\",queue=\"%s\"} %d\n",
		              p->name, pod_queue(a, p), p->restarts);
	sc_prom_family(b, "starcloud_agent_pod_ready", "gauge",
	               "1 when the pod passes its readiness probe (or has none and runs).");
	for (sc_pod_t *p = a->pods; p; p = p->next)
		sc_buf_printf(b, "starcloud_agent_pod_ready{pod=\"%s\",queue=\"%s\"} %d\n", p->name,
		              pod_queue(a, p), p->ready && p->alive);
}

static void agent_metrics(sc_agent_t *a, sc_buf_t *b)
{
	sc_prom_family(b, "starcloud_agent_registered", "gauge",
	               "1 once the server accepted this node's registration.");
	sc_buf_printf(b, "starcloud_agent_registered %d\n", a->registered);
	sc_prom_family(b, "starcloud_agent_heartbeat_failing", "gauge",
	               "1 when the last heartbeat to the server failed.");
	sc_buf_printf(b, "starcloud_agent_heartbeat_failing %d\n", a->hb_failing);
	sc_prom_family(b, "starcloud_agent_fenced", "gauge",
	               "1 when the pods were stopped because the lease could not be renewed.");
	sc_buf_printf(b, "starcloud_agent_fenced %d\n", a->fenced);
	sc_prom_family(b, "starcloud_agent_gpus", "gauge",
	               "GPU devices of this node, by where they were found (nvml, declared).");
	sc_buf_printf(b, "starcloud_agent_gpus{source=\"%s\"} %d\n",
	              a->gpus.source ? a->gpus.source : "none", a->gpus.count);
}

/* ---- devices -------------------------------------------------------- */

typedef struct dev_fig {
	const char *name, *help;
} dev_fig_t;

/* The DCGM exporter's fields, its names and its units. */
enum { F_UTIL, F_MEMUTIL, F_FB_USED, F_FB_FREE, F_TEMP, F_POWER, NFIGS };
static const dev_fig_t figs[NFIGS] = {
    {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."},
    {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %)."},
    {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."},
    {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."},
    {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."},
    {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."},
};

static double fig_value(const sc_gpu_sample_t *s, int f)
{
	switch (f) {
	case F_UTIL:
		return s->util;
	case F_MEMUTIL:
		return s->mem_util;
	case F_FB_USED:
		return s->fb_used < 0 ? -1 : (double)(s->fb_used >> 20);
	case F_FB_FREE:
		return s->fb_free < 0 ? -1 : (double)(s->fb_free >> 20);
	case F_TEMP:
		return s->temp;
	default:
		return s->power;
	}
}

/* The pods holding device index (at most MAX_HOLDERS). */
static size_t holders(sc_agent_t *a, int index, const sc_pod_t **out)
{
	size_t n = 0;
	for (sc_pod_t *p = a->pods; p && n < MAX_HOLDERS; p = p->next)
		if (p->state == SC_PS_RUNNING && holds(p, index))
			out[n++] = p;
	return n;
}

static void device_metrics(sc_agent_t *a, sc_buf_t *b)
{
	sc_gpu_sample_t s[SC_GPU_MAX];
	int ok[SC_GPU_MAX];
	for (int i = 0; i < a->gpus.count; i++)
		ok[i] = sc_gpu_sample(a->sampler, a->gpus.dev[i].index, &s[i]) == 0;
	for (int f = 0; f < NFIGS; f++) {
		sc_prom_family(b, figs[f].name, "gauge", figs[f].help);
		for (int i = 0; i < a->gpus.count; i++) {
			const sc_gpu_dev_t *d = &a->gpus.dev[i];
			double v = fig_value(&s[i], f);
			if (!ok[i] || v < 0)
				continue; /* not measured: no sample rather than a made-up 0 */
			const sc_pod_t *hp[MAX_HOLDERS];
			size_t nh = holders(a, d->index, hp);
			for (size_t h = 0; h < (nh ? nh : 1); h++)
				sc_buf_printf(b,
				              "%s{gpu=\"%d\",UUID=\"%s\",device=\"nvidia%d\","
				              "model=\"%s\",Hostname=\"%s\",pod=\"%s\","
				              "queue=\"%s\"} %g\n",
				              figs[f].name, d->index, d->uuid, d->index, d->model,
				              a->o.name, nh ? hp[h]->name : "",
				              nh ? pod_queue(a, hp[h]) : "", v);
		}
	}
}

void sc__agent_metrics(sc_agent_t *a, sc_buf_t *b)
{
	agent_metrics(a, b);
	pod_metrics(a, b);
	if (a->sampler)
		device_metrics(a, b);
	sc_prom_build_info(b, "agent", "");
	sc_prom_process(b);
	sc_tls_reload_metrics(b);
}
