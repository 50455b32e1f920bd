/* Cluster model and placement index.
 *
 * Every node lives in two buckets of its GPU-model group: one by the number
 * of whole devices free (0..SC_MAX_GPUS) and one by the largest free share
 * of a device that already holds shares (quantised to PARTIAL_BUCKETS, with
 * bucket 0 for "no partly used device"). Buckets are bitsets over node
 * indices, so finding the lowest-index node of a bucket is a scan of a few
 * words, moving a node is two bit flips, and ties between equal nodes always
 * go to the lower index, which keeps results deterministic and readable. */
#include "core/cluster_int.h"
#include "base/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int partial_bucket(int free_milli)
{
	if (free_milli <= 0 || free_milli >= SC_GPU_MILLI)
		return 0;
	/* 1..999 -> 1..PARTIAL_BUCKETS */
	return 1 + (free_milli - 1) * PARTIAL_BUCKETS / (SC_GPU_MILLI - 1);
}

static inline void bit_set(uint64_t *b, uint32_t i)
{
	b[i >> 6] |= (uint64_t)1 << (i & 63);
}

static inline void bit_clr(uint64_t *b, uint32_t i)
{
	b[i >> 6] &= ~((uint64_t)1 << (i & 63));
}

/* Lowest set bit at or after `from`, or UINT32_MAX. */
uint32_t sc__bit_next(const uint64_t *b, size_t nwords, uint32_t from)
{
	size_t w = from >> 6;
	if (w >= nwords)
		return UINT32_MAX;
	uint64_t word = b[w] & (~(uint64_t)0 << (from & 63));
	for (;;) {
		if (word)
			return (uint32_t)(w * 64 + (size_t)__builtin_ctzll(word));
		if (++w >= nwords)
			return UINT32_MAX;
		word = b[w];
	}
}

static void node_keys(const sc_node_view_t *n, int *whole, int *partial)
{
	int best = 0;
	for (int d = 0; d < n->gpu_count; d++)
		if (n->gpu_free[d] < SC_GPU_MILLI && n->gpu_free[d] > best)
			best = n->gpu_free[d];
	*whole = n->whole_free;
	*partial = partial_bucket(best);
}

static void account(sc_cluster_t *c, const sc_node_view_t *n, int sign);
static void capacity(sc_cluster_t *c, const sc_node_view_t *n, int sign);

/* ---- releasing resources (the bitsets pipeline.c keeps) ---------------- */

static int pipe_init(sc_cluster_t *c)
{
	c->relbits = sc_calloc(c->nwords ? c->nwords : 1, sizeof(uint64_t));
	c->relbits_gpu = sc_calloc(c->nwords ? c->nwords : 1, sizeof(uint64_t));
	c->relbits_idle = sc_calloc(c->nwords ? c->nwords : 1, sizeof(uint64_t));
	return c->relbits && c->relbits_gpu && c->relbits_idle ? 0 : SC_ENOMEM;
}

static bool has_idle_gpu(const sc_node_view_t *n)
{
	if (n->spec->mig_mode != SC_MIG_NONE)
		return n->gpu_count > 0; /* idle slices: pipe_fits decides */
	for (int d = 0; d < n->gpu_count; d++)
		if (n->gpu_free[d] > 0)
			return true;
	return false;
}

void sc__pipe_note(sc_cluster_t *c, uint32_t i)
{
	if (!c->relbits_idle)
		return; /* still being built */
	uint64_t bit = (uint64_t)1 << (i & 63);
	size_t w = i >> 6;
	bool on = (c->relbits[w] & bit) && !(c->relbits_gpu[w] & bit) && has_idle_gpu(&c->nodes[i]);
	c->relbits_idle[w] = on ? c->relbits_idle[w] | bit : c->relbits_idle[w] & ~bit;
}

/* Every change to a node is bracketed by index_del and index_add, which
 * also keep the usage and capacity sums. */
void sc__index_add(sc_cluster_t *c, uint32_t i)
{
	const sc_node_view_t *n = &c->nodes[i];
	account(c, n, +1);
	capacity(c, n, +1);
	sc__pipe_note(c, i);
	if (!n->schedulable)
		return;
	group_t *g = &c->groups[n->model + 1];
	int w, p;
	node_keys(n, &w, &p);
	bit_set(g->whole[w], i);
	g->nwhole[w]++;
	bit_set(g->partial[p], i);
	g->npartial[p]++;
	c->key_whole[i] = (int8_t)w;
	c->key_partial[i] = (int8_t)p;
}

