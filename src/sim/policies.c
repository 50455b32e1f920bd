/* Placement policies of the packing simulator. See policies.h. */
#include "sim/policies.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/rng.h"
#include "sim/scarce.h"

/* The reference normalises by the largest node it expects. */
#define MAX_SPEC_CPU 128000.0
#define MAX_SPEC_GPU 8000.0
#define MAX_SCORE 100

typedef struct pctx {
	sc_policy_t pol; /* first: the table handed out is the context */
	sc_frag_t *frag;
	const sc_cluster_t *cluster;
	sc_rng_t rng;
	uint32_t *tags;             /* gpuclustering: GPU-count classes present per node */
	double *gap_waste;          /* default: sc_gap_waste's table, SC_GPU_MILLI + 1 */
	struct look_now *look;      /* default: per node, its current lookahead value */
	double cpu_per_milli;       /* default: typical GPU pods' CPU per GPU milli */
	sc_scarce_t *scarce;        /* default: restricted shapes, fresh devices */
	const sc_typical_t *shapes; /* during init only: every pod shape */
	size_t nshapes;
	size_t nnodes;
} pctx_t;

const char *const sc_sim_policy_names[] = {
    "random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "default", NULL,
};

/* ---- helpers ------------------------------------------------------------ */

/* kube-scheduler scores are int64: the plugins truncate toward zero. */
static double trunc_score(double x)
{
	return (double)(int64_t)x;
}

static bool is_share(const sc_request_t *r)
{
	return r->gpus == 0 && r->gpu_milli > 0;
}

static int64_t gpu_left(const sc_node_view_t *n)
{
	int64_t t = 0;
	for (int d = 0; d < n->gpu_count; d++)
		t += n->gpu_free[d];
	return t;
}

static int64_t req_gpu_milli(const sc_request_t *r)
{
	return r->gpus > 0 ? (int64_t)r->gpus * SC_GPU_MILLI : r->gpu_milli;
}

/* A pod's CPU as the reference's resource model sees it (non-zero). */
static int64_t req_cpu(const sc_request_t *r)
{
	return r->cpu_milli > 0 ? r->cpu_milli : 100;
}

static double sigmoid(double x)
{
	return 1.0 / (1.0 + exp(-x));
}

/* Free milli per device of node n after taking r: a share on device dev,
 * or r->gpus whole devices (the first free ones; which free devices a
 * whole-GPU or CPU pod takes changes no measure here). */
static void devices_after(const sc_node_view_t *n, const sc_request_t *r, int dev,
                          int16_t left[SC_MAX_GPUS])
{
	memcpy(left, n->gpu_free, sizeof(n->gpu_free));
	if (is_share(r)) {
		left[dev] = (int16_t)(left[dev] - r->gpu_milli);
		return;
	}
	int need = r->gpus;
	for (int d = 0; d < n->gpu_count && need > 0; d++)
		if (left[d] == SC_GPU_MILLI) {
			left[d] = 0;
			need--;
		}
}

/* Fragmentation of node n after taking r, with a share on device `dev`
 * (ignored for whole-GPU and CPU pods, whose frag does not depend on which
 * free devices they take). */
static double frag_after(sc_frag_t *f, const sc_node_view_t *n, const sc_request_t *r, int dev)
{
	int16_t left[SC_MAX_GPUS];
	devices_after(n, r, dev, left);
	return sc_frag_state(f, n->model, n->cpu_free - req_cpu(r), left, n->gpu_count);
}

static void set_share(sc_assign_t *a, const sc_request_t *r, int dev)
{
	a->gpus[0] = dev;
	a->ngpus = 1;
	a->gpu_milli = r->gpu_milli;
}

/* ---- random --------------------------------------------------------------- */

/* An independent uniform number per fitting node: the maximum is a uniform
 * choice among the nodes that fit, as the reference's PreScore draw is. */
static double random_score(void *ctx, const sc_cluster_t *c, const sc_node_view_t *n,
                           const sc_request_t *r, sc_assign_t *a)
{
	pctx_t *p = ctx;
	if (is_share(r)) {
		/* Reservoir choice among the devices that fit. */
		int seen = 0, dev = -1;
		for (int d = 0; d < n->gpu_count; d++)
			if (n->gpu_free[d] >= r->gpu_milli &&
			    sc_rng_below(&p->rng, (uint64_t)++seen) == 0)
				dev = d;
		if (dev >= 0)
			set_share(a, r, dev);
	}
	return sc_rng_double(&p->rng);
}

