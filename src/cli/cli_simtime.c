/* `starcloud simulate --time`: argument parsing, trace loading and output
 * of the time mode. The simulation is src/sim/timesim.c. */
#include "cli/cli_simtime.h"
#include "base/alloc.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cmdline.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/table.h"
#include "cli/timesim_report.h"
#include "sim/jobs.h"
#include "sim/timesim.h"
#include "sim/trace.h"
#include "starcloud/error.h"

#define MAX_TRACES 256
#define MIB ((int64_t)1 << 20)

typedef struct topts {
	const char *traces[MAX_TRACES];
	int ntraces;
	int format;            /* -1 = from the file */
	const char *nodes;     /* OpenB node list */
	int cl_nodes, cl_gpus; /* --cluster NxG */
	int queue_by;          /* 0: a queue per qos class, 1: one queue */
	bool by_qos;
	int tick;
	int policy;  /* enum sc_tsim_policy */
	double load; /* arrivals this many times as dense */
	const char *gpu_type, *throughputs;
	int json;
	const char *csv, *plot;
	const char *nodepools; /* a manifest of NodePool objects */
	int compaction_off;    /* --compaction: 0 on, 1 off */
	double pack_threshold;
	int target_gpus, large_gpus;
	int one_node;                /* --one-node-jobs */
	uint64_t provision_delay_ms; /* from a node's request to its joining */
} topts_t;

/* Progress on a terminal: one line on stderr, rewritten at most 4 times a
 * second, with the jobs finished, the simulated time reached and an ETA
 * from the rate so far (finished jobs per wall second). */
typedef struct progress {
	struct timespec t0;
	double last;
	int shown;
} progress_t;

static double since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static void show_progress(void *ud, size_t finished, size_t jobs, int64_t sim_seconds)
{
	progress_t *p = ud;
	double el = since(&p->t0);
	if (el - p->last < 0.25 && finished < jobs)
		return;
	p->last = el;
	p->shown = 1;
	char sim[48], wall[48], eta[48] = "?";
	sc_fmt_hms(sim, sizeof(sim), (double)sim_seconds);
	sc_fmt_hms(wall, sizeof(wall), el);
	if (finished > 0 && finished < jobs)
		sc_fmt_hms(eta, sizeof(eta), el * (double)(jobs - finished) / (double)finished);
	else if (finished >= jobs)
		snprintf(eta, sizeof(eta), "0s");
	fprintf(stderr,
	        "\r\033[Ksimulate: %zu of %zu jobs done (%.1f %%), simulated %s, %s "
	        "elapsed, ETA %s",
	        finished, jobs, jobs ? 100.0 * (double)finished / (double)jobs : 100.0, sim, wall,
	        eta);
	fflush(stderr);
}

