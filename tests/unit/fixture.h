/* Snapshot builder shared by the core's unit tests (header-only: each test
 * binary is one translation unit). */
#ifndef SC_TEST_FIXTURE_H
#define SC_TEST_FIXTURE_H

#include <stdio.h>
#include <string.h>

#include "starcloud/core.h"

#define FX_NODES 64
#define FX_JOBS 512
#define FX_PODS 1024

typedef struct fixture {
	sc_node_spec_t nodes[FX_NODES];
	char names[FX_NODES][16];
	sc_queue_spec_t queues[16];
	sc_job_spec_t jobs[FX_JOBS];
	sc_task_spec_t tasks[FX_JOBS];
	char jnames[FX_JOBS][16];
	sc_pod_status_t pods[FX_PODS];
	char pnames[FX_PODS][32];
	int pgpus[FX_PODS][8];
	size_t npods;
	sc_snapshot_t snap;
} fixture_t;

static fixture_t F;

static inline void fx_reset(void)
{
	memset(&F, 0, sizeof(F));
	sc_config_default(&F.snap.config);
	F.snap.nodes = F.nodes;
	F.snap.queues = F.queues;
	F.snap.jobs = F.jobs;
	F.snap.now = 1000000;
}

static inline void fx_nodes(int n, int gpus)
{
	for (int i = 0; i < n; i++) {
		size_t k = F.snap.nnodes++;
		snprintf(F.names[k], sizeof(F.names[k]), "n%02zu", k);
		F.nodes[k] = (sc_node_spec_t){.name = F.names[k],
		                              .cpu_milli = 64000,
		                              .memory = (int64_t)512 << 30,
		                              .gpu_count = gpus,
		                              .gpu_model = "A100",
		                              .gpu_memory = (int64_t)80 << 30};
	}
}

static inline sc_queue_spec_t *fx_queue(const char *name, const char *parent, double quota,
                                        double weight, double limit)
{
	sc_queue_spec_t *q = &F.queues[F.snap.nqueues++];
	q->name = name;
	q->parent = parent;
	q->priority = 100;
	q->res[SC_RES_GPU] = (sc_queue_res_t){quota, limit, weight};
	q->res[SC_RES_CPU] = (sc_queue_res_t){-1, -1, 1};
	q->res[SC_RES_MEM] = (sc_queue_res_t){-1, -1, 1};
	return q;
}

static inline sc_job_spec_t *fx_job(const char *queue, int replicas, int gpus, int min_member)
{
	size_t k = F.snap.njobs++;
	snprintf(F.jnames[k], sizeof(F.jnames[k]), "j%03zu", k);
	F.tasks[k] = (sc_task_spec_t){.name = "main",
	                              .replicas = replicas,
	                              .req = {.cpu_milli = 1000, .memory = 1 << 30, .gpus = gpus}};
	F.jobs[k] = (sc_job_spec_t){.name = F.jnames[k],
	                            .queue = queue,
	                            .preemptible = -1,
	                            .min_member = min_member,
	                            .tasks = &F.tasks[k],
	                            .ntasks = 1,
	                            .created = F.snap.now - 600 + (int64_t)k,
	                            .staleness_grace = -1};
	return &F.jobs[k];
}

/* Marks replica r of job j running on node n, devices from first. */
static inline void fx_running(sc_job_spec_t *j, int r, int node, int first)
{
	size_t k = F.npods++;
	char jn[16];
	memcpy(jn, j->name, sizeof(jn));
	jn[15] = 0;
	snprintf(F.pnames[k], sizeof(F.pnames[k]), "%s-main-%d", jn, r);
	int g = j->tasks[0].req.gpus;
	for (int d = 0; d < g; d++)
		F.pgpus[k][d] = first + d;
	F.pods[k] = (sc_pod_status_t){.name = F.pnames[k],
	                              .phase = SC_POD_RUNNING,
	                              .node = F.names[node],
	                              .gpus = F.pgpus[k],
	                              .ngpus = (size_t)g,
	                              .started_at = F.snap.now - 3600};
	if (!j->pods)
		j->pods = &F.pods[k];
	j->npods++;
}

static inline const sc_queue_report_t *fx_qr(const sc_decisions_t *d, const char *name)
{
	for (size_t i = 0; i < d->nqueues; i++)
		if (strcmp(d->queues[i].name, name) == 0)
			return &d->queues[i];
	return NULL;
}

static inline size_t fx_evicted_of(const sc_decisions_t *d, size_t job)
{
	size_t n = 0;
	for (size_t i = 0; i < d->nevictions; i++)
		n += d->evictions[i].job == job;
	return n;
}

static inline size_t fx_bound_of(const sc_decisions_t *d, size_t job)
{
	size_t n = 0;
	for (size_t i = 0; i < d->nbindings; i++)
		n += d->bindings[i].job == job;
	return n;
}

#endif
