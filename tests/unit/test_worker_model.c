/* The worker's pure model pieces: kernels on small vectors, checkpoint
 * reading (good, truncated, bad), sessions and KV export/import, sampling,
 * the KV store and its wire format, through libsc_worker.a. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "starcloud/error.h"
#include "worker/kvstore.h"
#include "worker/model.h"
#include "worker/forward.h"

#define EPS 1e-5

static void test_rmsnorm(void **state)
{
	float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 2, 1}, out[4];
	sc__rmsnorm(out, x, w, 4);
	float s = 1.0f / sqrtf(7.5f + 1e-5f);
	assert_float_equal(out[0], 1 * s, EPS);
	assert_float_equal(out[2], 2 * 3 * s, EPS);
	assert_float_equal(out[3], 4 * s, EPS);
}

static void test_matmul(void **state)
{
	/* W is 2x3 (out x in). */
	float w[6] = {1, 2, 3, 4, 5, 6}, x[3] = {1, 0, -1}, out[2];
	sc__matmul(out, x, w, 3, 2);
	assert_float_equal(out[0], -2, EPS);
	assert_float_equal(out[1], -2, EPS);
}

/* The batched product equals one product per vector bit for bit, for
 * batches on both kernels and shapes with tails (n % 8, d % 4). */
static void test_matmul_batch_exact(void **state)
{
	const int n = 21, d = 11;
	float w[21 * 11], xs[12][21], out[12][11], ref[11];
	uint64_t st = 7;
	for (int i = 0; i < n * d; i++)
		w[i] = (float)((st = st * 6364136223846793005ull + 1) >> 40) / (1 << 24) - 0.5f;
	for (int b = 0; b < 12; b++)
		for (int j = 0; j < n; j++)
			xs[b][j] =
			    (float)((st = st * 6364136223846793005ull + 1) >> 40) / (1 << 24);
	for (int nb = 1; nb <= 12; nb += 11) {
		float *o[12];
		const float *x[12];
		for (int b = 0; b < nb; b++)
			o[b] = out[b], x[b] = xs[b];
		sc__matmul_batch(o, x, w, n, d, nb);
		for (int b = 0; b < nb; b++) {
			sc__matmul(ref, xs[b], w, n, d);
			assert_memory_equal(out[b], ref, sizeof(ref));
		}
	}
}

static void test_softmax(void **state)
{
	float x[3] = {1, 2, 3};
	sc__softmax(x, 3);
	float z = expf(1) + expf(2) + expf(3);
	assert_float_equal(x[0], expf(1) / z, EPS);
	assert_float_equal(x[2], expf(3) / z, EPS);
	/* Large logits must not overflow. */
	float big[2] = {1000, 1000};
	sc__softmax(big, 2);
	assert_float_equal(big[0], 0.5, EPS);
	assert_int_equal(sc__argmax(x, 3), 2);
}

static void test_rope(void **state)
{
	float v[4] = {1, 0, 0, 1};
	sc__rope(v, 4, 4, 0); /* position 0: no rotation */
	assert_float_equal(v[0], 1, EPS);
	assert_float_equal(v[3], 1, EPS);
	/* head_size 2: every pair has frequency 1, rotation by pos radians. */
	float u[2] = {1, 0};
	sc__rope(u, 2, 2, 1);
	assert_float_equal(u[0], cosf(1), EPS);
	assert_float_equal(u[1], sinf(1), EPS);
	/* Second pair of a head of 4 turns slower: 10000^(-2/4) = 0.01. */
	float q[4] = {0, 0, 1, 0};
	sc__rope(q, 4, 4, 3);
	assert_float_equal(q[2], cosf(0.03f), EPS);
	assert_float_equal(q[3], sinf(0.03f), EPS);
}

static sc_model_gen_t tiny(int shared)
{
	sc_model_gen_t g = {.cfg = {16, 0, 2, 4, 2, 300, 32, shared}, .seed = 3};
	return g;
}

