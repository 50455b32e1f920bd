/* Server side of the node agent (docs/AGENT.md):
 *
 *   POST /api/v1/agents/{node}/heartbeat   (admin, or an agent token of node)
 *     {"address","leaseMillis","conditions","devices","gpuSource","pods":[...]}
 *
 * A heartbeat renews the node's lease (kept in memory: it is soft state, and
 * after a server restart every agent-managed node gets one lease period to
 * call in), refreshes the node's status (ready, conditions, agent address,
 * devices; written only when it changed) and applies the pod reports to the
 * jobs' status.pods (phase, ready, restarts, exitCode, message). A report
 * counts only when the entry still names this node and the same assignment
 * (generation, or startedAt), so a node back from a partition cannot
 * overwrite the state of a pod that now runs elsewhere.
 *
 * When a lease expires the node is marked NotReady (status.ready: false, so
 * the scheduler places nothing there). Its pods are evicted only the
 * node's fence time later (fenceMillis in its heartbeats; docs/AGENT.md):
 * by then the node has stopped them itself (its agent, or its pod guard
 * when the agent is dead), so a pod never runs on two nodes, and an agent
 * restart shorter than that changes nothing. Evicted: every Running pod of
 * a Job with a pod there becomes Releasing (a gang is only useful whole).
 * The scheduling loop then removes them and places the jobs elsewhere. A
 * heartbeat between expiry and eviction renews the lease and the node is
 * ready again. A Deployment's pods there are evicted earlier, at the
 * node's own fence deadline (expiry + half the fence time, when it stops
 * its pods itself; a shorter agent restart still changes nothing): their
 * new places are bound at once (with any reclaim they need) but start
 * only when the node is given up or has reported them stopped
 * (sched_write.c), so they never run beside the old copy, and a lost
 * node costs serving the fence time rather than the fence time plus a
 * placement (issue 23).
 *
 * Gang policy: when a pod of a job with more than one pod fails for good,
 * spec.gangPolicy decides: FailJob (default) fails the other pods too;
 * RestartGang releases every pod so the gang is placed and started afresh,
 * at most backoffLimit (default 6) times, counted in the annotation
 * starcloud.dev/gang-restarts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/version.h"
#include "base/parse.h"
#include "base/alloc.h"
#include "server/ha.h"
#include "server/jobstatus.h"
#include "base/log.h"
#include "server/server.h"
#include "starcloud/error.h"

#define SC_AGENT_PREFIX SC_API_PREFIX "agents/"
#define SCAN_MS 250
#define MIN_LEASE_MS 300
#define MAX_LEASE_MS 600000
#define DEFAULT_LEASE_MS 6000
#define MAX_REPORTS 10000
#define SC_GANG_RESTARTS "starcloud.dev/gang-restarts"

typedef struct lease {
	char node[SC_MAX_NAME + 1];
	uint64_t expires;    /* loop ms */
	uint64_t fence_ms;   /* the pods are given away this long after expires */
	int expired;         /* the node is marked NotReady */
	int expiring;        /* that write is in flight */
	int lost;            /* its pods are given away */
	int moved;           /* its Deployments' pods are placed elsewhere */
	unsigned long epoch; /* s->store_epoch when expired/lost were written */
} lease_t;

typedef struct agent_api {
	sc_server_t *s;
	uv_timer_t timer;
	lease_t *leases;
	size_t n, cap;
	int scanned; /* nodes from before our start have been given a lease */
} agent_api_t;

/* ---- store helpers ----------------------------------------------------- */

/* A copy of the object to change, from the cache. */
static json_t *load(sc_server_t *s, const char *kind, const char *name, int64_t *rev)
{
	return sc__object_copy(s, sc__kind_by_name(kind), name, rev);
}

/* Writes obj under the condition rev, without waiting for the store
 * (store.h). A heartbeat is answered once its lease is renewed (in memory)
 * and its writes are made, not once they are stored: the node's status and
 * the pod reports are state the agent sends again with every heartbeat,
 * so one that loses to another write (the loop's) or to a slow store is
 * redone by the next, and a slow store does not slow the heartbeats down
 * to where agents fence their pods (with SQLite the answer still waits for
 * the fsync of the writes, commit.c). */
static void save(sc_server_t *s, const char *kind, json_t *obj, int64_t rev)
{
	sc__object_save(s, sc__kind_by_name(kind), obj, rev, NULL, NULL);
}

