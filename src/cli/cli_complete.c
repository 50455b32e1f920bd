/* Shell completion from the flag tables (see cli_complete.h).
 *
 * Each verb is asked for its flags the way scripts/gen-docs.sh always did
 * (`starcloud VERB --help-words`), but in a forked child of this process:
 * the verbs' tables stay private to their files, and a verb without a
 * table (version, simulate) simply answers nothing. The scripts then
 * complete, for the verb being typed: a flag's value (its choices, a file,
 * nothing for free text), the verb's flags after a '-', and otherwise its
 * positional arguments (kinds, then object names from the server). */
#include "cli/cli_complete.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/version.h"
#include "starcloud/buf.h"

#define MAX_FLAGS 128

typedef struct flag_words {
	char *name, *alias, *value, *help;
} flag_words_t;

typedef struct verb_words {
	const sc_cli_verb_info_t *v;
	flag_words_t f[MAX_FLAGS];
	size_t n;
	char *text; /* owns the strings above */
} verb_words_t;

/* Runs `VERB --help-words` in a child and keeps its output; "" when the
 * verb has no flag table. */
static char *help_words(const sc_cli_verb_info_t *v)
{
	int fd[2];
	sc_buf_t b;
	sc_buf_init(&b, 1 << 20);
	fflush(stdout);
	if (!v->run || pipe(fd) < 0)
		return sc_xstrdup("");
	pid_t pid = fork();
	if (pid == 0) {
		char *argv[] = {(char *)v->name, "--help-words", NULL};
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		if (!freopen("/dev/null", "w", stderr))
			_exit(1);
		int rc = v->run(2, argv);
		fflush(stdout);
		_exit(rc == 0 ? 0 : 1);
	}
	close(fd[1]);
	char chunk[4096];
	ssize_t n;
	while (pid > 0 && (n = read(fd[0], chunk, sizeof(chunk))) > 0)
		sc_buf_append(&b, chunk, (size_t)n);
	close(fd[0]);
	int st = 1;
	if (pid > 0)
		waitpid(pid, &st, 0);
	if (pid <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		sc_buf_free(&b);
		return sc_xstrdup("");
	}
	sc_buf_append(&b, "", 0);
	return sc_buf_steal(&b, NULL);
}

static void parse_words(verb_words_t *w)
{
	char *line = w->text;
	while (*line && w->n < MAX_FLAGS) {
		char *end = strchr(line, '\n');
		if (end)
			*end = '\0';
		char *col[4] = {line, "", "", ""};
		for (int c = 1; c < 4; c++) {
			char *tab = strchr(col[c - 1], '\t');
			if (!tab)
				break;
			*tab = '\0';
			col[c] = tab + 1;
		}
		if (col[0][0] == '-')
			w->f[w->n++] = (flag_words_t){col[0], col[1], col[2], col[3]};
		if (!end)
			break;
		line = end + 1;
	}
}

/* True when the flag takes a value (its word after it is not positional). */
static int takes_value(const flag_words_t *f)
{
	return strcmp(f->value, "-") != 0;
}

static int has_alias(const flag_words_t *f)
{
	return f->alias[0] && strcmp(f->alias, "-") != 0;
}

/* The value flags of a verb, space-separated, aliases too. */
static void value_flags(const verb_words_t *w, FILE *out)
{
	for (size_t i = 0; i < w->n; i++)
		if (takes_value(&w->f[i]))
			fprintf(out, "%s%s%s ", w->f[i].name, has_alias(&w->f[i]) ? " " : "",
			        has_alias(&w->f[i]) ? w->f[i].alias : "");
}

/* ---- what the verbs take as arguments (both shells) --------------------- */

static const char kinds[] =
    "nodes queues jobs deployments events priorityclasses nodepools schedulerconfigs "
    "topologies";

/* A verb's arm of the script's case, up to the cases of its value flags:
 * both shells write the same arms and differ only in the command that
 * completes a file (files) and one that offers a flag's word list
 * (words_pre, the words, words_post). */
