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
#include <unistd.h>

#include "cli/timesim_report.h"
#include "sim/jobs.h"
#include "sim/timesim.h"
#include "sim/trace.h"

#define MAX_TRACES 256
#define MIB ((int64_t)1 << 20)

typedef struct topts {
	const char *traces[MAX_TRACES];
	int ntraces;
	int format;            /* -1 = from the file */
	const char *nodes;     /* OpenB node list */
	int cl_nodes, cl_gpus; /* --cluster NxG */
	bool by_qos;
	long tick;
	double load; /* arrivals this many times as dense */
	const char *gpu_type, *throughputs;
	bool json;
	const char *csv, *plot;
} topts_t;

static void usage(FILE *f)
{
	fputs("usage: starcloud simulate --time TRACE [--time TRACE ...]\n"
	      "         [--format openb|gavel|tiresias] [--nodes NODES.csv | --cluster NxG]\n"
	      "         [--queue-by qos|none] [--tick S] [--load F]\n"
	      "         [--gpu-type v100|p100|k80]\n"
	      "         [--throughputs FILE] [--json] [--csv FILE] [--plot DIR]\n"
	      "Replays jobs over time through the scheduler core (queues, fair share, gangs,\n"
	      "preemption) and reports queue wait, completion time, makespan, GPU\n"
	      "utilisation and Jain's fairness between queues.\n"
	      "  --time        a trace: an OpenB pod list, a Gavel .trace file or a folder of\n"
	      "                them (one virtual cluster each), a Tiresias job CSV\n"
	      "  --format      default: .trace files and folders are gavel, a CSV whose\n"
	      "                header has job_id is tiresias, anything else openb\n"
	      "  --nodes       OpenB node list (default for openb: the OpenB GPU nodes)\n"
	      "  --cluster     N nodes of G GPUs (default: gavel 63x8, tiresias 16x4)\n"
	      "  --queue-by    openb: a queue per qos class (default) or one queue\n"
	      "  --tick        scheduling cycles on this grid of seconds (default 1)\n"
	      "  --load        arrivals F times as dense, run times unchanged: F times\n"
	      "                the offered load (default 1; 0.001..1000)\n"
	      "  --gpu-type    gavel throughput column (default v100)\n"
	      "  --throughputs gavel simulation_throughputs.json (default: next to the\n"
	      "                trace folder)\n"
	      "  --json        summary, queues and series as JSON on stdout\n"
	      "  --csv FILE    one row per job\n"
	      "  --plot DIR    utilisation.png and wait.png over time (gnuplot)\n",
	      f);
}

int sc_sim_bad(const char *fmt, const char *arg)
{
	fprintf(stderr, "starcloud simulate: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	return 2;
}

static int parse_cluster(topts_t *o, const char *v)
{
	char x;
	int n, g;
	if (sscanf(v, "%d%c%d", &n, &x, &g) != 3 || x != 'x' || n < 1 || n > 100000 || g < 1 ||
	    g > 16)
		return sc_sim_bad("--cluster: \"%s\" is not NxG (N nodes 1..100000, G GPUs 1..16)",
		                  v);
	o->cl_nodes = n;
	o->cl_gpus = g;
	return 0;
}

static int parse_value(topts_t *o, const char *a, const char *v)
{
	if (!strcmp(a, "--time")) {
		if (o->ntraces == MAX_TRACES)
			return sc_sim_bad("--time: more than 256 traces at \"%s\"", v);
		o->traces[o->ntraces++] = v;
	} else if (!strcmp(a, "--format")) {
		if ((o->format = sc_tjob_format_parse(v)) < 0)
			return sc_sim_bad(
			    "--format: unknown format \"%s\" (openb, gavel, tiresias)", v);
	} else if (!strcmp(a, "--nodes")) {
		o->nodes = v;
	} else if (!strcmp(a, "--cluster")) {
		return parse_cluster(o, v);
	} else if (!strcmp(a, "--queue-by")) {
		if (strcmp(v, "qos") && strcmp(v, "none"))
			return sc_sim_bad("--queue-by: \"%s\" is not qos or none", v);
		o->by_qos = !strcmp(v, "qos");
	} else if (!strcmp(a, "--tick")) {
		char *end;
		o->tick = strtol(v, &end, 10);
		if (*end || o->tick < 1 || o->tick > 86400)
			return sc_sim_bad("--tick: \"%s\" is not seconds in 1..86400", v);
	} else if (!strcmp(a, "--load")) {
		char *end;
		o->load = strtod(v, &end);
		if (end == v || *end || !(o->load >= 0.001 && o->load <= 1000))
			return sc_sim_bad("--load: \"%s\" is not a factor in 0.001..1000", v);
	} else if (!strcmp(a, "--gpu-type")) {
		o->gpu_type = v;
	} else if (!strcmp(a, "--throughputs")) {
		o->throughputs = v;
	} else if (!strcmp(a, "--csv")) {
		o->csv = v;
	} else if (!strcmp(a, "--plot")) {
		o->plot = v;
	} else {
		return sc_sim_bad("unknown option \"%s\" for --time (see --time --help)", a);
	}
	return 0;
}

static int parse_args(topts_t *o, int argc, char **argv)
{
	memset(o, 0, sizeof(*o));
	o->format = -1;
	o->by_qos = true;
	o->tick = 1;
	o->load = 1;
	o->gpu_type = "v100";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return -1;
		}
		if (!strcmp(argv[i], "--json")) {
			o->json = true;
			continue;
		}
		if (i + 1 >= argc)
			return sc_sim_bad("%s: missing value", argv[i]);
		int rc = parse_value(o, argv[i], argv[i + 1]);
		if (rc)
			return rc;
		i++;
	}
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
	rc = load_jobs(&o, &jobs, &format, msg, sizeof(msg));
	if (rc == 0)
		sc_tjobs_scale_arrivals(&jobs, o.load);
	if (rc == 0)
		rc = load_nodes(&o, format, &nodes, msg, sizeof(msg));
	sc_tsim_config_t c = {.nodes = nodes.v, .nnodes = nodes.n, .tick = o.tick};
	if (rc == 0)
		rc = sc_tsim_run(&jobs, &c, &res, msg, sizeof(msg));
	int status = 0;
	if (rc < 0) {
		fprintf(stderr, "starcloud simulate: %s\n", msg[0] ? msg : sc_strerror(rc));
		status = 2;
	} else {
		status = sc_treport_output(&res, &jobs, o.json, o.csv, o.plot);
	}
	sc_tsim_result_free(&res);
	nodes_free(&nodes);
	sc_tjobs_free(&jobs);
	return status;
}
