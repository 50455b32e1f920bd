/* `starcloud bench core|preempt`: the scheduler benchmarks of `make bench`
 * (docs/BENCHMARKS.md), on the synthetic worlds of src/sim/synth.c.
 * `starcloud bench soak [ARGS]`: the headline run of `make soak`
 * (docs/SOAK.md), bench/soak/soak.py run with this binary.
 *
 * core: for each size, a full allocate cycle over 100,000 pending jobs,
 * best of C cycles with one sc_scheduler_t kept across cycles (as the
 * server keeps one). preempt: one full cycle of all five actions on a
 * full cluster where every pending gang must evict. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/cmdline.h"
#include "cli/cli.h"
#include "sim/synth.h"

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

typedef struct bench_opts {
	uint64_t nodes, jobs, pending, queues;
	int cycles;
	uint64_t seed;
} bench_opts_t;

static const sc_flag_t bench_flags[] = {
    {.name = "--nodes",
     SC_FLAG_AT(U64, bench_opts_t, nodes),
     .min = 1,
     .max = 1e7,
     .help = "nodes of 8 GPUs (core default: 1,000, 10,000 and 50,000;\npreempt: 10,000)"},
    {.name = "--jobs",
     SC_FLAG_AT(U64, bench_opts_t, jobs),
     .min = 1,
     .max = 1e7,
     .def = "100000",
     .help = "core: pending jobs"},
    {.name = "--cycles",
     SC_FLAG_AT(INT, bench_opts_t, cycles),
     .min = 1,
     .max = 1000,
     .def = "5",
     .help = "core: allocate cycles"},
    {.name = "--seed",
     SC_FLAG_AT(U64, bench_opts_t, seed),
     .min = 1,
     .max = 1e7,
     .def = "42",
     .help = "core: the workload's seed"},
    {.name = "--pending",
     SC_FLAG_AT(U64, bench_opts_t, pending),
     .min = 1,
     .max = 1e7,
     .def = "10000",
     .help = "preempt: high-priority gangs that must evict"},
    {.name = "--queues",
     SC_FLAG_AT(U64, bench_opts_t, queues),
     .min = 1,
     .max = 1e7,
     .def = "100",
     .help = "preempt: queues"},
};

static const sc_command_t bench_cmd = {
    .name = "bench",
    .args = "core|preempt|server|soak [options]",
    .about = "core: allocate cycles on N nodes x 8 GPUs, 1,110 queues, J pending jobs.\n"
             "preempt: one cycle on a full cluster where P high-priority gangs must evict.\n"
             "server: a real server at scale (`starcloud bench server --help`).\n"
             "soak: the headline run of `make soak` (`starcloud bench soak --help`).",
    .flags = bench_flags,
    .nflags = sizeof(bench_flags) / sizeof(bench_flags[0]),
    .max_args = 1,
};

static int run_core(size_t nodes, const bench_opts_t *o)
{
	sc_synth_t *w = sc_synth_pending(nodes, o->jobs, o->seed);
	sc_scheduler_t *sch = sc_scheduler_new();
	int rc = SC_EXIT_FAIL;
	double best = 1e9;
	size_t bound = 0, pending = 0;
	if (!w || !sch)
		goto out;
	for (int c = 0; c < o->cycles; c++) {
		sc_decisions_t *d;
		char msg[256];
		double t0 = now_s();
		if (sc_scheduler_run(sch, sc_synth_snapshot(w), &d, msg, sizeof(msg)) < 0) {
			fprintf(stderr, "starcloud bench: %s\n", msg);
			goto out;
		}
		double dt = now_s() - t0;
		best = dt < best ? dt : best;
		bound = d->nbindings;
		pending = d->npending;
		sc_decisions_free(d);
	}
	printf("core: nodes=%zu gpus=%zu queues=1110 jobs=%zu | cycle %.3f s | bound %zu pods "
	       "(%.0f placements/s) | pending jobs %zu | peak RSS %ld MiB\n",
	       nodes, nodes * 8, o->jobs, best, bound, (double)bound / best, pending,
	       peak_rss_mib());
	rc = SC_EXIT_OK;
out:
	sc_scheduler_free(sch);
	sc_synth_free(w);
	return rc;
}

static int run_preempt(const bench_opts_t *o)
{
	sc_synth_t *w = sc_synth_preempt(o->nodes, o->pending, o->queues);
	if (!w)
		return SC_EXIT_FAIL;
	sc_decisions_t *d;
	char msg[256];
	double t0 = now_s();
	if (sc_schedule(sc_synth_snapshot(w), &d, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "starcloud bench: %s\n", msg);
		sc_synth_free(w);
		return SC_EXIT_FAIL;
	}
	double dt = now_s() - t0;
	size_t pre = 0;
	for (size_t i = 0; i < d->nevictions; i++)
		pre += d->evictions[i].action == SC_ACT_PREEMPT;
	printf("preempt: nodes=%zu running=%zu pending gangs=%zu queues=%zu | cycle %.3f s | "
	       "evictions %zu (preempt %zu, %.0f evictions/s) | bound %zu | pending %zu | "
	       "peak RSS %ld MiB\n",
	       o->nodes, 2 * o->nodes, o->pending, o->queues, dt, d->nevictions, pre,
	       (double)d->nevictions / dt, d->nbindings, d->npending, peak_rss_mib());
	sc_decisions_free(d);
	sc_synth_free(w);
	return SC_EXIT_OK;
}

/* `bench soak ARGS`: execs python3 on bench/soak/soak.py, found through
 * $STARCLOUD_SOAK or beside this binary in a source checkout
 * (build/starcloud -> bench/soak/soak.py), with --bin set to this binary.
 * Returns only on failure. */
