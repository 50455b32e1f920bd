/* A cycle's decisions -> job statuses and events, on the worker thread
 * (sched_int.h). The loop thread commits the result (sched_write.c).
 *
 * Pod lifecycle (the node's agent, when there is one, reports the rest):
 *   binding        -> the pod is listed in the job's status.pods as Running
 *                     with its node and devices;
 *   eviction       -> the pod's phase becomes Releasing: it still holds its
 *                     resources, so the core does not place on them twice;
 *   next cycle     -> a Releasing pod is removed (the agent stops it when
 *                     its entry is gone); its replica is pending again.
 *   drained node   -> every job with a Running pod on a node annotated
 *                     starcloud.dev/drain is evicted as a whole (a gang is
 *                     only useful whole) and placed again elsewhere.
 * Job status: phase (Pending, Running, Succeeded, Failed, Evicted), reason
 * (the core's pending explanation), one Scheduled condition, staleSince
 * (set while 0 < running pods < minMember), pods.
 *
 * Only jobs whose status may change are looked at: those with decisions,
 * new revisions, changed reasons or pods on a node just drained. A pending
 * reason that is all that changed (its counts of nodes move with the
 * cluster) is written at most every REASON_EVERY seconds per job and for
 * at most REASON_BUDGET jobs per cycle, the rest in later cycles, so a
 * cluster with 100,000 waiting jobs is not rewritten every cycle.
 *
 * Events are one per job and state change (Bound, Evicted, Pending when a
 * job starts waiting, Invalid), not one per pod or per cycle; past
 * SC_EVENT_BURST of one reason in one queue in a cycle, the rest fold into
 * one event about the queue. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/jscan.h"
#include "base/strmap.h"
#include "starcloud/buf.h"
#include "server/deploy.h"
#include "server/jobstatus.h"
#include "server/sched_int.h"
#include "starcloud/error.h"

#define REASON_EVERY 10    /* seconds between two writes of a job's pending reason */
#define REASON_BUDGET 1000 /* reason-only writes per cycle */

/* Per-job views of the decisions (index lists in one array each). */
typedef struct by_job {
	size_t *bstart, *border; /* bindings of job j: border[bstart[j]..bstart[j+1]) */
	size_t *estart, *eorder;
	const sc_pending_t **pend;
} by_job_t;

/* Counting sort of n items by job into start/order. */
static void bucket(size_t njobs, size_t n, const void *items, size_t size, size_t **start,
                   size_t **order)
{
	size_t *st = sc_xcalloc(njobs + 2, sizeof(size_t)),
	       *ord = sc_xcalloc(n + 1, sizeof(size_t)),
	       *fill = sc_xcalloc(njobs + 2, sizeof(size_t));
	for (size_t i = 0; i < n; i++) {
		size_t j = *(const size_t *)((const char *)items + i * size);
		if (j < njobs)
			st[j + 1]++;
	}
	for (size_t j = 0; j < njobs; j++)
		st[j + 1] += st[j];
	for (size_t i = 0; i < n; i++) {
		size_t j = *(const size_t *)((const char *)items + i * size);
		if (j < njobs)
			ord[st[j] + fill[j]++] = i;
	}
	free(fill);
	*start = st;
	*order = ord;
}

typedef struct wctx {
	sc_world_t *world;
	const sc_snapshot_t *snap;
	const sc_decisions_t *d;
	by_job_t bj;
	uint64_t drain_hash;
	json_t *drained;    /* drained nodes -> true, those a pool empties -> a string; or NULL */
	json_t *pool_waits; /* job name -> status.waitingFor (pool.h), or NULL; borrowed */
	json_t *events;     /* new Event objects */
	json_t *folded;     /* "reason\nqueue" -> {count, names} past the burst */
	json_t *ports;      /* deployment ports in use (deploy_ctl.c), made on first need */
	json_t *agent_pods; /* the cycle's copy of the server's (server.h), or NULL; borrowed */
	json_t *busy;       /* nodes still stopping a pod not Running there (sched_move.c) */
	json_t *listed;     /* "Kind/job/pod" -> a node whose agent lists it */
	char now[40];
	size_t reason_budget;
	sc_cycle_out_t *out;
	sc_cycle_plan_t *p;
} wctx_t;

static void by_job_init(wctx_t *w)
{
	size_t nj = w->snap->njobs;
	const sc_decisions_t *d = w->d;
	/* `job` is the first member of both structs. */
	bucket(nj, d->nbindings, d->bindings, sizeof(sc_binding_t), &w->bj.bstart, &w->bj.border);
	bucket(nj, d->nevictions, d->evictions, sizeof(sc_eviction_t), &w->bj.estart,
	       &w->bj.eorder);
	w->bj.pend = sc_xcalloc(nj + 1, sizeof(*w->bj.pend));
	for (size_t i = 0; i < d->npending; i++)
		if (d->pending[i].job < nj)
			w->bj.pend[d->pending[i].job] = &d->pending[i];
}

static void by_job_free(by_job_t *b)
{
	free(b->bstart);
	free(b->border);
	free(b->estart);
	free(b->eorder);
	free(b->pend);
}

static const char *str_of(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));
	return v ? v : "";
}

static const char *kind_of(const sc_wobj_t *o)
{
	return o->rank == SC_RANK_DEPLOY ? "Deployment" : "Job";
}

