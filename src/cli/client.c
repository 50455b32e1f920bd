/* CLI client verbs over the REST API (libcurl, blocking). */
#include "cli/client.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "base/cmdline.h"
#include "base/version.h"
#include "base/yamljson.h"
#include "cli/apply.h"
#include "cli/cli_conn.h"
#include "cli/client_print.h"
#include "cli/describe.h"
#include "cli/objinfo.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"

#define MAX_RESPONSE (64u << 20)
#define MAX_FILES 64

typedef struct cli {
	sc_cli_conn_t conn;         /* resolved: server, token, CA, request timeout */
	sc_cli_conn_flags_t cflags; /* --server, --token(-file), --ca, --request-timeout as given */
	const char *context_flag;   /* --context or $STARCLOUD_CONTEXT */
	int output_choice;
	const char *output; /* table, wide, json, yaml */
	const char *selector;
	const char *files[MAX_FILES];
	size_t nfiles;
	const char *const *pos; /* positional arguments */
	size_t npos;
	const char *role;
	const char *node;    /* token create --node (agent tokens) */
	const char *address; /* token create --address (agent tokens) */
	const char *expires; /* token create --expires-in */
	const char *queues[32];
	size_t nqueues;
	int undo;                /* drain --undo */
	const char *output_spec; /* get -o as typed (jsonpath=... and name too) */
	int watch;               /* get -w */
	int no_headers;          /* get --no-headers */
} cli_t;

/* ---------------------------------------------------------------------
 * Configuration and options
 * ------------------------------------------------------------------- */

static int add_file(void *opts, const char *v, char *err, size_t errsz)
{
	cli_t *c = opts;
	if (c->nfiles == MAX_FILES) {
		snprintf(err, errsz, "at most %d", MAX_FILES);
		return SC_ELIMIT;
	}
	c->files[c->nfiles++] = v;
	return 0;
}

static int add_queue(void *opts, const char *v, char *err, size_t errsz)
{
	cli_t *c = opts;
	if (c->nqueues == sizeof(c->queues) / sizeof(c->queues[0])) {
		snprintf(err, errsz, "at most 32");
		return SC_ELIMIT;
	}
	c->queues[c->nqueues++] = v;
	return 0;
}

/* The flags of the client verbs; each verb's table takes those it uses. */
#define CONN_FLAGS SC_CLI_CONN_FLAGS(cli_t, cflags), SC_CLI_CONTEXT_FLAG(cli_t)
#define OUTPUT_FLAG                                                                                \
	{                                                                                          \
		.name = "--output", .alias = "-o", SC_FLAG_AT(CHOICE, cli_t, output_choice),       \
		.choices = "table|wide|json|yaml", .def = "table", .help = "output format"         \
	}
#define SELECTOR_FLAG                                                                              \
	{                                                                                          \
		.name = "--selector", .alias = "-l", SC_FLAG_AT(STR, cli_t, selector),             \
		.meta = "k=v,...", .help = "label selector"                                        \
	}
#define FILE_FLAG                                                                                  \
	{                                                                                          \
		.name = "--filename", .alias = "-f", .kind = SC_FLAG_FUNC, .fn = add_file,         \
		.meta = "FILE|DIR", .flags = SC_FLAG_REPEAT,                                       \
		.help = "manifests: a file, or a folder's *.yaml, *.yml and *.json"                \
	}

