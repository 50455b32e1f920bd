/* JSON answers of the API, errors included (server.h, "reply.c"). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "server/server.h"
#include "starcloud/error.h"

/* ---------------------------------------------------------------------
 * Responses
 * ------------------------------------------------------------------- */

void sc__api_json(sc_http_req_t *r, int code, json_t *doc)
{
	char *text = sc_xcheck(json_dumps(doc, JSON_COMPACT));
	json_decref(doc);
	size_t n = strlen(text);
	text = sc_xrealloc(text, n + 2);
	text[n++] = '\n';
	sc_http_respond(r, code, "application/json", text, n);
	free(text);
}

void sc__api_error(sc_http_req_t *r, int code, const char *reason, const char *field,
                   const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *doc = json_pack("{s:{s:i,s:s,s:s,s:s}}", "error", "code", code, "reason", reason,
	                        "message", msg, "field", field ? field : "");
	sc__api_json(r, code, doc);
}

void sc__api_store_error(sc_http_req_t *r, int rc, const char *what)
{
	/* The store could not be reached (etcd down): nothing was written,
	 * and the client should retry, maybe on another server. */
	if (rc == SC_EUNAVAIL)
		sc__api_error(r, 503, "ServiceUnavailable", NULL,
		              "the store cannot be reached; nothing was changed");
	else if (rc == SC_EUNSURE)
		/* etcd took the write and did not answer (no quorum): it may be
		 * applied when the quorum is back, so a blind retry may apply it
		 * twice or fail with a conflict. */
		sc__api_error(r, 504, "StoreTimeout", NULL,
		              "the store did not answer in time: the change may or may not have "
		              "been made; read the object before trying again");
	else if (rc == SC_ENOSPACE) /* the disk is full (commit.c) */
		sc__api_error(
		    r, 507, "InsufficientStorage", NULL,
		    "the server's disk is full: nothing was changed; reads go on, and writes "
		    "are taken again by themselves once there is space");
	else if (rc == SC_EIO)
		sc__api_error(
		    r, 503, "StorageError", NULL,
		    "the server's disk cannot be written: nothing was changed; reads go on; "
		    "retry later");
	else
		sc__api_error(r, 500, "InternalError", NULL, "%s: %s", what, sc_strerror(rc));
}