void sc__index_del(sc_cluster_t *c, uint32_t i)
{
	const sc_node_view_t *n = &c->nodes[i];
	account(c, n, -1);
	capacity(c, n, -1);
	if (!n->schedulable)
		return;
	group_t *g = &c->groups[n->model + 1];
	int w = c->key_whole[i], p = c->key_partial[i];
	bit_clr(g->whole[w], i);
	g->nwhole[w]--;
	bit_clr(g->partial[p], i);
	g->npartial[p]--;
}

static int intern_model(sc_cluster_t *c, const char *model)
{
	for (int m = 0; m < c->nmodels; m++)
		if (strcmp(c->models[m], model) == 0)
			return m;
	const char **nm = sc_realloc(c->models, sizeof(*nm) * (size_t)(c->nmodels + 1));
	if (!nm)
		return SC_ENOMEM;
	c->models = nm;
	c->models[c->nmodels] = model;
	return c->nmodels++;
}

static int alloc_groups(sc_cluster_t *c)
{
	size_t ng = (size_t)c->nmodels + 1;
	c->groups = sc_calloc(ng, sizeof(group_t));
	if (!c->groups)
		return SC_ENOMEM;
	/* One allocation for every bitset of every group. */
	size_t per = (size_t)(SC_MAX_GPUS + 1 + PARTIAL_BUCKETS + 1);
	c->bits = sc_calloc(ng * per * c->nwords, sizeof(uint64_t));
	if (!c->bits)
		return SC_ENOMEM;
	uint64_t *p = c->bits;
	for (size_t g = 0; g < ng; g++) {
		for (int k = 0; k <= SC_MAX_GPUS; k++, p += c->nwords)
			c->groups[g].whole[k] = p;
		for (int k = 0; k <= PARTIAL_BUCKETS; k++, p += c->nwords)
			c->groups[g].partial[k] = p;
	}
	return 0;
}

static int init_node(sc_cluster_t *c, uint32_t i, const sc_node_spec_t *s)
{
	sc_node_view_t *n = &c->nodes[i];
	if (s->gpu_count < 0 || s->gpu_count > SC_MAX_GPUS)
		return SC_ERANGE;
	n->spec = s;
	n->index = i;
	n->cpu_free = s->cpu_milli;
	n->mem_free = s->memory;
	n->gpu_count = s->gpu_count;
	n->model = -1;
	if (s->gpu_count > 0) {
		n->model = intern_model(c, s->gpu_model ? s->gpu_model : "");
		if (n->model < 0)
			return n->model;
	}
	/* MIG devices are carved into instances and never serve whole or
	 * shared requests; they are tracked by the MIG allocator. */
	bool mig = s->mig_mode != SC_MIG_NONE;
	for (int d = 0; d < s->gpu_count; d++) {
		n->gpu_free[d] = mig ? 0 : SC_GPU_MILLI;
		n->gpu_mem_free[d] = mig ? 0 : s->gpu_memory;
	}
	n->whole_free = mig ? 0 : s->gpu_count;
	n->schedulable = !s->not_ready && !s->unschedulable;
	return 0;
}

/* ---- names ---------------------------------------------------------- */

static int sc__names_build(sc_strmap_t *m, const sc_node_spec_t *nodes, size_t n)
{
	int rc = sc_strmap_init(m, n);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = sc_strmap_put(m, nodes[i].name, (uint32_t)i);
		if (rc == SC_EEXISTS)
			rc = SC_EINVAL; /* duplicate node name */
	}
	return rc;
}

static void sc__names_free(sc_strmap_t *m)
{
	sc_strmap_free(m);
}

static long sc__names_find(const sc_strmap_t *m, const char *name)
{
	return sc_strmap_get(m, name);
}

