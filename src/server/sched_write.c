/* Writing a cycle's decisions back to the store.
 *
 * Pod lifecycle (there is no node agent yet, so the server plays its part):
 *   binding        -> the pod is listed in the job's status.pods as Running
 *                     with its node and devices (Bound and Running are one
 *                     step until an agent reports the process started);
 *   eviction       -> the pod's phase becomes Releasing: it still holds its
 *                     resources, so the core does not place on them twice;
 *   next cycle     -> a Releasing pod is removed; its replica is pending
 *                     again. Its node's agent may still be stopping it:
 *                     pods Pipelined onto that node wait (busy_nodes).
 *   move           -> eviction and binding of one pod in one cycle: the new
 *                     entry is Pipelined with from {node} and becomes
 *                     Running once the old node's agent no longer lists
 *                     the pod (a pod never runs on two nodes, issue 23).
 *                     So is any binding of a pod that another node's agent
 *                     still lists (a pod evicted in an earlier cycle, such
 *                     as a Deployment's replica on a node whose lease
 *                     expired: agent_api.c), whose old entry is gone.
 *   drained node   -> every job with a Running pod on a node annotated
 *                     starcloud.dev/drain is evicted as a whole (a gang is
 *                     only useful whole) and placed again elsewhere.
 * Job status: phase (Pending, Running, Succeeded, Failed, Evicted), reason
 * (the core's pending explanation), one Scheduled condition, staleSince
 * (set while 0 < running pods < minMember), pods.
 *
 * Every job whose status changes is written in ONE transaction together
 * with the cycle's events, each put conditional on the revision the cycle
 * read; a job changed by the API meanwhile fails the transaction with
 * SC_ECONFLICT and the cycle runs again on fresh data. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/cache.h"
#include "base/alloc.h"
#include "base/log.h"
#include "server/deploy.h"
#include "server/jobstatus.h"
#include "server/sched_int.h"
#include "starcloud/error.h"

/* Per-job views of the decisions (index lists in one array each). */
typedef struct by_job {
	size_t *bstart, *border; /* bindings of job j: border[bstart[j]..bstart[j+1]) */
	size_t *estart, *eorder;
	const char **pending;
	const sc_pending_t **pend; /* the whole entry, for its reservation */
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

static void by_job_init(by_job_t *b, const sc_cycle_in_t *in, const sc_decisions_t *d)
{
	size_t nj = in->snap.njobs;
	/* `job` is the first member of both structs. */
	bucket(nj, d->nbindings, d->bindings, sizeof(sc_binding_t), &b->bstart, &b->border);
	bucket(nj, d->nevictions, d->evictions, sizeof(sc_eviction_t), &b->estart, &b->eorder);
	b->pending = sc_xcalloc(nj + 1, sizeof(*b->pending));
	b->pend = sc_xcalloc(nj + 1, sizeof(*b->pend));
	for (size_t i = 0; i < d->npending; i++)
		if (d->pending[i].job < nj) {
			b->pending[d->pending[i].job] = d->pending[i].reason;
			b->pend[d->pending[i].job] = &d->pending[i];
		}
}

static void by_job_free(by_job_t *b)
{
	free(b->bstart);
	free(b->border);
	free(b->estart);
	free(b->eorder);
	free(b->pending);
	free(b->pend);
}

/* ---------------------------------------------------------------------
 * Events
 * ------------------------------------------------------------------- */

typedef struct wctx {
	const sc_cycle_in_t *in;
	sc_decode_cache_t *dc;
	uint64_t drain_hash; /* of the drained nodes' names */
	const sc_decisions_t *d;
	by_job_t bj;
	json_t *events;  /* new Event objects */
	json_t *drained; /* names of nodes being drained -> true */
	char now[40];
	sc_cycle_out_t *out;
	json_t *ports;  /* "node:port" of deployment pods (deploy_ctl.c) */
	json_t *busy;   /* nodes still running a pod not Running there (unclean) */
	json_t *listed; /* "Kind/job/pod" -> a node whose agent lists it */
} wctx_t;

static const char *name_of(json_t *obj)
{
	const char *n =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
	return n ? n : "";
}

/* Queues an Event about a job; extra (consumed, may be NULL) adds fields. */
static void event(wctx_t *w, const sc_sobj_t *o, const char *reason, const char *type,
                  json_t *extra, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void event(wctx_t *w, const sc_sobj_t *o, const char *reason, const char *type,
                  json_t *extra, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *ev = sc_xcheck(
	    json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s},s:s,s:s,s:s,s:s,s:s}", "apiVersion",
	              "starcloud.dev/v1", "kind", "Event", "metadata", "creationTimestamp", w->now,
	              "involvedObject", "kind", o->kind->kind, "name", name_of(o->obj), "queue",
	              sc__str_of(json_object_get(o->obj, "spec"), "queue"), "reason", reason,
	              "type", type, "message", msg, "lastTimestamp", w->now));
	if (extra)
		json_object_update(ev, extra);
	json_decref(extra);
	json_array_append_new(w->events, ev);
}