static int run_soak(int argc, char **argv)
{
	char exe[4096], script[4200];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		fprintf(stderr, "starcloud bench soak: cannot read /proc/self/exe\n");
		return SC_EXIT_FAIL;
	}
	exe[n] = '\0';
	const char *env = getenv("STARCLOUD_SOAK");
	if (env && *env) {
		snprintf(script, sizeof(script), "%s", env);
	} else {
		char *slash = strrchr(exe, '/');
		snprintf(script, sizeof(script), "%.*s/../bench/soak/soak.py",
		         slash ? (int)(slash - exe) : 1, slash ? exe : ".");
	}
	if (access(script, R_OK) != 0) {
		fprintf(
		    stderr,
		    "starcloud bench soak: %s: not found (the soak runs from a source checkout: "
		    "`make soak`, or set STARCLOUD_SOAK to bench/soak/soak.py)\n",
		    script);
		return SC_EXIT_FAIL;
	}
	char **args = sc_xcalloc((size_t)argc + 4, sizeof(*args));
	int k = 0;
	args[k++] = "python3";
	args[k++] = script;
	args[k++] = "--bin";
	args[k++] = exe;
	for (int i = 1; i < argc; i++)
		args[k++] = argv[i];
	args[k] = NULL;
	execv("/usr/bin/python3", args);
	fprintf(stderr, "starcloud bench soak: cannot run /usr/bin/python3: %s\n", strerror(errno));
	free(args);
	return SC_EXIT_FAIL;
}

int sc_cli_bench(int argc, char **argv)
{
	bench_opts_t o = {0};
	int nargs = 0;
	if (argc > 1 && strcmp(argv[1], "server") == 0)
		return sc__bench_server(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "soak") == 0)
		return run_soak(argc - 1, argv + 1);
	int prc = sc_flags_parse(&bench_cmd, &o, argc, argv, &nargs);
	if (prc != 0)
		return prc > 0 ? SC_EXIT_OK : SC_EXIT_USAGE;
	if (nargs != 1 || (strcmp(argv[1], "preempt") != 0 && strcmp(argv[1], "core") != 0)) {
		sc_flags_usage(&bench_cmd, stderr);
		return SC_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "preempt")) {
		if (!o.nodes)
			o.nodes = 10000;
		return run_preempt(&o);
	}
	if (o.nodes)
		return run_core(o.nodes, &o);
	static const size_t sizes[] = {1000, 10000, 50000};
	for (size_t i = 0; i < 3; i++)
		if (run_core(sizes[i], &o) != SC_EXIT_OK)
			return SC_EXIT_FAIL;
	return SC_EXIT_OK;
}
