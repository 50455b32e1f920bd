/* A self-made certificate authority for `starcloud dev`, so the default
 * development cluster speaks TLS (docs/SECURITY.md): one CA, a server
 * certificate for 127.0.0.1, and per agent a status-port certificate and
 * a client certificate (CN node:NAME) for mTLS. Keys are P-256, made with
 * OpenSSL; files are PEM, keys 0600. For development only: a real
 * cluster's certificates come from its operators' CA. */
#ifndef SC_CLI_DEVCA_H
#define SC_CLI_DEVCA_H

#include <stddef.h>

typedef struct sc_devca sc_devca_t;

/* Creates DIR/ca.pem and DIR/ca-key.pem (DIR must exist). NULL after a
 * message in err. */
sc_devca_t *sc__devca_new(const char *dir, char *err, size_t errsz);
/* Issues DIR/NAME.pem and DIR/NAME-key.pem with common name cn; server
 * certificates name 127.0.0.1 (IP SAN) and serve TLS, client ones
 * authenticate a client. 0 or < 0 after a message in err. */
int sc__devca_issue(sc_devca_t *ca, const char *name, const char *cn, int client, char *err,
                    size_t errsz);
void sc__devca_free(sc_devca_t *ca);

#endif
