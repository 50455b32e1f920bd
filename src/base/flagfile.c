/* Configuration files for flags (see flagfile.h). */
#include "base/flagfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/yamljson.h"
#include "starcloud/error.h"

/* Documents loaded for this process. They are never freed: STR flags
 * borrow their strings, and options live as long as the process (a daemon
 * loads one file). Kept in a list so they stay reachable. */
static sc_yj_docs_t **kept;
static size_t nkept;

static int keep(sc_yj_docs_t *d)
{
	sc_yj_docs_t **k = realloc(kept, (nkept + 1) * sizeof(*kept));
	if (!k)
		return SC_ENOMEM;
	kept = k;
	kept[nkept++] = d;
	return 0;
}

typedef struct ctx {
	const sc_command_t *cmd;
	void *opts;
	const char *path;
	sc_yj_docs_t *docs;
} ctx_t;

static void report(const ctx_t *c, const char *fpath, const char *key, const char *msg)
{
	int line = 0, col = 0;
	sc_yj_pos(c->docs, 0, fpath, &line, &col);
	fprintf(stderr, "starcloud %s: %s:%d:%d: %s%s%s\n", c->cmd->name, c->path, line, col,
	        key ? key : "", key ? ": " : "", msg);
}

/* set_value's message starts with the flag's name ("--listen: expected
 * ..."); in a file the key already names it. */
static const char *without_flag(const char *err, const sc_flag_t *f)
{
	size_t n = strlen(f->name);
	if (strncmp(err, f->name, n) == 0 && err[n] == ':' && err[n + 1] == ' ')
		return err + n + 2;
	if (strncmp(err, f->name, n) == 0 && err[n] == ' ')
		return err + n + 1;
	return err;
}

/* The text a flag parser gets for a scalar. Strings as they are; whole
 * numbers written out exactly; other numbers only for numeric flags (whose
 * parser then says what it expects): for any other flag a YAML number has
 * lost its text (a version 1.10 reads as 1.1), so it must be quoted. */
static int scalar_text(const sc_flag_t *f, json_t *v, char *buf, size_t bufsz, const char **out,
                       const char **why)
{
	if (json_is_string(v)) {
		*out = json_string_value(v);
		return 0;
	}
	if (json_is_integer(v)) {
		snprintf(buf, bufsz, "%lld", (long long)json_integer_value(v));
		*out = buf;
		return 0;
	}
	if (json_is_real(v) &&
	    (f->kind == SC_FLAG_NUM || f->kind == SC_FLAG_INT || f->kind == SC_FLAG_I64 ||
	     f->kind == SC_FLAG_U64 || f->kind == SC_FLAG_DURATION || f->kind == SC_FLAG_SIZE)) {
		snprintf(buf, bufsz, "%.17g", json_real_value(v));
		*out = buf;
		return 0;
	}
	*why = json_is_real(v)   ? "write this value in quotes (as a number it would lose its text)"
	       : json_is_null(v) ? "expected a value, got nothing (remove the key for the default)"
	       : json_is_boolean(v) ? "true/false is only for switches; write the value"
	                            : "expected a single value, not a list or a mapping";
	return SC_EINVAL;
}

static int apply_one(ctx_t *c, const sc_flag_t *f, const char *key, const char *fpath, json_t *v)
{
	char buf[64], err[512];
	const char *text = NULL, *why = NULL;
	if (f->kind == SC_FLAG_BOOL) {
		if (!json_is_boolean(v)) {
			report(c, fpath, key, "expected true or false");
			return SC_EINVAL;
		}
		*(int *)((char *)c->opts + f->off) = json_is_true(v);
		return 0;
	}
	if (scalar_text(f, v, buf, sizeof(buf), &text, &why) < 0) {
		report(c, fpath, key, why);
		return SC_EINVAL;
	}
	if (sc_flags_set(c->cmd, f, c->opts, text, err, sizeof(err)) < 0) {
		report(c, fpath, key, without_flag(err, f));
		return SC_EINVAL;
	}
	return 0;
}

/* A key that is not a flag: the command's hook, element by element. */
static int apply_other(ctx_t *c, const char *key, json_t *v)
{
	char err[512] = "", epath[320];
	int rc = c->cmd->file_key ? 0 : SC_ENOTFOUND;
	size_t i = 0, n = json_is_array(v) ? json_array_size(v) : 1;
	if (rc == 0 && n == 0) /* an empty list: is the key known at all? */
		rc = c->cmd->file_key(c->opts, key, NULL, err, sizeof(err));
	for (; rc == 0 && i < n; i++)
		rc = c->cmd->file_key(c->opts, key, json_is_array(v) ? json_array_get(v, i) : v,
		                      err, sizeof(err));
	if (rc == 0)
		return 0;
	if (rc == SC_ENOTFOUND && i <= 1)
		snprintf(err, sizeof(err),
		         "unknown key (not an option of starcloud %s; see --help)", c->cmd->name);
	if (json_is_array(v) && i > 0)
		snprintf(epath, sizeof(epath), "%s[%zu]", key, i - 1);
	else
		snprintf(epath, sizeof(epath), "%s", key);
	report(c, epath, strchr(epath, '[') ? epath : key, err);
	return SC_EINVAL;
}

