/* The TLS flags every daemon's listener takes, written once:
 *
 *   --tls-cert FILE --tls-key FILE   serve HTTPS (PEM; the chain first)
 *   --tls-client-ca FILE             (server) clients may present
 *                                    certificates signed by this CA (mTLS)
 *   --plain-http                     serve plain HTTP on a non-loopback
 *                                    address (tests, trusted networks)
 *
 * Without a certificate a daemon serves plain HTTP only on a loopback
 * address; anywhere else it refuses to start unless --plain-http says the
 * operator means it (docs/SECURITY.md). */
#ifndef SC_NET_TLSFLAGS_H
#define SC_NET_TLSFLAGS_H

#include "base/flags.h"
#include "net/http.h"
#include "net/tls.h"

typedef struct sc_tls_serve_flags {
	const char *cert, *key, *client_ca;
	int plain;
	uint64_t reload_ms; /* --tls-reload-interval */
} sc_tls_serve_flags_t;

#define SC_TLS_SERVE_FLAGS(T, m)                                                                   \
	{.name = "--tls-cert",                                                                     \
	 SC_FLAG_AT(STR, T, m.cert),                                                               \
	 .meta = "FILE",                                                                           \
	 .help = "serve HTTPS with this certificate (PEM, chain first); it,\n"                     \
	         "the key and --tls-client-ca reload on SIGHUP and when the\n"                     \
	         "files change (docs/SECURITY.md)"},                                               \
	    {.name = "--tls-key",                                                                  \
	     SC_FLAG_AT(STR, T, m.key),                                                            \
	     .meta = "FILE",                                                                       \
	     .help = "its private key (PEM)"},                                                     \
	    {.name = "--tls-reload-interval",                                                      \
	     SC_FLAG_AT(DURATION, T, m.reload_ms),                                                 \
	     .min = 0,                                                                             \
	     .max = 3600e3,                                                                        \
	     .def = "2s",                                                                          \
	     .help = "how often the TLS files are checked for a change\n"                          \
	             "(0: reload only on SIGHUP)"},                                                \
	{                                                                                          \
		.name = "--plain-http", SC_FLAG_AT(BOOL, T, m.plain),                              \
		.help = "serve plain HTTP on a non-loopback address (without it only\n"            \
		        "loopback may go without TLS)"                                             \
	}
#define SC_TLS_CLIENT_CA_FLAG(T, m)                                                                \
	{                                                                                          \
		.name = "--tls-client-ca", SC_FLAG_AT(STR, T, m.client_ca), .meta = "FILE",        \
		.help = "accept client certificates signed by this CA (mTLS;\n"                    \
		        "reloaded on SIGHUP and when it changes)"                                  \
	}

/* Checks f for a listener on host and, with a certificate, makes the
 * context and gives it to s (*ctx owned by the caller: sc_tls_ctx_free
 * after the server is closed); sets the reload interval (tlsreload.h) for
 * every context of the process. Prints "starcloud CMD: ..." and returns
 * < 0 when the flags do not hold together or a file is bad. */
int sc_tls_serve_setup(const char *cmd, const sc_tls_serve_flags_t *f, const char *host,
                       sc_http_server_t *s, sc_tls_ctx_t **ctx);

#endif