static const sc_flag_t apply_flags[] = {CONN_FLAGS, FILE_FLAG};
static const sc_flag_t get_flags[] = {
    CONN_FLAGS,
    {.name = "--output",
     .alias = "-o",
     SC_FLAG_AT(STR, cli_t, output_spec),
     .meta = "FORMAT",
     .choices = "table|wide|json|yaml|name|jsonpath=",
     .help = "table (default), wide (more columns), json, yaml, name\n"
             "(kind/name lines) or jsonpath=TEMPLATE, kubectl's JSONPath:\n"
             "-o jsonpath='{range .items[*]}{.metadata.name}{\"\\n\"}{end}'"},
    SELECTOR_FLAG,
    {.name = "--watch",
     .alias = "-w",
     SC_FLAG_AT(BOOL, cli_t, watch),
     .help = "after the list, print every change as it happens (a row,\n"
             "or a document in the other formats) until Ctrl-C"},
    {.name = "--no-headers",
     SC_FLAG_AT(BOOL, cli_t, no_headers),
     .help = "tables without their header row"},
};
static const sc_flag_t conn_flags[] = {CONN_FLAGS};
static const sc_flag_t delete_flags[] = {CONN_FLAGS, FILE_FLAG};
static const sc_flag_t explain_flags[] = {CONN_FLAGS, OUTPUT_FLAG};
static const sc_flag_t token_flags[] = {
    CONN_FLAGS,
    {.name = "--role",
     SC_FLAG_AT(STR, cli_t, role),
     .meta = "admin|tenant|viewer|agent",
     .help = "token create: the role"},
    {.name = "--queue",
     .kind = SC_FLAG_FUNC,
     .fn = add_queue,
     .meta = "Q",
     .flags = SC_FLAG_REPEAT,
     .help = "token create: a queue a tenant token may use"},
    {.name = "--node",
     SC_FLAG_AT(STR, cli_t, node),
     .meta = "NODE",
     .help = "token create: the node an agent token speaks for"},
    {.name = "--address",
     SC_FLAG_AT(STR, cli_t, address),
     .meta = "HOST:PORT",
     .help = "token create: fixes the agent's status address (it cannot\nmove it)"},
    {.name = "--expires-in",
     SC_FLAG_AT(STR, cli_t, expires),
     .meta = "DURATION",
     .help = "token create: refused after this (24h, 30d)"},
};
static const sc_flag_t drain_flags[] = {
    CONN_FLAGS,
    {.name = "--undo", SC_FLAG_AT(BOOL, cli_t, undo), .help = "make the node schedulable again"},
};
static const sc_flag_t rollout_flags[] = {CONN_FLAGS, OUTPUT_FLAG};

#define VERB(n, a, t, about_, max)                                                                 \
	{                                                                                          \
		.name = n, .args = a, .about = about_, .flags = t,                                 \
		.nflags = sizeof(t) / sizeof(t[0]), .max_args = max                                \
	}
static const sc_command_t apply_cmd =
    VERB("apply", "-f FILE|DIR [-f ...] [options]", apply_flags,
         "Creates or updates the objects of manifests on the server.", 0);
static const sc_command_t get_cmd =
    VERB("get",
         "nodes|queues|priorityclasses|jobs|deployments|nodepools|events|schedulerconfigs|"
         "topologies [NAME] [options]",
         get_flags,
         "Lists objects of a kind, or shows one: STATUS, READY and AGE as kubectl prints "
         "them, queues as their tree. With -w, follows the changes as they happen.",
         2);
static const sc_command_t describe_cmd =
    VERB("describe", "KIND NAME [options]", conn_flags,
         "Shows an object for people: a node's capacity, what is allocated, each GPU and the "
         "pods on it; a job's or deployment's tasks, pods, conditions and, while it waits, "
         "why; a queue's place in the tree, quotas and the scheduler's figures; and the "
         "object's events, oldest first.",
         2);
static const sc_command_t delete_cmd =
    VERB("delete", "KIND NAME... | -f FILE|DIR [options]", delete_flags, "Deletes objects.", 8);
static const sc_command_t top_cmd =
    VERB("top", "queues|nodes [options]", conn_flags,
         "What the scheduler has allocated: per queue (as its tree) from its last cycle's "
         "figures, with fair share, requested, quota and limit; per node from the pods it "
         "placed. Shares and MIG instances count as fractions of a GPU, deployments "
         "included. These are allocations; measured GPU use is in the agents' /metrics.",
         1);
static const sc_command_t token_cmd =
    VERB("token",
         "create --role admin|tenant|viewer|agent [--queue Q]... [--node NODE]\n"
         "       [--address HOST:PORT] [--expires-in DURATION]\n"
         "       starcloud token list | delete ID | whoami",
         token_flags, "Creates, lists and deletes API tokens.", 2);
static const sc_command_t explain_cmd = VERB("explain", "job|deployment NAME [options]",
                                             explain_flags, "Why a job is pending, in words.", 2);
static const sc_command_t drain_cmd =
    VERB("drain", "NODE [--undo]", drain_flags,
         "Cordons a node and lets the scheduler move its jobs elsewhere.", 1);
static const sc_command_t rollout_cmd =
    VERB("rollout", "status [DEPLOYMENT] | promote|abort|pause|resume DEPLOYMENT [options]",
         rollout_flags, "A deployment's versioned rollout on the server (docs/SERVING.md).", 2);

