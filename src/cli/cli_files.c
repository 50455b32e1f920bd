/* Reading manifest files and folders for the verbs that take -f. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "base/alloc.h"

bool sc__cli_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return false;
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return true;
	}
	return false;
}

/* Reads a whole file of at most SC_CLI_MAX_FILE bytes into *out. */
static int read_file(const char *verb, const char *path, char **out, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	if (!f) {
		fprintf(stderr, "starcloud %s: %s: %s\n", verb, path, strerror(errno));
		return SC_EXIT_USAGE;
	}
	if (fstat(fileno(f), &st) == 0 && (size_t)st.st_size > SC_CLI_MAX_FILE) {
		fprintf(stderr, "starcloud %s: %s: larger than the limit of %u bytes\n", verb, path,
		        SC_CLI_MAX_FILE);
		fclose(f);
		return SC_EXIT_USAGE;
	}
	/* Read up to one byte past the limit: pipes have no size to check. */
	size_t cap = 1 << 16, n = 0;
	char *buf = sc_xmalloc(cap + 1);
	while (buf) {
		if (n == cap) {
			if (cap > SC_CLI_MAX_FILE)
				break;
			char *nb = sc_realloc(buf, cap * 2 + 1);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		if (r == 0)
			break;
		n += r;
	}
	int err = ferror(f);
	fclose(f);
	if (!buf) {
		fprintf(stderr, "starcloud %s: out of memory\n", verb);
		return SC_EXIT_FAIL;
	}
	if (err || n > SC_CLI_MAX_FILE) {
		fprintf(stderr, "starcloud %s: %s: %s\n", verb, path,
		        err ? "read error" : "larger than the limit");
		free(buf);
		return err ? SC_EXIT_FAIL : SC_EXIT_USAGE;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return SC_EXIT_OK;
}

static int load_file(sc_manifest_set_t *set, const char *verb, const char *path)
{
	char *text;
	size_t len;
	sc_manifest_error_t err;
	char msg[1400];
	int rc = read_file(verb, path, &text, &len);
	if (rc)
		return rc;
	rc = sc_manifest_add_text(set, path, text, len, &err);
	free(text);
	if (rc >= 0)
		return SC_EXIT_OK;
	fprintf(stderr, "starcloud %s: %s\n", verb,
	        sc_manifest_error_format(&err, msg, sizeof(msg)));
	return rc == SC_ENOMEM ? SC_EXIT_FAIL : SC_EXIT_USAGE;
}

static bool manifest_name(const char *name)
{
	static const char *const exts[] = {".yaml", ".yml", ".json", NULL};
	size_t n = strlen(name);
	if (name[0] == '.')
		return false;
	for (int i = 0; exts[i]; i++) {
		size_t e = strlen(exts[i]);
		if (n > e && strcmp(name + n - e, exts[i]) == 0)
			return true;
	}
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int load_dir(sc_manifest_set_t *set, const char *verb, const char *path)
{
	struct dirent **ents = NULL;
	int n = scandir(path, &ents, NULL, NULL), rc = SC_EXIT_OK;
	if (n < 0) {
		fprintf(stderr, "starcloud %s: %s: %s\n", verb, path, strerror(errno));
		return SC_EXIT_USAGE;
	}
	char **names = sc_xcalloc((size_t)n + 1, sizeof(char *));
	int k = 0;
	for (int i = 0; i < n; i++) {
		if (names && manifest_name(ents[i]->d_name)) {
			size_t len = strlen(path) + strlen(ents[i]->d_name) + 2;
			if ((names[k] = sc_malloc(len)))
				snprintf(names[k++], len, "%s/%s", path, ents[i]->d_name);
		}
		free(ents[i]);
	}
	free(ents);
	if (!names) {
		fprintf(stderr, "starcloud %s: out of memory\n", verb);
		return SC_EXIT_FAIL;
	}
	qsort(names, (size_t)k, sizeof(char *), cmp_str);
	for (int i = 0; i < k; i++) {
		if (rc == SC_EXIT_OK)
			rc = load_file(set, verb, names[i]);
		free(names[i]);
	}
	free(names);
	return rc;
}

int sc__cli_load_path(sc_manifest_set_t *set, const char *verb, const char *path)
{
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return load_dir(set, verb, path);
	return load_file(set, verb, path);
}
