/* Scarce capacity for the `default` policy. See scarce.h. */
#include "sim/scarce.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A shape is restricted when the nodes it fits hold at most this share of
 * the GPUs, and the level counts the loss in steps of this share of the
 * average density. Both chosen by measurement (docs/SIMULATOR.md). */
#define RESTRICTED_SHARE 0.5
#define LEVEL_STEP 0.5
/* Fresh-device pressure at which opening one starts to cost, and at which
 * it costs a whole device. */
#define FRESH_FROM 1.5
#define FRESH_FULL 3.0
/* Restricted shapes' pressure (pods of the shape still to come over its
 * slots) at which taking a slot starts to cost, and at which it costs
 * PRESSED_SCALE levels per GPU of the slot. */
#define PRESSED_FROM 0.15
#define PRESSED_FULL 0.4
#define PRESSED_SCALE 3.0

typedef struct rshape {
	sc_pod_shape_t shape;
	double p;      /* its frequency among all pods */
	double gpus;   /* GPUs of one pod */
	int64_t total; /* slots over all nodes now */
	double ramp;   /* 0..1: how close its slots are to running out */
	double w;      /* per slot lost: freq x gpus x gpus / GPUs it fits */
} rshape_t;

/* A node's value as of its last state, so each pod's scoring of every
 * node does not probe the memo for the state before. */
typedef struct now {
	int64_t cpu;
	int16_t gpu[SC_MAX_GPUS];
	double value;
	int fresh;    /* untouched devices */
	int64_t free; /* free milli */
	bool valid;
} now_t;

struct sc_scarce {
	rshape_t *rs;
	size_t nrs;
	double step; /* LEVEL_STEP x average density */
	sc_state_memo_t memo;
	now_t *now;
	size_t nnodes;
	/* Fresh devices: totals over the nodes, and the typical pods' rates. */
	int64_t fresh, free;
	double fresh_per_pod, milli_per_pod;
	int32_t *nslots; /* per node, per restricted shape: its slots there */
};

/* Pods of shape t a node state can still take (0 when the model is not
 * accepted or the CPU is short). */
static int64_t shape_slots(const sc_pod_shape_t *t, int model, int64_t cpu, const int16_t *gpu,
                           int ngpu)
{
	uint64_t mbit = model >= 0 && model < 64 ? (uint64_t)1 << model : 0;
	if (!(t->models & mbit) || cpu < t->cpu || t->milli <= 0)
		return 0;
	int64_t by_cpu = cpu / (t->cpu > 0 ? t->cpu : 1), by_gpu = 0;
	for (int d = 0; d < ngpu; d++)
		by_gpu += t->milli >= SC_GPU_MILLI ? gpu[d] == SC_GPU_MILLI : gpu[d] / t->milli;
	if (t->milli >= SC_GPU_MILLI)
		by_gpu /= t->num > 0 ? t->num : 1;
	return by_gpu < by_cpu ? by_gpu : by_cpu;
}

static double gpus_of(const sc_pod_shape_t *t)
{
	return (double)t->milli * t->num / SC_GPU_MILLI;
}

/* The restricted shapes and the level step. */
static int find_restricted(sc_scarce_t *s, const sc_typical_t *shapes, size_t n,
                           const sc_cluster_t *c)
{
	int16_t empty[SC_MAX_GPUS];
	for (int d = 0; d < SC_MAX_GPUS; d++)
		empty[d] = SC_GPU_MILLI;
	double all = 0, density = 0;
	size_t nn = sc_cluster_nnodes(c);
	for (size_t i = 0; i < nn; i++)
		all += sc_cluster_node(c, i)->gpu_count;
	s->rs = calloc(n ? n : 1, sizeof(*s->rs));
	if (!s->rs)
		return SC_ENOMEM;
	for (size_t k = 0; k < n; k++) {
		const sc_pod_shape_t *t = &shapes[k].shape;
		if (t->milli <= 0)
			continue;
		double g = gpus_of(t), fits = 0;
		density += shapes[k].p * g / all;
		for (size_t i = 0; i < nn; i++) {
			const sc_node_view_t *v = sc_cluster_node(c, i);
			if (shape_slots(t, v->model, v->spec->cpu_milli, empty, v->gpu_count) > 0)
				fits += v->gpu_count;
		}
		if (fits <= 0 || fits > RESTRICTED_SHARE * all)
			continue;
		s->rs[s->nrs].shape = *t;
		s->rs[s->nrs].p = shapes[k].p;
		s->rs[s->nrs].gpus = g;
		s->rs[s->nrs++].w = shapes[k].p * g * g / fits;
	}
	s->step = LEVEL_STEP * density;
	return 0;
}

