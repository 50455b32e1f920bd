/* Built-in placement policies for the generic search (sc_cluster_best).
 *
 * The scheduler itself uses the indexed fast path for these two, which
 * visits nodes in the same order of preference; the table form exists so
 * that the simulator can run them beside its own policies by name. */
#include <math.h>
#include <string.h>

#include "starcloud/cluster.h"

/* Fewer whole devices left free scores higher, then less CPU left. Scores
 * are scaled so the GPU term dominates, as KAI's lexicographic sum does. */
static double binpack_score(void *ctx, const sc_cluster_t *c, const sc_node_view_t *n,
                            const sc_request_t *r, sc_assign_t *a)
{
	int64_t gpu_left = 0;
	for (int d = 0; d < n->gpu_count; d++)
		gpu_left += n->gpu_free[d];
	gpu_left -= sc_request_gpu_milli(r, n);
	double cpu_left = n->spec->cpu_milli > 0
	                      ? (double)(n->cpu_free - r->cpu_milli) / (double)n->spec->cpu_milli
	                      : 0;
	return -(double)gpu_left * 10.0 - cpu_left;
}

static double spread_score(void *ctx, const sc_cluster_t *c, const sc_node_view_t *n,
                           const sc_request_t *r, sc_assign_t *a)
{
	return -binpack_score(ctx, c, n, r, a);
}

static const sc_policy_t builtins[] = {
    {.name = "binpack", .score = binpack_score, .device_policy = SC_DEV_PACK},
    {.name = "spread", .score = spread_score, .device_policy = SC_DEV_SPREAD},
};

const sc_policy_t *sc_policy_builtin(const char *name)
{
	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (strcmp(builtins[i].name, name) == 0)
			return &builtins[i];
	return NULL;
}