/* ---------------------------------------------------------------------
 * Events
 * ------------------------------------------------------------------- */

/* Counts an event of reason in queue; 0 when it is past the burst and was
 * folded into the queue's summary instead. */
static int unfolded(wctx_t *w, const sc_wobj_t *o, const char *reason, const char *queue)
{
	char key[SC_MAX_NAME + 40];
	snprintf(key, sizeof(key), "%s\n%s", reason, queue);
	json_t *f = json_object_get(w->folded, key);
	if (!f) {
		f = json_pack("{s:i,s:[]}", "count", 0, "names");
		json_object_set_new(w->folded, key, f);
	}
	json_int_t n = json_integer_value(json_object_get(f, "count")) + 1;
	json_object_set_new(f, "count", json_integer(n));
	if (n <= SC_EVENT_BURST)
		return 1;
	json_t *names = json_object_get(f, "names");
	if (json_array_size(names) < 5)
		json_array_append_new(names, json_string(o->name));
	return 0;
}

/* Queues an Event about job o; extra (consumed, may be NULL) adds fields. */
static void event(wctx_t *w, const sc_wobj_t *o, const char *queue, const char *reason,
                  const char *type, json_t *extra, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static void event(wctx_t *w, const sc_wobj_t *o, const char *queue, const char *reason,
                  const char *type, json_t *extra, const char *fmt, ...)
{
	char msg[1024];
	if (!unfolded(w, o, reason, queue)) {
		json_decref(extra);
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *ev = sc_xcheck(
	    json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s},s:s,s:s,s:s,s:s,s:s}", "apiVersion",
	              "starcloud.dev/v1", "kind", "Event", "metadata", "creationTimestamp", w->now,
	              "involvedObject", "kind", kind_of(o), "name", o->name, "queue", queue,
	              "reason", reason, "type", type, "message", msg, "lastTimestamp", w->now));
	if (extra)
		json_object_update(ev, extra);
	json_decref(extra);
	json_array_append_new(w->events, ev);
}

/* One event per queue and reason for what the burst left out. */
static void fold_events(wctx_t *w)
{
	const char *key;
	json_t *f;
	json_object_foreach(w->folded, key, f)
	{
		json_int_t n = json_integer_value(json_object_get(f, "count")) - SC_EVENT_BURST;
		if (n <= 0)
			continue;
		const char *nl = strchr(key, '\n');
		char reason[32], names[600] = "";
		snprintf(reason, sizeof(reason), "%.*s", (int)(nl - key), key);
		json_t *v;
		size_t i, len = 0;
		json_array_foreach(json_object_get(f, "names"), i, v) len += (size_t)snprintf(
		    names + len, sizeof(names) - len, "%s%s", i ? ", " : "", json_string_value(v));
		json_t *ev = sc_xcheck(json_pack(
		    "{s:s,s:s,s:{s:s},s:{s:s,s:s},s:s,s:s,s:s,s:s,s:I,s:s}", "apiVersion",
		    "starcloud.dev/v1", "kind", "Event", "metadata", "creationTimestamp", w->now,
		    "involvedObject", "kind", "Queue", "name", nl + 1, "queue", nl + 1, "reason",
		    reason, "type", strcmp(reason, "Bound") == 0 ? "Normal" : "Warning", "message",
		    "", "count", n, "lastTimestamp", w->now));
		char msg[900];
		snprintf(msg, sizeof(msg), "%s: %lld more jobs of queue %s in this cycle (%s%s)",
		         reason, (long long)n, nl + 1, names, n > 5 ? ", ..." : "");
		json_object_set_new(ev, "message", json_string(msg));
		json_array_append_new(w->events, ev);
	}
}

/* ---------------------------------------------------------------------
 * Pods
 * ------------------------------------------------------------------- */

/* A new Running entry, or Pipelined when the core placed the pod onto
 * resources still being released (the agent starts only Running pods; a
 * later cycle makes it Running once the node has stopped them: see
 * carried_pods). Written Running, such a pod started beside the pod it
 * waited for (the soak of issue 23). Its generation, the assignment's
 * identity for the agent's fencing (docs/AGENT.md), is the revision of the
 * object the binding was decided on: the write that stores it is
 * conditional on that revision and moves the object past it, so every
 * later binding of the same pod, on whatever node, gets a larger one. */
static json_t *binding_pod(const sc_binding_t *b, const char *now, int64_t generation)
{
	json_t *p = sc_xcheck(json_pack("{s:s,s:s,s:s,s:s,s:I}", "name", b->pod, "phase",
	                                b->pipelined ? "Pipelined" : "Running", "node", b->node,
	                                "startedAt", now, "generation", (json_int_t)generation));
	if (b->ngpus) {
		json_t *g = json_array();
		for (size_t i = 0; i < b->ngpus; i++)
			json_array_append_new(g, json_integer(b->gpus[i]));
		json_object_set_new(p, "gpus", g);
	}
	if (b->gpu_milli)
		json_object_set_new(p, "gpuShare", json_integer(b->gpu_milli));
	if (b->gpu_memory)
		json_object_set_new(p, "gpuMemory", json_integer(b->gpu_memory));
	if (b->mig_profile)
		json_object_set_new(p, "mig",
		                    json_pack("{s:i,s:s,s:i}", "gpu", b->mig_gpu, "profile",
		                              b->mig_profile, "start", b->mig_start));
	return p;
}

