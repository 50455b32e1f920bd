/* Tokenizers: byte-level fallback and llama2.c tokenizer.bin (BPE by
 * score). Written from the format description in tokenizer.h. */
#include "worker/tokenizer.h"
#include "base/alloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starcloud/error.h"

#define MAX_PIECE 256

struct sc_tokenizer {
	int vocab;
	int bytes_only;
	char **pieces; /* vocab entries, NUL-terminated; NULL for bytes_only */
	size_t *lens;
	float *scores;
	int *sorted; /* ids sorted by piece, for lookups */
	unsigned char byte_piece[256][1];
	char ascii[95][1];
};

int sc_tokenizer_bytes(int vocab_size, sc_tokenizer_t **out)
{
	if (vocab_size < 259)
		return SC_EINVAL;
	sc_tokenizer_t *t = sc_calloc(1, sizeof(*t));
	if (!t)
		return SC_ENOMEM;
	t->vocab = vocab_size;
	t->bytes_only = 1;
	for (int i = 0; i < 256; i++)
		t->byte_piece[i][0] = (unsigned char)i;
	for (int i = 0; i < 95; i++)
		t->ascii[i][0] = (char)(32 + i);
	*out = t;
	return 0;
}

void sc_tokenizer_free(sc_tokenizer_t *t)
{
	if (!t)
		return;
	if (t->pieces)
		for (int i = 0; i < t->vocab; i++)
			free(t->pieces[i]);
	free(t->pieces);
	free(t->lens);
	free(t->scores);
	free(t->sorted);
	free(t);
}

static int piece_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	int c = memcmp(a, b, n);
	if (c)
		return c;
	return alen < blen ? -1 : alen > blen;
}

static const sc_tokenizer_t *sort_ctx; /* qsort has no user pointer */

static int sort_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	int c = piece_cmp(sort_ctx->pieces[x], sort_ctx->lens[x], sort_ctx->pieces[y],
	                  sort_ctx->lens[y]);
	return c ? c : (x > y) - (x < y);
}

/* The id of the piece s[0..n), or -1 (lowest id among duplicates). */
static int lookup(const sc_tokenizer_t *t, const char *s, size_t n)
{
	int lo = 0, hi = t->vocab - 1, found = -1;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2, id = t->sorted[mid];
		int c = piece_cmp(t->pieces[id], t->lens[id], s, n);
		if (c == 0) {
			found = id;
			hi = mid - 1;
		} else if (c < 0) {
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return found;
}

static int load_entries(sc_tokenizer_t *t, const unsigned char *p, size_t len, char *err,
                        size_t errsz)
{
	size_t off = 4;
	for (int i = 0; i < t->vocab; i++) {
		int32_t n;
		if (off + 8 > len) {
			snprintf(err, errsz, "tokenizer: truncated at entry %d", i);
			return SC_EPARSE;
		}
		memcpy(&t->scores[i], p + off, 4);
		memcpy(&n, p + off + 4, 4);
		off += 8;
		if (n < 0 || n > MAX_PIECE || off + (size_t)n > len) {
			snprintf(err, errsz, "tokenizer: entry %d: bad length %d", i, n);
			return SC_EPARSE;
		}
		if (!(t->pieces[i] = sc_malloc((size_t)n + 1)))
			return SC_ENOMEM;
		memcpy(t->pieces[i], p + off, (size_t)n);
		t->pieces[i][n] = '\0';
		t->lens[i] = (size_t)n;
		off += (size_t)n;
	}
	return 0;
}

int sc_tokenizer_load_mem(const void *data, size_t len, int vocab_size, sc_tokenizer_t **out,
                          char *err, size_t errsz)
{
	if (vocab_size < 3 || len < 4) {
		snprintf(err, errsz, "tokenizer: too short or vocabulary too small");
		return SC_EPARSE;
	}
	sc_tokenizer_t *t = sc_calloc(1, sizeof(*t));
	int rc = SC_ENOMEM;
	if (!t)
		return rc;
	t->vocab = vocab_size;
	t->pieces = sc_calloc((size_t)vocab_size, sizeof(char *));
	t->lens = sc_calloc((size_t)vocab_size, sizeof(size_t));
	t->scores = sc_calloc((size_t)vocab_size, sizeof(float));
	t->sorted = sc_calloc((size_t)vocab_size, sizeof(int));
	if (!t->pieces || !t->lens || !t->scores || !t->sorted)
		goto fail;
	if ((rc = load_entries(t, data, len, err, errsz)) < 0)
		goto fail;
	for (int i = 0; i < vocab_size; i++)
		t->sorted[i] = i;
	sort_ctx = t;
	qsort(t->sorted, (size_t)vocab_size, sizeof(int), sort_cmp);
	sort_ctx = NULL;
	for (int i = 0; i < 256; i++)
		t->byte_piece[i][0] = (unsigned char)i;
	*out = t;
	return 0;
fail:
	sc_tokenizer_free(t);
	return rc;
}

int sc_tokenizer_load_file(const char *path, int vocab_size, sc_tokenizer_t **out, char *err,
                           size_t errsz)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errsz, "tokenizer %s: cannot open", path);
		return SC_EIO;
	}
	size_t cap = 1 << 16, len = 0;
	char *buf = sc_xmalloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap && cap < (64u << 20)) {
			char *nb = sc_realloc(buf, cap *= 2);
			if (!nb) {
				free(buf);
				buf = NULL;
			}
			buf = nb;
		} else if (len == cap) {
			break;
		}
	}
	fclose(f);
	if (!buf)
		return SC_ENOMEM;
	int rc = sc_tokenizer_load_mem(buf, len, vocab_size, out, err, errsz);
	free(buf);
	return rc;
}

