/* `starcloud simulate`: argument parsing, trace lookup, the run sweep on
 * all cores, and output. The simulation itself is src/sim/packing.c. */
#include "cli/cli_simulate.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_simtime.h"
#include "cli/sim_report.h"
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
	bool json, curve, sweep, quiet;
	const char *csv, *plot;
	int jobs;
} opts_t;

static void usage(FILE *f)
{
	fputs("usage: starcloud simulate [--nodes NODES.csv] --pods PODS.csv|NAME ... \n"
	      "         [--policy NAME[,NAME...]] ... [--seed N | --seeds A-B[,C]]\n"
	      "         [--target 1.3] [--json] [--curve] [--csv FILE] [--plot DIR]\n"
	      "         [--sweep] [-j N] [--quiet]\n"
	      "Packing simulation of the FGD paper on OpenB traces: pods are shuffled with\n"
	      "the seed, inflated to TARGET x cluster GPU capacity and placed one at a time.\n"
	      "  --nodes     node list (default: openb/openb_node_list_gpu_node.csv under\n"
	      "              ./traces, then ../shared/traces)\n"
	      "  --pods      pod list, or a name such as `default` or\n"
	      "              `openb_pod_list_gpushare40` looked up like --nodes; repeatable\n"
	      "  --policy    random, dotprod, gpuclustering, gpupacking, bestfit, fgd,\n"
	      "              default, or `all`; repeatable (default: default)\n"
	      "  --seed(s)   one seed, or a range 42-51 (default 42)\n"
	      "  --target    arrived demand to reach, x capacity (default 1.3)\n"
	      "  --json      one JSON object per run on stdout\n"
	      "  --curve     with --json/--csv: allocation for every percent 0..130\n"
	      "  --csv FILE  one row per run\n"
	      "  --plot DIR  PNG per workload: allocation vs arrived demand (gnuplot)\n"
	      "  --sweep     defaults to the 5 reference workloads x all policies x\n"
	      "              seeds 42-51 for whatever is not given\n"
	      "  -j N        parallel runs (default: all cores)\n"
	      "Time mode (arrivals, departures, queues): starcloud simulate --time TRACE;\n"
	      "see `starcloud simulate --time x --help`.\n",
	      f);
}

static bool parse_u64(const char *s, uint64_t *out)
{
	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

/* "42", "42-51" or a comma list of those. */
static int parse_seeds(opts_t *o, const char *arg)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", arg);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *dash = strchr(tok, '-');
		uint64_t a, b;
		if (dash)
			*dash = '\0';
		if (!parse_u64(tok, &a) || (dash && !parse_u64(dash + 1, &b)))
			return sc_sim_bad("--seeds: \"%s\" is not N or A-B", arg);
		if (!dash)
			b = a;
		if (b < a || b - a >= MAX_SEEDS)
			return sc_sim_bad("--seeds: bad range \"%s\"", arg);
		for (uint64_t s = a; s <= b; s++) {
			if (o->nseeds == MAX_SEEDS)
				return sc_sim_bad("--seeds: more than 10000 seeds in \"%s\"", arg);
			o->seeds[o->nseeds++] = s;
		}
	}
	return 0;
}

static int add_policies(opts_t *o, const char *arg)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", arg);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (strcmp(tok, "all") == 0) {
			for (int i = 0; sc_sim_policy_names[i]; i++)
				if (add_policies(o, sc_sim_policy_names[i]) != 0)
					return 2;
			continue;
		}
		if (!sc_sim_policy_known(tok))
			return sc_sim_bad("--policy: unknown policy \"%s\" (random, dotprod, "
			                  "gpuclustering, gpupacking, bestfit, fgd, default, all)",
			                  tok);
		if (o->npolicies == MAX_LIST)
			return sc_sim_bad("--policy: too many policies at \"%s\"", tok);
		/* Keep the table's own string: tok lives in buf only. */
		for (int i = 0; sc_sim_policy_names[i]; i++)
			if (strcmp(sc_sim_policy_names[i], tok) == 0)
				o->policies[o->npolicies++] = sc_sim_policy_names[i];
	}
	return 0;
}

static const char *need(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc) {
		sc_sim_bad("%s: missing value", argv[*i]);
		return NULL;
	}
	return argv[++*i];
}

static int parse_one(opts_t *o, int argc, char **argv, int *i)
{
	const char *a = argv[*i], *v;
	if (!strcmp(a, "--json") || !strcmp(a, "--curve") || !strcmp(a, "--sweep") ||
	    !strcmp(a, "--quiet")) {
		*(a[2] == 'j'   ? &o->json
		  : a[2] == 'c' ? &o->curve
		  : a[2] == 's' ? &o->sweep
		                : &o->quiet) = true;
		return 0;
	}
	if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
		usage(stdout);
		return -1;
	}
	if (!(v = need(argc, argv, i)))
		return 2;
	if (!strcmp(a, "--nodes"))
		o->nodes = v;
	else if (!strcmp(a, "--pods") && o->npods < MAX_LIST)
		o->pods[o->npods++] = v;
	else if (!strcmp(a, "--policy"))
		return add_policies(o, v);
	else if (!strcmp(a, "--seed") || !strcmp(a, "--seeds"))
		return parse_seeds(o, v);
	else if (!strcmp(a, "--target")) {
		char *end;
		o->target = strtod(v, &end);
		if (*end || !(o->target > 0 && o->target <= 10))
			return sc_sim_bad("--target: \"%s\" is not a number in (0, 10]", v);
	} else if (!strcmp(a, "--csv"))
		o->csv = v;
	else if (!strcmp(a, "--plot"))
		o->plot = v;
	else if (!strcmp(a, "-j") || !strcmp(a, "--jobs")) {
		uint64_t j;
		if (!parse_u64(v, &j) || j < 1 || j > 1024)
			return sc_sim_bad("-j: \"%s\" is not a count in 1..1024", v);
		o->jobs = (int)j;
	} else
		return sc_sim_bad("unknown option \"%s\" (see --help)", a);
	return 0;
}

