/* The transformer: checkpoint reading, the forward pass, sampling, and a
 * generator of tiny checkpoints for tests. Written from the format
 * description in model.h; see docs/WORKER.md. */
#include "worker/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "starcloud/error.h"

/* ---------------------------------------------------------------------
 * Kernels
 * ------------------------------------------------------------------- */

void sc__rmsnorm(float *out, const float *x, const float *w, int n)
{
	double ss = 0;
	for (int i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	float scale = (float)(1.0 / sqrt(ss / n + 1e-5));
	for (int i = 0; i < n; i++)
		out[i] = w[i] * (x[i] * scale);
}

/* Eight independent partial sums per row: the compiler may keep them in
 * one vector register without reassociating a single sum (which strict
 * IEEE arithmetic forbids), about four times faster than one running sum.
 * The order of additions is fixed, so results stay deterministic, and the
 * batched product below uses this same function: a token's result does not
 * depend on the batch it was computed in. */
static inline float reduce8(const float *lane)
{
	return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
	       ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

static inline float dot(const float *row, const float *x, int n)
{
	float lane[8] = {0};
	int j = 0;
	for (; j + 8 <= n; j += 8)
		for (int k = 0; k < 8; k++)
			lane[k] += row[j + k] * x[j + k];
	float acc = reduce8(lane);
	for (; j < n; j++)
		acc += row[j] * x[j];
	return acc;
}

/* Four rows against one vector at once: the same sums as four dot() calls,
 * term for term (lane k of a row adds row[j + k] * x[j + k] for j = 0, 8,
 * 16, ...; then the same reduction and tail), with eight independent
 * accumulators instead of two. With many vectors per row block (a batch)
 * that is about 1.5 times the multiply-adds per second of dot(); with one
 * vector the four row streams cost more than they save, so sc__matmul and
 * small batches keep dot(). SSE2 is part of every x86-64; elsewhere dot()
 * is used throughout. */
#ifdef __SSE2__
#include <emmintrin.h>
#define SC_HAVE_DOT4 1

static inline void dot4(const float *w, size_t n, const float *x, float *o)
{
	const float *r0 = w, *r1 = w + n, *r2 = w + 2 * n, *r3 = w + 3 * n;
	__m128 a0 = _mm_setzero_ps(), b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0, a3 = a0, b3 = a0;
	size_t j = 0;
	for (; j + 8 <= n; j += 8) {
		__m128 xl = _mm_loadu_ps(x + j), xh = _mm_loadu_ps(x + j + 4);
		a0 = _mm_add_ps(a0, _mm_mul_ps(_mm_loadu_ps(r0 + j), xl));
		b0 = _mm_add_ps(b0, _mm_mul_ps(_mm_loadu_ps(r0 + j + 4), xh));
		a1 = _mm_add_ps(a1, _mm_mul_ps(_mm_loadu_ps(r1 + j), xl));
		b1 = _mm_add_ps(b1, _mm_mul_ps(_mm_loadu_ps(r1 + j + 4), xh));
		a2 = _mm_add_ps(a2, _mm_mul_ps(_mm_loadu_ps(r2 + j), xl));
		b2 = _mm_add_ps(b2, _mm_mul_ps(_mm_loadu_ps(r2 + j + 4), xh));
		a3 = _mm_add_ps(a3, _mm_mul_ps(_mm_loadu_ps(r3 + j), xl));
		b3 = _mm_add_ps(b3, _mm_mul_ps(_mm_loadu_ps(r3 + j + 4), xh));
	}
	const float *rr[4] = {r0, r1, r2, r3};
	__m128 lo[4] = {a0, a1, a2, a3}, hi[4] = {b0, b1, b2, b3};
	for (int i = 0; i < 4; i++) {
		float lane[8];
		_mm_storeu_ps(lane, lo[i]);
		_mm_storeu_ps(lane + 4, hi[i]);
		float acc = reduce8(lane);
		for (size_t k = j; k < n; k++)
			acc += rr[i][k] * x[k];
		o[i] = acc;
	}
}
#endif

void sc__matmul(float *out, const float *x, const float *w, int n, int d)
{
	for (int i = 0; i < d; i++)
		out[i] = dot(w + (size_t)i * n, x, n);
}

/* Rows are the outer loop: each block of rows of W is read from memory
 * once for the whole batch, which is what makes a batched step cheaper
 * than nb single ones. */
void sc__matmul_batch(float *const *out, const float *const *x, const float *w, int n, int d,
                      int nb)
{
	int i = 0;
#ifdef SC_HAVE_DOT4
	if (nb >= 8)
		for (; i + 4 <= d; i += 4) {
			const float *r = w + (size_t)i * n;
			for (int b = 0; b < nb; b++)
				dot4(r, (size_t)n, x[b], out[b] + i);
		}
#endif
	for (; i + 2 <= d; i += 2) {
		const float *r0 = w + (size_t)i * n, *r1 = r0 + n;
		for (int b = 0; b < nb; b++) {
			out[b][i] = dot(r0, x[b], n);
			out[b][i + 1] = dot(r1, x[b], n);
		}
	}
	for (; i < d; i++)
		for (int b = 0; b < nb; b++)
			out[b][i] = dot(w + (size_t)i * n, x[b], n);
}

void sc__softmax(float *x, int n)
{
	float max = x[0];
	for (int i = 1; i < n; i++)
		if (x[i] > max)
			max = x[i];
	float sum = 0;
	for (int i = 0; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	for (int i = 0; i < n; i++)
		x[i] /= sum;
}

void sc__rope(float *v, int n, int head_size, int pos)
{
	for (int i = 0; i + 1 < n; i += 2) {
		int hd = i % head_size;
		float freq = powf(10000.0f, -(float)hd / (float)head_size);
		float a = (float)pos * freq;
		float c = cosf(a), s = sinf(a);
		float v0 = v[i], v1 = v[i + 1];
		v[i] = v0 * c - v1 * s;
		v[i + 1] = v0 * s + v1 * c;
	}
}

int sc__argmax(const float *x, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

uint64_t sc__fnv1a(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return h;
}

/* splitmix64: a tiny, well-mixed generator for weights and sampling. */
static uint64_t mix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static float unit_float(uint64_t *state)
{
	return (float)(mix64(state) >> 40) / (float)(1u << 24); /* [0, 1) */
}

/* qsort_r comparator of token ids (ctx = the probabilities). */
static int by_prob_desc(const void *a, const void *b, void *ctx)
{
	const float *probs = ctx;
	int x = *(const int *)a, y = *(const int *)b;
	if (probs[x] != probs[y])
		return probs[x] > probs[y] ? -1 : 1;
	return x - y;
}

/* Draws from the nucleus of probs (softmaxed): sorts the token ids by
 * probability, keeps the shortest prefix whose mass reaches top_p and
 * draws within it, scaled to its mass. Only tokens above the flat
 * share (1 - top_p) / (n - 1) can be in a nucleus that is not the whole
 * vocabulary, so only those are sorted (llama2.c's cut). */
static int sample_nucleus(const float *probs, int n, float top_p, float r)
{
	int *idx = sc_malloc((size_t)n * sizeof(int));
	if (!idx)
		return -1;
	float cut = n > 1 ? (1.0f - top_p) / (float)(n - 1) : 0;
	int m = 0;
	for (int i = 0; i < n; i++)
		if (probs[i] >= cut)
			idx[m++] = i;
	qsort_r(idx, (size_t)m, sizeof(int), by_prob_desc, (void *)probs);
	float mass = 0;
	int k = 0;
	while (k < m && (k == 0 || mass < top_p))
		mass += probs[idx[k++]];
	float target = r * mass, cdf = 0;
	int pick = idx[k - 1];
	for (int i = 0; i < k; i++) {
		cdf += probs[idx[i]];
		if (target < cdf) {
			pick = idx[i];
			break;
		}
	}
	free(idx);
	return pick;
}

int sc_sample(float *logits, int n, float temperature, float top_p, uint64_t seed, int step)
{
	if (temperature <= 0)
		return sc__argmax(logits, n);
	for (int i = 0; i < n; i++)
		logits[i] /= temperature;
	sc__softmax(logits, n);
	uint64_t st = seed * 0x2545f4914f6cdd1dull + (uint64_t)step;
	float r = unit_float(&st), cdf = 0;
	if (top_p > 0 && top_p < 1)
		return sample_nucleus(logits, n, top_p, r);
	for (int i = 0; i < n; i++) {
		cdf += logits[i];
		if (r < cdf)
			return i;
	}
	return n - 1;
}

float sc_logprobs(const float *logits, int n, int token, int k, int *top_ids, float *top_lp)
{
	float max = logits[0];
	for (int i = 1; i < n; i++)
		if (logits[i] > max)
			max = logits[i];
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += exp((double)(logits[i] - max));
	float lse = max + (float)log(sum);
	/* The k best by insertion: k is small (OpenAI allows 20), n is not. */
	int have = 0;
	for (int i = 0; i < n && k > 0; i++) {
		float v = logits[i];
		if (have == k && v <= logits[top_ids[k - 1]])
			continue;
		int at = have < k ? have++ : k - 1;
		while (at > 0 && logits[top_ids[at - 1]] < v) {
			top_ids[at] = top_ids[at - 1];
			at--;
		}
		top_ids[at] = i;
	}
	for (int i = 0; i < have; i++)
		top_lp[i] = logits[top_ids[i]] - lse;
	return logits[token] - lse;
}

/* ---------------------------------------------------------------------
 * Checkpoints
 * ------------------------------------------------------------------- */

static int config_valid(const sc_model_config_t *c)
{
	if (c->dim <= 0 || c->dim > SC_MODEL_MAX_DIM || c->hidden_dim <= 0 ||
	    c->hidden_dim > 4 * SC_MODEL_MAX_DIM || c->n_layers <= 0 ||
	    c->n_layers > SC_MODEL_MAX_LAYERS || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
	    c->vocab_size <= 0 || c->vocab_size > SC_MODEL_MAX_VOCAB || c->seq_len <= 1 ||
	    c->seq_len > SC_MODEL_MAX_SEQ)
		return 0;
	if (c->dim % c->n_heads != 0 || c->n_heads % c->n_kv_heads != 0)
		return 0;
	return (c->dim / c->n_heads) % 2 == 0; /* RoPE rotates pairs */
}

/* Floats in every tensor, in file order, for a valid config. */
static uint64_t weight_floats(const sc_model_config_t *c)
{
	uint64_t d = (uint64_t)c->dim, h = (uint64_t)c->hidden_dim, L = (uint64_t)c->n_layers;
	uint64_t v = (uint64_t)c->vocab_size, hs = d / (uint64_t)c->n_heads;
	uint64_t kv = hs * (uint64_t)c->n_kv_heads;
	uint64_t n = v * d;                                        /* embedding */
	n += L * (d + d * d + 2 * kv * d + d * d + d + 3 * h * d); /* layers */
	n += d;                                                    /* final norm */
	n += (uint64_t)c->seq_len * hs;                            /* two half tables */
	if (!c->shared_classifier)
		n += v * d;
	return n;
}

/* Bytes of a checkpoint with this header (0 when the header is invalid). */
static uint64_t model_file_size(const sc_model_config_t *c)
{
	if (!config_valid(c))
		return 0;
	return 7 * 4 + weight_floats(c) * 4;
}

static void set_err(char *err, size_t errsz, const char *msg)
{
	if (err && errsz)
		snprintf(err, errsz, "%s", msg);
}

static void map_weights(sc_model_t *m)
{
	const sc_model_config_t *c = &m->cfg;
	size_t d = (size_t)c->dim, h = (size_t)c->hidden_dim, L = (size_t)c->n_layers;
	size_t kv = (size_t)m->kv_dim;
	const float *p = m->data;
	m->emb = p, p += (size_t)c->vocab_size * d;
	m->rms_att = p, p += L * d;
	m->wq = p, p += L * d * d;
	m->wk = p, p += L * kv * d;
	m->wv = p, p += L * kv * d;
	m->wo = p, p += L * d * d;
	m->rms_ffn = p, p += L * d;
	m->w1 = p, p += L * h * d;
	m->w2 = p, p += L * d * h;
	m->w3 = p, p += L * h * d;
	m->rms_final = p, p += d;
	p += (size_t)c->seq_len * (size_t)m->head_size; /* legacy RoPE tables */
	m->wcls = c->shared_classifier ? m->emb : p;
}

int sc_model_load_mem(const void *data, size_t len, sc_model_t **out, char *err, size_t errsz)
{
	int32_t hdr[7];
	if (len < sizeof(hdr)) {
		set_err(err, errsz, "checkpoint: shorter than its 28-byte header");
		return SC_EPARSE;
	}
	memcpy(hdr, data, sizeof(hdr));
	sc_model_config_t c = {hdr[0], hdr[1], hdr[2], hdr[3], hdr[4], hdr[5], hdr[6], 1};
	if (c.vocab_size < 0 && c.vocab_size != INT32_MIN) {
		c.vocab_size = -c.vocab_size;
		c.shared_classifier = 0;
	}
	uint64_t want = model_file_size(&c);
	if (!want) {
		set_err(err, errsz,
		        "checkpoint: invalid header (dim, hidden_dim, n_layers, "
		        "n_heads, n_kv_heads, vocab_size, seq_len)");
		return SC_ERANGE;
	}
	if (want != len) {
		char msg[160];
		snprintf(msg, sizeof(msg), "checkpoint: %zu bytes, the header implies %llu%s", len,
		         (unsigned long long)want, len < want ? " (truncated)" : "");
		set_err(err, errsz, msg);
		return SC_EPARSE;
	}
	sc_model_t *m = sc_calloc(1, sizeof(*m));
	if (!m || !(m->data = sc_malloc(len - sizeof(hdr)))) {
		free(m);
		set_err(err, errsz, "checkpoint: out of memory");
		return SC_ENOMEM;
	}
	memcpy(m->data, (const char *)data + sizeof(hdr), len - sizeof(hdr));
	m->cfg = c;
	m->head_size = c.dim / c.n_heads;
	m->kv_dim = m->head_size * c.n_kv_heads;
	m->fingerprint = sc__fnv1a(SC_FNV_INIT, data, len);
	map_weights(m);
	*out = m;
	return 0;
}

int sc_model_load_file(const char *path, sc_model_t **out, char *err, size_t errsz)
{
	char msg[256];
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(msg, sizeof(msg), "checkpoint %s: cannot open", path);
		set_err(err, errsz, msg);
		return SC_EIO;
	}
	int rc = SC_EIO;
	char *buf = NULL;
	long size = -1;
	if (fseek(f, 0, SEEK_END) == 0)
		size = ftell(f);
	if (size < 0 || (uint64_t)size > SC_MODEL_MAX_FILE || fseek(f, 0, SEEK_SET) != 0) {
		snprintf(msg, sizeof(msg), "checkpoint %s: unreadable or larger than 4 GiB", path);
		set_err(err, errsz, msg);
		goto out;
	}
	buf = sc_malloc((size_t)size + 1);
	if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
		snprintf(msg, sizeof(msg), "checkpoint %s: read failed", path);
		set_err(err, errsz, msg);
		goto out;
	}
	rc = sc_model_load_mem(buf, (size_t)size, out, err, errsz);
out:
	free(buf);
	fclose(f);
	return rc;
}

void sc_model_free(sc_model_t *m)
{
	if (!m)
		return;
	free(m->data);
	free(m);
}

/* Fills n floats uniformly in [-scale, scale). */
static void fill_uniform(float *p, size_t n, float scale, uint64_t *st)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unit_float(st) * 2.0f - 1.0f) * scale;
}

