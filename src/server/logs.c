/* Pod logs through the server: GET /api/v1/{jobs|deployments}/{name}/logs
 * ?pod=P[&follow=1].
 *
 * The reader's rights are checked here, with the reader's token, exactly
 * as for reading the object (a tenant reads its own queues' logs, 404 for
 * the rest); the server then fetches the log from the agent of the pod's
 * node with its own credential for that node (nodekey.c) and streams it
 * back. A user's token never leaves the server, so a node that lies about
 * its address, or is taken over, learns nothing that opens anything else
 * (issue 15's escalation: an agent token once moved its node's address
 * and was handed every log reader's bearer token). Agents are not given
 * logs (403): they have their own pods' files already.
 *
 * The fetch uses the loop's HTTP client (net/hclient.h); a reader that goes
 * away cancels it, and a reader that does not keep up is cut off like a
 * slow watcher. A logreq lives exactly as long as its fetch: the fetch's
 * one on_done (whatever ended it) frees it. Log bytes do cross the control plane now: a server
 * serves a few readers at a time, not a log pipeline (docs/SECURITY.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "net/hclient.h"
#include "server/server.h"
#include "starcloud/error.h"

#define CONNECT_MS 2000
#define FIRST_BYTE_MS 10000

typedef struct logreq logreq_t;

struct sc_logproxy {
	sc_hcli_t *cli;
	logreq_t *head;
};

struct logreq {
	logreq_t *prev, *next;
	sc_server_t *s;
	sc_http_req_t *r;  /* NULL once the reader is gone or answered */
	sc_hcli_req_t *up; /* the fetch: in flight as long as this exists */
	int started;
	char where[600]; /* node and address, for messages */
	char node[SC_MAX_NAME + 1];
};

int sc__logs_register(sc_server_t *s)
{
	sc_hcli_opts_t o = {.max_idle_per_host = 4, .connect_timeout_ms = CONNECT_MS};
	sc_logproxy_t *lp = sc_xcalloc(1, sizeof(*lp));
	lp->cli = sc_hcli_new(s->loop, &o);
	if (!lp->cli) {
		free(lp);
		return SC_ENOMEM;
	}
	if (s->agent_tls)
		sc_hcli_set_tls(lp->cli, s->agent_tls);
	s->logs = lp;
	return 0;
}

static void lr_free(logreq_t *lr)
{
	sc_logproxy_t *lp = lr->s->logs;
	if (lr->prev)
		lr->prev->next = lr->next;
	else if (lp && lp->head == lr)
		lp->head = lr->next;
	if (lr->next)
		lr->next->prev = lr->prev;
	free(lr);
}

void sc__logs_close(sc_server_t *s)
{
	sc_logproxy_t *lp = s->logs;
	if (!lp)
		return;
	/* Readers' connections are closed by the HTTP server (their close
	 * callbacks free nothing of ours once we are gone). */
	for (logreq_t *lr = lp->head; lr; lr = lr->next) {
		if (lr->r)
			sc_http_on_close(lr->r, NULL, NULL);
		lr->r = NULL;
	}
	sc_hcli_close(lp->cli); /* each fetch's on_done frees its logreq */
	free(lp);
	s->logs = NULL;
}

/* The reader left: abandon the fetch. */
static void on_reader_close(sc_http_req_t *r, void *ud)
{
	logreq_t *lr = ud;
	lr->r = NULL;
	sc_hcli_cancel(lr->up); /* on_done frees lr */
}

static int on_head(sc_hcli_req_t *up, int status, void *ud)
{
	logreq_t *lr = ud;
	if (status == 200) {
		/* The node, so a follower can ask whether its agent is alive
		 * when the log goes quiet (starcloud logs -f). */
		sc_http_set_header(lr->r, "X-Starcloud-Node", lr->node);
		sc_http_stream_start(lr->r, 200, "text/plain; charset=utf-8", on_reader_close, lr);
		lr->started = 1;
		return 0;
	}
	if (status == 404)
		sc__api_error(lr->r, 404, "NotFound", "pod", "no log for this pod on %s",
		              lr->where);
	else
		sc__api_error(lr->r, 502, "BadGateway", NULL,
		              "the agent of %s answered %d to the server", lr->where, status);
	lr->r = NULL;
	return 1; /* stops the fetch: on_done frees lr */
}

static int on_data(sc_hcli_req_t *up, const char *data, size_t len, void *ud)
{
	logreq_t *lr = ud;
	if (sc_http_stream_write(lr->r, data, len) == 0)
		return 0;
	/* The reader does not keep up: cut it off, as a slow watcher is. */
	sc_http_stream_end(lr->r);
	lr->r = NULL;
	return 1;
}

static void on_done(sc_hcli_req_t *up, int err, void *ud)
{
	logreq_t *lr = ud;
	if (!lr->r)
		; /* answered already, or the reader is gone */
	else if (lr->started)
		sc_http_stream_end(lr->r);
	else
		sc__api_error(lr->r, 502, "BadGateway", NULL,
		              "the agent of %s cannot be reached (%s)", lr->where,
		              sc_strerror(err));
	lr_free(lr);
}

/* The pod to read: ?pod=, or the only pod the object has. Answers 400 or
 * 404 and returns NULL when there is none to pick. */