/* ---- dotprod (Tetris) ------------------------------------------------------ */

static double dotprod_score(void *ctx, const sc_cluster_t *c, const sc_node_view_t *n,
                            const sc_request_t *r, sc_assign_t *a)
{
	double dot =
	    ((double)n->cpu_free / MAX_SPEC_CPU) * ((double)req_cpu(r) / MAX_SPEC_CPU) +
	    ((double)gpu_left(n) / MAX_SPEC_GPU) * ((double)req_gpu_milli(r) / MAX_SPEC_GPU);
	return trunc_score(MAX_SCORE * (1.0 - dot / 2.0));
}

/* ---- gpuclustering --------------------------------------------------------- */

/* Bit 0: share pods; bit k: pods of k whole GPUs. */
static uint32_t gpu_tag(const sc_request_t *r)
{
	if (is_share(r))
		return 1;
	return r->gpus > 0 && r->gpus < 32 ? (uint32_t)1 << r->gpus : 0;
}

static double gpuclustering_score(void *ctx, const sc_cluster_t *c, const sc_node_view_t *n,
                                  const sc_request_t *r, sc_assign_t *a)
{
	pctx_t *p = ctx;
	uint32_t tag = gpu_tag(r);
	if (!tag)
		return 0;
	uint32_t have = p->tags[n->index];
	/* Integer arithmetic as in the reference: 0..25 for how full the
	 * node is, plus a class offset. */
	int64_t fill =
	    MAX_SCORE / 4 * ((int64_t)MAX_SPEC_GPU - gpu_left(n)) / (int64_t)MAX_SPEC_GPU;
	if (have & tag)
		return (double)(fill + (have == tag ? MAX_SCORE * 3 / 4 : MAX_SCORE * 2 / 4));
	return (double)(fill + (have == 0 ? MAX_SCORE / 4 : 0));
}

static void gpuclustering_taken(void *ctx, const sc_cluster_t *c, const sc_node_view_t *n,
                                const sc_request_t *r, const sc_assign_t *a)
{
	pctx_t *p = ctx;
	p->tags[n->index] |= gpu_tag(r);
}

/* ---- gpupacking ------------------------------------------------------------ */

static int fully_free(const sc_node_view_t *n)
{
	int k = 0;
	for (int d = 0; d < n->gpu_count; d++)
		k += n->gpu_free[d] == SC_GPU_MILLI;
	return k;
}

/* Prefer devices already shared (the fuller the better), then free devices
 * on a used node (the fewer the better), then empty nodes (smaller first). */
static double gpupacking_score(void *ctx, const sc_cluster_t *c, const sc_node_view_t *n,
                               const sc_request_t *r, sc_assign_t *a)
{
	if (req_gpu_milli(r) <= 0)
		return 0;
	int free_n = fully_free(n);
	if (free_n == n->gpu_count) {
		int s = MAX_SCORE / 3 - free_n;
		return s > free_n ? s : free_n;
	}
	int milli = r->gpus > 0 ? SC_GPU_MILLI : r->gpu_milli;
	int need = r->gpus > 0 ? r->gpus : 1;
	/* Walk devices from the least free up (stable), as the reference. */
	int order[SC_MAX_GPUS];
	for (int d = 0; d < n->gpu_count; d++) {
		int j = d;
		while (j > 0 && n->gpu_free[order[j - 1]] > n->gpu_free[d]) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = d;
	}
	int used_free = 0;
	int64_t ratio = 0;
	for (int k = 0; k < n->gpu_count && need > 0; k++) {
		int left = n->gpu_free[order[k]];
		if (left < milli)
			continue;
		need--;
		used_free += left == SC_GPU_MILLI;
		ratio += (int64_t)left * 100 / SC_GPU_MILLI;
	}
	if (need > 0)
		return -INFINITY;
	if (used_free > 0) {
		int s = MAX_SCORE / 2 - used_free;
		return s > MAX_SCORE / 3 ? s : MAX_SCORE / 3;
	}
	int64_t s = MAX_SCORE - ratio / 10;
	return (double)(s > MAX_SCORE / 2 ? s : MAX_SCORE / 2);
}

