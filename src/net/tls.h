/* TLS for the HTTP layer, written once for every daemon: OpenSSL driven
 * through memory BIOs, so the socket stays libuv's.
 *
 * A connection owns an sc_tls_t. Ciphertext read from the socket goes in
 * with sc_tls_feed(); plaintext comes out of sc_tls_read(). Plaintext to
 * send goes in with sc_tls_write(); the ciphertext to put on the socket
 * (records, and handshake messages, which can appear after a feed too)
 * comes out of sc_tls_take(). Nothing here touches a socket or the loop,
 * so the HTTP server (net/http.c) and client (net/hclient.c) call it at
 * the points where they read and write.
 *
 * Contexts: a server context has a certificate chain and key and may ask
 * clients for certificates signed by a CA (mTLS: a verified client's
 * certificate names it, sc_tls_peer_name); a client context trusts a CA
 * file (or the system's) and may present a certificate of its own. Both
 * refuse anything older than TLS 1.2.
 *
 * Rotation: a context made from files remembers their paths and
 * sc_tls_ctx_reload makes it again from them (net/tlsreload.c calls it on
 * SIGHUP and when the files change). Servers and clients hold the
 * sc_tls_ctx_t, so their next connection uses the new certificate;
 * established connections keep the one they started with.
 *
 * Ownership: the OpenSSL context inside is reference-counted; sc_tls_new
 * takes a reference, so a context may be freed (or reloaded) while
 * connections still use it. */
#ifndef SC_NET_TLS_H
#define SC_NET_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/types.h>

typedef struct sc_tls_ctx sc_tls_ctx_t;
typedef struct sc_tls sc_tls_t;

/* A server context from PEM files: cert (chain) and key; client_ca (NULL:
 * no client certificates asked for) is the CA that signs clients'
 * certificates, required when require_client is set, else optional. On
 * error writes a message (naming the file) into err and returns < 0. */
int sc_tls_server_ctx(const char *cert, const char *key, const char *client_ca, int require_client,
                      sc_tls_ctx_t **out, char *err, size_t errsz);
/* A client context trusting ca (NULL: the system's CAs), presenting
 * cert/key when both are given (mTLS). Server names are checked against
 * the certificate (host name or IP address). */
int sc_tls_client_ctx(const char *ca, const char *cert, const char *key, sc_tls_ctx_t **out,
                      char *err, size_t errsz);
/* A client context from PEM text in memory (a kubeconfig's inline
 * certificate-authority-data and client-certificate-data): trust ca (NULL:
 * the system's CAs), present cert/key when both are given; insecure skips
 * checking the server (kubeconfig insecure-skip-tls-verify, an explicit
 * opt-in). The blobs are read here, not kept. */
typedef struct sc_tls_pem {
	const char *ca;
	size_t ca_len;
	const char *cert;
	size_t cert_len;
	const char *key;
	size_t key_len;
	int insecure;
} sc_tls_pem_t;
int sc_tls_client_ctx_pem(const sc_tls_pem_t *p, sc_tls_ctx_t **out, char *err, size_t errsz);
void sc_tls_ctx_free(sc_tls_ctx_t *ctx);

/* Makes a context from files again from the same paths and swaps it in
 * (the next sc_tls_new uses it). A failure (a file unreadable, no PEM in
 * it, a key that does not match the certificate, a certificate already
 * expired) writes a message naming the flag and file into err, returns
 * < 0 and leaves the context as it was. A context from memory has nothing
 * to reload: 0. */
int sc_tls_ctx_reload(sc_tls_ctx_t *ctx, char *err, size_t errsz);
/* The same for a client context made from memory (k8s mode rereads its
 * kubeconfig): a new context from p swapped in, or ctx untouched and
 * err set. */
int sc_tls_ctx_reload_pem(sc_tls_ctx_t *ctx, const sc_tls_pem_t *p, char *err, size_t errsz);
/* The files a context is made from (CA, certificate, key; at most 3) into
 * paths (may be NULL: only counted); how many. Borrowed from ctx. */
size_t sc_tls_ctx_files(const sc_tls_ctx_t *ctx, const char **paths);
/* The notAfter of the context's own certificate (Unix seconds), 0 when it
 * has none. */
time_t sc_tls_ctx_not_after(const sc_tls_ctx_t *ctx);
/* "serial 1A2B..., valid until 2026-12-03T10:00:00Z" for logs, or "". */
void sc_tls_ctx_describe(const sc_tls_ctx_t *ctx, char *out, size_t outsz);

/* A connection: server side (server != 0) or client side checking host
 * (the name or IP address in the URL). NULL on out-of-memory. */
sc_tls_t *sc_tls_new(sc_tls_ctx_t *ctx, int server, const char *host);
void sc_tls_free(sc_tls_t *t);

/* Ciphertext from the peer. 0, or SC_EIO once the session failed (bad
 * handshake, bad record, certificate refused): close the connection. */
int sc_tls_feed(sc_tls_t *t, const void *data, size_t len);
/* Up to cap bytes of plaintext: > 0 bytes, 0 when none is ready yet,
 * SC_EIO when the session failed or the peer closed it. */
ssize_t sc_tls_read(sc_tls_t *t, void *buf, size_t cap);
/* Plaintext to send (all of it is taken; before the handshake ends it
 * waits inside OpenSSL). 0 or SC_EIO. */
int sc_tls_write(sc_tls_t *t, const void *data, size_t len);
/* Takes the ciphertext waiting to be sent: copies at most cap bytes into
 * buf and returns how many (0: none). */
size_t sc_tls_take(sc_tls_t *t, char *buf, size_t cap);
/* True once the handshake is over (and the session has not failed). */
int sc_tls_established(const sc_tls_t *t);
/* True when the peer ended the session cleanly (close_notify): after
 * sc_tls_read said SC_EIO, an end of stream rather than an error. */
int sc_tls_closed(const sc_tls_t *t);
/* The common name of the peer's certificate when one was presented and
 * verified; "" otherwise. */
void sc_tls_peer_name(const sc_tls_t *t, char *out, size_t outsz);
/* The serial (upper-case hex) and notAfter (seconds since the epoch) of
 * the peer's verified certificate: 1, or 0 when none was presented and
 * verified (serial "" then). What a server reports of an agent's client
 * certificate, so that a rotation can be seen. */
int sc_tls_peer_cert(const sc_tls_t *t, char *serial, size_t serialsz, int64_t *not_after);
/* What went wrong last (for logs), or "". */
const char *sc_tls_error(const sc_tls_t *t);

#endif