static sc_model_t *load_tiny(int shared)
{
	sc_model_gen_t g = tiny(shared);
	void *buf;
	size_t len;
	assert_int_equal(sc_model_gen(&g, &buf, &len), 0);
	sc_model_t *m = NULL;
	char err[128];
	assert_int_equal(sc_model_load_mem(buf, len, &m, err, sizeof(err)), 0);
	free(buf);
	return m;
}

static void test_checkpoint_read(void **state)
{
	sc_model_t *m = load_tiny(0);
	assert_int_equal(m->cfg.dim, 16);
	assert_int_equal(m->cfg.vocab_size, 300);
	assert_int_equal(m->cfg.shared_classifier, 0);
	assert_int_equal(m->head_size, 4);
	assert_int_equal(m->kv_dim, 8);
	assert_ptr_not_equal(m->wcls, m->emb);
	sc_model_free(m);
	m = load_tiny(1);
	assert_ptr_equal(m->wcls, m->emb);
	sc_model_free(m);
}

static void test_checkpoint_bad(void **state)
{
	sc_model_gen_t g = tiny(0);
	void *buf;
	size_t len;
	char err[160];
	sc_model_t *m = NULL;
	assert_int_equal(sc_model_gen(&g, &buf, &len), 0);
	assert_int_equal(sc_model_load_mem(buf, len - 1, &m, err, sizeof(err)), SC_EPARSE);
	assert_non_null(strstr(err, "truncated"));
	assert_int_equal(sc_model_load_mem(buf, 20, &m, err, sizeof(err)), SC_EPARSE);
	char *longer = malloc(len + 4);
	memcpy(longer, buf, len);
	assert_int_equal(sc_model_load_mem(longer, len + 4, &m, err, sizeof(err)), SC_EPARSE);
	free(longer);
	int32_t *hdr = buf;
	hdr[3] = 5; /* 16 does not divide by 5 heads */
	assert_int_equal(sc_model_load_mem(buf, len, &m, err, sizeof(err)), SC_ERANGE);
	hdr[3] = 4;
	hdr[0] = -16;
	assert_int_equal(sc_model_load_mem(buf, len, &m, err, sizeof(err)), SC_ERANGE);
	hdr[0] = 16;
	hdr[5] = INT32_MIN;
	assert_int_equal(sc_model_load_mem(buf, len, &m, err, sizeof(err)), SC_ERANGE);
	assert_null(m);
	free(buf);
	assert_int_equal(sc_model_load_file("/nonexistent/x.bin", &m, err, sizeof(err)), SC_EIO);
	sc_model_gen_t odd = tiny(0);
	odd.cfg.n_kv_heads = 3;
	assert_int_equal(sc_model_gen(&odd, &buf, &len), SC_EINVAL);
}

static void test_forward_and_kv_transfer(void **state)
{
	sc_model_t *m = load_tiny(0);
	sc_session_t *a = sc_session_new(m), *b = sc_session_new(m);
	int prompt[5] = {1, 40, 41, 42, 43};
	const float *la = NULL;
	for (int i = 0; i < 5; i++)
		la = sc_session_forward(a, prompt[i]);
	assert_non_null(la);
	int next = sc_sample((float[300]){0}, 300, 0, 1, 1, 0); /* argmax of zeros */
	assert_int_equal(next, 0);
	size_t n = sc_session_kv_bytes(m, 5);
	assert_int_equal(n, 2 * 2 * 5 * 8 * sizeof(float));
	void *blk = malloc(n);
	sc_session_kv_export(a, 5, blk);
	assert_int_equal(sc_session_kv_import(b, 5, blk), 0);
	assert_int_equal(sc_session_kv_import(b, 33, blk), SC_ERANGE);
	float ka[300], kb[300];
	memcpy(ka, sc_session_forward(a, 77), sizeof(ka));
	memcpy(kb, sc_session_forward(b, 77), sizeof(kb));
	assert_memory_equal(ka, kb, sizeof(ka));
	/* Logits depend on the context, not only on the last token. */
	sc_session_t *c = sc_session_new(m);
	sc_session_forward(c, 1);
	const float *lc = sc_session_forward(c, 77);
	assert_true(memcmp(lc, ka, sizeof(ka)) != 0);
	/* Out-of-range tokens and a full cache are refused. */
	assert_null(sc_session_forward(c, 300));
	assert_null(sc_session_forward(c, -1));
	while (c->pos < m->cfg.seq_len)
		assert_non_null(sc_session_forward(c, 5));
	assert_null(sc_session_forward(c, 5));
	free(blk);
	sc_session_free(a);
	sc_session_free(b);
	sc_session_free(c);
	sc_model_free(m);
}