/* 0 to run, 1 after --help (the verb returns 0), < 0 after a message. */
static int parse_args(const sc_command_t *cmd, int argc, char **argv, cli_t *c)
{
	memset(c, 0, sizeof(*c));
	int nargs = 0;
	int rc = sc_flags_parse(cmd, c, argc, argv, &nargs);
	if (rc != 0)
		return rc;
	static const char *const outputs[] = {"table", "wide", "json", "yaml"};
	c->output = outputs[c->output_choice];
	c->pos = (const char *const *)argv + 1;
	c->npos = (size_t)nargs;
	sc__cli_conn_context(c->context_flag);
	if (sc__cli_connect(cmd->name, &c->cflags, argc, argv, &c->conn) < 0)
		return SC_EINVAL;
	return 0;
}

/* parse_args' result as the verb's exit status (-1: go on). */
static int parse_status(int rc)
{
	return rc == 0 ? -1 : rc > 0 ? SC_EXIT_OK : SC_EXIT_USAGE;
}

/* ---------------------------------------------------------------------
 * HTTP
 * ------------------------------------------------------------------- */

/* Performs one request on the server base (n bytes); *resp gets the
 * parsed JSON body (or NULL). Returns the HTTP status, or -1 when the
 * server could not be reached. */
static long http_one(const cli_t *c, const char *base, int n, const char *method, const char *path,
                     const char *body, json_t **resp)
{
	char url[2048], auth[600];
	sc_buf_t out;
	sc_buf_init(&out, MAX_RESPONSE);
	snprintf(url, sizeof(url), "%.*s%s", n, base, path);
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	hdrs = curl_slist_append(hdrs, "Expect:"); /* no 1 s wait for 100-continue */
	if (c->conn.token[0]) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->conn.token);
		hdrs = curl_slist_append(hdrs, auth);
	}
	sc__cli_conn_tls(&c->conn, h);
	sc__cli_curl_limits(h, c->conn.timeout_ms);
	char err[256];
	long status = sc__cli_curl_do(h, method, url, hdrs, body, &out, err, sizeof(err));
	if (status < 0)
		fprintf(stderr, "starcloud: %.*s: %s\n", n, base, err);
	*resp = out.len ? json_loadb(out.data, out.len, 0, NULL) : NULL;
	sc_buf_free(&out);
	return status;
}

/* --server may list several servers (URL1,URL2: an HA control plane):
 * a request goes to the next one when a server cannot be reached or
 * answers 503 (its store is unreachable). A 503 is retried only for
 * reads and for writes the server refused before writing anything. */
static long http(const cli_t *c, const char *method, const char *path, const char *body,
                 json_t **resp)
{
	const char *p = c->conn.server;
	long status = -1;
	*resp = NULL;
	do {
		int n = (int)strcspn(p, ",");
		json_decref(*resp);
		status = http_one(c, p, n, method, path, body, resp);
		p += n;
		p += *p == ',';
	} while (*p && (status < 0 || status == 503));
	return status;
}

/* Lists a collection page by page (the server pages lists by default) into
 * one document: the first page's, with the items of the others appended.
 * sel (borrowed, may be NULL) is a label selector. Returns the status of
 * the first page that failed, or 200. */
static long list_all(const cli_t *c, const char *res, const char *sel, json_t **doc)
{
	char path[1400], cont[300] = "";
	char *esel = sel ? curl_easy_escape(NULL, sel, 0) : NULL;
	long st;
	*doc = NULL;
	for (;;) {
		json_t *page = NULL;
		snprintf(path, sizeof(path), "/api/v1/%s?limit=500%s%s%s%s", res,
		         esel ? "&labelSelector=" : "", esel ? esel : "",
		         cont[0] ? "&continue=" : "", cont);
		st = http(c, "GET", path, NULL, &page);
		if (st != 200 || !json_is_array(json_object_get(page, "items"))) {
			json_decref(*doc);
			*doc = page;
			break;
		}
		const char *next = json_string_value(
		    json_object_get(json_object_get(page, "metadata"), "continue"));
		char *enext = next ? curl_easy_escape(NULL, next, 0) : NULL;
		snprintf(cont, sizeof(cont), "%s", enext ? enext : "");
		curl_free(enext);
		if (!*doc) {
			*doc = page;
		} else {
			json_array_extend(json_object_get(*doc, "items"),
			                  json_object_get(page, "items"));
			json_decref(page);
		}
		if (!cont[0]) {
			json_object_del(json_object_get(*doc, "metadata"), "continue");
			break;
		}
	}
	curl_free(esel);
	return st;
}

/* Prints the server's error and maps the status to an exit code. */
static int report(long status, json_t *resp, const char *what)
{
	if (status >= 200 && status < 300)
		return 0;
	if (status < 0)
		return 1;
	json_t *e = json_object_get(resp, "error");
	const char *msg = json_string_value(json_object_get(e, "message"));
	fprintf(stderr, "starcloud: %s: %ld %s\n", what, status, msg ? msg : "request failed");
	return status == 400 || status == 413 ? 2 : 1;
}

