/* `starcloud logs JOB [POD] [-f]` and `starcloud dev`.
 *
 * logs: the CLI asks the server (GET /api/v1/jobs/JOB/logs), which checks
 * the reader's rights and reads the log from the pod's node with its own
 * credential (docs/SECURITY.md): the reader's token never leaves for a
 * node.
 *
 * dev: a server (temporary or given data dir) and N agents with declared
 * GPUs as child processes of this one, like `nomad agent -dev`; prints the
 * addresses and the admin token and writes ~/.config/starcloud/config. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cmdline.h"
#include "cli/cli.h"
#include "cli/cli_conn.h"
#include "cli/cli_config.h"
#include "cli/cli_agent.h"
#include "cli/devca.h"
#include "net/http.h"
#include "starcloud/buf.h"

#define MAX_DOC (64u << 20)
#define MAX_AGENTS 64

/* ---- shared: server, token ---------------------------------------------- */

/* A log answer goes to stdout when it is the log (200), into err when it
 * is the server's error document. The server names the pod's node in a
 * header (X-Starcloud-Node), so a follower can ask about its agent. */
typedef struct log_sink {
	sc_buf_t *err;
	long status;
	char node[254];
} log_sink_t;

#define NODE_HEADER "X-Starcloud-Node:"

static size_t on_log_header(char *p, size_t size, size_t n, void *ud)
{
	log_sink_t *s = ud;
	size_t len = size * n, hl = strlen(NODE_HEADER);
	int code;
	if (len > 9 && strncmp(p, "HTTP/1.", 7) == 0 && sscanf(p + 9, "%d", &code) == 1) {
		s->status = code;
		s->node[0] = '\0';
	} else if (len > hl && strncasecmp(p, NODE_HEADER, hl) == 0) {
		const char *v = p + hl, *e = p + len;
		while (v < e && *v == ' ')
			v++;
		while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' '))
			e--;
		if ((size_t)(e - v) < sizeof(s->node))
			snprintf(s->node, sizeof(s->node), "%.*s", (int)(e - v), v);
	}
	return len;
}

static size_t to_sink(char *p, size_t size, size_t n, void *ud)
{
	log_sink_t *s = ud;
	if (s->status != 200)
		return sc_buf_append(s->err, p, size * n) < 0 ? 0 : size * n;
	size_t w = fwrite(p, size, n, stdout);
	fflush(stdout);
	return w * size;
}

/* The CA this process's calls to the server trust (`dev` with TLS, or the
 * --ca of `logs`); "" for the system's. */
static char call_ca[1200];

/* GET url (POST body when not NULL) with the token; the JSON answer in
 * *out (NULL when not JSON). Returns the HTTP status or -1. */
static long call_json(const char *url, const char *token, const char *body, json_t **out,
                      uint64_t timeout_ms)
{
	char auth[600];
	sc_buf_t b;
	sc_buf_init(&b, MAX_DOC);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	CURL *h = curl_easy_init();
	struct curl_slist *hs = curl_slist_append(NULL, auth);
	if (call_ca[0])
		curl_easy_setopt(h, CURLOPT_CAINFO, call_ca);
	if (body)
		hs = curl_slist_append(hs, "Content-Type: application/json");
	sc__cli_curl_limits(h, timeout_ms ? timeout_ms : 30000);
	char err[256];
	long code = sc__cli_curl_do(h, NULL, url, hs, body, &b, err, sizeof(err));
	*out = b.len ? json_loadb(b.data, b.len, 0, NULL) : NULL;
	sc_buf_free(&b);
	return code;
}

static long get_json(const char *url, const char *token, json_t **out)
{
	return call_json(url, token, NULL, out, 0);
}

/* GET path from the first server of the --server list that answers (not
 * unreachable, not 503), as the other client verbs do. */
