/* Why a pod does not fit, in words a user understands.
 *
 * Every node is charged to the first filter that rejects it, in the order
 * the placement applies them, and the counts are listed largest first:
 * "gang needs 4 pods, only 2 fit: 1,180 nodes lack free GPUs, 20 nodes have
 * the wrong GPU model". The result is cached per job shape by the caller,
 * so explaining stays cheap even with many identical pending jobs. */
#include <stdio.h>
#include <string.h>

#include "core/cluster_int.h"
#include "core/reservation.h"
#include "core/sched.h"

enum {
	WHY_NOT_READY,
	WHY_CORDONED,
	WHY_SELECTOR,
	WHY_NO_GPU,
	WHY_MODEL,
	WHY_NO_MEMORY_SIZE, /* a gpuMemory request on a node that gives no device memory */
	WHY_CONSTRAINT,     /* topology domain or spread cap */
	WHY_RESERVED,       /* held for a job that has waited too long */
	WHY_MIG_MODE,       /* its GPUs serve MIG instances only */
	WHY_GPU,
	WHY_SHARE,
	WHY_NO_MIG,
	WHY_MIG,
	WHY_CPU,
	WHY_MEM,
	WHY_COUNT
};

static const char *sc__fmt_count(sc_arena_t *a, long n)
{
	char digits[32], out[48];
	int len = snprintf(digits, sizeof(digits), "%ld", n < 0 ? -n : n);
	int o = 0;
	if (n < 0)
		out[o++] = '-';
	for (int i = 0; i < len; i++) {
		if (i > 0 && (len - i) % 3 == 0)
			out[o++] = ',';
		out[o++] = digits[i];
	}
	out[o] = 0;
	return sc_arena_strdup(a, out);
}

static bool labels_match(const sc_node_spec_t *s, const sc_filter_t *f)
{
	sc_filter_t only = {.selector = f->selector, .nselector = f->nselector};
	sc_node_view_t fake = {.spec = s};
	return sc__filter_pass(&only, &fake);
}

static bool model_ok(const sc_filter_t *f, int model)
{
	if (!f->models)
		return true;
	for (size_t k = 0; k < f->nmodels; k++)
		if (f->models[k] == model)
			return true;
	return false;
}

static int classify(const sc_sched_t *s, int j, const sc_node_view_t *n, const sc_request_t *r,
                    const sc_filter_t *f)
{
	bool gpu = r->gpus > 0 || r->gpu_milli > 0 || r->gpu_memory > 0 || r->mig;
	if (n->spec->not_ready)
		return WHY_NOT_READY;
	if (n->spec->unschedulable)
		return WHY_CORDONED;
	if (f->nselector && !labels_match(n->spec, f))
		return WHY_SELECTOR;
	if (gpu && n->gpu_count == 0)
		return WHY_NO_GPU;
	if (gpu && !model_ok(f, n->model))
		return WHY_MODEL;
	if (!r->gpus && r->gpu_memory > 0 && n->spec->gpu_memory <= 0)
		return WHY_NO_MEMORY_SIZE;
	if (s->reserved_by && !sc__reservation_allows(s, j, n->index))
		return WHY_RESERVED;
	if (f->accept && !f->accept(f->accept_ctx, n))
		return WHY_CONSTRAINT;
	/* A MIG node gives out instances only (cluster.c): free devices there
	 * are not missing GPUs for a whole or shared request. */
	if (!r->mig && gpu && n->spec->mig_mode != SC_MIG_NONE)
		return WHY_MIG_MODE;
	if (r->mig && n->spec->mig_mode == SC_MIG_NONE)
		return WHY_NO_MIG;
	if (r->mig && !sc_node_fits(n, r) && n->cpu_free >= r->cpu_milli &&
	    n->mem_free >= r->memory)
		return WHY_MIG;
	if (r->gpus > 0 && n->whole_free < r->gpus)
		return WHY_GPU;
	if (!r->gpus && (r->gpu_milli > 0 || r->gpu_memory > 0) && !sc_node_fits(n, r) &&
	    n->cpu_free >= r->cpu_milli && n->mem_free >= r->memory)
		return WHY_SHARE;
	if (n->cpu_free < r->cpu_milli)
		return WHY_CPU;
	if (n->mem_free < r->memory)
		return WHY_MEM;
	return -1; /* fits: only other pods of this job's shape are missing */
}

