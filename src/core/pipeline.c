/* Releasing resources and pipelining (KAI's Releasing pods,
 * allocateTaskToNode -> pipelineTaskToNode).
 *
 * A pod that is being released (Releasing in the snapshot, or evicted in
 * this cycle) still holds its resources: nothing may be bound onto them,
 * so they stay taken in the cluster model. They also go into a per-node
 * releasing pool. A pod that fits nowhere on idle resources may be
 * pipelined: placed where idle plus releasing resources fit it; it takes
 * the idle part first and the rest from the pool, and its binding is
 * marked pipelined (it starts once the release completes). The pool is
 * small (the nodes where something is leaving), so a pipelined search
 * visits only those nodes, through a bitset. */
#include <stdlib.h>
#include <string.h>

#include "core/cluster_int.h"

static bool node_has_rel_gpu(const sc_node_view_t *n)
{
	for (int d = 0; d < n->gpu_count; d++)
		if (n->gpu_rel[d] > 0 || n->mig_rel[d])
			return true;
	return false;
}

/* Keeps the node's bits in both sets (and the count) up to date. */
static void mark(sc_cluster_t *c, const sc_node_view_t *n)
{
	uint64_t bit = (uint64_t)1 << (n->index & 63);
	size_t w = n->index >> 6;
	bool gpu = node_has_rel_gpu(n);
	bool any = gpu || n->cpu_rel > 0 || n->mem_rel > 0;
	bool was = (c->relbits[w] & bit) != 0;
	if (any != was)
		c->nrel = any ? c->nrel + 1 : c->nrel - 1;
	c->relbits[w] = any ? c->relbits[w] | bit : c->relbits[w] & ~bit;
	c->relbits_gpu[w] = gpu ? c->relbits_gpu[w] | bit : c->relbits_gpu[w] & ~bit;
	sc__pipe_note(c, n->index);
}

static uint8_t span(const sc_assign_t *a)
{
	return (uint8_t)(((1u << a->mig_slices) - 1) << a->mig_start);
}

static int64_t rel_gpu(const sc_node_view_t *n)
{
	int64_t g = 0;
	if (n->schedulable && n->spec->mig_mode == SC_MIG_NONE)
		for (int d = 0; d < n->gpu_count; d++)
			g += n->gpu_rel[d];
	return g;
}

/* Adds (sign 1) or removes (-1) a placed pod's resources to the pool. */
static void pool(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a, int sign)
{
	if (a->node >= c->nnodes)
		return;
	sc_node_view_t *n = &c->nodes[a->node];
	c->rel_gpu_milli -= rel_gpu(n);
	n->cpu_rel += sign * r->cpu_milli;
	n->mem_rel += sign * r->memory;
	if (a->mig_slices > 0) {
		if (sign > 0)
			n->mig_rel[a->gpus[0]] |= span(a);
		else
			n->mig_rel[a->gpus[0]] &= (uint8_t)~span(a);
	} else {
		for (int k = 0; k < a->ngpus; k++) {
			int d = a->gpus[k];
			if (d < 0 || d >= n->gpu_count)
				continue;
			if (a->gpu_milli > 0) {
				n->gpu_rel[d] = (int16_t)(n->gpu_rel[d] + sign * a->gpu_milli);
				n->gpu_mem_rel[d] += sign * a->gpu_memory;
				n->shared_rel[d] = (uint8_t)(n->shared_rel[d] + sign);
			} else {
				n->gpu_rel[d] = (int16_t)(n->gpu_rel[d] + sign * SC_GPU_MILLI);
				n->gpu_mem_rel[d] += sign * n->spec->gpu_memory;
			}
		}
	}
	c->rel_gpu_milli += rel_gpu(n);
	mark(c, n);
}

void sc__cluster_release(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a)
{
	pool(c, r, a, +1);
}

void sc__cluster_unrelease(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a)
{
	pool(c, r, a, -1);
}

void sc__cluster_mark_waiting(sc_cluster_t *c, const sc_assign_t *a)
{
	if (a->node >= c->nnodes)
		return;
	sc_node_view_t *n = &c->nodes[a->node];
	for (int k = 0; k < a->ngpus; k++)
		if (a->gpus[k] >= 0 && a->gpus[k] < n->gpu_count && n->gpu_wait[a->gpus[k]] < 255)
			n->gpu_wait[a->gpus[k]]++;
}

bool sc__cluster_has_releasing(const sc_cluster_t *c)
{
	return c->nrel > 0;
}