/* ---------------------------------------------------------------------
 * Pods
 * ------------------------------------------------------------------- */

/* A new Running entry, or Pipelined when the core placed the pod onto
 * resources still being released (the agent starts only Running pods; a
 * later cycle makes it Running once the node has stopped them: see
 * carried_pods). Written Running, such a pod started beside the pod it
 * waited for (the soak of issue 23: a serving replica pipelined onto a
 * reclaimed flood pod's GPU). Its generation, the assignment's identity
 * for the agent's fencing (docs/AGENT.md), is the revision of the object
 * the binding was decided on: the write that stores it is conditional on
 * that revision and moves the object past it, so every later binding of
 * the same pod, on whatever node, gets a larger one. */
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

/* The number of node's heartbeats the server had taken when the cycle
 * read (0 when none). */
static json_int_t heartbeats(const sc_cycle_in_t *in, const char *node)
{
	json_t *pods = json_object_get(in->agent_pods, node);
	return json_integer_value(json_object_get(pods, SC_AGENT_PODS_SEQ));
}

/* Whether pod entry e is a move whose old node (e.from.node) may still run
 * the pod, or be stopping it: no heartbeat of it came after the move was
 * decided (e.from.seen: one sent before might predate the pod's start), or
 * the last one listed the pod (in->agent_pods). A node without an agent,
 * or given up (lease + fence time: it has stopped its pods itself), has
 * nothing to wait for. */
static bool still_on_old_node(const wctx_t *w, const sc_sobj_t *o, json_t *e)
{
	json_t *from = json_object_get(e, "from");
	const char *node = sc__str_of(from, "node");
	if (!node[0])
		return false;
	char key[3 * SC_MAX_NAME + 8];
	snprintf(key, sizeof(key), "%s/%s/%s", o->kind->kind, name_of(o->obj),
	         sc__str_of(e, "name"));
	json_t *pods = json_object_get(w->in->agent_pods, node);
	if (!pods)
		return false;
	return json_object_get(pods, key) || json_object_get(pods, SC_AGENT_PODS_UNKNOWN) ||
	       heartbeats(w->in, node) <= json_integer_value(json_object_get(from, "seen"));
}

/* Nodes whose agent still runs (or is stopping) a pod that the store does
 * not have Running there: one evicted, moved, or of a deleted job. The
 * devices it holds are not free yet, so a pod Pipelined onto that node
 * waits (the preemptor would start beside its victim otherwise). A node
 * without an agent, or given up, is never busy. Fills listed with every
 * pod an agent lists and its node (a pod bound elsewhere waits for it). */