int sc_sim_bad(const char *fmt, const char *arg)
{
	fprintf(stderr, "starcloud simulate: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	return 2;
}

/* "NxG": N nodes (1..100000) of G GPUs (1..16), nothing else. */
static int cluster_flag(void *opts, const char *v, char *err, size_t errsz)
{
	topts_t *o = opts;
	const char *p = v;
	uint64_t n, g;
	if (sc_parse_digits(&p, 100000, &n) < 0 || n < 1 || *p++ != 'x' ||
	    sc_parse_digits(&p, 16, &g) < 0 || g < 1 || *p) {
		snprintf(err, errsz, "\"%s\" is not NxG (N nodes 1..100000, G GPUs 1..16)", v);
		return SC_EINVAL;
	}
	o->cl_nodes = (int)n;
	o->cl_gpus = (int)g;
	return 0;
}

static int trace_flag(void *opts, const char *v, char *err, size_t errsz)
{
	topts_t *o = opts;
	if (o->ntraces == MAX_TRACES) {
		snprintf(err, errsz, "more than %d traces at \"%s\"", MAX_TRACES, v);
		return SC_ELIMIT;
	}
	o->traces[o->ntraces++] = v;
	return 0;
}

static int format_flag(void *opts, const char *v, char *err, size_t errsz)
{
	topts_t *o = opts;
	if ((o->format = sc_tjob_format_parse(v)) < 0) {
		snprintf(err, errsz, "unknown format \"%s\" (openb, gavel, tiresias)", v);
		return SC_EINVAL;
	}
	return 0;
}

static const sc_flag_t time_flags[] = {
    {.name = "--time",
     .kind = SC_FLAG_FUNC,
     .fn = trace_flag,
     .meta = "TRACE",
     .flags = SC_FLAG_REPEAT,
     .help = "a trace: an OpenB pod list, a Gavel .trace file or a folder of\nthem (one "
             "virtual cluster each), a Tiresias job CSV"},
    {.name = "--format",
     .kind = SC_FLAG_FUNC,
     .fn = format_flag,
     .meta = "openb|gavel|tiresias",
     .help = "default: .trace files and folders are gavel, a CSV whose\nheader has job_id is "
             "tiresias, anything else openb"},
    {.name = "--nodes",
     SC_FLAG_AT(STR, topts_t, nodes),
     .meta = "NODES.csv",
     .help = "OpenB node list (default for openb: the OpenB GPU nodes)"},
    {.name = "--cluster",
     .kind = SC_FLAG_FUNC,
     .fn = cluster_flag,
     .meta = "NxG",
     .help = "N nodes of G GPUs (default: gavel 63x8, tiresias 16x4)"},
    {.name = "--queue-by",
     SC_FLAG_AT(CHOICE, topts_t, queue_by),
     .choices = "qos|none",
     .def = "qos",
     .help = "openb: a queue per qos class, or one queue"},
    {.name = "--tick",
     SC_FLAG_AT(INT, topts_t, tick),
     .meta = "S",
     .min = 1,
     .max = 86400,
     .def = "1",
     .help = "scheduling cycles on this grid of seconds"},
    {.name = "--policy",
     SC_FLAG_AT(CHOICE, topts_t, policy),
     .choices = "starcloud|fcfs",
     .def = "starcloud",
     .help = "starcloud: the scheduler core; fcfs: a stock Kubernetes\nscheduler's "
             "baseline (pods first come first served, spread\nfirst, no gangs, queues, fair "
             "share or preemption)"},
    {.name = "--load",
     SC_FLAG_AT(NUM, topts_t, load),
     .meta = "F",
     .min = 0.001,
     .max = 1000,
     .def = "1",
     .help = "arrivals F times as dense, run times unchanged: F times\nthe offered load"},
    {.name = "--gpu-type",
     SC_FLAG_AT(STR, topts_t, gpu_type),
     .meta = "v100|p100|k80",
     .def = "v100",
     .help = "gavel throughput column"},
    {.name = "--throughputs",
     SC_FLAG_AT(STR, topts_t, throughputs),
     .meta = "FILE",
     .help = "gavel simulation_throughputs.json (default: next to the\ntrace folder)"},
    {.name = "--nodepools",
     SC_FLAG_AT(STR, topts_t, nodepools),
     .meta = "FILE",
     .help = "NodePool manifests: the cluster starts from the pools' minimum\nand grows and "
             "shrinks by the core's plans (docs/AUTOSCALING.md);\n--nodes or --cluster add "
             "fixed nodes"},
    {.name = "--provision-delay",
     SC_FLAG_AT(DURATION, topts_t, provision_delay_ms),
     .max = 7 * 86400 * 1000.0,
     .def = "3m",
     .help = "with --nodepools: from a node's request to its joining"},
    {.name = "--compaction",
     SC_FLAG_AT(CHOICE, topts_t, compaction_off),
     .choices = "on|off",
     .def = "on",
     .help = "run the compaction action after allocate, reclaim and\npreempt (the "
             "scheduler's default)"},
    {.name = "--pack-threshold",
     SC_FLAG_AT(NUM, topts_t, pack_threshold),
     .meta = "F",
     .min = 0.01,
     .max = 1,
     .def = "0.7",
     .help = "compaction empties nodes allocated below this"},
    {.name = "--target-gpus",
     SC_FLAG_AT(INT, topts_t, target_gpus),
     .meta = "N",
     .min = 0,
     .max = 16,
     .def = "0",
     .help = "compaction.targetGpus: keep room for a job this big"},
    {.name = "--large-gpus",
     SC_FLAG_AT(INT, topts_t, large_gpus),
     .meta = "N",
     .min = 1,
     .max = 100000,
     .def = "8",
     .help = "jobs of at least N GPUs are reported apart as large"},
    {.name = "--one-node-jobs",
     SC_FLAG_AT(BOOL, topts_t, one_node),
     .help = "gavel/tiresias: a job of N one-GPU pods (N up to a node's\nGPUs) runs as one "
             "pod of N GPUs on one node"},
    {.name = "--json",
     SC_FLAG_AT(BOOL, topts_t, json),
     .help = "summary, queues and series as JSON on stdout"},
    {.name = "--csv", SC_FLAG_AT(STR, topts_t, csv), .meta = "FILE", .help = "one row per job"},
    {.name = "--plot",
     SC_FLAG_AT(STR, topts_t, plot),
     .meta = "DIR",
     .help = "utilisation.png and wait.png over time (gnuplot)"},
};

static const sc_command_t time_cmd = {
    .name = "simulate",
    .args = "--time TRACE [--time TRACE ...] [options]",
    .about = "Replays jobs over time through the scheduler core (queues, fair share, gangs,\n"
             "preemption) and reports queue wait, completion time, makespan, GPU\n"
             "utilisation and Jain's fairness between queues.",
    .flags = time_flags,
    .nflags = sizeof(time_flags) / sizeof(time_flags[0]),
};

const sc_command_t *sc_cli_simulate_time_cmd(void)
{
	return &time_cmd;
}

/* 0 to run, -1 after --help, else an exit status. */
static int parse_args(topts_t *o, int argc, char **argv)
{
	memset(o, 0, sizeof(*o));
	o->format = -1;
	int rc = sc_flags_parse(&time_cmd, o, argc, argv, NULL);
	if (rc != 0)
		return rc > 0 ? -1 : 2;
	o->by_qos = o->queue_by == 0;
	if (o->ntraces == 0)
		return sc_sim_bad("%s", "--time: no trace given");
	return 0;
}

/* ---- loading ----------------------------------------------------------------- */

static bool is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int detect_format(const char *path)
{
	if (is_dir(path) || ends_with(path, ".trace"))
		return SC_TJOB_GAVEL;
	FILE *f = fopen(path, "r");
	char line[512] = "";
	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = 0;
		fclose(f);
	}
	return strstr(line, "job_id") ? SC_TJOB_TIRESIAS : SC_TJOB_OPENB;
}