/* The pods as they were, minus those that were Releasing (their release
 * completes now, which frees resources: *released), each copied so the
 * stored object stays untouched. A Pipelined pod waited for Releasing pods
 * of the cycle that bound it: it is Running from this write on, unless its
 * node's agent still runs a pod the store does not place there (w->busy)
 * or, for a move, its old node still lists it (sc__move_still_on_old_node).
 * The agent's heartbeat that drops such a pod kicks the next cycle
 * (agent_api.c). */
static json_t *carried_pods(wctx_t *w, const sc_wobj_t *o, json_t *old, bool *released)
{
	json_t *pods = json_array(), *p;
	size_t i;
	const char *kind = o->rank == SC_RANK_DEPLOY ? "Deployment" : "Job";
	json_array_foreach(old, i, p)
	{
		sc_jobst_pod_t r;
		if (sc__jobst_pod(p, &r) < 0 || r.phase == SC_PP_RELEASING) {
			*released = true;
			continue;
		}
		json_t *c = json_deep_copy(p);
		if (r.phase == SC_PP_PIPELINED &&
		    !sc__move_still_on_old_node(w->agent_pods, kind, o->name, c) &&
		    !json_object_get(w->busy, r.node)) {
			sc__jobst_set_phase(c, SC_PP_RUNNING, NULL);
			json_object_del(c, "from");
		}
		json_array_append_new(pods, c);
	}
	return pods;
}

/* A compaction move's GPUs (released on the node it leaves) and the run
 * time it loses, as the action's cost counts it: the pod's run time since
 * it started, at most compaction.checkpointEvery (all of it when unknown). */
static void count_compaction(wctx_t *w, size_t j, const char *pod)
{
	const sc_job_spec_t *js = &w->snap->jobs[j];
	int64_t cap = w->snap->config.compaction.checkpoint_every;
	for (size_t i = 0; i < js->npods; i++) {
		const sc_pod_status_t *p = &js->pods[i];
		if (strcmp(p->name, pod) != 0)
			continue;
		double g = p->gpu_milli ? p->gpu_milli / 1000.0 : (double)p->ngpus;
		int64_t ran = p->started_at > 0 ? w->snap->now - p->started_at : cap;
		ran = ran < 0 ? 0 : ran > cap ? cap : ran;
		w->out->compaction_gpus += g;
		w->out->compaction_lost_gpu_s += g * (double)ran;
		return;
	}
}

/* What one job's status write does besides the status itself. */
typedef struct jobw {
	const sc_wobj_t *o;
	const char *text; /* the stored object */
	json_t *old;      /* its status, parsed, or NULL */
	json_t *obj;      /* the whole object, parsed when needed (full_obj) */
	const char *queue;
	long j; /* snapshot index, or -1 */
	bool evicts, pipelined;
	json_t *pods_bound;   /* names, for the Bound event */
	json_t *pods_evicted; /* names, for the Evicted event */
} jobw_t;

static void apply_evictions(wctx_t *w, jobw_t *jw, json_t *pods)
{
	size_t j = (size_t)jw->j;
	const sc_eviction_t *first = NULL;
	for (size_t k = w->bj.estart[j]; k < w->bj.estart[j + 1]; k++) {
		const sc_eviction_t *e = &w->d->evictions[w->bj.eorder[k]];
		json_t *p = sc__jobst_find(pods, e->pod, NULL);
		if (p)
			sc__jobst_set_phase(p, SC_PP_RELEASING, NULL);
		if (e->action == SC_ACT_COMPACT)
			count_compaction(w, j, e->pod);
		if (!first)
			first = e;
		json_array_append_new(jw->pods_evicted, json_string(e->pod));
		if (e->action >= 0 && e->action < SC_ACT_COUNT)
			w->out->evictions[e->action]++;
		w->out->releasing = true;
		jw->evicts = true;
	}
	if (!first)
		return;
	const char *action = sc_action_name(first->action);
	size_t n = json_array_size(jw->pods_evicted);
	json_t *extra = json_pack("{s:s,s:s,s:s,s:s,s:O}", "action", action, "by",
	                          first->by ? first->by : "", "pod", first->pod, "node",
	                          first->node ? first->node : "", "pods", jw->pods_evicted);
	char what[SC_MAX_NAME + 40];
	if (n == 1)
		snprintf(what, sizeof(what), "pod %s", first->pod);
	else
		snprintf(what, sizeof(what), "%zu pods (%s, ...)", n, first->pod);
	event(w, jw->o, jw->queue, "Evicted", "Warning", extra, "%s evicted from %s by %s%s%s: %s",
	      what, first->node ? first->node : "?", action, first->by ? " for " : "",
	      first->by ? first->by : "", first->reason ? first->reason : "");
}

/* Pods on a node the pool controller empties (scale-down annotation) are
 * evicted one by one: the core has checked that each can be placed again
 * without breaking its gang (src/core/scaledown.c), so the job's other pods
 * keep running. */
