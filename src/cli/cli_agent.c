/* `starcloud logs JOB [POD] [-f]` and `starcloud dev`.
 *
 * logs: the CLI asks the agent directly (docs/AGENT.md): it reads the job
 * from the server to find the pod's node, the node for its agent's
 * address (status.agent.address), then streams /logs from that agent with
 * the same token; the agent has the server authorise it.
 *
 * dev: a server (temporary or given data dir) and N agents with declared
 * GPUs as child processes of this one, like `nomad agent -dev`; prints the
 * addresses and the admin token and writes ~/.config/starcloud/config. */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cmdline.h"
#include "cli/cli.h"
#include "cli/cli_conn.h"
#include "cli/cli_config.h"
#include "cli/cli_agent.h"
#include "starcloud/buf.h"

#define MAX_DOC (64u << 20)
#define MAX_AGENTS 64

/* ---- shared: server, token ---------------------------------------------- */

static size_t to_buf(char *p, size_t size, size_t n, void *ud)
{
	return sc_buf_append(ud, p, size * n) < 0 ? 0 : size * n;
}

static size_t to_stdout(char *p, size_t size, size_t n, void *ud)
{
	size_t w = fwrite(p, size, n, stdout);
	fflush(stdout);
	return w * size;
}

/* GET url (POST body when not NULL) with the token; the JSON answer in
 * *out (NULL when not JSON). Returns the HTTP status or -1. */
static long call_json(const char *url, const char *token, const char *body, json_t **out,
                      uint64_t timeout_ms)
{
	char auth[600];
	sc_buf_t b;
	long code = -1;
	sc_buf_init(&b, MAX_DOC);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	CURL *h = curl_easy_init();
	struct curl_slist *hs = curl_slist_append(NULL, auth);
	if (body) {
		hs = curl_slist_append(hs, "Content-Type: application/json");
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, to_buf);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	sc__cli_curl_limits(h, timeout_ms ? timeout_ms : 30000);
	curl_easy_setopt(h, CURLOPT_USERAGENT, SC_USER_AGENT("cli"));
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	*out = b.len ? json_loadb(b.data, b.len, 0, NULL) : NULL;
	curl_slist_free_all(hs);
	curl_easy_cleanup(h);
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
	const char *server_flag, *token_flag, *context_flag;
	uint64_t request_timeout;
	int follow;
} logs_opts_t;

/* Following a pod's output: the agent may die or freeze with the
 * connection open (a frozen process, or a host gone from the network, sends
 * no FIN). When nothing has come for QUIET_S seconds the CLI asks the server
 * whether the node's agent still renews its lease, and stops with a message
 * when it does not (node not ready). */
#define QUIET_S 5

typedef struct follow {
	const char *servers, *token, *node;
	uint64_t timeout_ms;
	curl_off_t last_bytes;
	time_t last_data, last_check;
	int agent_lost;
} follow_t;

static int node_ready(follow_t *f)
{
	char path[600];
	json_t *n = NULL;
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", f->node);
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
	if (now - f->last_data < QUIET_S || now - f->last_check < QUIET_S)
		return 0;
	f->last_check = now;
	if (node_ready(f))
		return 0;
	f->agent_lost = 1;
	return 1; /* aborts the transfer */
}

static const sc_flag_t logs_flags[] = {
    SC_CLI_CONN_FLAGS(logs_opts_t),
    SC_CLI_CONTEXT_FLAG(logs_opts_t),
    {.name = "--follow",
     .alias = "-f",
     SC_FLAG_AT(BOOL, logs_opts_t, follow),
     .help = "keep printing what the pod writes"},
};

static const sc_command_t logs_cmd = {
    .name = "logs",
    .args = "JOB [POD] [-f] [options]",
    .about = "Prints a pod's output (the job's first pod when POD is left out), read\n"
             "from the agent of the node it runs or ran on; -f follows it.",
    .flags = logs_flags,
    .nflags = sizeof(logs_flags) / sizeof(logs_flags[0]),
    .max_args = 2,
};