static int apply_key(ctx_t *c, const char *key, json_t *v)
{
	char fpath[300], epath[320];
	snprintf(fpath, sizeof(fpath), "%s", key);
	const sc_flag_t *f = sc_flags_find(c->cmd, key);
	if (!f || key[0] == '-' ||
	    (f->flags & (SC_FLAG_HIDDEN | SC_FLAG_CONFIG | SC_FLAG_NOFILE)) ||
	    strcmp(sc_flag_key(f), key) != 0)
		return apply_other(c, key, v);
	if (!json_is_array(v))
		return apply_one(c, f, key, fpath, v);
	if (!(f->flags & SC_FLAG_REPEAT)) {
		report(c, fpath, key, "takes one value, not a list");
		return SC_EINVAL;
	}
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		snprintf(epath, sizeof(epath), "%s[%zu]", key, i);
		if (apply_one(c, f, key, epath, e) < 0)
			return SC_EINVAL;
	}
	return 0;
}

static int read_file(const char *path, char **text, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -errno;
	char *buf = malloc(SC_FLAGFILE_MAX + 1);
	if (!buf) {
		fclose(f);
		return SC_ENOMEM;
	}
	size_t n = fread(buf, 1, SC_FLAGFILE_MAX + 1, f);
	int bad = ferror(f);
	fclose(f);
	if (bad || n > SC_FLAGFILE_MAX) {
		free(buf);
		return bad ? SC_EIO : SC_ETOOBIG;
	}
	*text = buf;
	*len = n;
	return 0;
}

/* Applies the file at path to opts through cmd's table (see flagfile.h). */
static int load_file(const sc_command_t *cmd, void *opts, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	int rc = read_file(path, &text, &len);
	if (rc < 0) {
		fprintf(stderr, "starcloud %s: %s: %s\n", cmd->name, path,
		        rc == SC_ETOOBIG       ? "larger than 1 MiB"
		        : rc < 0 && rc > -4096 ? strerror(-rc)
		                               : sc_strerror(rc));
		return SC_EINVAL;
	}
	sc_yj_docs_t *docs = NULL;
	sc_yj_error_t yerr;
	rc = sc_yj_load(text, len, NULL, &docs, &yerr);
	free(text);
	if (rc < 0) {
		fprintf(stderr, "starcloud %s: %s:%d:%d: %s\n", cmd->name, path, yerr.line,
		        yerr.col, yerr.msg);
		return SC_EINVAL;
	}
	ctx_t c = {.cmd = cmd, .opts = opts, .path = path, .docs = docs};
	json_t *doc = sc_yj_count(docs) == 1 ? sc_yj_doc(docs, 0) : NULL;
	if (sc_yj_count(docs) == 0) { /* an empty file (all comments): the defaults */
		sc_yj_free(docs);
		return 0;
	}
	if (!json_is_object(doc)) {
		report(&c, "", NULL,
		       sc_yj_count(docs) > 1 ? "expected one document, found several"
		                             : "expected a mapping of option: value");
		sc_yj_free(docs);
		return SC_EINVAL;
	}
	const char *key;
	json_t *v;
	json_object_foreach(doc, key, v)
	{
		if (apply_key(&c, key, v) < 0) {
			sc_yj_free(docs);
			return SC_EINVAL;
		}
	}
	if (keep(docs) < 0) {
		fprintf(stderr, "starcloud %s: %s: out of memory\n", cmd->name, path);
		sc_yj_free(docs);
		return SC_EINVAL;
	}
	return 0;
}

int sc_flags_config_ok(const sc_command_t *cmd, const char *config)
{
	if (config)
		printf("starcloud %s: configuration OK (%s)\n", cmd->name, config);
	else
		printf("starcloud %s: configuration OK (flags only, no --config)\n", cmd->name);
	return 0;
}

int sc__flags_config_argv(const sc_command_t *cmd, void *opts, int argc, char **argv)
{
	const char *path = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0)
			break;
		for (size_t k = 0; k < cmd->nflags; k++) {
			const sc_flag_t *f = &cmd->flags[k];
			size_t n = f->name ? strlen(f->name) : 0;
			if (!(f->flags & SC_FLAG_CONFIG) || !n || strncmp(a, f->name, n) != 0)
				continue;
			if (a[n] == '=')
				path = a + n + 1;
			else if (a[n] == '\0' && i + 1 < argc)
				path = argv[++i];
		}
	}
	return path ? load_file(cmd, opts, path) : 0;
}
