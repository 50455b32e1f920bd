/* libFuzzer target: the KV-transfer block parser (worker/kvstore.c,
 * sc_kv_parse), which reads blocks a decode worker pulls from a prefill
 * worker over the network.
 *
 * Whatever the bytes, parsing must not read outside them; a block it
 * accepts has exactly the payload its shape says, and writing the header
 * again from what was parsed gives a block that parses to the same header
 * (the parser and the writer agree). The first input byte picks a mode:
 * odd inputs are given a valid header for their payload first, so the
 * fuzzer also reaches the checks after the magic and the checksum. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/kvstore.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const unsigned char *block, size_t len)
{
	sc_kv_header_t h;
	const void *payload;
	char err[128];
	if (sc_kv_parse(block, len, &h, &payload, err, sizeof(err)) != 0)
		return;
	size_t plen = len - SC_KV_HEADER;
	if ((const unsigned char *)payload != block + SC_KV_HEADER ||
	    (uint64_t)h.n_layers * 2 * h.n_tokens * h.kv_dim * 4 != plen)
		abort();
	unsigned char *again = malloc(len);
	memcpy(again, block, len);
	sc_kv_header_t h2 = h;
	sc_kv_header_write(&h2, payload, plen, again);
	sc_kv_header_t h3;
	const void *p3;
	if (sc_kv_parse(again, len, &h3, &p3, err, sizeof(err)) != 0 || h3.n_layers != h.n_layers ||
	    h3.kv_dim != h.kv_dim || h3.n_tokens != h.n_tokens || h3.first_token != h.first_token ||
	    h3.fingerprint != h.fingerprint || h3.checksum != h.checksum)
		abort();
	free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0 || size > (1u << 20))
		return 0;
	if (!(data[0] & 1)) {
		check(data + 1, size - 1);
		return 0;
	}
	/* A header made for the rest of the input: shape from its first bytes. */
	size_t plen = size - 1;
	unsigned char *block = malloc(SC_KV_HEADER + plen);
	memcpy(block + SC_KV_HEADER, data + 1, plen);
	sc_kv_header_t h = {.version = SC_KV_VERSION,
	                    .n_layers = 1,
	                    .kv_dim = 1,
	                    .n_tokens = (uint32_t)(plen / 8),
	                    .seq_len = 256,
	                    .first_token = size > 2 ? data[1] : 0,
	                    .fingerprint = size};
	sc_kv_header_write(&h, block + SC_KV_HEADER, plen, block);
	check(block, SC_KV_HEADER + plen);
	free(block);
	return 0;
}