static int parse_args(opts_t *o, int argc, char **argv)
{
	memset(o, 0, sizeof(*o));
	o->target = 1.3;
	for (int i = 1; i < argc; i++) {
		int rc = parse_one(o, argc, argv, &i);
		if (rc != 0)
			return rc;
	}
	if (o->sweep && o->npods == 0)
		for (size_t k = 0; k < sizeof(sweep_workloads) / sizeof(*sweep_workloads); k++)
			o->pods[o->npods++] = sweep_workloads[k];
	if (o->npolicies == 0 && add_policies(o, o->sweep ? "all" : "default") != 0)
		return 2;
	if (o->nseeds == 0 && parse_seeds(o, o->sweep ? "42-51" : "42") != 0)
		return 2;
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
 * <dir>/openb/[openb_pod_list_]NAME[.csv] in the trace folders. */
static int locate(const char *arg, bool pods, char *out, size_t outsize)
{
	if (strchr(arg, '/') || exists(arg)) {
		snprintf(out, outsize, "%s", arg);
		return exists(arg) ? 0 : -1;
	}
	const char *prefix = pods && strncmp(arg, "openb_", 6) != 0 ? "openb_pod_list_" : "";
	size_t len = strlen(arg);
	const char *ext = len > 4 && !strcmp(arg + len - 4, ".csv") ? "" : ".csv";
	for (size_t i = 0; i < sizeof(trace_dirs) / sizeof(*trace_dirs); i++) {
		snprintf(out, outsize, "%s/openb/%s%s%s", trace_dirs[i], prefix, arg, ext);
		if (exists(out))
			return 0;
	}
	return -1;
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
	if (locate(nodes, false, path, sizeof(path)) != 0)
		return sc_sim_bad("%s: node list not found (looked in ./traces and "
		                  "../shared/traces; scripts/fetch-traces.sh downloads them)",
		                  nodes);
	if (sc_trace_read_nodes(path, &l->nodes, msg, sizeof(msg)) < 0)
		return sc_sim_bad("%s", msg);
	for (int i = 0; i < o->npods; i++) {
		if (locate(o->pods[i], true, path, sizeof(path)) != 0)
			return sc_sim_bad("%s: pod list not found (looked in ./traces and "
			                  "../shared/traces)",
			                  o->pods[i]);
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
	int *rc;
	size_t njobs;
	size_t next, done;
	pthread_mutex_t mu;
	bool progress;
} sweep_t;

static void job_config(const sweep_t *s, size_t j, sc_sim_config_t *c, int *wi)
{
	const opts_t *o = s->o;
	size_t per_w = (size_t)o->npolicies * (size_t)o->nseeds;
	*wi = (int)(j / per_w);
	sc_sim_config_default(c);
	c->policy = o->policies[(j % per_w) / (size_t)o->nseeds];
	c->seed = o->seeds[j % (size_t)o->nseeds];
	c->target = o->target;
}

static void show_progress(const sweep_t *s)
{
	int width = 40, fill = (int)((double)width * (double)s->done / (double)s->njobs);
	fprintf(stderr, "\r[%.*s%*s] %zu/%zu runs", fill,
	        "########################################", width - fill, "", s->done, s->njobs);
	if (s->done == s->njobs)
		fputc('\n', stderr);
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
		sc_sim_config_t c;
		int wi;
		char msg[256] = "";
		job_config(s, j, &c, &wi);
		s->rc[j] = sc_sim_packing_run(s->l->w[wi], &c, &s->res[j], msg, sizeof(msg));
		if (s->rc[j] < 0)
			fprintf(stderr, "starcloud simulate: %s/%s/%llu: %s\n",
			        sc_sim_workload_name(s->l->w[wi]), c.policy,
			        (unsigned long long)c.seed, msg[0] ? msg : sc_strerror(s->rc[j]));
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

static int output(const opts_t *o, const sc_sim_result_t *res, size_t n)
{
	int rc = 0;
	if (o->json)
		for (size_t j = 0; j < n; j++)
			sc_report_json(stdout, &res[j], o->curve);
	else
		sc_report_table(stdout, res, n);
	if (o->csv && sc_report_csv(o->csv, res, n, o->curve) != 0)
		rc = 1;
	if (o->plot && sc_report_plot(o->plot, res, n) != 0)
		rc = 1;
	return rc;
}

int sc_cli_simulate(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--time") == 0)
			return sc_cli_simulate_time(argc, argv);
	opts_t *o = calloc(1, sizeof(*o));
	loaded_t *l = calloc(1, sizeof(*l));
	sweep_t s = {0};
	int rc = !o || !l ? 1 : parse_args(o, argc, argv);
	if (rc == 0)
		rc = load(o, l);
	if (rc == 0) {
		s.o = o;
		s.l = l;
		s.njobs = (size_t)l->n * (size_t)o->npolicies * (size_t)o->nseeds;
		s.res = calloc(s.njobs, sizeof(*s.res));
		s.rc = calloc(s.njobs, sizeof(int));
		s.progress = !o->quiet && isatty(2) && s.njobs > 1;
		pthread_mutex_init(&s.mu, NULL);
		rc = !s.res || !s.rc ? 1 : run_sweep(&s);
		if (rc == 0)
			rc = output(o, s.res, s.njobs);
		pthread_mutex_destroy(&s.mu);
	}
	free(s.res);
	free(s.rc);
	if (l)
		loaded_free(l);
	free(l);
	free(o);
	return rc < 0 ? 0 : rc;
}
