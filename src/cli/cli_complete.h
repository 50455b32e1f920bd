/* `starcloud completion bash|zsh`: shell completion generated from the
 * verbs' flag tables (base/flagdoc.h, --help-words), so completion, --help
 * and the man pages can never disagree. scripts/gen-docs.sh installs the
 * bash one; `source <(starcloud completion zsh)` or a file in $fpath gives
 * the zsh one. Besides verbs and flags (choices, files), it completes
 * kinds after get/describe/delete/explain/top and object names after a
 * kind, asking the server (`starcloud get KIND -o name`) as kubectl does. */
#ifndef SC_CLI_CLI_COMPLETE_H
#define SC_CLI_CLI_COMPLETE_H

#include <stddef.h>

typedef struct sc_cli_verb_info {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv); /* NULL: not in this build */
} sc_cli_verb_info_t;

/* The verb: argv[1] is "bash" or "zsh". verbs are the binary's verb table;
 * each verb is run in a child process with --help-words to read its
 * flags. Returns an exit status. */
int sc__cli_completion(int argc, char **argv, const sc_cli_verb_info_t *verbs, size_t n);

#endif
