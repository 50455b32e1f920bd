/* The cluster gauges of /metrics, computed by each cycle on its worker
 * thread from the snapshot it scheduled and its decisions, so a scrape
 * copies a prepared text and walks nothing (sched_int.h):
 *   starcloud_node_ready{node}      0 when the node's status.ready is false
 *   starcloud_cluster_gpus          GPU devices of the nodes
 *   starcloud_cluster_allocated_gpus  devices held by Running, Releasing or
 *                                   Pipelined pods of jobs and deployments,
 *                                   this cycle's bindings included
 *                                   (shares and MIG slices as fractions)
 *   starcloud_queue_oldest_pending_seconds{queue}  the oldest waiting job's
 *                                   age (its creation time kept here, the
 *                                   age taken at scrape time) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/strmap.h"
#include "starcloud/cluster.h"
#include "server/sched_int.h"
#include "starcloud/buf.h"

/* Devices a pod that is no MIG instance holds: whole devices, or a
 * share's fraction. */
static double held(int ngpus, int milli)
{
	if (milli)
		return milli / 1000.0 * (ngpus ? ngpus : 1);
	return ngpus;
}

static bool holds(const sc_pod_status_t *p)
{
	return p->phase == SC_POD_RUNNING || p->phase == SC_POD_RELEASING ||
	       p->phase == SC_POD_PIPELINED;
}

/* MIG instances held per device ("node\tgpu" -> [compute, memory slices]):
 * a device is as allocated as the larger of its compute (of 7) and memory
 * (of 8) slices held, at most whole (two 3g.40gb fill an A100-80GB's 8
 * memory slices with 6 of 7 compute slices, and nothing more fits; the
 * soak of issue 23 read such devices as 86 %). */
static void mig_add(json_t *devs, const sc_node_spec_t *node, const char *profile, int gpu)
{
	const sc_mig_profile_t *p = node ? sc_mig_profile(profile, node->gpu_memory) : NULL;
	char key[2 * SC_MAX_NAME + 24];
	if (!p)
		return;
	snprintf(key, sizeof(key), "%s\t%d", node->name, gpu);
	json_t *d = json_object_get(devs, key);
	if (!d) {
		d = sc_xcheck(json_pack("[i,i]", 0, 0));
		json_object_set_new(devs, key, d);
	}
	json_array_set_new(d, 0,
	                   json_integer(json_integer_value(json_array_get(d, 0)) + p->compute));
	json_array_set_new(d, 1, json_integer(json_integer_value(json_array_get(d, 1)) + p->size));
}

static double mig_allocated(json_t *devs)
{
	double sum = 0;
	const char *k;
	json_t *d;
	json_object_foreach(devs, k, d)
	{
		double c = (double)json_integer_value(json_array_get(d, 0)) / 7.0;
		double m = (double)json_integer_value(json_array_get(d, 1)) / 8.0;
		double f = c > m ? c : m;
		sum += f > 1 ? 1 : f;
	}
	return sum;
}

