/* A prefill's answer: the first n tokens of its KV cache made into an SCKV
 * block, kept under a leased handle, and the handle sent back (worker_int.h,
 * "kvblock.c"). Below gen.c, which calls it when a prefill's sequence has
 * its first token, and disagg.c, which starts that sequence. */
#include <stdio.h>

#include "base/alloc.h"
#include "worker/worker_int.h"

void sc__prefill_reply(wreq_t *q, sc_session_t *s, int n, int first_token, json_t *lp)
{
	sc_worker_t *w = q->w;
	const sc_model_t *m = q->m->model;
	size_t plen = sc_session_kv_bytes(m, n);
	unsigned char *block = sc_malloc(SC_KV_HEADER + plen);
	if (!block) {
		json_decref(lp);
		return sc__reply_error(q, 503, NULL, "out of memory for the KV block");
	}
	sc_session_kv_export(s, n, block + SC_KV_HEADER);
	sc_kv_header_t h = {.n_layers = (uint32_t)m->cfg.n_layers,
	                    .kv_dim = (uint32_t)m->kv_dim,
	                    .n_tokens = (uint32_t)n,
	                    .seq_len = (uint32_t)m->cfg.seq_len,
	                    .first_token = first_token,
	                    .fingerprint = m->fingerprint};
	sc_kv_header_write(&h, block + SC_KV_HEADER, plen, block);
	char handle[SC_KV_HANDLE_LEN];
	if (sc_kvstore_put(w->kv, block, SC_KV_HEADER + plen, n, first_token, sc__now_ms(),
	                   handle) < 0) {
		json_decref(lp);
		return sc__reply_error(q, 503, "kv_handle",
		                       "KV store full (%zu live handles, --kv-max-handles)",
		                       sc_kvstore_live(w->kv));
	}
	w->c.kv_created++;
	char url[256];
	/* A TLS worker's blocks are fetched over TLS (the decode side checks
	 * this worker's certificate against its --ca). */
	snprintf(url, sizeof(url), "%s://%s:%d/v1/kv/%s", w->tls ? "https" : "http", w->host,
	         w->port, handle);
	json_t *ans = json_pack("{s:s, s:s, s:i, s:i, s:I, s:s, s:s}", "kv_handle", handle,
	                        "kv_url", url, "first_token", first_token, "n_tokens", n,
	                        "lease_ms", (json_int_t)sc_kvstore_lease_ms(w->kv), "model",
	                        q->m->name, "version", q->m->version);
	if (lp)
		json_object_set_new(ans, "first_logprobs", lp);
	sc__reply_json(q, 200, ans);
}