static json_t *status_of(json_t *obj)
{
	json_t *st = json_object_get(obj, "status");
	if (!json_is_object(st)) {
		st = json_object();
		json_object_set_new(obj, "status", st);
	}
	return st;
}

/* ---- leases ------------------------------------------------------------ */

static lease_t *lease_find(agent_api_t *api, const char *node, int create)
{
	for (size_t i = 0; i < api->n; i++)
		if (strcmp(api->leases[i].node, node) == 0)
			return &api->leases[i];
	if (!create)
		return NULL;
	if (api->n == api->cap) {
		api->cap = api->cap ? api->cap * 2 : 16;
		api->leases = sc_xrealloc(api->leases, api->cap * sizeof(*api->leases));
	}
	lease_t *l = &api->leases[api->n++];
	memset(l, 0, sizeof(*l));
	snprintf(l->node, sizeof(l->node), "%s", node);
	return l;
}

/* ---- pod reports ------------------------------------------------------- */

/* The report is about the assignment this entry records. */
static int same_assignment(json_t *entry, json_t *rep, const char *node)
{
	sc_jobst_pod_t p;
	json_t *rg = json_object_get(rep, "generation");
	if (sc__jobst_pod(entry, &p) < 0 || strcmp(p.node, node) != 0 || p.phase != SC_PP_RUNNING)
		return 0;
	if (p.generation || rg)
		return json_equal(p.generation, rg);
	return strcmp(p.started_at, sc__str_of(rep, "startedAt")) == 0;
}

static int set_if(json_t *e, const char *key, json_t *v)
{
	if (!v || json_equal(json_object_get(e, key), v))
		return 0;
	json_object_set(e, key, v);
	return 1;
}

/* Copies the reported fields; 1 when something changed, 2 when the pod
 * has just failed for good. */
static int apply_report(json_t *e, json_t *rep)
{
	int phase = sc__jobst_phase_parse(sc__str_of(rep, "phase"));
	int changed = 0;
	changed |= set_if(e, "ready", json_object_get(rep, "ready"));
	changed |= set_if(e, "restarts", json_object_get(rep, "restarts"));
	changed |= set_if(e, "exitCode", json_object_get(rep, "exitCode"));
	/* reason (OOMKilled) explains the last exit: gone with the next one. */
	json_t *why = json_object_get(rep, "reason");
	if (json_is_string(why) && json_string_length(why) > 0 && json_string_length(why) <= 64)
		changed |= set_if(e, "reason", why);
	else if (json_object_get(rep, "exitCode") && json_object_get(e, "reason"))
		changed |= json_object_del(e, "reason") == 0;
	json_t *msg = json_object_get(rep, "message");
	if (json_is_string(msg) && strlen(json_string_value(msg)) > 1024)
		msg = NULL;
	/* The agent clears a pod's message with "" (a started pod has nothing
	 * to say); the manifest format has no empty message, and a status the
	 * decoder refuses leaves the whole job out of the scheduler's view, its
	 * GPUs looking free. No message is written as none. */
	if (json_is_string(msg) && json_string_length(msg) == 0) {
		changed |= json_object_get(e, "message") != NULL;
		json_object_del(e, "message");
		msg = NULL;
	}
	changed |= set_if(e, "message", msg);
	if (phase == SC_PP_SUCCEEDED || phase == SC_PP_FAILED) {
		sc__jobst_set_phase(e, phase, NULL);
		json_object_set_new(e, "ready", json_false());
		return phase == SC_PP_FAILED ? 2 : 1;
	}
	return changed;
}

static int replicas_of(json_t *obj)
{
	json_t *t;
	size_t i;
	int n = 0;
	json_array_foreach(json_object_get(json_object_get(obj, "spec"), "tasks"), i, t)
	{
		json_t *r = json_object_get(t, "replicas");
		n += json_is_integer(r) ? (int)json_integer_value(r) : 1;
	}
	return n;
}

/* Every other Running pod takes phase (SC_PP_FAILED or SC_PP_RELEASING);
 * with all, the Failed ones too. */
static void set_gang(json_t *pods, int phase, const char *why, int all)
{
	json_t *e;
	size_t i;
	sc_jobst_pod_t p;
	json_array_foreach(pods, i, e)
	{
		sc__jobst_pod(e, &p);
		if (p.phase != SC_PP_RUNNING && !(all && p.phase == SC_PP_FAILED))
			continue;
		sc__jobst_set_phase(e, phase, why);
	}
}