/* ---- bestfit -------------------------------------------------------------- */

static double bestfit_score(void *ctx, const sc_cluster_t *c, const sc_node_view_t *n,
                            const sc_request_t *r, sc_assign_t *a)
{
	double s = 0.5 * (double)(n->cpu_free - req_cpu(r)) / MAX_SPEC_CPU +
	           0.5 * (double)(gpu_left(n) - req_gpu_milli(r)) / MAX_SPEC_GPU;
	return trunc_score((1.0 - s) * MAX_SCORE);
}

/* ---- fgd ------------------------------------------------------------------ */

/* The reference maps the drop in fragmentation through a sigmoid onto
 * 0..100 and truncates; for a share it tries every device that fits and
 * keeps the first with the best score. */
typedef double (*device_score_fn)(pctx_t *p, const sc_node_view_t *n, const sc_request_t *r,
                                  int dev);

/* A share's score on n: the best of its devices that fit by score (the
 * first of equals), which goes into a; -INFINITY when none fits. */
static double best_share_device(pctx_t *p, const sc_node_view_t *n, const sc_request_t *r,
                                sc_assign_t *a, device_score_fn score)
{
	double best = -INFINITY;
	int dev = -1;
	for (int d = 0; d < n->gpu_count; d++) {
		if (n->gpu_free[d] < r->gpu_milli)
			continue;
		double s = score(p, n, r, d);
		if (dev < 0 || s > best) {
			best = s;
			dev = d;
		}
	}
	if (dev < 0)
		return -INFINITY;
	set_share(a, r, dev);
	return best;
}

/* FGD's points for r on n (device dev for a share). */
static double fgd_points(pctx_t *p, const sc_node_view_t *n, const sc_request_t *r, int dev)
{
	double old = sc_frag_node(p->frag, n->index);
	return trunc_score(sigmoid((old - frag_after(p->frag, n, r, dev)) / 1000) * MAX_SCORE);
}

static double fgd_score(void *ctx, const sc_cluster_t *c, const sc_node_view_t *n,
                        const sc_request_t *r, sc_assign_t *a)
{
	pctx_t *p = ctx;
	if (!is_share(r))
		return fgd_points(p, n, r, 0);
	return best_share_device(p, n, r, a, fgd_points);
}

/* ---- default (ours) --------------------------------------------------------- */

/* A CPU pod's tie-break among the nodes FGD finds equally good: least
 * free GPU first (on a node whose GPUs are all taken, no GPU pod can want
 * the CPU), then most CPU left (a node that still has free GPUs keeps more
 * of the CPU its GPU pods will need). One milli-GPU weighs as much as one
 * core (1,000 milli-CPU), so free GPU decides unless it differs by less
 * than 0.128 GPU (a 128-core node's CPU). The key stays far below one
 * point, so it only orders nodes with equal FGD points. */
static double cpu_pod_tiebreak(const sc_node_view_t *n)
{
	return -1e-6 * (double)gpu_left(n) + 1e-9 * (double)n->cpu_free;
}

/* Free GPU milli on a node that its CPU can still feed, at the typical GPU
 * pods' CPU per GPU milli. */
static double fed_gpu(const pctx_t *p, int64_t gpu, int64_t cpu)
{
	double fed = (double)cpu / p->cpu_per_milli;
	return fed < (double)gpu ? fed : (double)gpu;
}

/* The free GPU that r leaves on n without the CPU to use it, in whole
 * tenths of a GPU (rounded down): the fed GPU it takes beyond its own
 * milli. A pod that asks more CPU per milli than the typical GPU pod
 * strands GPU on a node whose CPU is the limit; one that asks less gives
 * some back (negative). Where CPU runs out first (cpu250) this is what
 * the cluster loses when it fills up, and neither FGD's measure nor the
 * lookahead sees it while every typical pod still fits the node. */