void sc__cycle_gauges(sc_world_t *w, const sc_snapshot_t *snap, const sc_decisions_t *d,
                      sc_cycle_gauges_t *g)
{
	sc_buf_t b;
	sc_buf_init(&b, 0);
	memset(g, 0, sizeof(*g));
	for (size_t i = 0; i < snap->nnodes; i++)
		g->gpus += snap->nodes[i].gpu_count;
	sc_buf_puts(&b, "# HELP starcloud_node_ready 1 when the node is ready (status.ready is not "
	                "false), else 0.\n# TYPE starcloud_node_ready gauge\n");
	size_t n;
	sc_wobj_t *const *nodes = sc__world_objs(w, SC_RANK_NODE, &n);
	for (size_t i = 0; i < n; i++) {
		const sc_node_spec_t *ns =
		    nodes[i]->slot >= 0 ? &snap->nodes[nodes[i]->slot] : NULL;
		sc_buf_puts(&b, "starcloud_node_ready{node=\"");
		sc_buf_puts(&b, nodes[i]->name);
		sc_buf_puts(&b, ns && ns->not_ready ? "\"} 0\n" : "\"} 1\n");
	}
	/* Held devices and the oldest wait per leaf queue. */
	sc_strmap_t qi = {0};
	int64_t *oldest = sc_xcalloc(snap->nqueues + 1, sizeof(int64_t)); /* creation, 0: none */
	if (sc_strmap_init(&qi, snap->nqueues + 1) < 0)
		sc_oom();
	for (size_t q = 0; q < snap->nqueues; q++)
		sc_strmap_put(&qi, snap->queues[q].name, (uint32_t)q);
	bool *waits = sc_xcalloc(snap->njobs + 1, sizeof(bool));
	for (size_t i = 0; i < d->npending; i++)
		if (d->pending[i].job < snap->njobs)
			waits[d->pending[i].job] = true;
	/* MIG devices are counted whole per device (mig_add). */
	sc_strmap_t nodes_by = {0};
	json_t *migs = sc_xcheck(json_object());
	if (sc_strmap_init(&nodes_by, snap->nnodes + 1) < 0)
		sc_oom();
	for (size_t i = 0; i < snap->nnodes; i++)
		sc_strmap_put(&nodes_by, snap->nodes[i].name, (uint32_t)i);
	for (size_t j = 0; j < snap->njobs; j++) {
		const sc_job_spec_t *js = &snap->jobs[j];
		for (size_t p = 0; p < js->npods; p++) {
			const sc_pod_status_t *ps = &js->pods[p];
			if (!holds(ps))
				continue;
			if (!ps->mig_profile) {
				g->allocated += held((int)ps->ngpus, ps->gpu_milli);
				continue;
			}
			long ni = ps->node ? sc_strmap_get(&nodes_by, ps->node) : -1;
			mig_add(migs, ni >= 0 ? &snap->nodes[ni] : NULL, ps->mig_profile,
			        ps->mig_gpu);
		}
		long q = waits[j] && js->created > 0 ? sc_strmap_get(&qi, js->queue) : -1;
		if (q >= 0 && (!oldest[q] || js->created < oldest[q]))
			oldest[q] = js->created;
	}
	for (size_t i = 0; i < d->nbindings; i++) {
		const sc_binding_t *bd = &d->bindings[i];
		if (!bd->mig_profile) {
			g->allocated += held((int)bd->ngpus, bd->gpu_milli);
			continue;
		}
		long ni = sc_strmap_get(&nodes_by, bd->node);
		mig_add(migs, ni >= 0 ? &snap->nodes[ni] : NULL, bd->mig_profile, bd->mig_gpu);
	}
	g->allocated += mig_allocated(migs);
	sc_strmap_free(&nodes_by);
	json_decref(migs);
	sc_buf_printf(&b,
	              "# HELP starcloud_cluster_gpus GPU devices on all nodes.\n"
	              "# TYPE starcloud_cluster_gpus gauge\nstarcloud_cluster_gpus %g\n"
	              "# HELP starcloud_cluster_allocated_gpus GPU devices held by running or "
	              "releasing pods (shares and MIG slices as fractions).\n"
	              "# TYPE starcloud_cluster_allocated_gpus gauge\n"
	              "starcloud_cluster_allocated_gpus %g\n",
	              g->gpus, g->allocated);
	/* Ages are taken at scrape time from the creation times. */
	g->queues = sc_xcalloc(snap->nqueues + 1, sizeof(*g->queues));
	for (size_t q = 0; q < snap->nqueues; q++) {
		snprintf(g->queues[q].name, sizeof(g->queues[q].name), "%s", snap->queues[q].name);
		g->queues[q].since = oldest[q];
	}
	g->nqueues = snap->nqueues;
	sc_strmap_free(&qi);
	free(oldest);
	free(waits);
	size_t len;
	g->state = sc_buf_steal(&b, &len);
}