static void value_cases(const verb_words_t *w, FILE *out, const char *files, const char *words_pre,
                        const char *words_post)
{
	fprintf(out, "\t%s)\n\t\tcase $prev in\n", w->v->name);
	for (size_t k = 0; k < w->n; k++) {
		const flag_words_t *f = &w->f[k];
		if (!takes_value(f))
			continue;
		fprintf(out, "\t\t%s%s%s) ", f->name, has_alias(f) ? "|" : "",
		        has_alias(f) ? f->alias : "");
		if (strcmp(f->value, "file") == 0)
			fprintf(out, "%s; return ;;\n", files);
		else if (strcmp(f->value, "any") == 0)
			fprintf(out, "return ;;\n");
		else
			fprintf(out, "%s%s%s; return ;;\n", words_pre, f->value, words_post);
	}
}

/* ---- bash ---------------------------------------------------------------- */

static void bash_script(const verb_words_t *w, size_t n, FILE *out)
{
	fprintf(out,
	        "# bash completion for starcloud %s, generated from its flag tables\n"
	        "# (starcloud completion bash). Install as "
	        "/usr/share/bash-completion/completions/starcloud,\n"
	        "# or: source <(starcloud completion bash)\n\n",
	        SC_VERSION);
	fprintf(out,
	        "_starcloud_names() { # the objects of kind $1, from the server\n"
	        "\tcommand starcloud get \"$1\" -o name 2>/dev/null | sed 's|^[^/]*/||'\n"
	        "}\n\n"
	        "# pos: the positional words before the cursor ($1: the verb's value flags)\n"
	        "_starcloud_pos() {\n"
	        "\tlocal vflags=\" $1 \" i w skip=0\n"
	        "\tpos=()\n"
	        "\tfor ((i = 2; i < COMP_CWORD; i++)); do\n"
	        "\t\tw=${COMP_WORDS[i]}\n"
	        "\t\tif ((skip)); then skip=0; continue; fi\n"
	        "\t\tcase $w in\n"
	        "\t\t-*=*) ;;\n"
	        "\t\t-*) [[ $vflags == *\" $w \"* ]] && skip=1 ;;\n"
	        "\t\t*) pos+=(\"$w\") ;;\n"
	        "\t\tesac\n"
	        "\tdone\n"
	        "}\n\n"
	        "_starcloud_args() { # $1 verb\n"
	        "\tlocal cur=${COMP_WORDS[COMP_CWORD]} n=${#pos[@]} words=\n"
	        "\tcase $1 in\n"
	        "\tget|describe|delete) ((n == 0)) && words=\"%s\" || words=$(_starcloud_names "
	        "\"${pos[0]}\") ;;\n"
	        "\texplain) ((n == 0)) && words=\"job deployment\" || words=$(_starcloud_names "
	        "\"${pos[0]}s\") ;;\n"
	        "\ttop) ((n == 0)) && words=\"queues nodes\" ;;\n"
	        "\tlogs) ((n == 0)) && words=$(_starcloud_names jobs) ;;\n"
	        "\tdrain) ((n == 0)) && words=$(_starcloud_names nodes) ;;\n"
	        "\trollout) ((n == 0)) && words=\"status promote abort pause resume\" || "
	        "words=$(_starcloud_names deployments) ;;\n"
	        "\ttoken) ((n == 0)) && words=\"create list delete whoami\" ;;\n"
	        "\tcompletion) ((n == 0)) && words=\"bash zsh\" ;;\n"
	        "\tcontext) ((n == 0)) && words=$(command starcloud context 2>/dev/null | awk "
	        "'NR > 1 { print $2 }') ;;\n"
	        "\tapply|schedule|simulate) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
	        "\tesac\n"
	        "\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
	        "}\n\n",
	        kinds);
	fprintf(out, "_starcloud() {\n"
	             "\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} pos\n"
	             "\tif [ \"$COMP_CWORD\" -eq 1 ]; then COMPREPLY=($(compgen -W \"");
	for (size_t i = 0; i < n; i++)
		if (w[i].v->run)
			fprintf(out, "%s%s", i ? " " : "", w[i].v->name);
	fprintf(out, "\" -- \"$cur\")); return; fi\n\tcase ${COMP_WORDS[1]} in\n");
	for (size_t i = 0; i < n; i++) {
		if (!w[i].v->run)
			continue;
		value_cases(&w[i], out, "COMPREPLY=($(compgen -f -- \"$cur\"))",
		            "COMPREPLY=($(compgen -W \"", "\" -- \"$cur\"))");
		fprintf(out, "\t\tesac\n\t\tif [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"");
		for (size_t k = 0; k < w[i].n; k++)
			fprintf(out, "%s%s%s%s", k ? " " : "", w[i].f[k].name,
			        has_alias(&w[i].f[k]) ? " " : "",
			        has_alias(&w[i].f[k]) ? w[i].f[k].alias : "");
		fprintf(out, "\" -- \"$cur\")); return; fi\n\t\t_starcloud_pos \"");
		value_flags(&w[i], out);
		fprintf(out, "\"; _starcloud_args %s ;;\n", w[i].v->name);
	}
	fprintf(out, "\tesac\n}\ncomplete -F _starcloud starcloud\n");
}

/* ---- zsh ----------------------------------------------------------------- */

/* s inside single quotes, as a _describe entry's description (no colon
 * trouble after the first, which ends the name). */
static void zsh_quoted(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", out);
		else
			fputc(*s, out);
	}
}

