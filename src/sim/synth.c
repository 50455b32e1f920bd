/* Synthetic worlds for benchmarks. See synth.h. All names live in one
 * block of fixed-width slots so a world is a handful of allocations. */
#include "sim/synth.h"

#include <stdio.h>
#include <stdlib.h>

#define NAME 32

struct sc_synth {
	sc_node_spec_t *nodes;
	sc_label_t *labels;
	sc_queue_spec_t *queues;
	sc_job_spec_t *jobs;
	sc_task_spec_t *tasks;
	sc_pod_status_t *pods;
	int *gpus;
	char *names;
	size_t nnames;
	char (*racks)[24];
	uint64_t rng;
	sc_snapshot_t snap;
};

/* splitmix64: deterministic for a seed, good enough for workloads. */
static uint64_t rnd(sc_synth_t *w)
{
	uint64_t z = (w->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static char *name(sc_synth_t *w, const char *fmt, size_t i)
{
	char *n = w->names + w->nnames++ * NAME;
	snprintf(n, NAME, fmt, i);
	return n;
}

void sc_synth_free(sc_synth_t *w)
{
	if (!w)
		return;
	free(w->nodes);
	free(w->labels);
	free(w->queues);
	free(w->jobs);
	free(w->tasks);
	free(w->pods);
	free(w->gpus);
	free(w->names);
	free(w->racks);
	free(w);
}

static sc_synth_t *alloc_world(size_t nnodes, size_t nq, size_t njobs, size_t npods)
{
	sc_synth_t *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->nodes = calloc(nnodes + 1, sizeof(*w->nodes));
	w->labels = calloc(2 * nnodes + 1, sizeof(*w->labels));
	w->queues = calloc(nq + 1, sizeof(*w->queues));
	w->jobs = calloc(njobs + 1, sizeof(*w->jobs));
	w->tasks = calloc(njobs + 1, sizeof(*w->tasks));
	w->pods = calloc(npods + 1, sizeof(*w->pods));
	w->gpus = calloc(4 * npods + 1, sizeof(int));
	w->names = calloc(nnodes + nq + njobs + npods + 1, NAME);
	w->racks = calloc(nnodes / 32 + 2, sizeof(*w->racks));
	if (!w->nodes || !w->labels || !w->queues || !w->jobs || !w->tasks || !w->pods ||
	    !w->gpus || !w->names || !w->racks) {
		sc_synth_free(w);
		return NULL;
	}
	w->snap.nodes = w->nodes;
	w->snap.nnodes = nnodes;
	w->snap.queues = w->queues;
	w->snap.nqueues = nq;
	w->snap.jobs = w->jobs;
	w->snap.njobs = njobs;
	sc_config_default(&w->snap.config);
	return w;
}

static void add_nodes(sc_synth_t *w, size_t n, bool mixed)
{
	static const char *models[2] = {"A100-80GB", "H100-80GB"};
	for (size_t i = 0; i < n; i++) {
		snprintf(w->racks[i / 32], sizeof(w->racks[0]), "r%04zu", i / 32);
		w->labels[2 * i] = (sc_label_t){"rack", w->racks[i / 32]};
		w->labels[2 * i + 1] = (sc_label_t){"zone", (i % 2) ? "z1" : "z2"};
		w->nodes[i] = (sc_node_spec_t){.name = name(w, "node-%05zu", i),
		                               .labels = &w->labels[2 * i],
		                               .nlabels = 2,
		                               .cpu_milli = 128000,
		                               .memory = (int64_t)1 << 40,
		                               .gpu_count = 8,
		                               .gpu_model = mixed ? models[i % 4 == 0] : models[1],
		                               .gpu_memory = (int64_t)80 << 30};
	}
}

static void set_queue(sc_queue_spec_t *q, const char *n, const char *parent, double quota,
                      double weight)
{
	*q = (sc_queue_spec_t){.name = n, .parent = parent, .priority = 100};
	q->res[SC_RES_GPU] = (sc_queue_res_t){quota, -1, weight};
	q->res[SC_RES_CPU] = (sc_queue_res_t){-1, -1, 1};
	q->res[SC_RES_MEM] = (sc_queue_res_t){-1, -1, 1};
}

sc_synth_t *sc_synth_pending(size_t nnodes, size_t njobs, uint64_t seed)
{
	const size_t nq = 10 + 100 + 1000;
	sc_synth_t *w = alloc_world(nnodes, nq, njobs, 0);
	if (!w)
		return NULL;
	w->rng = seed;
	add_nodes(w, nnodes, true);
	double gpus = (double)nnodes * 8;
	for (size_t q = 0; q < nq; q++) {
		/* Quotas: 80 % of the cluster, split evenly at each level. */
		if (q < 10)
			set_queue(&w->queues[q], name(w, "dept-%zu", q), NULL, gpus * 0.08,
			          (double)(1 + rnd(w) % 3));
		else if (q < 110)
			set_queue(&w->queues[q], name(w, "group-%zu", q - 10),
			          w->queues[(q - 10) / 10].name, gpus * 0.008,
			          (double)(1 + rnd(w) % 3));
		else
			set_queue(&w->queues[q], name(w, "team-%zu", q - 110),
			          w->queues[10 + (q - 110) / 10].name, gpus * 0.0008,
			          (double)(1 + rnd(w) % 3));
	}
	for (size_t j = 0; j < njobs; j++) {
		sc_task_spec_t *t = &w->tasks[j];
		*t = (sc_task_spec_t){.name = "w",
		                      .replicas = 1,
		                      .req = {.cpu_milli = 4000, .memory = (int64_t)16 << 30}};
		uint64_t kind = rnd(w) % 10;
		if (kind < 5) {
			t->req.gpus = 1 << (rnd(w) % 4);
		} else if (kind < 8) {
			t->replicas = 2 + (int)(rnd(w) % 63);
			t->req.gpus = 8 >> (rnd(w) % 2);
		} else {
			t->req.gpu_milli = 100 * (1 + (int)(rnd(w) % 9));
		}
		w->jobs[j] = (sc_job_spec_t){.name = name(w, "job-%06zu", j),
		                             .queue = w->queues[110 + rnd(w) % 1000].name,
		                             .preemptible = -1,
		                             .tasks = t,
		                             .ntasks = 1,
		                             .created = (int64_t)j,
		                             .staleness_grace = -1};
	}
	w->snap.config.nactions = 1; /* allocate only */
	return w;
}

sc_synth_t *sc_synth_preempt(size_t nnodes, size_t npending, size_t nqueues)
{
	size_t nrun = 2 * nnodes, njobs = nrun + npending;
	if (nqueues == 0)
		return NULL;
	sc_synth_t *w = alloc_world(nnodes, nqueues, njobs, nrun);
	if (!w)
		return NULL;
	int64_t now = 1800000000;
	w->snap.now = now;
	add_nodes(w, nnodes, false);
	for (size_t q = 0; q < nqueues; q++)
		set_queue(&w->queues[q], name(w, "team-%zu", q), NULL,
		          (double)(nnodes * 8 / nqueues), 1);
	for (size_t j = 0; j < njobs; j++) {
		bool running = j < nrun;
		w->tasks[j] = (sc_task_spec_t){
		    .name = "w",
		    .replicas = running ? 1 : 1 + (int)(j % 2),
		    .req = {.cpu_milli = 8000, .memory = (int64_t)64 << 30, .gpus = 4}};
		w->jobs[j] =
		    (sc_job_spec_t){.name = name(w, "job-%06zu", j),
		                    .queue = w->queues[(running ? j / 2 : j) % nqueues].name,
		                    .priority_class = running ? "train" : "inference",
		                    .preemptible = running ? 1 : 0,
		                    .tasks = &w->tasks[j],
		                    .ntasks = 1,
		                    .created = now - 60,
		                    .staleness_grace = -1};
		if (!running)
			continue;
		int *g = &w->gpus[4 * j];
		for (int k = 0; k < 4; k++)
			g[k] = (int)(j % 2) * 4 + k;
		w->pods[j] = (sc_pod_status_t){.name = name(w, "job-%06zu-w-0", j),
		                               .phase = SC_POD_RUNNING,
		                               .node = w->nodes[j / 2].name,
		                               .gpus = g,
		                               .ngpus = 4,
		                               .started_at = now - 3600};
		w->jobs[j].pods = &w->pods[j];
		w->jobs[j].npods = 1;
	}
	return w;
}

const sc_snapshot_t *sc_synth_snapshot(const sc_synth_t *w)
{
	return &w->snap;
}
