/* What the plan (sched_plan.c) asks of the node agents' last heartbeats
 * before it lets a pod start (sched_int.h): a move's old node must have
 * stopped the pod, and a node still stopping a pod the store no longer
 * places there has devices that are not free yet (issue 23: a pod never
 * runs on two nodes, nor beside the pod it waits for).
 *
 * agent_pods is a copy of the server's (server.h), taken on the loop thread
 * when the cycle starts: node -> {"Kind/job/pod": true, ...,
 * SC_AGENT_PODS_SEQ: heartbeats taken, SC_AGENT_PODS_UNKNOWN: not heard from
 * since start}. A node without an entry has no agent, or was given up
 * (lease + fence time: it has stopped its pods itself): nothing to wait
 * for. */
#include <stdio.h>
#include <string.h>

#include "server/jobstatus.h"
#include "server/sched_int.h"

json_int_t sc__move_heartbeats(json_t *agent_pods, const char *node)
{
	json_t *pods = json_object_get(agent_pods, node);
	return json_integer_value(json_object_get(pods, SC_AGENT_PODS_SEQ));
}

bool sc__move_still_on_old_node(json_t *agent_pods, const char *kind, const char *job, json_t *e)
{
	json_t *from = json_object_get(e, "from");
	const char *node = sc__str_of(from, "node");
	if (!node[0])
		return false;
	json_t *pods = json_object_get(agent_pods, node);
	if (!pods)
		return false;
	char key[3 * SC_MAX_NAME + 8];
	snprintf(key, sizeof(key), "%s/%s/%s", kind, job, sc__str_of(e, "name"));
	/* No heartbeat came after the move was decided (from.seen: one sent
	 * before might predate the pod's start), or the last one listed it. */
	return json_object_get(pods, key) || json_object_get(pods, SC_AGENT_PODS_UNKNOWN) ||
	       sc__move_heartbeats(agent_pods, node) <=
	           json_integer_value(json_object_get(from, "seen"));
}

static void place(json_t *placed, const char *node, const char *kind, const char *job,
                  const char *pod)
{
	char key[4 * SC_MAX_NAME + 8];
	snprintf(key, sizeof(key), "%s\t%s/%s/%s", node, kind, job, pod);
	json_object_set_new(placed, key, json_true());
}

/* The Running entries of a stored object's text (jobs the snapshot left
 * out, and deployments, whose view leaves out pods of retired tasks). */
static void place_text(json_t *placed, const char *kind, const sc_wobj_t *o)
{
	json_t *obj = json_loads(o->text, 0, NULL), *e;
	size_t i;
	json_array_foreach(sc__jobst_pods(obj), i, e)
	{
		sc_jobst_pod_t r;
		if (sc__jobst_pod(e, &r) == 0 && r.phase == SC_PP_RUNNING)
			place(placed, r.node, kind, o->name, r.name);
	}
	json_decref(obj);
}

json_t *sc__move_busy_nodes(const sc_world_t *world, const sc_snapshot_t *snap, json_t *agent_pods,
                            json_t *listed)
{
	json_t *busy = json_object();
	if (json_object_size(agent_pods) == 0)
		return busy;
	/* Where the store has each pod Running: the snapshot's decodings for
	 * jobs it holds, the stored text for the rest. */
	json_t *placed = json_object(), *pods;
	size_t n;
	sc_wobj_t *const *v = sc__world_objs(world, SC_RANK_JOB, &n);
	for (size_t i = 0; i < n; i++) {
		const sc_wobj_t *o = v[i];
		if (o->slot < 0 || (size_t)o->slot >= snap->njobs) {
			if (o->text)
				place_text(placed, "Job", o);
			continue;
		}
		const sc_job_spec_t *j = &snap->jobs[o->slot];
		for (size_t p = 0; p < j->npods; p++)
			if (j->pods[p].phase == SC_POD_RUNNING && j->pods[p].node)
				place(placed, j->pods[p].node, "Job", o->name, j->pods[p].name);
	}
	v = sc__world_objs(world, SC_RANK_DEPLOY, &n);
	for (size_t i = 0; i < n; i++)
		if (v[i]->text)
			place_text(placed, "Deployment", v[i]);
	const char *node;
	json_object_foreach(agent_pods, node, pods)
	{
		const char *pod;
		json_t *x;
		char key[4 * SC_MAX_NAME + 8];
		json_object_foreach(pods, pod, x)
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
