/* `starcloud simulate`: argument parsing, trace lookup, the run sweep on
 * all cores, and output. The simulation itself is src/sim/packing.c. */
#include "cli/cli_simulate.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/cmdline.h"
#include "base/flagdoc.h"
#include "base/parse.h"
#include "cli/cli_simtime.h"
#include "cli/sim_report.h"
#include "sim/bound.h"
#include "sim/packing.h"
#include "sim/policies.h"
#include "sim/trace.h"

#define MAX_LIST 64
#define MAX_SEEDS 10000

/* The workloads of ../shared/traces/fgd-reference, used by --sweep. */
static const char *const sweep_workloads[] = {
    "openb_pod_list_cpu250",    "openb_pod_list_default",    "openb_pod_list_gpushare100",
    "openb_pod_list_gpuspec33", "openb_pod_list_multigpu50",
};

/* Where traces are looked up, in order, relative to the working directory. */
static const char *const trace_dirs[] = {"traces", "../shared/traces"};

typedef struct opts {
	const char *nodes;
	const char *pods[MAX_LIST];
	int npods;
	const char *policies[MAX_LIST];
	int npolicies;
	uint64_t seeds[MAX_SEEDS];
	int nseeds;
	double target;
	int json, curve, sweep, quiet, bound;
	const char *csv, *plot;
	FILE *csv_file; /* opened before the runs, so a bad path is found first */
	int jobs;       /* 0: one per core */
} opts_t;

/* "42", "42-51" or a comma list of those; seeds up to 2^64 - 1. */
static int parse_seeds(opts_t *o, const char *arg, char *err, size_t errsz)
{
	char buf[256];
	if (strlen(arg) >= sizeof(buf)) {
		snprintf(err, errsz, "\"%.40s...\" is too long", arg);
		return SC_EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", arg);
	int before = o->nseeds;
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *dash = strchr(tok, '-');
		uint64_t a, b;
		if (dash)
			*dash = '\0';
		/* Digits only: sc_parse_u64 would take a sign. */
		if (tok[0] < '0' || tok[0] > '9' || sc_parse_u64(tok, 0, UINT64_MAX, &a) < 0 ||
		    (dash && (dash[1] < '0' || dash[1] > '9' ||
		              sc_parse_u64(dash + 1, 0, UINT64_MAX, &b) < 0))) {
			snprintf(err, errsz, "\"%s\" is not N or A-B (0..18446744073709551615)",
			         arg);
			return SC_EINVAL;
		}
		if (!dash)
			b = a;
		if (b < a || b - a >= MAX_SEEDS) {
			snprintf(err, errsz, "bad range \"%s\"", arg);
			return SC_EINVAL;
		}
		/* Counted, not compared with b: s <= b holds for every s when b
		 * is the largest seed, and s++ would wrap to 0. */
		for (uint64_t k = 0; k <= b - a; k++) {
			if (o->nseeds == MAX_SEEDS) {
				snprintf(err, errsz, "more than %d seeds in \"%s\"", MAX_SEEDS,
				         arg);
				return SC_ELIMIT;
			}
			o->seeds[o->nseeds++] = a + k;
		}
	}
	if (o->nseeds == before) {
		snprintf(err, errsz, "\"%s\" names no seed", arg);
		return SC_EINVAL;
	}
	return 0;
}

#define POLICY_LIST "random, dotprod, gpuclustering, gpupacking, bestfit, fgd, default, all"

static int add_policies(opts_t *o, const char *arg, char *err, size_t errsz)
{
	char buf[512];
	if (strlen(arg) >= sizeof(buf)) {
		snprintf(err, errsz, "\"%.40s...\" is too long", arg);
		return SC_EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", arg);
	/* strtok would skip empty names: "" or "fgd,,default" must not
	 * quietly mean something else. */
	if (buf[0] == '\0' || buf[0] == ',' || buf[strlen(buf) - 1] == ',' || strstr(buf, ",,")) {
		snprintf(err, errsz, "\"%s\" has an empty policy name (" POLICY_LIST ")", arg);
		return SC_EINVAL;
	}
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (strcmp(tok, "all") == 0) {
			for (int i = 0; sc_sim_policy_names[i]; i++)
				if (add_policies(o, sc_sim_policy_names[i], err, errsz) < 0)
					return SC_ELIMIT;
			continue;
		}
		if (!sc_sim_policy_known(tok)) {
			snprintf(err, errsz, "unknown policy \"%s\" (" POLICY_LIST ")", tok);
			return SC_EINVAL;
		}
		if (o->npolicies == MAX_LIST) {
			snprintf(err, errsz, "too many policies at \"%s\"", tok);
			return SC_ELIMIT;
		}
		/* Keep the table's own string: tok lives in buf only. */
		for (int i = 0; sc_sim_policy_names[i]; i++)
			if (strcmp(sc_sim_policy_names[i], tok) == 0)
				o->policies[o->npolicies++] = sc_sim_policy_names[i];
	}
	return 0;
}

