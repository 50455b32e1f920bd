/* `starcloud simulate --time`: the time mode (src/sim/timesim.c). */
#ifndef SC_CLI_SIMTIME_H
#define SC_CLI_SIMTIME_H

/* Runs the time mode; argv[0] is "simulate" and some argument is --time.
 * Returns the exit status: 0, 1 when output failed, 2 on bad usage or input. */
int sc_cli_simulate_time(int argc, char **argv);
/* Prints "starcloud simulate: " and fmt (one %s: arg) on stderr; returns 2,
 * the exit status for bad usage. Shared by both modes. */
int sc_sim_bad(const char *fmt, const char *arg) __attribute__((format(printf, 1, 0)));

#endif
