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
#include "base/alloc.h"
#include "cli/table.h"
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

static void print_bindings(const sc_snapshot_t *s, const sc_decisions_t *d)
{
	static const char *const h[] = {"JOB", "POD", "NODE", "GPUS"};
	char g[160];
	printf("BINDINGS (%zu)\n", d->nbindings);
	if (!d->nbindings)
		return;
	sc_table_t *t = sc_table_new(4, h);
	sc_table_margin(t, 2);
	for (size_t i = 0; i < d->nbindings; i++) {
		const sc_binding_t *b = &d->bindings[i];
		gpu_text(b, g, sizeof(g));
		sc_table_addf(t, 0, "%s\t%s\t%s\t%s%s", job_name(s, b->job), b->pod, b->node, g,
		              b->pipelined ? "  (pipelined)" : "");
	}
	sc_table_print(t, stdout, 0);
	sc_table_free(t);
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
	printf("PENDING (%zu)\n", d->npending);
	if (!d->npending)
		return;
	sc_table_t *t = sc_table_new(2, (const char *const[]){"JOB", "REASON"});
	sc_table_margin(t, 2);
	for (size_t i = 0; i < d->npending; i++)
		sc_table_addf(t, 0, "%s\t%s", job_name(s, d->pending[i].job),
		              d->pending[i].reason ? d->pending[i].reason : "");
	sc_table_print(t, stdout, 1);
	sc_table_free(t);
}

/* "quota/limit" of one resource, in unit (a limit below zero is none). */
static void quota_limit(char *out, size_t outsz, const sc_queue_report_t *q, int r, double unit)
{
	char a[32], b[32];
	sc_fmt_num(a, sizeof(a), q->quota[r] < 0 ? -1 : q->quota[r] / unit, 1);
	sc_fmt_num(b, sizeof(b), q->limit[r] < 0 ? -1 : q->limit[r] / unit, 1);
	snprintf(out, outsz, "%s/%s", a, b);
}

/* "fair share/allocated/requested" of one resource, in unit. */
static void figures(char *out, size_t outsz, const sc_queue_report_t *q, int r, double unit)
{
	char a[32], b[32], c[32];
	sc_fmt_num(a, sizeof(a), q->fair_share[r] / unit, 0);
	sc_fmt_num(b, sizeof(b), q->allocated[r] / unit, 0);
	sc_fmt_num(c, sizeof(c), q->requested[r] / unit, 0);
	snprintf(out, outsz, "%s/%s/%s", a, b, c);
}

/* The queue tree depth-first, children indented under their parent,
 * whatever order the queues were written in; GPU figures in full, CPU and
 * memory as compact pairs and triples. */
static void print_queues(const sc_decisions_t *d)
{
	static const char *const h[] = {"QUEUE",           "GPU QUOTA",      "LIMIT",
	                                "FAIR SHARE",      "ALLOCATED",      "REQUESTED",
	                                "CPU QUOTA/LIMIT", "FAIR/ALLOC/REQ", "MEMORY QUOTA/LIMIT",
	                                "FAIR/ALLOC/REQ"};
	const double gib = 1024.0 * 1024 * 1024;
	printf("QUEUES (%zu)  GPUs in devices, CPU in cores, memory in GiB; - = no limit\n",
	       d->nqueues);
	if (!d->nqueues)
		return;
	sc_tree_t tr;
	sc_tree_init(&tr, d->nqueues);
	for (size_t i = 0; i < d->nqueues; i++) {
		tr.names[i] = d->queues[i].name;
		tr.parents[i] = d->queues[i].parent;
	}
	sc_tree_sort(&tr);
	sc_table_t *t = sc_table_new(10, h);
	sc_table_margin(t, 2);
	for (size_t k = 0; k < d->nqueues; k++) {
		const sc_queue_report_t *q = &d->queues[tr.order[k]];
		char gq[32], gl[32], fs[32], al[32], rq[32], cql[64], cf[96], mql[64], mf[96];
		sc_fmt_num(gq, sizeof(gq), q->quota[SC_RES_GPU], 1);
		sc_fmt_num(gl, sizeof(gl), q->limit[SC_RES_GPU], 1);
		sc_fmt_num(fs, sizeof(fs), q->fair_share[SC_RES_GPU], 0);
		sc_fmt_num(al, sizeof(al), q->allocated[SC_RES_GPU], 0);
		sc_fmt_num(rq, sizeof(rq), q->requested[SC_RES_GPU], 0);
		quota_limit(cql, sizeof(cql), q, SC_RES_CPU, 1000.0);
		figures(cf, sizeof(cf), q, SC_RES_CPU, 1000.0);
		quota_limit(mql, sizeof(mql), q, SC_RES_MEM, gib);
		figures(mf, sizeof(mf), q, SC_RES_MEM, gib);
		sc_table_addf(t, tr.depth[k], "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", q->name, gq,
		              gl, fs, al, rq, cql, cf, mql, mf);
	}
	sc_table_print(t, stdout, 0);
	sc_table_free(t);
	sc_tree_free(&tr);
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
