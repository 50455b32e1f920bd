/* What a next attempt of a request may do and what it sends: the retry
 * limits (--max-retries, the gateway's retry budget) that proxy.c and pd.c
 * ask before every new attempt, so plain and prefill/decode requests are
 * retried by one rule, and the body an attempt carries (the client's bytes
 * verbatim when nothing needs rewriting, else the rewritten JSON). */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "gateway/proxy.h"

int sc__gw_retry_check(gw_req_t *q)
{
	sc_gw_t *gw = q->gw;
	if (q->attempts + q->prefill_attempts > gw->o.max_retries + q->resumes)
		return GW_DENY_ATTEMPTS;
	/* A request refused at connect time added no load anywhere: the
	 * budget, which protects struggling replicas, does not apply. */
	if (q->free_retry)
		return 0;
	if (!sc_retry_budget_ok(gw->active, gw->active_retries, gw->o.retry_budget,
	                        gw->o.retry_budget_min)) {
		gw->budget_exhausted++;
		return GW_DENY_BUDGET;
	}
	return 0;
}

int sc__gw_may_retry(gw_req_t *q)
{
	return sc__gw_retry_check(q) == 0;
}

json_t *sc__gw_req_json(gw_req_t *q)
{
	if (!q->body && (q->kind == GW_K_COMPL || q->kind == GW_K_CHAT || q->kind == GW_K_EMBED))
		q->body = json_loadb(q->raw, q->rawlen, 0, NULL);
	return q->body;
}

/* True when the client's body can go upstream byte for byte: no version
 * suffix to strip, no model name of the backend's own, no phase bodies, no
 * resume. */
int sc__gw_body_verbatim(const gw_req_t *q)
{
	if (q->kind != GW_K_COMPL && q->kind != GW_K_CHAT && q->kind != GW_K_EMBED)
		return 1;
	return !q->rewrite && !q->pd && !q->started && !(q->be && q->be->upstream_model[0]);
}

char *sc__gw_body_for_attempt(gw_req_t *q, size_t *len)
{
	if (sc__gw_body_verbatim(q) || !sc__gw_req_json(q)) {
		char *c = sc_xmalloc(q->rawlen + 1);
		memcpy(c, q->raw, q->rawlen);
		*len = q->rawlen;
		return c;
	}
	json_t *b;
	if (q->pd_ops && q->role == GW_ROLE_PREFILL) {
		b = q->pd_ops->prefill_body(q);
	} else if (q->pd_ops) {
		b = q->pd_ops->decode_body(q);
	} else {
		b = sc_xcheck(json_deep_copy(q->body));
		const char *um = q->be ? q->be->upstream_model : "";
		json_object_set_new(b, "model", json_string(um[0] ? um : q->model));
		if (q->started && q->ids)
			json_object_set(b, "generated_ids", q->ids);
	}
	char *s = sc_xcheck(json_dumps(b, JSON_COMPACT));
	json_decref(b);
	*len = strlen(s);
	return s;
}