static size_t apply_scale_down(wctx_t *w, jobw_t *jw, json_t *pods)
{
	json_t *p;
	size_t i, n = 0;
	json_array_foreach(pods, i, p)
	{
		json_t *mark = json_object_get(w->drained, str_of(p, "node"));
		if (strcmp(str_of(p, "phase"), "Running") != 0 || !json_is_string(mark))
			continue;
		json_object_set_new(p, "phase", json_string("Releasing"));
		json_t *extra = json_pack("{s:s,s:s,s:s,s:s}", "action", "scale-down", "by", "",
		                          "pod", str_of(p, "name"), "node", str_of(p, "node"));
		event(w, jw->o, jw->queue, "Evicted", "Normal", extra,
		      "pod %s moved off %s: the node pool is removing the node", str_of(p, "name"),
		      str_of(p, "node"));
		w->out->drained++;
		w->out->releasing = true;
		jw->evicts = true;
		n++;
	}
	return n;
}

/* A job with a Running pod on a drained node is evicted whole. */
static size_t apply_drain(wctx_t *w, jobw_t *jw, json_t *pods)
{
	json_t *p;
	size_t i, n = 0;
	const char *node = NULL;
	if (!w->drained)
		return 0;
	json_array_foreach(pods, i, p)
	{
		if (strcmp(str_of(p, "phase"), "Running") == 0 &&
		    json_is_true(json_object_get(w->drained, str_of(p, "node")))) {
			node = str_of(p, "node");
			break;
		}
	}
	if (!node)
		return apply_scale_down(w, jw, pods);
	char nodebuf[SC_MAX_NAME + 1], first[SC_MAX_NAME + 1] = "";
	snprintf(nodebuf, sizeof(nodebuf), "%s", node);
	json_t *names = json_array();
	json_array_foreach(pods, i, p)
	{
		if (strcmp(str_of(p, "phase"), "Running") != 0)
			continue;
		json_object_set_new(p, "phase", json_string("Releasing"));
		if (!first[0])
			snprintf(first, sizeof(first), "%s", str_of(p, "name"));
		json_array_append_new(names, json_string(str_of(p, "name")));
		w->out->drained++;
		w->out->releasing = true;
		jw->evicts = true;
		n++;
	}
	json_t *extra = json_pack("{s:s,s:s,s:s,s:s,s:o}", "action", "drain", "by", "", "pod",
	                          first, "node", nodebuf, "pods", names);
	event(w, jw->o, jw->queue, "Evicted", "Warning", extra,
	      "%zu pod%s evicted (%s%s): node %s is drained", n, n == 1 ? "" : "s", first,
	      n > 1 ? ", ..." : "", nodebuf);
	return n;
}

static void record_wait(sc_cycle_out_t *out, double seconds)
{
	if (out->nwaits % 64 == 0)
		out->waits = sc_xrealloc(out->waits, (out->nwaits + 64) * sizeof(*out->waits));
	out->waits[out->nwaits++] = seconds;
}

/* Deployment pods hold a port on their host; the ports in use come from
 * the world's nodes (addresses) and deployments, once per cycle. */
static json_t *ports(wctx_t *w)
{
	if (w->ports)
		return w->ports;
	json_t *addrs = json_object(), *deps = json_array();
	size_t n;
	sc_wobj_t *const *v = sc__world_objs(w->world, SC_RANK_NODE, &n);
	for (size_t i = 0; i < n; i++)
		if (v[i]->address)
			json_object_set_new(addrs, v[i]->name, json_string(v[i]->address));
	v = sc__world_objs(w->world, SC_RANK_DEPLOY, &n);
	for (size_t i = 0; i < n; i++) {
		json_t *d = json_loads(v[i]->text, 0, NULL);
		if (d)
			json_array_append_new(deps, d);
	}
	w->ports = sc__deploy_ports_in_use(addrs, deps);
	json_decref(addrs);
	json_decref(deps);
	return w->ports;
}

static json_t *full_obj(jobw_t *jw)
{
	if (!jw->obj)
		jw->obj = json_loads(jw->text, 0, NULL);
	return jw->obj;
}

/* Whether the pod's binding is a compaction move: its status then carries
 * movedAt, which the action's cooldown and hourly bound read back. */
static bool moved_by_compaction(const wctx_t *w, size_t j, const char *pod)
{
	for (size_t k = w->bj.estart[j]; k < w->bj.estart[j + 1]; k++) {
		const sc_eviction_t *e = &w->d->evictions[w->bj.eorder[k]];
		if (e->action == SC_ACT_COMPACT && e->to && strcmp(e->pod, pod) == 0)
			return true;
	}
	return false;
}

/* The node other than b's whose agent still lists b's pod, or NULL. */
static const char *listed_elsewhere(const wctx_t *w, const jobw_t *jw, const sc_binding_t *b)
{
	char key[3 * SC_MAX_NAME + 8];
	snprintf(key, sizeof(key), "%s/%s/%s", jw->o->rank == SC_RANK_DEPLOY ? "Deployment" : "Job",
	         jw->o->name, b->pod);
	const char *node = json_string_value(json_object_get(w->listed, key));
	return node && strcmp(node, b->node) != 0 ? node : NULL;
}

