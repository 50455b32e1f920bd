/* Writers for simulation results. See sim_report.h. */
#include "cli/sim_report.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "cli/cli_simtime.h"

/* Percents of arrived demand reported without --curve. */
static const int alloc_keys[] = {100, 130};
static const int frag_keys[] = {50, 90, 100, 130};

/* Unallocated GPUs at 130 % arrived demand (NAN when the run stopped
 * short of it). */
static double unalloc_130(const sc_sim_result_t *r)
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

/* The bound computed for r's workload and seed, or NULL. */
static const sc_sim_bound_t *bound_of(const sc_report_t *rep, const sc_sim_result_t *r)
{
	for (size_t i = 0; i < rep->nbounds; i++)
		if (rep->bounds[i].seed == r->seed &&
		    strcmp(rep->bounds[i].workload, r->workload) == 0)
			return &rep->bounds[i];
	return NULL;
}

static void json_run(FILE *out, const sc_report_t *rep, const sc_sim_result_t *r, bool curve)
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
	json_num(out, unalloc_130(r), 1);
	fprintf(out, ", \"final_alloc_pct\": %.2f, \"arrived_pct\": %.2f", r->final_alloc,
	        r->arrived_pct);
	const sc_sim_bound_t *b = bound_of(rep, r);
	if (b)
		fprintf(out,
		        ", \"bound_pct\": %.2f, \"bound_offline_pct\": %.2f, \"forced_pct\": %.2f",
		        b->bound_pct, b->offline_pct, b->forced_pct);
	fprintf(out, ", \"pods\": %zu, \"failed_pods\": %zu, \"wall_seconds\": %.3f}\n", r->pods,
	        r->failed_pods, r->wall_seconds);
}

void sc_report_json(FILE *out, const sc_report_t *rep, bool curve)
{
	for (size_t i = 0; i < rep->n; i++)
		json_run(out, rep, &rep->rs[i], curve);
}

int sc_report_csv(FILE *f, const char *name, const sc_report_t *rep, bool curve)
{
	fputs("workload,policy,seed,total_gpus,alloc_pct_100,alloc_pct_130,frag_pct_50,"
	      "frag_pct_90,frag_pct_100,frag_pct_130,unallocated_gpus_at_130,pods,failed_pods,"
	      "wall_seconds,final_alloc_pct,arrived_pct",
	      f);
	if (rep->bounds)
		fputs(",bound_pct,bound_offline_pct,forced_pct", f);
	for (int k = 0; curve && k <= SC_SIM_CURVE_MAX; k++)
		fprintf(f, ",alloc_%d", k);
	fputc('\n', f);
	for (size_t i = 0; i < rep->n; i++) {
		const sc_sim_result_t *r = &rep->rs[i];
		fprintf(f, "%s,%s,%llu,%d", r->workload, r->policy, (unsigned long long)r->seed,
		        r->total_gpus);
		double v[] = {sc_sim_curve_at(r->alloc, 100),
		              sc_sim_curve_at(r->alloc, 130),
		              sc_sim_curve_at(r->frag, 50),
		              sc_sim_curve_at(r->frag, 90),
		              sc_sim_curve_at(r->frag, 100),
		              sc_sim_curve_at(r->frag, 130),
		              unalloc_130(r)};
		for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++)
			isnan(v[k]) ? fputs(",", f) : fprintf(f, ",%.2f", v[k]);
		fprintf(f, ",%zu,%zu,%.3f,%.4f,%.4f", r->pods, r->failed_pods, r->wall_seconds,
		        r->final_alloc, r->arrived_pct);
		const sc_sim_bound_t *b = bound_of(rep, r);
		if (rep->bounds && b)
			fprintf(f, ",%.2f,%.2f,%.2f", b->bound_pct, b->offline_pct, b->forced_pct);
		else if (rep->bounds)
			fputs(",,,", f);
		for (int k = 0; curve && k <= SC_SIM_CURVE_MAX; k++)
			isnan(r->alloc[k]) ? fputs(",", f) : fprintf(f, ",%.2f", r->alloc[k]);
		fputc('\n', f);
	}
	int bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		fprintf(stderr, "starcloud simulate: --csv %s: write failed\n", name);
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
		x->unalloc += isnan(unalloc_130(&rs[i])) ? 0 : unalloc_130(&rs[i]);
		x->failed += (double)rs[i].failed_pods;
		x->wall += rs[i].wall_seconds;
	}
	return ng;
}

static double gmean(const group_t *g, int k)
{
	return g->nalloc[k] ? g->alloc[k] / (double)g->nalloc[k] : NAN;
}

