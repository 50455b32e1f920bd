/* The upper bound of `starcloud simulate --bound`. See bound.h for the
 * argument; this file has three parts: node types and pod classes, the
 * forced pods (a weighted covering test per arrival), and the linear program
 * (GLPK) with its value taken by weak duality. */
#include "sim/bound.h"

#include <glpk.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/packing_int.h"
#include "starcloud/error.h"

/* A share above this is never beside another one on its device. */
#define BIG_SHARE (SC_GPU_MILLI / 2)
#define GIB ((double)((int64_t)1 << 30))

/* Identical nodes. */
typedef struct ntype {
	int64_t cpu, mem; /* per node: millicores, bytes */
	int gpus;
	const char *model; /* NULL for a node without GPU */
	int count;
} ntype_t;

/* Identical requests (cpu, memory, GPU shape, gpu_spec). */
typedef struct pclass {
	const sc__sim_pod_t *pod; /* one of them */
	size_t n, forced;
	int *types, ntypes; /* node types the class can ever use */
	/* While its pods are still forced (see find_forced): per blocking
	 * condition and cut m, the value V of blocking every node left after
	 * the cut, the power the arrivals so far have against it, and each
	 * class's power per pod. */
	int nconds;
	int *rank;           /* nconds x ntypes: types, easiest to block first */
	double *value, *rhs; /* nconds x ntypes */
	float *power;        /* nconds x ntypes x nclasses */
	bool active, done;
} pclass_t;

/* What one pod puts on the node it lands on. */
typedef struct demand {
	double cpu, mem, touched, milli;
} demand_t;

typedef struct bctx {
	const sc_sim_workload_t *w;
	ntype_t *types;
	int ntypes;
	bool *allowed; /* nspecs x ntypes: the spec accepts the model */
	const sc__sim_pod_t **order;
	size_t n;
	int *cls; /* class of each arrival */
	pclass_t *classes;
	size_t nclasses;
	bool *forced, *fits; /* per arrival */
} bctx_t;

/* ---- node types and pod classes --------------------------------------- */

static int cmp_model(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "");
}

static bool same_type(const ntype_t *t, const sc_node_spec_t *s)
{
	return t->cpu == s->cpu_milli && t->mem == s->memory && t->gpus == s->gpu_count &&
	       cmp_model(t->model, s->gpu_count > 0 ? s->gpu_model : NULL) == 0;
}

static int build_types(bctx_t *b)
{
	const sc_sim_workload_t *w = b->w;
	b->types = calloc(w->nnodes ? w->nnodes : 1, sizeof(*b->types));
	if (!b->types)
		return SC_ENOMEM;
	for (size_t i = 0; i < w->nnodes; i++) {
		const sc_node_spec_t *s = &w->nodes[i];
		int k = 0;
		while (k < b->ntypes && !same_type(&b->types[k], s))
			k++;
		if (k == b->ntypes) {
			ntype_t *t = &b->types[b->ntypes++];
			t->cpu = s->cpu_milli;
			t->mem = s->memory;
			t->gpus = s->gpu_count;
			t->model = s->gpu_count > 0 ? s->gpu_model : NULL;
		}
		b->types[k].count++;
	}
	b->allowed = calloc((size_t)w->nspecs * (size_t)b->ntypes + 1, sizeof(bool));
	if (!b->allowed)
		return SC_ENOMEM;
	for (int s = 0; s < w->nspecs; s++)
		for (int k = 0; k < b->ntypes; k++) {
			const sc__sim_spec_t *sp = &w->specs[s];
			bool ok = sp->nmodels == 0;
			for (int m = 0; !ok && m < sp->nmodels; m++)
				ok = cmp_model(sp->models[m], b->types[k].model) == 0;
			b->allowed[(size_t)s * (size_t)b->ntypes + (size_t)k] =
			    ok && b->types[k].model != NULL;
		}
	return 0;
}

/* Whether a pod of p's request can ever be placed on an empty node of
 * type k (the simulator's own fit rules: CPU, memory, model, devices). */
static bool fits_type(const bctx_t *b, const sc__sim_pod_t *p, int k)
{
	const ntype_t *t = &b->types[k];
	if (p->req.cpu_milli > t->cpu || p->req.memory > t->mem)
		return false;
	if (p->milli == 0)
		return true;
	if (!b->allowed[(size_t)p->spec * (size_t)b->ntypes + (size_t)k])
		return false;
	return p->req.gpus > 0 ? t->gpus >= p->req.gpus : t->gpus >= 1;
}

