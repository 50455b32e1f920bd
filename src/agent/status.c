/* The agent's status port (default 127.0.0.1:7071):
 *   GET /healthz                         "ok" (no token)
 *   GET /pods                            this node's pods and their reports
 *   GET /logs?job=J&pod=P[&follow=1]     a pod's output (rotated part first)
 *   GET /metrics                         Prometheus figures (agent_metrics.h)
 *
 * /pods and /logs answer the server only: its credential for this node
 * (statusKey, learnt from the answers to our heartbeats; src/server/
 * nodekey.c). Users read logs through the server (GET /api/v1/jobs/J/logs),
 * which checks their rights; no user token ever reaches a node. Before the
 * first heartbeat succeeds there is no key and everything is refused.
 *
 * /metrics names queues, jobs and pods, so it is not public either: it
 * answers the bearer of --metrics-token-file's secret (Prometheus's, shared
 * by the agents; a node taken over learns only that, which opens other
 * nodes' /metrics and nothing else) or the server's key, or anyone with
 * --metrics-public. No Starcloud token is accepted: a user's or viewer's
 * token must never be sent to a node. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/status.h"
#include "agent/agent_metrics.h"
#include "base/alloc.h"
#include "base/log.h"
#include "agent/pod.h"
#include "starcloud/error.h"

#define FOLLOW_MS 200
#define CHUNK (64 * 1024)

/* ---- authorisation ----------------------------------------------------- */

static void error(sc_http_req_t *r, int code, const char *msg)
{
	char body[512];
	int n = snprintf(body, sizeof(body), "{\"error\":{\"code\":%d,\"message\":\"%s\"}}\n", code,
	                 msg);
	sc_http_respond(r, code, "application/json", body, (size_t)n);
}

