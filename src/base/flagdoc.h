/* Documentation generated from flag tables (base/flags.h): the OPTIONS of
 * a man page and the words of shell completion, so that man pages,
 * completion and --help can never disagree. scripts/gen-docs.sh assembles
 * the pages at build time through two hidden flags every command's parser
 * understands: `--help-man` (sc_flags_man) and `--help-words`
 * (sc_flags_words). */
#ifndef SC_BASE_FLAGDOC_H
#define SC_BASE_FLAGDOC_H

#include <stdio.h>

#include "base/flags.h"

/* One command as a roff section: a .SS heading with the usage line, the
 * about paragraph, each flag as a .TP entry (value, help, default,
 * environment variable) and the footer. Hidden flags are left out. */
void sc_flags_man(const sc_command_t *cmd, FILE *out);

/* The command's flags for completion, one per line:
 *   NAME<TAB>ALIAS<TAB>VALUE<TAB>HELP
 * ALIAS is "-" when there is none; VALUE is "-" for a switch, "file" for a
 * flag whose value names a file or folder, the choices separated by
 * spaces for a choice (or a free flag that lists its usual values in
 * .choices), and "any" otherwise; HELP is the first line of its help. */
void sc_flags_words(const sc_command_t *cmd, FILE *out);

#endif