static double stranded_tenths(const pctx_t *p, const sc_node_view_t *n, const sc_request_t *r)
{
	int64_t g = gpu_left(n), milli = req_gpu_milli(r);
	double lost = fed_gpu(p, g, n->cpu_free) - fed_gpu(p, g - milli, n->cpu_free - req_cpu(r));
	return floor((lost - (double)milli) / 100);
}

/* A node's lookahead value for the state it was computed in: every pod
 * scores every node against its current value, and looking that up in
 * the memo (a large table, so a cache miss) was a third of the time. */
typedef struct look_now {
	int64_t cpu;
	int16_t gpu[SC_MAX_GPUS];
	double value;
	bool valid;
} look_now_t;

static double lookahead_now(pctx_t *p, const sc_node_view_t *n)
{
	look_now_t *c = n->index < p->nnodes ? &p->look[n->index] : NULL;
	if (c && c->valid && c->cpu == n->cpu_free &&
	    memcmp(c->gpu, n->gpu_free, sizeof(c->gpu)) == 0)
		return c->value;
	double v = sc_frag_lookahead(p->frag, n->model, n->cpu_free, n->gpu_free, n->gpu_count);
	if (c) {
		c->cpu = n->cpu_free;
		memcpy(c->gpu, n->gpu_free, sizeof(c->gpu));
		c->value = v;
		c->valid = true;
	}
	return v;
}

/* Lookahead points for placing r on n (a share on device dev, or whole
 * devices): the drop in sc_frag_lookahead's value through FGD's sigmoid,
 * scale 3000 (FGD: 1000; the value sums about three fragmentation terms'
 * worth of change), truncated to whole points 0..100. */
static double lookahead_points(pctx_t *p, const sc_node_view_t *n, const sc_request_t *r, int dev)
{
	int16_t left[SC_MAX_GPUS];
	devices_after(n, r, dev, left);
	double old = lookahead_now(p, n);
	double after =
	    sc_frag_lookahead(p->frag, n->model, n->cpu_free - req_cpu(r), left, n->gpu_count);
	return trunc_score(sigmoid((old - after) / 3000) * MAX_SCORE);
}

/* How fast sc_gap_waste assumes gaps get filled. Chosen by measurement on
 * seeds 42..51 (35, 50 and 70 are in docs/SIMULATOR.md); at 50 a gap that
 * only the 160-milli pods of OpenB fit (0.9 % of pods) is filled with
 * probability 0.36, one that 220s and 230s fit too with 0.8. */
#define GAP_FILL_RATE 50.0

/* The change in expected unused milli when a share of `milli` goes into a
 * device with `g` free, in whole milli. A fresh device is valued as a gap
 * that shares fill (sc_gap_waste), so opening one costs what its remainder
 * is expected to waste beyond a fresh device's own. */
static double share_cost(const pctx_t *p, int g, int milli)
{
	return floor(p->gap_waste[g - milli] - p->gap_waste[g]);
}

/* A share on device dev: least expected waste first, counting what
 * opening an untouched device costs once they get scarce
 * (sc_scarce_fresh_cost); lookahead points (0..100) order equal costs.
 * default_score adds the node's stranding between the two (it is the same
 * for every device of the node). */
static double share_points(pctx_t *p, const sc_node_view_t *n, const sc_request_t *r, int dev)
{
	double fresh = n->gpu_free[dev] == SC_GPU_MILLI ? sc_scarce_fresh_cost(p->scarce) : 0;
	return -(share_cost(p, n->gpu_free[dev], r->gpu_milli) + fresh) * 1e6 +
	       lookahead_points(p, n, r, dev);
}

/* A node with two or more GPUs that nothing has touched yet, CPU
 * included: the only kind an 8-GPU pod can use. */
static bool untouched(const sc_node_view_t *n)
{
	return n->gpu_count >= 2 && n->whole_free == n->gpu_count &&
	       n->cpu_free == n->spec->cpu_milli;
}

/* The restricted-shape level of placing r on n (a share on device dev):
 * whole steps, at most 800 so that level x 1e13 plus the keys below it
 * stays an exact double. */