/* simulation_throughputs.json in the trace's folder or its parent. */
static void default_throughputs(const char *trace, char *out, size_t n)
{
	char dir[2048]; /* leaves room for the file name in out */
	if (snprintf(dir, sizeof(dir), "%s", trace) >= (int)sizeof(dir)) {
		snprintf(out, n, "simulation_throughputs.json"); /* too long: look here */
		return;
	}
	char *slash = is_dir(dir) ? dir + strlen(dir) : strrchr(dir, '/');
	if (slash)
		*slash = 0;
	else
		snprintf(dir, sizeof(dir), ".");
	for (int up = 0; up < 2; up++) {
		int len =
		    snprintf(out, n, "%s%s/simulation_throughputs.json", dir, up ? "/.." : "");
		if (len < (int)n && access(out, R_OK) == 0)
			return;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int load_gavel(const topts_t *o, const char *path, sc_tjobs_t *jobs, char *msg,
                      size_t msgsize)
{
	char tput[4096];
	if (o->throughputs)
		snprintf(tput, sizeof(tput), "%s", o->throughputs);
	else
		default_throughputs(path, tput, sizeof(tput));
	if (!is_dir(path))
		return sc_tjobs_read_gavel(path, tput, o->gpu_type, jobs, msg, msgsize);
	DIR *d = opendir(path);
	if (!d) {
		snprintf(msg, msgsize, "%.900s: %s", path, strerror(errno));
		return SC_EIO;
	}
	/* Read the folder's .trace files in name order, for a stable job order. */
	char *names[MAX_TRACES];
	int nn = 0, rc = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL && nn < MAX_TRACES;)
		if (ends_with(e->d_name, ".trace") && (names[nn] = sc_strdup(e->d_name)) != NULL)
			nn++;
	closedir(d);
	qsort(names, (size_t)nn, sizeof(char *), cmp_str);
	for (int i = 0; i < nn; i++) {
		char p[8192];
		snprintf(p, sizeof(p), "%s/%s", path, names[i]);
		if (rc == 0)
			rc = sc_tjobs_read_gavel(p, tput, o->gpu_type, jobs, msg, msgsize);
		free(names[i]);
	}
	return rc;
}

static int load_openb(const topts_t *o, const char *path, sc_tjobs_t *jobs, char *msg,
                      size_t msgsize)
{
	sc_trace_pods_t pods = {0};
	int rc = sc_trace_read_pods(path, &pods, msg, msgsize);
	if (rc == 0)
		rc = sc_tjobs_from_openb(&pods, path, o->by_qos, jobs, msg, msgsize);
	sc_trace_pods_free(&pods);
	return rc;
}

/* A path that does not exist may be an OpenB pod list's short name
 * (`default`, `gpushare40`), looked up like the packing mode does. */
static const char *resolve(const char *arg, char *buf, size_t n)
{
	static const char *const dirs[] = {"traces", "../shared/traces"};
	if (access(arg, R_OK) == 0 || strchr(arg, '/'))
		return arg;
	const char *prefix = strncmp(arg, "openb_", 6) != 0 ? "openb_pod_list_" : "";
	const char *ext = ends_with(arg, ".csv") ? "" : ".csv";
	for (int i = 0; i < 2; i++) {
		snprintf(buf, n, "%s/openb/%s%s%s", dirs[i], prefix, arg, ext);
		if (access(buf, R_OK) == 0)
			return buf;
	}
	return arg;
}

static int load_jobs(const topts_t *o, sc_tjobs_t *jobs, int *format, char *msg, size_t msgsize)
{
	int rc = 0;
	for (int i = 0; rc == 0 && i < o->ntraces; i++) {
		char buf[4096];
		const char *path = resolve(o->traces[i], buf, sizeof(buf));
		int f = o->format >= 0 ? o->format : detect_format(path);
		if (i == 0)
			*format = f;
		if (f == SC_TJOB_GAVEL)
			rc = load_gavel(o, path, jobs, msg, msgsize);
		else if (f == SC_TJOB_TIRESIAS)
			rc = sc_tjobs_read_tiresias(path, jobs, msg, msgsize);
		else
			rc = load_openb(o, path, jobs, msg, msgsize);
	}
	return rc;
}

/* Node specs with their strings; freed by nodes_free. */
typedef struct tnodes {
	sc_node_spec_t *v;
	size_t n;
	char (*names)[32];
	sc_trace_nodes_t trace;
} tnodes_t;

static int synth_nodes(tnodes_t *t, int n, int g)
{
	t->v = sc_calloc((size_t)n, sizeof(*t->v));
	t->names = sc_calloc((size_t)n, sizeof(*t->names));
	if (!t->v || !t->names)
		return SC_ENOMEM;
	for (int i = 0; i < n; i++) {
		snprintf(t->names[i], sizeof(t->names[i]), "node-%04d", i);
		/* Room for 8 cores and 64 GiB per GPU: GPUs are the constraint. */
		t->v[i] = (sc_node_spec_t){.name = t->names[i],
		                           .cpu_milli = (int64_t)g * 8000,
		                           .memory = (int64_t)g * 64 * 1024 * MIB,
		                           .gpu_count = g,
		                           .gpu_model = "GPU",
		                           .gpu_memory = (int64_t)32 * 1024 * MIB};
	}
	t->n = (size_t)n;
	return 0;
}

static int openb_nodes(tnodes_t *t, const char *path, char *msg, size_t msgsize)
{
	int rc = sc_trace_read_nodes(path, &t->trace, msg, msgsize);
	if (rc < 0)
		return rc;
	t->v = sc_calloc(t->trace.n ? t->trace.n : 1, sizeof(*t->v));
	if (!t->v)
		return SC_ENOMEM;
	for (size_t i = 0; i < t->trace.n; i++) {
		const sc_trace_node_t *s = &t->trace.v[i];
		t->v[i] = (sc_node_spec_t){.name = s->name,
		                           .cpu_milli = s->cpu_milli,
		                           .memory = s->memory_mib * MIB,
		                           .gpu_count = s->gpu,
		                           .gpu_model = s->gpu > 0 ? s->model : NULL};
	}
	t->n = t->trace.n;
	return 0;
}

static void nodes_free(tnodes_t *t)
{
	free(t->v);
	free(t->names);
	sc_trace_nodes_free(&t->trace);
}

static int load_nodes(const topts_t *o, int format, tnodes_t *t, char *msg, size_t msgsize)
{
	if (o->cl_nodes > 0)
		return synth_nodes(t, o->cl_nodes, o->cl_gpus);
	if (o->nodes)
		return openb_nodes(t, o->nodes, msg, msgsize);
	if (o->nodepools) /* the pools are the cluster */
		return 0;
	if (format == SC_TJOB_GAVEL) /* cluster_specs.json: 500 GPUs */
		return synth_nodes(t, 63, 8);
	if (format == SC_TJOB_TIRESIAS) /* tiresias/cluster_spec.csv */
		return synth_nodes(t, 16, 4);
	static const char *const where[] = {"traces/openb/openb_node_list_gpu_node.csv",
	                                    "../shared/traces/openb/openb_node_list_gpu_node.csv"};
	for (int i = 0; i < 2; i++)
		if (access(where[i], R_OK) == 0)
			return openb_nodes(t, where[i], msg, msgsize);
	snprintf(msg, msgsize, "no node list: give --nodes or --cluster NxG");
	return SC_EINVAL;
}

/* --nodepools FILE: its NodePool objects (nothing else) as the simulator's
 * pools. Returns an exit status. */
static int load_pools(const topts_t *o, sc_manifest_set_t **set, sc_tsim_pool_t **pools,
                      size_t *npools)
{
	static const char *const others[] = {
	    "Node", "Queue", "PriorityClass", "Job", "SchedulerConfig", "Topology", NULL};
	const sc_nodepool_t *np;
	*pools = NULL;
	*npools = 0;
	if (!o->nodepools)
		return 0;
	if (!(*set = sc_manifest_set_new()))
		return 1;
	int rc = sc__cli_load_path(*set, "simulate", o->nodepools);
	if (rc)
		return rc;
	for (int i = 0; others[i]; i++)
		if (sc_manifest_count(*set, others[i]))
			return sc_sim_bad(
			    "--nodepools: %s holds objects other than NodePool "
			    "(the cluster comes from the pools, the work from the trace)",
			    o->nodepools);
	size_t n = sc_manifest_nodepools(*set, &np);
	if (n == 0)
		return sc_sim_bad("--nodepools: %s holds no NodePool", o->nodepools);
	*pools = sc_xcalloc(n, sizeof(**pools));
	for (size_t i = 0; i < n; i++)
		(*pools)[i] = (sc_tsim_pool_t){np[i].pool, np[i].scale_down_after};
	*npools = n;
	return 0;
}

/* ---- verb ------------------------------------------------------------------------ */

int sc_cli_simulate_time(int argc, char **argv)
{
	topts_t o;
	int rc = parse_args(&o, argc, argv);
	if (rc)
		return rc < 0 ? 0 : rc;
	char msg[1024] = "";
	sc_tjobs_t jobs = {0};
	tnodes_t nodes = {0};
	sc_tsim_result_t res = {0};
	int format = SC_TJOB_OPENB;
	sc_manifest_set_t *pset = NULL;
	sc_tsim_pool_t *pools = NULL;
	size_t npools = 0;
	int prc = load_pools(&o, &pset, &pools, &npools);
	if (prc) {
		sc_manifest_set_free(pset);
		return prc;
	}
	rc = load_jobs(&o, &jobs, &format, msg, sizeof(msg));
	if (rc == 0)
		sc_tjobs_scale_arrivals(&jobs, o.load);
	if (rc == 0)
		rc = load_nodes(&o, format, &nodes, msg, sizeof(msg));
	if (rc == 0 && o.one_node) {
		int most = 0;
		for (size_t i = 0; i < nodes.n; i++)
			most = nodes.v[i].gpu_count > most ? nodes.v[i].gpu_count : most;
		sc_tjobs_one_node(&jobs, most);
	}
	sc_tsim_config_t c = {.nodes = nodes.v,
	                      .nnodes = nodes.n,
	                      .tick = o.tick,
	                      .policy = o.policy,
	                      .pools = pools,
	                      .npools = npools,
	                      .provision_delay = (int64_t)(o.provision_delay_ms / 1000),
	                      .compaction = o.compaction_off == 0,
	                      .pack_threshold = o.pack_threshold,
	                      .target_gpus = o.target_gpus,
	                      .large_gpus = o.large_gpus};
	progress_t pr = {0};
	if (isatty(2)) { /* a person is watching: say how far along it is */
		c.progress = show_progress;
		c.progress_ud = &pr;
		clock_gettime(CLOCK_MONOTONIC, &pr.t0);
	}
	if (rc == 0)
		rc = sc_tsim_run(&jobs, &c, &res, msg, sizeof(msg));
	if (pr.shown)
		fprintf(stderr, "\r\033[K"); /* the progress line goes away */
	int status = 0;
	if (rc < 0) {
		fprintf(stderr, "starcloud simulate: %s\n", msg[0] ? msg : sc_strerror(rc));
		status = 2;
	} else {
		status = sc_treport_output(&res, &jobs, o.policy, o.json, o.csv, o.plot);
	}
	sc_tsim_result_free(&res);
	nodes_free(&nodes);
	sc_tjobs_free(&jobs);
	free(pools);
	sc_manifest_set_free(pset);
	return status;
}
