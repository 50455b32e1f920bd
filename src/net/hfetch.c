#include "net/hfetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"

#define DEFAULT_MAX_BODY (4u << 20)

typedef struct fetch {
	sc_buf_t body; /* bounded by max_body */
	int stop;      /* the code on_data stopped with, or SC_ETOOBIG */
	sc_hfetch_data_fn on_data;
	sc_hfetch_done_fn done;
	void *ud;
} fetch_t;

static int f_data(sc_hcli_req_t *r, const char *d, size_t n, void *ud)
{
	fetch_t *f = ud;
	if (f->on_data) {
		int rc = f->on_data(d, n, f->ud);
		if (rc < 0)
			f->stop = rc;
		return rc < 0;
	}
	if (sc_buf_append(&f->body, d, n) < 0) { /* over max_body */
		f->stop = SC_ETOOBIG;
		return 1;
	}
	return 0;
}

static void f_done(sc_hcli_req_t *r, int err, void *ud)
{
	fetch_t *f = ud;
	int status = err == SC_ECANCELED && f->stop ? f->stop : err < 0 ? err : sc_hcli_status(r);
	if (f->done)
		f->done(status, f->body.data ? f->body.data : "", f->body.len, f->ud);
	sc_buf_free(&f->body);
	free(f);
}

/* The request's own header lines; SC_EINVAL when a value would break the
 * head (a token or type with CR/LF). */
static int headers(const sc_hfetch_t *o, char *buf, size_t sz)
{
	const char *vals[] = {o->token, o->accept};
	for (size_t i = 0; i < 2; i++)
		if (vals[i] && strpbrk(vals[i], "\r\n"))
			return SC_EINVAL;
	if (o->content_type && strpbrk(o->content_type, "\r\n"))
		return SC_EINVAL;
	int n =
	    snprintf(buf, sz, "%s%s%s%s%s%s", o->token ? "Authorization: Bearer " : "",
	             o->token ? o->token : "", o->token ? "\r\n" : "", o->accept ? "Accept: " : "",
	             o->accept ? o->accept : "", o->accept ? "\r\n" : "");
	return n < 0 || (size_t)n >= sz ? SC_EINVAL : 0;
}

int sc_hfetch(sc_hcli_t *c, const sc_hfetch_t *o, sc_hcli_req_t **out)
{
	char hdrs[8192];
	int rc = headers(o, hdrs, sizeof(hdrs));
	if (rc < 0)
		return rc;
	fetch_t *f = sc_xcalloc(1, sizeof(*f));
	sc_buf_init(&f->body, o->max_body ? o->max_body : DEFAULT_MAX_BODY);
	f->on_data = o->on_data;
	f->done = o->done;
	f->ud = o->ud;
	sc_hcli_call_t call = {.method = o->method ? o->method : "GET",
	                       .url = o->url,
	                       .headers = hdrs[0] ? hdrs : NULL,
	                       .body = o->body,
	                       .body_len = o->body ? o->body_len : 0,
	                       .ctype = o->content_type,
	                       .timeout_ms = o->timeout_ms,
	                       .idle_timeout_ms = o->idle_timeout_ms,
	                       .cbs = {.on_data = f_data, .on_done = f_done},
	                       .ud = f};
	rc = sc_hcli_start(c, &call, out);
	if (rc < 0) {
		sc_buf_free(&f->body);
		free(f);
	}
	return rc;
}
