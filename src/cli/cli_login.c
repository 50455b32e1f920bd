/* `starcloud login URL` and `starcloud context [NAME]`: named contexts in
 * ~/.config/starcloud/config (cli_config.h), as kubectl's config has them.
 *
 * login checks the token against the server (GET /api/v1/tokens/self)
 * before it writes anything, so a context in the file is one that worked;
 * with --token-file the file's path is kept, never the token, and read at
 * each use. */
#include "cli/cli_login.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cmdline.h"
#include "base/version.h"
#include "cli/cli_config.h"
#include "cli/cli_conn.h"
#include "starcloud/buf.h"

typedef struct login_opts {
	const char *token, *token_file, *ca, *context;
} login_opts_t;

static const sc_flag_t login_flags[] = {
    {.name = "--token-file",
     SC_FLAG_AT(STR, login_opts_t, token_file),
     .meta = "FILE",
     .help = "the token is in FILE (kept as the file's path, read at each use)"},
    {.name = "--token",
     SC_FLAG_AT(STR, login_opts_t, token),
     .meta = "T",
     .env = "STARCLOUD_TOKEN",
     .help = "the token itself (stored in the 0600 configuration file);\n"
             "without either, one line is read from standard input"},
    {.name = "--ca",
     SC_FLAG_AT(STR, login_opts_t, ca),
     .meta = "FILE",
     .help = "CA certificate of an https:// server, kept with the context"},
    {.name = "--context",
     SC_FLAG_AT(STR, login_opts_t, context),
     .meta = "NAME",
     .help = "the context's name (default: the URL's host and port)"},
};

static const sc_command_t login_cmd = {
    .name = "login",
    .args = "URL [--token-file FILE | --token T] [--context NAME]",
    .about = "Checks a token against the server at URL and keeps both as a named context of "
             "~/.config/starcloud/config, made current: later commands use it without "
             "--server or --token. `starcloud context` lists contexts and switches between "
             "them; --context (or $STARCLOUD_CONTEXT) picks one for a single command.",
    .flags = login_flags,
    .nflags = sizeof(login_flags) / sizeof(login_flags[0]),
    .max_args = 1,
};

/* GET url/api/v1/tokens/self: the HTTP status (-1 unreachable) and the
 * token's role. */
static long whoami(const char *url, const char *token, const char *ca, char *role, size_t rsz)
{
	char full[1200], auth[640];
	sc_buf_t out;
	sc_buf_init(&out, 1 << 20);
	snprintf(full, sizeof(full), "%s/api/v1/tokens/self", url);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = curl_slist_append(NULL, auth);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
	if (ca)
		curl_easy_setopt(h, CURLOPT_CAINFO, ca);
	char err[256];
	long status = sc__cli_curl_do(h, NULL, full, hdrs, NULL, &out, err, sizeof(err));
	if (status < 0)
		fprintf(stderr, "starcloud login: %s: %s\n", url, err);
	json_t *doc = out.len ? json_loadb(out.data, out.len, 0, NULL) : NULL;
	const char *r = json_string_value(json_object_get(doc, "role"));
	snprintf(role, rsz, "%s", r ? r : "?");
	json_decref(doc);
	sc_buf_free(&out);
	return status;
}

/* "https://sc.example.com:7070/" -> "sc.example.com-7070". */
static void default_name(const char *url, char *out, size_t outsz)
{
	const char *h = strstr(url, "://");
	h = h ? h + 3 : url;
	size_t n = strcspn(h, "/");
	snprintf(out, outsz, "%.*s", (int)n, h);
	for (char *p = out; *p; p++)
		if (*p == ':')
			*p = '-';
}