/* Length of the UTF-8 sequence starting with byte c (1 for anything odd). */
static size_t utf8_len(unsigned char c)
{
	if (c >= 0xf0 && c < 0xf8)
		return 4;
	if (c >= 0xe0)
		return c < 0xf0 ? 3 : 1;
	if (c >= 0xc0)
		return 2;
	return 1;
}

/* Initial ids for BPE: one per character, or byte fallbacks. */
static int bpe_seed(const sc_tokenizer_t *t, const char *s, size_t len, int *ids, int max)
{
	int n = 0;
	for (size_t i = 0; i < len;) {
		size_t cl = utf8_len((unsigned char)s[i]);
		if (i + cl > len)
			cl = 1;
		int id = lookup(t, s + i, cl);
		if (id >= 0) {
			if (n >= max)
				return SC_ETOOBIG;
			ids[n++] = id;
		} else {
			for (size_t k = 0; k < cl; k++) {
				if (n >= max)
					return SC_ETOOBIG;
				ids[n++] = (unsigned char)s[i + k] + 3;
			}
		}
		i += cl;
	}
	return n;
}

/* Merges the best-scoring adjacent pair until none merges. */
static int bpe_merge(const sc_tokenizer_t *t, int *ids, int n)
{
	char buf[2 * MAX_PIECE];
	for (;;) {
		float best = -1e30f;
		int at = -1, best_id = -1;
		for (int i = 0; i + 1 < n; i++) {
			size_t a = t->lens[ids[i]], b = t->lens[ids[i + 1]];
			memcpy(buf, t->pieces[ids[i]], a);
			memcpy(buf + a, t->pieces[ids[i + 1]], b);
			int id = lookup(t, buf, a + b);
			if (id >= 0 && t->scores[id] > best) {
				best = t->scores[id];
				at = i;
				best_id = id;
			}
		}
		if (at < 0)
			return n;
		ids[at] = best_id;
		memmove(ids + at + 1, ids + at + 2, (size_t)(n - at - 2) * sizeof(int));
		n--;
	}
}