sc_cluster_t *sc_cluster_new(const sc_node_spec_t *nodes, size_t n, int *err)
{
	int rc = SC_ENOMEM;
	sc_cluster_t *c = sc_calloc(1, sizeof(*c));
	if (!c)
		goto fail;
	c->nnodes = n;
	c->nwords = (n + 63) / 64 + 1;
	c->nodes = sc_calloc(n ? n : 1, sizeof(sc_node_view_t));
	c->key_whole = sc_calloc(n ? n : 1, 1);
	c->key_partial = sc_calloc(n ? n : 1, 1);
	c->gpu_debt = sc_calloc(n ? n : 1, sizeof(int64_t));
	c->dev_debt = sc_calloc((n ? n : 1) * SC_MAX_GPUS, sizeof(int32_t));
	if (!c->nodes || !c->key_whole || !c->key_partial || !c->gpu_debt || !c->dev_debt)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		rc = init_node(c, (uint32_t)i, &nodes[i]);
		if (rc < 0)
			goto fail;
	}
	rc = alloc_groups(c);
	if (rc < 0)
		goto fail;
	rc = sc__names_build(&c->names, nodes, n);
	if (rc < 0)
		goto fail;
	rc = pipe_init(c);
	if (rc < 0)
		goto fail;
	for (size_t i = 0; i < n; i++)
		sc__index_add(c, (uint32_t)i);
	return c;
fail:
	if (err)
		*err = rc;
	sc_cluster_free(c);
	return NULL;
}

void sc_cluster_free(sc_cluster_t *c)
{
	if (!c)
		return;
	free(c->nodes);
	free(c->key_whole);
	free(c->key_partial);
	free(c->models);
	free(c->groups);
	free(c->bits);
	free(c->relbits);
	free(c->relbits_gpu);
	free(c->relbits_idle);
	free(c->gpu_debt);
	free(c->dev_debt);
	sc__names_free(&c->names);
	free(c);
}

size_t sc_cluster_nnodes(const sc_cluster_t *c)
{
	return c->nnodes;
}

const sc_node_view_t *sc_cluster_node(const sc_cluster_t *c, size_t i)
{
	return i < c->nnodes ? &c->nodes[i] : NULL;
}

long sc_cluster_find_node(const sc_cluster_t *c, const char *name)
{
	return sc__names_find(&c->names, name);
}

int sc_cluster_model_id(const sc_cluster_t *c, const char *model)
{
	for (int m = 0; m < c->nmodels; m++)
		if (strcmp(c->models[m], model) == 0)
			return m;
	return -1;
}

int sc_cluster_nmodels(const sc_cluster_t *c)
{
	return c->nmodels;
}

const char *sc_cluster_model_name(const sc_cluster_t *c, int id)
{
	return id >= 0 && id < c->nmodels ? c->models[id] : NULL;
}

/* Usage is kept as running sums so that utilisation checks inside the
 * actions cost nothing: every change to a node subtracts the node's usage
 * before and adds it back after. */
static void account(sc_cluster_t *c, const sc_node_view_t *n, int sign)
{
	int64_t g = 0;
	if (n->spec->mig_mode == SC_MIG_NONE)
		for (int d = 0; d < n->gpu_count; d++)
			g += SC_GPU_MILLI - n->gpu_free[d];
	c->used[0] += sign * g;
	c->used[1] += sign * (n->spec->cpu_milli - n->cpu_free);
	c->used[2] += sign * (n->spec->memory - n->mem_free);
}

static void capacity(sc_cluster_t *c, const sc_node_view_t *n, int sign)
{
	if (!n->schedulable)
		return;
	c->total[0] += sign * (int64_t)n->gpu_count * SC_GPU_MILLI;
	c->total[1] += sign * n->spec->cpu_milli;
	c->total[2] += sign * n->spec->memory;
}

void sc_cluster_totals(const sc_cluster_t *c, int64_t *gpu, int64_t *cpu, int64_t *mem)
{
	if (gpu)
		*gpu = c->total[0];
	if (cpu)
		*cpu = c->total[1];
	if (mem)
		*mem = c->total[2];
}

void sc_cluster_used(const sc_cluster_t *c, int64_t *gpu, int64_t *cpu, int64_t *mem)
{
	if (gpu)
		*gpu = c->used[0] + c->mig_used_milli;
	if (cpu)
		*cpu = c->used[1];
	if (mem)
		*mem = c->used[2];
}

/* ---- requests ------------------------------------------------------- */

int sc_request_share_milli(const sc_request_t *r, const sc_node_view_t *n)
{
	if (r->gpu_milli > 0)
		return r->gpu_milli;
	if (r->gpu_memory > 0) {
		int64_t dev = n->spec->gpu_memory;
		if (dev <= 0)
			return SC_GPU_MILLI + 1; /* cannot be expressed: never fits */
		int64_t m = (r->gpu_memory * SC_GPU_MILLI + dev - 1) / dev;
		return m > SC_GPU_MILLI ? SC_GPU_MILLI + 1 : (int)m;
	}
	return 0;
}