/* A batched step gives every item exactly what one-token steps give: a
 * prompt chunk of one session, a decode token of another and a third
 * session's first token together, logits bit for bit, and the caches the
 * same afterwards. */
static void test_batched_step_equals_single(void **state)
{
	sc_model_t *m = load_tiny(0);
	int vocab = m->cfg.vocab_size;
	const int pa[5] = {1, 40, 41, 42, 43}, pb[3] = {1, 9, 10};
	sc_session_t *a1 = sc_session_new(m), *b1 = sc_session_new(m), *c1 = sc_session_new(m);
	sc_session_t *a2 = sc_session_new(m), *b2 = sc_session_new(m), *c2 = sc_session_new(m);
	float *la = malloc(vocab * sizeof(float)), *lb = malloc(vocab * sizeof(float));
	float *lc = malloc(vocab * sizeof(float)), *hid = malloc(m->cfg.dim * sizeof(float));
	/* Singles: a takes its 5 tokens, b 3 then 1 more, c 1. */
	const float *l = NULL;
	for (int i = 0; i < 5; i++)
		l = sc_session_forward(a1, pa[i]);
	float ref_a[300], ref_b[300], ref_c[300];
	memcpy(ref_a, l, vocab * sizeof(float));
	for (int i = 0; i < 3; i++)
		sc_session_forward(b1, pb[i]);
	memcpy(ref_b, sc_session_forward(b1, 77), vocab * sizeof(float));
	memcpy(ref_c, sc_session_forward(c1, 5), vocab * sizeof(float));
	/* Batched: b's prompt first (one step), then one step with b's next
	 * token, a's whole prompt as a chunk and c's first token. */
	sc_fwd_t *f = sc_fwd_new(m, 8);
	assert_non_null(f);
	sc_step_item_t it[8];
	for (int i = 0; i < 3; i++)
		it[i] = (sc_step_item_t){.s = b2, .token = pb[i]};
	assert_int_equal(sc_fwd_step(f, it, 3), 0);
	it[0] = (sc_step_item_t){.s = b2, .token = 77, .logits = lb};
	for (int i = 0; i < 5; i++)
		it[1 + i] = (sc_step_item_t){.s = a2, .token = pa[i], .logits = i == 4 ? la : NULL};
	it[6] = (sc_step_item_t){.s = c2, .token = 5, .logits = lc, .hidden = hid};
	assert_int_equal(sc_fwd_step(f, it, 7), 0);
	assert_memory_equal(la, ref_a, vocab * sizeof(float));
	assert_memory_equal(lb, ref_b, vocab * sizeof(float));
	assert_memory_equal(lc, ref_c, vocab * sizeof(float));
	assert_int_equal(a2->pos, 5);
	assert_int_equal(b2->pos, 4);
	size_t kb = sc_session_kv_bytes(m, 5);
	char *x1 = malloc(kb), *x2 = malloc(kb);
	sc_session_kv_export(a1, 5, x1);
	sc_session_kv_export(a2, 5, x2);
	assert_memory_equal(x1, x2, kb);
	/* Refused, nothing changed: a session in two runs, a bad token, too
	 * many items. */
	it[0] = (sc_step_item_t){.s = a2, .token = 3};
	it[1] = (sc_step_item_t){.s = b2, .token = 3};
	it[2] = (sc_step_item_t){.s = a2, .token = 3};
	assert_int_equal(sc_fwd_step(f, it, 3), SC_ERANGE);
	it[0].token = vocab;
	assert_int_equal(sc_fwd_step(f, it, 1), SC_ERANGE);
	assert_int_equal(sc_fwd_step(f, it, 9), SC_ERANGE);
	assert_int_equal(a2->pos, 5);
	/* A copy of a's prefix continues as a does. */
	sc_session_t *d = sc_session_new(m);
	assert_int_equal(sc_session_copy(d, a1, 5), 0);
	assert_int_equal(sc_session_copy(d, a1, 6), SC_ERANGE);
	memcpy(ref_a, sc_session_forward(a1, 12), vocab * sizeof(float));
	assert_memory_equal(sc_session_forward(d, 12), ref_a, vocab * sizeof(float));
	free(x1);
	free(x2);
	free(la);
	free(lb);
	free(lc);
	free(hid);
	sc_fwd_free(f);
	sc_session_free(a1);
	sc_session_free(b1);
	sc_session_free(c1);
	sc_session_free(a2);
	sc_session_free(b2);
	sc_session_free(c2);
	sc_session_free(d);
	sc_model_free(m);
}

