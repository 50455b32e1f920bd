/* Configuration files for a command's flags (base/flags.h).
 *
 * A daemon's configuration file is YAML (or JSON) whose top-level keys are
 * the command's flags without their dashes, checked by the same table and
 * the same parsers as the command line:
 *
 *   listen: 0.0.0.0:7070          # --listen 0.0.0.0:7070
 *   heartbeat: 1s                 # --heartbeat 1s
 *   drain: true                   # --drain (false: the switch stays off)
 *   backend:                      # a repeatable flag: a list of values
 *     - model=m,version=1,url=http://10.0.0.5:9000
 *
 * A command takes a file with a flag marked SC_FLAG_CONFIG (`--config
 * FILE`); sc_flags_parse() applies the file after the defaults and before
 * the environment and the command line, so a flag given on the command
 * line wins over the file, and a repeatable flag's values add to the
 * file's list. Anything wrong is reported as FILE:LINE:COL (as manifests
 * are) and the command does not run:
 *
 *   starcloud server: /etc/starcloud/server.yaml:3:9: listen: expected HOST:PORT, got "x"
 *
 * Keys that are not flags are refused unless the command's file_key hook
 * takes them (the gateway's structured `backends` and `rollouts`; a list
 * is given to the hook one element at a time, so an error points at the
 * element). Values are kept for the life of the process: flags of kind
 * STR borrow them.
 *
 * Every daemon carries the same two flags, SC_FLAGS_CONFIG: --config FILE
 * and --check-config, which checks the flags and the file the way a start
 * would and exits (0 and "configuration OK", or 2 and the first error)
 * without starting anything. */
#ifndef SC_BASE_FLAGFILE_H
#define SC_BASE_FLAGFILE_H

#include "base/flags.h"

/* The --config and --check-config entries of a daemon's flag table, for
 * an options struct T with `const char *config` and `int check_config`. */
#define SC_FLAGS_CONFIG(T)                                                                         \
	{.name = "--config",                                                                       \
	 SC_FLAG_AT(STR, T, config),                                                               \
	 .meta = "FILE",                                                                           \
	 .flags = SC_FLAG_CONFIG | SC_FLAG_NOFILE,                                                 \
	 .help = "YAML file of these options (keys without the dashes);\n"                         \
	         "flags given here win over it"},                                                  \
	{                                                                                          \
		.name = "--check-config", SC_FLAG_AT(BOOL, T, check_config),                       \
		.flags = SC_FLAG_NOFILE,                                                           \
		.help = "check the options and the file as a start would, then exit"               \
	}

/* For --check-config, once every check a start makes has passed: prints
 * "starcloud NAME: configuration OK (FILE)" and returns SC_EXIT_OK. */
int sc_flags_config_ok(const sc_command_t *cmd, const char *config);

/* Largest configuration file read. */
#define SC_FLAGFILE_MAX (1u << 20)

/* For sc_flags_parse: finds the command's SC_FLAG_CONFIG flag in argv (the
 * last one before "--") and applies its file to opts. 0 when there is
 * none or it applied; SC_EINVAL after one message on stderr ("starcloud
 * NAME: FILE:LINE:COL: KEY: what"), opts then partly written. */
int sc__flags_config_argv(const sc_command_t *cmd, void *opts, int argc, char **argv);

#endif