static void rates(sc_scarce_t *s, const sc_typical_t *t, size_t n)
{
	double fresh = 0, milli = 0;
	for (size_t k = 0; k < n; k++) {
		const sc_pod_shape_t *sh = &t[k].shape;
		milli += t[k].p * sh->milli * sh->num;
		if (sh->milli >= SC_GPU_MILLI)
			fresh += t[k].p * sh->num;
		else if (sh->milli > SC_GPU_MILLI / 2)
			fresh += t[k].p;
	}
	s->fresh_per_pod = fresh;
	s->milli_per_pod = milli > 0 ? milli : 1;
}

sc_scarce_t *sc_scarce_new(const sc_typical_t *shapes, size_t nshapes, const sc_typical_t *typical,
                           size_t ntypical, const sc_cluster_t *c)
{
	sc_scarce_t *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->nnodes = sc_cluster_nnodes(c);
	s->now = calloc(s->nnodes ? s->nnodes : 1, sizeof(*s->now));
	if (!s->now || sc_state_memo_init(&s->memo, 1024) < 0 ||
	    find_restricted(s, shapes, nshapes, c) < 0) {
		sc_scarce_free(s);
		return NULL;
	}
	rates(s, typical, ntypical);
	s->nslots = calloc(s->nnodes * (s->nrs ? s->nrs : 1), sizeof(*s->nslots));
	if (!s->nslots) {
		sc_scarce_free(s);
		return NULL;
	}
	for (size_t i = 0; i < s->nnodes; i++)
		sc_scarce_update(s, sc_cluster_node(c, i));
	return s;
}

void sc_scarce_free(sc_scarce_t *s)
{
	if (!s)
		return;
	free(s->rs);
	free(s->nslots);
	sc_state_memo_release(&s->memo);
	free(s->now);
	free(s);
}

size_t sc_scarce_nrestricted(const sc_scarce_t *s)
{
	return s->nrs;
}

/* ---- values per state ---------------------------------------------------- */

static double compute(const sc_scarce_t *s, int model, int64_t cpu, const int16_t *gpu, int ngpu)
{
	double v = 0;
	for (size_t k = 0; k < s->nrs; k++)
		v += s->rs[k].w * (double)shape_slots(&s->rs[k].shape, model, cpu, gpu, ngpu);
	return v;
}

/* The value of a state, memoised. Without restricted shapes it is 0 and
 * nothing is stored. */
static double value(sc_scarce_t *s, int model, int64_t cpu, const int16_t *gpu, int ngpu)
{
	if (s->nrs == 0)
		return 0;
	sc_state_key_t k;
	sc_state_key(&k, model, cpu, gpu, ngpu);
	if (s->memo.oom)
		return compute(s, model, cpu, k.gpu, ngpu);
	sc_state_slot_t *sl = sc_state_memo_slot(&s->memo, &k);
	if (sl->used)
		return sl->value;
	sl->key = k;
	sl->value = compute(s, model, cpu, k.gpu, ngpu);
	sl->used = true;
	double v = sl->value;
	sc_state_memo_added(&s->memo);
	return v;
}

static now_t *node_now(sc_scarce_t *s, const sc_node_view_t *n)
{
	now_t *c = n->index < s->nnodes ? &s->now[n->index] : NULL;
	if (!c ||
	    (c->valid && c->cpu == n->cpu_free && memcmp(c->gpu, n->gpu_free, sizeof(c->gpu)) == 0))
		return c;
	c->cpu = n->cpu_free;
	memcpy(c->gpu, n->gpu_free, sizeof(c->gpu));
	c->value = value(s, n->model, n->cpu_free, n->gpu_free, n->gpu_count);
	c->valid = true;
	return c;
}