static void test_logprobs(void **state)
{
	/* probabilities 0.5, 0.25, 0.125, 0.125 */
	const float l[4] = {logf(4), logf(2), 0, 0};
	int top[3];
	float tl[3];
	float lp = sc_logprobs(l, 4, 1, 3, top, tl);
	assert_true(fabsf(lp - logf(0.25f)) < 1e-5f);
	assert_int_equal(top[0], 0);
	assert_int_equal(top[1], 1);
	assert_int_equal(top[2], 2); /* a tie goes to the lower id */
	assert_true(fabsf(tl[0] - logf(0.5f)) < 1e-5f);
	assert_true(fabsf(tl[2] - logf(0.125f)) < 1e-5f);
	assert_true(fabsf(sc_logprobs(l, 4, 3, 0, top, tl) - logf(0.125f)) < 1e-5f);
}

static void test_sampling(void **state)
{
	float l1[4] = {0.1f, 3, 0.2f, 1}, l2[4], l3[4];
	memcpy(l2, l1, sizeof(l1));
	memcpy(l3, l1, sizeof(l1));
	assert_int_equal(sc_sample(l1, 4, 0, 1, 9, 0), 1);
	int x = sc_sample(l2, 4, 1.0f, 1, 42, 3), y = sc_sample(l3, 4, 1.0f, 1, 42, 3);
	assert_int_equal(x, y);
	assert_in_range(x, 0, 3);
	/* top_p: probabilities 0.4, 0.3, 0.2, 0.1 (logits are their logs). A
	 * tiny nucleus is the most likely token alone; 0.65 keeps the first
	 * two (0.4 < 0.65 <= 0.7); every seed lands in the nucleus, and both
	 * of its tokens are drawn. With top_p 1 all four appear. */
	const float pr[4] = {0.4f, 0.3f, 0.2f, 0.1f};
	int seen_small[4] = {0}, seen_all[4] = {0};
	for (uint64_t seed = 0; seed < 400; seed++) {
		float l[4];
		for (int i = 0; i < 4; i++)
			l[i] = logf(pr[i]);
		assert_int_equal(sc_sample(l, 4, 1.0f, 1e-6f, seed, 0), 0);
		for (int i = 0; i < 4; i++)
			l[i] = logf(pr[i]);
		seen_small[sc_sample(l, 4, 1.0f, 0.65f, seed, 0)]++;
		for (int i = 0; i < 4; i++)
			l[i] = logf(pr[i]);
		seen_all[sc_sample(l, 4, 1.0f, 1.0f, seed, 0)]++;
	}
	assert_true(seen_small[0] > 0 && seen_small[1] > 0);
	assert_int_equal(seen_small[2] + seen_small[3], 0);
	/* Within the nucleus the odds stay 4:3 (400 draws: 229 and 171 expected). */
	assert_in_range(seen_small[0], 180, 280);
	for (int i = 0; i < 4; i++)
		assert_true(seen_all[i] > 0);
}

