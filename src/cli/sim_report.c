/* Writers for simulation results. See sim_report.h. */
#include "cli/sim_report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Percents of arrived demand reported without --curve. */
static const int alloc_keys[] = {100, 130};
static const int frag_keys[] = {50, 90, 100, 130};

double sc_report_unalloc_130(const sc_sim_result_t *r)
{
	double a = sc_sim_curve_at(r->alloc, 130);
	return isnan(a) ? NAN : (double)r->total_gpus * (1.0 - a / 100.0);
}

static void json_num(FILE *out, double v, int prec)
{
	if (isnan(v))
		fputs("null", out);
	else
		fprintf(out, "%.*f", prec, v);
}

/* Names are file stems and policy names; escape anyway so any input
 * yields valid JSON. */
static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static void json_curve(FILE *out, const char *key, const double *c, const int *keys, size_t nk,
                       bool full)
{
	fprintf(out, "\"%s\": {", key);
	size_t n = full ? SC_SIM_CURVE_MAX + 1 : nk;
	for (size_t i = 0; i < n; i++) {
		int k = full ? (int)i : keys[i];
		fprintf(out, "%s\"%d\": ", i ? ", " : "", k);
		json_num(out, sc_sim_curve_at(c, k), 2);
	}
	fputs("}", out);
}

void sc_report_json(FILE *out, const sc_sim_result_t *r, bool curve)
{
	fputs("{\"workload\": ", out);
	json_str(out, r->workload);
	fputs(", \"policy\": ", out);
	json_str(out, r->policy);
	fprintf(out, ", \"seed\": %llu, \"total_gpus\": %d, ", (unsigned long long)r->seed,
	        r->total_gpus);
	json_curve(out, "alloc_pct", r->alloc, alloc_keys, 2, curve);
	fputs(", ", out);
	json_curve(out, "frag_pct", r->frag, frag_keys, 4, curve);
	fputs(", \"unallocated_gpus_at_130\": ", out);
	json_num(out, sc_report_unalloc_130(r), 1);
	fprintf(out, ", \"pods\": %zu, \"failed_pods\": %zu, \"wall_seconds\": %.3f}\n", r->pods,
	        r->failed_pods, r->wall_seconds);
}

int sc_report_csv(const char *path, const sc_sim_result_t *rs, size_t n, bool curve)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "starcloud simulate: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fputs("workload,policy,seed,total_gpus,alloc_pct_100,alloc_pct_130,frag_pct_50,"
	      "frag_pct_90,frag_pct_100,frag_pct_130,unallocated_gpus_at_130,pods,failed_pods,"
	      "wall_seconds",
	      f);
	for (int k = 0; curve && k <= SC_SIM_CURVE_MAX; k++)
		fprintf(f, ",alloc_%d", k);
	fputc('\n', f);
	for (size_t i = 0; i < n; i++) {
		const sc_sim_result_t *r = &rs[i];
		fprintf(f, "%s,%s,%llu,%d", r->workload, r->policy, (unsigned long long)r->seed,
		        r->total_gpus);
		double v[] = {sc_sim_curve_at(r->alloc, 100), sc_sim_curve_at(r->alloc, 130),
		              sc_sim_curve_at(r->frag, 50),   sc_sim_curve_at(r->frag, 90),
		              sc_sim_curve_at(r->frag, 100),  sc_sim_curve_at(r->frag, 130),
		              sc_report_unalloc_130(r)};
		for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++)
			isnan(v[k]) ? fputs(",", f) : fprintf(f, ",%.2f", v[k]);
		fprintf(f, ",%zu,%zu,%.3f", r->pods, r->failed_pods, r->wall_seconds);
		for (int k = 0; curve && k <= SC_SIM_CURVE_MAX; k++)
			isnan(r->alloc[k]) ? fputs(",", f) : fprintf(f, ",%.2f", r->alloc[k]);
		fputc('\n', f);
	}
	int bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		fprintf(stderr, "starcloud simulate: %s: write failed\n", path);
		return -1;
	}
	return 0;
}

/* ---- grouping by (workload, policy) ---------------------------------- */

typedef struct group {
	const char *workload, *policy;
	size_t n;
	double alloc[SC_SIM_CURVE_MAX + 1];
	long nalloc[SC_SIM_CURVE_MAX + 1];
	double frag90, unalloc, failed, wall;
} group_t;