static const group_t *find_group(const group_t *g, size_t ng, const char *workload,
                                 const char *policy)
{
	for (size_t i = 0; i < ng; i++)
		if (strcmp(g[i].workload, workload) == 0 && strcmp(g[i].policy, policy) == 0)
			return &g[i];
	return NULL;
}

/* Whether g[i] is the first group of its workload (workloads are reported
 * in first-seen order, once each). */
static bool first_of_workload(const group_t *g, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (strcmp(g[j].workload, g[i].workload) == 0)
			return false;
	return true;
}

/* default - fgd per percent of arrived demand (means over seeds; NAN where
 * either is absent). False when the workload lacks one of them. */
static bool diff_curve(const group_t *g, size_t ng, const char *workload,
                       double d[SC_SIM_CURVE_MAX + 1])
{
	const group_t *a = find_group(g, ng, workload, "default");
	const group_t *b = find_group(g, ng, workload, "fgd");
	if (!a || !b)
		return false;
	for (int k = 0; k <= SC_SIM_CURVE_MAX; k++)
		d[k] = gmean(a, k) - gmean(b, k);
	return true;
}

/* The most a curve of differences falls below zero, where, and at how
 * many percents it is more than `tol` below. */
static double diff_min(const double *d, int *at, int *behind, double tol)
{
	double m = NAN;
	*at = -1;
	*behind = 0;
	for (int k = 0; k <= SC_SIM_CURVE_MAX; k++) {
		if (isnan(d[k]))
			continue;
		if (isnan(m) || d[k] < m) {
			m = d[k];
			*at = k;
		}
		*behind += d[k] < -tol;
	}
	return m;
}

static void table_diff(FILE *out, const group_t *g, size_t ng)
{
	static const int at[] = {50, 80, 90, 95, 100, 110, 130};
	bool header = false;
	for (size_t i = 0; i < ng; i++) {
		double d[SC_SIM_CURVE_MAX + 1];
		if (!first_of_workload(g, i) || !diff_curve(g, ng, g[i].workload, d))
			continue;
		if (!header) {
			fprintf(out,
			        "\ndefault - fgd (points of capacity, mean over seeds) by arrived "
			        "demand; BEHIND: percents where it is below -0.1\n");
			fprintf(out, "%-28s %7s %4s", "WORKLOAD", "MIN", "AT");
			for (size_t k = 0; k < sizeof(at) / sizeof(*at); k++)
				fprintf(out, " %5s%d", "@", at[k]);
			fprintf(out, " %6s\n", "BEHIND");
			header = true;
		}
		int where, behind;
		double m = diff_min(d, &where, &behind, 0.1);
		fprintf(out, "%-28s %+7.2f %3d%%", g[i].workload, m, where);
		for (size_t k = 0; k < sizeof(at) / sizeof(*at); k++)
			fprintf(out, " %+*.2f", at[k] < 100 ? 6 : 7, sc_sim_curve_at(d, at[k]));
		fprintf(out, " %6d\n", behind);
	}
}

static void table_bound(FILE *out, const sc_report_t *rep, const group_t *g, size_t ng)
{
	if (!rep->bounds)
		return;
	fprintf(out, "\nupper bound on GPUs any policy allocates (after the last pod; means over "
	             "seeds, policies at 130 %%):\n");
	for (size_t i = 0; i < rep->nbounds; i++) {
		const char *w = rep->bounds[i].workload;
		bool first = true;
		for (size_t j = 0; j < i && first; j++)
			first = strcmp(rep->bounds[j].workload, w) != 0;
		if (!first)
			continue;
		double b = 0, off = 0, forced = 0, unforced = 0;
		size_t n = 0;
		for (size_t j = i; j < rep->nbounds; j++)
			if (strcmp(rep->bounds[j].workload, w) == 0) {
				b += rep->bounds[j].bound_pct;
				off += rep->bounds[j].offline_pct;
				forced += rep->bounds[j].forced_pct;
				unforced += rep->bounds[j].first_unforced_pct;
				n++;
			}
		fprintf(out, "%s:", w);
		for (size_t k = 0; k < ng; k++)
			if (strcmp(g[k].workload, w) == 0)
				fprintf(out, " %s %.2f %%,", g[k].policy, gmean(&g[k], 130));
		fprintf(out,
		        " bound %.2f %% (%zu seeds; forced pods %.1f %% of capacity, the first "
		        "unforced at %.1f %% arrived; offline relaxation %.2f %%)\n",
		        b / (double)n, n, forced / (double)n, unforced / (double)n,
		        off / (double)n);
	}
}