/* The loss in (fractional) steps. */
static double scarce_loss(sc_scarce_t *s, const sc_node_view_t *n, const int16_t *left,
                          int64_t cpu_left)
{
	if (s->nrs == 0 || s->step <= 0)
		return 0;
	now_t *c = node_now(s, n);
	double before = c ? c->value : value(s, n->model, n->cpu_free, n->gpu_free, n->gpu_count);
	double lost = before - value(s, n->model, cpu_left, left, n->gpu_count);
	return lost > 0 ? lost / s->step : 0;
}

/* Restricted room near running out (scarce.h): each slot of a restricted
 * shape under pressure counts its GPUs x ramp x PRESSED_SCALE levels. */
static double pressed_loss(const sc_scarce_t *s, const sc_node_view_t *n, const int16_t *left,
                           int64_t cpu_left)
{
	double loss = 0;
	for (size_t k = 0; k < s->nrs; k++) {
		const rshape_t *r = &s->rs[k];
		if (r->ramp <= 0)
			continue;
		int64_t before = s->nslots[n->index * s->nrs + k];
		if (before == 0)
			continue;
		int64_t after = shape_slots(&r->shape, n->model, cpu_left, left, n->gpu_count);
		if (after < before)
			loss += (double)(before - after) * r->gpus * r->ramp;
	}
	return loss * PRESSED_SCALE;
}

int sc_scarce_level(sc_scarce_t *s, const sc_node_view_t *n, const int16_t *left, int64_t cpu_left)
{
	if (n->index < s->nnodes && s->nrs > 0) {
		double pl = pressed_loss(s, n, left, cpu_left);
		if (pl > 0)
			return (int)floor(scarce_loss(s, n, left, cpu_left) + pl + 1e-9);
	}
	/* The margin keeps rounding in the two sums from moving a loss that
	 * is a whole number of steps (or none) down a level. */
	return (int)floor(scarce_loss(s, n, left, cpu_left) + 1e-9);
}

/* ---- fresh devices ------------------------------------------------------- */

void sc_scarce_update(sc_scarce_t *s, const sc_node_view_t *n)
{
	if (n->index >= s->nnodes)
		return;
	now_t *c = &s->now[n->index];
	int fresh = 0;
	int64_t free = 0;
	for (int d = 0; d < n->gpu_count; d++) {
		fresh += n->gpu_free[d] == SC_GPU_MILLI;
		free += n->gpu_free[d];
	}
	s->fresh += fresh - c->fresh;
	s->free += free - c->free;
	c->fresh = fresh;
	c->free = free;
	if (!s->nslots)
		return;
	int32_t *ns = &s->nslots[n->index * s->nrs];
	for (size_t k = 0; k < s->nrs; k++) {
		int64_t v =
		    shape_slots(&s->rs[k].shape, n->model, n->cpu_free, n->gpu_free, n->gpu_count);
		s->rs[k].total += v - ns[k];
		ns[k] = (int32_t)v;
	}
	/* Pods still to come before the GPUs run out, at the typical pods'
	 * milli per pod; each shape's share of them against its slots. */
	double pods = (double)s->free / s->milli_per_pod;
	for (size_t k = 0; k < s->nrs; k++) {
		rshape_t *r = &s->rs[k];
		double pressure = r->total > 0 ? r->p * pods / (double)r->total : 1e9;
		double x = (pressure - PRESSED_FROM) / (PRESSED_FULL - PRESSED_FROM);
		r->ramp = x < 0 ? 0 : x > 1 ? 1 : x;
	}
}

double sc_scarce_fresh_cost(const sc_scarce_t *s)
{
	if (s->fresh <= 0)
		return 0; /* nothing to open */
	double pressure = (double)s->free / s->milli_per_pod * s->fresh_per_pod / (double)s->fresh;
	double x = (pressure - FRESH_FROM) / (FRESH_FULL - FRESH_FROM);
	x = x < 0 ? 0 : x > 1 ? 1 : x;
	return floor(SC_GPU_MILLI * x);
}