static void gang_failed(json_t *obj, const char *pod)
{
	json_t *spec = json_object_get(obj, "spec"), *pods = sc__jobst_pods(obj);
	char why[400];
	if (replicas_of(obj) < 2)
		return;
	sc_job_runtime_t rt;
	sc_job_runtime(sc__str_of(obj, "kind"), spec, &rt);
	int limit = rt.backoff_limit;
	/* The count lives in an annotation: the scheduling loop rewrites the
	 * status it owns and keeps metadata as it is. */
	json_t *md = json_object_get(obj, "metadata");
	json_t *ann = json_object_get(md, "annotations");
	if (!json_is_object(ann))
		json_object_set_new(md, "annotations", ann = json_object());
	/* Written by this server; anything else a person put there counts as 0. */
	int restarts = 0;
	sc_parse_int(sc__str_of(ann, SC_GANG_RESTARTS), 0, INT32_MAX, &restarts);
	if (rt.gang_restart && restarts < limit) {
		char n[16];
		snprintf(why, sizeof(why), "gang restarted: pod %s failed", pod);
		set_gang(pods, SC_PP_RELEASING, why, 1);
		snprintf(n, sizeof(n), "%d", restarts + 1);
		json_object_set_new(ann, SC_GANG_RESTARTS, json_string(n));
		return;
	}
	snprintf(why, sizeof(why), "gang failed: pod %s failed", pod);
	set_gang(pods, SC_PP_FAILED, why, 0);
}

/* Applies the reports about one job (all of kind/job) in one write. */
static void apply_job(sc_server_t *s, const char *node, const char *kind, const char *job,
                      json_t *reps)
{
	int64_t rev;
	json_t *obj = load(s, kind, job, &rev), *rep;
	size_t i;
	int changed = 0;
	if (!obj)
		return;
	json_t *pods = sc__jobst_pods(obj);
	json_array_foreach(reps, i, rep)
	{
		json_t *e = sc__jobst_find(pods, sc__str_of(rep, "name"), NULL);
		if (json_is_true(json_object_get(rep, "stopping")))
			continue; /* being stopped: only listed (agent_pods) */
		if (!e || !same_assignment(e, rep, node))
			continue;
		int rc = apply_report(e, rep);
		changed |= rc != 0;
		if (rc == 2 && strcmp(kind, "Job") == 0)
			gang_failed(obj, sc__str_of(rep, "name"));
	}
	/* A conflict (the loop wrote meanwhile) is fine: every heartbeat
	 * carries every report again. */
	if (changed)
		save(s, kind, obj, rev);
	json_decref(obj);
}

/* Groups the reports by job and applies each group. */
static void apply_reports(sc_server_t *s, const char *node, json_t *reports)
{
	json_t *groups = json_object(), *rep;
	size_t i;
	char key[2 * SC_MAX_NAME + 8];
	json_array_foreach(reports, i, rep)
	{
		const char *kind = sc__str_of(rep, "kind"), *job = sc__str_of(rep, "job");
		if (i >= MAX_REPORTS || (strcmp(kind, "Job") && strcmp(kind, "Deployment")) ||
		    !sc__name_valid(job))
			continue;
		snprintf(key, sizeof(key), "%s/%s", kind, job);
		json_t *g = json_object_get(groups, key);
		if (!g)
			json_object_set_new(groups, key, g = json_array());
		json_array_append(g, rep);
	}
	const char *k;
	json_t *g;
	json_object_foreach(groups, k, g)
	{
		const char *slash = strchr(k, '/');
		char kind[16];
		snprintf(kind, sizeof(kind), "%.*s", (int)(slash - k), k);
		apply_job(s, node, kind, slash + 1, g);
	}
	json_decref(groups);
}

/* Records what node runs (s->agent_pods): the pods with a live process,
 * running or being stopped. A pod it no longer lists may free a moved
 * pod's old place, or devices a Pipelined pod waits for: a cycle then
 * starts it (sched_plan.c, carried_pods). */