static void apply_bindings(wctx_t *w, jobw_t *jw, json_t *pods)
{
	size_t j = (size_t)jw->j;
	const sc_job_spec_t *js = &w->snap->jobs[j];
	if (w->bj.bstart[j + 1] == w->bj.bstart[j])
		return;
	/* A job's wait ends with its first placement. */
	if (sc__jobst_count(pods).running == 0 && js->created > 0)
		record_wait(w->out, (double)(w->snap->now - js->created));
	const sc_binding_t *first = NULL;
	for (size_t k = w->bj.bstart[j]; k < w->bj.bstart[j + 1]; k++) {
		const sc_binding_t *b = &w->d->bindings[w->bj.border[k]];
		size_t at;
		json_t *np = binding_pod(b, w->now, jw->o->mod_rev);
		if (b->pipelined)
			w->out->releasing = true; /* the next cycle soon, to start it */
		/* Devices the snapshot shows free may still be held by a pod the
		 * node is stopping (its entry is gone already): wait for it. */
		if (!b->pipelined && json_object_get(w->busy, b->node))
			sc__jobst_set_phase(np, SC_PP_PIPELINED, NULL);
		if (moved_by_compaction(w, j, b->pod))
			json_object_set_new(np, "movedAt", json_string(w->now));
		if (jw->o->rank == SC_RANK_DEPLOY)
			sc__deploy_bind_port(full_obj(jw), np, ports(w));
		json_t *was = sc__jobst_find(pods, b->pod, &at);
		sc_jobst_pod_t r;
		const char *old_node = listed_elsewhere(w, jw, b);
		/* A move (consolidation, compaction): the pod starts on its new
		 * node only once the old one has stopped it (carried_pods). */
		if (was && sc__jobst_pod(was, &r) == 0 && r.node[0] &&
		    strcmp(r.node, b->node) != 0 &&
		    (r.phase == SC_PP_RELEASING || r.phase == SC_PP_RUNNING ||
		     r.phase == SC_PP_PIPELINED)) {
			json_t *from = json_object_get(was, "from");
			sc__jobst_set_phase(np, SC_PP_PIPELINED, NULL);
			json_object_set_new(
			    np, "from",
			    from ? json_incref(from)
			         : json_pack("{s:s,s:I}", "node", r.node, "seen",
			                     sc__move_heartbeats(w->agent_pods, r.node)));
			w->out->releasing = true;
		} else if (old_node) {
			/* Its entry went in an earlier cycle, but a node still
			 * lists it (stopping it, or lost and not yet given up). */
			sc__jobst_set_phase(np, SC_PP_PIPELINED, NULL);
			json_object_set_new(
			    np, "from",
			    json_pack("{s:s,s:I}", "node", old_node, "seen",
			              sc__move_heartbeats(w->agent_pods, old_node)));
			w->out->releasing = true;
		}
		if (was)
			json_array_set_new(pods, at, np);
		else
			json_array_append_new(pods, np);
		json_array_append_new(jw->pods_bound, json_string(b->pod));
		jw->pipelined |= b->pipelined;
		if (!first)
			first = b;
		w->out->placements++;
	}
	size_t n = json_array_size(jw->pods_bound);
	char gpus[128] = "";
	for (size_t g = 0, m = 0; g < first->ngpus && m < sizeof(gpus) - 8; g++)
		m += (size_t)snprintf(gpus + m, sizeof(gpus) - m, "%s%d", g ? "," : "",
		                      first->gpus[g]);
	json_t *extra = json_pack("{s:s,s:s,s:O}", "pod", first->pod, "node", first->node, "pods",
	                          jw->pods_bound);
	if (n == 1)
		event(w, jw->o, jw->queue, "Bound", "Normal", extra, "pod %s bound to %s%s%s%s",
		      first->pod, first->node, gpus[0] ? " (gpus " : "", gpus, gpus[0] ? ")" : "");
	else
		event(w, jw->o, jw->queue, "Bound", "Normal", extra,
		      "%zu pods bound (%s to %s, ...)", n, first->pod, first->node);
}

/* ---------------------------------------------------------------------
 * Status
 * ------------------------------------------------------------------- */

static int replicas_of(const sc_job_spec_t *j)
{
	int n = 0;
	for (size_t t = 0; j && t < j->ntasks; t++)
		n += j->tasks[t].replicas;
	return n;
}

/* Evicted sticks until the job runs again, so a user sees why it stopped. */
static const char *job_phase(sc_jobst_counts_t c, int total, const char *old_phase, bool evicted)
{
	if (total > 0 && c.succeeded == total)
		return "Succeeded";
	if (c.failed > 0 && c.running == 0)
		return "Failed";
	if (c.running > 0)
		return "Running";
	if (evicted || c.releasing > 0 || strcmp(old_phase, "Evicted") == 0)
		return "Evicted";
	return "Pending";
}

/* The Scheduled condition; its transition time moves only when it flips. */
static json_t *condition(json_t *old_status, const char *phase, const char *reason, const char *now)
{
	int ok = strcmp(phase, "Running") == 0 || strcmp(phase, "Succeeded") == 0;
	const char *st = ok ? "True" : "False";
	const char *why = ok                              ? "Bound"
	                  : strcmp(phase, "Evicted") == 0 ? "Evicted"
	                  : strcmp(phase, "Failed") == 0  ? "Failed"
	                                                  : "Unschedulable";
	json_t *old = json_array_get(json_object_get(old_status, "conditions"), 0);
	const char *since = now;
	if (old && strcmp(str_of(old, "status"), st) == 0 &&
	    strcmp(str_of(old, "reason"), why) == 0)
		since = str_of(old, "lastTransitionTime");
	return json_pack("[{s:s,s:s,s:s,s:s,s:s}]", "type", "Scheduled", "status", st, "reason",
	                 why, "message", reason ? reason : "", "lastTransitionTime", since);
}

