/* Man page sections and completion words from flag tables (flagdoc.h). */
#include "base/flagdoc.h"

#include <string.h>

/* breaks: '\n' ends a line (a flag's help); otherwise it is only where
 * --help wraps a paragraph, and roff fills the paragraph itself. */
static void roff(FILE *out, const char *text, int breaks)
{
	int bol = 1;
	for (const char *p = text ? text : ""; *p; p++) {
		if (bol && (*p == '.' || *p == '\''))
			fputs("\\&", out);
		bol = 0;
		if (*p == '\\')
			fputs("\\e", out);
		else if (*p == '-')
			fputs("\\-", out);
		else if (*p == '\n' && breaks) {
			fputs("\n.br\n", out);
			bol = 1;
		} else if (*p == '\n')
			fputc(' ', out);
		else
			fputc(*p, out);
	}
}

static void roff_text(FILE *out, const char *text)
{
	roff(out, text, 1);
}

void sc_flags_man(const sc_command_t *cmd, FILE *out)
{
	fputs(".SS \"", out);
	roff_text(out, "starcloud ");
	roff_text(out, cmd->name);
	fputc(' ', out);
	roff_text(out, cmd->args ? cmd->args : "[options]");
	fputs("\"\n", out);
	if (cmd->about) {
		roff(out, cmd->about, 0);
		fputc('\n', out);
	}
	for (size_t i = 0; i < cmd->nflags; i++) {
		const sc_flag_t *f = &cmd->flags[i];
		if (f->flags & SC_FLAG_HIDDEN)
			continue;
		if (f->kind == SC_FLAG_SECTION) {
			fputs(".PP\n.I \"", out);
			roff_text(out, f->help);
			fputs("\"\n", out);
			continue;
		}
		fputs(".TP\n", out);
		if (f->alias) {
			fputs("\\fB", out);
			roff_text(out, f->alias);
			fputs("\\fR, ", out);
		}
		fputs("\\fB", out);
		roff_text(out, f->name);
		fputs("\\fR", out);
		if (*sc_flag_meta(f)) {
			fputs(" \\fI", out);
			roff_text(out, sc_flag_meta(f));
			fputs("\\fR", out);
		}
		fputc('\n', out);
		roff_text(out, f->help);
		if (f->def && f->kind != SC_FLAG_BOOL) {
			fputs(" (default ", out);
			roff_text(out, f->def);
			fputc(')', out);
		}
		if (f->env) {
			fputs("; environment \\fB", out);
			roff_text(out, f->env);
			fputs("\\fR", out);
		}
		if (f->flags & SC_FLAG_REPEAT)
			fputs("; may be repeated", out);
		fputc('\n', out);
	}
	if (cmd->footer) {
		fputs(".PP\n", out);
		roff(out, cmd->footer, 0);
		fputc('\n', out);
	}
}

/* A value that names a file or folder, from its metavariable. */
static int names_path(const char *m)
{
	return strstr(m, "FILE") || strstr(m, "DIR") || strstr(m, "PATH");
}

void sc_flags_words(const sc_command_t *cmd, FILE *out)
{
	for (size_t i = 0; i < cmd->nflags; i++) {
		const sc_flag_t *f = &cmd->flags[i];
		if (f->kind == SC_FLAG_SECTION || (f->flags & SC_FLAG_HIDDEN) || !f->name)
			continue;
		fprintf(out, "%s\t%s\t", f->name, f->alias ? f->alias : "-");
		if (f->kind == SC_FLAG_BOOL)
			fputs("-", out);
		else if (f->choices) /* a CHOICE, or the usual values of a free one */
			for (const char *p = f->choices; *p; p++)
				fputc(*p == '|' ? ' ' : *p, out);
		else
			fputs(names_path(sc_flag_meta(f)) ? "file" : "any", out);
		/* the help's first line, for shells that show descriptions */
		fprintf(out, "\t%.*s\n", (int)strcspn(f->help ? f->help : "", "\n"),
		        f->help ? f->help : "");
	}
}