int64_t sc__cluster_releasing_gpu(const sc_cluster_t *c)
{
	return c->rel_gpu_milli;
}

/* A snapshot can hold a node over-committed across devices: a pod waiting
 * for releasing resources (Pipelined, or a Kubernetes nomination) counted
 * on one device while the pod it waits for is releasing another, where the
 * device numbers are only an accounting choice (Kubernetes does not show
 * them). The forced take recorded how much was held beyond the devices; the
 * node's GPUs being released pay that back first: otherwise a second pod
 * would be pipelined onto a GPU that a first one already waits for. */
void sc__cluster_settle_releasing(sc_cluster_t *c)
{
	for (uint32_t i = sc__bit_next(c->relbits_gpu, c->nwords, 0); i != UINT32_MAX;
	     i = sc__bit_next(c->relbits_gpu, c->nwords, i + 1)) {
		sc_node_view_t *n = &c->nodes[i];
		if (n->spec->mig_mode != SC_MIG_NONE)
			continue;
		int64_t debt = c->gpu_debt[i];
		if (debt <= 0)
			continue;
		sc__index_del(c, i);
		c->rel_gpu_milli -= rel_gpu(n);
		/* A device holding a pod and a releasing one (a pod pipelined
		 * there, written by the server with the device it waits for)
		 * pays its own debt first: paid from another releasing device,
		 * it looked releasable and a second pod was pipelined onto the
		 * GPU the first one holds (the soak of issue 23: a serving
		 * replica and a flood job on one GPU). */
		for (int d = 0; d < n->gpu_count && debt > 0; d++) {
			int32_t *dd = &c->dev_debt[(size_t)i * SC_MAX_GPUS + (size_t)d];
			int64_t take = *dd < n->gpu_rel[d] ? *dd : n->gpu_rel[d];
			if (take > debt)
				take = debt;
			if (take <= 0)
				continue;
			n->gpu_rel[d] = (int16_t)(n->gpu_rel[d] - take);
			if (n->gpu_rel[d] == 0)
				n->gpu_mem_rel[d] = 0;
			*dd -= (int32_t)take;
			debt -= take;
		}
		/* Then whole releasing devices, then shares (the devices of a
		 * Kubernetes nomination are only an accounting choice). */
		for (int pass = 0; pass < 2 && debt > 0; pass++)
			for (int d = 0; d < n->gpu_count && debt > 0; d++) {
				bool whole = n->gpu_rel[d] == SC_GPU_MILLI && !n->shared_rel[d];
				if (n->gpu_rel[d] <= 0 || n->gpu_free[d] < 0 ||
				    whole != (pass == 0))
					continue;
				int64_t take = n->gpu_rel[d] < debt ? n->gpu_rel[d] : debt;
				n->gpu_rel[d] = (int16_t)(n->gpu_rel[d] - take);
				if (whole || n->gpu_rel[d] == 0)
					n->gpu_mem_rel[d] = 0;
				debt -= take;
			}
		c->rel_gpu_milli += rel_gpu(n);
		sc__index_add(c, i);
		mark(c, n);
	}
}

/* ---- fitting and devices ------------------------------------------- */

/* What a node will have once its releasing pods are gone. Free is negative
 * on an over-committed node (a pod waiting for a releasing one already
 * holds its place): the releasing part then only pays back that debt. */
static int64_t idle_or_rel(int64_t free, int64_t rel)
{
	return free + rel > 0 ? free + rel : 0;
}

/* A device a whole-GPU pod may take: idle, or held only by pods being
 * released. */
static bool whole_ok(const sc_node_view_t *n, int d, bool idle_only)
{
	if (n->gpu_free[d] == SC_GPU_MILLI)
		return true;
	return !idle_only && n->gpu_free[d] + n->gpu_rel[d] == SC_GPU_MILLI &&
	       n->gpu_shared[d] == n->shared_rel[d];
}

/* The device for a share of s milli and mem bytes: one where it fits
 * without the pool first (by the device policy), else one where it fits
 * with it. */
static int share_dev(const sc_node_view_t *n, int s, int64_t mem, int policy)
{
	int best = -1, best_avail = 0;
	for (int pass = 0; pass < 2 && best < 0; pass++)
		for (int d = 0; d < n->gpu_count; d++) {
			int avail = n->gpu_free[d] + (pass ? n->gpu_rel[d] : 0);
			int64_t mavail = n->gpu_mem_free[d] + (pass ? n->gpu_mem_rel[d] : 0);
			if (avail < s || mavail < mem)
				continue;
			if (best < 0 ||
			    (policy == SC_DEV_SPREAD ? avail > best_avail : avail < best_avail)) {
				best = d;
				best_avail = avail;
			}
		}
	return best;
}