static long server_json(const char *servers, const char *path, const char *token, json_t **out,
                        uint64_t timeout_ms)
{
	char url[2048];
	long code = -1;
	*out = NULL;
	for (const char *p = servers; *p;) {
		int n = (int)strcspn(p, ",");
		json_decref(*out);
		snprintf(url, sizeof(url), "%.*s%s", n, p, path);
		code = call_json(url, token, NULL, out, timeout_ms);
		if (code >= 0 && code != 503)
			break;
		p += n;
		p += *p == ',';
	}
	return code;
}

/* ---- logs --------------------------------------------------------------- */

typedef struct logs_opts {
	sc_cli_conn_flags_t conn;
	const char *context_flag;
	int follow;
} logs_opts_t;

/* Following a pod's output: the agent may die or freeze with the
 * connection open (a frozen process, or a host gone from the network, sends
 * no FIN), and the server, which reads the log from it, then has nothing to
 * pass on either. When nothing has come for QUIET_S seconds the CLI asks
 * the server whether the node's agent still renews its lease, and stops
 * with a message when it does not (node not ready). */
#define QUIET_S 5

typedef struct follow {
	const char *servers, *token;
	const log_sink_t *sink; /* the node, from the answer's header */
	uint64_t timeout_ms;
	curl_off_t last_bytes;
	time_t last_data, last_check;
	int agent_lost;
} follow_t;

static int node_ready(follow_t *f)
{
	char path[600];
	json_t *n = NULL;
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", f->sink->node);
	long code = server_json(f->servers, path, f->token, &n, f->timeout_ms);
	int ready =
	    code != 200 || !json_is_false(json_object_get(json_object_get(n, "status"), "ready"));
	json_decref(n);
	return ready; /* an unreachable server proves nothing about the agent */
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
	follow_t *f = ud;
	time_t now = time(NULL);
	(void)dltotal, (void)ultotal, (void)ulnow;
	if (dlnow != f->last_bytes || !f->last_data) {
		f->last_bytes = dlnow;
		f->last_data = now;
		return 0;
	}
	if (now - f->last_data < QUIET_S || now - f->last_check < QUIET_S ||
	    f->sink->status != 200 || !f->sink->node[0])
		return 0;
	f->last_check = now;
	if (node_ready(f))
		return 0;
	f->agent_lost = 1;
	return 1; /* aborts the transfer */
}

static const sc_flag_t logs_flags[] = {
    SC_CLI_CONN_FLAGS(logs_opts_t, conn),
    SC_CLI_CONTEXT_FLAG(logs_opts_t),
    {.name = "--follow",
     .alias = "-f",
     SC_FLAG_AT(BOOL, logs_opts_t, follow),
     .help = "keep printing what the pod writes"},
};

static const sc_command_t logs_cmd = {
    .name = "logs",
    .args = "JOB [POD] [-f] [options]",
    .about = "Prints a pod's output (the job's only pod when POD is left out), read\n"
             "through the server from the node it runs or ran on; -f follows it.",
    .flags = logs_flags,
    .nflags = sizeof(logs_flags) / sizeof(logs_flags[0]),
    .max_args = 2,
};

/* One attempt at GET base/api/v1/jobs/JOB/logs?pod=POD[&follow=1] (base:
 * n bytes): the server checks our rights and reads the log from the node's
 * agent with its own credential; our token goes to the server only
 * (docs/SECURITY.md). Returns the curl result; *code the HTTP status. */
static CURLcode log_request(const sc_cli_conn_t *c, const char *base, int n, const char *job,
                            const char *pod, int follow, follow_t *f, log_sink_t *sink, long *code)
{
	char url[1400], auth[600];
	snprintf(url, sizeof(url), "%.*s/api/v1/jobs/%s/logs%s%s%s", n, base, job,
	         pod ? "?pod=" : "", pod ? pod : "",
	         follow ? (pod ? "&follow=1" : "?follow=1") : "");
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->token);
	CURL *h = curl_easy_init();
	struct curl_slist *hs = curl_slist_append(NULL, auth);
	*code = 0;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, to_sink);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, sink);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_log_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, sink);
	curl_easy_setopt(h, CURLOPT_USERAGENT, SC_USER_AGENT("cli"));
	sc__cli_conn_tls(c, h);
	sc__cli_curl_limits(h, follow ? 0 : c->timeout_ms);
	if (follow) {
		/* A quiet log is not a stall: the stall limit is off, and the
		 * progress callback asks the server about the agent instead. */
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 0L);
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, f);
	}
	CURLcode rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code);
	curl_slist_free_all(hs);
	curl_easy_cleanup(h);
	return rc;
}

