/* Node pools in `starcloud schedule`. See schedule_pools.h. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "cli/schedule_pools.h"
#include "starcloud/error.h"

int sc__pools_init(sc__pools_t *p, sc_manifest_set_t *set)
{
	const sc_nodepool_t *np;
	memset(p, 0, sizeof(*p));
	size_t n = sc_manifest_nodepools(set, &np);
	if (!np)
		return SC_ENOMEM;
	if (n == 0)
		return 0;
	p->pools = sc_xcalloc(n, sizeof(*p->pools));
	p->add = sc_xcalloc(n, sizeof(int));
	p->joined = sc_xcalloc(n, sizeof(int));
	p->arena = sc_arena_new(0);
	if (!p->arena)
		return SC_ENOMEM;
	for (size_t i = 0; i < n; i++)
		p->pools[i] = np[i].pool;
	p->n = n;
	return 0;
}

void sc__pools_free(sc__pools_t *p)
{
	free(p->pools);
	free(p->add);
	free(p->joined);
	free(p->nodes);
	sc_arena_free(p->arena);
	memset(p, 0, sizeof(*p));
}

/* The pending entry of job `name` in cj, or NULL. */
static json_t *pending_of(json_t *cj, const char *name)
{
	json_t *v;
	size_t i;
	json_array_foreach(json_object_get(cj, "pending"), i, v)
	{
		const char *j = json_string_value(json_object_get(v, "job"));
		if (j && strcmp(j, name) == 0)
			return v;
	}
	return NULL;
}

/* "waitingFor": [{pool, nodes, newNodes}] on the pending jobs, whose reason
 * becomes the wait (offline nothing has been requested yet). */
static void add_waits(const sc__pools_t *p, const sc_snapshot_t *s, const sc_scaleup_t *up,
                      json_t *cj)
{
	char text[512];
	for (size_t i = 0; i < up->nwaits; i++) {
		const sc_pool_wait_t *w = &up->waits[i];
		json_t *pe = pending_of(cj, s->jobs[w->job].name);
		if (!pe)
			continue; /* running, with spare replicas waiting */
		json_t *arr = json_object_get(pe, "waitingFor");
		if (!arr) {
			arr = json_array();
			json_object_set_new(pe, "waitingFor", arr);
			json_object_set_new(
			    pe, "reason",
			    json_string(sc_pool_wait_text(text, sizeof(text),
			                                  p->pools[w->pool].name, w->nodes, -1)));
		}
		json_array_append_new(arr,
		                      json_pack("{s:s,s:i,s:i}", "pool", p->pools[w->pool].name,
		                                "nodes", w->nodes, "newNodes", w->new_nodes));
	}
}

static void to_json(const sc__pools_t *p, const sc_snapshot_t *s, const sc_scaleup_t *up,
                    const sc_scaledown_t *down, json_t *cj)
{
	json_t *ups = json_array(), *downs = json_array();
	for (size_t i = 0; i < p->n; i++)
		if (up->add[i] > 0)
			json_array_append_new(ups, json_pack("{s:s,s:i,s:i}", "pool",
			                                     p->pools[i].name, "nodes", up->add[i],
			                                     "belowMin", up->below_min[i]));
	for (size_t i = 0; i < down->n; i++)
		json_array_append_new(
		    downs, json_pack("{s:s,s:s,s:i}", "pool", p->pools[down->nodes[i].pool].name,
		                     "node", down->nodes[i].node, "moves", down->nodes[i].moves));
	json_object_set_new(cj, "scaleUp", ups);
	json_object_set_new(cj, "scaleDown", downs);
	add_waits(p, s, up, cj);
}

static void to_table(const sc__pools_t *p, const sc_snapshot_t *s, const sc_scaleup_t *up,
                     const sc_scaledown_t *down)
{
	char text[512];
	printf("NODE POOLS (%zu)\n", p->n);
	for (size_t i = 0; i < p->n; i++)
		printf("  %s: %d to add%s (%d more offered to the what-if)\n", p->pools[i].name,
		       up->add[i], up->below_min[i] ? " (minimum)" : "", up->headroom[i]);
	for (size_t i = 0; i < up->nwaits; i++)
		printf("  %s: %s\n", s->jobs[up->waits[i].job].name,
		       sc_pool_wait_text(text, sizeof(text), p->pools[up->waits[i].pool].name,
		                         up->waits[i].nodes, -1));
	for (size_t i = 0; i < down->n; i++)
		printf("  %s: node %s could go (%d pods to move)\n",
		       p->pools[down->nodes[i].pool].name, down->nodes[i].node,
		       down->nodes[i].moves);
}

int sc__pools_cycle(sc__pools_t *p, const sc_snapshot_t *s, const sc_decisions_t *d, json_t *cj,
                    bool table)
{
	sc_scaleup_t *up = NULL;
	sc_scaledown_t *down = NULL;
	char msg[512];
	int rc = sc_scaleup_plan(s, d, p->pools, p->n, &up, msg, sizeof(msg));
	if (rc == 0)
		rc = sc_scaledown_plan(s, d, p->pools, p->n, NULL, &down, msg, sizeof(msg));
	if (rc < 0) {
		fprintf(stderr, "starcloud schedule: node pools: %s\n",
		        msg[0] ? msg : sc_strerror(rc));
	} else {
		memcpy(p->add, up->add, p->n * sizeof(int));
		if (table)
			to_table(p, s, up, down);
		else if (cj)
			to_json(p, s, up, down, cj);
	}
	sc_scaleup_free(up);
	sc_scaledown_free(down);
	return rc;
}

int sc__pools_join(sc__pools_t *p, sc_snapshot_t *snap)
{
	size_t add = 0;
	for (size_t i = 0; i < p->n; i++)
		add += (size_t)p->add[i];
	if (add == 0)
		return 0;
	sc_node_spec_t *nodes = sc_xcalloc(snap->nnodes + add, sizeof(*nodes));
	memcpy(nodes, snap->nodes, snap->nnodes * sizeof(*nodes));
	size_t n = snap->nnodes;
	for (size_t i = 0; i < p->n; i++)
		for (int k = 0; k < p->add[i]; k++) {
			sc_node_spec_t nd = p->pools[i].tmpl;
			nd.name = sc_arena_printf(p->arena, "%s-new-%d", p->pools[i].name,
			                          p->joined[i]++);
			if (!nd.name) {
				free(nodes);
				return SC_ENOMEM;
			}
			nodes[n++] = nd;
		}
	free(p->nodes);
	p->nodes = nodes;
	snap->nodes = nodes;
	snap->nnodes = n;
	memset(p->add, 0, p->n * sizeof(int));
	return 0;
}