/* The node as it will be once its releasing pods are gone, for MIG. */
static void mig_view(const sc_node_view_t *n, sc_node_view_t *v)
{
	*v = *n;
	for (int d = 0; d < n->gpu_count; d++)
		v->mig_used[d] = (uint8_t)(n->mig_used[d] & ~n->mig_rel[d]);
	v->cpu_free = idle_or_rel(n->cpu_free, n->cpu_rel);
	v->mem_free = idle_or_rel(n->mem_free, n->mem_rel);
}

static bool pipe_fits(const sc_node_view_t *n, const sc_request_t *r)
{
	if (!n->schedulable || idle_or_rel(n->cpu_free, n->cpu_rel) < r->cpu_milli ||
	    idle_or_rel(n->mem_free, n->mem_rel) < r->memory)
		return false;
	if (r->mig) {
		sc_node_view_t v;
		mig_view(n, &v);
		int d, st;
		return sc__mig_choose(&v, r->mig, &d, &st) == 0;
	}
	if (r->gpus > 0) {
		int k = 0;
		for (int d = 0; d < n->gpu_count; d++)
			k += whole_ok(n, d, false);
		return n->spec->mig_mode == SC_MIG_NONE && k >= r->gpus;
	}
	if (sc__is_share(r)) {
		int s = sc_request_share_milli(r, n);
		return n->spec->mig_mode == SC_MIG_NONE && s <= SC_GPU_MILLI &&
		       share_dev(n, s, r->gpu_memory, SC_DEV_PACK) >= 0;
	}
	return true;
}

int sc__node_choose_pipe(const sc_node_view_t *n, const sc_request_t *r, int policy, sc_assign_t *a)
{
	memset(a, 0, sizeof(*a));
	a->node = n->index;
	if (!pipe_fits(n, r))
		return SC_ENOFIT;
	if (r->mig) {
		sc_node_view_t v;
		mig_view(n, &v);
		const sc_mig_profile_t *p = sc_mig_profile(r->mig, n->spec->gpu_memory);
		int d, st;
		if (!p || sc__mig_choose(&v, r->mig, &d, &st) < 0)
			return SC_ENOFIT;
		a->gpus[0] = d;
		a->ngpus = 1;
		a->mig_start = st;
		a->mig_slices = p->size;
		return 0;
	}
	if (r->gpus > 0) {
		/* Idle devices first: the fewer the pool gives, the sooner the
		 * pod can start. */
		for (int pass = 0; pass < 2; pass++)
			for (int d = 0; d < n->gpu_count && a->ngpus < r->gpus; d++)
				if (whole_ok(n, d, pass == 0) &&
				    (pass == 0 || n->gpu_free[d] != SC_GPU_MILLI))
					a->gpus[a->ngpus++] = d;
		/* Listed in device order, as bindings always are. */
		for (int i = 1; i < a->ngpus; i++)
			for (int k = i; k > 0 && a->gpus[k - 1] > a->gpus[k]; k--) {
				int t = a->gpus[k];
				a->gpus[k] = a->gpus[k - 1];
				a->gpus[k - 1] = t;
			}
		return a->ngpus == r->gpus ? 0 : SC_ENOFIT;
	}
	if (sc__is_share(r)) {
		int s = sc_request_share_milli(r, n);
		int d = share_dev(n, s, r->gpu_memory, policy);
		if (d < 0)
			return SC_ENOFIT;
		a->gpus[0] = d;
		a->ngpus = 1;
		a->gpu_milli = s;
		a->gpu_memory = r->gpu_memory;
	}
	return 0;
}

/* What the node has for the request, idle plus releasing: the binpack
 * and spread score of a pipelined placement. */
static int64_t room(const sc_node_view_t *n, const sc_request_t *r)
{
	if (r->gpus == 0 && !sc__is_share(r) && !r->mig)
		return idle_or_rel(n->cpu_free, n->cpu_rel);
	int64_t g = 0;
	for (int d = 0; d < n->gpu_count; d++)
		g += n->gpu_free[d] + n->gpu_rel[d];
	return g;
}