/* Streams the log from the first server of the --server list that answers
 * (not unreachable, not 503), as the other client verbs do. */
static int stream_logs(const sc_cli_conn_t *c, const char *job, const char *pod, int follow)
{
	sc_buf_t err;
	log_sink_t sink = {.err = &err};
	follow_t f = {
	    .servers = c->server, .token = c->token, .sink = &sink, .timeout_ms = c->timeout_ms};
	CURLcode rc = CURLE_OK;
	long code = 0;
	const char *p = c->server, *where = c->server;
	int n = 0;
	sc_buf_init(&err, 64 * 1024);
	while (*p) {
		n = (int)strcspn(p, ",");
		where = p;
		sc_buf_reset(&err);
		sink.status = 0;
		rc = log_request(c, p, n, job, pod, follow, &f, &sink, &code);
		/* Nothing printed yet and the server is down or busy: the next. */
		if (f.agent_lost || !((rc != CURLE_OK && code == 0) || code == 503))
			break;
		p += n;
		p += *p == ',';
	}
	int out = SC_EXIT_OK;
	if (f.agent_lost) {
		fprintf(stderr,
		        "starcloud logs: the agent of node %s stopped renewing its lease (node not "
		        "ready): it is down or cut off; stopped following\n",
		        sink.node);
		out = SC_EXIT_FAIL;
	} else if (rc != CURLE_OK) {
		fprintf(stderr, "starcloud logs: %.*s: %s\n", n, where, curl_easy_strerror(rc));
		out = SC_EXIT_FAIL;
	} else if (code != 200) {
		json_t *e = json_loadb(err.data ? err.data : "", err.len, 0, NULL);
		const char *msg =
		    json_string_value(json_object_get(json_object_get(e, "error"), "message"));
		fprintf(stderr, "starcloud logs: %s %s: %s (HTTP %ld)\n", job, pod ? pod : "",
		        msg ? msg : "failed", code);
		json_decref(e);
		out = SC_EXIT_FAIL;
	}
	sc_buf_free(&err);
	return out;
}

int sc_cli_logs(int argc, char **argv)
{
	logs_opts_t o = {0};
	sc_cli_conn_t c;
	int npos = 0;
	int prc = sc_flags_parse(&logs_cmd, &o, argc, argv, &npos);
	if (prc != 0)
		return prc > 0 ? SC_EXIT_OK : SC_EXIT_USAGE;
	const char *pos[2] = {npos > 0 ? argv[1] : NULL, npos > 1 ? argv[2] : NULL};
	if (npos < 1 || strlen(pos[0]) > 253 || (pos[1] && strlen(pos[1]) > 253)) {
		sc_flags_usage(&logs_cmd, stderr);
		return SC_EXIT_USAGE;
	}
	sc__cli_conn_context(o.context_flag);
	if (sc__cli_connect("logs", &o.conn, argc, argv, &c) < 0)
		return SC_EXIT_USAGE;
	snprintf(call_ca, sizeof(call_ca), "%s", c.ca);
	return stream_logs(&c, pos[0], pos[1], o.follow);
}

/* ---- dev ---------------------------------------------------------------- */

static pid_t spawn(char *const argv[], int out_fd)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (out_fd >= 0)
			dup2(out_fd, 1);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	return pid;
}

