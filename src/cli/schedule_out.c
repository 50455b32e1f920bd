/* Output of `starcloud schedule`.
 *
 * JSON with several cycles is the state after the last cycle: bindings made
 * during the run whose pods are still in place (a pod evicted later is
 * dropped, a consolidated pod shows its last node), every eviction decided,
 * and the last cycle's pending jobs and queues; "cycles" holds each cycle's
 * own decisions object. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/schedule_out.h"
#include "starcloud/manifest.h"

int sc__out_init(sc__out_t *o, bool json, int ncycles)
{
	memset(o, 0, sizeof(*o));
	o->json = json;
	o->ncycles = ncycles;
	if (!json)
		return 0;
	o->placed = json_object();
	o->evictions = json_array();
	o->cycles = json_array();
	return o->placed && o->evictions && o->cycles ? 0 : SC_ENOMEM;
}

void sc__out_free(sc__out_t *o)
{
	json_decref(o->placed);
	json_decref(o->evictions);
	json_decref(o->cycles);
	json_decref(o->final);
}

/* ---- table ------------------------------------------------------------- */

static const char *job_name(const sc_snapshot_t *s, size_t j)
{
	return j < s->njobs ? s->jobs[j].name : "?";
}

static void gpu_text(const sc_binding_t *b, char *buf, size_t size)
{
	size_t n = 0;
	buf[0] = '\0';
	if (b->mig_profile) {
		snprintf(buf, size, "%d:%s@%d", b->mig_gpu, b->mig_profile, b->mig_start);
		return;
	}
	for (size_t i = 0; i < b->ngpus && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s%d", i ? "," : "", b->gpus[i]);
	if (b->gpu_milli && n < size)
		snprintf(buf + n, size - n, " (%d/1000)", b->gpu_milli);
	if (!buf[0])
		snprintf(buf, size, "-");
}

static int width(int w, const char *s)
{
	int n = (int)strlen(s);
	return n > w ? n : w;
}

static void print_bindings(const sc_snapshot_t *s, const sc_decisions_t *d)
{
	int wj = 3, wp = 3, wn = 4;
	char g[160];
	printf("BINDINGS (%zu)\n", d->nbindings);
	if (!d->nbindings)
		return;
	for (size_t i = 0; i < d->nbindings; i++) {
		wj = width(wj, job_name(s, d->bindings[i].job));
		wp = width(wp, d->bindings[i].pod);
		wn = width(wn, d->bindings[i].node);
	}
	printf("  %-*s  %-*s  %-*s  %s\n", wj, "JOB", wp, "POD", wn, "NODE", "GPUS");
	for (size_t i = 0; i < d->nbindings; i++) {
		const sc_binding_t *b = &d->bindings[i];
		gpu_text(b, g, sizeof(g));
		printf("  %-*s  %-*s  %-*s  %s%s\n", wj, job_name(s, b->job), wp, b->pod, wn,
		       b->node, g, b->pipelined ? "  (pipelined)" : "");
	}
}

static void print_evictions(const sc_snapshot_t *s, const sc_decisions_t *d)
{
	printf("EVICTIONS (%zu)\n", d->nevictions);
	for (size_t i = 0; i < d->nevictions; i++) {
		const sc_eviction_t *e = &d->evictions[i];
		printf("  %s %s on %s: %s", sc_eviction_action_name(e->action), e->pod,
		       e->node ? e->node : "-", job_name(s, e->job));
		if (e->by)
			printf(" for %s", e->by);
		if (e->to)
			printf(", moved to %s", e->to);
		if (e->reason && e->reason[0])
			printf(" (%s)", e->reason);
		printf("\n");
	}
}

static void print_pending(const sc_snapshot_t *s, const sc_decisions_t *d)
{
	int wj = 3;
	printf("PENDING (%zu)\n", d->npending);
	for (size_t i = 0; i < d->npending; i++)
		wj = width(wj, job_name(s, d->pending[i].job));
	for (size_t i = 0; i < d->npending; i++)
		printf("  %-*s  %s\n", wj, job_name(s, d->pending[i].job),
		       d->pending[i].reason ? d->pending[i].reason : "");
}

static double round2(double v)
{
	return round(v * 100) / 100;
}

static void print_queues(const sc_decisions_t *d)
{
	int wq = 5;
	printf("QUEUES (%zu)  fair share / allocated / requested\n", d->nqueues);
	if (!d->nqueues)
		return;
	for (size_t i = 0; i < d->nqueues; i++)
		wq = width(wq, d->queues[i].name) + (d->queues[i].parent ? 2 : 0);
	printf("  %-*s  %-22s  %-22s  %s\n", wq, "QUEUE", "GPU", "CPU (cores)", "MEMORY (GiB)");
	for (size_t i = 0; i < d->nqueues; i++) {
		const sc_queue_report_t *q = &d->queues[i];
		char name[300], gpu[64], cpu[64], mem[64];
		const double gib = 1024.0 * 1024 * 1024;
		snprintf(name, sizeof(name), "%s%s", q->parent ? "  " : "", q->name);
		/* Two decimals at most: shares and MIG slices make long fractions. */
		snprintf(gpu, sizeof(gpu), "%.6g / %.6g / %.6g", round2(q->fair_share[SC_RES_GPU]),
		         round2(q->allocated[SC_RES_GPU]), round2(q->requested[SC_RES_GPU]));
		snprintf(cpu, sizeof(cpu), "%.6g / %.6g / %.6g",
		         round2(q->fair_share[SC_RES_CPU] / 1000),
		         round2(q->allocated[SC_RES_CPU] / 1000),
		         round2(q->requested[SC_RES_CPU] / 1000));
		snprintf(mem, sizeof(mem), "%.4g / %.4g / %.4g", q->fair_share[SC_RES_MEM] / gib,
		         q->allocated[SC_RES_MEM] / gib, q->requested[SC_RES_MEM] / gib);
		printf("  %-*s  %-22s  %-22s  %s\n", wq, name, gpu, cpu, mem);
	}
}

static void print_table(const sc__out_t *o, const sc_snapshot_t *s, const sc_decisions_t *d,
                        int index)
{
	if (o->ncycles > 1)
		printf("%s== cycle %d ==\n", index ? "\n" : "", index + 1);
	print_bindings(s, d);
	print_evictions(s, d);
	print_pending(s, d);
	print_queues(d);
}

/* ---- JSON -------------------------------------------------------------- */

/* Folds one cycle into the run's state (see the comment at the top). */
static int accumulate(sc__out_t *o, json_t *cj)
{
	json_t *v;
	size_t i;
	json_array_foreach(json_object_get(cj, "evictions"), i, v)
	{
		json_object_del(o->placed, json_string_value(json_object_get(v, "pod")));
		if (json_array_append(o->evictions, v))
			return SC_ENOMEM;
	}
	json_array_foreach(json_object_get(cj, "bindings"), i, v)
	{
		const char *pod = json_string_value(json_object_get(v, "pod"));
		json_object_del(o->placed, pod); /* re-insert at the end */
		if (json_object_set(o->placed, pod, v))
			return SC_ENOMEM;
	}
	return 0;
}

static int final_state(sc__out_t *o, json_t *cj)
{
	json_t *f = json_object(), *b = json_array(), *v;
	const char *k;
	if (!f || !b) {
		json_decref(f);
		json_decref(b);
		return SC_ENOMEM;
	}
	json_object_foreach(o->placed, k, v) json_array_append(b, v);
	if (json_object_set_new(f, "bindings", b) ||
	    json_object_set(f, "evictions", o->evictions) ||
	    json_object_set(f, "pending", json_object_get(cj, "pending")) ||
	    json_object_set(f, "queues", json_object_get(cj, "queues")) ||
	    json_object_set(f, "cycles", o->cycles)) {
		json_decref(f);
		return SC_ENOMEM;
	}
	o->final = f;
	return 0;
}

int sc__out_cycle(sc__out_t *o, const sc_snapshot_t *s, const sc_decisions_t *d, int index,
                  bool last)
{
	if (!o->json) {
		print_table(o, s, d, index);
		return 0;
	}
	json_t *cj = sc_decisions_to_json(s, d);
	if (!cj)
		return SC_ENOMEM;
	if (o->ncycles == 1) {
		o->final = cj;
		return 0;
	}
	int rc = accumulate(o, cj);
	if (rc == 0 && json_array_append(o->cycles, cj))
		rc = SC_ENOMEM;
	if (rc == 0 && last)
		rc = final_state(o, cj);
	json_decref(cj);
	return rc;
}

int sc__out_finish(sc__out_t *o)
{
	if (!o->json || !o->final)
		return 0;
	if (json_dumpf(o->final, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER))
		return SC_EIO;
	printf("\n");
	return 0;
}

json_t *sc__out_last(sc__out_t *o)
{
	if (!o->json)
		return NULL;
	if (o->ncycles == 1)
		return o->final;
	size_t n = json_array_size(o->cycles);
	return n ? json_array_get(o->cycles, n - 1) : NULL;
}
