/* `starcloud simulate`: the packing simulator on OpenB-format traces. */
#ifndef SC_CLI_SIMULATE_H
#define SC_CLI_SIMULATE_H

/* Runs the verb; argv[0] is "simulate". Returns the exit status: 0 on
 * success, 1 when a run failed, 2 on bad usage or bad input. */
int sc_cli_simulate(int argc, char **argv);

#endif
