/* The transformer: checkpoint reading, the forward pass, sampling, and a
 * generator of tiny checkpoints for tests. Written from the format
 * description in model.h; see docs/WORKER.md. */
#include "worker/model.h"
#include "base/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
 * The order of additions is fixed, so results stay deterministic. */
void sc__matmul(float *out, const float *x, const float *w, int n, int d)
{
	for (int i = 0; i < d; i++) {
		const float *row = w + (size_t)i * n;
		float lane[8] = {0};
		int j = 0;
		for (; j + 8 <= n; j += 8)
			for (int k = 0; k < 8; k++)
				lane[k] += row[j + k] * x[j + k];
		float acc = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
		            ((lane[4] + lane[5]) + (lane[6] + lane[7]));
		for (; j < n; j++)
			acc += row[j] * x[j];
		out[i] = acc;
	}
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

uint64_t sc_model_file_size(const sc_model_config_t *c)
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
	uint64_t want = sc_model_file_size(&c);
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
	uint64_t size = sc_model_file_size(&c);
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

/* ---------------------------------------------------------------------
 * Sessions and the forward pass
 * ------------------------------------------------------------------- */

sc_session_t *sc_session_new(const sc_model_t *m)
{
	sc_session_t *s = sc_calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	const sc_model_config_t *c = &m->cfg;
	size_t cache = (size_t)c->n_layers * (size_t)c->seq_len * (size_t)m->kv_dim;
	s->m = m;
	s->kcache = sc_calloc(cache, sizeof(float));
	s->vcache = sc_calloc(cache, sizeof(float));
	s->x = sc_calloc((size_t)c->dim, sizeof(float));
	s->xb = sc_calloc((size_t)c->dim, sizeof(float));
	s->xb2 = sc_calloc((size_t)c->dim, sizeof(float));
	s->q = sc_xcalloc((size_t)c->dim, sizeof(float));
	s->hb = sc_calloc((size_t)c->hidden_dim, sizeof(float));
	s->hb2 = sc_calloc((size_t)c->hidden_dim, sizeof(float));
	s->att = sc_calloc((size_t)c->seq_len, sizeof(float));
	s->logits = sc_calloc((size_t)c->vocab_size, sizeof(float));
	if (!s->kcache || !s->vcache || !s->x || !s->xb || !s->xb2 || !s->q || !s->hb || !s->hb2 ||
	    !s->att || !s->logits) {
		sc_session_free(s);
		return NULL;
	}
	return s;
}

void sc_session_free(sc_session_t *s)
{
	if (!s)
		return;
	free(s->kcache);
	free(s->vcache);
	free(s->x);
	free(s->xb);
	free(s->xb2);
	free(s->q);
	free(s->hb);
	free(s->hb2);
	free(s->att);
	free(s->logits);
	free(s);
}

/* Multi-head attention of layer l at position pos over the cache; reads
 * s->q, writes the concatenated heads to s->xb. Query heads share KV heads
 * in groups of n_heads / n_kv_heads. */
static void attention(sc_session_t *s, int l, int pos)
{
	const sc_model_t *m = s->m;
	int hs = m->head_size, group = m->cfg.n_heads / m->cfg.n_kv_heads;
	size_t loff = (size_t)l * (size_t)m->cfg.seq_len * (size_t)m->kv_dim;
	float scale = 1.0f / sqrtf((float)hs);
	for (int h = 0; h < m->cfg.n_heads; h++) {
		const float *q = s->q + h * hs;
		int kvh = h / group;
		for (int t = 0; t <= pos; t++) {
			const float *k = s->kcache + loff + (size_t)t * m->kv_dim + kvh * hs;
			float dot = 0;
			for (int i = 0; i < hs; i++)
				dot += q[i] * k[i];
			s->att[t] = dot * scale;
		}
		sc__softmax(s->att, pos + 1);
		float *o = s->xb + h * hs;
		memset(o, 0, (size_t)hs * sizeof(float));
		for (int t = 0; t <= pos; t++) {
			const float *v = s->vcache + loff + (size_t)t * m->kv_dim + kvh * hs;
			for (int i = 0; i < hs; i++)
				o[i] += s->att[t] * v[i];
		}
	}
}

/* SwiGLU feed-forward of layer l on s->xb (normalised input), result in
 * s->xb: w2(silu(w1 x) * w3 x). */
static void ffn(sc_session_t *s, int l)
{
	const sc_model_t *m = s->m;
	int d = m->cfg.dim, h = m->cfg.hidden_dim;
	size_t off = (size_t)l * (size_t)h * (size_t)d;
	sc__matmul(s->hb, s->xb, m->w1 + off, d, h);
	sc__matmul(s->hb2, s->xb, m->w3 + off, d, h);
	for (int i = 0; i < h; i++) {
		float v = s->hb[i];
		s->hb[i] = v / (1.0f + expf(-v)) * s->hb2[i];
	}
	sc__matmul(s->xb, s->hb, m->w2 + off, h, d);
}

static void layer(sc_session_t *s, int l, int pos)
{
	const sc_model_t *m = s->m;
	int d = m->cfg.dim, kv = m->kv_dim;
	size_t dd = (size_t)d * (size_t)d, kd = (size_t)kv * (size_t)d;
	size_t coff = ((size_t)l * (size_t)m->cfg.seq_len + (size_t)pos) * (size_t)kv;
	float *k = s->kcache + coff, *v = s->vcache + coff;

	sc__rmsnorm(s->xb, s->x, m->rms_att + (size_t)l * d, d);
	sc__matmul(s->q, s->xb, m->wq + l * dd, d, d);
	sc__matmul(k, s->xb, m->wk + l * kd, d, kv);
	sc__matmul(v, s->xb, m->wv + l * kd, d, kv);
	sc__rope(s->q, d, m->head_size, pos);
	sc__rope(k, kv, m->head_size, pos);
	attention(s, l, pos);
	sc__matmul(s->xb2, s->xb, m->wo + l * dd, d, d);
	for (int i = 0; i < d; i++)
		s->x[i] += s->xb2[i];

	sc__rmsnorm(s->xb, s->x, m->rms_ffn + (size_t)l * d, d);
	ffn(s, l);
	for (int i = 0; i < d; i++)
		s->x[i] += s->xb[i];
}

const float *sc_session_forward(sc_session_t *s, int token)
{
	const sc_model_t *m = s->m;
	int d = m->cfg.dim;
	if (token < 0 || token >= m->cfg.vocab_size || s->pos >= m->cfg.seq_len)
		return NULL;
	memcpy(s->x, m->emb + (size_t)token * d, (size_t)d * sizeof(float));
	for (int l = 0; l < m->cfg.n_layers; l++)
		layer(s, l, s->pos);
	sc__rmsnorm(s->x, s->x, m->rms_final, d);
	sc__matmul(s->logits, s->x, m->wcls, d, m->cfg.vocab_size);
	s->pos++;
	return s->logits;
}

size_t sc_session_kv_bytes(const sc_model_t *m, int n)
{
	return (size_t)m->cfg.n_layers * 2 * (size_t)n * (size_t)m->kv_dim * sizeof(float);
}

void sc_session_kv_export(const sc_session_t *s, int n, void *out)
{
	const sc_model_t *m = s->m;
	size_t row = (size_t)n * (size_t)m->kv_dim * sizeof(float);
	char *p = out;
	for (int l = 0; l < m->cfg.n_layers; l++) {
		size_t off = (size_t)l * (size_t)m->cfg.seq_len * (size_t)m->kv_dim;
		memcpy(p, s->kcache + off, row), p += row;
		memcpy(p, s->vcache + off, row), p += row;
	}
}

int sc_session_kv_import(sc_session_t *s, int n, const void *in)
{
	const sc_model_t *m = s->m;
	if (n < 0 || n > m->cfg.seq_len)
		return SC_ERANGE;
	size_t row = (size_t)n * (size_t)m->kv_dim * sizeof(float);
	const char *p = in;
	for (int l = 0; l < m->cfg.n_layers; l++) {
		size_t off = (size_t)l * (size_t)m->cfg.seq_len * (size_t)m->kv_dim;
		memcpy(s->kcache + off, p, row), p += row;
		memcpy(s->vcache + off, p, row), p += row;
	}
	s->pos = n;
	return 0;
}