static void note_pods(sc_server_t *s, const char *node, json_t *reports)
{
	json_t *now = json_object(), *rep, *v;
	size_t i;
	const char *k;
	char key[3 * SC_MAX_NAME + 8];
	json_array_foreach(reports, i, rep)
	{
		if (i >= MAX_REPORTS)
			break;
		/* A pod whose process is gone for good holds nothing. */
		int ph = sc__jobst_phase_parse(sc__str_of(rep, "phase"));
		if ((ph == SC_PP_SUCCEEDED || ph == SC_PP_FAILED) &&
		    !json_is_true(json_object_get(rep, "stopping")))
			continue;
		snprintf(key, sizeof(key), "%s/%s/%s", sc__str_of(rep, "kind"),
		         sc__str_of(rep, "job"), sc__str_of(rep, "name"));
		json_object_set_new(now, key, json_true());
	}
	if (!s->agent_pods)
		s->agent_pods = json_object();
	json_t *was = json_object_get(s->agent_pods, node);
	int gone = 0;
	json_object_foreach(was, k, v) gone |= strchr(k, '/') && !json_object_get(now, k);
	/* Which heartbeat this is: a move waits for one taken after it. */
	json_int_t seq = json_integer_value(json_object_get(was, SC_AGENT_PODS_SEQ));
	json_object_set_new(now, SC_AGENT_PODS_SEQ, json_integer(seq + 1));
	json_object_set_new(s->agent_pods, node, now);
	if (gone)
		sc__sched_kick(s);
}

/* ---- node status ------------------------------------------------------- */

/* The node's address for clients of its pods (serving endpoints): the host
 * part of the address the agent advertises. */
static void host_of(const char *addr, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s", addr);
	char *colon = strrchr(out, ':');
	if (colon)
		*colon = '\0';
}

/* The agent's release, from its User-Agent, into status.agent.version, so
 * an operator sees which nodes a rolling upgrade has reached. Agents of
 * 0.1 sent no User-Agent: the field is then left out. */
static void agent_version(sc_http_req_t *r, json_t *st)
{
	char comp[16], ver[48];
	sc_version_t v;
	if (sc_version_from_user_agent(sc_http_header(r, "User-Agent"), comp, sizeof(comp), &v) <=
	    0)
		return;
	snprintf(ver, sizeof(ver), "%d.%d.%d", v.major, v.minor, v.patch);
	json_object_set_new(json_object_get(st, "agent"), "version", json_string(ver));
}

/* agent.clientCertificate: the serial and notAfter of the certificate the
 * agent showed on this heartbeat's connection (mTLS), so that an operator
 * sees a rotation and what expires when. A change is a write, once per
 * rotation. */
static void agent_cert(sc_http_req_t *r, json_t *st)
{
	char serial[128], when[32];
	int64_t not_after;
	struct tm tm;
	if (!sc_http_peer_cert(r, serial, sizeof(serial), &not_after))
		return;
	time_t t = (time_t)not_after;
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_object_set_new(json_object_get(st, "agent"), "clientCertificate",
	                    json_pack("{s:s,s:s}", "serial", serial, "notAfter", when));
}

static uint64_t fence_of(json_t *body);

static void node_status(sc_server_t *s, sc_http_req_t *r, json_t *node, int64_t rev, json_t *body,
                        uint64_t lease_ms)
{
	char host[300];
	host_of(sc__str_of(body, "address"), host, sizeof(host));
	json_t *st = json_pack("{s:b,s:s,s:O,s:{s:s,s:s,s:I},s:O}", "ready", 1, "address", host,
	                       "conditions", json_object_get(body, "conditions"), "agent",
	                       "address", sc__str_of(body, "address"), "gpuSource",
	                       sc__str_of(body, "gpuSource"), "leaseMillis", (json_int_t)lease_ms,
	                       "devices", json_object_get(body, "devices"));
	if (!st)
		return; /* conditions or devices missing: keep what is stored */
	if (fence_of(body))
		json_object_set_new(json_object_get(st, "agent"), "fenceMillis",
		                    json_integer((json_int_t)fence_of(body)));
	if (json_is_true(json_object_get(body, "statusTls")))
		json_object_set_new(json_object_get(st, "agent"), "tls", json_true());
	agent_version(r, st);
	agent_cert(r, st);
	if (!json_equal(st, json_object_get(node, "status"))) {
		json_object_set(node, "status", st);
		save(s, "Node", node, rev);
	}
	json_decref(st);
}

/* fenceMillis of a heartbeat (0 from agents that do not fence: their pods
 * are given away when the lease expires, as before). */
static uint64_t fence_of(json_t *body)
{
	json_t *fm = json_object_get(body, "fenceMillis");
	json_int_t v = json_is_integer(fm) ? json_integer_value(fm) : 0;
	return v < 0 ? 0 : v > MAX_LEASE_MS ? MAX_LEASE_MS : (uint64_t)v;
}

