/* `starcloud audit [--data-dir DIR] [--denied] [--principal ID] [-o table|json]`
 *
 * Reads DATA/audit.log.1 (the rotated part, older) then DATA/audit.log on
 * the server's machine and prints one record a line: a table by default,
 * the JSON lines themselves with -o json. The log is the server's file
 * (mode 0600 in a 0700 folder), so this runs as the server's user; it is
 * not served over the API (an operator's record should not depend on the
 * API it records). A line that is not a JSON object (a torn last line
 * after a crash) is skipped with a note on stderr. */
#include "cli/cli_audit.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "base/cmdline.h"
#include "base/flags.h"
#include "base/version.h"
#include "cli/objinfo.h"

#define MAX_LINE 8192

typedef struct audit_opts {
	const char *data_dir;
	const char *principal;
	int denied;
	int output; /* 0 table, 1 json */
} audit_opts_t;

static const sc_flag_t audit_flags[] = {
    {.name = "--data-dir",
     SC_FLAG_AT(STR, audit_opts_t, data_dir),
     .meta = "DIR",
     .def = "starcloud-data",
     .help = "the server's data dir (holds audit.log)"},
    {.name = "--denied",
     SC_FLAG_AT(BOOL, audit_opts_t, denied),
     .help = "only refused requests (401 and 403)"},
    {.name = "--principal",
     SC_FLAG_AT(STR, audit_opts_t, principal),
     .meta = "ID",
     .help = "only this token id"},
    {.name = "--output",
     .alias = "-o",
     SC_FLAG_AT(CHOICE, audit_opts_t, output),
     .choices = "table|json",
     .def = "table",
     .help = "output format"},
};

static const sc_command_t audit_cmd = {
    .name = "audit",
    .about = "Prints the server's audit log: every write and every refused request\n"
             "(time, principal, role, verb, object, result), oldest first.",
    .flags = audit_flags,
    .nflags = sizeof(audit_flags) / sizeof(audit_flags[0]),
};

static const char *str(json_t *o, const char *k)
{
	return sc_obj_str(o, k, NULL, NULL);
}

static int wanted(const audit_opts_t *o, json_t *rec)
{
	json_int_t res = json_integer_value(json_object_get(rec, "result"));
	if (o->denied && res != 401 && res != 403)
		return 0;
	return !o->principal || strcmp(o->principal, str(rec, "principal")) == 0;
}

/* Prints the records of one file; 1 when it exists. */
static int print_file(const audit_opts_t *o, const char *path)
{
	char line[MAX_LINE];
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		json_t *rec = json_loads(line, 0, NULL);
		if (!json_is_object(rec)) {
			fprintf(stderr,
			        "starcloud audit: %s: skipped a line that is not a record\n", path);
			json_decref(rec);
			continue;
		}
		if (wanted(o, rec)) {
			if (o->output == 1)
				fputs(line, stdout);
			else
				printf(
				    "%-24s  %-16s  %-7s  %-6s  %-48s  %lld\n", str(rec, "time"),
				    sc_str_or(str(rec, "principal"), "-"),
				    sc_str_or(str(rec, "role"), "-"), str(rec, "verb"),
				    str(rec, "object"),
				    (long long)json_integer_value(json_object_get(rec, "result")));
		}
		json_decref(rec);
	}
	fclose(f);
	return 1;
}

int sc_cli_audit(int argc, char **argv)
{
	audit_opts_t o = {0};
	char path[1100];
	int rc = sc_flags_parse(&audit_cmd, &o, argc, argv, NULL);
	if (rc != 0)
		return rc > 0 ? SC_EXIT_OK : SC_EXIT_USAGE;
	if (o.output == 0)
		printf("%-24s  %-16s  %-7s  %-6s  %-48s  %s\n", "TIME", "PRINCIPAL", "ROLE", "VERB",
		       "OBJECT", "RESULT");
	snprintf(path, sizeof(path), "%s/audit.log.1", o.data_dir);
	print_file(&o, path);
	snprintf(path, sizeof(path), "%s/audit.log", o.data_dir);
	if (!print_file(&o, path)) {
		fprintf(stderr, "starcloud audit: cannot read %s (run as the server's user)\n",
		        path);
		return SC_EXIT_FAIL;
	}
	return SC_EXIT_OK;
}