void sc_report_table(FILE *out, const sc_report_t *rep)
{
	group_t *g = sc_xcalloc(rep->n ? rep->n : 1, sizeof(*g));
	size_t ng = group_results(rep->rs, rep->n, g);
	fprintf(out, "%-28s %-14s %5s %9s %9s %8s %10s %8s %7s\n", "WORKLOAD", "POLICY", "SEEDS",
	        "ALLOC@100", "ALLOC@130", "FRAG@90", "UNALLOC130", "FAILED", "WALL_S");
	for (size_t i = 0; i < ng; i++) {
		double d = (double)g[i].n;
		fprintf(out, "%-28s %-14s %5zu %8.2f%% %8.2f%% %7.2f%% %10.1f %8.1f %7.2f\n",
		        g[i].workload, g[i].policy, g[i].n, gmean(&g[i], 100), gmean(&g[i], 130),
		        g[i].frag90 / d, g[i].unalloc / d, g[i].failed / d, g[i].wall / d);
	}
	table_diff(out, g, ng);
	table_bound(out, rep, g, ng);
	free(g);
}

/* ---- plots -------------------------------------------------------------- */

/* A file name inside a gnuplot single-quoted string: ' is written ''. */
static void gp_quoted(FILE *gp, const char *s)
{
	fputc('\'', gp);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', gp);
		fputc(*s, gp);
	}
	fputc('\'', gp);
}

static int write_data(const char *dat, const group_t *g, size_t ng, const char *workload,
                      const double *d)
{
	FILE *f = fopen(dat, "w");
	if (!f)
		return -1;
	/* One gnuplot data block per policy, separated by two blank lines;
	 * the difference curve, when there is one, last. */
	size_t blocks = 0;
	for (size_t i = 0; i < ng; i++) {
		if (strcmp(g[i].workload, workload) != 0)
			continue;
		fprintf(f, "%s# %s\n", blocks++ ? "\n\n" : "", g[i].policy);
		for (int k = 0; k <= SC_SIM_CURVE_MAX; k++)
			if (g[i].nalloc[k])
				fprintf(f, "%d %.3f\n", k, gmean(&g[i], k));
	}
	if (d) {
		fprintf(f, "\n\n# default - fgd\n");
		for (int k = 0; k <= SC_SIM_CURVE_MAX; k++)
			if (!isnan(d[k]))
				fprintf(f, "%d %.3f\n", k, d[k]);
	}
	int bad = ferror(f);
	return fclose(f) != 0 || bad ? -1 : 0;
}

static int write_plot(const char *dir, const group_t *g, size_t ng, const char *workload)
{
	char dat[4096], png[4096];
	snprintf(dat, sizeof(dat), "%s/%s.dat", dir, workload);
	snprintf(png, sizeof(png), "%s/%s.png", dir, workload);
	double d[SC_SIM_CURVE_MAX + 1];
	bool diff = diff_curve(g, ng, workload, d);
	if (write_data(dat, g, ng, workload, diff ? d : NULL) != 0)
		return -1;
	FILE *gp = popen("gnuplot", "w");
	if (!gp)
		return -1;
	fprintf(gp, "set terminal png size 900,%d\nset output ", diff ? 860 : 600);
	gp_quoted(gp, png);
	fprintf(gp, "\nset grid\nset xrange [0:130]\n");
	if (diff)
		fprintf(gp, "set multiplot\nset size 1,0.66\nset origin 0,0.34\n");
	fprintf(gp, "set title '%s: GPU allocation vs arrived demand'\n", workload);
	fprintf(gp, "set xlabel 'arrived GPU demand (%% of capacity)'\n"
	            "set ylabel 'GPUs allocated (%% of capacity)'\n"
	            "set key left top\nset yrange [0:100]\n");
	fprintf(gp, "plot ");
	size_t b = 0;
	for (size_t i = 0; i < ng; i++)
		if (strcmp(g[i].workload, workload) == 0) {
			fprintf(gp, "%s", b ? ", " : "");
			gp_quoted(gp, dat);
			fprintf(gp, " index %zu with lines lw 2 title '%s'", b, g[i].policy);
			b++;
		}
	fprintf(gp, "\n");
	if (diff) {
		fprintf(gp, "set size 1,0.34\nset origin 0,0\nset title 'default - fgd'\n"
		            "set ylabel 'points of capacity'\nset yrange [*:*]\nunset key\n"
		            "plot 0 with lines lc rgb 'black' notitle, ");
		gp_quoted(gp, dat);
		fprintf(gp, " index %zu with lines lw 2 lc rgb 'dark-red'\nunset multiplot\n", b);
	}
	return pclose(gp) == 0 ? 0 : -1;
}

