/* `starcloud worker`: the reference model worker (docs/WORKER.md). */
#ifndef SC_WORKER_WORKER_H
#define SC_WORKER_WORKER_H

/* The verb: serves a model, or writes a tiny checkpoint with
 * --gen-checkpoint. Returns an exit status (cli/cli.h). */
int sc_worker_main(int argc, char **argv);

#endif
