/* Fragmentation measure and its memo. See frag.h for the definition. */
#include "sim/frag.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "starcloud/error.h"

/* ---- typical pods ----------------------------------------------------- */

static int64_t shape_cpu(const sc_pod_shape_t *s)
{
	return s->cpu > 0 ? s->cpu : 100;
}

/* Orders shapes so equal ones are adjacent; also the tie order of the
 * typical list (larger first), as in the reference simulator. */
static int shape_cmp(const sc_pod_shape_t *a, const sc_pod_shape_t *b)
{
	int64_t ca = shape_cpu(a), cb = shape_cpu(b);
	if (ca != cb)
		return ca < cb ? -1 : 1;
	if (a->milli != b->milli)
		return a->milli < b->milli ? -1 : 1;
	if (a->num != b->num)
		return a->num < b->num ? -1 : 1;
	if (a->spec != b->spec)
		return a->spec < b->spec ? -1 : 1;
	return 0;
}

static int shape_qcmp(const void *a, const void *b)
{
	return shape_cmp(a, b);
}

static int typical_qcmp(const void *a, const void *b)
{
	const sc_typical_t *x = a, *y = b;
	if (x->p != y->p)
		return x->p > y->p ? -1 : 1;
	return -shape_cmp(&x->shape, &y->shape);
}

int sc_typical_pods(const sc_pod_shape_t *pods, size_t n, double coverage, sc_typical_t **out)
{
	*out = NULL;
	if (n == 0)
		return 0;
	sc_pod_shape_t *sorted = malloc(n * sizeof(*sorted));
	sc_typical_t *t = malloc(n * sizeof(*t));
	if (!sorted || !t) {
		free(sorted);
		free(t);
		return SC_ENOMEM;
	}
	memcpy(sorted, pods, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), shape_qcmp);
	size_t nt = 0;
	for (size_t i = 0; i < n; i++) {
		if (nt > 0 && shape_cmp(&t[nt - 1].shape, &sorted[i]) == 0) {
			t[nt - 1].p += 1;
			continue;
		}
		t[nt].shape = sorted[i];
		t[nt].shape.cpu = shape_cpu(&sorted[i]);
		t[nt++].p = 1;
	}
	free(sorted);
	qsort(t, nt, sizeof(*t), typical_qcmp);
	/* Take shapes one at a time until the covered count reaches the
	 * threshold, then renormalise what was taken. */
	double want = coverage * (double)n, cum = 0;
	size_t k = 0;
	while (k < nt && cum < want)
		cum += t[k++].p;
	for (size_t i = 0; i < k; i++)
		t[i].p /= cum;
	*out = t;
	return (int)k;
}

/* ---- the measure ------------------------------------------------------ */

double sc_frag_compute(const sc_typical_t *t, size_t nt, int model, int64_t cpu_left,
                       const int16_t *gpu_left, int ngpu)
{
	int64_t total = 0;
	for (int d = 0; d < ngpu; d++)
		total += gpu_left[d];
	if (total == 0)
		return 0;
	uint64_t mbit = model >= 0 && model < 64 ? (uint64_t)1 << model : 0;
	double acc = 0;
	for (size_t k = 0; k < nt; k++) {
		const sc_pod_shape_t *s = &t[k].shape;
		/* CPU pods and pods that may not use this model leave all
		 * idle GPU unusable. */
		if (s->milli == 0 || !(s->models & mbit)) {
			acc += t[k].p * (double)total;
			continue;
		}
		int fit = 0;
		int64_t small = 0;
		for (int d = 0; d < ngpu; d++) {
			if (gpu_left[d] >= s->milli)
				fit++;
			else
				small += gpu_left[d];
		}
		if (fit >= s->num && cpu_left >= s->cpu)
			acc += t[k].p * (double)small;
		else
			acc += t[k].p * (double)total;
	}
	return acc;
}

/* ---- gap waste ------------------------------------------------------ */

