/* The HTTP server's request as handlers see it: status texts, and the
 * accessors for method, path, query parameters, headers and body. Split
 * from http.c, which holds connections, parsing and output. */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "base/httphead.h"
#include "net/http_int.h"
#include "starcloud/error.h"

/* ---------------------------------------------------------------------
 * Status lines
 * ------------------------------------------------------------------- */

const char *sc_http_status_text(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 204:
		return "No Content";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 409:
		return "Conflict";
	case 410:
		return "Gone";
	case 413:
		return "Payload Too Large";
	case 415:
		return "Unsupported Media Type";
	case 422:
		return "Unprocessable Entity";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 503:
		return "Service Unavailable";
	case 507:
		return "Insufficient Storage";
	default:
		return "Unknown";
	}
}

/* ---------------------------------------------------------------------
 * Request accessors
 * ------------------------------------------------------------------- */

const char *sc_http_method(const sc_http_req_t *r)
{
	return r->method;
}

const char *sc_http_path(const sc_http_req_t *r)
{
	return r->url.data ? r->url.data : "/";
}

/* The query after '?', "" if none. */
static const char *sc_http_query(const sc_http_req_t *r)
{
	return r->query ? r->query : "";
}

const char *sc_http_header(const sc_http_req_t *r, const char *name)
{
	return sc_hhead_lookup(r->hdrs.data, (const size_t(*)[2])r->hdr_off, r->nhdrs, name);
}

const char *sc_http_body(const sc_http_req_t *r, size_t *len)
{
	*len = r->body.len;
	return r->body.data ? r->body.data : "";
}

const char *sc_http_peer(const sc_http_req_t *r)
{
	return r->conn->peer;
}

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = tolower(ch);
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

int sc_http_query_param(const sc_http_req_t *r, const char *key, char *out, size_t outsz)
{
	const char *p = sc_http_query(r);
	size_t klen = strlen(key);
	while (*p) {
		const char *end = strchr(p, '&');
		if (!end)
			end = p + strlen(p);
		if (strncmp(p, key, klen) == 0 && (p[klen] == '=' || p + klen == end)) {
			const char *v = p + klen + (p[klen] == '=');
			size_t n = 0;
			for (; v < end; v++) {
				int ch = (unsigned char)*v;
				if (ch == '+')
					ch = ' ';
				else if (ch == '%' && v + 2 < end && hexval(v[1]) >= 0 &&
				         hexval(v[2]) >= 0) {
					ch = hexval(v[1]) * 16 + hexval(v[2]);
					v += 2;
				}
				if (n + 1 >= outsz)
					return SC_ETOOBIG;
				out[n++] = (char)ch;
			}
			out[n] = '\0';
			return (int)n;
		}
		p = *end ? end + 1 : end;
	}
	return -1;
}

int sc_http_status(const sc_http_req_t *r)
{
	return r->status;
}

void sc_http_peer_name(const sc_http_req_t *r, char *out, size_t outsz)
{
	out[0] = '\0';
	if (r->conn->tls)
		sc_tls_peer_name(r->conn->tls, out, outsz);
}

int sc_http_peer_cert(const sc_http_req_t *r, char *serial, size_t serialsz, int64_t *not_after)
{
	serial[0] = '\0';
	*not_after = 0;
	return r->conn->tls ? sc_tls_peer_cert(r->conn->tls, serial, serialsz, not_after) : 0;
}