int64_t sc_request_gpu_milli(const sc_request_t *r, const sc_node_view_t *n)
{
	if (r->mig)
		return sc__mig_milli(sc_mig_profile(r->mig, n->spec->gpu_memory));
	if (r->gpus > 0)
		return (int64_t)r->gpus * SC_GPU_MILLI;
	int s = sc_request_share_milli(r, n);
	return s > SC_GPU_MILLI ? SC_GPU_MILLI : s;
}

bool sc__is_share(const sc_request_t *r)
{
	return r->gpus == 0 && (r->gpu_milli > 0 || r->gpu_memory > 0);
}

/* The device a share of `s` milli (and `mem` bytes) would take under the
 * device policy, or -1. Pack prefers the fullest device that still fits, so
 * shares gather on devices that are already shared and whole devices stay
 * whole; spread prefers the emptiest. */
static int share_device(const sc_node_view_t *n, int s, int64_t mem, int policy)
{
	int best = -1;
	for (int d = 0; d < n->gpu_count; d++) {
		if (n->gpu_free[d] < s || n->gpu_mem_free[d] < mem)
			continue;
		if (best < 0 || (policy == SC_DEV_SPREAD ? n->gpu_free[d] > n->gpu_free[best]
		                                         : n->gpu_free[d] < n->gpu_free[best]))
			best = d;
	}
	return best;
}

bool sc_node_fits(const sc_node_view_t *n, const sc_request_t *r)
{
	if (!n->schedulable || n->cpu_free < r->cpu_milli || n->mem_free < r->memory)
		return false;
	if (r->mig) {
		int d, st;
		return sc__mig_choose(n, r->mig, &d, &st) == 0;
	}
	if (r->gpus > 0)
		return n->whole_free >= r->gpus;
	if (sc__is_share(r)) {
		int s = sc_request_share_milli(r, n);
		return s <= SC_GPU_MILLI && share_device(n, s, r->gpu_memory, SC_DEV_PACK) >= 0;
	}
	return true;
}

int sc_node_choose_devices(const sc_node_view_t *n, const sc_request_t *r, int policy,
                           sc_assign_t *a)
{
	a->node = n->index;
	a->ngpus = 0;
	a->gpu_milli = 0;
	a->gpu_memory = 0;
	a->mig_start = 0;
	a->mig_slices = 0;
	if (r->mig) {
		const sc_mig_profile_t *p = sc_mig_profile(r->mig, n->spec->gpu_memory);
		int d, st;
		if (!p || sc__mig_choose(n, r->mig, &d, &st) < 0)
			return SC_ENOFIT;
		a->gpus[0] = d;
		a->ngpus = 1;
		a->mig_start = st;
		a->mig_slices = p->size;
		return 0;
	}
	if (r->gpus > 0) {
		for (int d = 0; d < n->gpu_count && a->ngpus < r->gpus; d++)
			if (n->gpu_free[d] == SC_GPU_MILLI)
				a->gpus[a->ngpus++] = d;
		return a->ngpus == r->gpus ? 0 : SC_ENOFIT;
	}
	if (sc__is_share(r)) {
		int s = sc_request_share_milli(r, n);
		int d = s <= SC_GPU_MILLI ? share_device(n, s, r->gpu_memory, policy) : -1;
		if (d < 0)
			return SC_ENOFIT;
		a->gpus[0] = d;
		a->ngpus = 1;
		a->gpu_milli = s;
		a->gpu_memory = r->gpu_memory;
	}
	return 0;
}

/* ---- take and give -------------------------------------------------- */

void sc__recount_whole(sc_node_view_t *n)
{
	int w = 0;
	for (int d = 0; d < n->gpu_count; d++)
		w += n->gpu_free[d] == SC_GPU_MILLI;
	n->whole_free = w;
}

static uint8_t mig_span(const sc_assign_t *a)
{
	return (uint8_t)(((1u << a->mig_slices) - 1) << a->mig_start);
}