/* The best node of one bitset for a pipelined pod, or UINT32_MAX. */
static uint32_t best_in(const sc_cluster_t *c, const uint64_t *bits, const sc_request_t *r,
                        const sc_filter_t *f, bool spread)
{
	uint32_t best = UINT32_MAX;
	int64_t best_room = 0;
	for (uint32_t i = sc__bit_next(bits, c->nwords, 0); i != UINT32_MAX;
	     i = sc__bit_next(bits, c->nwords, i + 1)) {
		const sc_node_view_t *n = &c->nodes[i];
		if (!pipe_fits(n, r) || !sc__filter_pass(f, n))
			continue;
		int64_t rm = room(n, r);
		if (best == UINT32_MAX || (spread ? rm > best_room : rm < best_room)) {
			best = i;
			best_room = rm;
		}
	}
	return best;
}

int sc__cluster_best_pipe(const sc_cluster_t *c, const sc_request_t *r, const sc_filter_t *f,
                          bool spread, int device_policy, sc_assign_t *a)
{
	/* A GPU pod usually waits for a GPU: the nodes releasing one are
	 * searched first; then those releasing only CPU or memory where a GPU
	 * is idle. */
	bool gpu = r->gpus > 0 || r->mig || sc__is_share(r);
	uint32_t best = best_in(c, gpu ? c->relbits_gpu : c->relbits, r, f, spread);
	if (best == UINT32_MAX && gpu)
		best = best_in(c, c->relbits_idle, r, f, spread);
	if (best == UINT32_MAX)
		return SC_ENOFIT;
	return sc__node_choose_pipe(&c->nodes[best], r, device_policy, a);
}

int sc__cluster_shared_pipe(const sc_cluster_t *c, const sc_request_t *r, const sc_filter_t *f,
                            sc_assign_t *a)
{
	uint32_t best = UINT32_MAX;
	int best_dev = -1, best_room = 0;
	for (uint32_t i = sc__bit_next(c->relbits_gpu, c->nwords, 0); i != UINT32_MAX;
	     i = sc__bit_next(c->relbits_gpu, c->nwords, i + 1)) {
		const sc_node_view_t *n = &c->nodes[i];
		if (!n->schedulable || n->spec->mig_mode != SC_MIG_NONE ||
		    idle_or_rel(n->cpu_free, n->cpu_rel) < r->cpu_milli ||
		    idle_or_rel(n->mem_free, n->mem_rel) < r->memory || !sc__filter_pass(f, n))
			continue;
		int sh = sc_request_share_milli(r, n);
		for (int d = 0; d < n->gpu_count; d++) {
			int room = n->gpu_free[d] + n->gpu_rel[d];
			if (!n->gpu_shared[d] || !n->gpu_rel[d] || room < sh ||
			    n->gpu_mem_free[d] + n->gpu_mem_rel[d] < r->gpu_memory)
				continue;
			if (best == UINT32_MAX || room < best_room) {
				best = i;
				best_dev = d;
				best_room = room;
			}
		}
	}
	if (best == UINT32_MAX)
		return SC_ENOFIT;
	memset(a, 0, sizeof(*a));
	a->node = best;
	a->gpus[0] = best_dev;
	a->ngpus = 1;
	a->gpu_milli = sc_request_share_milli(r, &c->nodes[best]);
	a->gpu_memory = r->gpu_memory;
	return 0;
}

/* ---- take and give --------------------------------------------------- */

/* Whether assignment a fits the node's idle plus releasing resources. */
static bool assign_ok(const sc_node_view_t *n, const sc_request_t *r, const sc_assign_t *a)
{
	if (!n->schedulable || idle_or_rel(n->cpu_free, n->cpu_rel) < r->cpu_milli ||
	    idle_or_rel(n->mem_free, n->mem_rel) < r->memory)
		return false;
	if (a->mig_slices > 0) {
		int d = a->gpus[0];
		if (d < 0 || d >= n->gpu_count || a->mig_start < 0 ||
		    a->mig_start + a->mig_slices > 8)
			return false;
		return !((n->mig_used[d] & ~n->mig_rel[d]) & span(a));
	}
	for (int k = 0; k < a->ngpus; k++) {
		int d = a->gpus[k];
		if (d < 0 || d >= n->gpu_count)
			return false;
		if (a->gpu_milli > 0) {
			if (n->gpu_free[d] + n->gpu_rel[d] < a->gpu_milli ||
			    n->gpu_mem_free[d] + n->gpu_mem_rel[d] < a->gpu_memory)
				return false;
		} else if (!whole_ok(n, d, false)) {
			return false;
		}
	}
	return true;
}

/* Takes `need` from a free amount first and the rest from the pool;
 * returns what came from the pool. */
static int64_t split(int64_t *free, int64_t *rel, int64_t need)
{
	int64_t from_free = *free > 0 ? (*free < need ? *free : need) : 0;
	int64_t rest = need - from_free;
	*free -= from_free;
	*rel -= rest;
	return rest;
}