void sc_gap_waste(const sc_typical_t *t, size_t nt, double fill_rate, double out[SC_GPU_MILLI + 1])
{
	/* Bottom-up: out[g] needs only out[g - milli] for milli > 0. */
	for (int g = 0; g <= SC_GPU_MILLI; g++) {
		double fit = 0, after = 0;
		for (size_t k = 0; k < nt; k++) {
			const sc_pod_shape_t *s = &t[k].shape;
			if (s->num != 1 || s->milli <= 0 || s->milli >= SC_GPU_MILLI ||
			    s->milli > g)
				continue;
			fit += t[k].p;
			after += t[k].p * out[g - s->milli];
		}
		if (fit <= 0) {
			out[g] = g;
			continue;
		}
		double filled = 1.0 - exp(-fill_rate * fit);
		out[g] = filled * after / fit + (1.0 - filled) * g;
	}
}

/* ---- memo --------------------------------------------------------------- */

struct sc_frag {
	sc_typical_t *typical;
	size_t ntypical;
	sc_state_memo_t memo;
	double *node; /* current value per node */
	size_t nnodes;
	double total;
};

sc_frag_t *sc_frag_new(const sc_typical_t *typical, size_t ntypical, size_t nnodes)
{
	sc_frag_t *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->typical = malloc((ntypical ? ntypical : 1) * sizeof(*typical));
	f->node = calloc(nnodes ? nnodes : 1, sizeof(double));
	if (!f->typical || !f->node || sc_state_memo_init(&f->memo, 4096) < 0) {
		sc_frag_free(f);
		return NULL;
	}
	if (ntypical)
		memcpy(f->typical, typical, ntypical * sizeof(*typical));
	f->ntypical = ntypical;
	f->nnodes = nnodes;
	return f;
}

void sc_frag_free(sc_frag_t *f)
{
	if (!f)
		return;
	free(f->typical);
	sc_state_memo_release(&f->memo);
	free(f->node);
	free(f);
}

static uint64_t key_hash(const sc_state_key_t *k)
{
	/* FNV-1a over the bytes, then a final mix for the low bits. */
	const unsigned char *p = (const unsigned char *)k;
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < sizeof(*k); i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	return h ^ (h >> 33);
}

void sc_state_key(sc_state_key_t *k, int model, int64_t cpu, const int16_t *gpu, int ngpu)
{
	memset(k, 0, sizeof(*k));
	k->cpu = cpu;
	k->model = (int16_t)model;
	k->ngpu = (int16_t)ngpu;
	/* Insertion sort: at most SC_MAX_GPUS entries. */
	for (int i = 0; i < ngpu; i++) {
		int16_t v = gpu[i];
		int j = i;
		while (j > 0 && k->gpu[j - 1] < v) {
			k->gpu[j] = k->gpu[j - 1];
			j--;
		}
		k->gpu[j] = v;
	}
}

static sc_state_slot_t *find_slot(sc_state_slot_t *slots, size_t cap, const sc_state_key_t *k)
{
	size_t i = (size_t)key_hash(k) & (cap - 1);
	while (slots[i].used && memcmp(&slots[i].key, k, sizeof(*k)) != 0)
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

int sc_state_memo_init(sc_state_memo_t *m, size_t cap)
{
	memset(m, 0, sizeof(*m));
	m->slots = calloc(cap, sizeof(*m->slots));
	if (!m->slots)
		return SC_ENOMEM;
	m->cap = cap;
	return 0;
}

void sc_state_memo_release(sc_state_memo_t *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->count = 0;
}

sc_state_slot_t *sc_state_memo_slot(sc_state_memo_t *m, const sc_state_key_t *k)
{
	return find_slot(m->slots, m->cap, k);
}

static bool grow(sc_state_memo_t *m)
{
	size_t ncap = m->cap * 2;
	sc_state_slot_t *ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return false;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].used)
			*find_slot(ns, ncap, &m->slots[i].key) = m->slots[i];
	free(m->slots);
	m->slots = ns;
	m->cap = ncap;
	return true;
}