/* Reads the server's stdout until the admin token line. */
static int read_token(int fd, char *token, size_t tsz)
{
	char buf[4096];
	size_t n = 0;
	ssize_t r;
	while (n < sizeof(buf) - 1 && (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0) {
		n += (size_t)r;
		buf[n] = '\0';
		char *t = strstr(buf, "): sc_");
		if (t && strchr(t, '\n')) {
			t += 3;
			snprintf(token, tsz, "%.*s", (int)strcspn(t, "\r\n"), t);
			return 0;
		}
	}
	return -1;
}

/* The dev cluster becomes the context "dev" of the client's configuration
 * (cli_config.h), made current, with its CA; other contexts are kept. */
static void write_config(const char *server, const char *token, const char *ca)
{
	char path[1024], err[600];
	if (sc__cli_config_login("dev", server, token, NULL, ca[0] ? ca : NULL, err, sizeof(err)) <
	    0) {
		fprintf(stderr, "starcloud dev: %s\n", err);
		return;
	}
	if (sc__cli_config_path(path, sizeof(path)) == 0)
		printf("config:  %s (context dev)\n", path);
}

typedef struct dev_opts {
	int nagents;
	const char *gpus, *dir;
	int plain;
} dev_opts_t;

static const sc_flag_t dev_flags[] = {
    {.name = "--agents",
     SC_FLAG_AT(INT, dev_opts_t, nagents),
     .min = 0,
     .max = MAX_AGENTS,
     .def = "1",
     .help = "node agents to run"},
    {.name = "--gpus",
     SC_FLAG_AT(STR, dev_opts_t, gpus),
     .meta = "NxMODEL[:mig]",
     .def = "8xA100-80GB",
     .help = "each agent's declared GPUs"},
    {.name = "--data-dir",
     SC_FLAG_AT(STR, dev_opts_t, dir),
     .meta = "DIR",
     .help = "where the server and agents keep their data (default: a new\nfolder in /tmp)"},
    {.name = "--plain-http",
     SC_FLAG_AT(BOOL, dev_opts_t, plain),
     .help = "no TLS (default: a CA made for this run signs the server's,\nthe agents' and "
             "their client certificates)"},
};

static const sc_command_t dev_cmd = {
    .name = "dev",
    .about = "Runs a server and N agents with declared GPUs on loopback until\n"
             "interrupted; writes ~/.config/starcloud/config.",
    .flags = dev_flags,
    .nflags = sizeof(dev_flags) / sizeof(dev_flags[0]),
};

static volatile sig_atomic_t dev_stop;
static void on_dev_signal(int sig)
{
	dev_stop = 1;
}

/* Mints an agent token for node (docs/AGENT.md: an agent may heartbeat its
 * node and read jobs and deployments only), so the dev agents do not hold
 * the admin token. Falls back to the admin token when that fails. */
static void agent_token(const char *url, const char *admin, const char *node, const char *addr,
                        char *out, size_t outsz)
{
	char turl[128], body[256];
	json_t *resp = NULL;
	snprintf(turl, sizeof(turl), "%s/api/v1/tokens", url);
	/* The address is fixed in the token: the agent cannot move it. */
	snprintf(body, sizeof(body), "{\"role\":\"agent\",\"node\":\"%s\",\"address\":\"%s\"}",
	         node, addr);
	const char *t = NULL;
	if (admin[0] && call_json(turl, admin, body, &resp, 0) == 201)
		t = json_string_value(json_object_get(resp, "token"));
	if (!t)
		fprintf(stderr,
		        "starcloud dev: cannot mint an agent token for %s; it uses the "
		        "admin token\n",
		        node);
	snprintf(out, outsz, "%s", t ? t : admin);
	json_decref(resp);
}

/* The server prints its admin token before it listens: wait (at most
 * 10 s) until /healthz answers, so the agent tokens can be minted. */
static void wait_server(const char *url)
{
	char hurl[128];
	snprintf(hurl, sizeof(hurl), "%s/healthz", url);
	for (int i = 0; i < 200; i++) {
		json_t *j = NULL;
		long code = get_json(hurl, "", &j);
		json_decref(j);
		if (code == 200)
			return;
		usleep(50 * 1000);
	}
}

/* Writes a token to path, mode 0600 (the agent refuses anything else). */
static int write_token_file(const char *path, const char *token)
{
	FILE *f = NULL;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0 && fchmod(fd, 0600) == 0)
		f = fdopen(fd, "w");
	if (!f) {
		if (fd >= 0)
			close(fd);
		fprintf(stderr, "starcloud dev: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "%s\n", token);
	return fclose(f) == 0 ? 0 : -1;
}

/* Starts agent i of the dev cluster (dev-node-<i>) with a token of its
 * own, given in a file (never in argv); returns its pid. */
static pid_t start_dev_agent(int i, const char *url, const char *token, const char *gpus,
                             const char *dir, sc_devca_t *ca)
{
	char name[32], listen[32], adir[1100], atok[256], tfile[1200], err[512];
	char tls[8][1300];
	snprintf(name, sizeof(name), "dev-node-%d", i);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", sc_http_free_loopback_port());
	agent_token(url, token, name, listen, atok, sizeof(atok));
	snprintf(adir, sizeof(adir), "%s/%s", dir, name);
	snprintf(tfile, sizeof(tfile), "%s/%s.token", dir, name);
	if (write_token_file(tfile, atok) < 0)
		return -1;
	char *aargv[32] = {"starcloud",  "agent", "--server", (char *)url,  "--token-file", tfile,
	                   "--name",     name,    "--gpus",   (char *)gpus, "--listen",     listen,
	                   "--data-dir", adir,    "--drain",  NULL};
	if (ca) {
		/* Its status port's certificate, and a client certificate that
		 * names its node (mTLS towards the server). */
		static const char *const fl[] = {"--ca", "--tls-cert",        "--tls-key",
		                                 NULL,   "--tls-client-cert", "--tls-client-key"};
		char st[64], cl[64], cn[64];
		snprintf(st, sizeof(st), "%s-status", name);
		snprintf(cl, sizeof(cl), "%s-client", name);
		snprintf(cn, sizeof(cn), "node:%s", name);
		if (sc__devca_issue(ca, st, "127.0.0.1", 0, err, sizeof(err)) < 0 ||
		    sc__devca_issue(ca, cl, cn, 1, err, sizeof(err)) < 0) {
			fprintf(stderr, "starcloud dev: %s\n", err);
			return -1;
		}
		snprintf(tls[0], sizeof(tls[0]), "%s", call_ca);
		snprintf(tls[1], sizeof(tls[1]), "%s/tls/%s.pem", dir, st);
		snprintf(tls[2], sizeof(tls[2]), "%s/tls/%s-key.pem", dir, st);
		snprintf(tls[4], sizeof(tls[4]), "%s/tls/%s.pem", dir, cl);
		snprintf(tls[5], sizeof(tls[5]), "%s/tls/%s-key.pem", dir, cl);
		int n = 15;
		for (int k = 0; k < 6; k++)
			if (fl[k]) {
				aargv[n++] = (char *)fl[k];
				aargv[n++] = tls[k];
			}
		aargv[n] = NULL;
	}
	pid_t pid = spawn(aargv, -1);
	printf("agent:   %s at %s://%s\n", name, ca ? "https" : "http", listen);
	return pid;
}

/* SIGINT, SIGTERM and SIGHUP stop the dev cluster; caught from the start,
 * so one that comes while it starts stops what was started (the children
 * get the default actions back at exec). SIGHUP too: a closed terminal
 * hangs up the whole process group, and the daemons take SIGHUP as "reload
 * the certificates" (net/tlsreload.h), so they would outlive dev. */
static void catch_stop_signals(void)
{
	/* No SA_RESTART: the signal must interrupt waitpid. */
	struct sigaction sa = {.sa_handler = on_dev_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* Waits for a stop signal or the first child to die, then stops all. */
static void run_until_signal(const pid_t *pids, int npids)
{
	while (!dev_stop) {
		int st;
		pid_t p = waitpid(-1, &st, 0);
		if (p > 0 || (p < 0 && errno != EINTR))
			break; /* a child died: stop the rest */
	}
	for (int i = npids - 1; i >= 0; i--)
		kill(pids[i], SIGTERM);
	while (wait(NULL) > 0)
		;
}

int sc_cli_dev(int argc, char **argv)
{
	dev_opts_t o = {0};
	int prc = sc_flags_parse(&dev_cmd, &o, argc, argv, NULL);
	if (prc != 0)
		return prc > 0 ? SC_EXIT_OK : SC_EXIT_USAGE;
	int nagents = o.nagents;
	const char *gpus = o.gpus, *dir = o.dir;
	char tmp[] = "/tmp/starcloud-dev-XXXXXX", url[64], token[256] = "", err[512];
	pid_t pids[MAX_AGENTS + 1];
	int npids = 0, pfd[2];
	sc_devca_t *ca = NULL;
	catch_stop_signals();
	if (!dir && !(dir = mkdtemp(tmp))) {
		perror("starcloud dev: mkdtemp");
		return SC_EXIT_FAIL;
	}
	/* Traversable (pods reach their folders under the agents' dirs) but
	 * not listable: the token files in it are 0600. */
	mkdir(dir, 0711);
	chmod(dir, 0711);
	char sdir[1024], sport[16], tdir[1100], cert[1200], key[1200];
	snprintf(sdir, sizeof(sdir), "%s/server", dir);
	snprintf(sport, sizeof(sport), "127.0.0.1:%d", sc_http_free_loopback_port());
	snprintf(url, sizeof(url), "%s://%s", o.plain ? "http" : "https", sport);
	if (!o.plain) {
		/* The safe default: TLS everywhere, with a CA made for this run. */
		snprintf(tdir, sizeof(tdir), "%s/tls", dir);
		mkdir(tdir, 0700);
		if (!(ca = sc__devca_new(tdir, err, sizeof(err))) ||
		    sc__devca_issue(ca, "server", "127.0.0.1", 0, err, sizeof(err)) < 0) {
			fprintf(stderr, "starcloud dev: %s (or run with --plain-http)\n", err);
			sc__devca_free(ca);
			return SC_EXIT_FAIL;
		}
		snprintf(call_ca, sizeof(call_ca), "%s/ca.pem", tdir);
		snprintf(cert, sizeof(cert), "%s/server.pem", tdir);
		snprintf(key, sizeof(key), "%s/server-key.pem", tdir);
	}
	if (pipe(pfd) < 0)
		return SC_EXIT_FAIL;
	char *sargv[] = {"starcloud", "server", "--listen", sport, "--data-dir", sdir, NULL, NULL,
	                 NULL,        NULL,     NULL,       NULL,  NULL,         NULL, NULL};
	if (ca) {
		char *more[] = {"--tls-cert",      cert,    "--tls-key",  key,
		                "--tls-client-ca", call_ca, "--agent-ca", call_ca};
		memcpy(sargv + 6, more, sizeof(more));
	}
	pids[npids++] = spawn(sargv, pfd[1]);
	close(pfd[1]);
	if (read_token(pfd[0], token, sizeof(token)) < 0)
		fprintf(stderr,
		        "starcloud dev: no admin token from the server (data dir %s in "
		        "use before?); agents need STARCLOUD_TOKEN\n",
		        sdir);
	close(pfd[0]);
	if (!token[0] && getenv("STARCLOUD_TOKEN"))
		snprintf(token, sizeof(token), "%s", getenv("STARCLOUD_TOKEN"));
	wait_server(url);
	printf("server:  %s\ntoken:   %s\ndata:    %s\nui:      %s/ui\n", url, token, dir, url);
	if (ca)
		printf("ca:      %s (curl --cacert, starcloud --ca; in the config below)\n",
		       call_ca);
	for (int i = 0; i < nagents; i++) {
		pid_t pid = start_dev_agent(i, url, token, gpus, dir, ca);
		if (pid > 0)
			pids[npids++] = pid;
	}
	write_config(url, token, call_ca);
	fflush(stdout);
	sc__devca_free(ca);
	run_until_signal(pids, npids);
	return SC_EXIT_OK;
}