/* MIG pods hold slices of one device rather than milli of it. */
static int mig_take(sc_cluster_t *c, sc_node_view_t *n, const sc_request_t *r, const sc_assign_t *a,
                    bool force)
{
	int d = a->gpus[0];
	if (d < 0 || d >= n->gpu_count || a->mig_slices <= 0 || a->mig_start < 0 ||
	    a->mig_start + a->mig_slices > 8)
		return SC_EINVAL;
	if (!force && (n->cpu_free < r->cpu_milli || n->mem_free < r->memory ||
	               (n->mig_used[d] & mig_span(a))))
		return SC_ENOFIT;
	sc__index_del(c, n->index);
	n->cpu_free -= r->cpu_milli;
	n->mem_free -= r->memory;
	n->mig_used[d] |= mig_span(a);
	sc__index_add(c, n->index);
	c->mig_used_milli += sc__mig_milli(sc_mig_profile(r->mig, n->spec->gpu_memory));
	return 0;
}

/* Takes a pod's resources from node n, unchecked. Devices out of range
 * are skipped and a share never drives a device below zero, so an
 * over-committed snapshot (force_take) stays a valid state. */
static void apply_take(sc_cluster_t *c, sc_node_view_t *n, const sc_request_t *r,
                       const sc_assign_t *a)
{
	sc__index_del(c, n->index);
	n->cpu_free -= r->cpu_milli;
	n->mem_free -= r->memory;
	for (int k = 0; k < a->ngpus; k++) {
		int d = a->gpus[k];
		if (d < 0 || d >= n->gpu_count)
			continue;
		/* Only a snapshot's forced take can find too little. */
		int32_t *dd = &c->dev_debt[(size_t)n->index * SC_MAX_GPUS + (size_t)d];
		if (a->gpu_milli > 0) {
			int f = n->gpu_free[d] - a->gpu_milli;
			c->gpu_debt[n->index] += f < 0 ? -f : 0;
			*dd += f < 0 ? -f : 0;
			n->gpu_free[d] = (int16_t)(f < 0 ? 0 : f);
			n->gpu_mem_free[d] -= a->gpu_memory;
			n->gpu_shared[d]++;
		} else {
			c->gpu_debt[n->index] += SC_GPU_MILLI - n->gpu_free[d];
			*dd += SC_GPU_MILLI - n->gpu_free[d];
			n->gpu_free[d] = 0;
			n->gpu_mem_free[d] = 0;
		}
	}
	sc__recount_whole(n);
	sc__index_add(c, n->index);
}

int sc_cluster_take(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a)
{
	if (a->node >= c->nnodes)
		return SC_EINVAL;
	sc_node_view_t *n = &c->nodes[a->node];
	if (a->mig_slices > 0)
		return mig_take(c, n, r, a, false);
	if (n->cpu_free < r->cpu_milli || n->mem_free < r->memory)
		return SC_ENOFIT;
	for (int k = 0; k < a->ngpus; k++) {
		int d = a->gpus[k];
		if (d < 0 || d >= n->gpu_count)
			return SC_EINVAL;
		int need = a->gpu_milli > 0 ? a->gpu_milli : SC_GPU_MILLI;
		if (n->gpu_free[d] < need || n->gpu_mem_free[d] < a->gpu_memory)
			return SC_ENOFIT;
		if (a->gpu_milli == 0 && n->gpu_shared[d])
			return SC_ENOFIT;
	}
	apply_take(c, n, r, a);
	return 0;
}

void sc_cluster_give(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a)
{
	if (a->node >= c->nnodes)
		return;
	sc_node_view_t *n = &c->nodes[a->node];
	if (a->mig_slices > 0) {
		sc__index_del(c, a->node);
		n->cpu_free += r->cpu_milli;
		n->mem_free += r->memory;
		n->mig_used[a->gpus[0]] &= (uint8_t)~mig_span(a);
		sc__index_add(c, a->node);
		c->mig_used_milli -= sc__mig_milli(sc_mig_profile(r->mig, n->spec->gpu_memory));
		return;
	}
	sc__index_del(c, a->node);
	n->cpu_free += r->cpu_milli;
	n->mem_free += r->memory;
	for (int k = 0; k < a->ngpus; k++) {
		int d = a->gpus[k];
		if (a->gpu_milli > 0) {
			n->gpu_free[d] = (int16_t)(n->gpu_free[d] + a->gpu_milli);
			n->gpu_mem_free[d] += a->gpu_memory;
			if (n->gpu_shared[d])
				n->gpu_shared[d]--;
			if (n->gpu_shared[d] == 0) {
				/* Rounding of memory shares must not leave a
				 * device looking partly used once empty. */
				n->gpu_free[d] = SC_GPU_MILLI;
				n->gpu_mem_free[d] = n->spec->gpu_memory;
			}
		} else {
			n->gpu_free[d] = SC_GPU_MILLI;
			n->gpu_mem_free[d] = n->spec->gpu_memory;
		}
	}
	sc__recount_whole(n);
	sc__index_add(c, a->node);
}

