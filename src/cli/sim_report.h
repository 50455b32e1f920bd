/* Output of `starcloud simulate`: JSON lines, CSV, a terminal table and
 * gnuplot figures, from the results of packing runs. The JSON object per
 * run is the contract of ../shared/reference/interface.md. */
#ifndef SC_CLI_SIM_REPORT_H
#define SC_CLI_SIM_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "sim/packing.h"

/* One JSON object per line; `curve` adds every percent 0..130. */
void sc_report_json(FILE *out, const sc_sim_result_t *r, bool curve);
/* CSV with a header line; `curve` adds alloc_0..alloc_130 columns. */
int sc_report_csv(const char *path, const sc_sim_result_t *rs, size_t n, bool curve);
/* Means over seeds per (workload, policy), in first-seen order. */
void sc_report_table(FILE *out, const sc_sim_result_t *rs, size_t n);
/* One PNG per workload: allocation vs arrived demand, a line per policy
 * (mean over seeds), written by gnuplot into dir. Returns 0 or -1 with a
 * message on stderr. */
int sc_report_plot(const char *dir, const sc_sim_result_t *rs, size_t n);

/* Unallocated GPUs at 130 % arrived demand (NAN when the run stopped
 * short of it). */
double sc_report_unalloc_130(const sc_sim_result_t *r);

#endif
