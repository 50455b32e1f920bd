/* Core benchmark: a synthetic cluster of N nodes x 8 GPUs, 1,000 queues in a
 * three-level tree (10 departments x 10 groups x 10 teams) and J pending
 * jobs (single pods, gangs of 2-64, GPU shares), scheduled in full cycles.
 *
 *   corebench [--nodes N] [--jobs J] [--cycles C] [--seed S]
 *
 * Prints one line per size: cycle time, placements per second, peak RSS.
 * Placements per second counts pods bound per second of cycle time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "starcloud/core.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* splitmix64: deterministic for a seed, good enough for workloads. */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long peak_rss_mib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss / 1024;
}

typedef struct world {
	sc_node_spec_t *nodes;
	sc_label_t *labels;
	sc_queue_spec_t *queues;
	sc_job_spec_t *jobs;
	sc_task_spec_t *tasks;
	char *names;
	sc_snapshot_t snap;
} world_t;

static char *name_at(world_t *w, size_t i)
{
	return w->names + i * 32;
}

static void build(world_t *w, size_t nnodes, size_t njobs)
{
	size_t nq = 10 + 100 + 1000;
	w->nodes = calloc(nnodes, sizeof(*w->nodes));
	w->labels = calloc(nnodes * 2, sizeof(*w->labels));
	w->queues = calloc(nq, sizeof(*w->queues));
	w->jobs = calloc(njobs, sizeof(*w->jobs));
	w->tasks = calloc(njobs, sizeof(*w->tasks));
	w->names = calloc(nnodes + nq + njobs, 32);
	static char racks[1000][16];
	static const char *models[2] = {"A100-80GB", "H100-80GB"};
	for (size_t i = 0; i < nnodes; i++) {
		char *n = name_at(w, i);
		snprintf(n, 32, "node-%05zu", i);
		snprintf(racks[(i / 32) % 1000], 16, "r%03zu", (i / 32) % 1000);
		w->labels[2 * i] = (sc_label_t){"rack", racks[(i / 32) % 1000]};
		w->labels[2 * i + 1] = (sc_label_t){"zone", (i % 2) ? "z1" : "z2"};
		w->nodes[i] = (sc_node_spec_t){.name = n, .labels = &w->labels[2 * i], .nlabels = 2,
					       .cpu_milli = 128000, .memory = (int64_t)1 << 40,
					       .gpu_count = 8, .gpu_model = models[i % 4 == 0],
					       .gpu_memory = (int64_t)80 << 30};
	}
	size_t base = nnodes;
	for (size_t q = 0; q < nq; q++) {
		char *n = name_at(w, base + q);
		sc_queue_spec_t *qs = &w->queues[q];
		const char *parent = NULL;
		if (q < 10) {
			snprintf(n, 32, "dept-%zu", q);
		} else if (q < 110) {
			snprintf(n, 32, "group-%zu", q - 10);
			parent = name_at(w, base + (q - 10) / 10);
		} else {
			snprintf(n, 32, "team-%zu", q - 110);
			parent = name_at(w, base + 10 + (q - 110) / 10);
		}
		double share = q < 10 ? 0.1 : (q < 110 ? 0.01 : 0.001);
		double quota = (double)(nnodes * 8) * share * 0.8;
		*qs = (sc_queue_spec_t){.name = n, .parent = parent, .priority = 100};
		qs->res[SC_RES_GPU] = (sc_queue_res_t){quota, -1, (double)(1 + rnd() % 3)};
		qs->res[SC_RES_CPU] = (sc_queue_res_t){-1, -1, 1};
		qs->res[SC_RES_MEM] = (sc_queue_res_t){-1, -1, 1};
	}
	base += nq;
	for (size_t j = 0; j < njobs; j++) {
		char *n = name_at(w, base + j);
		snprintf(n, 32, "job-%06zu", j);
		sc_task_spec_t *t = &w->tasks[j];
		*t = (sc_task_spec_t){.name = "w", .replicas = 1,
				      .req = {.cpu_milli = 4000, .memory = (int64_t)16 << 30}};
		uint64_t kind = rnd() % 10;
		if (kind < 5) {
			t->req.gpus = 1 << (rnd() % 4); /* 1, 2, 4, 8 */
		} else if (kind < 8) {
			t->replicas = 2 + (int)(rnd() % 63); /* gangs of 2-64 */
			t->req.gpus = 8 >> (rnd() % 2);
		} else {
			t->req.gpu_milli = 100 * (1 + (int)(rnd() % 9));
		}
		w->jobs[j] = (sc_job_spec_t){.name = n, .queue = name_at(w, nnodes + 110 + rnd() % 1000),
					     .preemptible = -1, .tasks = t, .ntasks = 1,
					     .created = (int64_t)j, .staleness_grace = -1};
	}
	sc_config_default(&w->snap.config);
	w->snap.config.nactions = 1; /* allocate: the cycle being measured */
	w->snap.nodes = w->nodes;
	w->snap.nnodes = nnodes;
	w->snap.queues = w->queues;
	w->snap.nqueues = nq;
	w->snap.jobs = w->jobs;
	w->snap.njobs = njobs;
}

static void destroy(world_t *w)
{
	free(w->nodes);
	free(w->labels);
	free(w->queues);
	free(w->jobs);
	free(w->tasks);
	free(w->names);
}

static uint64_t seed = 42;

static int run(size_t nnodes, size_t njobs, int cycles)
{
	world_t w = {0};
	rng_state = seed; /* each size gets the same workload stream */
	build(&w, nnodes, njobs);
	double best = 1e9;
	size_t bound = 0, pods = 0, pending = 0;
	/* One scheduler for every cycle, as the server keeps one. */
	sc_scheduler_t *sch = sc_scheduler_new();
	if (!sch)
		return 1;
	for (int c = 0; c < cycles; c++) {
		sc_decisions_t *d;
		char msg[256];
		double t0 = now_s();
		int rc = sc_scheduler_run(sch, &w.snap, &d, msg, sizeof(msg));
		double dt = now_s() - t0;
		if (rc < 0) {
			fprintf(stderr, "corebench: %s\n", msg);
			sc_scheduler_free(sch);
			destroy(&w);
			return 1;
		}
		if (dt < best)
			best = dt;
		bound = d->nbindings;
		pods = d->placements_tried;
		pending = d->npending;
		sc_decisions_free(d);
	}
	printf("nodes=%zu gpus=%zu queues=1110 jobs=%zu | cycle %.3f s | bound %zu pods "
	       "(%.0f placements/s) | tried %zu | pending jobs %zu | peak RSS %ld MiB\n",
	       nnodes, nnodes * 8, njobs, best, bound, (double)bound / best, pods, pending,
	       peak_rss_mib());
	sc_scheduler_free(sch);
	destroy(&w);
	return 0;
}

int main(int argc, char **argv)
{
	size_t nodes = 0, jobs = 100000;
	int cycles = 3;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--nodes") == 0)
			nodes = strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--jobs") == 0)
			jobs = strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--cycles") == 0)
			cycles = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--seed") == 0)
			seed = strtoull(argv[i + 1], NULL, 10);
	}
	if (nodes)
		return run(nodes, jobs, cycles);
	static const size_t sizes[] = {1000, 10000, 50000};
	for (size_t i = 0; i < 3; i++)
		if (run(sizes[i], jobs, cycles))
			return 1;
	return 0;
}