/* Finds pod (or the first pod) of job: its name and node. */
static int find_pod(json_t *job, const char *want, const char **pod, const char **node)
{
	json_t *e;
	size_t i;
	json_array_foreach(json_object_get(json_object_get(job, "status"), "pods"), i, e)
	{
		const char *n = json_string_value(json_object_get(e, "name"));
		const char *nd = json_string_value(json_object_get(e, "node"));
		if (n && nd && (!want || strcmp(want, n) == 0)) {
			*pod = n;
			*node = nd;
			return 0;
		}
	}
	return -1;
}

static int stream_logs(const char *addr, const char *token, const char *job, const char *pod,
                       int follow, follow_t *f)
{
	char url[1400], auth[600];
	snprintf(url, sizeof(url), "http://%s/logs?job=%s&pod=%s%s", addr, job, pod,
	         follow ? "&follow=1" : "");
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	CURL *h = curl_easy_init();
	struct curl_slist *hs = curl_slist_append(NULL, auth);
	long code = 0;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, to_stdout);
	curl_easy_setopt(h, CURLOPT_USERAGENT, SC_USER_AGENT("cli"));
	curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
	sc__cli_curl_limits(h, follow ? 0 : f->timeout_ms);
	if (follow) {
		/* A quiet log is not a stall: the stall limit is off, and the
		 * progress callback asks the server about the agent instead. */
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 0L);
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, f);
	}
	CURLcode rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(hs);
	curl_easy_cleanup(h);
	if (f->agent_lost) {
		fprintf(stderr,
		        "starcloud logs: the agent of node %s stopped renewing its lease (node not "
		        "ready): it is down or cut off; stopped following\n",
		        f->node);
		return SC_EXIT_FAIL;
	}
	if (rc != CURLE_OK) {
		fprintf(stderr, "starcloud logs: agent at %s: %s (HTTP %ld)\n", addr,
		        curl_easy_strerror(rc), code);
		return SC_EXIT_FAIL;
	}
	return SC_EXIT_OK;
}

int sc_cli_logs(int argc, char **argv)
{
	logs_opts_t o = {0};
	char server[512], token[256], url[1024];
	int npos = 0;
	int prc = sc_flags_parse(&logs_cmd, &o, argc, argv, &npos);
	if (prc != 0)
		return prc > 0 ? SC_EXIT_OK : SC_EXIT_USAGE;
	const char *pos[2] = {npos > 0 ? argv[1] : NULL, npos > 1 ? argv[2] : NULL};
	int follow = o.follow;
	if (npos < 1 || strlen(pos[0]) > 253 || (pos[1] && strlen(pos[1]) > 253)) {
		sc_flags_usage(&logs_cmd, stderr);
		return SC_EXIT_USAGE;
	}
	sc__cli_conn_context(o.context_flag);
	if (sc__cli_conn(o.server_flag, o.token_flag, server, sizeof(server), token,
	                 sizeof(token)) < 0)
		return SC_EXIT_USAGE;
	json_t *job = NULL, *node = NULL;
	const char *pod, *nodename;
	int rc = SC_EXIT_FAIL;
	snprintf(url, sizeof(url), "/api/v1/jobs/%s", pos[0]);
	long code = server_json(server, url, token, &job, o.request_timeout);
	if (code != 200) {
		fprintf(stderr, "starcloud logs: job %s: %s\n", pos[0],
		        code < 0 ? "server unreachable" : "not found");
		goto out;
	}
	if (find_pod(job, pos[1], &pod, &nodename) < 0) {
		fprintf(stderr, "starcloud logs: job %s has no %s%s placed on a node yet\n", pos[0],
		        pos[1] ? "pod " : "pod", pos[1] ? pos[1] : "");
		goto out;
	}
	snprintf(url, sizeof(url), "/api/v1/nodes/%s", nodename);
	server_json(server, url, token, &node, o.request_timeout);
	const char *addr = json_string_value(
	    json_object_get(json_object_get(json_object_get(node, "status"), "agent"), "address"));
	if (!addr) {
		fprintf(stderr, "starcloud logs: node %s has no agent address\n", nodename);
		goto out;
	}
	follow_t f = {
	    .servers = server, .token = token, .node = nodename, .timeout_ms = o.request_timeout};
	rc = stream_logs(addr, token, pos[0], pod, follow, &f);
out:
	json_decref(job);
	json_decref(node);
	return rc;
}

