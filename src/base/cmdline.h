/* A command line read with a command's flag table (base/flags.h): the
 * defaults, then a configuration file (base/flagfile.h), then the
 * environment, then argv; --help, --help-man and --help-words
 * (base/flagdoc.h). Above the three, so that none of them calls back up. */
#ifndef SC_BASE_CMDLINE_H
#define SC_BASE_CMDLINE_H

#include "base/flags.h"

/* Fills opts from the defaults, the configuration file of a SC_FLAG_CONFIG
 * flag (base/flagfile.h), the environment and argv (argv[0] is the
 * command's name), each over the one before. Positional arguments are moved to argv[1..*nargs] in
 * order (nargs may be NULL when cmd->max_args is 0); "--" ends the flags.
 * Returns 0 to run, 1 after printing --help to stdout, or SC_EINVAL after
 * printing one line to stderr that names the flag and what it expects.
 * opts is written only through the table; a bad flag may leave earlier
 * flags applied, so callers start from a zeroed struct and stop on error. */
int sc_flags_parse(const sc_command_t *cmd, void *opts, int argc, char **argv, int *nargs);

#endif