/* staleSince: set while 0 < running < minMember. A new one starts the
 * gang's grace, a time rule the next cycles must see (next_due). */
static void set_stale(wctx_t *w, json_t *status, json_t *old_status, const sc_job_spec_t *j,
                      sc_jobst_counts_t c)
{
	int total = replicas_of(j);
	int min = j && j->min_member ? j->min_member : total;
	json_t *old = json_object_get(old_status, "staleSince");
	if (!j || c.running == 0 || c.running >= min)
		return;
	json_object_set_new(status, "staleSince", old ? json_incref(old) : json_string(w->now));
	int64_t due = w->snap->now + (j->staleness_grace < 0 ? 60 : j->staleness_grace) + 1;
	if (!old && (!w->out->next_due || due < w->out->next_due))
		w->out->next_due = due;
}

static const char *why_of(const sc_wobj_t *o)
{
	return o->dec_why ? o->dec_why : o->ref_why;
}

static const char *reason_of(const wctx_t *w, const sc_wobj_t *o)
{
	const sc_pending_t *p = o->slot >= 0 ? w->bj.pend[o->slot] : NULL;
	return o->slot >= 0 ? (p ? p->reason : NULL) : why_of(o);
}

/* Builds job jw's new status (a new object). */
static json_t *job_status(wctx_t *w, jobw_t *jw)
{
	json_t *old = jw->old;
	json_t *pods = carried_pods(w, jw->o, json_object_get(old, "pods"), &w->out->released);
	const sc_job_spec_t *j = jw->j >= 0 ? &w->snap->jobs[jw->j] : NULL;
	const char *reason = reason_of(w, jw->o);
	size_t evicted = 0;
	if (j) {
		apply_evictions(w, jw, pods);
		evicted = json_array_size(jw->pods_evicted) + apply_drain(w, jw, pods);
		apply_bindings(w, jw, pods);
	}
	sc_jobst_counts_t c = sc__jobst_count(pods);
	c.running += c.pipelined; /* bound: it holds its place */
	const char *phase = job_phase(c, replicas_of(j), str_of(old, "phase"), evicted > 0);
	json_t *st = json_object();
	json_object_set_new(st, "phase", json_string(phase));
	if (reason && strcmp(phase, "Running") != 0 && strcmp(phase, "Succeeded") != 0)
		json_object_set_new(st, "reason", json_string(reason));
	json_object_set_new(st, "conditions", condition(old, phase, reason, w->now));
	set_stale(w, st, old, j, c);
	/* Nodes held for a job that waited too long (the dashboard draws them). */
	const sc_pending_t *pend = j ? w->bj.pend[jw->j] : NULL;
	if (pend && pend->nreserved)
		json_object_set_new(st, "reservation", sc_xcheck(sc_reservation_json(pend)));
	/* Nodes of a pool it waits for (docs/AUTOSCALING.md), for explain. */
	json_t *wf = pend ? json_object_get(w->pool_waits, jw->o->name) : NULL;
	if (wf)
		json_object_set(st, "waitingFor", wf);
	json_object_set_new(st, "pods", pods);
	sc__deploy_keep_status(old, st);
	return st;
}

/* Pending is announced when a job starts to wait (a new job, or one that
 * ran), Invalid when it is refused: not every time the reason's figures
 * move. */
static void pending_event(wctx_t *w, jobw_t *jw, json_t *old, json_t *st)
{
	const char *now = str_of(st, "reason");
	if (!now[0])
		return;
	if (why_of(jw->o)) {
		if (strcmp(str_of(old, "reason"), now) != 0)
			event(w, jw->o, jw->queue, "Invalid", "Warning", NULL, "%s", now);
		return;
	}
	if (strcmp(str_of(st, "phase"), "Pending") == 0 &&
	    strcmp(str_of(old, "phase"), "Pending") != 0)
		event(w, jw->o, jw->queue, "Pending", "Warning", NULL, "%s", now);
}

/* ---------------------------------------------------------------------
 * Which jobs to look at
 * ------------------------------------------------------------------- */

/* Pod lists the decoder reads alike: equal, or both empty or absent. */
static bool same_pods(json_t *a, json_t *b)
{
	if (json_array_size(a) == 0 && json_array_size(b) == 0)
		return true;
	return json_equal(a, b);
}

static int same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static int decided(const wctx_t *w, const sc_wobj_t *o)
{
	size_t j = (size_t)o->slot;
	return o->slot >= 0 &&
	       (w->bj.bstart[j + 1] > w->bj.bstart[j] || w->bj.estart[j + 1] > w->bj.estart[j]);
}

/* 1 when the job's pods (as decoded) include a Running one on a drained
 * node: a new drain concerns it. */
static int on_drained(const wctx_t *w, const sc_wobj_t *o)
{
	if (!w->drained || o->slot < 0)
		return 0;
	const sc_job_spec_t *j = &w->snap->jobs[o->slot];
	for (size_t i = 0; i < j->npods; i++)
		if (j->pods[i].phase == SC_POD_RUNNING && j->pods[i].node &&
		    json_object_get(w->drained, j->pods[i].node))
			return 1;
	return 0;
}

enum { LOOK = 0, SETTLED, REASON_ONLY };