int sc_tokenizer_encode(const sc_tokenizer_t *t, const char *text, size_t len, int bos, int *ids,
                        int max)
{
	int n = 0;
	if (bos) {
		if (max < 1)
			return SC_ETOOBIG;
		ids[n++] = SC_TOK_BOS;
	}
	if (t->bytes_only) {
		if (len > (size_t)(max - n))
			return SC_ETOOBIG;
		for (size_t i = 0; i < len; i++)
			ids[n++] = (unsigned char)text[i] + 3;
		return n;
	}
	if (len > 0) {
		int sp = lookup(t, " ", 1);
		if (sp >= 0) {
			if (n >= max)
				return SC_ETOOBIG;
			ids[n++] = sp;
		}
	}
	int k = bpe_seed(t, text, len, ids + n, max - n);
	if (k < 0)
		return k;
	/* The leading space takes part in merges like any other piece. */
	int start = bos ? 1 : 0;
	return start + bpe_merge(t, ids + start, n - start + k);
}

/* "<0xHH>" pieces stand for one raw byte. */
static int hex_byte(const char *p, size_t len)
{
	if (len != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>')
		return -1;
	unsigned v = 0;
	for (int i = 3; i < 5; i++) {
		char c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else
			return -1;
	}
	return (int)v;
}

const char *sc_tokenizer_piece(const sc_tokenizer_t *t, int prev, int id, size_t *len)
{
	*len = 0;
	if (id < 3 || id >= t->vocab)
		return "";
	if (t->bytes_only) {
		*len = 1;
		if (id < 259)
			return (const char *)t->byte_piece[id - 3];
		return t->ascii[(id - 259) % 95];
	}
	const char *p = t->pieces[id];
	size_t n = t->lens[id];
	int b = hex_byte(p, n);
	if (b >= 0) {
		*len = 1;
		return (const char *)t->byte_piece[b];
	}
	/* SentencePiece adds a space before the first word; drop it after BOS. */
	if (prev == SC_TOK_BOS && n > 0 && p[0] == ' ') {
		p++;
		n--;
	}
	*len = n;
	return p;
}

/* ---------------------------------------------------------------------
 * UTF-8 cleaning
 * ------------------------------------------------------------------- */

static const char REPL[] = "\xef\xbf\xbd";

/* 1 when seq (n bytes, n = utf8_len of its lead) is a valid sequence. */
static int utf8_valid(const unsigned char *s, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	uint32_t cp;
	if (n == 2)
		cp = ((uint32_t)(s[0] & 0x1f) << 6) | (s[1] & 0x3f);
	else if (n == 3)
		cp = ((uint32_t)(s[0] & 0x0f) << 12) | ((uint32_t)(s[1] & 0x3f) << 6) |
		     (s[2] & 0x3f);
	else
		cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3f) << 12) |
		     ((uint32_t)(s[2] & 0x3f) << 6) | (s[3] & 0x3f);
	static const uint32_t minv[5] = {0, 0, 0x80, 0x800, 0x10000};
	return cp >= minv[n] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
}

static size_t put(char *out, size_t outsz, size_t w, const void *p, size_t n)
{
	if (w + n < outsz) {
		memcpy(out + w, p, n);
		return w + n;
	}
	return w;
}

size_t sc_utf8_feed(sc_utf8_t *u, const char *in, size_t len, int flush, char *out, size_t outsz)
{
	size_t w = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len)
			u->pend[u->npend++] = (unsigned char)in[i];
		while (u->npend > 0) {
			unsigned char c = u->pend[0];
			size_t need = c < 0x80 ? 1 : (c >= 0xc2 && c < 0xf5) ? utf8_len(c) : 0;
			size_t drop;
			if (need == 1) {
				w = put(out, outsz, w, u->pend, 1), drop = 1;
			} else if (need == 0) {
				w = put(out, outsz, w, REPL, 3), drop = 1;
			} else if ((size_t)u->npend < need) {
				int bad = 0;
				for (int k = 1; k < u->npend; k++)
					bad |= (u->pend[k] & 0xc0) != 0x80;
				if (!bad && !(flush && i == len))
					break; /* wait for the rest */
				w = put(out, outsz, w, REPL, 3), drop = 1;
			} else if (utf8_valid(u->pend, need)) {
				w = put(out, outsz, w, u->pend, need), drop = need;
			} else {
				w = put(out, outsz, w, REPL, 3), drop = 1;
			}
			memmove(u->pend, u->pend + drop, (size_t)u->npend - drop);
			u->npend -= (int)drop;
		}
	}
	if (w < outsz)
		out[w] = '\0';
	return w;
}