static json_t *busy_nodes(const sc_cycle_in_t *in, json_t *listed)
{
	json_t *placed = json_object(), *busy = json_object(), *e, *pods;
	char key[4 * SC_MAX_NAME + 8];
	const char *node;
	size_t i;
	for (size_t k = 0; in->agent_pods && k < in->nobjs; k++) {
		const sc_sobj_t *o = &in->objs[k];
		if (!o->kind->queue_scoped)
			continue;
		json_array_foreach(sc__jobst_pods(o->obj), i, e)
		{
			sc_jobst_pod_t r;
			if (sc__jobst_pod(e, &r) < 0 || r.phase != SC_PP_RUNNING)
				continue;
			snprintf(key, sizeof(key), "%s\t%s/%s/%s", r.node, o->kind->kind,
			         name_of(o->obj), r.name);
			json_object_set_new(placed, key, json_true());
		}
	}
	json_object_foreach(in->agent_pods, node, pods)
	{
		const char *pod;
		json_t *v;
		json_object_foreach(pods, pod, v)
		{
			if (!strchr(pod, '/') && strcmp(pod, SC_AGENT_PODS_UNKNOWN) != 0)
				continue;
			if (strchr(pod, '/'))
				json_object_set_new(listed, pod, json_string(node));
			snprintf(key, sizeof(key), "%s\t%s", node, pod);
			if (!json_object_get(placed, key))
				json_object_set_new(busy, node, json_true());
		}
	}
	json_decref(placed);
	return busy;
}

/* The pods as they were, minus those that were Releasing (their release
 * completes now), each copied so the stored object stays untouched. A
 * Pipelined pod waited for Releasing pods of the cycle that bound it: it is
 * Running from this write on, unless its node's agent still runs a pod the
 * store does not place there (busy_nodes) or, for a move, its old node
 * still lists it (still_on_old_node). The agent's heartbeat that drops such
 * a pod kicks the next cycle (agent_api.c). */