/* Maps "job", "jobs", "pc", ... to the API's plural. */
static const char *resource(const char *name)
{
	static const char *const map[][2] = {
	    {"node", "nodes"},
	    {"nodes", "nodes"},
	    {"queue", "queues"},
	    {"queues", "queues"},
	    {"job", "jobs"},
	    {"jobs", "jobs"},
	    {"deployment", "deployments"},
	    {"deployments", "deployments"},
	    {"deploy", "deployments"},
	    {"event", "events"},
	    {"events", "events"},
	    {"priorityclass", "priorityclasses"},
	    {"priorityclasses", "priorityclasses"},
	    {"pc", "priorityclasses"},
	    {"nodepool", "nodepools"},
	    {"nodepools", "nodepools"},
	    {"np", "nodepools"},
	    {"schedulerconfig", "schedulerconfigs"},
	    {"schedulerconfigs", "schedulerconfigs"},
	    {"topology", "topologies"},
	    {"topologies", "topologies"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (name && strcasecmp(name, map[i][0]) == 0)
			return map[i][1];
	return NULL;
}

/* ---------------------------------------------------------------------
 * apply / delete -f
 * ------------------------------------------------------------------- */

static int manifest_file(const char *name)
{
	static const char *const exts[] = {".json", ".yaml", ".yml", NULL};
	size_t l = strlen(name);
	for (size_t i = 0; exts[i] && name[0] != '.'; i++)
		if (l > strlen(exts[i]) && strcmp(name + l - strlen(exts[i]), exts[i]) == 0)
			return 1;
	return 0;
}

/* Expands a folder into its *.json, *.yaml and *.yml files (sorted, not
 * recursive). */
static int each_path(const char *path, int (*fn)(const cli_t *, const char *, void *),
                     const cli_t *c, void *ud)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		fprintf(stderr, "starcloud: %s: no such file or directory\n", path);
		return 2;
	}
	if (!S_ISDIR(st.st_mode))
		return fn(c, path, ud);
	struct dirent **names;
	int n = scandir(path, &names, NULL, alphasort), worst = 0;
	for (int i = 0; i < n; i++) {
		const char *nm = names[i]->d_name;
		if (manifest_file(nm)) {
			char full[4096];
			snprintf(full, sizeof(full), "%s/%s", path, nm);
			int rc = fn(c, full, ud);
			worst = rc > worst ? rc : worst;
		}
		free(names[i]);
	}
	free(names);
	return worst;
}

/* Applies or deletes every object of one file over one pipelined
 * connection (apply.c). */
static int apply_file(const cli_t *c, const char *path, void *ud)
{
	return sc__apply_file(ud, path);
}

static void apply_init(sc_apply_t *a, const cli_t *c, bool del)
{
	memset(a, 0, sizeof(*a));
	a->servers = c->conn.server;
	a->token = c->conn.token;
	a->ca = c->conn.ca;
	a->del = del;
	a->tty = isatty(STDOUT_FILENO);
	a->progress = isatty(STDERR_FILENO);
}

int sc_cli_apply(int argc, char **argv)
{
	cli_t c;
	int prc = parse_status(parse_args(&apply_cmd, argc, argv, &c));
	if (prc >= 0)
		return prc;
	if (c.nfiles == 0) {
		fprintf(stderr,
		        "usage: starcloud apply -f FILE|DIR [-f ...] [--server URL] [--token T]\n");
		return 2;
	}
	int worst = 0;
	sc_apply_t a;
	apply_init(&a, &c, false);
	for (size_t i = 0; i < c.nfiles; i++) {
		int rc = each_path(c.files[i], apply_file, &c, &a);
		worst = rc > worst ? rc : worst;
	}
	return worst;
}

/* ---------------------------------------------------------------------
 * get / describe / delete
 * ------------------------------------------------------------------- */

static int fetch(const cli_t *c, const char *res, const char *name, json_t **doc)
{
	char path[1024];
	long st;
	if (name) {
		snprintf(path, sizeof(path), "/api/v1/%s/%s", res, name);
		st = http(c, "GET", path, NULL, doc);
	} else {
		st = list_all(c, res, c->selector, doc);
	}
	return report(st, *doc, name ? name : res);
}

/* ---- get -w ------------------------------------------------------------ */

/* One watch connection: newline-delimited JSON events, each handed to the
 * get's state as it arrives (the body is never held whole). */