static const char *what(sc_arena_t *a, int why, long n, const sc_request_t *r)
{
	const char *nodes = n == 1 ? "node" : "nodes";
	const char *cnt = sc__fmt_count(a, n);
	switch (why) {
	case WHY_NOT_READY:
		return sc_arena_printf(a, "%s %s %s not ready", cnt, nodes, n == 1 ? "is" : "are");
	case WHY_CORDONED:
		return sc_arena_printf(a, "%s %s %s cordoned", cnt, nodes, n == 1 ? "is" : "are");
	case WHY_SELECTOR:
		return sc_arena_printf(a, "%s %s %s not match the node selector", cnt, nodes,
		                       n == 1 ? "does" : "do");
	case WHY_NO_GPU:
		return sc_arena_printf(a, "%s %s %s no GPUs", cnt, nodes, n == 1 ? "has" : "have");
	case WHY_MODEL:
		return sc_arena_printf(a, "%s %s %s the wrong GPU model", cnt, nodes,
		                       n == 1 ? "has" : "have");
	case WHY_NO_MEMORY_SIZE:
		return sc_arena_printf(a,
		                       "%s %s give%s no GPU memory size (spec.gpus.memory) for a "
		                       "gpuMemory request",
		                       cnt, nodes, n == 1 ? "s" : "");
	case WHY_RESERVED:
		return sc_arena_printf(a, "%s %s %s reserved for a job that has waited longer", cnt,
		                       nodes, n == 1 ? "is" : "are");
	case WHY_CONSTRAINT:
		return sc_arena_printf(a, "%s %s %s excluded by the job's topology or spread", cnt,
		                       nodes, n == 1 ? "is" : "are");
	case WHY_MIG_MODE:
		return sc_arena_printf(a, "%s %s %s GPUs in MIG mode (MIG requests only)", cnt,
		                       nodes, n == 1 ? "has its" : "have their");
	case WHY_GPU:
		return sc_arena_printf(a, "%s %s lack%s %d free GPU%s", cnt, nodes,
		                       n == 1 ? "s" : "", r->gpus, r->gpus == 1 ? "" : "s");
	case WHY_SHARE:
		return sc_arena_printf(a, "%s %s %s no device with enough free share", cnt, nodes,
		                       n == 1 ? "has" : "have");
	case WHY_NO_MIG:
		return sc_arena_printf(a, "%s %s %s no MIG-enabled GPUs", cnt, nodes,
		                       n == 1 ? "has" : "have");
	case WHY_MIG:
		return sc_arena_printf(a, "%s %s %s no free MIG slot for %s", cnt, nodes,
		                       n == 1 ? "has" : "have", r->mig);
	case WHY_CPU:
		return sc_arena_printf(a, "%s %s lack%s free CPU", cnt, nodes, n == 1 ? "s" : "");
	default:
		return sc_arena_printf(a, "%s %s lack%s free memory", cnt, nodes,
		                       n == 1 ? "s" : "");
	}
}

/* The request in short: "8 GPUs", "0.5 GPU", "20Gi of GPU memory". */
static const char *describe_req(sc_arena_t *a, const sc_request_t *r)
{
	if (r->gpus > 0)
		return sc_arena_printf(a, "%d GPU%s", r->gpus, r->gpus == 1 ? "" : "s");
	if (r->gpu_milli > 0)
		return sc_arena_printf(a, "%g GPU", r->gpu_milli / 1000.0);
	if (r->gpu_memory > 0)
		return sc_arena_printf(a, "%.0fMi of GPU memory",
		                       (double)r->gpu_memory / (1024.0 * 1024.0));
	if (r->mig)
		return sc_arena_printf(a, "MIG %s", r->mig);
	return sc_arena_printf(a, "%g CPU", r->cpu_milli / 1000.0);
}

const char *sc__explain_task(sc_sched_t *s, int j, int task, int placed, int needed,
                             const sc_filter_t *f)
{
	sjob_t *jb = &s->jobs[j];
	const sc_task_spec_t *t = &jb->spec->tasks[task];
	long counts[WHY_COUNT] = {0};
	size_t n = sc_cluster_nnodes(s->cluster);
	for (size_t i = 0; i < n; i++) {
		int w = classify(s, j, sc_cluster_node(s->cluster, i), &t->req, f);
		if (w >= 0)
			counts[w]++;
	}
	const char *head;
	if (needed > 1)
		head = sc_arena_printf(s->arena, "gang needs %d pods, only %d fit", needed, placed);
	else
		head = sc_arena_printf(s->arena, "no node fits a pod of task %s (%s)",
		                       t->name ? t->name : "", describe_req(s->arena, &t->req));
	if (n == 0)
		return sc_arena_printf(s->arena, "%s: the cluster has no nodes", head);
	const char *out = head;
	char sep = ':';
	for (;;) {
		int best = -1;
		for (int w = 0; w < WHY_COUNT; w++)
			if (counts[w] > 0 && (best < 0 || counts[w] > counts[best]))
				best = w;
		if (best < 0)
			break;
		out = sc_arena_printf(s->arena, "%s%c %s", out, sep,
		                      what(s->arena, best, counts[best], &t->req));
		sep = ',';
		counts[best] = 0;
	}
	if (sep == ':')
		out = sc_arena_printf(s->arena, "%s: task %s needs more nodes than fit together",
		                      head, t->name ? t->name : "");
	return out;
}