/* Constant-time: the comparison's duration says nothing about the key. */
static int same_secret(const char *a, const char *b)
{
	size_t n = strlen(a);
	unsigned char d = n != strlen(b);
	for (size_t i = 0; i < n && b[i]; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

static int authorised(sc_agent_t *a, sc_http_req_t *r)
{
	const char *auth = sc_http_header(r, "Authorization");
	if (!a->status_key[0]) {
		error(r, 503, "not registered with the server yet");
		return 0;
	}
	if (!auth || strncasecmp(auth, "Bearer ", 7) != 0 ||
	    !same_secret(auth + 7, a->status_key)) {
		error(r, 401,
		      "only the server may read this node's pods and logs; use starcloud "
		      "logs (GET /api/v1/jobs/NAME/logs)");
		return 0;
	}
	return 1;
}

static int metrics_authorised(sc_agent_t *a, sc_http_req_t *r)
{
	const char *auth = sc_http_header(r, "Authorization");
	const char *given = auth && strncasecmp(auth, "Bearer ", 7) == 0 ? auth + 7 : NULL;
	if (a->o.metrics_public ||
	    (given && a->metrics_token[0] && same_secret(given, a->metrics_token)) ||
	    (given && a->status_key[0] && same_secret(given, a->status_key)))
		return 1;
	error(r, 401,
	      a->metrics_token[0]
	          ? "/metrics needs the scrape secret (Authorization: Bearer, the agent's "
	            "--metrics-token-file)"
	          : "/metrics needs a credential: start the agent with --metrics-token-file "
	            "(or --metrics-public)");
	return 0;
}

/* ---- handlers ---------------------------------------------------------- */

static void handle_healthz(sc_http_req_t *r, void *ud)
{
	sc_http_respond(r, 200, "text/plain", "ok\n", 3);
}

static void handle_metrics(sc_http_req_t *r, void *ud)
{
	sc_buf_t b;
	if (!metrics_authorised(ud, r))
		return;
	sc_buf_init(&b, 0);
	sc__agent_metrics(ud, &b);
	sc_http_respond(r, 200, "text/plain; version=0.0.4", b.data, b.len);
	sc_buf_free(&b);
}

static void handle_pods(sc_http_req_t *r, void *ud)
{
	sc_agent_t *a = ud;
	if (!authorised(a, r))
		return;
	json_t *pods = json_array();
	for (sc_pod_t *p = a->pods; p; p = p->next)
		json_array_append_new(pods, sc__pod_report(p));
	json_t *doc = json_pack("{s:s,s:o,s:s}", "node", a->o.name, "pods", pods, "gpuSource",
	                        a->gpus.source);
	char *text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	sc_http_respond(r, 200, "application/json", text, strlen(text));
	free(text);
}

typedef struct logstream {
	sc_agent_t *a;
	sc_http_req_t *r;
	uv_timer_t timer;
	char job[SC_AGENT_NAME_MAX + 1], pod[SC_AGENT_NAME_MAX + 1];
	char path[1100], rotated[1104];
	off_t off;
	int follow;
	int gone; /* the client left */
} logstream_t;

static void on_log_timer_closed(uv_handle_t *h)
{
	free(h->data);
}

static void log_end(logstream_t *ls)
{
	uv_timer_stop(&ls->timer);
	if (!ls->gone)
		sc_http_stream_end(ls->r);
	uv_close((uv_handle_t *)&ls->timer, on_log_timer_closed);
}

static void on_log_close(sc_http_req_t *r, void *ud)
{
	logstream_t *ls = ud;
	ls->gone = 1;
	log_end(ls);
}

/* Sends what is new in the file; 1 at its end. Truncation (rotation)
 * starts over from the beginning. */
static int send_new(logstream_t *ls, const char *path, off_t *off)
{
	char buf[CHUNK];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 1;
	if (fstat(fd, &st) == 0 && st.st_size < *off)
		*off = 0;
	ssize_t n = pread(fd, buf, sizeof(buf), *off);
	close(fd);
	if (n <= 0)
		return 1;
	*off += n;
	if (sc_http_stream_write(ls->r, buf, (size_t)n) < 0)
		return -1;
	return n < (ssize_t)sizeof(buf);
}

static int pod_finished(logstream_t *ls)
{
	sc_pod_t *p = sc__pod_find(ls->a, ls->job, ls->pod);
	return !p || p->stopping || p->state == SC_PS_SUCCEEDED || p->state == SC_PS_FAILED;
}

static void on_log_timer(uv_timer_t *t)
{
	logstream_t *ls = t->data;
	int finished = pod_finished(ls); /* before reading: no output is missed */
	int rc = send_new(ls, ls->path, &ls->off);
	if (rc < 0 || (rc == 1 && (!ls->follow || finished))) {
		log_end(ls);
		return;
	}
	uv_timer_start(&ls->timer, on_log_timer, rc == 1 ? FOLLOW_MS : 0, 0);
}

/* The rotated part is sent whole at once (it is at most --log-max). */
static void send_rotated(logstream_t *ls)
{
	off_t off = 0;
	int rc;
	while ((rc = send_new(ls, ls->rotated, &off)) == 0)
		;
}

static int valid_name(const char *s)
{
	if (!s[0] || strstr(s, "..") || strchr(s, '/'))
		return 0;
	return 1;
}

static void handle_logs(sc_http_req_t *r, void *ud)
{
	sc_agent_t *a = ud;
	char job[SC_AGENT_NAME_MAX + 1], pod[SC_AGENT_NAME_MAX + 1], follow[8] = "";
	if (sc_http_query_param(r, "job", job, sizeof(job)) <= 0 ||
	    sc_http_query_param(r, "pod", pod, sizeof(pod)) <= 0 || !valid_name(job) ||
	    !valid_name(pod)) {
		error(r, 400, "job and pod are required names");
		return;
	}
	sc_http_query_param(r, "follow", follow, sizeof(follow));
	if (!authorised(a, r))
		return;
	logstream_t *ls = sc_xcalloc(1, sizeof(*ls));
	ls->a = a;
	ls->r = r;
	ls->follow = follow[0] && strcmp(follow, "0") != 0 && strcmp(follow, "false") != 0;
	snprintf(ls->job, sizeof(ls->job), "%s", job);
	snprintf(ls->pod, sizeof(ls->pod), "%s", pod);
	int n = snprintf(ls->path, sizeof(ls->path), "%s/pods/%s/%s/output.log", a->o.data_dir, job,
	                 pod);
	snprintf(ls->rotated, sizeof(ls->rotated), "%s.1", ls->path);
	if (n >= (int)sizeof(ls->path) || access(ls->path, R_OK) != 0) {
		free(ls);
		error(r, 404, "no log for this pod on this node");
		return;
	}
	uv_timer_init(a->loop, &ls->timer);
	ls->timer.data = ls;
	sc_http_stream_start(r, 200, "text/plain", on_log_close, ls);
	send_rotated(ls);
	uv_timer_start(&ls->timer, on_log_timer, 0, 0);
}

int sc__status_start(sc_agent_t *a)
{
	sc_http_limits_t lim = {
	    .max_body_bytes = 64 * 1024, .max_conns = 256, .idle_timeout_ms = 60000};
	a->status = sc_http_server_new(a->loop, &lim);
	if (!a->status)
		return SC_ENOMEM;
	int rc;
	if ((rc = sc_http_route(a->status, "GET", "/healthz", handle_healthz, a)) < 0 ||
	    (rc = sc_http_route(a->status, "GET", "/pods", handle_pods, a)) < 0 ||
	    (rc = sc_http_route(a->status, "GET", "/logs", handle_logs, a)) < 0 ||
	    (rc = sc_http_route(a->status, "GET", "/metrics", handle_metrics, a)) < 0)
		return rc;
	if ((rc = sc_tls_serve_setup("agent", &a->o.tls, a->o.listen.host, a->status, &a->tls)) < 0)
		return rc;
	if ((rc = sc_http_listen(a->status, a->o.listen.host, a->o.listen.port)) < 0) {
		sc_log_error("cannot listen on %s:%d: %s", a->o.listen.host, a->o.listen.port,
		             sc_http_listen_error(a->status));
		return rc;
	}
	if (!a->advertise[0])
		snprintf(a->advertise, sizeof(a->advertise), "%s:%d", a->o.listen.host,
		         sc_http_port(a->status));
	sc_log_info("status on %s://%s:%d", a->tls ? "https" : "http", a->o.listen.host,
	            sc_http_port(a->status));
	return 0;
}
