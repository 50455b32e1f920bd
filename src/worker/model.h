/* A small decoder-only transformer that reads llama2.c checkpoints.
 *
 * Checkpoint format (all little-endian): a header of seven int32 (dim,
 * hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative
 * vocab_size means the classifier is stored separately instead of being the
 * token embedding), then float32 tensors in this order, each row-major with
 * the output dimension first:
 *   token embedding [vocab][dim], attention RMSNorm [L][dim],
 *   wq [L][dim][dim], wk [L][kv_dim][dim], wv [L][kv_dim][dim],
 *   wo [L][dim][dim], FFN RMSNorm [L][dim], w1 [L][hidden][dim],
 *   w2 [L][dim][hidden], w3 [L][hidden][dim], final RMSNorm [dim],
 *   two legacy RoPE tables [seq_len][head_size/2] each (ignored here),
 *   and the classifier [vocab][dim] when vocab_size was negative.
 *
 * The module is pure (libc and libm only, no I/O apart from the two file
 * helpers) so the unit tests can include it directly. Nothing here keeps
 * global state: a model is read-only after loading and may serve many
 * sessions (worker/forward.h: KV caches and the batched forward step). */
#ifndef SC_WORKER_MODEL_H
#define SC_WORKER_MODEL_H

#include <stddef.h>
#include <stdint.h>

/* Limits on a checkpoint header: well above llama2.c's 110M model, low
 * enough that sizes computed from them cannot overflow. */
#define SC_MODEL_MAX_DIM 16384
#define SC_MODEL_MAX_LAYERS 256
#define SC_MODEL_MAX_VOCAB (1 << 20)
#define SC_MODEL_MAX_SEQ 65536
#define SC_MODEL_MAX_FILE ((uint64_t)4 << 30)

typedef struct sc_model_config {
	int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
	int shared_classifier; /* 1 when the header's vocab_size was positive */
} sc_model_config_t;

typedef struct sc_model {
	sc_model_config_t cfg;
	int head_size, kv_dim;
	uint64_t fingerprint; /* FNV-1a 64 of the checkpoint bytes */
	float *data;          /* owned: every weight, in file order */
	const float *emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final, *wcls;
} sc_model_t;

/* Reads a checkpoint from len bytes at data (borrowed; copied). On failure
 * returns SC_EPARSE/SC_ERANGE/SC_ENOMEM and writes a message to err. */
int sc_model_load_mem(const void *data, size_t len, sc_model_t **out, char *err, size_t errsz);
/* Reads a checkpoint file; SC_EIO when it cannot be read. */
int sc_model_load_file(const char *path, sc_model_t **out, char *err, size_t errsz);
void sc_model_free(sc_model_t *m);

/* Parameters of a generated checkpoint (`starcloud worker --gen-checkpoint`). */
typedef struct sc_model_gen {
	sc_model_config_t cfg; /* hidden_dim 0 = 4 * dim * 2 / 3 rounded to 8 */
	uint64_t seed;
} sc_model_gen_t;
/* Builds a checkpoint with fixed pseudo-random weights in *buf (malloc'd,
 * caller frees) of *len bytes. SC_EINVAL for a bad shape. */
int sc_model_gen(const sc_model_gen_t *g, void **buf, size_t *len);

/* Picks the next token: argmax when temperature <= 0, else a draw from
 * softmax(logits / temperature) with a generator derived from seed and
 * step only, so a prefill worker and a decode worker agree. With top_p < 1
 * the draw is from the nucleus: the fewest most likely tokens whose
 * probability adds up to top_p (ties by lower id), as in vLLM and
 * llama.cpp. logits is scratch (overwritten when sampling). Returns -1
 * only when the nucleus's scratch cannot be allocated. */
int sc_sample(float *logits, int n, float temperature, float top_p, uint64_t seed, int step);

/* The log-probability of token under softmax(logits) (the model's own
 * distribution: no temperature or nucleus), and the k most likely tokens
 * (ids in top_ids, log-probabilities in top_lp, most likely first, ties by
 * lower id; room for k each). logits is not changed. */
float sc_logprobs(const float *logits, int n, int token, int k, int *top_ids, float *top_lp);

/* ---- pure kernels (exposed for the unit tests) ---- */
void sc__rmsnorm(float *out, const float *x, const float *w, int n);
/* out[d] = W[d][n] . x[n] */
void sc__matmul(float *out, const float *x, const float *w, int n, int d);
/* out[b][d] = W[d][n] . x[b][n] for b < nb, each (row, b) summed exactly as
 * sc__matmul does. */
void sc__matmul_batch(float *const *out, const float *const *x, const float *w, int n, int d,
                      int nb);
void sc__softmax(float *x, int n);
/* Rotates pairs (v[i], v[i+1]) of each head at position pos. */
void sc__rope(float *v, int n, int head_size, int pos);
int sc__argmax(const float *x, int n);
uint64_t sc__fnv1a(uint64_t h, const void *data, size_t len);
#define SC_FNV_INIT 14695981039346656037ull

#endif
