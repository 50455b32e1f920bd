#include "base/cmdline.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/flagdoc.h"
#include "base/flagfile.h"
#include "starcloud/error.h"

/* ---------------------------------------------------------------------
 * argv
 * ------------------------------------------------------------------- */

static bool wants_help(const char *a)
{
	return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

static int from_env(const sc_command_t *cmd, void *opts)
{
	char err[512];
	for (size_t i = 0; i < cmd->nflags; i++) {
		const sc_flag_t *f = &cmd->flags[i];
		const char *v = f->env ? getenv(f->env) : NULL;
		if (!v || !*v || f->kind == SC_FLAG_SECTION)
			continue;
		if (sc_flags_set(cmd, f, opts, v, err, sizeof(err)) < 0) {
			fprintf(stderr, "starcloud %s: $%s: %s\n", cmd->name, f->env, err);
			return SC_EINVAL;
		}
	}
	return 0;
}

int sc_flags_parse(const sc_command_t *cmd, void *opts, int argc, char **argv, int *nargs)
{
	int npos = 0;
	bool only_args = false;
	/* Defaults first, so that a table whose default its own flag refuses
	 * fails even `--help` (every command's --help is tested). */
	if (sc_flags_defaults(cmd, opts) < 0)
		return SC_EINVAL;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0)
			break;
		else if (wants_help(argv[i])) {
			sc_flags_usage(cmd, stdout);
			return 1;
		} else if (strcmp(argv[i], "--help-man") == 0) {
			sc_flags_man(cmd, stdout); /* for scripts/gen-docs.sh */
			return 1;
		} else if (strcmp(argv[i], "--help-words") == 0) {
			sc_flags_words(cmd, stdout);
			return 1;
		}
	/* The file under the environment and argv: a flag given at start-up
	 * wins over the file (an operator's one-off override). */
	if (sc__flags_config_argv(cmd, opts, argc, argv) < 0 || from_env(cmd, opts) < 0)
		return SC_EINVAL;
	char err[512];
	for (int i = 1; i < argc; i++) {
		char *a = argv[i];
		if (!only_args && strcmp(a, "--") == 0) {
			only_args = true;
			continue;
		}
		if (only_args || a[0] != '-' || a[1] == '\0') {
			if (npos >= cmd->max_args) {
				fprintf(stderr, "starcloud %s: unexpected argument \"%s\"\n",
				        cmd->name, a);
				return SC_EINVAL;
			}
			argv[1 + npos++] = a;
			continue;
		}
		/* --name=value is the same as --name value. */
		char name[128];
		const char *v = NULL;
		const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
		if (eq && (size_t)(eq - a) < sizeof(name)) {
			snprintf(name, sizeof(name), "%.*s", (int)(eq - a), a);
			v = eq + 1;
		} else
			snprintf(name, sizeof(name), "%s", a);
		const sc_flag_t *f = strlen(a) < sizeof(name) ? sc_flags_find(cmd, name) : NULL;
		if (!f || name[0] != '-') {
			fprintf(stderr, "starcloud %s: unknown option \"%s\" (see --help)\n",
			        cmd->name, a);
			return SC_EINVAL;
		}
		if (f->kind == SC_FLAG_BOOL && v) {
			fprintf(stderr, "starcloud %s: %s takes no value\n", cmd->name, f->name);
			return SC_EINVAL;
		}
		if (f->kind != SC_FLAG_BOOL && !v) {
			if (i + 1 >= argc) {
				fprintf(stderr, "starcloud %s: %s needs a value\n", cmd->name,
				        f->name);
				return SC_EINVAL;
			}
			v = argv[++i];
		}
		if (sc_flags_set(cmd, f, opts, v, err, sizeof(err)) < 0) {
			fprintf(stderr, "starcloud %s: %s\n", cmd->name, err);
			return SC_EINVAL;
		}
	}
	if (nargs)
		*nargs = npos;
	if (npos + 1 < argc)
		argv[npos + 1] = NULL;
	return 0;
}