static void zsh_script(const verb_words_t *w, size_t n, FILE *out)
{
	fprintf(out,
	        "#compdef starcloud\n"
	        "# zsh completion for starcloud %s, generated from its flag tables\n"
	        "# (starcloud completion zsh). Install as _starcloud in a folder of $fpath,\n"
	        "# or: source <(starcloud completion zsh)\n\n",
	        SC_VERSION);
	fprintf(
	    out,
	    "_starcloud_names() { # the objects of kind $1, from the server\n"
	    "\tlocal -a n\n"
	    "\tn=(${(f)\"$(command starcloud get $1 -o name 2>/dev/null)\"})\n"
	    "\tcompadd -- ${n#*/}\n"
	    "}\n\n"
	    "_starcloud_args() { # $1 verb, $2 its value flags\n"
	    "\tlocal -a pos\n"
	    "\tlocal i w skip=0\n"
	    "\tfor ((i = 3; i < CURRENT; i++)); do\n"
	    "\t\tw=$words[i]\n"
	    "\t\tif ((skip)); then skip=0; continue; fi\n"
	    "\t\tcase $w in\n"
	    "\t\t-*=*) ;;\n"
	    "\t\t-*) [[ \" $2 \" == *\" $w \"* ]] && skip=1 ;;\n"
	    "\t\t*) pos+=($w) ;;\n"
	    "\t\tesac\n"
	    "\tdone\n"
	    "\tlocal n=$#pos\n"
	    "\tcase $1 in\n"
	    "\tget|describe|delete) if ((n == 0)); then compadd -- %s; else _starcloud_names "
	    "$pos[1]; fi ;;\n"
	    "\texplain) if ((n == 0)); then compadd -- job deployment; else _starcloud_names "
	    "${pos[1]}s; fi ;;\n"
	    "\ttop) ((n == 0)) && compadd -- queues nodes ;;\n"
	    "\tlogs) ((n == 0)) && _starcloud_names jobs ;;\n"
	    "\tdrain) ((n == 0)) && _starcloud_names nodes ;;\n"
	    "\trollout) if ((n == 0)); then compadd -- status promote abort pause resume; "
	    "else _starcloud_names deployments; fi ;;\n"
	    "\ttoken) ((n == 0)) && compadd -- create list delete whoami ;;\n"
	    "\tcompletion) ((n == 0)) && compadd -- bash zsh ;;\n"
	    "\tcontext) ((n == 0)) && compadd -- ${(f)\"$(command starcloud context 2>/dev/null "
	    "| awk 'NR > 1 { print $2 }')\"} ;;\n"
	    "\tapply|schedule|simulate) _files ;;\n"
	    "\tesac\n"
	    "}\n\n",
	    kinds);
	fprintf(out, "_starcloud() {\n\tlocal -a verbs flags\n\tverbs=(\n");
	for (size_t i = 0; i < n; i++)
		if (w[i].v->run) {
			fprintf(out, "\t\t'%s:", w[i].v->name);
			zsh_quoted(out, w[i].v->summary);
			fprintf(out, "'\n");
		}
	fprintf(out, "\t)\n"
	             "\tif ((CURRENT == 2)); then _describe -t commands 'starcloud command' verbs; "
	             "return; fi\n"
	             "\tlocal cur=$words[CURRENT] prev=$words[CURRENT-1]\n"
	             "\tcase $words[2] in\n");
	for (size_t i = 0; i < n; i++) {
		if (!w[i].v->run)
			continue;
		value_cases(&w[i], out, "_files", "compadd -- ", "");
		fprintf(out, "\t\tesac\n\t\tif [[ $cur == -* ]]; then\n\t\t\tflags=(\n");
		for (size_t k = 0; k < w[i].n; k++) {
			const flag_words_t *f = &w[i].f[k];
			for (int a = 0; a < 1 + has_alias(f); a++) {
				fprintf(out, "\t\t\t\t'%s:", a ? f->alias : f->name);
				zsh_quoted(out, f->help);
				fprintf(out, "'\n");
			}
		}
		fprintf(out,
		        "\t\t\t)\n\t\t\t_describe -t flags 'flag' flags; return\n\t\tfi\n"
		        "\t\t_starcloud_args %s \"",
		        w[i].v->name);
		value_flags(&w[i], out);
		fprintf(out, "\" ;;\n");
	}
	fprintf(out, "\tesac\n}\n\n"
	             "if [[ $funcstack[1] == _starcloud ]]; then _starcloud \"$@\"; "
	             "else compdef _starcloud starcloud; fi\n");
}