static int cmp_req(const sc__sim_pod_t *a, const sc__sim_pod_t *b)
{
#define CMP(f)                                                                                     \
	if (a->f != b->f)                                                                          \
		return a->f < b->f ? -1 : 1;
	CMP(req.cpu_milli)
	CMP(req.memory)
	CMP(req.gpus)
	CMP(req.gpu_milli)
	CMP(spec)
#undef CMP
	return 0;
}

typedef struct arrival {
	const sc__sim_pod_t *pod;
	size_t i;
} arrival_t;

static int cmp_arrival(const void *x, const void *y)
{
	const arrival_t *a = x, *b = y;
	int c = cmp_req(a->pod, b->pod);
	return c ? c : (a->i < b->i ? -1 : a->i > b->i);
}

static int class_types(bctx_t *b, pclass_t *c)
{
	c->types = malloc((size_t)(b->ntypes ? b->ntypes : 1) * sizeof(int));
	if (!c->types)
		return SC_ENOMEM;
	for (int k = 0; k < b->ntypes; k++)
		if (fits_type(b, c->pod, k))
			c->types[c->ntypes++] = k;
	return 0;
}

static int build_classes(bctx_t *b)
{
	arrival_t *a = malloc((b->n ? b->n : 1) * sizeof(*a));
	b->cls = malloc((b->n ? b->n : 1) * sizeof(int));
	b->classes = calloc(b->n ? b->n : 1, sizeof(*b->classes));
	if (!a || !b->cls || !b->classes) {
		free(a);
		return SC_ENOMEM;
	}
	for (size_t i = 0; i < b->n; i++)
		a[i] = (arrival_t){b->order[i], i};
	qsort(a, b->n, sizeof(*a), cmp_arrival);
	for (size_t i = 0; i < b->n; i++) {
		if (i == 0 || cmp_req(a[i - 1].pod, a[i].pod) != 0)
			b->classes[b->nclasses++].pod = a[i].pod;
		b->cls[a[i].i] = (int)b->nclasses - 1;
		b->classes[b->nclasses - 1].n++;
	}
	free(a);
	for (size_t ci = 0; ci < b->nclasses; ci++) {
		int rc = class_types(b, &b->classes[ci]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- forced pods ------------------------------------------------------ */

/* A pod of class c fails only if every node it may use is blocked for it
 * when it arrives. A node of type k is blocked when the pods on it use
 * more than cpu - c of its CPU, or more than mem - m of its memory, or
 * (GPU pods) its devices: a pod of k whole GPUs needs g - k + 1 devices
 * touched; a share of s needs every device touched and (so) at least
 * g (1001 - s) milli used. Each condition is a sum over the pods on the
 * node reaching a threshold, so the node is blocked only if the pods on
 * it have sum_j phi_j >= 1, phi_j being pod j's largest fraction of a
 * threshold (capped at 1).
 *
 * Weighting node types by any v_k >= 0, blocking all of them needs
 *     sum_k n_k v_k  <=  sum_j  max_k v_k phi_kj,
 * the sum over the pods that arrived before (at most every one of them
 * was placed). The weights used are, per condition, v_k = devices that
 * must be touched (t), or milli that must be used (u), or 1 (CPU pods,
 * which only CPU and memory block), on the node types left after dropping
 * the m types easiest to block (for every m): dropping a type that a few
 * pods block cheaply can only help the left side. When the inequality
 * fails for some condition and some m, no placement of the earlier pods
 * blocks the pod: every policy places it. Shares have two conditions
 * (touched devices, used milli); failing either is enough. */

enum { COND_TOUCH, COND_MILLI, COND_NODE };

static int cond_kind(const pclass_t *c, int i)
{
	if (c->pod->milli == 0)
		return COND_NODE;
	return i == 0 ? COND_TOUCH : COND_MILLI;
}

static demand_t pod_demand(const sc__sim_pod_t *p)
{
	demand_t d = {(double)p->req.cpu_milli, (double)p->req.memory,
	              p->req.gpus > 0 ? p->req.gpus
	              : p->milli > 0  ? 1
	                              : 0,
	              (double)p->milli};
	return d;
}

/* v_k: what blocking one node of type k counts for under condition kind. */
static double node_value(const bctx_t *b, const pclass_t *c, int kind, int k)
{
	const ntype_t *t = &b->types[k];
	const sc__sim_pod_t *p = c->pod;
	if (kind == COND_NODE)
		return 1;
	if (kind == COND_TOUCH)
		return p->req.gpus > 0 ? t->gpus - p->req.gpus + 1 : t->gpus;
	return (double)t->gpus * (SC_GPU_MILLI + 1 - p->req.gpu_milli);
}

/* phi: the largest fraction of a blocking threshold of a type-k node (for
 * class c, condition kind) that demand d reaches, at most 1. */
static double block_fraction(const bctx_t *b, const pclass_t *c, int kind, int k, const demand_t *d)
{
	const ntype_t *t = &b->types[k];
	const sc__sim_pod_t *p = c->pod;
	double f = 0;
	if (p->req.cpu_milli > 0)
		f = d->cpu / (double)(t->cpu - p->req.cpu_milli + 1);
	if (p->req.memory > 0 && d->mem / (double)(t->mem - p->req.memory + 1) > f)
		f = d->mem / (double)(t->mem - p->req.memory + 1);
	double g = kind == COND_TOUCH   ? d->touched / node_value(b, c, kind, k)
	           : kind == COND_MILLI ? d->milli / node_value(b, c, kind, k)
	                                : 0;
	f = g > f ? g : f;
	return f < 1 ? f : 1;
}

typedef struct rank_ctx {
	const bctx_t *b;
	const pclass_t *c;
	int kind;
	const demand_t *mean;
} rank_ctx_t;

/* Easiest first: the larger the share of a node an average pod blocks. */
static int cmp_ease(const void *x, const void *y, void *arg)
{
	const rank_ctx_t *r = arg;
	int a = *(const int *)x, b = *(const int *)y;
	double ea = block_fraction(r->b, r->c, r->kind, a, r->mean);
	double eb = block_fraction(r->b, r->c, r->kind, b, r->mean);
	return ea > eb ? -1 : ea < eb ? 1 : a - b;
}

/* Prepares class c's tables when its first pod arrives; cnt holds how
 * many pods of each class arrived before. */
static int activate(bctx_t *b, pclass_t *c, const size_t *cnt, const demand_t *mean)
{
	int nt = c->ntypes, nc = (int)b->nclasses;
	c->nconds = c->pod->milli > 0 && c->pod->req.gpus == 0 ? 2 : 1;
	size_t cells = (size_t)c->nconds * (size_t)nt;
	c->rank = malloc(cells * sizeof(int));
	c->value = calloc(cells, sizeof(double));
	c->rhs = calloc(cells, sizeof(double));
	c->power = malloc(cells * (size_t)nc * sizeof(float));
	if (!c->rank || !c->value || !c->rhs || !c->power)
		return SC_ENOMEM;
	for (int ci = 0; ci < c->nconds; ci++) {
		int kind = cond_kind(c, ci), *rank = &c->rank[ci * nt];
		memcpy(rank, c->types, (size_t)nt * sizeof(int));
		rank_ctx_t r = {b, c, kind, mean};
		qsort_r(rank, (size_t)nt, sizeof(int), cmp_ease, &r);
		/* Cut m keeps rank[m..]: suffix sums and maxima. */
		double v = 0;
		for (int m = nt - 1; m >= 0; m--) {
			v += b->types[rank[m]].count * node_value(b, c, kind, rank[m]);
			c->value[ci * nt + m] = v;
		}
		for (int l = 0; l < nc; l++) {
			const pclass_t *d = &b->classes[l];
			demand_t dd = pod_demand(d->pod);
			double best = 0;
			for (int m = nt - 1; m >= 0; m--) {
				int k = rank[m];
				bool fits = false;
				for (int i = 0; i < d->ntypes && !fits; i++)
					fits = d->types[i] == k;
				double p = fits ? node_value(b, c, kind, k) *
				                      block_fraction(b, c, kind, k, &dd)
				                : 0;
				best = p > best ? p : best;
				/* Rounded up: the test must not understate power. */
				float f = (float)best;
				if ((double)f < best)
					f = nextafterf(f, INFINITY);
				c->power[((size_t)ci * nt + m) * nc + l] = f;
			}
		}
		for (int m = 0; m < nt; m++)
			for (int l = 0; l < nc; l++)
				c->rhs[ci * nt + m] +=
				    (double)cnt[l] * c->power[((size_t)ci * nt + m) * nc + l];
	}
	c->active = true;
	return 0;
}

static void deactivate(pclass_t *c)
{
	free(c->rank);
	free(c->value);
	free(c->rhs);
	free(c->power);
	c->rank = NULL;
	c->value = c->rhs = NULL;
	c->power = NULL;
	c->active = false;
	c->done = true;
}

/* Whether some condition and cut leave more to block than the earlier
 * pods can (with a margin for the sums' rounding: a near tie is not
 * forced). */
static bool is_forced(const pclass_t *c)
{
	int nt = c->ntypes;
	for (int i = 0; i < c->nconds * nt; i++)
		if (c->value[i] > c->rhs[i] * (1 + 1e-6) + 1e-6)
			return true;
	return false;
}

/* The power of one arrival of class l goes to every class still tracked. */
static void add_power(bctx_t *b, size_t l)
{
	int nc = (int)b->nclasses;
	for (size_t ci = 0; ci < b->nclasses; ci++) {
		pclass_t *c = &b->classes[ci];
		if (!c->active)
			continue;
		int cells = c->nconds * c->ntypes;
		for (int i = 0; i < cells; i++)
			c->rhs[i] += c->power[(size_t)i * nc + l];
	}
}

/* The average demand of the pods that can be placed: only to rank node
 * types (any ranking gives a valid test). */
static demand_t mean_demand(const bctx_t *b)
{
	demand_t m = {0};
	double n = 0;
	for (size_t i = 0; i < b->n; i++) {
		if (b->classes[b->cls[i]].ntypes == 0)
			continue;
		demand_t d = pod_demand(b->order[i]);
		m.cpu += d.cpu;
		m.mem += d.mem;
		m.touched += d.touched;
		m.milli += d.milli;
		n++;
	}
	if (n > 0) {
		m.cpu /= n;
		m.mem /= n;
		m.touched /= n;
		m.milli /= n;
	}
	return m;
}

/* Marks the forced arrivals. A class that stops being forced stays so
 * (the earlier pods only grow), so its tables are dropped then. */
static int find_forced(bctx_t *b)
{
	size_t *cnt = calloc(b->nclasses ? b->nclasses : 1, sizeof(size_t));
	if (!cnt)
		return SC_ENOMEM;
	demand_t mean = mean_demand(b);
	int rc = 0;
	for (size_t i = 0; i < b->n && rc == 0; i++) {
		size_t l = (size_t)b->cls[i];
		pclass_t *c = &b->classes[l];
		b->fits[i] = c->ntypes > 0;
		if (b->fits[i] && !c->done && !c->active)
			rc = activate(b, c, cnt, &mean);
		if (rc < 0)
			break;
		b->forced[i] = c->active && is_forced(c);
		c->forced += b->forced[i];
		if (c->active && !b->forced[i])
			deactivate(c);
		if (!b->fits[i])
			continue; /* never placed: uses nothing */
		cnt[l]++;
		add_power(b, l);
	}
	free(cnt);
	return rc;
}

/* ---- the linear program ----------------------------------------------- */

typedef struct lp {
	int nrows, ncols;
	double *rlo, *rhi; /* row bounds, -HUGE_VAL/HUGE_VAL when absent */
	double *chi, *obj; /* column upper bounds (lower: 0) and objective */
	int *ia, *ja;      /* entries, 1-based as GLPK wants them */
	double *ar;
	int nnz, cap_rows, cap_cols, cap_nnz;
} lp_t;

static int lp_row(lp_t *l, double lo, double hi)
{
	if (l->nrows == l->cap_rows) {
		int cap = l->cap_rows * 2 + 64;
		double *a = realloc(l->rlo, (size_t)(cap + 1) * sizeof(double));
		if (!a)
			return SC_ENOMEM;
		l->rlo = a;
		double *h = realloc(l->rhi, (size_t)(cap + 1) * sizeof(double));
		if (!h)
			return SC_ENOMEM;
		l->rhi = h;
		l->cap_rows = cap;
	}
	l->nrows++;
	l->rlo[l->nrows] = lo;
	l->rhi[l->nrows] = hi;
	return l->nrows;
}

static int lp_col(lp_t *l, double obj, double hi)
{
	if (l->ncols == l->cap_cols) {
		int cap = l->cap_cols * 2 + 256;
		double *o = realloc(l->obj, (size_t)(cap + 1) * sizeof(double));
		if (!o)
			return SC_ENOMEM;
		l->obj = o;
		double *h = realloc(l->chi, (size_t)(cap + 1) * sizeof(double));
		if (!h)
			return SC_ENOMEM;
		l->chi = h;
		l->cap_cols = cap;
	}
	l->ncols++;
	l->obj[l->ncols] = obj;
	l->chi[l->ncols] = hi;
	return l->ncols;
}

static int lp_set(lp_t *l, int row, int col, double v)
{
	if (v == 0)
		return 0;
	if (l->nnz + 1 >= l->cap_nnz) {
		int cap = l->cap_nnz * 2 + 1024;
		int *i = realloc(l->ia, (size_t)cap * sizeof(int));
		if (!i)
			return SC_ENOMEM;
		l->ia = i;
		int *j = realloc(l->ja, (size_t)cap * sizeof(int));
		if (!j)
			return SC_ENOMEM;
		l->ja = j;
		double *a = realloc(l->ar, (size_t)cap * sizeof(double));
		if (!a)
			return SC_ENOMEM;
		l->ar = a;
		l->cap_nnz = cap;
	}
	l->nnz++;
	l->ia[l->nnz] = row;
	l->ja[l->nnz] = col;
	l->ar[l->nnz] = v;
	return 0;
}

static void lp_free(lp_t *l)
{
	free(l->rlo);
	free(l->rhi);
	free(l->chi);
	free(l->obj);
	free(l->ia);
	free(l->ja);
	free(l->ar);
}

/* Rows of one node type (0 where the type has no GPU). */
typedef struct trows {
	int cpu, mem, dev, small, half;
	int *big; /* per big share size (index into sizes): 0 until used */
} trows_t;

typedef struct build {
	bctx_t *b;
	lp_t *l;
	trows_t *tr;
	int *sizes, nsizes; /* distinct big share sizes */
	int *class_row;     /* per class, 0 when it has no column */
} build_t;

static int size_index(const build_t *bd, int milli)
{
	for (int i = 0; i < bd->nsizes; i++)
		if (bd->sizes[i] == milli)
			return i;
	return -1;
}

static int big_row(build_t *bd, int k, int si)
{
	int *r = &bd->tr[k].big[si];
	if (*r == 0)
		*r = lp_row(bd->l, -HUGE_VAL, 0);
	return *r;
}

/* One column: count of class ci's pods on type k in a device role. dev =
 * devices it takes from the type's count; small = milli it adds to the
 * small-share devices; big_si/big_coef = its entry in a big-size row. */
static int add_col(build_t *bd, size_t ci, int k, double dev, double small, int big_row_id,
                   double big_coef, double half)
{
	const pclass_t *c = &bd->b->classes[ci];
	const sc__sim_pod_t *p = c->pod;
	lp_t *l = bd->l;
	int col = lp_col(l, (double)p->milli / SC_GPU_MILLI, (double)c->n);
	if (col < 0)
		return col;
	const trows_t *t = &bd->tr[k];
	int rc = lp_set(l, bd->class_row[ci], col, 1);
	if (rc == 0)
		rc = lp_set(l, t->cpu, col, (double)p->req.cpu_milli / 1000);
	if (rc == 0)
		rc = lp_set(l, t->mem, col, (double)p->req.memory / GIB);
	if (rc == 0 && dev != 0)
		rc = lp_set(l, t->dev, col, dev);
	if (rc == 0 && small != 0)
		rc = lp_set(l, t->small, col, small);
	if (rc == 0 && big_row_id > 0)
		rc = lp_set(l, big_row_id, col, big_coef);
	if (rc == 0 && half != 0)
		rc = lp_set(l, t->half, col, half);
	return rc;
}

/* The columns of class ci on type k: a CPU pod or whole-GPU pod one; a
 * big share one (its device, and the room it leaves beside it); a small
 * share one on small-share devices and one beside each big size it fits
 * next to. */
static int class_cols(build_t *bd, size_t ci, int k)
{
	const sc__sim_pod_t *p = bd->b->classes[ci].pod;
	const ntype_t *t = &bd->b->types[k];
	if (p->milli == 0)
		return add_col(bd, ci, k, 0, 0, 0, 0, 0);
	if (p->req.gpus > 0)
		return add_col(bd, ci, k, p->req.gpus, 0, 0, 0, 2 * p->req.gpus > t->gpus ? 1 : 0);
	int s = p->req.gpu_milli;
	if (s > BIG_SHARE) {
		int row = big_row(bd, k, size_index(bd, s));
		return row < 0 ? row : add_col(bd, ci, k, 1, 0, row, -(SC_GPU_MILLI - s), 0);
	}
	int rc = add_col(bd, ci, k, 0, s, 0, 0, 0);
	for (int si = 0; rc == 0 && si < bd->nsizes; si++) {
		if (s > SC_GPU_MILLI - bd->sizes[si])
			continue;
		int row = big_row(bd, k, si);
		rc = row < 0 ? row : add_col(bd, ci, k, 0, 0, row, s, 0);
	}
	return rc;
}

/* Big share sizes that some class can place somewhere. */
static int collect_sizes(build_t *bd)
{
	bctx_t *b = bd->b;
	bd->sizes = malloc((b->nclasses ? b->nclasses : 1) * sizeof(int));
	if (!bd->sizes)
		return SC_ENOMEM;
	for (size_t ci = 0; ci < b->nclasses; ci++) {
		const pclass_t *c = &b->classes[ci];
		int s = c->pod->req.gpus == 0 ? c->pod->req.gpu_milli : 0;
		if (s > BIG_SHARE && c->ntypes > 0 && size_index(bd, s) < 0)
			bd->sizes[bd->nsizes++] = s;
	}
	return 0;
}

static int type_rows(build_t *bd)
{
	bctx_t *b = bd->b;
	lp_t *l = bd->l;
	bd->tr = calloc((size_t)(b->ntypes ? b->ntypes : 1), sizeof(*bd->tr));
	if (!bd->tr)
		return SC_ENOMEM;
	for (int k = 0; k < b->ntypes; k++) {
		const ntype_t *t = &b->types[k];
		trows_t *r = &bd->tr[k];
		r->big = calloc((size_t)(bd->nsizes ? bd->nsizes : 1), sizeof(int));
		if (!r->big)
			return SC_ENOMEM;
		r->cpu = lp_row(l, -HUGE_VAL, (double)t->count * (double)t->cpu / 1000);
		r->mem = lp_row(l, -HUGE_VAL, (double)t->count * (double)t->mem / GIB);
		if (t->gpus > 0) {
			r->dev = lp_row(l, -HUGE_VAL, (double)t->count * t->gpus);
			r->small = lp_row(l, -HUGE_VAL, 0);
			r->half = lp_row(l, -HUGE_VAL, (double)t->count);
		}
		if (r->cpu < 0 || r->mem < 0 || r->dev < 0 || r->small < 0 || r->half < 0)
			return SC_ENOMEM;
		/* The small-share devices of this type: up to all of them. */
		if (t->gpus > 0) {
			int col = lp_col(l, 0, (double)t->count * t->gpus);
			int rc = col < 0 ? col : lp_set(l, r->dev, col, 1);
			if (rc == 0)
				rc = lp_set(l, r->small, col, -SC_GPU_MILLI);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

static int build_lp(build_t *bd)
{
	bctx_t *b = bd->b;
	int rc = collect_sizes(bd);
	if (rc == 0)
		rc = type_rows(bd);
	if (rc < 0)
		return rc;
	bd->class_row = calloc(b->nclasses ? b->nclasses : 1, sizeof(int));
	if (!bd->class_row)
		return SC_ENOMEM;
	for (size_t ci = 0; ci < b->nclasses; ci++) {
		const pclass_t *c = &b->classes[ci];
		if (c->ntypes == 0)
			continue;
		bd->class_row[ci] = lp_row(bd->l, (double)c->forced, (double)c->n);
		if (bd->class_row[ci] < 0)
			return SC_ENOMEM;
		for (int i = 0; i < c->ntypes && rc == 0; i++)
			rc = class_cols(bd, ci, c->types[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void build_free(build_t *bd)
{
	for (int k = 0; bd->tr && k < bd->b->ntypes; k++)
		free(bd->tr[k].big);
	free(bd->tr);
	free(bd->sizes);
	free(bd->class_row);
}

/* The LP's optimum bounded from above by weak duality: for any row
 * multipliers y, c.x = y.(Ax) + (c - A'y).x, and each term is at most its
 * value at the bound its sign points to. A multiplier that points to an
 * absent bound is set to 0 (still a valid y). */
static double dual_bound(const lp_t *l, double *y)
{
	for (int r = 1; r <= l->nrows; r++)
		if ((y[r] > 0 && l->rhi[r] == HUGE_VAL) || (y[r] < 0 && l->rlo[r] == -HUGE_VAL))
			y[r] = 0;
	long double *d = calloc((size_t)l->ncols + 1, sizeof(long double));
	if (!d)
		return HUGE_VAL;
	for (int j = 1; j <= l->ncols; j++)
		d[j] = l->obj[j];
	for (int e = 1; e <= l->nnz; e++)
		d[l->ja[e]] -= (long double)l->ar[e] * y[l->ia[e]];
	long double z = 0;
	for (int r = 1; r <= l->nrows; r++)
		if (y[r] != 0)
			z += y[r] > 0 ? (long double)y[r] * l->rhi[r]
			              : (long double)y[r] * l->rlo[r];
	for (int j = 1; j <= l->ncols; j++)
		if (d[j] > 0)
			z += d[j] * l->chi[j];
	free(d);
	return (double)z;
}

/* GLPK keeps its environment per thread at best (depending on how it was
 * built), so solves are serialised; each one frees the environment it
 * made, so no thread leaves GLPK memory behind. */
static pthread_mutex_t glpk_mu = PTHREAD_MUTEX_INITIALIZER;

/* Solves max obj.x with the given lower bounds of the class rows and
 * returns the dual bound in GPUs through *z. */
static int solve(const lp_t *l, double *z, char *msg, size_t msgsize)
{
	double *y = malloc((size_t)(l->nrows + 1) * sizeof(double));
	if (!y)
		return SC_ENOMEM;
	pthread_mutex_lock(&glpk_mu);
	glp_term_out(GLP_OFF);
	glp_prob *lp = glp_create_prob();
	glp_set_obj_dir(lp, GLP_MAX);
	glp_add_rows(lp, l->nrows);
	glp_add_cols(lp, l->ncols);
	for (int r = 1; r <= l->nrows; r++) {
		bool lo = l->rlo[r] != -HUGE_VAL, hi = l->rhi[r] != HUGE_VAL;
		int type = lo && hi ? (l->rlo[r] == l->rhi[r] ? GLP_FX : GLP_DB)
		           : hi     ? GLP_UP
		           : lo     ? GLP_LO
		                    : GLP_FR;
		glp_set_row_bnds(lp, r, type, lo ? l->rlo[r] : 0, hi ? l->rhi[r] : 0);
	}
	for (int j = 1; j <= l->ncols; j++) {
		glp_set_col_bnds(lp, j, l->chi[j] > 0 ? GLP_DB : GLP_FX, 0, l->chi[j]);
		glp_set_obj_coef(lp, j, l->obj[j]);
	}
	glp_load_matrix(lp, l->nnz, l->ia, l->ja, l->ar);
	glp_scale_prob(lp, GLP_SF_AUTO);
	glp_smcp parm;
	glp_init_smcp(&parm);
	parm.msg_lev = GLP_MSG_OFF;
	int rc = glp_simplex(lp, &parm);
	int status = glp_get_status(lp);
	for (int r = 1; r <= l->nrows; r++)
		y[r] = glp_get_row_dual(lp, r);
	double primal = glp_get_obj_val(lp);
	glp_delete_prob(lp);
	glp_free_env();
	pthread_mutex_unlock(&glpk_mu);
	if (rc != 0 || status != GLP_OPT) {
		snprintf(msg, msgsize, "bound: the LP solver failed (glp_simplex %d, status %d)",
		         rc, status);
		free(y);
		return SC_EINVAL;
	}
	*z = dual_bound(l, y);
	free(y);
	/* The dual bound is at least the primal optimum; far above it, the
	 * duals were not optimal and the bound would be needlessly loose. */
	if (!(*z >= primal - 1e-6) || *z > primal + 1e-3 * (1 + fabs(primal))) {
		snprintf(msg, msgsize, "bound: dual bound %.6f disagrees with the LP optimum %.6f",
		         *z, primal);
		return SC_EINVAL;
	}
	return 0;
}

/* ---- the whole -------------------------------------------------------- */

static void bctx_free(bctx_t *b)
{
	for (size_t ci = 0; b->classes && ci < b->nclasses; ci++) {
		pclass_t *c = &b->classes[ci];
		free(c->types);
		free(c->rank);
		free(c->value);
		free(c->rhs);
		free(c->power);
	}
	free(b->classes);
	free(b->cls);
	free(b->types);
	free(b->allowed);
	free(b->order);
	free(b->forced);
	free(b->fits);
}

static int bctx_init(bctx_t *b, const sc_sim_workload_t *w, const sc_sim_config_t *c)
{
	memset(b, 0, sizeof(*b));
	b->w = w;
	int rc = sc__sim_arrivals(w, c, &b->order, &b->n);
	if (rc == 0)
		rc = build_types(b);
	if (rc == 0)
		rc = build_classes(b);
	if (rc < 0)
		return rc;
	b->forced = calloc(b->n ? b->n : 1, sizeof(bool));
	b->fits = calloc(b->n ? b->n : 1, sizeof(bool));
	if (!b->forced || !b->fits)
		return SC_ENOMEM;
	return find_forced(b);
}

int sc__sim_forced(const sc_sim_workload_t *w, const sc_sim_config_t *c, bool *forced, bool *fits,
                   size_t n)
{
	bctx_t b;
	int rc = bctx_init(&b, w, c);
	if (rc == 0 && n != b.n)
		rc = SC_EINVAL;
	if (rc == 0) {
		memcpy(forced, b.forced, n * sizeof(bool));
		memcpy(fits, b.fits, n * sizeof(bool));
	}
	bctx_free(&b);
	return rc;
}

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Summary figures of the arrivals: demand, forced demand, the first pod
 * that is not forced. */
static void summarise(const bctx_t *b, sc_sim_bound_t *out)
{
	double cap = (double)b->w->total_gpus * SC_GPU_MILLI, arrived = 0, forced = 0;
	out->first_unforced_pct = NAN;
	for (size_t i = 0; i < b->n; i++) {
		const sc__sim_pod_t *p = b->order[i];
		arrived += (double)p->milli;
		if (b->forced[i]) {
			forced += (double)p->milli;
			out->forced_pods++;
		} else if (!b->fits[i]) {
			out->never_fit_pods++;
		} else if (isnan(out->first_unforced_pct)) {
			out->first_unforced_pct = 100 * (arrived - (double)p->milli) / cap;
		}
	}
	out->pods = b->n;
	out->arrived_pct = 100 * arrived / cap;
	out->forced_pct = 100 * forced / cap;
}

/* Percent of capacity, rounded up to 0.01. Allocations are whole milli,
 * so the most any policy places is the LP value in milli rounded down
 * (after a margin far above the dual sum's rounding error); that integer
 * over the capacity, rounded up, is printed, and so stays a bound. It is
 * never above the capacity or the arrived demand, which bound it too. */
static double pct_up(double gpus, int total, int64_t arrived_milli)
{
	double milli = gpus * SC_GPU_MILLI;
	int64_t m = (int64_t)floor(milli + 1e-6 + 1e-9 * fabs(milli));
	int64_t cap = (int64_t)total * SC_GPU_MILLI;
	m = m < cap ? m : cap;
	m = m < arrived_milli ? m : arrived_milli;
	m = m > 0 ? m : 0;
	return (double)((m * 10000 + cap - 1) / cap) / 100;
}

int sc_sim_bound(const sc_sim_workload_t *w, const sc_sim_config_t *c, sc_sim_bound_t *out,
                 char *msg, size_t msgsize)
{
	double t0 = now_seconds();
	memset(out, 0, sizeof(*out));
	snprintf(out->workload, sizeof(out->workload), "%s", w->name);
	out->seed = c->seed;
	bctx_t b;
	lp_t l = {0};
	build_t bd = {.b = &b, .l = &l};
	int rc = bctx_init(&b, w, c);
	if (rc == 0)
		rc = build_lp(&bd);
	double z = 0, z_off = 0;
	if (rc == 0)
		rc = solve(&l, &z, msg, msgsize);
	if (rc == 0) {
		/* The offline relaxation: the same without forced pods. */
		for (size_t ci = 0; ci < b.nclasses; ci++)
			if (bd.class_row[ci] > 0)
				l.rlo[bd.class_row[ci]] = 0;
		rc = solve(&l, &z_off, msg, msgsize);
	}
	if (rc == 0) {
		summarise(&b, out);
		int64_t arrived = 0;
		for (size_t i = 0; i < b.n; i++)
			arrived += b.order[i]->milli;
		out->bound_pct = pct_up(z, w->total_gpus, arrived);
		out->offline_pct = pct_up(z_off, w->total_gpus, arrived);
		out->lp_rows = l.nrows;
		out->lp_cols = l.ncols;
	}
	build_free(&bd);
	lp_free(&l);
	bctx_free(&b);
	out->wall_seconds = now_seconds() - t0;
	return rc;
}