/* ---- handler ----------------------------------------------------------- */

static int parse_body(sc_http_req_t *r, json_t **out)
{
	size_t len;
	const char *text = sc_http_body(r, &len);
	json_t *b = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(b) || !json_is_array(json_object_get(b, "pods")) ||
	    !json_is_array(json_object_get(b, "conditions")) ||
	    !json_is_array(json_object_get(b, "devices")) ||
	    strlen(sc__str_of(b, "address")) > 256) {
		json_decref(b);
		sc__api_error(r, 400, "BadRequest", "",
		              "expected {address, leaseMillis, "
		              "conditions, devices, pods}");
		return SC_EINVAL;
	}
	*out = b;
	return 0;
}

/* The address the server reaches this node's agent at is not the agent's
 * to move: an agent token minted with an address (by an admin) may report
 * only that one, and without one the first address recorded for the node
 * stays until an admin re-registers it. A hijacked agent therefore cannot
 * point log readers, or the server, at another host. Admins (who stand in
 * for agents in tests and tools) may move it. 0, or answers 403. */
static int address_allowed(sc_http_req_t *r, const sc_principal_t *who, json_t *node, json_t *body)
{
	const char *want = sc__str_of(body, "address");
	const char *fixed = who->address;
	if (who->role != SC_ROLE_AGENT)
		return 0;
	if (!fixed[0])
		fixed = sc__str_of(json_object_get(status_of(node), "agent"), "address");
	if (!fixed[0] || strcmp(fixed, want) == 0)
		return 0;
	sc__api_error(r, 403, "Forbidden", "address",
	              "address: node \"%s\" is reached at %s, fixed at registration; an "
	              "agent cannot move it",
	              who->node, fixed);
	return SC_EINVAL;
}

static void heartbeat(agent_api_t *api, sc_http_req_t *r, const sc_principal_t *who,
                      const char *node)
{
	sc_server_t *s = api->s;
	json_t *body;
	int64_t rev;
	char key[65];
	if (parse_body(r, &body) < 0)
		return;
	if (who->role == SC_ROLE_AGENT && who->address[0] && !sc__str_of(body, "address")[0])
		json_object_set_new(body, "address", json_string(who->address));
	json_t *obj = load(s, "Node", node, &rev);
	if (!obj) {
		json_decref(body);
		sc__api_error(r, 404, "NotFound", NULL, "Node \"%s\" not found: register it", node);
		return;
	}
	if (address_allowed(r, who, obj, body) < 0) {
		json_decref(obj);
		json_decref(body);
		return;
	}
	json_t *lm = json_object_get(body, "leaseMillis");
	json_int_t ms = json_is_integer(lm) ? json_integer_value(lm) : DEFAULT_LEASE_MS;
	ms = ms < MIN_LEASE_MS ? MIN_LEASE_MS : ms > MAX_LEASE_MS ? MAX_LEASE_MS : ms;
	lease_t *l = lease_find(api, node, 1);
	int was_lost = l->lost;
	l->expires = uv_now(s->loop) + (uint64_t)ms;
	l->fence_ms = fence_of(body);
	l->lost = l->expired = l->moved = 0;
	node_status(s, r, obj, rev, body, (uint64_t)ms);
	apply_reports(s, node, json_object_get(body, "pods"));
	note_pods(s, node, json_object_get(body, "pods"));
	/* A node back from a lost lease lists again: its pods were given away.
	 * statusKey is the credential the server presents on this node's
	 * status port (/pods, /logs): only this node's agent learns it. */
	sc__nodekey(s, node, key);
	sc__api_json(r, 200,
	             json_pack("{s:I,s:I,s:b,s:s}", "leaseMillis", ms, "revision",
	                       (json_int_t)sc_store_revision(s->store), "leaseWasLost", was_lost,
	                       "statusKey", key));
	json_decref(obj);
	json_decref(body);
}

static void agents(agent_api_t *api, sc_http_req_t *r, const sc_principal_t *whop);

/* Heartbeats are audited only when refused: one line per node and second
 * would drown everything else. */
static void handle_agents(sc_http_req_t *r, void *ud)
{
	agent_api_t *api = ud;
	sc_principal_t who;
	if (sc__auth_request(api->s, r, &who) == 0)
		agents(api, r, &who);
	if (sc_http_status(r) >= 400)
		sc__audit_request(api->s, r, &who, sc_http_status(r));
}

