/* Sessions (one sequence's KV cache) and the batched forward step of the
 * transformer in worker/model.h.
 *
 * A forward step takes a list of (session, token) items: several sessions
 * decoding one token each, and chunks of prompt tokens, all through the
 * model together. Each weight matrix is then read once per step instead of
 * once per token, which is where batching pays on a CPU as on a GPU. Every
 * item's result is bit-identical to feeding its tokens one at a time
 * (the per-token arithmetic and its order do not depend on the batch), so
 * batching changes no answer, and a KV cache moved to another worker gives
 * the same tokens there.
 *
 * Pure: libc and libm only; unit tests include the source. */
#ifndef SC_WORKER_FORWARD_H
#define SC_WORKER_FORWARD_H

#include <stddef.h>

#include "worker/model.h"

/* One sequence's state: position and KV cache [layer][seq_len][kv_dim] for
 * keys and for values. */
typedef struct sc_session {
	const sc_model_t *m; /* borrowed */
	int pos;             /* tokens in the cache */
	float *kcache, *vcache;
	float *logits;      /* sc_session_forward's answer (vocab floats) */
	struct sc_fwd *fwd; /* sc_session_forward's one-token scratch, lazily */
} sc_session_t;

/* Scratch for forward steps of up to cap items of one model. */
typedef struct sc_fwd sc_fwd_t;

/* One item of a step: token goes into s at the session's next free
 * position. Items of one session must be consecutive and in order (a chunk
 * of its prompt); later items see the earlier ones' keys and values. */
typedef struct sc_step_item {
	sc_session_t *s; /* borrowed */
	int token;
	float *logits; /* out: the next-token logits (vocab floats), or NULL */
	float *hidden; /* out: the final-norm hidden state (dim floats), or NULL */
} sc_step_item_t;

/* A session for m (borrowed; must outlive it); NULL on out-of-memory. */
sc_session_t *sc_session_new(const sc_model_t *m);
void sc_session_free(sc_session_t *s);
/* Bytes a session of m holds (its KV cache and logits). */
size_t sc_session_bytes(const sc_model_t *m);

/* Scratch for steps of up to cap items (cap >= 1); NULL on out-of-memory. */
sc_fwd_t *sc_fwd_new(const sc_model_t *m, int cap);
void sc_fwd_free(sc_fwd_t *f);
/* Runs one forward step over n items (1..cap). SC_ERANGE, with nothing
 * changed, when a token is out of the vocabulary, a session would pass
 * seq_len, a session is of another model, or one session's items are not
 * consecutive. */
int sc_fwd_step(sc_fwd_t *f, const sc_step_item_t *items, int n);

/* Feeds token at the next position and returns the logits (vocab floats,
 * owned by the session, valid until the next call). NULL when the cache is
 * full, the token is out of range or memory runs out. */
const float *sc_session_forward(sc_session_t *s, int token);

/* Bytes of the K and V caches for n tokens, as exported: for each layer,
 * K[0..n)[kv_dim] then V[0..n)[kv_dim] (float32). */
size_t sc_session_kv_bytes(const sc_model_t *m, int n);
/* Copies the cache of the first n tokens into out (sc_session_kv_bytes). */
void sc_session_kv_export(const sc_session_t *s, int n, void *out);
/* Loads n tokens of cache (layout as exported) and sets pos = n.
 * SC_ERANGE when n does not fit. */
int sc_session_kv_import(sc_session_t *s, int n, const void *in);
/* Makes dst (same model) a copy of the first n positions of src, pos = n:
 * several choices of one prompt share its prefill. SC_ERANGE when n > src's
 * position. */
int sc_session_copy(sc_session_t *dst, const sc_session_t *src, int n);

#endif
