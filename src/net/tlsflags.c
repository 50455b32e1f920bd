#include "net/tlsflags.h"

#include <stdio.h>
#include <string.h>

#include "net/tlsreload.h"
#include "starcloud/error.h"

static int loopback(const char *host)
{
	return strncmp(host, "127.", 4) == 0 || strcmp(host, "localhost") == 0 ||
	       strcmp(host, "::1") == 0;
}

int sc_tls_serve_setup(const char *cmd, const sc_tls_serve_flags_t *f, const char *host,
                       sc_http_server_t *s, sc_tls_ctx_t **ctx)
{
	char err[512];
	*ctx = NULL;
	sc_tls_reload_interval(f->reload_ms);
	if (!f->cert != !f->key) {
		fprintf(stderr, "starcloud %s: %s needs %s too\n", cmd,
		        f->cert ? "--tls-cert" : "--tls-key", f->cert ? "--tls-key" : "--tls-cert");
		return SC_EINVAL;
	}
	if (!f->cert) {
		if (f->client_ca) {
			fprintf(stderr, "starcloud %s: --tls-client-ca needs --tls-cert\n", cmd);
			return SC_EINVAL;
		}
		if (!loopback(host) && !f->plain) {
			fprintf(stderr,
			        "starcloud %s: refusing to serve plain HTTP on %s: give --tls-cert "
			        "and --tls-key (or --plain-http on a trusted network)\n",
			        cmd, host);
			return SC_EINVAL;
		}
		return 0;
	}
	if (sc_tls_server_ctx(f->cert, f->key, f->client_ca, 0, ctx, err, sizeof(err)) < 0) {
		fprintf(stderr, "starcloud %s: %s\n", cmd, err);
		return SC_EINVAL;
	}
	sc_http_set_tls(s, *ctx);
	return 0;
}