static void agents(agent_api_t *api, sc_http_req_t *r, const sc_principal_t *whop)
{
	sc_principal_t who = *whop;
	char node[SC_MAX_NAME + 1];
	if (who.role != SC_ROLE_ADMIN && who.role != SC_ROLE_AGENT) {
		sc__api_error(r, 403, "Forbidden", NULL, "heartbeats need an agent or admin token");
		return;
	}
	const char *p = sc_http_path(r) + strlen(SC_AGENT_PREFIX);
	const char *slash = strchr(p, '/');
	if (!slash || strcmp(slash, "/heartbeat") != 0 || (size_t)(slash - p) > SC_MAX_NAME) {
		sc__api_error(r, 404, "NotFound", NULL, "no such path");
		return;
	}
	snprintf(node, sizeof(node), "%.*s", (int)(slash - p), p);
	if (!sc__name_valid(node)) {
		sc__api_error(r, 400, "Invalid", "node", "invalid node name");
		return;
	}
	if (who.role == SC_ROLE_AGENT && strcmp(who.node, node) != 0) {
		sc__api_error(r, 403, "Forbidden", NULL,
		              "this agent token acts for node \"%s\" only", who.node);
		return;
	}
	if (strcmp(sc_http_method(r), "POST") != 0) {
		sc__api_error(r, 405, "MethodNotAllowed", NULL, "heartbeats are POSTed");
		return;
	}
	/* Node leases live in the leader's memory: a follower sends the
	 * agent on to the next server in its list (docs/HA.md). */
	if (!sc__ha_is_leader(api->s)) {
		sc__api_error(r, 503, "NotLeader", NULL, "this server is not the leader");
		return;
	}
	heartbeat(api, r, &who, node);
}

/* ---- expiry ------------------------------------------------------------ */

/* One eviction: a write that loses to another (a heartbeat, the loop) is
 * worked out again on the newer object, up to 3 times. */
typedef struct evict {
	sc_server_t *s;
	const sc_kind_t *kind;
	char name[SC_MAX_NAME + 1];
	char node[SC_MAX_NAME + 1];
	int attempt;
} evict_t;

static void evict_try(evict_t *v);

/* Running, or Pipelined (bound, waiting for a node to stop a pod: it may
 * wait until that node is given up, sched_move.c): both are placed again
 * when their node is lost. */
static bool bound(const sc_jobst_pod_t *p)
{
	return p->phase == SC_PP_RUNNING || p->phase == SC_PP_PIPELINED;
}

static void evict_saved(const sc_store_res_t *res, void *ud)
{
	evict_t *v = ud;
	if (res->rc == SC_ECONFLICT && ++v->attempt < 3) {
		evict_try(v);
		return;
	}
	free(v);
}

/* The lost node may run the pod though its last heartbeat did not list it:
 * the binding reached it and the agent stopped (frozen, partitioned)
 * before its next heartbeat. Until the node is given up (node_lost drops
 * its entry) or it calls in again (its own list replaces this one), the
 * pod counts as listed there, so its new place waits Pipelined with from:
 * this node (sched_plan.c, listed_elsewhere) instead of starting beside a
 * copy that may still run. */
static void still_listed(sc_server_t *s, const char *node, const char *kind, const char *job,
                         const char *pod)
{
	json_t *pods = json_object_get(s->agent_pods, node);
	char key[3 * SC_MAX_NAME + 8];
	if (!pods)
		return; /* no agent, or given up: it runs nothing */
	snprintf(key, sizeof(key), "%s/%s/%s", kind, job, pod);
	json_object_set_new(pods, key, json_true());
}

static void evict_try(evict_t *v)
{
	int64_t rev;
	json_t *obj = sc__object_copy(v->s, v->kind, v->name, &rev), *e;
	json_t *pods = sc__jobst_pods(obj);
	size_t i;
	int hit = 0, whole = strcmp(v->kind->kind, "Job") == 0;
	char why[300];
	sc_jobst_pod_t p;
	snprintf(why, sizeof(why), "node %s lost (lease expired)", v->node);
	json_array_foreach(pods, i, e)
	{
		sc__jobst_pod(e, &p);
		hit |= strcmp(p.node, v->node) == 0 && bound(&p);
	}
	json_array_foreach(pods, i, e)
	{
		sc__jobst_pod(e, &p);
		if (!hit || !bound(&p) || (!whole && strcmp(p.node, v->node) != 0))
			continue;
		if (strcmp(p.node, v->node) == 0)
			still_listed(v->s, v->node, v->kind->kind, v->name, p.name);
		sc__jobst_set_phase(e, SC_PP_RELEASING, why);
	}
	if (hit)
		sc__object_save(v->s, v->kind, obj, rev, evict_saved, v);
	else
		free(v);
	json_decref(obj);
}