typedef struct watch_st {
	sc_cli_printer_t *pr;
	const char *name; /* get KIND NAME -w: only that object */
	char rv[32];      /* last revision seen */
	sc_buf_t line;
	int gone; /* 410: the revision left the server's change log */
} watch_st_t;

static void watch_event(watch_st_t *w, json_t *ev)
{
	const char *type = sc_obj_str(ev, "type", NULL, NULL);
	json_t *obj = json_object_get(ev, "object");
	const char *rv = sc_obj_str(obj, "metadata", "resourceVersion", NULL);
	if (strcmp(type, "ERROR") == 0) {
		/* The watch's own failure ({"code":410} when too old). */
		if (json_integer_value(json_object_get(obj, "code")) == 410)
			w->gone = 1;
		else
			fprintf(stderr, "starcloud: watch: %s\n",
			        sc_obj_str(obj, "message", NULL, NULL));
		return;
	}
	if (rv[0])
		snprintf(w->rv, sizeof(w->rv), "%s", rv);
	if (strcmp(type, "BOOKMARK") == 0) /* progress only (issue 16's bookmarks) */
		return;
	if (w->name && strcmp(sc_obj_str(obj, "metadata", "name", NULL), w->name) != 0)
		return;
	sc_cli_printer_event(w->pr, type, obj);
}

static size_t on_watch_data(char *p, size_t size, size_t n, void *ud)
{
	watch_st_t *w = ud;
	size_t len = size * n;
	for (size_t i = 0; i < len; i++) {
		if (p[i] != '\n') {
			if (sc_buf_append(&w->line, p + i, 1) < 0)
				return 0; /* a line over the limit: end this connection */
			continue;
		}
		json_t *ev = w->line.len ? json_loadb(w->line.data, w->line.len, 0, NULL) : NULL;
		if (ev)
			watch_event(w, ev);
		json_decref(ev);
		sc_buf_reset(&w->line);
	}
	return len;
}

/* Follows path?watch=1 from w->rv until the server ends the stream or it
 * breaks. Returns the HTTP status, or -1 when the server is unreachable. */
static long watch_once(const cli_t *c, const char *path, watch_st_t *w)
{
	char url[2048], auth[600];
	const char *base = c->conn.server;
	int n = (int)strcspn(base, ",");
	snprintf(url, sizeof(url), "%.*s%s%swatch=1&resourceVersion=%s", n, base, path,
	         strchr(path, '?') ? "&" : "?", w->rv);
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	if (c->conn.token[0]) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->conn.token);
		hdrs = curl_slist_append(hdrs, auth);
	}
	sc__cli_conn_tls(&c->conn, h);
	sc_buf_init(&w->line, 64u << 20);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_watch_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, SC_USER_AGENT("cli"));
	long status = 0;
	curl_easy_perform(h); /* ends when the server closes or the link breaks */
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	sc_buf_free(&w->line);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	return status ? status : -1;
}

/* get -w: watch from the list's revision, reconnecting when the stream
 * ends or breaks, listing again when the revision is gone (410), until the
 * user stops it. Only an authorisation or request error ends it. */
static int watch_loop(const cli_t *c, const char *res, const char *name, const char *sel,
                      json_t *first, sc_cli_printer_t *pr)
{
	char path[1200];
	char *esel = sel ? curl_easy_escape(NULL, sel, 0) : NULL;
	watch_st_t w = {.pr = pr, .name = name};
	snprintf(w.rv, sizeof(w.rv), "%s", sc_obj_str(first, "metadata", "resourceVersion", NULL));
	snprintf(path, sizeof(path), "/api/v1/%s%s%s", res, esel ? "?labelSelector=" : "",
	         esel ? esel : "");
	curl_free(esel);
	unsigned delay = 1;
	for (;;) {
		w.gone = 0;
		long st = watch_once(c, path, &w);
		if (st == 410 || w.gone) {
			/* Too far behind: list again and show every object. */
			json_t *doc = NULL, *o;
			size_t i;
			if (fetch(c, res, NULL, &doc) == 0) {
				snprintf(w.rv, sizeof(w.rv), "%s",
				         sc_obj_str(doc, "metadata", "resourceVersion", NULL));
				json_array_foreach(json_object_get(doc, "items"), i, o)
				{
					if (!name || strcmp(sc_obj_str(o, "metadata", "name", NULL),
					                    name) == 0)
						sc_cli_printer_event(pr, "ADDED", o);
				}
			}
			json_decref(doc);
			continue;
		}
		if (st == 401 || st == 403 || st == 400 || st == 404) {
			fprintf(stderr, "starcloud: watch %s: HTTP %ld\n", res, st);
			return st == 400 ? SC_EXIT_USAGE : SC_EXIT_FAIL;
		}
		if (st < 0 || st >= 500) {
			fprintf(stderr, "starcloud: watch %s: connection lost; again in %us\n", res,
			        delay);
			sleep(delay);
			delay = delay < 8 ? delay * 2 : 8;
		} else {
			delay = 1; /* the server ended a healthy stream: resume at once */
		}
	}
}