int sc__cli_completion(int argc, char **argv, const sc_cli_verb_info_t *verbs, size_t n)
{
	if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		printf("usage: starcloud completion bash|zsh\n\n"
		       "Prints shell completion for starcloud, generated from its flag tables:\n"
		       "verbs, flags and their values, kinds, and object names read from the\n"
		       "server (`starcloud get KIND -o name`).\n\n"
		       "  bash: source <(starcloud completion bash), or save it as\n"
		       "        /usr/share/bash-completion/completions/starcloud\n"
		       "  zsh:  source <(starcloud completion zsh), or save it as _starcloud in a\n"
		       "        folder of $fpath\n");
		return SC_EXIT_OK;
	}
	if (argc == 2 && strcmp(argv[1], "--help-words") == 0)
		return SC_EXIT_OK; /* no flags: the shell word is positional */
	if (argc != 2 || (strcmp(argv[1], "bash") != 0 && strcmp(argv[1], "zsh") != 0)) {
		fprintf(stderr, "starcloud completion: expected bash or zsh\n");
		return SC_EXIT_USAGE;
	}
	verb_words_t *w = sc_xcalloc(n + 1, sizeof(*w));
	for (size_t i = 0; i < n; i++) {
		w[i].v = &verbs[i];
		w[i].text = help_words(&verbs[i]);
		parse_words(&w[i]);
	}
	if (strcmp(argv[1], "bash") == 0)
		bash_script(w, n, stdout);
	else
		zsh_script(w, n, stdout);
	for (size_t i = 0; i < n; i++)
		free(w[i].text);
	free(w);
	return SC_EXIT_OK;
}
