/* The `starcloud` command: one binary, one verb per subcommand.
 *
 * Adding a verb is one line in the table in main.c plus its function here:
 * `int sc_cli_<verb>(int argc, char **argv)`, where argv[0] is the verb's
 * name. A verb prints its own --help and returns an exit status
 * (SC_EXIT_*, base/version.h). */
#ifndef STARCLOUD_CLI_H
#define STARCLOUD_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "base/version.h"
#include "starcloud/manifest.h"

/* Verbs implemented in this binary. */
int sc_cli_schedule(int argc, char **argv);
int sc_cli_bench(int argc, char **argv);
/* `bench server` (bench_server.c); argv[0] is "server". */
int sc__bench_server(int argc, char **argv);

/* ---- helpers shared by verbs (cli_files.c) ---- */

/* Largest manifest file read, as in base/yamljson.h. */
#define SC_CLI_MAX_FILE (64u << 20)

/* Adds every manifest in path to set: a file, or a folder whose *.yaml,
 * *.yml and *.json files are read in name order (not recursively). Prints
 * "starcloud <verb>: file:line:col: object: field: message" to stderr on
 * failure. Returns an exit status. */
int sc__cli_load_path(sc_manifest_set_t *set, const char *verb, const char *path);

/* True when argv holds -h or --help (before a "--"). */
bool sc__cli_wants_help(int argc, char **argv);

#endif
