/* `starcloud simulate --time`: the time mode (src/sim/timesim.c). */
#ifndef SC_CLI_SIMTIME_H
#define SC_CLI_SIMTIME_H

#include "base/flags.h"

/* Runs the time mode; argv[0] is "simulate" and some argument is --time.
 * Returns the exit status: 0, 1 when output failed, 2 on bad usage or input. */
int sc_cli_simulate_time(int argc, char **argv);
/* The time mode's flag table, for the verb's man page and completion. */
const sc_command_t *sc_cli_simulate_time_cmd(void);
/* Prints "starcloud simulate: " and fmt (one %s: arg) on stderr; returns 2,
 * the exit status for bad usage. Shared by both modes. */
int sc_sim_bad(const char *fmt, const char *arg) __attribute__((format(printf, 1, 0)));

#endif