/* ---- search --------------------------------------------------------- */

static bool labels_match(const sc_node_spec_t *s, const sc_label_t *sel, size_t nsel)
{
	for (size_t k = 0; k < nsel; k++) {
		bool found = false;
		for (size_t j = 0; j < s->nlabels; j++)
			if (strcmp(s->labels[j].key, sel[k].key) == 0) {
				found = strcmp(s->labels[j].value, sel[k].value) == 0;
				break;
			}
		if (!found)
			return false;
	}
	return true;
}

bool sc__filter_pass(const sc_filter_t *f, const sc_node_view_t *n)
{
	if (!f)
		return true;
	if (f->models) {
		bool ok = false;
		for (size_t k = 0; k < f->nmodels && !ok; k++)
			ok = f->models[k] == n->model;
		if (!ok)
			return false;
	}
	if (f->nselector && !labels_match(n->spec, f->selector, f->nselector))
		return false;
	return !f->accept || f->accept(f->accept_ctx, n);
}

int sc_cluster_best(const sc_cluster_t *c, const sc_request_t *r, const sc_filter_t *f,
                    const sc_policy_t *p, sc_assign_t *a)
{
	double best = -INFINITY;
	bool found = false;
	sc_assign_t cand;
	for (size_t i = 0; i < c->nnodes; i++) {
		const sc_node_view_t *n = &c->nodes[i];
		if (!sc_node_fits(n, r) || !sc__filter_pass(f, n))
			continue;
		memset(&cand, 0, sizeof(cand));
		cand.node = (uint32_t)i;
		double s = p->score(p->ctx, c, n, r, &cand);
		if (s == -INFINITY || (found && s <= best))
			continue;
		if (cand.ngpus == 0 && (r->gpus > 0 || sc__is_share(r)) &&
		    sc_node_choose_devices(n, r, p->device_policy, &cand) < 0)
			continue;
		cand.node = (uint32_t)i;
		best = s;
		*a = cand;
		found = true;
	}
	return found ? 0 : SC_ENOFIT;
}

/* Is group g one the filter allows? */
static bool group_allowed(const sc_filter_t *f, int g)
{
	if (!f || !f->models)
		return true;
	for (size_t k = 0; k < f->nmodels; k++)
		if (f->models[k] + 1 == g)
			return true;
	return false;
}

/* True when a device that already holds shares has room for request r:
 * the packing pass must not fall back to a whole device on such a node. */
static bool has_partial_room(const sc_node_view_t *n, const sc_request_t *r)
{
	int s = sc_request_share_milli(r, n);
	for (int d = 0; d < n->gpu_count; d++)
		if (n->gpu_free[d] < SC_GPU_MILLI && n->gpu_free[d] >= s &&
		    n->gpu_mem_free[d] >= r->gpu_memory)
			return true;
	return false;
}

/* Walks one bucket in index order and returns the first node that fits
 * and passes the filter, or UINT32_MAX. */
static uint32_t scan_bucket(const sc_cluster_t *c, const uint64_t *bits, const sc_request_t *r,
                            const sc_filter_t *f, bool partial_only)
{
	for (uint32_t i = sc__bit_next(bits, c->nwords, 0); i != UINT32_MAX;
	     i = sc__bit_next(bits, c->nwords, i + 1)) {
		const sc_node_view_t *n = &c->nodes[i];
		if (!sc_node_fits(n, r) || !sc__filter_pass(f, n))
			continue;
		if (partial_only && !has_partial_room(n, r))
			continue;
		return i;
	}
	return UINT32_MAX;
}

/* Keeps the better of two candidates found in buckets of equal rank: the
 * lower node index wins so that results do not depend on model order. */
static void keep_lower(uint32_t *best, uint32_t cand)
{
	if (cand < *best)
		*best = cand;
}

