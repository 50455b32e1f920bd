/* Where the Kubernetes API is and how to authenticate to it: a kubeconfig
 * file (the `current-context`, or the one named), the in-cluster service
 * account, or explicit flags.
 *
 * Understood in a kubeconfig: clusters[].cluster.{server,
 * certificate-authority, certificate-authority-data, insecure-skip-tls-verify},
 * users[].user.{token, tokenFile, client-certificate, client-certificate-data,
 * client-key, client-key-data}, contexts[].context.{cluster, user, namespace}
 * and current-context. Relative file paths are relative to the kubeconfig's
 * folder, as kubectl has them. Anything that needs a program to run
 * (users[].user.exec, auth-provider) or a password is refused with the field
 * named: this daemon does not run commands a file tells it to.
 *
 * Ownership: an sc_kconfig_t owns every string in it; sc_kconfig_free()
 * releases them. */
#ifndef SC_K8S_KCONFIG_H
#define SC_K8S_KCONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include <stdint.h>

#include "net/tls.h"

/* Largest kubeconfig, token, certificate or key file read. */
#define SC_KCONFIG_MAX_FILE (1u << 20)

typedef struct sc_kconfig {
	char *server;     /* "https://host:port", no trailing slash */
	char *token;      /* bearer token, or NULL */
	char *token_file; /* where the token came from (re-read: tokens rotate) */
	char *ca_pem;     /* CA bundle (PEM) or NULL for the system's */
	size_t ca_len;
	char *cert_pem; /* client certificate and key (PEM), or NULL */
	size_t cert_len;
	char *key_pem;
	size_t key_len;
	/* The files the CA, certificate and key were read from (NULL: inline
	 * or none), watched for rotation (net/tlsreload.h). */
	char *ca_file, *cert_file, *key_file;
	bool insecure;   /* insecure-skip-tls-verify: true */
	char *namespace; /* the context's (or service account's) namespace */
} sc_kconfig_t;

/* Loads path, choosing context (NULL = current-context). Returns 0, or
 * SC_EIO (a file cannot be read), SC_EPARSE / SC_EINVAL (bad content) with
 * a message naming the file and field in err. *out is untouched on error. */
int sc_kconfig_load(const char *path, const char *context, sc_kconfig_t *out, char *err,
                    size_t errsz);

/* The same from text already read; dir (borrowed) resolves relative
 * paths. */
int sc_kconfig_parse(const char *text, size_t len, const char *name, const char *dir,
                     const char *context, sc_kconfig_t *out, char *err, size_t errsz);

/* In-cluster: $KUBERNETES_SERVICE_HOST / _PORT and the service account's
 * token, ca.crt and namespace in sa_dir (NULL = the standard
 * /var/run/secrets/kubernetes.io/serviceaccount). */
int sc_kconfig_in_cluster(const char *sa_dir, sc_kconfig_t *out, char *err, size_t errsz);

/* Reads a whole file of at most SC_KCONFIG_MAX_FILE bytes into a malloc'd
 * NUL-terminated buffer. Returns 0 or SC_EIO / SC_ETOOBIG (err says why). */
int sc_kconfig_read_file(const char *path, char **out, size_t *len, char *err, size_t errsz);

/* Re-reads token_file when there is one (service-account tokens are
 * rotated by the kubelet). Returns 1 when the token changed, 0 when not,
 * or an error (the old token is kept). */
int sc_kconfig_refresh_token(sc_kconfig_t *c);

/* The TLS view for a client context (sc_tls_client_ctx_pem); t borrows
 * from c. */
void sc_kconfig_tls(const sc_kconfig_t *c, sc_tls_pem_t *t);

/* Frees every string; accepts NULL. */
void sc_kconfig_free(sc_kconfig_t *c);

#endif