static json_t *carried_pods(const wctx_t *w, const sc_sobj_t *o, json_t *old)
{
	json_t *pods = json_array(), *p;
	size_t i;
	json_array_foreach(old, i, p)
	{
		sc_jobst_pod_t r;
		if (sc__jobst_pod(p, &r) < 0 || r.phase == SC_PP_RELEASING)
			continue;
		json_t *c = json_deep_copy(p);
		if (r.phase == SC_PP_PIPELINED && !still_on_old_node(w, o, c) &&
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
	const sc_job_spec_t *js = &w->in->snap.jobs[j];
	int64_t cap = w->in->snap.config.compaction.checkpoint_every;
	for (size_t i = 0; i < js->npods; i++) {
		const sc_pod_status_t *p = &js->pods[i];
		if (strcmp(p->name, pod) != 0)
			continue;
		double g = p->gpu_milli ? p->gpu_milli / 1000.0 : (double)p->ngpus;
		int64_t ran = p->started_at > 0 ? w->in->now - p->started_at : cap;
		ran = ran < 0 ? 0 : ran > cap ? cap : ran;
		w->out->compaction_gpus += g;
		w->out->compaction_lost_gpu_s += g * (double)ran;
		return;
	}
}

static size_t apply_evictions(wctx_t *w, const sc_sobj_t *o, json_t *pods, size_t j)
{
	for (size_t k = w->bj.estart[j]; k < w->bj.estart[j + 1]; k++) {
		const sc_eviction_t *e = &w->d->evictions[w->bj.eorder[k]];
		json_t *p = sc__jobst_find(pods, e->pod, NULL);
		if (p)
			sc__jobst_set_phase(p, SC_PP_RELEASING, NULL);
		const char *action = sc_action_name(e->action);
		json_t *extra =
		    json_pack("{s:s,s:s,s:s,s:s}", "action", action, "by", e->by ? e->by : "",
		              "pod", e->pod, "node", e->node ? e->node : "");
		event(w, o, "Evicted", "Warning", extra, "pod %s evicted from %s by %s%s%s: %s",
		      e->pod, e->node ? e->node : "?", action, e->by ? " for " : "",
		      e->by ? e->by : "", e->reason ? e->reason : "");
		if (e->action >= 0 && e->action < SC_ACT_COUNT)
			w->out->evictions[e->action]++;
		if (e->action == SC_ACT_COMPACT)
			count_compaction(w, j, e->pod);
		w->out->releasing = true;
	}
	return w->bj.estart[j + 1] - w->bj.estart[j];
}

/* Pods on a node the pool controller empties (scale-down annotation) are
 * evicted one by one: the core has checked that each can be placed again
 * without breaking its gang (src/core/scaledown.c), so the job's other pods
 * keep running. */
static size_t apply_scale_down(wctx_t *w, const sc_sobj_t *o, json_t *pods)
{
	json_t *p;
	size_t i, n = 0;
	sc_jobst_pod_t r;
	json_array_foreach(pods, i, p)
	{
		sc__jobst_pod(p, &r);
		json_t *mark = json_object_get(w->drained, r.node);
		if (r.phase != SC_PP_RUNNING || !json_is_string(mark))
			continue;
		json_t *extra = json_pack("{s:s,s:s,s:s,s:s}", "action", "scale-down", "by", "",
		                          "pod", r.name, "node", r.node);
		event(w, o, "Evicted", "Normal", extra,
		      "pod %s moved off %s: the node pool is removing the node", r.name, r.node);
		sc__jobst_set_phase(p, SC_PP_RELEASING, NULL);
		w->out->drained++;
		w->out->releasing = true;
		n++;
	}
	return n;
}

/* A job with a Running pod on a drained node is evicted whole. */
static size_t apply_drain(wctx_t *w, const sc_sobj_t *o, json_t *pods)
{
	json_t *p;
	size_t i, n = 0;
	sc_jobst_pod_t r;
	char node[SC_MAX_NAME + 1] = "";
	json_array_foreach(pods, i, p)
	{
		sc__jobst_pod(p, &r);
		if (r.phase == SC_PP_RUNNING && json_is_true(json_object_get(w->drained, r.node))) {
			snprintf(node, sizeof(node), "%s", r.node);
			break;
		}
	}
	if (!node[0])
		return apply_scale_down(w, o, pods);
	json_array_foreach(pods, i, p)
	{
		sc__jobst_pod(p, &r);
		if (r.phase != SC_PP_RUNNING)
			continue;
		json_t *extra = json_pack("{s:s,s:s,s:s,s:s}", "action", "drain", "by", "", "pod",
		                          r.name, "node", r.node);
		event(w, o, "Evicted", "Warning", extra,
		      "pod %s evicted from %s: node %s is drained", r.name, r.node, node);
		sc__jobst_set_phase(p, SC_PP_RELEASING, NULL);
		w->out->drained++;
		w->out->releasing = true;
		n++;
	}
	return n;
}

static void record_wait(sc_cycle_out_t *out, double seconds)
{
	if (out->nwaits % 64 == 0) {
		out->waits = sc_xrealloc(out->waits, (out->nwaits + 64) * sizeof(*out->waits));
	}
	out->waits[out->nwaits++] = seconds;
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
static const char *listed_elsewhere(const wctx_t *w, const sc_sobj_t *o, const sc_binding_t *b)
{
	char key[3 * SC_MAX_NAME + 8];
	snprintf(key, sizeof(key), "%s/%s/%s", o->kind->kind, name_of(o->obj), b->pod);
	const char *node = json_string_value(json_object_get(w->listed, key));
	return node && strcmp(node, b->node) != 0 ? node : NULL;
}

static void apply_bindings(wctx_t *w, const sc_sobj_t *o, json_t *pods, size_t j)
{
	/* A job's wait ends with its first placement. */
	const sc_job_spec_t *js = &w->in->snap.jobs[j];
	if (w->bj.bstart[j + 1] > w->bj.bstart[j] && sc__jobst_count(pods).running == 0 &&
	    js->created > 0)
		record_wait(w->out, (double)(w->in->now - js->created));
	for (size_t k = w->bj.bstart[j]; k < w->bj.bstart[j + 1]; k++) {
		const sc_binding_t *b = &w->d->bindings[w->bj.border[k]];
		size_t at;
		json_t *np = binding_pod(b, w->now, o->mod_rev);
		if (b->pipelined)
			w->out->releasing = true; /* the next cycle soon, to start it */
		/* Devices the snapshot shows free may still be held by a pod the
		 * node is stopping (its entry is gone already): wait for it. */
		if (!b->pipelined && json_object_get(w->busy, b->node))
			sc__jobst_set_phase(np, SC_PP_PIPELINED, NULL);
		if (moved_by_compaction(w, j, b->pod))
			json_object_set_new(np, "movedAt", json_string(w->now));
		if (strcmp(o->kind->kind, "Deployment") == 0)
			sc__deploy_bind_port(w->in, o->obj, np, &w->ports);
		json_t *was = sc__jobst_find(pods, b->pod, &at);
		sc_jobst_pod_t r;
		const char *old_node = listed_elsewhere(w, o, b);
		/* A move (consolidation, compaction): the pod starts on its new
		 * node only once the old one has stopped it (carried_pods). */
		if (was && sc__jobst_pod(was, &r) == 0 && r.node[0] &&
		    strcmp(r.node, b->node) != 0 &&
		    (r.phase == SC_PP_RELEASING || r.phase == SC_PP_RUNNING ||
		     r.phase == SC_PP_PIPELINED)) {
			json_t *from = json_object_get(was, "from");
			sc__jobst_set_phase(np, SC_PP_PIPELINED, NULL);
			json_object_set_new(np, "from",
			                    from ? json_incref(from)
			                         : json_pack("{s:s,s:I}", "node", r.node, "seen",
			                                     heartbeats(w->in, r.node)));
			w->out->releasing = true;
		} else if (old_node) {
			/* Its entry went in an earlier cycle, but a node still
			 * lists it (stopping it, or lost and not yet given up). */
			sc__jobst_set_phase(np, SC_PP_PIPELINED, NULL);
			json_object_set_new(np, "from",
			                    json_pack("{s:s,s:I}", "node", old_node, "seen",
			                              heartbeats(w->in, old_node)));
			w->out->releasing = true;
		}
		if (was)
			json_array_set_new(pods, at, np);
		else
			json_array_append_new(pods, np);
		char gpus[128] = "";
		for (size_t g = 0, n = 0; g < b->ngpus && n < sizeof(gpus) - 8; g++)
			n += (size_t)snprintf(gpus + n, sizeof(gpus) - n, "%s%d", g ? "," : "",
			                      b->gpus[g]);
		json_t *extra = json_pack("{s:s,s:s}", "pod", b->pod, "node", b->node);
		event(w, o, "Bound", "Normal", extra, "pod %s bound to %s%s%s%s", b->pod, b->node,
		      gpus[0] ? " (gpus " : "", gpus, gpus[0] ? ")" : "");
		w->out->placements++;
	}
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
	if (old && strcmp(sc__str_of(old, "status"), st) == 0 &&
	    strcmp(sc__str_of(old, "reason"), why) == 0)
		since = sc__str_of(old, "lastTransitionTime");
	return json_pack("[{s:s,s:s,s:s,s:s,s:s}]", "type", "Scheduled", "status", st, "reason",
	                 why, "message", reason ? reason : "", "lastTransitionTime", since);
}

static void set_stale(json_t *status, json_t *old_status, const sc_job_spec_t *j,
                      sc_jobst_counts_t c, const char *now)
{
	int total = replicas_of(j);
	int min = j && j->min_member ? j->min_member : total;
	json_t *old = json_object_get(old_status, "staleSince");
	if (j && c.running > 0 && c.running < min)
		json_object_set_new(status, "staleSince",
		                    old ? json_incref(old) : json_string(now));
}

/* Builds job o's new status (a new object). */
static json_t *job_status(wctx_t *w, const sc_sobj_t *o)
{
	json_t *old = json_object_get(o->obj, "status");
	json_t *pods = carried_pods(w, o, sc__jobst_pods(o->obj));
	const sc_job_spec_t *j = o->job >= 0 ? &w->in->snap.jobs[o->job] : NULL;
	const char *reason = o->why;
	size_t evicted = 0;
	if (j) {
		evicted = apply_evictions(w, o, pods, (size_t)o->job);
		evicted += apply_drain(w, o, pods);
		apply_bindings(w, o, pods, (size_t)o->job);
		reason = w->bj.pending[o->job];
	}
	sc_jobst_counts_t c = sc__jobst_count(pods);
	c.running += c.pipelined; /* bound: it holds its place */
	const char *phase = job_phase(c, replicas_of(j), sc__jobst_phase(o->obj), evicted > 0);
	json_t *st = json_object();
	json_object_set_new(st, "phase", json_string(phase));
	if (reason && strcmp(phase, "Running") != 0 && strcmp(phase, "Succeeded") != 0)
		json_object_set_new(st, "reason", json_string(reason));
	json_object_set_new(st, "conditions", condition(old, phase, reason, w->now));
	set_stale(st, old, j, c, w->now);
	/* Nodes held for a job that waited too long (the dashboard draws them). */
	const sc_pending_t *pend = j ? w->bj.pend[o->job] : NULL;
	if (pend && pend->nreserved) {
		json_t *rsv = sc_xcheck(sc_reservation_json(pend));
		json_object_set_new(st, "reservation", rsv);
	}
	/* Nodes of a pool it waits for (docs/AUTOSCALING.md), for explain. */
	json_t *wf = pend ? json_object_get(w->in->pool_waits, name_of(o->obj)) : NULL;
	if (wf)
		json_object_set(st, "waitingFor", wf);
	json_object_set_new(st, "pods", pods);
	sc__deploy_keep_status(old, st);
	return st;
}

/* Length of a reason without the age of a node pool request ("(requested
 * 40 s ago)"), which changes as time passes but says nothing new. */
static size_t reason_len(const char *r)
{
	const char *age = strstr(r, " (requested ");
	return age ? (size_t)(age - r) : strlen(r);
}

/* The pending reason is announced when it changes, not every cycle. */
static void pending_event(wctx_t *w, const sc_sobj_t *o, json_t *old, json_t *st)
{
	const char *was = sc__str_of(old, "reason"), *now = sc__str_of(st, "reason");
	size_t n = reason_len(now);
	if (now[0] && (n != reason_len(was) || strncmp(was, now, n) != 0))
		event(w, o, o->why ? "Invalid" : "Pending", "Warning", NULL, "%s", now);
}

/* ---------------------------------------------------------------------
 * The transaction
 * ------------------------------------------------------------------- */

typedef sc_cycle_plan_t ops_t;

static char *own(ops_t *o, char *p)
{
	sc_xcheck(p);
	if (o->nowned == o->owncap) {
		o->owncap = o->owncap ? o->owncap * 2 : 128;
		o->owned = sc_xrealloc(o->owned, o->owncap * sizeof(*o->owned));
	}
	o->owned[o->nowned++] = p;
	return p;
}

/* Adds a put of value (taken); obj (a reference taken) is the same object
 * parsed, handed to the cache after the commit so it is not parsed again. */
static void ops_add(ops_t *o, const char *key, char *value, int64_t expect, json_t *obj)
{
	if (o->n == o->cap) {
		o->cap = o->cap ? o->cap * 2 : 64;
		o->v = sc_xrealloc(o->v, o->cap * sizeof(*o->v));
		o->objs = sc_xrealloc(o->objs, o->cap * sizeof(*o->objs));
	}
	o->objs[o->n] = obj;
	o->v[o->n++] = (sc_store_op_t){SC_STORE_PUT, key, own(o, value), expect};
}

void sc__cycle_plan_free(sc_cycle_plan_t *o)
{
	for (size_t i = 0; i < o->nowned; i++)
		free(o->owned[i]);
	free(o->owned);
	for (size_t i = 0; i < o->n; i++)
		json_decref(o->objs[i]);
	free(o->objs);
	free(o->v);
	json_decref(o->events);
	memset(o, 0, sizeof(*o));
}

static int same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* The inputs of job_status() besides the stored object (fixed by its
 * revision): the decisions for the job, its reasons, the drained nodes.
 * `now` matters only when something flips, which is never "up to date". */
static const char *reason_of(const wctx_t *w, const sc_sobj_t *o)
{
	return o->job >= 0 ? w->bj.pending[o->job] : o->why;
}

static int decided(const wctx_t *w, const sc_sobj_t *o)
{
	size_t j = (size_t)o->job;
	return o->job >= 0 &&
	       (w->bj.bstart[j + 1] > w->bj.bstart[j] || w->bj.estart[j + 1] > w->bj.estart[j]);
}

/* 1 when job o's status is known to be up to date: skip building it. */
static int settled(wctx_t *w, const sc_sobj_t *o, const sc_decoded_t *d)
{
	if (!d || !d->settled || decided(w, o) || d->settled_drain != w->drain_hash ||
	    !same_str(d->settled_why, o->why) || !same_str(d->settled_reason, reason_of(w, o)))
		return 0;
	w->out->pending += d->settled_pending;
	return 1;
}

static char *dup_or_null(const char *s)
{
	char *p = sc_xstrdup(s);
	return p;
}

/* A Pipelined pod waits for a node to stop a pod (carried_pods): every
 * cycle looks again. */
static bool waits_for_a_node(json_t *st)
{
	json_t *e;
	size_t i;
	sc_jobst_pod_t r;
	json_array_foreach(json_object_get(st, "pods"), i, e)
	{
		if (sc__jobst_pod(e, &r) == 0 && r.phase == SC_PP_PIPELINED)
			return true;
	}
	return false;
}

static void settle(wctx_t *w, const sc_sobj_t *o, sc_decoded_t *d, json_t *st)
{
	if (!d || decided(w, o) || waits_for_a_node(st))
		return;
	free(d->settled_why);
	free(d->settled_reason);
	d->settled_why = dup_or_null(o->why);
	d->settled_reason = dup_or_null(reason_of(w, o));
	d->settled_drain = w->drain_hash;
	d->settled_pending = json_object_get(st, "reason") != NULL;
	d->settled = true;
}

static void add_job_writes(wctx_t *w, ops_t *ops)
{
	for (size_t i = 0; i < w->in->nobjs; i++) {
		const sc_sobj_t *o = &w->in->objs[i];
		sc_decoded_t *d = sc__decoded(w->dc, i);
		if (!o->kind->queue_scoped || settled(w, o, d))
			continue;
		json_t *old = json_object_get(o->obj, "status");
		json_t *st = job_status(w, o);
		if (json_object_get(st, "reason"))
			w->out->pending++;
		if (old && json_equal(old, st)) {
			settle(w, o, d, st);
			json_decref(st);
			continue;
		}
		pending_event(w, o, old, st);
		json_t *obj = json_copy(o->obj);
		json_object_set_new(obj, "status", st);
		ops_add(ops, o->key, json_dumps(obj, JSON_COMPACT), o->mod_rev, obj);
		w->out->writes++;
	}
}

/* Event names: "<object>.<revision>.<n>", unique because the revision is
 * the one this transaction will get; so they are named at commit time, on
 * the loop thread. */
static void add_event_writes(sc_server_t *s, ops_t *ops)
{
	int64_t rev = sc_store_revision(s->store) + 1;
	json_t *ev;
	size_t i;
	json_array_foreach(ops->events, i, ev)
	{
		char name[SC_MAX_NAME + 1], key[SC_MAX_NAME + 64];
		snprintf(name, sizeof(name), "%.200s.%lld.%zu",
		         sc__str_of(json_object_get(ev, "involvedObject"), "name"), (long long)rev,
		         i);
		json_object_set_new(json_object_get(ev, "metadata"), "name", json_string(name));
		sc__object_key(sc__kind_by_name("Event"), name, key, sizeof(key));
		ops_add(ops, own(ops, sc_xstrdup(key)), json_dumps(ev, JSON_COMPACT), SC_REV_ABSENT,
		        json_incref(ev));
	}
}

static json_t *drained_nodes(const sc_cycle_in_t *in)
{
	json_t *set = json_object();
	const sc_kind_t *node = sc__kind_by_name("Node");
	for (size_t i = 0; i < in->nobjs; i++) {
		const sc_sobj_t *o = &in->objs[i];
		if (o->kind != node)
			continue; /* every cycle walks all jobs: no lookups for them */
		json_t *ann = json_object_get(json_object_get(o->obj, "metadata"), "annotations");
		const char *v = json_string_value(json_object_get(ann, SC_DRAIN_ANNOTATION));
		const char *sd = json_string_value(json_object_get(ann, SC_SCALEDOWN_ANNOTATION));
		if (v && strcmp(v, "true") == 0)
			json_object_set_new(set, name_of(o->obj), json_true());
		else if (sd && strcmp(sd, "true") == 0)
			json_object_set_new(set, name_of(o->obj), json_string("scale-down"));
	}
	return set;
}

static uint64_t drain_hash(json_t *drained)
{
	uint64_t h = 1469598103934665603ULL;
	const char *name;
	json_t *v;
	json_object_foreach(drained, name, v)
	{
		for (const char *p = name; *p; p++)
			h = (h ^ (unsigned char)*p) * 1099511628211ULL;
		h = (h ^ (json_is_true(v) ? 0xff : 0xfe)) * 1099511628211ULL; /* separator, kind */
	}
	return h;
}

int sc__cycle_plan(const sc_cycle_in_t *in, const sc_decisions_t *d, sc_decode_cache_t *dc,
                   sc_cycle_plan_t *p, sc_cycle_out_t *out)
{
	wctx_t w = {.in = in, .dc = dc, .d = d, .out = out};
	free(out->waits);
	memset(out, 0, sizeof(*out));
	memset(p, 0, sizeof(*p));
	sc__rfc3339(in->now, w.now, sizeof(w.now));
	by_job_init(&w.bj, in, d);
	w.events = json_array();
	w.drained = drained_nodes(in);
	w.drain_hash = drain_hash(w.drained);
	w.listed = json_object();
	w.busy = busy_nodes(in, w.listed);
	add_job_writes(&w, p);
	p->events = w.events;
	out->events = json_array_size(w.events);
	json_decref(w.drained);
	json_decref(w.busy);
	json_decref(w.listed);
	json_decref(w.ports);
	by_job_free(&w.bj);
	return 0;
}

void sc__cycle_commit(sc_server_t *s, sc_cycle_plan_t *p, sc_store_done_fn fn, void *ud)
{
	add_event_writes(s, p);
	if (!p->n) {
		sc_store_res_t none = {0};
		fn(&none, ud);
		return;
	}
	sc_store_txn_async(s->store, p->v, p->n, fn, ud);
}

int sc__cycle_committed(sc_server_t *s, sc_cycle_plan_t *p, const sc_store_res_t *res)
{
	/* A put that fails its condition (an API write came first) is
	 * SC_ECONFLICT or SC_ENOTFOUND (deleted): both mean "read again". */
	int rc = res->rc;
	if (rc == SC_ENOTFOUND || rc == SC_EEXISTS)
		rc = SC_ECONFLICT;
	for (size_t i = 0; rc == 0 && p->n && i < p->n; i++)
		sc__cache_adopt(s->cache, p->v[i].key, res->rev, p->objs[i], 0);
	return rc;
}

/* ---------------------------------------------------------------------
 * Event retention
 * ------------------------------------------------------------------- */

static int cmp_rev(const void *a, const void *b)
{
	const sc_cobj_t *x = *(sc_cobj_t *const *)a, *y = *(sc_cobj_t *const *)b;
	return x->create_rev < y->create_rev ? -1 : x->create_rev > y->create_rev;
}

static void trimmed(const sc_store_res_t *res, void *ud)
{
	if (res->rc < 0)
		sc_log_warn("events: cannot delete the oldest: %s", sc_strerror(res->rc));
}

/* Reads the events from the cache (no store scan), oldest first. */
long sc__events_trim(sc_server_t *s)
{
	size_t n;
	sc_cobj_t *const *v = sc__cache_items(s->cache, sc__kind_by_name("Event"), &n);
	if (n <= SC_EVENT_LIMIT)
		return (long)n;
	sc_cobj_t **byrev = sc_xmalloc(n * sizeof(*byrev));
	size_t ndel = n - SC_EVENT_LIMIT;
	sc_store_op_t *ops = sc_xcalloc(ndel, sizeof(*ops));
	memcpy(byrev, v, n * sizeof(*byrev));
	qsort(byrev, n, sizeof(*byrev), cmp_rev);
	/* Keys are copied: the deletes remove the cache entries they name
	 * while the transaction is still reading them. */
	for (size_t i = 0; i < ndel; i++) {
		char *key = sc_xstrdup(byrev[i]->key);
		ops[i] = (sc_store_op_t){SC_STORE_DELETE, key, NULL, byrev[i]->mod_rev};
	}
	free(byrev);
	/* Not waited for: a delete that loses a race (the event changed) is
	 * retried when the count is next over the limit. */
	sc_store_txn_async(s->store, ops, ndel, trimmed, NULL);
	for (size_t i = 0; i < ndel; i++)
		free((char *)ops[i].key);
	free(ops);
	return SC_EVENT_LIMIT;
}
