/* The client's configuration file and its contexts (see cli_config.h). */
#include "cli/cli_config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/yamljson.h"
#include "cli/objinfo.h"
#include "cli/table.h"

#define MAX_CONFIG (1u << 20)

int sc__cli_config_path(char *out, size_t outsz)
{
	const char *home = getenv("HOME");
	if (!home || !home[0])
		return -1;
	snprintf(out, outsz, "%s/.config/starcloud/config", home);
	return 0;
}

/* The file as one JSON object ({} when absent or empty); NULL when it
 * cannot be read (a message in err). */
static json_t *load(char *err, size_t errsz)
{
	char path[1024];
	if (sc__cli_config_path(path, sizeof(path)) < 0)
		return json_object();
	FILE *f = fopen(path, "rb");
	if (!f)
		return json_object(); /* no file yet: no settings */
	char *text = sc_xmalloc(MAX_CONFIG + 1);
	size_t n = fread(text, 1, MAX_CONFIG + 1, f);
	fclose(f);
	json_t *doc = NULL;
	sc_yj_docs_t *docs = NULL;
	sc_yj_error_t e;
	if (n > MAX_CONFIG) {
		snprintf(err, errsz, "%s: larger than %u bytes", path, MAX_CONFIG);
	} else if (sc_yj_load(text, n, NULL, &docs, &e) < 0) {
		snprintf(err, errsz, "%s:%d:%d: %s", path, e.line, e.col, e.msg);
	} else if (sc_yj_count(docs) == 0) {
		doc = json_object();
	} else if (!json_is_object(sc_yj_doc(docs, 0))) {
		snprintf(err, errsz, "%s: expected keys (server:, contexts:, ...)", path);
	} else {
		doc = json_incref(sc_yj_doc(docs, 0));
	}
	sc_yj_free(docs);
	free(text);
	return doc;
}

static const char *str(json_t *o, const char *k)
{
	return sc_obj_str(o, k, NULL, NULL);
}

/* The chosen context's object: the named one, the current one, or the
 * file's top level when it has no contexts. NULL with a message. */
static json_t *pick(json_t *doc, const char *context, char *err, size_t errsz)
{
	json_t *ctxs = json_object_get(doc, "contexts");
	const char *env = getenv("STARCLOUD_CONTEXT");
	const char *name = context && context[0] ? context : env && env[0] ? env : NULL;
	if (!name && str(doc, "current-context")[0])
		name = str(doc, "current-context");
	if (!name)
		return doc;
	json_t *c = json_object_get(ctxs, name);
	if (!json_is_object(c)) {
		snprintf(err, errsz,
		         "no context \"%s\" in ~/.config/starcloud/config (see "
		         "`starcloud context`; `starcloud login URL --context %s` adds it)",
		         name, name);
		return NULL;
	}
	return c;
}

static int read_token_file(const char *path, char *out, size_t outsz, char *err, size_t errsz)
{
	FILE *f = fopen(path, "r");
	char buf[1024];
	if (!f) {
		snprintf(err, errsz, "token-file %s: %s", path, strerror(errno));
		return -1;
	}
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	size_t s = strspn(buf, " \t\r\n"), e = strcspn(buf + s, " \t\r\n");
	snprintf(out, outsz, "%.*s", (int)e, buf + s);
	return 0;
}

int sc__cli_config_value(const char *context, const char *key, char *out, size_t outsz, char *err,
                         size_t errsz)
{
	out[0] = '\0';
	json_t *doc = load(err, errsz);
	if (!doc)
		return -1;
	json_t *c = pick(doc, context, err, errsz);
	int rc = c ? 0 : -1;
	if (c) {
		snprintf(out, outsz, "%s", str(c, key));
		if (!out[0] && strcmp(key, "token") == 0 && str(c, "token-file")[0])
			rc = read_token_file(str(c, "token-file"), out, outsz, err, errsz);
	}
	json_decref(doc);
	return rc;
}

/* ---- writing ---------------------------------------------------------- */

/* A YAML scalar: always double-quoted JSON strings, which YAML reads back
 * exactly whatever the value holds. */
static void scalar(FILE *f, json_t *v)
{
	char *s = json_dumps(v, JSON_ENCODE_ANY);
	fputs(s ? s : "null", f);
	free(s);
}

static void emit(FILE *f, json_t *v, int indent)
{
	const char *k;
	json_t *x;
	json_object_foreach(v, k, x)
	{
		fprintf(f, "%*s%s:", indent, "", k);
		if (json_is_object(x) && json_object_size(x)) {
			fputc('\n', f);
			emit(f, x, indent + 2);
		} else {
			fputc(' ', f);
			if (json_is_object(x))
				fputs("{}", f);
			else
				scalar(f, x);
			fputc('\n', f);
		}
	}
}