int sc_cli_get(int argc, char **argv)
{
	cli_t c;
	const char *res;
	char err[300];
	int prc = parse_status(parse_args(&get_cmd, argc, argv, &c));
	if (prc >= 0)
		return prc;
	sc_cli_out_t out;
	if (sc_cli_out_parse(c.output_spec, &out, err, sizeof(err)) < 0) {
		fprintf(stderr, "starcloud get: %s\n", err);
		return 2;
	}
	if (c.npos < 1 || !(res = resource(c.pos[0]))) {
		fprintf(stderr, "starcloud get: expected a kind: nodes, queues, priorityclasses, "
		                "jobs, deployments, nodepools, events, schedulerconfigs or "
		                "topologies (see "
		                "--help)\n");
		sc_cli_out_free(&out);
		return 2;
	}
	out.no_headers = c.no_headers;
	json_t *doc = NULL;
	const char *name = c.npos > 1 ? c.pos[1] : NULL;
	int rc = fetch(&c, res, name, &doc);
	sc_cli_printer_t *pr = sc_cli_printer_new(&out, res);
	if (rc == 0)
		sc_cli_printer_doc(pr, doc);
	fflush(stdout);
	if (rc == 0 && c.watch)
		rc = watch_loop(&c, res, name, c.selector, doc, pr);
	sc_cli_printer_free(pr);
	sc_cli_out_free(&out);
	json_decref(doc);
	return rc;
}

/* The GET describe, top and explain read through (describe.h). */
static long get_path(void *ud, const char *path, json_t **doc)
{
	return http(ud, "GET", path, NULL, doc);
}

int sc_cli_describe(int argc, char **argv)
{
	cli_t c;
	const char *res;
	int prc = parse_status(parse_args(&describe_cmd, argc, argv, &c));
	if (prc >= 0)
		return prc;
	if (c.npos < 2 || !(res = resource(c.pos[0]))) {
		fprintf(stderr,
		        "starcloud describe: expected KIND NAME (node, queue, job, "
		        "deployment, priorityclass, schedulerconfig, topology; see --help)\n");
		return 2;
	}
	return sc_cli_describe_run(res, c.pos[1], get_path, &c);
}

int sc_cli_delete(int argc, char **argv)
{
	cli_t c;
	const char *res = NULL;
	int prc = parse_status(parse_args(&delete_cmd, argc, argv, &c));
	if (prc >= 0)
		return prc;
	if ((c.nfiles == 0 && (c.npos < 2 || !(res = resource(c.pos[0]))))) {
		fprintf(stderr, "usage: starcloud delete KIND NAME... | delete -f FILE|DIR\n");
		return 2;
	}
	int worst = 0;
	sc_apply_t a;
	apply_init(&a, &c, true);
	for (size_t i = 0; i < c.nfiles; i++) {
		int rc = each_path(c.files[i], apply_file, &c, &a);
		worst = rc > worst ? rc : worst;
	}
	for (size_t i = 1; res && i < c.npos; i++) {
		char path[600], what[400];
		snprintf(path, sizeof(path), "/api/v1/%s/%s", res, c.pos[i]);
		snprintf(what, sizeof(what), "%s/%s", res, c.pos[i]);
		json_t *resp = NULL;
		long st = http(&c, "DELETE", path, NULL, &resp);
		int rc = report(st, resp, what);
		if (rc == 0)
			printf("%s deleted\n", what);
		json_decref(resp);
		worst = rc > worst ? rc : worst;
	}
	return worst;
}

/* ---------------------------------------------------------------------
 * top / token
 * ------------------------------------------------------------------- */

/* What the scheduler allocated per queue or node (top.c). */
int sc_cli_top(int argc, char **argv)
{
	cli_t c;
	int prc = parse_status(parse_args(&top_cmd, argc, argv, &c));
	if (prc >= 0)
		return prc;
	if (c.npos != 1) {
		fprintf(stderr, "starcloud top: expected queues or nodes (see --help)\n");
		return 2;
	}
	return sc_cli_top_run(c.pos[0], get_path, &c);
}

