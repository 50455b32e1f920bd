/* KV handle store and the SCKV block format. */
#include "worker/kvstore.h"
#include "base/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starcloud/error.h"
#include "worker/model.h"

struct sc_kvstore {
	sc_kv_entry_t *e; /* max entries; block == NULL marks a free slot */
	size_t max, live;
	uint64_t lease_ms;
	uint64_t rng;
};

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void sc_kv_header_write(sc_kv_header_t *h, const void *payload, size_t len,
                        unsigned char out[SC_KV_HEADER])
{
	h->version = SC_KV_VERSION;
	h->checksum = sc__fnv1a(SC_FNV_INIT, payload, len);
	memcpy(out, SC_KV_MAGIC, 4);
	put32(out + 4, h->version);
	put32(out + 8, h->n_layers);
	put32(out + 12, h->kv_dim);
	put32(out + 16, h->n_tokens);
	put32(out + 20, h->seq_len);
	put32(out + 24, (uint32_t)h->first_token);
	put32(out + 28, 0);
	put64(out + 32, h->fingerprint);
	put64(out + 40, h->checksum);
}

int sc_kv_parse(const void *data, size_t len, sc_kv_header_t *h, const void **payload, char *err,
                size_t errsz)
{
	const unsigned char *p = data;
	if (len < SC_KV_HEADER || memcmp(p, SC_KV_MAGIC, 4) != 0) {
		snprintf(err, errsz, "KV block: no SCKV header");
		return SC_EPARSE;
	}
	h->version = get32(p + 4);
	h->n_layers = get32(p + 8);
	h->kv_dim = get32(p + 12);
	h->n_tokens = get32(p + 16);
	h->seq_len = get32(p + 20);
	h->first_token = (int32_t)get32(p + 24);
	h->fingerprint = get64(p + 32);
	h->checksum = get64(p + 40);
	if (h->version != SC_KV_VERSION) {
		snprintf(err, errsz, "KV block: version %u, expected %d", h->version,
		         SC_KV_VERSION);
		return SC_EPARSE;
	}
	uint64_t want = (uint64_t)h->n_layers * 2 * h->n_tokens * h->kv_dim * 4;
	if (h->n_layers > SC_MODEL_MAX_LAYERS || h->kv_dim > SC_MODEL_MAX_DIM ||
	    h->n_tokens > SC_MODEL_MAX_SEQ || want != len - SC_KV_HEADER) {
		snprintf(err, errsz, "KV block: %zu payload bytes do not match its shape",
		         len - SC_KV_HEADER);
		return SC_EPARSE;
	}
	if (sc__fnv1a(SC_FNV_INIT, p + SC_KV_HEADER, len - SC_KV_HEADER) != h->checksum) {
		snprintf(err, errsz, "KV block: checksum mismatch");
		return SC_EPARSE;
	}
	*payload = p + SC_KV_HEADER;
	return 0;
}

sc_kvstore_t *sc_kvstore_new(size_t max_handles, uint64_t lease_ms, uint64_t seed)
{
	sc_kvstore_t *s = sc_calloc(1, sizeof(*s));
	if (!s || !(s->e = sc_calloc(max_handles ? max_handles : 1, sizeof(sc_kv_entry_t)))) {
		free(s);
		return NULL;
	}
	s->max = max_handles ? max_handles : 1;
	s->lease_ms = lease_ms;
	s->rng = seed ^ 0x5bd1e995u;
	return s;
}

void sc_kvstore_free(sc_kvstore_t *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->max; i++)
		free(s->e[i].block);
	free(s->e);
	free(s);
}

static uint64_t next_id(sc_kvstore_t *s)
{
	/* xorshift64*: handles need to be unique and hard to guess by
	 * accident, not secret (loopback test traffic). */
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 0x2545f4914f6cdd1dull;
}

static sc_kv_entry_t *find(sc_kvstore_t *s, const char *handle)
{
	for (size_t i = 0; i < s->max; i++)
		if (s->e[i].block && strcmp(s->e[i].handle, handle) == 0)
			return &s->e[i];
	return NULL;
}

int sc_kvstore_put(sc_kvstore_t *s, unsigned char *block, size_t len, int n_tokens, int first_token,
                   uint64_t now_ms, char handle_out[SC_KV_HANDLE_LEN])
{
	sc_kvstore_sweep(s, now_ms);
	sc_kv_entry_t *slot = NULL;
	for (size_t i = 0; i < s->max && !slot; i++)
		if (!s->e[i].block)
			slot = &s->e[i];
	if (!slot) {
		free(block);
		return SC_ELIMIT;
	}
	do
		snprintf(slot->handle, sizeof(slot->handle), "kv-%016llx",
		         (unsigned long long)next_id(s));
	while (find(s, slot->handle));
	slot->block = block;
	slot->len = len;
	slot->n_tokens = n_tokens;
	slot->first_token = first_token;
	slot->expires_ms = now_ms + s->lease_ms;
	s->live++;
	memcpy(handle_out, slot->handle, SC_KV_HANDLE_LEN);
	return 0;
}

sc_kv_entry_t *sc_kvstore_touch(sc_kvstore_t *s, const char *handle, uint64_t now_ms)
{
	sc_kv_entry_t *e = find(s, handle);
	if (!e || e->expires_ms <= now_ms)
		return NULL;
	e->expires_ms = now_ms + s->lease_ms;
	return e;
}

static void drop(sc_kvstore_t *s, sc_kv_entry_t *e)
{
	free(e->block);
	e->block = NULL;
	e->handle[0] = '\0';
	s->live--;
}

int sc_kvstore_delete(sc_kvstore_t *s, const char *handle)
{
	sc_kv_entry_t *e = find(s, handle);
	if (!e)
		return SC_ENOTFOUND;
	drop(s, e);
	return 0;
}

int sc_kvstore_sweep(sc_kvstore_t *s, uint64_t now_ms)
{
	int n = 0;
	for (size_t i = 0; i < s->max; i++)
		if (s->e[i].block && s->e[i].expires_ms <= now_ms) {
			drop(s, &s->e[i]);
			n++;
		}
	return n;
}

size_t sc_kvstore_live(const sc_kvstore_t *s)
{
	return s->live;
}

uint64_t sc_kvstore_lease_ms(const sc_kvstore_t *s)
{
	return s->lease_ms;
}