static int seeds_flag(void *opts, const char *v, char *err, size_t errsz)
{
	return parse_seeds(opts, v, err, errsz);
}

static int policy_flag(void *opts, const char *v, char *err, size_t errsz)
{
	return add_policies(opts, v, err, errsz);
}

static int pods_flag(void *opts, const char *v, char *err, size_t errsz)
{
	opts_t *o = opts;
	if (o->npods == MAX_LIST) {
		snprintf(err, errsz, "more than %d pod lists at \"%s\"", MAX_LIST, v);
		return SC_ELIMIT;
	}
	o->pods[o->npods++] = v;
	return 0;
}

/* The trace folders, the default seeds and policies depend on other flags
 * (--sweep), so they are applied after parsing, not as table defaults. */
static const sc_flag_t flags[] = {
    {.name = "--nodes",
     SC_FLAG_AT(STR, opts_t, nodes),
     .meta = "FILE",
     .help = "node list CSV (default: openb/openb_node_list_gpu_node.csv under\n./traces, then "
             "../shared/traces)"},
    {.name = "--pods",
     .kind = SC_FLAG_FUNC,
     .fn = pods_flag,
     .meta = "FILE|NAME",
     .flags = SC_FLAG_REPEAT,
     .help = "pod list CSV, or a name such as `default` or\n`openb_pod_list_gpushare40` looked "
             "up like --nodes"},
    {.name = "--policy",
     .kind = SC_FLAG_FUNC,
     .fn = policy_flag,
     .meta = "NAME[,NAME...]",
     .flags = SC_FLAG_REPEAT,
     .help = "random, dotprod, gpuclustering, gpupacking, bestfit, fgd,\ndefault, or `all` "
             "(default: default; with --sweep: all)"},
    {.name = "--seeds",
     .alias = "--seed",
     .kind = SC_FLAG_FUNC,
     .fn = seeds_flag,
     .meta = "A-B[,C]",
     .flags = SC_FLAG_REPEAT,
     .help = "one seed N, or a range 42-51, or a comma list of those\n(default: 42; with "
             "--sweep: 42-51)"},
    {.name = "--target",
     SC_FLAG_AT(NUM, opts_t, target),
     .meta = "X",
     .min = 0.01,
     .max = 10,
     .def = "1.3",
     .help = "arrived demand to reach, x capacity"},
    {.name = "--json", SC_FLAG_AT(BOOL, opts_t, json), .help = "one JSON object per run on stdout"},
    {.name = "--curve",
     SC_FLAG_AT(BOOL, opts_t, curve),
     .help = "with --json/--csv: allocation for every percent 0..130"},
    {.name = "--csv", SC_FLAG_AT(STR, opts_t, csv), .meta = "FILE", .help = "one row per run"},
    {.name = "--plot",
     SC_FLAG_AT(STR, opts_t, plot),
     .meta = "DIR",
     .help = "PNG per workload: allocation vs arrived demand, and\ndefault - fgd below it when "
             "both ran (gnuplot)"},
    {.name = "--bound",
     SC_FLAG_AT(BOOL, opts_t, bound),
     .help = "also an upper bound on the GPUs any policy can allocate\nfor each workload and "
             "seed (docs/SIMULATOR.md)"},
    {.name = "--sweep",
     SC_FLAG_AT(BOOL, opts_t, sweep),
     .help = "defaults to the 5 reference workloads x all policies x\nseeds 42-51 for whatever "
             "is not given"},
    {.name = "--jobs",
     .alias = "-j",
     SC_FLAG_AT(INT, opts_t, jobs),
     .meta = "N",
     .min = 1,
     .max = 1024,
     .help = "parallel runs (default: one per core)"},
    {.name = "--quiet", SC_FLAG_AT(BOOL, opts_t, quiet), .help = "no progress bar on stderr"},
};