/* Whether job o's status needs building. */
static int look(wctx_t *w, sc_wobj_t *o)
{
	if (!o->settled || decided(w, o) || !same_str(o->settled_why, why_of(o)))
		return LOOK;
	if (o->settled_drain != w->drain_hash) {
		if (on_drained(w, o))
			return LOOK;
		o->settled_drain = w->drain_hash;
	}
	if (same_str(o->settled_reason, reason_of(w, o)))
		return SETTLED;
	/* Only the pending reason moved: it is written now and then. */
	return o->settled_reason && reason_of(w, o) ? REASON_ONLY : LOOK;
}

/* A Pipelined pod waits for a node to stop a pod (carried_pods): every
 * cycle looks again, and one comes within a second (next_due). */
static bool waits_for_a_node(wctx_t *w, json_t *st)
{
	json_t *e;
	size_t i;
	sc_jobst_pod_t r;
	json_array_foreach(json_object_get(st, "pods"), i, e)
	{
		if (sc__jobst_pod(e, &r) == 0 && r.phase == SC_PP_PIPELINED) {
			int64_t due = w->snap->now + 1;
			if (!w->out->next_due || due < w->out->next_due)
				w->out->next_due = due;
			return true;
		}
	}
	return false;
}

static void settle(wctx_t *w, sc_wobj_t *o, json_t *st)
{
	if (decided(w, o) || waits_for_a_node(w, st))
		return;
	free(o->settled_why);
	free(o->settled_reason);
	o->settled_why = why_of(o) ? sc_xstrdup(why_of(o)) : NULL;
	o->settled_reason = reason_of(w, o) ? sc_xstrdup(reason_of(w, o)) : NULL;
	o->settled_drain = w->drain_hash;
	o->settled_pending = json_object_get(st, "reason") != NULL;
	o->settled = true;
}

/* ---------------------------------------------------------------------
 * Puts
 * ------------------------------------------------------------------- */

static sc_put_t *add_put(sc_cycle_plan_t *p)
{
	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 64;
		p->v = sc_xreallocarray(p->v, p->cap, sizeof(*p->v));
	}
	sc_put_t *x = &p->v[p->n++];
	memset(x, 0, sizeof(*x));
	return x;
}

/* The promise of a write: its text, and its view's digest and decoding
 * (the old ones when the status change left the view as it was). */
static void promise(wctx_t *w, sc_wobj_t *o, const char *text, bool view_same)
{
	sc_manifest_obj_free(o->pdec);
	o->pdec = NULL;
	free(o->promise);
	o->promise = sc_xstrdup(text);
	if (view_same) {
		memcpy(o->pvh, o->vh, sizeof(o->pvh));
		o->pvh_ok = o->vh_ok;
		return;
	}
	json_t *obj = json_loads(text, 0, NULL);
	json_t *view = sc__world_view(o->rank, obj);
	json_decref(obj);
	o->pvh_ok = true;
	sc__view_digest(view, o->pvh);
	if (!o->vh_ok || o->pvh[0] != o->vh[0] || o->pvh[1] != o->vh[1]) {
		sc_manifest_error_t err;
		int rc = sc_manifest_decode(view, &o->pdec, &err);
		if (rc == SC_ENOMEM)
			sc_oom();
		w->out->decoded++;
		if (rc < 0) { /* not expected of our own write: decode it when it comes */
			free(o->promise);
			o->promise = NULL;
		}
	}
	json_decref(view);
}

/* The stored text with its status member replaced by status (or added
 * last): the rest stays byte for byte as stored, and nothing but the
 * status is parsed or printed. */
static char *splice_status(const char *text, size_t len, const sc_jval_t *old, const char *status)
{
	sc_buf_t b;
	sc_buf_init(&b, 0);
	if (old->type != SC_JT_ABSENT) {
		size_t at = (size_t)(old->text - text);
		sc_buf_append(&b, text, at);
		sc_buf_puts(&b, status);
		sc_buf_append(&b, old->text + old->len, len - at - old->len);
	} else {
		size_t end = len;
		while (end > 0 && text[end - 1] != '}')
			end--;
		size_t body = end - 1; /* the closing brace */
		size_t k = body;
		while (k > 0 && strchr(" \t\r\n", text[k - 1]))
			k--;
		sc_buf_append(&b, text, body);
		sc_buf_puts(&b, text[k - 1] == '{' ? "\"status\":" : ",\"status\":");
		sc_buf_puts(&b, status);
		sc_buf_append(&b, text + body, len - body);
	}
	size_t n;
	return sc_buf_steal(&b, &n);
}

/* The job's spec.queue, for its events. */
static void queue_of(const sc_wobj_t *o, const sc_jval_t *spec, char *out, size_t outsz)
{
	static const char *const key[] = {"queue"};
	const sc_job_spec_t *j = o->dec ? sc_manifest_obj_job(o->dec) : NULL;
	sc_jval_t q;
	out[0] = '\0';
	if (j && j->queue)
		snprintf(out, outsz, "%s", j->queue);
	else if (spec->type == SC_JT_OBJECT &&
	         sc_jscan_object(spec->text, spec->len, key, 1, &q) == 0 && q.type == SC_JT_STRING)
		sc_jscan_string(&q, out, outsz);
}

/* Builds job o's status; writes it when it changed. Only the status is
 * parsed (most jobs looked at are pending ones whose status is small next
 * to their spec); the whole object only for a Deployment's binding (its
 * template's port) or for a write that changes what the decoder reads. */
