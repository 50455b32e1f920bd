/* Sessions and the batched forward step (see forward.h). The layer code
 * follows the llama2.c format described in model.h; every item's numbers
 * are computed exactly as a one-token step would compute them. */
#include "worker/forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "starcloud/error.h"

struct sc_fwd {
	const sc_model_t *m;
	int cap;
	float *x, *xb, *xb2, *q, *hb, *hb2; /* [cap][dim] or [cap][hidden] */
	float *att;                         /* [seq_len] */
	int *pos;
	const float **in;    /* per item input pointers */
	float **out, **out2; /* per item output pointers */
};

/* ---------------------------------------------------------------------
 * Sessions
 * ------------------------------------------------------------------- */

static size_t cache_floats(const sc_model_t *m)
{
	return (size_t)m->cfg.n_layers * (size_t)m->cfg.seq_len * (size_t)m->kv_dim;
}

size_t sc_session_bytes(const sc_model_t *m)
{
	return (2 * cache_floats(m) + (size_t)m->cfg.vocab_size) * sizeof(float);
}

sc_session_t *sc_session_new(const sc_model_t *m)
{
	sc_session_t *s = sc_calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->m = m;
	/* Not zeroed: positions past pos are never read, and a
	 * session of a long-context model should not touch all its pages. */
	s->kcache = sc_malloc(cache_floats(m) * sizeof(float));
	s->vcache = sc_malloc(cache_floats(m) * sizeof(float));
	s->logits = sc_calloc((size_t)m->cfg.vocab_size, sizeof(float));
	if (!s->kcache || !s->vcache || !s->logits) {
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
	free(s->logits);
	sc_fwd_free(s->fwd);
	free(s);
}

const float *sc_session_forward(sc_session_t *s, int token)
{
	if (!s->fwd && !(s->fwd = sc_fwd_new(s->m, 1)))
		return NULL;
	sc_step_item_t it = {.s = s, .token = token, .logits = s->logits};
	return sc_fwd_step(s->fwd, &it, 1) == 0 ? s->logits : NULL;
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

int sc_session_copy(sc_session_t *dst, const sc_session_t *src, int n)
{
	const sc_model_t *m = src->m;
	if (dst->m != m || n < 0 || n > src->pos)
		return SC_ERANGE;
	size_t row = (size_t)n * (size_t)m->kv_dim * sizeof(float);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		size_t off = (size_t)l * (size_t)m->cfg.seq_len * (size_t)m->kv_dim;
		memcpy(dst->kcache + off, src->kcache + off, row);
		memcpy(dst->vcache + off, src->vcache + off, row);
	}
	dst->pos = n;
	return 0;
}

/* ---------------------------------------------------------------------
 * Scratch
 * ------------------------------------------------------------------- */

void sc_fwd_free(sc_fwd_t *f)
{
	if (!f)
		return;
	free(f->x);
	free(f->xb);
	free(f->xb2);
	free(f->q);
	free(f->hb);
	free(f->hb2);
	free(f->att);
	free(f->pos);
	free(f->in);
	free(f->out);
	free(f->out2);
	free(f);
}

sc_fwd_t *sc_fwd_new(const sc_model_t *m, int cap)
{
	if (cap < 1)
		return NULL;
	sc_fwd_t *f = sc_calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	size_t c = (size_t)cap, d = (size_t)m->cfg.dim, h = (size_t)m->cfg.hidden_dim;
	f->m = m;
	f->cap = cap;
	f->x = sc_malloc(c * d * sizeof(float));
	f->xb = sc_malloc(c * d * sizeof(float));
	f->xb2 = sc_malloc(c * d * sizeof(float));
	f->q = sc_malloc(c * d * sizeof(float));
	f->hb = sc_malloc(c * h * sizeof(float));
	f->hb2 = sc_malloc(c * h * sizeof(float));
	f->att = sc_malloc((size_t)m->cfg.seq_len * sizeof(float));
	f->pos = sc_malloc(c * sizeof(int));
	f->in = sc_malloc(c * sizeof(*f->in));
	f->out = sc_malloc(c * sizeof(*f->out));
	f->out2 = sc_malloc(c * sizeof(*f->out2));
	if (!f->x || !f->xb || !f->xb2 || !f->q || !f->hb || !f->hb2 || !f->att || !f->pos ||
	    !f->in || !f->out || !f->out2) {
		sc_fwd_free(f);
		return NULL;
	}
	return f;
}

/* ---------------------------------------------------------------------
 * The step
 * ------------------------------------------------------------------- */

/* Checks the items and gives each its position. */
static int plan(sc_fwd_t *f, const sc_step_item_t *it, int n)
{
	const sc_model_t *m = f->m;
	if (n < 1 || n > f->cap)
		return SC_ERANGE;
	for (int i = 0; i < n; i++) {
		const sc_session_t *s = it[i].s;
		if (s->m != m || it[i].token < 0 || it[i].token >= m->cfg.vocab_size)
			return SC_ERANGE;
		if (i > 0 && it[i - 1].s == s) {
			f->pos[i] = f->pos[i - 1] + 1;
		} else {
			/* A session may appear in one run of items only. */
			for (int k = 0; k < i; k++)
				if (it[k].s == s)
					return SC_ERANGE;
			f->pos[i] = s->pos;
		}
		if (f->pos[i] >= m->cfg.seq_len)
			return SC_ERANGE;
	}
	return 0;
}

/* Points f->in at rows of a (stride floats each) and f->out at rows of b. */
static void rows(sc_fwd_t *f, const float *a, float *b, size_t stride, int n)
{
	for (int i = 0; i < n; i++) {
		f->in[i] = a + (size_t)i * stride;
		f->out[i] = b + (size_t)i * stride;
	}
}

/* Multi-head attention of item i at layer l over its session's cache:
 * reads q[i], writes the concatenated heads to xb[i]. Query heads share KV
 * heads in groups of n_heads / n_kv_heads. */
static void attention(sc_fwd_t *f, const sc_session_t *s, int i, int l)
{
	const sc_model_t *m = f->m;
	int hs = m->head_size, group = m->cfg.n_heads / m->cfg.n_kv_heads, pos = f->pos[i];
	size_t loff = (size_t)l * (size_t)m->cfg.seq_len * (size_t)m->kv_dim;
	size_t d = (size_t)m->cfg.dim;
	float scale = 1.0f / sqrtf((float)hs);
	for (int h = 0; h < m->cfg.n_heads; h++) {
		const float *q = f->q + (size_t)i * d + h * hs;
		int kvh = h / group;
		for (int t = 0; t <= pos; t++) {
			const float *k = s->kcache + loff + (size_t)t * m->kv_dim + kvh * hs;
			float dot = 0;
			for (int j = 0; j < hs; j++)
				dot += q[j] * k[j];
			f->att[t] = dot * scale;
		}
		sc__softmax(f->att, pos + 1);
		float *o = f->xb + (size_t)i * d + h * hs;
		memset(o, 0, (size_t)hs * sizeof(float));
		for (int t = 0; t <= pos; t++) {
			const float *v = s->vcache + loff + (size_t)t * m->kv_dim + kvh * hs;
			for (int j = 0; j < hs; j++)
				o[j] += f->att[t] * v[j];
		}
	}
}

/* Attention block of layer l for every item: RMSNorm, Q/K/V (K and V
 * straight into the caches), RoPE, attention, output projection and
 * residual. */
static void attention_block(sc_fwd_t *f, const sc_step_item_t *it, int n, int l)
{
	const sc_model_t *m = f->m;
	int d = m->cfg.dim, kv = m->kv_dim;
	size_t dd = (size_t)d * (size_t)d, kd = (size_t)kv * (size_t)d;
	for (int i = 0; i < n; i++)
		sc__rmsnorm(f->xb + (size_t)i * d, f->x + (size_t)i * d, m->rms_att + (size_t)l * d,
		            d);
	rows(f, f->xb, f->q, (size_t)d, n);
	sc__matmul_batch(f->out, f->in, m->wq + l * dd, d, d, n);
	for (int i = 0; i < n; i++) {
		size_t coff = ((size_t)l * (size_t)m->cfg.seq_len + (size_t)f->pos[i]) * (size_t)kv;
		f->out[i] = it[i].s->kcache + coff;
		f->out2[i] = it[i].s->vcache + coff;
	}
	sc__matmul_batch(f->out, f->in, m->wk + l * kd, d, kv, n);
	sc__matmul_batch(f->out2, f->in, m->wv + l * kd, d, kv, n);
	for (int i = 0; i < n; i++) {
		sc__rope(f->q + (size_t)i * d, d, m->head_size, f->pos[i]);
		sc__rope(f->out[i], kv, m->head_size, f->pos[i]);
	}
	/* Every item's keys and values of this layer are in the caches now,
	 * so a prompt chunk's later tokens attend to its earlier ones. */
	for (int i = 0; i < n; i++)
		attention(f, it[i].s, i, l);
	rows(f, f->xb, f->xb2, (size_t)d, n);
	sc__matmul_batch(f->out, f->in, m->wo + l * dd, d, d, n);
	for (size_t i = 0; i < (size_t)n * (size_t)d; i++)
		f->x[i] += f->xb2[i];
}

/* SwiGLU feed-forward block of layer l: w2(silu(w1 x) * w3 x) on the
 * normalised input, and the residual. */
static void ffn_block(sc_fwd_t *f, int n, int l)
{
	const sc_model_t *m = f->m;
	int d = m->cfg.dim, h = m->cfg.hidden_dim;
	size_t off = (size_t)l * (size_t)h * (size_t)d;
	for (int i = 0; i < n; i++)
		sc__rmsnorm(f->xb + (size_t)i * d, f->x + (size_t)i * d, m->rms_ffn + (size_t)l * d,
		            d);
	for (int i = 0; i < n; i++) {
		f->in[i] = f->xb + (size_t)i * d;
		f->out[i] = f->hb + (size_t)i * h;
		f->out2[i] = f->hb2 + (size_t)i * h;
	}
	sc__matmul_batch(f->out, f->in, m->w1 + off, d, h, n);
	sc__matmul_batch(f->out2, f->in, m->w3 + off, d, h, n);
	for (size_t i = 0; i < (size_t)n * (size_t)h; i++) {
		float v = f->hb[i];
		f->hb[i] = v / (1.0f + expf(-v)) * f->hb2[i];
	}
	for (int i = 0; i < n; i++) {
		f->in[i] = f->hb + (size_t)i * h;
		f->out[i] = f->xb + (size_t)i * d;
	}
	sc__matmul_batch(f->out, f->in, m->w2 + off, h, d, n);
	for (size_t i = 0; i < (size_t)n * (size_t)d; i++)
		f->x[i] += f->xb[i];
}

/* Final norm, hidden states and the classifier, for the items that want
 * them only: a prompt chunk needs logits at its last token at most. */
static void outputs(sc_fwd_t *f, const sc_step_item_t *it, int n)
{
	const sc_model_t *m = f->m;
	int d = m->cfg.dim, nl = 0;
	for (int i = 0; i < n; i++) {
		if (!it[i].logits && !it[i].hidden)
			continue;
		float *x = f->x + (size_t)i * d;
		sc__rmsnorm(x, x, m->rms_final, d);
		if (it[i].hidden)
			memcpy(it[i].hidden, x, (size_t)d * sizeof(float));
		if (it[i].logits) {
			f->in[nl] = x;
			f->out[nl++] = it[i].logits;
		}
	}
	if (nl)
		sc__matmul_batch(f->out, f->in, m->wcls, d, m->cfg.vocab_size, nl);
}

int sc_fwd_step(sc_fwd_t *f, const sc_step_item_t *it, int n)
{
	const sc_model_t *m = f->m;
	int rc = plan(f, it, n), d = m->cfg.dim;
	if (rc < 0)
		return rc;
	for (int i = 0; i < n; i++)
		memcpy(f->x + (size_t)i * d, m->emb + (size_t)it[i].token * d,
		       (size_t)d * sizeof(float));
	for (int l = 0; l < m->cfg.n_layers; l++) {
		attention_block(f, it, n, l);
		ffn_block(f, n, l);
	}
	outputs(f, it, n);
	for (int i = 0; i < n; i++)
		it[i].s->pos = f->pos[i] + 1;
	return 0;
}