/* ---- dev ---------------------------------------------------------------- */

static int free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

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
 * (cli_config.h), made current; other contexts are kept. */
static void write_config(const char *server, const char *token)
{
	char path[1024], err[600];
	if (sc__cli_config_login("dev", server, token, NULL, NULL, err, sizeof(err)) < 0) {
		fprintf(stderr, "starcloud dev: %s\n", err);
		return;
	}
	if (sc__cli_config_path(path, sizeof(path)) == 0)
		printf("config:  %s (context dev)\n", path);
}

typedef struct dev_opts {
	int nagents;
	const char *gpus, *dir;
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
static void agent_token(const char *url, const char *admin, const char *node, char *out,
                        size_t outsz)
{
	char turl[128], body[128];
	json_t *resp = NULL;
	snprintf(turl, sizeof(turl), "%s/api/v1/tokens", url);
	snprintf(body, sizeof(body), "{\"role\":\"agent\",\"node\":\"%s\"}", node);
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

/* Starts agent i of the dev cluster (dev-node-<i>) with a token of its
 * own; returns its pid. */
static pid_t start_dev_agent(int i, const char *url, const char *token, const char *gpus,
                             const char *dir)
{
	char name[32], listen[32], adir[1100], atok[256];
	snprintf(name, sizeof(name), "dev-node-%d", i);
	agent_token(url, token, name, atok, sizeof(atok));
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", free_port());
	snprintf(adir, sizeof(adir), "%s/%s", dir, name);
	char *aargv[] = {"starcloud",  "agent", "--server", (char *)url,  "--token",  atok,
	                 "--name",     name,    "--gpus",   (char *)gpus, "--listen", listen,
	                 "--data-dir", adir,    "--drain",  NULL};
	pid_t pid = spawn(aargv, -1);
	printf("agent:   %s at http://%s\n", name, listen);
	return pid;
}

/* Waits for SIGINT/SIGTERM or the first child to die, then stops all. */
static void run_until_signal(const pid_t *pids, int npids)
{
	/* No SA_RESTART: the signal must interrupt waitpid. */
	struct sigaction sa = {.sa_handler = on_dev_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
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
	char tmp[] = "/tmp/starcloud-dev-XXXXXX", url[64], token[256] = "";
	pid_t pids[MAX_AGENTS + 1];
	int npids = 0, pfd[2];
	if (!dir && !(dir = mkdtemp(tmp))) {
		perror("starcloud dev: mkdtemp");
		return SC_EXIT_FAIL;
	}
	mkdir(dir, 0755);
	char sdir[1024], sport[16];
	snprintf(sdir, sizeof(sdir), "%s/server", dir);
	snprintf(sport, sizeof(sport), "127.0.0.1:%d", free_port());
	snprintf(url, sizeof(url), "http://%s", sport);
	if (pipe(pfd) < 0)
		return SC_EXIT_FAIL;
	char *sargv[] = {"starcloud", "server", "--listen", sport, "--data-dir", sdir, NULL};
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
	for (int i = 0; i < nagents; i++)
		pids[npids++] = start_dev_agent(i, url, token, gpus, dir);
	write_config(url, token);
	fflush(stdout);
	run_until_signal(pids, npids);
	return SC_EXIT_OK;
}