int sc_model_gen(const sc_model_gen_t *g, void **buf, size_t *len)
{
	sc_model_config_t c = g->cfg;
	if (c.hidden_dim == 0)
		c.hidden_dim = ((c.dim * 8 / 3) + 7) / 8 * 8;
	uint64_t size = model_file_size(&c);
	if (!size || size > ((uint64_t)1 << 31))
		return SC_EINVAL;
	char *p = sc_malloc((size_t)size);
	if (!p)
		return SC_ENOMEM;
	int32_t hdr[7] = {c.dim,        c.hidden_dim,
	                  c.n_layers,   c.n_heads,
	                  c.n_kv_heads, c.shared_classifier ? c.vocab_size : -c.vocab_size,
	                  c.seq_len};
	memcpy(p, hdr, sizeof(hdr));
	sc_model_t tmp = {.cfg = c};
	tmp.head_size = c.dim / c.n_heads;
	tmp.kv_dim = tmp.head_size * c.n_kv_heads;
	tmp.data = (float *)(p + sizeof(hdr));
	map_weights(&tmp);
	uint64_t st = g->seed;
	size_t nf = (size_t)weight_floats(&c);
	/* Matrices get 1/sqrt(fan_in) so activations stay O(1); norms are 1. */
	fill_uniform(tmp.data, nf, 1.0f / sqrtf((float)c.dim), &st);
	size_t d = (size_t)c.dim, L = (size_t)c.n_layers;
	for (size_t i = 0; i < L * d; i++) {
		((float *)tmp.rms_att)[i] = 1.0f;
		((float *)tmp.rms_ffn)[i] = 1.0f;
	}
	for (size_t i = 0; i < d; i++)
		((float *)tmp.rms_final)[i] = 1.0f;
	fill_uniform((float *)tmp.emb, (size_t)c.vocab_size * d, 1.0f, &st);
	*buf = p;
	*len = (size_t)size;
	return 0;
}