/* Whole-GPU and CPU-only requests: visit whole-free buckets from the
 * fullest usable one (binpack) or the emptiest (spread). */
static uint32_t search_whole(const sc_cluster_t *c, const sc_request_t *r, const sc_filter_t *f,
                             bool spread)
{
	int ng = c->nmodels + 1;
	int need = r->gpus;
	for (int step = 0; step <= SC_MAX_GPUS; step++) {
		int k = spread ? SC_MAX_GPUS - step : step;
		if (k < need)
			continue;
		uint32_t best = UINT32_MAX;
		for (int g = 0; g < ng; g++) {
			if (!c->groups[g].nwhole[k] || !group_allowed(f, g))
				continue;
			if (need > 0 && g == 0)
				continue;
			keep_lower(&best, scan_bucket(c, c->groups[g].whole[k], r, f, false));
		}
		if (best != UINT32_MAX)
			return best;
	}
	return UINT32_MAX;
}

/* Share requests. Pack: partly used devices with the least room that fits
 * first, then a whole device on the fullest node. Spread: the reverse. */
static uint32_t search_share(const sc_cluster_t *c, const sc_request_t *r, const sc_filter_t *f,
                             bool spread)
{
	int ng = c->nmodels + 1;
	uint32_t best = UINT32_MAX;
	if (!spread) {
		for (int p = 1; p <= PARTIAL_BUCKETS; p++) {
			for (int g = 1; g < ng; g++)
				if (c->groups[g].npartial[p] && group_allowed(f, g))
					keep_lower(&best, scan_bucket(c, c->groups[g].partial[p], r,
					                              f, true));
			if (best != UINT32_MAX)
				return best;
		}
	}
	for (int step = 0; step < SC_MAX_GPUS; step++) {
		int k = spread ? SC_MAX_GPUS - step : step + 1;
		for (int g = 1; g < ng; g++)
			if (c->groups[g].nwhole[k] && group_allowed(f, g))
				keep_lower(&best,
				           scan_bucket(c, c->groups[g].whole[k], r, f, false));
		if (best != UINT32_MAX)
			return best;
	}
	if (spread) {
		for (int p = PARTIAL_BUCKETS; p >= 1; p--) {
			for (int g = 1; g < ng; g++)
				if (c->groups[g].npartial[p] && group_allowed(f, g))
					keep_lower(&best, scan_bucket(c, c->groups[g].partial[p], r,
					                              f, true));
			if (best != UINT32_MAX)
				return best;
		}
	}
	return best;
}

/* MIG nodes are few and their state is per slice, so they are scanned:
 * nodes with instances in use first (packing), then empty ones. */
static int search_mig(const sc_cluster_t *c, const sc_request_t *r, const sc_filter_t *f,
                      int device_policy, sc_assign_t *a)
{
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < c->nnodes; i++) {
			const sc_node_view_t *n = &c->nodes[i];
			if (n->spec->mig_mode == SC_MIG_NONE)
				continue;
			bool in_use = false;
			for (int d = 0; d < n->gpu_count; d++)
				in_use |= n->mig_used[d] != 0;
			if (in_use != (pass == 0) || !sc_node_fits(n, r) || !sc__filter_pass(f, n))
				continue;
			return sc_node_choose_devices(n, r, device_policy, a);
		}
	return SC_ENOFIT;
}

int sc_cluster_best_indexed(const sc_cluster_t *c, const sc_request_t *r, const sc_filter_t *f,
                            bool spread, int device_policy, sc_assign_t *a)
{
	if (r->mig)
		return search_mig(c, r, f, device_policy, a);
	uint32_t i =
	    sc__is_share(r) ? search_share(c, r, f, spread) : search_whole(c, r, f, spread);
	if (i == UINT32_MAX)
		return SC_ENOFIT;
	return sc_node_choose_devices(&c->nodes[i], r, device_policy, a);
}

/* Takes a pod's resources without checking that they are free. Snapshots
 * can be over-committed (a node shrank, a status was written by hand); the
 * pods are real and hold what they hold, so the cycle must see it. */
void sc__cluster_force_take(sc_cluster_t *c, const sc_request_t *r, const sc_assign_t *a)
{
	sc_node_view_t *n = &c->nodes[a->node];
	if (a->mig_slices > 0) {
		mig_take(c, n, r, a, true);
		return;
	}
	apply_take(c, n, r, a);
}
