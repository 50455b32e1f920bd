/* The HTTP client's response parser glue: http_parser callbacks that keep
 * the status and headers of the request being answered and hand its body
 * to on_data (the fast path for simple answers is read_simple in
 * hclient.c, which stores fields with sc__hc_keep_field). */
#include "net/hclient_int.h"

#include <string.h>

/* ---------------------------------------------------------------------
 * Response parsing
 * ------------------------------------------------------------------- */

static int rp_header_field(http_parser *hp, const char *at, size_t len)
{
	sc_hcli_req_t *r = ((hc_conn_t *)hp->data)->req;
	if (!r || r->cancelled)
		return 1;
	if (r->hdrs.len + len + 2 > r->c->opts.max_header_bytes)
		return 1;
	if (r->hdr_state != HDR_FIELD) {
		if (r->hdr_state == HDR_VALUE)
			sc_buf_append(&r->hdrs, "", 1);
		if (r->nhdrs == MAX_RESP_HEADERS)
			return 1;
		r->hdr_off[r->nhdrs][0] = r->hdrs.len;
		r->nhdrs++;
	}
	r->hdr_state = HDR_FIELD;
	return sc_buf_append(&r->hdrs, at, len) < 0;
}

static int rp_header_value(http_parser *hp, const char *at, size_t len)
{
	sc_hcli_req_t *r = ((hc_conn_t *)hp->data)->req;
	if (!r || r->cancelled || r->nhdrs == 0)
		return 1;
	if (r->hdrs.len + len + 2 > r->c->opts.max_header_bytes)
		return 1;
	if (r->hdr_state != HDR_VALUE) {
		sc_buf_append(&r->hdrs, "", 1);
		r->hdr_off[r->nhdrs - 1][1] = r->hdrs.len;
	}
	r->hdr_state = HDR_VALUE;
	return sc_buf_append(&r->hdrs, at, len) < 0;
}

static int rp_headers_complete(http_parser *hp)
{
	sc_hcli_req_t *r = ((hc_conn_t *)hp->data)->req;
	if (!r || r->cancelled)
		return -1;
	if (r->hdr_state == HDR_VALUE)
		sc_buf_append(&r->hdrs, "", 1);
	else if (r->hdr_state == HDR_FIELD) {
		sc_buf_append(&r->hdrs, "", 1);
		r->hdr_off[r->nhdrs - 1][1] = r->hdrs.len;
		sc_buf_append(&r->hdrs, "", 1);
	}
	r->hdr_state = HDR_NONE;
	if (hp->status_code < 100 || hp->status_code > 599)
		return -1; /* "HTTP/1.1 2 OK" is no answer: a malformed one (SC_EPARSE) */
	r->status = hp->status_code;
	if (r->status == 100) /* interim answer: wait for the real one */
		return 0;
	if (r->cbs.on_head && r->cbs.on_head(r, r->status, r->ud))
		r->cancelled = 1;
	return r->cancelled ? -1 : 0;
}

static int rp_body(http_parser *hp, const char *at, size_t len)
{
	sc_hcli_req_t *r = ((hc_conn_t *)hp->data)->req;
	if (!r || r->cancelled)
		return 1;
	if (r->cbs.on_data && r->cbs.on_data(r, at, len, r->ud))
		r->cancelled = 1;
	return r->cancelled;
}

static int rp_message_complete(http_parser *hp)
{
	hc_conn_t *k = hp->data;
	sc_hcli_req_t *r = k->req;
	if (!r || r->cancelled)
		return 1;
	if (r->status == 100) {
		r->status = 0;
		r->nhdrs = 0;
		sc_buf_reset(&r->hdrs);
		return 0;
	}
	r->complete = 1;
	http_parser_pause(hp, 1);
	return 0;
}

const http_parser_settings sc__hc_rp_settings = {
    .on_header_field = rp_header_field,
    .on_header_value = rp_header_value,
    .on_headers_complete = rp_headers_complete,
    .on_body = rp_body,
    .on_message_complete = rp_message_complete,
};

/* Stores a field the way the parser callbacks do ("name\0value\0"). */
void sc__hc_keep_field(sc_hcli_req_t *r, const sc_hfield_t *f)
{
	r->hdr_off[r->nhdrs][0] = r->hdrs.len;
	sc_buf_append(&r->hdrs, f->name, f->nlen);
	sc_buf_append(&r->hdrs, "", 1);
	r->hdr_off[r->nhdrs][1] = r->hdrs.len;
	sc_buf_append(&r->hdrs, f->value, f->vlen);
	sc_buf_append(&r->hdrs, "", 1);
	r->nhdrs++;
}