static const sc_command_t simulate_cmd = {
    .name = "simulate",
    .args = "--pods FILE|NAME ... [options]",
    .about = "Packing simulation of the FGD paper on OpenB traces: pods are shuffled with\n"
             "the seed, inflated to TARGET x cluster GPU capacity and placed one at a time.",
    .footer = "Time mode (arrivals, departures, queues): starcloud simulate --time TRACE;\n"
              "see `starcloud simulate --time x --help`.",
    .flags = flags,
    .nflags = sizeof(flags) / sizeof(flags[0]),
};

/* The time mode's completion words that the packing mode does not have
 * already (--nodes, --json, --csv and --plot are in both). */
static void time_words(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m)
		return;
	sc_flags_words(sc_cli_simulate_time_cmd(), m);
	fclose(m);
	for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char name[128];
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(line, "\t"), line);
		if (!sc_flags_find(&simulate_cmd, name))
			puts(line);
	}
	free(buf);
}

/* --help-man and --help-words (scripts/gen-docs.sh): both modes, since
 * `simulate` is one verb. 1 when one of them was asked for. */
static int both_modes_doc(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		bool man = strcmp(argv[i], "--help-man") == 0;
		if (!man && strcmp(argv[i], "--help-words") != 0)
			continue;
		if (man) {
			sc_flags_man(&simulate_cmd, stdout);
			sc_flags_man(sc_cli_simulate_time_cmd(), stdout);
		} else {
			sc_flags_words(&simulate_cmd, stdout);
			time_words();
		}
		return 1;
	}
	return 0;
}

/* 0 to run, -1 after --help, else an exit status. */
static int parse_args(opts_t *o, int argc, char **argv)
{
	char err[512];
	memset(o, 0, sizeof(*o));
	int rc = sc_flags_parse(&simulate_cmd, o, argc, argv, NULL);
	if (rc != 0)
		return rc > 0 ? -1 : 2;
	if (o->sweep && o->npods == 0)
		for (size_t k = 0; k < sizeof(sweep_workloads) / sizeof(*sweep_workloads); k++)
			o->pods[o->npods++] = sweep_workloads[k];
	if (o->npolicies == 0 &&
	    add_policies(o, o->sweep ? "all" : "default", err, sizeof(err)) < 0)
		return sc_sim_bad("--policy: %s", err);
	if (o->nseeds == 0 && parse_seeds(o, o->sweep ? "42-51" : "42", err, sizeof(err)) < 0)
		return sc_sim_bad("--seeds: %s", err);
	if (o->npods == 0)
		return sc_sim_bad("%s",
		                  "no pod list: give --pods FILE|NAME or --sweep (see --help)");
	return 0;
}

/* ---- locating and loading traces --------------------------------------- */

static bool exists(const char *p)
{
	return access(p, R_OK) == 0;
}

/* A path is used as given; a bare name is looked up as
 * <dir>/openb/[openb_pod_list_]NAME[.csv] in the trace folders. Returns 0
 * with the path in out, or 2 with a message naming the option and, for a
 * name, the files it tried. */
static int locate(const char *opt, const char *arg, bool pods, char *out, size_t outsize)
{
	if (strchr(arg, '/') || exists(arg)) {
		snprintf(out, outsize, "%s", arg);
		if (exists(arg))
			return 0;
		fprintf(stderr, "starcloud simulate: %s %s: cannot read: %s\n", opt, arg,
		        strerror(errno));
		return 2;
	}
	const char *prefix = pods && strncmp(arg, "openb_", 6) != 0 ? "openb_pod_list_" : "";
	size_t len = strlen(arg);
	const char *ext = len > 4 && !strcmp(arg + len - 4, ".csv") ? "" : ".csv";
	char tried[2 * PATH_MAX] = "";
	for (size_t i = 0; i < sizeof(trace_dirs) / sizeof(*trace_dirs); i++) {
		snprintf(out, outsize, "%s/openb/%s%s%s", trace_dirs[i], prefix, arg, ext);
		if (exists(out))
			return 0;
		size_t t = strlen(tried);
		snprintf(tried + t, sizeof(tried) - t, "%s%s", i ? ", " : "", out);
	}
	fprintf(stderr,
	        "starcloud simulate: %s %s: no %s list of that name (tried %s; a path needs a "
	        "'/'; scripts/fetch-traces.sh downloads the traces)\n",
	        opt, arg, pods ? "pod" : "node", tried);
	return 2;
}