/* Releases the pods of one job or deployment that node held. */
static void evict_from(sc_server_t *s, const char *kind, const char *name, const char *node)
{
	evict_t *v = sc_xcalloc(1, sizeof(*v));
	v->s = s;
	v->kind = sc__kind_by_name(kind);
	snprintf(v->name, sizeof(v->name), "%s", name);
	snprintf(v->node, sizeof(v->node), "%s", node);
	evict_try(v);
}

/* Names of the objects that have a Running pod on a node. */
typedef struct on_node {
	const char *node;
	char (*names)[SC_MAX_NAME + 1];
	size_t n, cap;
} on_node_t;

static void collect_on_node(sc_server_t *s, const char *name, json_t *obj, void *ud)
{
	on_node_t *c = ud;
	json_t *e;
	size_t i;
	sc_jobst_pod_t p;
	json_array_foreach(sc__jobst_pods(obj), i, e)
	{
		sc__jobst_pod(e, &p);
		if (strcmp(p.node, c->node) != 0 || !bound(&p))
			continue;
		if (c->n == c->cap) {
			c->cap = c->cap ? c->cap * 2 : 16;
			c->names = sc_xreallocarray(c->names, c->cap, sizeof(*c->names));
		}
		snprintf(c->names[c->n++], sizeof(c->names[0]), "%s", name);
		return;
	}
}

/* Releases the pods on node of every Job (the whole gang) and Deployment
 * (those pods), or of the Deployments only. */
static void evict_node(sc_server_t *s, const char *node, int deployments_only)
{
	static const char *const kinds[] = {"Deployment", "Job"};
	for (int k = 0; k < (deployments_only ? 1 : 2); k++) {
		on_node_t c = {.node = node};
		if (sc__objects_each(s, sc__kind_by_name(kinds[k]), collect_on_node, &c) == 0)
			for (size_t i = 0; i < c.n; i++)
				evict_from(s, kinds[k], c.names[i], node);
		free(c.names);
	}
}

/* The NotReady write of one lease, in flight. */
typedef struct expiry {
	agent_api_t *api;
	char node[SC_MAX_NAME + 1];
	uint64_t fence_ms;
	unsigned long epoch;
} expiry_t;

static void expiry_saved(const sc_store_res_t *res, void *ud)
{
	expiry_t *x = ud;
	lease_t *l = lease_find(x->api, x->node, 0);
	if (l) {
		l->expiring = 0;
		/* A heartbeat may have come meanwhile (then the node is ready
		 * again, and its status write follows this one). */
		if (res->rc == 0 && l->expires < uv_now(x->api->s->loop)) {
			l->expired = 1;
			l->epoch = x->epoch;
		}
	}
	if (res->rc == 0)
		sc_log_warn("node %s: lease expired; its pods go elsewhere in %llu ms unless it "
		            "comes back",
		            x->node, (unsigned long long)x->fence_ms);
	free(x);
}

/* The lease expired: the node takes no new pods. Written without waiting;
 * a write the store refused is tried again at the next scan. */
static void node_expired(agent_api_t *api, lease_t *l)
{
	sc_server_t *s = api->s;
	int64_t rev;
	json_t *obj = load(s, "Node", l->node, &rev);
	if (!obj) {
		l->expired = 1; /* nothing to mark */
		l->epoch = s->store_epoch;
		return;
	}
	json_t *st = status_of(obj);
	json_object_set_new(st, "ready", json_false());
	json_object_set_new(
	    st, "conditions",
	    json_pack("[{s:s,s:s,s:s,s:s}]", "type", "Ready", "status", "False", "reason",
	              "NodeLeaseExpired", "message",
	              l->fence_ms ? "the agent stopped renewing its lease; its pods are given away "
	                            "after the fence time"
	                          : "the agent stopped renewing its lease"));
	expiry_t *x = sc_xcalloc(1, sizeof(*x));
	x->api = api;
	snprintf(x->node, sizeof(x->node), "%s", l->node);
	x->fence_ms = l->fence_ms;
	x->epoch = s->store_epoch;
	l->expiring = 1;
	sc__object_save(s, sc__kind_by_name("Node"), obj, rev, expiry_saved, x);
	json_decref(obj);
}