static double scarce_level(pctx_t *p, const sc_node_view_t *n, const sc_request_t *r, int dev)
{
	int16_t left[SC_MAX_GPUS];
	devices_after(n, r, dev, left);
	int level = sc_scarce_level(p->scarce, n, left, n->cpu_free - req_cpu(r));
	return level < 800 ? level : 800;
}

/* FGD, with these changes (docs/SIMULATOR.md has the measurements):
 * - first, every GPU pod avoids taking room that pods with few places to
 *   go need (sc_scarce_level: restricted shapes, such as a gpu_spec of one
 *   model or eight GPUs with 120 cores), in whole levels.
 * - a share pod goes to the device where it adds the least expected waste
 *   (share_cost): into the gap its size leaves least behind in, or onto a
 *   fresh device when every gap it fits would be left with a remainder
 *   only rare pods fit (a 320 opens a device, where a 650 will join it,
 *   rather than leave 210 next to a 470). Near saturation opening a fresh
 *   device costs more (sc_scarce_fresh_cost): whole-GPU pods need it.
 *   Equal costs go to the device with the least stranded GPU (below), then
 *   the most lookahead points, then to the earlier node in the run's node
 *   order, so shares still gather on few nodes.
 * - whole-GPU pods are placed by one step of lookahead: a node state is
 *   valued by its fragmentation now plus the expected fragmentation once
 *   the next typical pod has landed on it (a whole-GPU pod taking devices
 *   and CPU, or a CPU pod taking CPU), which FGD's one-step measure sees
 *   only for the current state. 1-GPU pods break equal lookahead points by
 *   FGD's points, then node order; 2-, 4- and 8-GPU pods by node order.
 * - every GPU pod then avoids stranding GPU (stranded_tenths): a node
 *   where its CPU leaves less free GPU without CPU to feed it comes first,
 *   before the lookahead (for shares: after the expected waste); a 1-GPU
 *   pod next avoids nodes nothing has touched (an 8-GPU pod's only place).
 * - a CPU pod takes FGD's points; among equal points, nodes with a GPU in
 *   use come before nodes whose GPUs are all free, then cpu_pod_tiebreak,
 *   then node order. */
static double default_score(void *ctx, const sc_cluster_t *c, const sc_node_view_t *n,
                            const sc_request_t *r, sc_assign_t *a)
{
	pctx_t *p = ctx;
	if (r->gpus == 0 && r->gpu_milli == 0) {
		/* cpu_pod_tiebreak is within +-0.01: below the half point. */
		bool idle = n->gpu_count >= 1 && n->whole_free == n->gpu_count;
		return fgd_score(ctx, c, n, r, a) - (idle ? 0.5 : 0) + cpu_pod_tiebreak(n);
	}
	/* Keys from the most significant: the restricted-shape level (x 1e13,
	 * at most 800), then for shares the expected waste (x 1e9), stranding
	 * in tenths (under 1,000), the lookahead points (0..100) and FGD's
	 * points. Every key is a whole number and the sum stays below 2^53,
	 * so it is exact whatever the order of adding. */
	if (r->gpus == 1)
		return -scarce_level(p, n, r, 0) * 1e13 - stranded_tenths(p, n, r) * 1e9 -
		       (untouched(n) ? 1e8 : 0) + lookahead_points(p, n, r, 0) * 1000 +
		       fgd_score(ctx, c, n, r, a);
	if (!is_share(r))
		return -scarce_level(p, n, r, 0) * 1e13 - stranded_tenths(p, n, r) * 1e6 +
		       lookahead_points(p, n, r, 0);
	double s = best_share_device(p, n, r, a, share_points);
	if (s == -INFINITY)
		return s;
	/* s = -cost x 1e6 + lookahead points (0..100): the cost moves up to
	 * x 1e9 so that stranding fits between the two. */
	double look = fmod(s, 1e6);
	if (look < 0)
		look += 1e6;
	double cost = (s - look) / 1e6;
	return -scarce_level(p, n, r, a->gpus[0]) * 1e13 + cost * 1e9 -
	       stranded_tenths(p, n, r) * 1e6 + look;
}

static void default_taken(void *ctx, const sc_cluster_t *c, const sc_node_view_t *n,
                          const sc_request_t *r, const sc_assign_t *a)
{
	pctx_t *p = ctx;
	sc_scarce_update(p->scarce, n);
}