int sc_cli_token(int argc, char **argv)
{
	cli_t c;
	int prc = parse_status(parse_args(&token_cmd, argc, argv, &c));
	if (prc >= 0)
		return prc;
	if (c.npos < 1) {
		fprintf(stderr, "usage: starcloud token create --role admin|tenant|viewer|agent "
		                "[--queue Q]... [--node NODE]\n"
		                "       starcloud token list | delete ID | whoami\n");
		return 2;
	}
	json_t *resp = NULL;
	long st;
	const char *verb = c.pos[0];
	if (strcmp(verb, "create") == 0) {
		if (!c.role) {
			fprintf(stderr, "starcloud: token create needs --role\n");
			return 2;
		}
		json_t *qs = json_array();
		for (size_t i = 0; i < c.nqueues; i++)
			json_array_append_new(qs, json_string(c.queues[i]));
		json_t *req = json_pack("{s:s,s:o}", "role", c.role, "queues", qs);
		if (c.node)
			json_object_set_new(req, "node", json_string(c.node));
		if (c.address)
			json_object_set_new(req, "address", json_string(c.address));
		if (c.expires)
			json_object_set_new(req, "expiresIn", json_string(c.expires));
		char *body = json_dumps(req, JSON_COMPACT);
		json_decref(req);
		st = http(&c, "POST", "/api/v1/tokens", body, &resp);
		free(body);
		if (st == 201)
			printf("%s\n", sc_obj_str(resp, "token", NULL, NULL));
	} else if (strcmp(verb, "list") == 0 || strcmp(verb, "whoami") == 0) {
		st = http(&c, "GET", verb[0] == 'l' ? "/api/v1/tokens" : "/api/v1/tokens/self",
		          NULL, &resp);
		if (st == 200)
			sc_cli_yaml_print(resp, 0, 0);
	} else if (strcmp(verb, "delete") == 0 && c.npos == 2) {
		char path[300];
		snprintf(path, sizeof(path), "/api/v1/tokens/%s", c.pos[1]);
		st = http(&c, "DELETE", path, NULL, &resp);
	} else {
		fprintf(stderr, "starcloud: token: unknown action \"%s\"\n", verb);
		return 2;
	}
	int rc = report(st, resp, "token");
	json_decref(resp);
	return rc;
}

/* ---------------------------------------------------------------------
 * explain / drain
 * ------------------------------------------------------------------- */

/* `starcloud explain job NAME`: why a job is pending, what it asks for and
 * how its queue stands. */
int sc_cli_explain(int argc, char **argv)
{
	cli_t c;
	const char *res;
	int prc = parse_status(parse_args(&explain_cmd, argc, argv, &c));
	if (prc >= 0)
		return prc;
	if (c.npos != 2 || !(res = resource(c.pos[0])) ||
	    (strcmp(res, "jobs") != 0 && strcmp(res, "deployments") != 0)) {
		fprintf(stderr, "usage: starcloud explain job|deployment NAME [-o json]\n");
		return 2;
	}
	char path[600];
	json_t *doc = NULL;
	snprintf(path, sizeof(path), "/api/v1/%s/%s/explain", res, c.pos[1]);
	long st = http(&c, "GET", path, NULL, &doc);
	int rc = report(st, doc, c.pos[1]);
	sc_cli_out_t out = {0};
	snprintf(out.format, sizeof(out.format), "%s", c.output);
	if (rc == 0 && sc_cli_print_generic(&out, res, doc) < 0)
		sc_cli_explain_print(doc, res, 0);
	json_decref(doc);
	return rc;
}

/* `starcloud drain NODE [--undo]`: cordon the node and let the scheduler
 * move its jobs; --undo makes it schedulable again. */
int sc_cli_drain(int argc, char **argv)
{
	cli_t c;
	int prc = parse_status(parse_args(&drain_cmd, argc, argv, &c));
	if (prc >= 0)
		return prc;
	if (c.npos != 1) {
		fprintf(stderr, "usage: starcloud drain NODE [--undo]\n");
		return 2;
	}
	char path[600];
	json_t *doc = NULL;
	snprintf(path, sizeof(path), "/api/v1/nodes/%s/drain", c.pos[0]);
	long st = http(&c, c.undo ? "DELETE" : "POST", path, NULL, &doc);
	int rc = report(st, doc, c.pos[0]);
	if (rc == 0)
		printf("node/%s %s\n", c.pos[0],
		       c.undo ? "uncordoned"
		              : "drained (its jobs are evicted and placed elsewhere)");
	json_decref(doc);
	return rc;
}