bool sc__pipe_any(const sc_pipe_t *u)
{
	if (u->cpu > 0 || u->mem > 0 || u->mig)
		return true;
	for (int k = 0; k < SC_MAX_GPUS; k++)
		if (u->gpu[k] > 0 || u->gpu_mem[k] > 0)
			return true;
	return false;
}

int sc__cluster_take_pipe(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a,
                          sc_pipe_t *used)
{
	if (a->node >= c->nnodes)
		return SC_EINVAL;
	sc_node_view_t *n = &c->nodes[a->node];
	if (!assign_ok(n, r, a))
		return SC_ENOFIT;
	memset(used, 0, sizeof(*used));
	sc__index_del(c, a->node);
	c->rel_gpu_milli -= rel_gpu(n);
	used->cpu = split(&n->cpu_free, &n->cpu_rel, r->cpu_milli);
	used->mem = split(&n->mem_free, &n->mem_rel, r->memory);
	if (a->mig_slices > 0) {
		int d = a->gpus[0];
		used->mig = (uint8_t)(span(a) & n->mig_rel[d]);
		n->mig_rel[d] &= (uint8_t)~span(a);
		n->mig_used[d] |= span(a);
		c->mig_used_milli += sc__mig_milli(sc_mig_profile(r->mig, n->spec->gpu_memory));
	}
	for (int k = 0; a->mig_slices == 0 && k < a->ngpus; k++) {
		int d = a->gpus[k];
		if (a->gpu_milli > 0) {
			int64_t f = n->gpu_free[d], rl = n->gpu_rel[d];
			used->gpu[k] = (int16_t)split(&f, &rl, a->gpu_milli);
			n->gpu_free[d] = (int16_t)f;
			n->gpu_rel[d] = (int16_t)rl;
			used->gpu_mem[k] =
			    split(&n->gpu_mem_free[d], &n->gpu_mem_rel[d], a->gpu_memory);
			n->gpu_shared[d]++;
		} else {
			used->gpu[k] = n->gpu_rel[d];
			used->gpu_mem[k] = n->gpu_mem_rel[d];
			n->gpu_free[d] = 0;
			n->gpu_rel[d] = 0;
			n->gpu_mem_free[d] = 0;
			n->gpu_mem_rel[d] = 0;
		}
	}
	sc__recount_whole(n);
	c->rel_gpu_milli += rel_gpu(n);
	sc__index_add(c, a->node);
	mark(c, n);
	return 0;
}

void sc__cluster_give_pipe(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a,
                           const sc_pipe_t *used)
{
	if (a->node >= c->nnodes)
		return;
	sc_node_view_t *n = &c->nodes[a->node];
	sc__index_del(c, a->node);
	c->rel_gpu_milli -= rel_gpu(n);
	n->cpu_free += r->cpu_milli - used->cpu;
	n->cpu_rel += used->cpu;
	n->mem_free += r->memory - used->mem;
	n->mem_rel += used->mem;
	if (a->mig_slices > 0) {
		int d = a->gpus[0];
		n->mig_rel[d] |= used->mig;
		n->mig_used[d] &= (uint8_t) ~(span(a) & ~used->mig);
		c->mig_used_milli -= sc__mig_milli(sc_mig_profile(r->mig, n->spec->gpu_memory));
	}
	for (int k = 0; a->mig_slices == 0 && k < a->ngpus; k++) {
		int d = a->gpus[k];
		if (a->gpu_milli > 0) {
			n->gpu_free[d] = (int16_t)(n->gpu_free[d] + a->gpu_milli - used->gpu[k]);
			n->gpu_rel[d] = (int16_t)(n->gpu_rel[d] + used->gpu[k]);
			n->gpu_mem_free[d] += a->gpu_memory - used->gpu_mem[k];
			n->gpu_mem_rel[d] += used->gpu_mem[k];
			if (n->gpu_shared[d])
				n->gpu_shared[d]--;
		} else {
			n->gpu_rel[d] = used->gpu[k];
			n->gpu_free[d] = (int16_t)(SC_GPU_MILLI - used->gpu[k]);
			n->gpu_mem_rel[d] = used->gpu_mem[k];
			n->gpu_mem_free[d] = n->spec->gpu_memory - used->gpu_mem[k];
		}
	}
	sc__recount_whole(n);
	c->rel_gpu_milli += rel_gpu(n);
	sc__index_add(c, a->node);
	mark(c, n);
}