static int default_init(pctx_t *p)
{
	if (!p->cluster)
		return SC_EINVAL;
	p->gap_waste = malloc((SC_GPU_MILLI + 1) * sizeof(double));
	p->look = calloc(p->nnodes ? p->nnodes : 1, sizeof(*p->look));
	if (!p->gap_waste || !p->look)
		return SC_ENOMEM;
	size_t nt;
	const sc_typical_t *t = sc_frag_typical(p->frag, &nt);
	sc_gap_waste(t, nt, GAP_FILL_RATE, p->gap_waste);
	/* CPU per GPU milli over the typical GPU pods, weighted by frequency
	 * (OpenB: about 11 cores per GPU). */
	double cpu = 0, milli = 0;
	for (size_t k = 0; k < nt; k++)
		if (t[k].shape.milli > 0) {
			cpu += t[k].p * (double)t[k].shape.cpu;
			milli += t[k].p * (double)t[k].shape.milli * t[k].shape.num;
		}
	p->cpu_per_milli = milli > 0 ? cpu / milli : 1;
	p->scarce = sc_scarce_new(p->shapes, p->nshapes, t, nt, p->cluster);
	return p->scarce ? 0 : SC_ENOMEM;
}

/* ---- table ----------------------------------------------------------------- */

typedef struct entry {
	const char *name;
	double (*score)(void *, const sc_cluster_t *, const sc_node_view_t *, const sc_request_t *,
	                sc_assign_t *);
	void (*taken)(void *, const sc_cluster_t *, const sc_node_view_t *, const sc_request_t *,
	              const sc_assign_t *);
	bool needs_frag;
	int (*init)(pctx_t *); /* optional: per-run tables */
} entry_t;

static const entry_t entries[] = {
    {"random", random_score, NULL, false, NULL},
    {"dotprod", dotprod_score, NULL, false, NULL},
    {"gpuclustering", gpuclustering_score, gpuclustering_taken, false, NULL},
    {"gpupacking", gpupacking_score, NULL, false, NULL},
    {"bestfit", bestfit_score, NULL, false, NULL},
    {"fgd", fgd_score, NULL, true, NULL},
    {"default", default_score, default_taken, true, default_init},
};

static const entry_t *find_entry(const char *name)
{
	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
		if (strcmp(entries[i].name, name) == 0)
			return &entries[i];
	return NULL;
}

bool sc_sim_policy_known(const char *name)
{
	return find_entry(name) != NULL;
}

int sc_sim_policy_new(const char *name, const sc_sim_env_t *env, sc_policy_t **out)
{
	*out = NULL;
	const entry_t *e = find_entry(name);
	if (!e || (e->needs_frag && !env->frag))
		return SC_EINVAL;
	pctx_t *p = calloc(1, sizeof(*p));
	if (!p)
		return SC_ENOMEM;
	int rc = SC_ENOMEM;
	p->nnodes = env->cluster ? sc_cluster_nnodes(env->cluster) : 0;
	p->tags = calloc(p->nnodes ? p->nnodes : 1, sizeof(uint32_t));
	if (!p->tags)
		goto fail;
	p->frag = env->frag;
	p->cluster = env->cluster;
	p->shapes = env->shapes;
	p->nshapes = env->shapes ? env->nshapes : 0;
	if (e->init && (rc = e->init(p)) < 0)
		goto fail;
	p->shapes = NULL; /* borrowed for init only */
	/* Stream 2: independent of the shuffle and inflation streams. */
	sc_rng_seed(&p->rng, env->seed, 2);
	p->pol.name = e->name;
	p->pol.score = e->score;
	p->pol.taken = e->taken;
	p->pol.device_policy = SC_DEV_PACK;
	p->pol.ctx = p;
	*out = &p->pol;
	return 0;
fail:
	sc_sim_policy_free(&p->pol);
	return rc;
}

void sc_sim_policy_free(sc_policy_t *pol)
{
	if (!pol)
		return;
	pctx_t *p = (pctx_t *)pol;
	free(p->tags);
	free(p->gap_waste);
	free(p->look);
	sc_scarce_free(p->scarce);
	free(p);
}