static json_t *pick_pod(sc_http_req_t *r, json_t *obj, char *pod, size_t podsz)
{
	json_t *pods = json_object_get(json_object_get(obj, "status"), "pods"), *e;
	size_t i;
	int rc = sc_http_query_param(r, "pod", pod, podsz);
	if (rc == SC_ETOOBIG) {
		sc__api_error(r, 400, "Invalid", "pod", "pod: name too long");
		return NULL;
	}
	if (rc < 0) {
		if (json_array_size(pods) != 1) {
			sc__api_error(r, 400, "Invalid", "pod",
			              "pod: this object has %zu pods; name one with ?pod=",
			              json_array_size(pods));
			return NULL;
		}
		snprintf(pod, podsz, "%s",
		         json_string_value(json_object_get(json_array_get(pods, 0), "name")) ?: "");
	}
	json_array_foreach(pods, i, e)
	{
		const char *n = json_string_value(json_object_get(e, "name"));
		if (n && strcmp(n, pod) == 0)
			return e;
	}
	sc__api_error(r, 404, "NotFound", "pod", "pod \"%s\" not found", pod);
	return NULL;
}

/* The status address of node's agent ("" when it has none); *tls when
 * its status port speaks https. */
static void agent_address(sc_server_t *s, const char *node, char *out, size_t outsz, int *tls)
{
	int64_t rev;
	out[0] = '\0';
	/* From the cache, as every reader (a store read would wait for etcd
	 * on the loop thread). */
	json_t *n = sc__object_copy(s, sc__kind_by_name("Node"), node, &rev);
	if (!n)
		return;
	json_t *ag = json_object_get(json_object_get(n, "status"), "agent");
	const char *a = json_string_value(json_object_get(ag, "address"));
	snprintf(out, outsz, "%s", a ? a : "");
	*tls = json_is_true(json_object_get(ag, "tls"));
	json_decref(n);
}

static int start_fetch(sc_server_t *s, sc_http_req_t *r, const char *job, const char *pod,
                       const char *node, int follow)
{
	char addr[300], url[1200], hdr[200], key[65];
	int tls = 0;
	agent_address(s, node, addr, sizeof(addr), &tls);
	if (!addr[0]) {
		sc__api_error(r, 503, "ServiceUnavailable", NULL,
		              "node %s has no agent address to read logs from", node);
		return SC_EUNAVAIL;
	}
	/* Names are DNS names: nothing in them needs escaping in a query. */
	if (snprintf(url, sizeof(url), "%s://%.300s/logs?job=%.253s&pod=%.300s%s",
	             tls ? "https" : "http", addr, job, pod,
	             follow ? "&follow=1" : "") >= (int)sizeof(url)) {
		sc__api_error(r, 400, "Invalid", "pod", "pod: name too long");
		return SC_ETOOBIG;
	}
	sc__nodekey(s, node, key);
	snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s\r\n", key);
	logreq_t *lr = sc_xcalloc(1, sizeof(*lr));
	lr->s = s;
	lr->r = r;
	snprintf(lr->where, sizeof(lr->where), "node %s (%s)", node, addr);
	snprintf(lr->node, sizeof(lr->node), "%s", node);
	sc_hcli_call_t call = {.method = "GET",
	                       .url = url,
	                       .headers = hdr,
	                       .timeout_ms = follow ? 0 : FIRST_BYTE_MS,
	                       .cbs = {on_head, on_data, on_done},
	                       .ud = lr};
	int rc = sc_hcli_start(s->logs->cli, &call, &lr->up);
	if (rc < 0) {
		free(lr);
		sc__api_error(r, 502, "BadGateway", NULL, "node %s has a bad address \"%s\"", node,
		              addr);
		return rc;
	}
	lr->next = s->logs->head;
	if (lr->next)
		lr->next->prev = lr;
	s->logs->head = lr;
	sc_http_on_close(r, on_reader_close, lr);
	return 0;
}

void sc__logs_serve(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who, const sc_kind_t *k,
                    const char *name)
{
	char pod[SC_MAX_NAME + 1], follow[8] = "";
	int64_t rev;
	if (strcmp(sc_http_method(r), "GET") != 0) {
		sc__api_error(r, 405, "MethodNotAllowed", NULL, "logs are read with GET");
		return;
	}
	if (who->role == SC_ROLE_AGENT) {
		sc__api_error(r, 403, "Forbidden", NULL, "role agent may not read logs");
		return;
	}
	if (!s->logs) {
		sc__api_error(r, 503, "ServiceUnavailable", NULL, "logs are not served");
		return;
	}
	json_t *obj = sc__api_load(s, r, who, k, name, &rev);
	if (!obj)
		return;
	json_t *e = pick_pod(r, obj, pod, sizeof(pod));
	const char *node = json_string_value(json_object_get(e, "node"));
	sc_http_query_param(r, "follow", follow, sizeof(follow));
	int fol = follow[0] && strcmp(follow, "0") != 0 && strcmp(follow, "false") != 0;
	if (e && (!node || !node[0]))
		sc__api_error(r, 404, "NotFound", "pod", "pod \"%s\" is not on a node", pod);
	else if (e)
		start_fetch(s, r, name, pod, node, fol);
	json_decref(obj);
}
