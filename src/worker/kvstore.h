/* KV handles: prefilled caches kept under a lease for decode workers, and
 * the SCKV wire format they travel in (docs/WORKER.md, "KV blocks").
 *
 * The store is pure (time comes in as milliseconds) and bounded: at most
 * max_handles blocks, each at most one model's seq_len tokens. */
#ifndef SC_WORKER_KVSTORE_H
#define SC_WORKER_KVSTORE_H

#include <stddef.h>
#include <stdint.h>

#define SC_KV_MAGIC "SCKV"
#define SC_KV_VERSION 1
#define SC_KV_HEADER 48
#define SC_KV_HANDLE_LEN 20 /* "kv-" + 16 hex + NUL */

typedef struct sc_kv_header {
	uint32_t version, n_layers, kv_dim, n_tokens, seq_len;
	int32_t first_token;
	uint64_t fingerprint, checksum;
} sc_kv_header_t;

/* Writes the 48-byte header for payload (len bytes) into out. */
void sc_kv_header_write(sc_kv_header_t *h, const void *payload, size_t len,
                        unsigned char out[SC_KV_HEADER]);
/* Reads and checks a whole block: magic, version, payload size against the
 * shape, checksum. On success *h is filled and *payload points into data.
 * SC_EPARSE with a message in err otherwise. */
int sc_kv_parse(const void *data, size_t len, sc_kv_header_t *h, const void **payload, char *err,
                size_t errsz);

typedef struct sc_kvstore sc_kvstore_t;

typedef struct sc_kv_entry {
	char handle[SC_KV_HANDLE_LEN];
	unsigned char *block; /* header + payload, owned */
	size_t len;
	uint64_t expires_ms;
	int n_tokens, first_token;
} sc_kv_entry_t;

sc_kvstore_t *sc_kvstore_new(size_t max_handles, uint64_t lease_ms, uint64_t seed);
void sc_kvstore_free(sc_kvstore_t *s);
/* Stores block (taken: freed by the store, also on failure) under a new
 * handle, copied to handle_out. SC_ELIMIT when the store is full. */
int sc_kvstore_put(sc_kvstore_t *s, unsigned char *block, size_t len, int n_tokens, int first_token,
                   uint64_t now_ms, char handle_out[SC_KV_HANDLE_LEN]);
/* The live entry for handle (borrowed, valid until the next put, delete or
 * sweep), with its lease restarted; NULL when unknown or expired. */
sc_kv_entry_t *sc_kvstore_touch(sc_kvstore_t *s, const char *handle, uint64_t now_ms);
/* SC_ENOTFOUND when unknown. */
int sc_kvstore_delete(sc_kvstore_t *s, const char *handle);
/* Frees expired entries; returns how many. */
int sc_kvstore_sweep(sc_kvstore_t *s, uint64_t now_ms);
size_t sc_kvstore_live(const sc_kvstore_t *s);
uint64_t sc_kvstore_lease_ms(const sc_kvstore_t *s);

#endif