static int save(json_t *doc, char *err, size_t errsz)
{
	char path[1024], tmp[1100], dir[1024];
	const char *home = getenv("HOME");
	if (sc__cli_config_path(path, sizeof(path)) < 0) {
		snprintf(err, errsz, "$HOME is not set: nowhere to keep the configuration");
		return -1;
	}
	snprintf(dir, sizeof(dir), "%s/.config", home);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/.config/starcloud", home);
	mkdir(dir, 0700);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f) {
		snprintf(err, errsz, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	fchmod(fileno(f), 0600);
	fputs("# starcloud client configuration (starcloud login, starcloud context)\n", f);
	emit(f, doc, 0);
	int bad = ferror(f) | (fflush(f) != 0) | (fsync(fileno(f)) != 0);
	bad |= fclose(f) != 0;
	if (bad || rename(tmp, path) < 0) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* A file of the old flat form becomes one context, "default", so adding a
 * second keeps the first. */
static void migrate(json_t *doc)
{
	if (json_object_get(doc, "contexts") || !str(doc, "server")[0])
		return;
	json_t *c = json_object();
	static const char *const keys[] = {"server", "token", "token-file", "ca"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_t *v = json_object_get(doc, keys[i]);
		if (v)
			json_object_set(c, keys[i], v);
		json_object_del(doc, keys[i]);
	}
	json_t *ctxs = json_object();
	json_object_set_new(ctxs, "default", c);
	json_object_set_new(doc, "contexts", ctxs);
	json_object_set_new(doc, "current-context", json_string("default"));
}

int sc__cli_config_login(const char *name, const char *server, const char *token,
                         const char *token_file, const char *ca, char *err, size_t errsz)
{
	json_t *doc = load(err, errsz);
	if (!doc)
		return -1;
	migrate(doc);
	json_t *ctxs = json_object_get(doc, "contexts");
	if (!json_is_object(ctxs)) {
		ctxs = json_object();
		json_object_set_new(doc, "contexts", ctxs);
	}
	json_t *c = json_pack("{s:s}", "server", server);
	if (token_file)
		json_object_set_new(c, "token-file", json_string(token_file));
	else if (token)
		json_object_set_new(c, "token", json_string(token));
	if (ca)
		json_object_set_new(c, "ca", json_string(ca));
	json_object_set_new(ctxs, name, c);
	json_object_set_new(doc, "current-context", json_string(name));
	int rc = save(doc, err, errsz);
	json_decref(doc);
	return rc;
}

int sc__cli_config_use(const char *name, char *err, size_t errsz)
{
	json_t *doc = load(err, errsz);
	if (!doc)
		return -1;
	migrate(doc);
	int rc = -1;
	if (!json_is_object(json_object_get(json_object_get(doc, "contexts"), name)))
		snprintf(err, errsz, "no context \"%s\" (`starcloud context` lists them)", name);
	else {
		json_object_set_new(doc, "current-context", json_string(name));
		rc = save(doc, err, errsz);
	}
	json_decref(doc);
	return rc;
}

void sc__cli_config_list(FILE *out)
{
	char err[512] = "";
	json_t *doc = load(err, sizeof(err)), *c;
	const char *name;
	if (!doc) {
		fprintf(stderr, "starcloud: %s\n", err);
		return;
	}
	migrate(doc); /* shown as it would be written */
	sc_table_t *t = sc_table_new(4, (const char *const[]){"CURRENT", "NAME", "SERVER", "AUTH"});
	const char *cur = getenv("STARCLOUD_CONTEXT");
	if (!cur || !cur[0])
		cur = str(doc, "current-context");
	json_object_foreach(json_object_get(doc, "contexts"), name, c)
	{
		char auth[1100];
		if (str(c, "token-file")[0])
			snprintf(auth, sizeof(auth), "token-file %s", str(c, "token-file"));
		else
			snprintf(auth, sizeof(auth), "%s", str(c, "token")[0] ? "token" : "none");
		sc_table_addf(t, 0, "%s\t%s\t%s\t%s", strcmp(name, cur) == 0 ? "*" : "", name,
		              str(c, "server"), auth);
	}
	if (sc_table_rows(t))
		sc_table_print(t, out, 0);
	else
		fprintf(stderr, "No contexts (starcloud login URL adds one).\n");
	sc_table_free(t);
	json_decref(doc);
}