/* diff.png: the difference curve of every workload that has one. */
static int write_diff_overview(const char *dir, const group_t *g, size_t ng)
{
	char dat[4096], png[4096];
	snprintf(dat, sizeof(dat), "%s/diff.dat", dir);
	snprintf(png, sizeof(png), "%s/diff.png", dir);
	FILE *f = fopen(dat, "w");
	if (!f)
		return -1;
	size_t blocks = 0;
	for (size_t i = 0; i < ng; i++) {
		double d[SC_SIM_CURVE_MAX + 1];
		if (!first_of_workload(g, i) || !diff_curve(g, ng, g[i].workload, d))
			continue;
		fprintf(f, "%s# %s\n", blocks++ ? "\n\n" : "", g[i].workload);
		for (int k = 0; k <= SC_SIM_CURVE_MAX; k++)
			if (!isnan(d[k]))
				fprintf(f, "%d %.3f\n", k, d[k]);
	}
	int bad = ferror(f);
	if (fclose(f) != 0 || bad)
		return -1;
	if (blocks < 2)
		return 0;
	FILE *gp = popen("gnuplot", "w");
	if (!gp)
		return -1;
	fprintf(gp, "set terminal png size 1100,700\nset output ");
	gp_quoted(gp, png);
	fprintf(gp, "\nset title 'default - fgd, mean over seeds'\nset grid\nset xrange [0:130]\n"
	            "set xlabel 'arrived GPU demand (%% of capacity)'\n"
	            "set ylabel 'points of capacity'\nset key outside right\n"
	            "plot 0 with lines lc rgb 'black' notitle");
	size_t b = 0;
	for (size_t i = 0; i < ng; i++) {
		double d[SC_SIM_CURVE_MAX + 1];
		if (!first_of_workload(g, i) || !diff_curve(g, ng, g[i].workload, d))
			continue;
		const char *t = strncmp(g[i].workload, "openb_pod_list_", 15) == 0
		                    ? g[i].workload + 15
		                    : g[i].workload;
		fprintf(gp, ", ");
		gp_quoted(gp, dat);
		fprintf(gp, " index %zu with lines lw 1.5 title '%s'", b++, t);
	}
	fprintf(gp, "\n");
	return pclose(gp) == 0 ? 0 : -1;
}

/* True when name is an executable file in a folder of $PATH. */
static bool have_program(const char *name)
{
	const char *path = getenv("PATH");
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path && *path ? path : "/usr/bin:/bin");
	for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		char full[4096];
		snprintf(full, sizeof(full), "%s/%s", *d ? d : ".", name);
		if (access(full, X_OK) == 0)
			return true;
	}
	return false;
}

int sc_report_plot_check(const char *dir)
{
	if (strpbrk(dir, "\n\r"))
		return sc_sim_bad("--plot: \"%s\": a folder name with a line break", dir);
	if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "starcloud simulate: --plot %s: cannot create the folder: %s\n",
		        dir, strerror(errno));
		return 2;
	}
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return sc_sim_bad("--plot %s: not a folder", dir);
	/* access() says yes to root on a read-only file system; a file made
	 * and removed again is the real test. */
	char probe[4096];
	snprintf(probe, sizeof(probe), "%s/.starcloud-probe-%ld", dir, (long)getpid());
	int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		fprintf(stderr, "starcloud simulate: --plot %s: cannot write there: %s\n", dir,
		        strerror(errno));
		return 2;
	}
	close(fd);
	unlink(probe);
	if (!have_program("gnuplot"))
		return sc_sim_bad("--plot %s: gnuplot is not installed (Debian: gnuplot-nox)", dir);
	return 0;
}

int sc_report_plot(const char *dir, const sc_report_t *rep)
{
	group_t *g = sc_xcalloc(rep->n ? rep->n : 1, sizeof(*g));
	size_t ng = group_results(rep->rs, rep->n, g);
	int rc = 0;
	for (size_t i = 0; i < ng && rc == 0; i++)
		if (first_of_workload(g, i) && write_plot(dir, g, ng, g[i].workload) != 0) {
			fprintf(stderr, "starcloud simulate: plotting %s with gnuplot failed\n",
			        g[i].workload);
			rc = -1;
		}
	if (rc == 0 && write_diff_overview(dir, g, ng) != 0) {
		fprintf(stderr, "starcloud simulate: plotting diff.png with gnuplot failed\n");
		rc = -1;
	}
	free(g);
	return rc;
}
