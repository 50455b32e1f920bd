/* Error answers of the gateway, in OpenAI's and KServe's shapes (gw_int.h,
 * "reply.c"). */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "gateway/gw_int.h"

/* OpenAI's error types by status; the SDKs raise a typed error per status
 * and keep type, param and code. */
static const char *err_type(int status)
{
	return status == 429   ? "rate_limit_error"
	       : status >= 500 ? "server_error"
	                       : "invalid_request_error";
}

void sc__gw_error(sc_http_req_t *r, int status, const char *code, const char *param,
                  const char *msg)
{
	json_t *e = sc_xcheck(json_pack("{s:{s:s,s:s,s:s?,s:s?}}", "error", "message", msg, "type",
	                                err_type(status), "param", param, "code", code));
	char *s = sc_xcheck(json_dumps(e, JSON_COMPACT));
	json_decref(e);
	sc_http_respond(r, status, "application/json", s, strlen(s));
	free(s);
}

void sc__gw_kserve_error(sc_http_req_t *r, int status, const char *msg)
{
	json_t *e = sc_xcheck(json_pack("{s:s}", "error", msg));
	char *s = sc_xcheck(json_dumps(e, JSON_COMPACT));
	json_decref(e);
	sc_http_respond(r, status, "application/json", s, strlen(s));
	free(s);
}