static void test_kv_format(void **state)
{
	float payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	unsigned char blk[SC_KV_HEADER + sizeof(payload)];
	sc_kv_header_t h = {.n_layers = 1,
	                    .kv_dim = 2,
	                    .n_tokens = 2,
	                    .seq_len = 16,
	                    .first_token = 7,
	                    .fingerprint = 99};
	sc_kv_header_write(&h, payload, sizeof(payload), blk);
	memcpy(blk + SC_KV_HEADER, payload, sizeof(payload));
	sc_kv_header_t got;
	const void *p;
	char err[128];
	assert_int_equal(sc_kv_parse(blk, sizeof(blk), &got, &p, err, sizeof(err)), 0);
	assert_int_equal(got.first_token, 7);
	assert_int_equal(got.fingerprint, 99);
	assert_memory_equal(p, payload, sizeof(payload));
	assert_int_equal(sc_kv_parse(blk, sizeof(blk) - 4, &got, &p, err, sizeof(err)), SC_EPARSE);
	blk[SC_KV_HEADER + 3] ^= 1;
	assert_int_equal(sc_kv_parse(blk, sizeof(blk), &got, &p, err, sizeof(err)), SC_EPARSE);
	assert_non_null(strstr(err, "checksum"));
	blk[0] = 'X';
	assert_int_equal(sc_kv_parse(blk, sizeof(blk), &got, &p, err, sizeof(err)), SC_EPARSE);
}

static void test_kvstore_leases(void **state)
{
	sc_kvstore_t *s = sc_kvstore_new(2, 1000, 1);
	char h1[SC_KV_HANDLE_LEN], h2[SC_KV_HANDLE_LEN], h3[SC_KV_HANDLE_LEN];
	assert_int_equal(sc_kvstore_put(s, malloc(8), 8, 3, 5, 0, h1), 0);
	assert_int_equal(sc_kvstore_put(s, malloc(8), 8, 3, 5, 100, h2), 0);
	assert_string_not_equal(h1, h2);
	assert_int_equal(sc_kvstore_put(s, malloc(8), 8, 3, 5, 200, h3), SC_ELIMIT);
	assert_int_equal(sc_kvstore_live(s), 2);
	/* Touching restarts the lease: h1 survives past its first deadline. */
	assert_non_null(sc_kvstore_touch(s, h1, 900));
	assert_int_equal(sc_kvstore_sweep(s, 1500), 1); /* h2 expired at 1100 */
	assert_null(sc_kvstore_touch(s, h2, 1500));
	assert_non_null(sc_kvstore_touch(s, h1, 1500));
	assert_null(sc_kvstore_touch(s, h1, 2500)); /* expired, not yet swept */
	assert_int_equal(sc_kvstore_delete(s, h1), 0);
	assert_int_equal(sc_kvstore_delete(s, h1), SC_ENOTFOUND);
	assert_int_equal(sc_kvstore_live(s), 0);
	assert_int_equal(sc_kvstore_put(s, malloc(8), 8, 3, 5, 3000, h3), 0);
	sc_kvstore_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rmsnorm),
	    cmocka_unit_test(test_matmul),
	    cmocka_unit_test(test_matmul_batch_exact),
	    cmocka_unit_test(test_softmax),
	    cmocka_unit_test(test_rope),
	    cmocka_unit_test(test_checkpoint_read),
	    cmocka_unit_test(test_checkpoint_bad),
	    cmocka_unit_test(test_forward_and_kv_transfer),
	    cmocka_unit_test(test_batched_step_equals_single),
	    cmocka_unit_test(test_logprobs),
	    cmocka_unit_test(test_sampling),
	    cmocka_unit_test(test_kv_format),
	    cmocka_unit_test(test_kvstore_leases),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