/* The workload name is the file's stem. */
static void stem(const char *path, char *out, size_t outsize)
{
	const char *b = strrchr(path, '/');
	snprintf(out, outsize, "%s", b ? b + 1 : path);
	size_t len = strlen(out);
	if (len > 4 && !strcmp(out + len - 4, ".csv"))
		out[len - 4] = '\0';
}

typedef struct loaded {
	sc_trace_nodes_t nodes;
	sc_trace_pods_t pods[MAX_LIST];
	sc_sim_workload_t *w[MAX_LIST];
	int n;
} loaded_t;

static void loaded_free(loaded_t *l)
{
	for (int i = 0; i < l->n; i++) {
		sc_sim_workload_free(l->w[i]);
		sc_trace_pods_free(&l->pods[i]);
	}
	sc_trace_nodes_free(&l->nodes);
}

static int load(const opts_t *o, loaded_t *l)
{
	char path[PATH_MAX], msg[512], name[PATH_MAX];
	const char *nodes = o->nodes ? o->nodes : "openb_node_list_gpu_node";
	if (locate("--nodes", nodes, false, path, sizeof(path)) != 0)
		return 2;
	if (sc_trace_read_nodes(path, &l->nodes, msg, sizeof(msg)) < 0)
		return sc_sim_bad("%s", msg);
	for (int i = 0; i < o->npods; i++) {
		if (locate("--pods", o->pods[i], true, path, sizeof(path)) != 0)
			return 2;
		if (sc_trace_read_pods(path, &l->pods[i], msg, sizeof(msg)) < 0)
			return sc_sim_bad("%s", msg);
		l->n = i + 1;
		stem(path, name, sizeof(name));
		if (sc_sim_workload_new(&l->nodes, &l->pods[i], name, &l->w[i], msg, sizeof(msg)) <
		    0)
			return sc_sim_bad("%s", msg);
	}
	return 0;
}

/* ---- the sweep ---------------------------------------------------------- */

typedef struct sweep {
	const opts_t *o;
	loaded_t *l;
	sc_sim_result_t *res;
	sc_sim_bound_t *bounds; /* one per (workload, seed) with --bound */
	int *rc;
	size_t nruns, nbounds, njobs;
	size_t next, done;
	pthread_mutex_t mu;
	bool progress;
} sweep_t;

static void job_config(const sweep_t *s, size_t j, sc_sim_config_t *c, int *wi)
{
	const opts_t *o = s->o;
	sc_sim_config_default(c);
	c->target = o->target;
	if (j >= s->nruns) {
		/* A bound: one per workload and seed, whatever the policies. */
		j -= s->nruns;
		*wi = (int)(j / (size_t)o->nseeds);
		c->seed = o->seeds[j % (size_t)o->nseeds];
		return;
	}
	size_t per_w = (size_t)o->npolicies * (size_t)o->nseeds;
	*wi = (int)(j / per_w);
	c->policy = o->policies[(j % per_w) / (size_t)o->nseeds];
	c->seed = o->seeds[j % (size_t)o->nseeds];
}

static void show_progress(const sweep_t *s)
{
	int width = 40, fill = (int)((double)width * (double)s->done / (double)s->njobs);
	fprintf(stderr, "\r[%.*s%*s] %zu/%zu runs", fill,
	        "########################################", width - fill, "", s->done, s->njobs);
	if (s->done == s->njobs)
		fputc('\n', stderr);
}

static void run_job(sweep_t *s, size_t j)
{
	sc_sim_config_t c;
	int wi;
	char msg[256] = "";
	job_config(s, j, &c, &wi);
	const sc_sim_workload_t *w = s->l->w[wi];
	if (j < s->nruns)
		s->rc[j] = sc_sim_packing_run(w, &c, &s->res[j], msg, sizeof(msg));
	else
		s->rc[j] = sc_sim_bound(w, &c, &s->bounds[j - s->nruns], msg, sizeof(msg));
	if (s->rc[j] < 0)
		fprintf(stderr, "starcloud simulate: %s/%s/%llu: %s\n", sc_sim_workload_name(w),
		        j < s->nruns ? c.policy : "bound", (unsigned long long)c.seed,
		        msg[0] ? msg : sc_strerror(s->rc[j]));
}