static void node_lost(agent_api_t *api, lease_t *l)
{
	sc_log_warn("node %s lost (lease expired %llu ms ago); evicting its pods", l->node,
	            (unsigned long long)(uv_now(api->s->loop) - l->expires));
	evict_node(api->s, l->node, 0);
	/* Given up: it has stopped its pods itself by now (fencing), so a pod
	 * moved off it need not wait for word from it. */
	if (api->s->agent_pods) {
		json_object_del(api->s->agent_pods, l->node);
		sc__sched_kick(api->s);
	}
	l->lost = 1;
}

static void adopt_one(sc_server_t *s, const char *name, json_t *obj, void *ud)
{
	agent_api_t *api = ud;
	json_t *st = json_object_get(obj, "status");
	json_t *agent = json_object_get(st, "agent");
	if (agent && !json_is_false(json_object_get(st, "ready")) && !lease_find(api, name, 0)) {
		json_t *lm = json_object_get(agent, "leaseMillis");
		lease_t *ls = lease_find(api, name, 1);
		ls->expires =
		    uv_now(s->loop) +
		    (json_is_integer(lm) ? (uint64_t)json_integer_value(lm) : DEFAULT_LEASE_MS);
		ls->fence_ms = fence_of(agent);
		ls->epoch = s->store_epoch;
		/* What it runs is unknown until it calls in: anything (a pod
		 * moved off it, or pipelined onto it, waits for that). */
		if (!s->agent_pods)
			s->agent_pods = json_object();
		if (!json_object_get(s->agent_pods, name))
			json_object_set_new(s->agent_pods, name,
			                    json_pack("{s:b}", SC_AGENT_PODS_UNKNOWN, 1));
	}
}

/* Nodes an agent registered before this server started get one lease
 * period to call in. */
static void adopt_known_nodes(agent_api_t *api)
{
	api->scanned = 1;
	sc__objects_each(api->s, sc__kind_by_name("Node"), adopt_one, api);
}

static void on_scan(uv_timer_t *t)
{
	agent_api_t *api = t->data;
	uint64_t now = uv_now(api->s->loop);
	if (!sc__ha_leader_begin(api->s))
		return;
	if (!api->scanned)
		adopt_known_nodes(api);
	for (size_t i = 0; i < api->n; i++) {
		lease_t *l = &api->leases[i];
		/* The store undid writes (a failed commit): what was written for
		 * this lease may be among them; write it again. */
		if (l->epoch != api->s->store_epoch)
			l->expired = l->lost = l->moved = 0;
		if (l->lost || l->expires >= now)
			continue;
		if (!l->expired && !l->expiring)
			node_expired(api, l); /* sets expired once written */
		/* At the node's own fence deadline (half the fence time:
		 * it stops its pods then, so an agent restart shorter than
		 * that still changes nothing) a Deployment's pods there are
		 * placed again: the new places wait Pipelined until this node
		 * is given up or says it stopped them (sched_write.c,
		 * listed_elsewhere), so only their start waits for the rest
		 * of the fence time, not their placement nor a reclaim it
		 * needs. Gangs wait for the give-up. */
		if (l->expired && !l->moved && now >= l->expires + l->fence_ms / 2) {
			evict_node(api->s, l->node, 1);
			sc__sched_kick(api->s);
			l->moved = 1;
		}
		if (l->expired && now >= l->expires + l->fence_ms) {
			node_lost(api, l);
			l->epoch = api->s->store_epoch;
		}
	}
	sc__ha_leader_end(api->s);
}

int sc__agent_api_register(sc_server_t *s)
{
	agent_api_t *api = sc_calloc(1, sizeof(*api));
	if (!api)
		return SC_ENOMEM;
	api->s = s;
	uv_timer_init(s->loop, &api->timer);
	api->timer.data = api;
	uv_timer_start(&api->timer, on_scan, SCAN_MS, SCAN_MS);
	/* The lease timer must not keep the loop alive at shutdown; the few
	 * bytes of leases live as long as the process. */
	uv_unref((uv_handle_t *)&api->timer);
	return sc_http_route(s->http, NULL, SC_AGENT_PREFIX, handle_agents, api);
}
