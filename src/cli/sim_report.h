/* Output of `starcloud simulate`: JSON lines, CSV, a terminal table and
 * gnuplot figures, from the results of packing runs. The JSON object per
 * run is the contract of ../shared/reference/interface.md. */
#ifndef SC_CLI_SIM_REPORT_H
#define SC_CLI_SIM_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "sim/bound.h"
#include "sim/packing.h"

/* The runs of one `simulate` and, with --bound, the bound of each
 * (workload, seed) they ran. All borrowed. */
typedef struct sc_report {
	const sc_sim_result_t *rs;
	size_t n;
	const sc_sim_bound_t *bounds; /* NULL without --bound */
	size_t nbounds;
} sc_report_t;

/* One JSON object per line; `curve` adds every percent 0..130; with
 * bounds, "bound_pct", "bound_offline_pct" and "forced_pct" of the run's
 * workload and seed. */
void sc_report_json(FILE *out, const sc_report_t *rep, bool curve);
/* CSV with a header line into f (opened by the caller before the runs, so
 * that a bad path is found first; name is for messages; f is closed
 * here); `curve` adds alloc_0..alloc_130 columns. Returns 0 or -1 with a
 * message on stderr. */
int sc_report_csv(FILE *f, const char *name, const sc_report_t *rep, bool curve);
/* Means over seeds per (workload, policy), in first-seen order; with both
 * `default` and `fgd`, their difference over arrived demand per workload;
 * with bounds, the bound per workload. */
void sc_report_table(FILE *out, const sc_report_t *rep);
/* One PNG per workload: allocation vs arrived demand, a line per policy
 * (mean over seeds), and below it the difference default - fgd when both
 * ran; with two or more such workloads also diff.png, every workload's
 * difference in one figure. Written by gnuplot into dir (which must
 * exist: sc_report_plot_check). Returns 0 or -1 with a message on stderr. */
int sc_report_plot(const char *dir, const sc_report_t *rep);
/* Before the runs: creates dir if needed and checks that it is a writable
 * folder and that gnuplot can be run. Returns 0, or 2 with a message
 * naming --plot on stderr. */
int sc_report_plot_check(const char *dir);

#endif