static size_t group_results(const sc_sim_result_t *rs, size_t n, group_t *g)
{
	size_t ng = 0;
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;
		while (k < ng && (strcmp(g[k].workload, rs[i].workload) != 0 ||
		                  strcmp(g[k].policy, rs[i].policy) != 0))
			k++;
		if (k == ng) {
			memset(&g[ng], 0, sizeof(g[ng]));
			g[ng].workload = rs[i].workload;
			g[ng++].policy = rs[i].policy;
		}
		group_t *x = &g[k];
		x->n++;
		for (int p = 0; p <= SC_SIM_CURVE_MAX; p++)
			if (!isnan(rs[i].alloc[p])) {
				x->alloc[p] += rs[i].alloc[p];
				x->nalloc[p]++;
			}
		x->frag90 += isnan(rs[i].frag[90]) ? 0 : rs[i].frag[90];
		x->unalloc +=
		    isnan(sc_report_unalloc_130(&rs[i])) ? 0 : sc_report_unalloc_130(&rs[i]);
		x->failed += (double)rs[i].failed_pods;
		x->wall += rs[i].wall_seconds;
	}
	return ng;
}

static double gmean(const group_t *g, int k)
{
	return g->nalloc[k] ? g->alloc[k] / (double)g->nalloc[k] : NAN;
}

void sc_report_table(FILE *out, const sc_sim_result_t *rs, size_t n)
{
	group_t *g = calloc(n ? n : 1, sizeof(*g));
	if (!g)
		return;
	size_t ng = group_results(rs, n, g);
	fprintf(out, "%-28s %-14s %5s %9s %9s %8s %10s %8s %7s\n", "WORKLOAD", "POLICY", "SEEDS",
	        "ALLOC@100", "ALLOC@130", "FRAG@90", "UNALLOC130", "FAILED", "WALL_S");
	for (size_t i = 0; i < ng; i++) {
		double d = (double)g[i].n;
		fprintf(out, "%-28s %-14s %5zu %8.2f%% %8.2f%% %7.2f%% %10.1f %8.1f %7.2f\n",
		        g[i].workload, g[i].policy, g[i].n, gmean(&g[i], 100), gmean(&g[i], 130),
		        g[i].frag90 / d, g[i].unalloc / d, g[i].failed / d, g[i].wall / d);
	}
	free(g);
}

/* ---- plots -------------------------------------------------------------- */

static int write_plot(const char *dir, const group_t *g, size_t ng, const char *workload)
{
	char dat[4096], png[4096];
	snprintf(dat, sizeof(dat), "%s/%s.dat", dir, workload);
	snprintf(png, sizeof(png), "%s/%s.png", dir, workload);
	FILE *f = fopen(dat, "w");
	if (!f)
		return -1;
	/* One gnuplot data block per policy, separated by two blank lines. */
	size_t blocks = 0;
	for (size_t i = 0; i < ng; i++) {
		if (strcmp(g[i].workload, workload) != 0)
			continue;
		fprintf(f, "%s# %s\n", blocks++ ? "\n\n" : "", g[i].policy);
		for (int k = 0; k <= SC_SIM_CURVE_MAX; k++)
			if (g[i].nalloc[k])
				fprintf(f, "%d %.3f\n", k, gmean(&g[i], k));
	}
	fclose(f);
	FILE *gp = popen("gnuplot", "w");
	if (!gp)
		return -1;
	fprintf(gp, "set terminal png size 900,600\nset output '%s'\n", png);
	fprintf(gp, "set title '%s: GPU allocation vs arrived demand'\n", workload);
	fprintf(gp, "set xlabel 'arrived GPU demand (%% of capacity)'\n"
	            "set ylabel 'GPUs allocated (%% of capacity)'\n"
	            "set key left top\nset grid\nset xrange [0:130]\nset yrange [0:100]\n");
	fprintf(gp, "plot ");
	size_t b = 0;
	for (size_t i = 0; i < ng; i++)
		if (strcmp(g[i].workload, workload) == 0) {
			fprintf(gp, "%s'%s' index %zu with lines lw 2 title '%s'", b ? ", " : "",
			        dat, b, g[i].policy);
			b++;
		}
	fprintf(gp, "\n");
	return pclose(gp) == 0 ? 0 : -1;
}

int sc_report_plot(const char *dir, const sc_sim_result_t *rs, size_t n)
{
	if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "starcloud simulate: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	group_t *g = calloc(n ? n : 1, sizeof(*g));
	if (!g)
		return -1;
	size_t ng = group_results(rs, n, g);
	int rc = 0;
	for (size_t i = 0; i < ng && rc == 0; i++) {
		bool first = true;
		for (size_t j = 0; j < i; j++)
			first = first && strcmp(g[j].workload, g[i].workload) != 0;
		if (first && write_plot(dir, g, ng, g[i].workload) != 0) {
			fprintf(stderr, "starcloud simulate: plotting %s with gnuplot failed\n",
			        g[i].workload);
			rc = -1;
		}
	}
	free(g);
	return rc;
}
