/* SHA-256 (FIPS 180-4), used to store API tokens hashed.
 *
 * A small self-contained implementation so the library needs no crypto
 * package; it is only used for token digests, never for bulk data. */
#ifndef STARCLOUD_SHA256_H
#define STARCLOUD_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SC_SHA256_LEN 32

typedef struct sc_sha256 {
	uint32_t h[8];
	uint64_t nbytes;
	uint8_t buf[64];
	size_t nbuf;
} sc_sha256_t;

void sc_sha256_init(sc_sha256_t *c);
/* Feeds len bytes of data (borrowed). */
void sc_sha256_update(sc_sha256_t *c, const void *data, size_t len);
void sc_sha256_final(sc_sha256_t *c, uint8_t out[SC_SHA256_LEN]);
/* One-shot digest of data as 64 lowercase hex digits plus NUL. */
void sc_sha256_hex(const void *data, size_t len, char out[2 * SC_SHA256_LEN + 1]);

#endif
