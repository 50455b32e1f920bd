/* `starcloud simulate --time`: the time mode (src/sim/timesim.c). */
#ifndef SC_CLI_SIMTIME_H
#define SC_CLI_SIMTIME_H

/* Runs the time mode; argv[0] is "simulate" and some argument is --time.
 * Returns the exit status: 0, 1 when output failed, 2 on bad usage or input. */
int sc_cli_simulate_time(int argc, char **argv);

#endif
