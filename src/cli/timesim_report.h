/* Output of the time mode: table, JSON, per-job CSV and gnuplot PNGs. */
#ifndef SC_CLI_TIMESIM_REPORT_H
#define SC_CLI_TIMESIM_REPORT_H

#include <stdbool.h>

#include "sim/jobs.h"
#include "sim/timesim.h"

/* Writes the table (or JSON with json) to stdout, the per-job CSV to csv
 * and the plots into plot_dir (either may be NULL). policy (enum
 * sc_tsim_policy) names the run in the JSON. Returns 0 or 1. */
int sc_treport_output(const sc_tsim_result_t *r, const sc_tjobs_t *jobs, int policy, bool json,
                      const char *csv, const char *plot_dir);

#endif