static void *worker(void *arg)
{
	sweep_t *s = arg;
	for (;;) {
		pthread_mutex_lock(&s->mu);
		size_t j = s->next++;
		pthread_mutex_unlock(&s->mu);
		if (j >= s->njobs)
			return NULL;
		run_job(s, j);
		pthread_mutex_lock(&s->mu);
		s->done++;
		if (s->progress)
			show_progress(s);
		pthread_mutex_unlock(&s->mu);
	}
}

static int run_sweep(sweep_t *s)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int n = s->o->jobs ? s->o->jobs : (int)(cores > 0 ? cores : 1);
	if ((size_t)n > s->njobs)
		n = (int)s->njobs;
	pthread_t th[1024];
	int started = 0;
	for (int i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, worker, s) == 0)
			started++;
	if (started == 0)
		worker(s); /* no threads available: run here */
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	for (size_t j = 0; j < s->njobs; j++)
		if (s->rc[j] < 0)
			return 1;
	return 0;
}

static int output(opts_t *o, const sweep_t *s)
{
	sc_report_t rep = {s->res, s->nruns, s->bounds, s->nbounds};
	int rc = 0;
	if (o->json)
		sc_report_json(stdout, &rep, o->curve);
	else
		sc_report_table(stdout, &rep);
	if (o->csv_file) {
		FILE *f = o->csv_file;
		o->csv_file = NULL;
		if (sc_report_csv(f, o->csv, &rep, o->curve) != 0)
			rc = 1;
	}
	if (o->plot && sc_report_plot(o->plot, &rep) != 0)
		rc = 1;
	return rc;
}

/* Output paths are checked before the runs, which can take minutes: a
 * typo found afterwards would throw them away. */
static int open_outputs(opts_t *o)
{
	if (o->csv) {
		o->csv_file = fopen(o->csv, "w");
		if (!o->csv_file) {
			fprintf(stderr, "starcloud simulate: --csv %s: cannot write: %s\n", o->csv,
			        strerror(errno));
			return 2;
		}
	}
	return o->plot ? sc_report_plot_check(o->plot) : 0;
}

static int sweep_start(opts_t *o, loaded_t *l, sweep_t *s)
{
	s->o = o;
	s->l = l;
	s->nruns = (size_t)l->n * (size_t)o->npolicies * (size_t)o->nseeds;
	s->nbounds = o->bound ? (size_t)l->n * (size_t)o->nseeds : 0;
	s->njobs = s->nruns + s->nbounds;
	s->res = sc_xcalloc(s->nruns ? s->nruns : 1, sizeof(*s->res));
	s->bounds = o->bound ? sc_xcalloc(s->nbounds ? s->nbounds : 1, sizeof(*s->bounds)) : NULL;
	s->rc = sc_xcalloc(s->njobs, sizeof(int));
	s->progress = !o->quiet && isatty(2) && s->njobs > 1;
	pthread_mutex_init(&s->mu, NULL);
	int rc = run_sweep(s);
	pthread_mutex_destroy(&s->mu);
	return rc;
}

int sc_cli_simulate(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--time") == 0)
			return sc_cli_simulate_time(argc, argv);
	if (both_modes_doc(argc, argv))
		return 0;
	opts_t *o = sc_xcalloc(1, sizeof(*o));
	loaded_t *l = sc_xcalloc(1, sizeof(*l));
	sweep_t s = {0};
	int rc = parse_args(o, argc, argv);
	if (rc == 0)
		rc = load(o, l);
	if (rc == 0)
		rc = open_outputs(o);
	if (rc == 0)
		rc = sweep_start(o, l, &s);
	if (rc == 0)
		rc = output(o, &s);
	if (o && o->csv_file)
		fclose(o->csv_file);
	free(s.res);
	free(s.bounds);
	free(s.rc);
	if (l)
		loaded_free(l);
	free(l);
	free(o);
	return rc < 0 ? 0 : rc;
}
