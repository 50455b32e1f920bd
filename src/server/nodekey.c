/* The server's credential towards node agents.
 *
 * The server reads pods and logs from an agent's status port on behalf of
 * users (logs.c), so the agent must tell the server apart from everyone
 * else, and a user's own token must never travel to a node (a node may be
 * hostile: docs/SECURITY.md). Each node gets its own key,
 * HMAC-SHA256(cluster secret, node name): the agent learns it from the
 * answers to its heartbeats (which only that node's token, or an admin,
 * can send) and accepts nothing else on /pods and /logs. A node that is
 * taken over learns only its own key, which opens no other node.
 *
 * The cluster secret is 32 random bytes kept in the store
 * (/registry/secrets/nodekey), created once, so every server of an HA
 * group and every restart derive the same keys. */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "server/server.h"
#include "starcloud/error.h"
#include "starcloud/sha256.h"

#define SECRET_KEY SC_KEY_PREFIX "secrets/nodekey"
#define BLOCK 64

static int valid_secret(const char *v)
{
	return v && strlen(v) == 64 && strspn(v, "0123456789abcdef") == 64;
}

int sc__nodekey_init(sc_server_t *s)
{
	sc_kv_t kv = {0};
	for (int attempt = 0; attempt < 2; attempt++) {
		if (sc_store_get(s->store, SECRET_KEY, &kv) == 0) {
			int ok = valid_secret(kv.value);
			if (ok)
				snprintf(s->node_key_secret, sizeof(s->node_key_secret), "%s",
				         kv.value);
			sc_kv_free(&kv);
			return ok ? 0 : SC_EPARSE;
		}
		unsigned char rnd[32];
		char hex[65];
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
			return SC_EIO;
		for (size_t i = 0; i < sizeof(rnd); i++)
			snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
		/* Created only if absent: two servers starting at once agree on
		 * the first one written (the loser reads it back). */
		int rc = sc_store_put(s->store, SECRET_KEY, hex, SC_REV_ABSENT, NULL);
		if (rc < 0 && rc != SC_EEXISTS)
			return rc;
	}
	return SC_EIO;
}

/* HMAC-SHA256 (RFC 2104) over the node's name. */
void sc__nodekey(const sc_server_t *s, const char *node, char out[65])
{
	uint8_t k[BLOCK] = {0}, ipad[BLOCK], opad[BLOCK], inner[SC_SHA256_LEN], mac[SC_SHA256_LEN];
	size_t klen = strlen(s->node_key_secret);
	memcpy(k, s->node_key_secret, klen < BLOCK ? klen : BLOCK);
	for (int i = 0; i < BLOCK; i++) {
		ipad[i] = k[i] ^ 0x36;
		opad[i] = k[i] ^ 0x5c;
	}
	sc_sha256_t c;
	sc_sha256_init(&c);
	sc_sha256_update(&c, ipad, BLOCK);
	sc_sha256_update(&c, node, strlen(node));
	sc_sha256_final(&c, inner);
	sc_sha256_init(&c);
	sc_sha256_update(&c, opad, BLOCK);
	sc_sha256_update(&c, inner, sizeof(inner));
	sc_sha256_final(&c, mac);
	for (int i = 0; i < SC_SHA256_LEN; i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
}