static void job_write(wctx_t *w, sc_wobj_t *o)
{
	static const char *const keys[] = {"status", "spec"};
	sc_jval_t top[2];
	char queue[SC_MAX_NAME + 1];
	size_t len = strlen(o->text);
	jobw_t jw = {.o = o, .j = o->slot, .text = o->text};
	if (sc_jscan_object(o->text, len, keys, 2, top) < 0)
		return;
	queue_of(o, &top[1], queue, sizeof(queue));
	jw.queue = queue;
	json_t *old =
	    top[0].type == SC_JT_OBJECT ? json_loadb(top[0].text, top[0].len, 0, NULL) : NULL;
	jw.old = old;
	jw.pods_bound = json_array();
	jw.pods_evicted = json_array();
	json_t *st = job_status(w, &jw);
	if (json_object_get(st, "reason")) {
		w->out->pending++;
		o->reason_at = w->snap->now;
	}
	if (old && json_equal(old, st)) {
		settle(w, o, st);
	} else {
		pending_event(w, &jw, old, st);
		bool view_same =
		    o->rank == SC_RANK_JOB &&
		    same_pods(json_object_get(old, "pods"), json_object_get(st, "pods")) &&
		    json_equal(json_object_get(old, "staleSince"),
		               json_object_get(st, "staleSince"));
		char *stext = sc_xcheck(json_dumps(st, JSON_COMPACT));
		sc_put_t *x = add_put(w->p);
		x->key = sc_xstrdup(o->key);
		x->value = splice_status(o->text, len, &top[0], stext);
		x->expect = o->mod_rev;
		x->evicts = jw.evicts;
		x->pipelined = jw.pipelined;
		free(stext);
		promise(w, o, x->value, view_same);
		w->out->writes++;
	}
	json_decref(st);
	json_decref(old);
	json_decref(jw.obj);
	json_decref(jw.pods_bound);
	json_decref(jw.pods_evicted);
}

static void add_job_writes(wctx_t *w)
{
	for (int r = SC_RANK_JOB; r <= SC_RANK_DEPLOY; r++) {
		size_t n;
		sc_wobj_t *const *v = sc__world_objs(w->world, r, &n);
		for (size_t i = 0; i < n; i++) {
			sc_wobj_t *o = v[i];
			int how = look(w, o);
			if (how == REASON_ONLY &&
			    (w->snap->now - o->reason_at < REASON_EVERY || w->reason_budget == 0)) {
				w->out->deferred++;
				how = SETTLED;
			}
			if (how == SETTLED) {
				w->out->pending += o->settled_pending;
				continue;
			}
			if (how == REASON_ONLY)
				w->reason_budget--;
			job_write(w, o);
		}
	}
}

/* Evictions first, then the other writes, then bindings onto resources
 * still being released: committed in that order, a pipelined binding is
 * never stored before the eviction it relies on. Stable (the world's key
 * order stays within each class). */
static void order_puts(sc_cycle_plan_t *p)
{
	size_t start[4] = {0};
	sc_put_t *v = sc_xcalloc(p->n + 1, sizeof(*v));
	for (size_t i = 0; i < p->n; i++)
		start[(p->v[i].evicts ? 0 : p->v[i].pipelined ? 2 : 1) + 1]++;
	start[2] += start[1];
	start[3] += start[2];
	for (size_t i = 0; i < p->n; i++)
		v[start[p->v[i].evicts ? 0 : p->v[i].pipelined ? 2 : 1]++] = p->v[i];
	free(p->v);
	p->v = v;
	p->cap = p->n + 1;
}

int sc__cycle_plan(sc_world_t *world, const sc_snapshot_t *snap, const sc_decisions_t *d,
                   json_t *pool_waits, json_t *agent_pods, sc_cycle_plan_t *p, sc_cycle_out_t *out)
{
	wctx_t w = {.world = world,
	            .snap = snap,
	            .d = d,
	            .pool_waits = pool_waits,
	            .agent_pods = agent_pods,
	            .out = out,
	            .p = p};
	free(out->waits);
	memset(out, 0, sizeof(*out));
	memset(p, 0, sizeof(*p));
	sc__rfc3339(snap->now, w.now, sizeof(w.now));
	by_job_init(&w);
	w.events = json_array();
	w.folded = json_object();
	w.drain_hash = sc__world_drain_hash(world);
	w.drained = w.drain_hash ? sc__world_drained(world) : NULL;
	w.reason_budget = REASON_BUDGET;
	w.listed = json_object();
	w.busy = sc__move_busy_nodes(world, snap, agent_pods, w.listed);
	add_job_writes(&w);
	fold_events(&w);
	order_puts(p);
	p->events = w.events;
	out->events = json_array_size(w.events);
	json_decref(w.drained);
	json_decref(w.folded);
	json_decref(w.ports);
	json_decref(w.busy);
	json_decref(w.listed);
	by_job_free(&w.bj);
	return 0;
}

void sc__cycle_plan_free(sc_cycle_plan_t *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->v[i].key);
		free(p->v[i].value);
		sc_manifest_obj_free(p->v[i].pre);
	}
	free(p->v);
	free(p->part_idx);
	json_decref(p->events);
	memset(p, 0, sizeof(*p));
}
