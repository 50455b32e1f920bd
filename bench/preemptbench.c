/* Preemption benchmark: a full cluster of N nodes x 8 GPUs running
 * low-priority preemptible jobs (two 4-GPU pods per node), and P pending
 * high-priority gangs in the same queues that can only start by evicting.
 * Runs one full cycle (all five actions) and reports cycle time, evictions
 * and evictions per second.
 *
 *   preemptbench [--nodes N] [--pending P] [--queues Q] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "starcloud/core.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	size_t nnodes = 10000, npend = 10000, nq = 100;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--nodes"))
			nnodes = strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--pending"))
			npend = strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--queues"))
			nq = strtoul(argv[i + 1], NULL, 10);
	}
	size_t nrun = nnodes * 2, njobs = nrun + npend;
	sc_node_spec_t *nodes = calloc(nnodes, sizeof(*nodes));
	sc_queue_spec_t *queues = calloc(nq, sizeof(*queues));
	sc_job_spec_t *jobs = calloc(njobs, sizeof(*jobs));
	sc_task_spec_t *tasks = calloc(njobs, sizeof(*tasks));
	sc_pod_status_t *pods = calloc(nrun, sizeof(*pods));
	int(*gpus)[4] = calloc(nrun, sizeof(*gpus));
	char(*names)[32] = calloc(nnodes + nq + njobs + nrun, sizeof(*names));
	if (!nodes || !queues || !jobs || !tasks || !pods || !gpus || !names)
		return 1;
	size_t nm = 0;
	for (size_t i = 0; i < nnodes; i++) {
		snprintf(names[nm], 32, "node-%05zu", i);
		nodes[i] = (sc_node_spec_t){.name = names[nm++], .cpu_milli = 128000,
					    .memory = (int64_t)1 << 40, .gpu_count = 8,
					    .gpu_model = "H100-80GB", .gpu_memory = (int64_t)80 << 30};
	}
	for (size_t q = 0; q < nq; q++) {
		snprintf(names[nm], 32, "team-%zu", q);
		queues[q] = (sc_queue_spec_t){.name = names[nm++], .priority = 100};
		queues[q].res[SC_RES_GPU] = (sc_queue_res_t){(double)(nnodes * 8 / nq), -1, 1};
		queues[q].res[SC_RES_CPU] = (sc_queue_res_t){-1, -1, 1};
		queues[q].res[SC_RES_MEM] = (sc_queue_res_t){-1, -1, 1};
	}
	int64_t now = 1800000000;
	for (size_t j = 0; j < njobs; j++) {
		snprintf(names[nm], 32, "job-%06zu", j);
		bool running = j < nrun;
		tasks[j] = (sc_task_spec_t){.name = "w", .replicas = running ? 1 : 1 + (int)(j % 2),
					    .req = {.cpu_milli = 8000, .memory = (int64_t)64 << 30,
						    .gpus = 4}};
		jobs[j] = (sc_job_spec_t){.name = names[nm++],
					  .queue = queues[(running ? j / 2 : j) % nq].name,
					  .priority_class = running ? "train" : "inference",
					  .preemptible = running ? 1 : 0, .tasks = &tasks[j],
					  .ntasks = 1, .created = now - 60, .staleness_grace = -1};
		if (running) {
			snprintf(names[nm], 32, "job-%06zu-w-0", j);
			for (int g = 0; g < 4; g++)
				gpus[j][g] = (int)(j % 2) * 4 + g;
			pods[j] = (sc_pod_status_t){.name = names[nm++], .phase = SC_POD_RUNNING,
						    .node = nodes[j / 2].name, .gpus = gpus[j],
						    .ngpus = 4, .started_at = now - 3600};
			jobs[j].pods = &pods[j];
			jobs[j].npods = 1;
		}
	}
	sc_snapshot_t snap = {.nodes = nodes, .nnodes = nnodes, .queues = queues, .nqueues = nq,
			      .jobs = jobs, .njobs = njobs, .now = now};
	sc_config_default(&snap.config);
	sc_decisions_t *d;
	char msg[256];
	double t0 = now_s();
	if (sc_schedule(&snap, &d, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "preemptbench: %s\n", msg);
		return 1;
	}
	double dt = now_s() - t0;
	size_t pre = 0;
	for (size_t i = 0; i < d->nevictions; i++)
		pre += d->evictions[i].action == SC_ACT_PREEMPT;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("nodes=%zu running=%zu pending gangs=%zu queues=%zu | cycle %.3f s | evictions %zu "
	       "(preempt %zu, %.0f evictions/s) | bound %zu | still pending %zu | peak RSS %ld MiB\n",
	       nnodes, nrun, npend, nq, dt, d->nevictions, pre, (double)d->nevictions / dt,
	       d->nbindings, d->npending, ru.ru_maxrss / 1024);
	sc_decisions_free(d);
	return 0;
}
