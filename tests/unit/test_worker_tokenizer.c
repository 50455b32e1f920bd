/* The worker's tokenizers (byte-level and llama2.c tokenizer.bin) and the
 * incremental UTF-8 cleaner, through libsc_worker.a. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "starcloud/error.h"
#include "worker/tokenizer.h"

/* Concatenates the pieces of ids (after BOS handling) into out. */
static size_t decode_all(const sc_tokenizer_t *t, const int *ids, int n, char *out)
{
	size_t w = 0;
	int prev = SC_TOK_BOS;
	for (int i = 0; i < n; i++) {
		size_t len;
		const char *p = sc_tokenizer_piece(t, prev, ids[i], &len);
		memcpy(out + w, p, len);
		w += len;
		prev = ids[i];
	}
	out[w] = '\0';
	return w;
}

static void test_bytes_round_trip(void **state)
{
	sc_tokenizer_t *t;
	assert_int_equal(sc_tokenizer_bytes(258, &t), SC_EINVAL);
	assert_int_equal(sc_tokenizer_bytes(512, &t), 0);
	const char *text = "h\xc3\xa9llo, world\n";
	int ids[64];
	int n = sc_tokenizer_encode(t, text, strlen(text), 1, ids, 64);
	assert_int_equal(n, 1 + (int)strlen(text));
	assert_int_equal(ids[0], SC_TOK_BOS);
	assert_int_equal(ids[1], 'h' + 3);
	char out[64];
	decode_all(t, ids + 1, n - 1, out);
	assert_string_equal(out, text);
	/* Too long for the room given. */
	assert_int_equal(sc_tokenizer_encode(t, text, strlen(text), 1, ids, 5), SC_ETOOBIG);
	/* Ids above the bytes print as ASCII; specials print nothing. */
	size_t len;
	assert_memory_equal(sc_tokenizer_piece(t, 0, 259, &len), " ", 1);
	assert_int_equal(len, 1);
	sc_tokenizer_piece(t, 0, SC_TOK_EOS, &len);
	assert_int_equal(len, 0);
	sc_tokenizer_free(t);
}

/* A tokenizer.bin in memory: <unk> <s> </s>, 256 byte pieces, then
 * " ", "a", "b", "ab", " ab", "c" with scores that favour longer merges. */
static size_t build_bin(unsigned char *buf, int *vocab)
{
	const char *extra[] = {" ", "a", "b", "ab", " ab", "c"};
	float escore[] = {-5, -4, -4, -1, 0, -4};
	size_t off = 0;
	int32_t maxlen = 6;
	memcpy(buf, &maxlen, 4), off += 4;
	int n = 0;
	char piece[16];
	for (int i = 0; i < 3 + 256 + 6; i++, n++) {
		const char *p;
		float sc = -10;
		if (i < 3) {
			p = i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>";
		} else if (i < 259) {
			snprintf(piece, sizeof(piece), "<0x%02X>", i - 3);
			p = piece;
		} else {
			p = extra[i - 259];
			sc = escore[i - 259];
		}
		int32_t len = (int32_t)strlen(p);
		memcpy(buf + off, &sc, 4), off += 4;
		memcpy(buf + off, &len, 4), off += 4;
		memcpy(buf + off, p, (size_t)len), off += (size_t)len;
	}
	*vocab = n;
	return off;
}

static void test_bin_bpe(void **state)
{
	static unsigned char bin[8192];
	int vocab;
	size_t len = build_bin(bin, &vocab);
	sc_tokenizer_t *t;
	char err[128];
	assert_int_equal(sc_tokenizer_load_mem(bin, len, vocab, &t, err, sizeof(err)), 0);
	int ids[16];
	/* " " + "a" + "b" -> " " + "ab" -> " ab" (id 263). */
	int n = sc_tokenizer_encode(t, "ab", 2, 1, ids, 16);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], SC_TOK_BOS);
	assert_int_equal(ids[1], 263);
	/* "abc": " ab" + "c"; a byte not in the vocabulary falls back. */
	n = sc_tokenizer_encode(t, "abcz", 4, 0, ids, 16);
	assert_int_equal(n, 3);
	assert_int_equal(ids[0], 263);
	assert_int_equal(ids[1], 264);
	assert_int_equal(ids[2], 'z' + 3);
	char out[32];
	decode_all(t, ids, n, out);
	assert_string_equal(out, "abcz"); /* the leading space is dropped after BOS */
	sc_tokenizer_free(t);
	/* Truncated files and bad lengths are errors. */
	assert_int_equal(sc_tokenizer_load_mem(bin, len - 3, vocab, &t, err, sizeof(err)),
	                 SC_EPARSE);
	assert_non_null(strstr(err, "tokenizer"));
	assert_int_equal(sc_tokenizer_load_mem(bin, 2, vocab, &t, err, sizeof(err)), SC_EPARSE);
	assert_int_equal(
	    sc_tokenizer_load_file("/nonexistent/tok.bin", vocab, &t, err, sizeof(err)), SC_EIO);
}

static void test_utf8_cleaner(void **state)
{
	sc_utf8_t u = {0};
	char out[64];
	/* "é" split over two feeds comes out whole, once. */
	assert_int_equal(sc_utf8_feed(&u, "a\xc3", 2, 0, out, sizeof(out)), 1);
	assert_string_equal(out, "a");
	assert_int_equal(sc_utf8_feed(&u, "\xa9", 1, 0, out, sizeof(out)), 2);
	assert_string_equal(out, "\xc3\xa9");
	/* Invalid bytes become U+FFFD, one each, also the bytes of a sequence
	 * cut short by the end of the text. */
	size_t n = sc_utf8_feed(&u,
	                        "\xff"
	                        "b\xe2\x82",
	                        4, 1, out, sizeof(out));
	assert_int_equal(n, 3 + 1 + 3 + 3);
	assert_memory_equal(out,
	                    "\xef\xbf\xbd"
	                    "b"
	                    "\xef\xbf\xbd\xef\xbf\xbd",
	                    n);
	/* Overlong and surrogate encodings are refused. */
	sc_utf8_t v = {0};
	n = sc_utf8_feed(&v, "\xc0\xaf\xed\xa0\x80", 5, 1, out, sizeof(out));
	assert_null(memchr(out, 0xc0, n));
	assert_null(memchr(out, 0xed, n));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bytes_round_trip),
	    cmocka_unit_test(test_bin_bpe),
	    cmocka_unit_test(test_utf8_cleaner),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