/* ---------------------------------------------------------------------
 * Rollouts (the server side; cli_rollout.c sends --gateway to a gateway)
 * ------------------------------------------------------------------- */

static void rollout_row(json_t *doc)
{
	json_t *ro = json_object_get(doc, "rollout");
	json_t *ws = json_object_get(ro, "weights"), *w;
	const char *v;
	char weights[256] = "";
	size_t n = 0;
	json_object_foreach(ws, v, w)
	{
		if (n < sizeof(weights))
			n += (size_t)snprintf(weights + n, sizeof(weights) - n, "%s%.32s=%lld%%",
			                      n ? "," : "", v, (long long)json_integer_value(w));
	}
	printf("%-24s %-16s %-8s %-8s %-12s %-16s %s\n", sc_obj_str(doc, "deployment", NULL, NULL),
	       sc_obj_str(doc, "model", NULL, NULL), sc_obj_str(ro, "stable", NULL, NULL),
	       sc_str_or(sc_obj_str(ro, "canary", NULL, NULL), "-"),
	       sc_obj_str(ro, "phase", NULL, NULL), weights, sc_obj_str(ro, "reason", NULL, NULL));
}

static int rollout_show(const cli_t *c, const char *name)
{
	char path[600];
	json_t *doc = NULL, *list = NULL, *item;
	size_t i;
	int rc = 0;
	if (name) {
		snprintf(path, sizeof(path), "/api/v1/deployments/%s/rollout", name);
		if ((rc = report(http(c, "GET", path, NULL, &doc), doc, name)) == 0)
			list = json_pack("[O]", doc);
	} else {
		json_t *all = NULL;
		rc = report(list_all(c, "deployments", NULL, &all), all, "deployments");
		list = json_array();
		json_array_foreach(json_object_get(all, "items"), i, item)
		{
			json_t *md = json_object_get(item, "metadata"), *st;
			st = json_object_get(item, "status");
			json_array_append_new(
			    list, json_pack("{s:O*,s:O*,s:O*}", "deployment",
			                    json_object_get(md, "name"), "model",
			                    json_object_get(json_object_get(item, "spec"), "model"),
			                    "rollout", json_object_get(st, "rollout")));
		}
		json_decref(all);
	}
	if (rc == 0 && strcmp(c->output, "json") == 0) {
		char *text = json_dumps(name ? doc : list, JSON_INDENT(2));
		printf("%s\n", text ? text : "null");
		free(text);
	} else if (rc == 0) {
		printf("%-24s %-16s %-8s %-8s %-12s %-16s %s\n", "DEPLOYMENT", "MODEL", "STABLE",
		       "CANARY", "PHASE", "WEIGHTS", "REASON");
		json_array_foreach(list, i, item) rollout_row(item);
	}
	json_decref(list);
	json_decref(doc);
	return rc;
}

int sc_cli_rollout_server(int argc, char **argv)
{
	static const char *const actions[] = {"promote", "abort", "pause", "resume", NULL};
	cli_t c;
	int prc = parse_status(parse_args(&rollout_cmd, argc, argv, &c));
	if (prc >= 0)
		return prc;
	if (c.npos < 1 || c.npos > 2) {
		fprintf(stderr, "usage: starcloud rollout status [DEPLOYMENT] | "
		                "promote|abort|pause|resume DEPLOYMENT (see --help)\n");
		return 2;
	}
	if (strcmp(c.pos[0], "status") == 0)
		return rollout_show(&c, c.npos == 2 ? c.pos[1] : NULL);
	size_t a;
	for (a = 0; actions[a] && strcmp(actions[a], c.pos[0]) != 0; a++)
		;
	if (!actions[a] || c.npos != 2) {
		fprintf(stderr, "starcloud rollout: expected status, promote, abort, pause or "
		                "resume and a deployment\n");
		return 2;
	}
	char path[600], body[64];
	json_t *doc = NULL;
	snprintf(path, sizeof(path), "/api/v1/deployments/%s/rollout", c.pos[1]);
	snprintf(body, sizeof(body), "{\"action\":\"%s\"}", actions[a]);
	int rc = report(http(&c, "POST", path, body, &doc), doc, c.pos[1]);
	if (rc == 0) {
		json_t *ro = json_object_get(doc, "rollout");
		printf("deployment/%s: %s (%s)\n", c.pos[1], sc_obj_str(ro, "phase", NULL, NULL),
		       sc_obj_str(ro, "reason", NULL, NULL));
	}
	json_decref(doc);
	return rc;
}
