/* What every Starcloud daemon's /metrics carries besides its own figures,
 * in the Prometheus text format 0.0.4, written once for all of them:
 *
 *   starcloud_build_info{component,version[,extra]} 1
 *   process_cpu_seconds_total, process_resident_memory_bytes,
 *   process_virtual_memory_bytes, process_start_time_seconds,
 *   process_open_fds, process_max_fds
 *
 * The process_* family has the names and meanings of the Prometheus
 * client libraries' process collector, read from /proc/self, so the usual
 * dashboards and alerts on them work unchanged.
 *
 * Naming rules for our own metrics (docs/DASHBOARD.md): one prefix,
 * `starcloud_<component>_`; base units at the end of the name (seconds,
 * bytes, ratio for a 0..1 fraction); counters end in `_total`; every
 * family has HELP and TYPE. `promtool check metrics` runs on each daemon's
 * page in make test (tests/e2e/test_metric_names.py). */
#ifndef SC_NET_PROMTEXT_H
#define SC_NET_PROMTEXT_H

#include "starcloud/buf.h"

/* "# HELP name help\n# TYPE name type\n". */
void sc_prom_family(sc_buf_t *b, const char *name, const char *type, const char *help);

/* starcloud_build_info for component ("server", "agent", ...); extra is
 * "" or more labels, `key="value",...` (borrowed). */
void sc_prom_build_info(sc_buf_t *b, const char *component, const char *extra);

/* The process_* family of the calling process. A figure /proc does not
 * give (another kernel, a restricted /proc) is left out, not made up. */
void sc_prom_process(sc_buf_t *b);

#endif