void sc_state_memo_added(sc_state_memo_t *m)
{
	if (++m->count * 2 > m->cap && !grow(m))
		m->oom = true;
}

double sc_frag_state(sc_frag_t *f, int model, int64_t cpu_left, const int16_t *gpu_left, int ngpu)
{
	if (f->memo.oom)
		return sc_frag_compute(f->typical, f->ntypical, model, cpu_left, gpu_left, ngpu);
	sc_state_key_t k;
	sc_state_key(&k, model, cpu_left, gpu_left, ngpu);
	sc_state_slot_t *s = sc_state_memo_slot(&f->memo, &k);
	if (s->used)
		return s->value;
	double v = sc_frag_compute(f->typical, f->ntypical, model, cpu_left, k.gpu, ngpu);
	s->key = k;
	s->value = v;
	s->used = true;
	sc_state_memo_added(&f->memo);
	return v;
}

/* The state after typical pod s lands on it, or false when s does not
 * change the state (a share pod) or does not fit (too little CPU, another
 * model, too few free devices). A CPU pod takes only CPU: on a node whose
 * CPU is just enough for its free GPUs, that is what strands them. */
static bool take_typical(const sc_pod_shape_t *s, int model, int64_t *cpu, int16_t *gpu, int ngpu)
{
	if (*cpu < s->cpu)
		return false;
	if (s->milli == 0) {
		*cpu -= s->cpu;
		return true;
	}
	uint64_t mbit = model >= 0 && model < 64 ? (uint64_t)1 << model : 0;
	if (s->milli < SC_GPU_MILLI || !(s->models & mbit))
		return false;
	*cpu -= s->cpu;
	int need = s->num;
	for (int d = 0; d < ngpu && need > 0; d++)
		if (gpu[d] == SC_GPU_MILLI) {
			gpu[d] = 0;
			need--;
		}
	return need == 0;
}

double sc_frag_lookahead(sc_frag_t *f, int model, int64_t cpu_left, const int16_t *gpu_left,
                         int ngpu)
{
	sc_state_key_t k;
	sc_state_key(&k, model, cpu_left, gpu_left, ngpu);
	k.pad = 1; /* a separate value space in the same memo */
	sc_state_slot_t *sl = f->memo.oom ? NULL : sc_state_memo_slot(&f->memo, &k);
	if (sl && sl->used)
		return sl->value;
	double now = sc_frag_state(f, model, cpu_left, gpu_left, ngpu), next = 0;
	for (size_t t = 0; t < f->ntypical; t++) {
		int16_t g[SC_MAX_GPUS];
		int64_t cpu = cpu_left;
		memcpy(g, k.gpu, sizeof(g));
		next += f->typical[t].p * (take_typical(&f->typical[t].shape, model, &cpu, g, ngpu)
		                               ? sc_frag_state(f, model, cpu, g, ngpu)
		                               : now);
	}
	double v = now + next;
	if (f->memo.oom)
		return v;
	/* sc_frag_state may have grown the table: find the slot again. */
	sl = sc_state_memo_slot(&f->memo, &k);
	sl->key = k;
	sl->value = v;
	sl->used = true;
	sc_state_memo_added(&f->memo);
	return v;
}

const sc_typical_t *sc_frag_typical(const sc_frag_t *f, size_t *n)
{
	*n = f->ntypical;
	return f->typical;
}

double sc_frag_node(const sc_frag_t *f, uint32_t i)
{
	return i < f->nnodes ? f->node[i] : 0;
}

void sc_frag_update(sc_frag_t *f, const sc_node_view_t *n)
{
	if (n->index >= f->nnodes)
		return;
	double v = sc_frag_state(f, n->model, n->cpu_free, n->gpu_free, n->gpu_count);
	f->total += v - f->node[n->index];
	f->node[n->index] = v;
}

double sc_frag_total(const sc_frag_t *f)
{
	return f->total;
}

size_t sc_frag_memo_size(const sc_frag_t *f)
{
	return f->memo.count;
}