static int read_token(const login_opts_t *o, char *out, size_t outsz)
{
	FILE *f = NULL;
	char buf[1024] = "";
	if (o->token_file) {
		if (!(f = fopen(o->token_file, "r"))) {
			fprintf(stderr, "starcloud login: --token-file %s: cannot be read\n",
			        o->token_file);
			return -1;
		}
	} else if (o->token) {
		snprintf(out, outsz, "%s", o->token);
		return 0;
	} else {
		if (isatty(0))
			fprintf(stderr, "token: ");
		f = stdin;
	}
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	if (f != stdin)
		fclose(f);
	size_t s = strspn(buf, " \t\r\n");
	snprintf(out, outsz, "%.*s", (int)strcspn(buf + s, " \t\r\n"), buf + s);
	if (!out[0]) {
		fprintf(stderr, "starcloud login: no token (give --token-file FILE, --token T, or "
		                "one line on standard input)\n");
		return -1;
	}
	return 0;
}

int sc_cli_login(int argc, char **argv)
{
	login_opts_t o = {0};
	int nargs = 0;
	int rc = sc_flags_parse(&login_cmd, &o, argc, argv, &nargs);
	if (rc != 0)
		return rc > 0 ? SC_EXIT_OK : SC_EXIT_USAGE;
	if (nargs != 1) {
		fprintf(stderr, "starcloud login: expected the server's URL (see --help)\n");
		return SC_EXIT_USAGE;
	}
	char url[512], token[600], role[64], name[256], err[600], path[1024];
	snprintf(url, sizeof(url), "%s", argv[1]);
	size_t n = strlen(url);
	while (n && url[n - 1] == '/')
		url[--n] = '\0';
	if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
		fprintf(stderr,
		        "starcloud login: URL: expected http://HOST:PORT or "
		        "https://HOST:PORT, got \"%s\"\n",
		        argv[1]);
		return SC_EXIT_USAGE;
	}
	if (read_token(&o, token, sizeof(token)) < 0)
		return SC_EXIT_USAGE;
	long st = whoami(url, token, o.ca, role, sizeof(role));
	if (st == 401) {
		fprintf(stderr, "starcloud login: %s refused the token (401); nothing saved\n",
		        url);
		return SC_EXIT_FAIL;
	}
	if (st != 200) {
		if (st > 0)
			fprintf(stderr, "starcloud login: %s answered %ld; nothing saved\n", url,
			        st);
		return SC_EXIT_FAIL;
	}
	if (o.context)
		snprintf(name, sizeof(name), "%s", o.context);
	else
		default_name(url, name, sizeof(name));
	char *abs = o.token_file ? realpath(o.token_file, NULL) : NULL;
	rc = sc__cli_config_login(name, url, o.token_file ? NULL : token,
	                          o.token_file ? (abs ? abs : o.token_file) : NULL, o.ca, err,
	                          sizeof(err));
	free(abs);
	if (rc < 0) {
		fprintf(stderr, "starcloud login: %s\n", err);
		return SC_EXIT_FAIL;
	}
	sc__cli_config_path(path, sizeof(path));
	printf("logged in to %s as %s; context \"%s\" is current (%s)\n", url, role, name, path);
	return SC_EXIT_OK;
}

/* ---- context ---------------------------------------------------------- */

static const sc_command_t context_cmd = {
    .name = "context",
    .args = "[NAME]",
    .about = "Lists the contexts of ~/.config/starcloud/config (the current one starred), "
             "or makes NAME the current one. `starcloud login URL` adds contexts.",
    .max_args = 1,
};

int sc_cli_context(int argc, char **argv)
{
	int nargs = 0;
	char err[600];
	int rc = sc_flags_parse(&context_cmd, NULL, argc, argv, &nargs);
	if (rc != 0)
		return rc > 0 ? SC_EXIT_OK : SC_EXIT_USAGE;
	if (nargs == 0) {
		sc__cli_config_list(stdout);
		return SC_EXIT_OK;
	}
	if (sc__cli_config_use(argv[1], err, sizeof(err)) < 0) {
		fprintf(stderr, "starcloud context: %s\n", err);
		return SC_EXIT_FAIL;
	}
	printf("context \"%s\" is current\n", argv[1]);
	return SC_EXIT_OK;
}
