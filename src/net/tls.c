#include "net/tls.h"

#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/alloc.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"

struct sc_tls_ctx {
	SSL_CTX *ssl;
};

struct sc_tls {
	SSL *ssl;
	BIO *rbio;      /* ciphertext in (owned by ssl) */
	BIO *wbio;      /* ciphertext out (owned by ssl) */
	sc_buf_t early; /* plaintext written before the handshake ended */
	int failed;
	char error[160];
};

/* The newest OpenSSL error as text into err, after what. */
static int fail(char *err, size_t errsz, const char *what, const char *file)
{
	unsigned long e = ERR_get_error();
	char buf[160];
	ERR_error_string_n(e, buf, sizeof(buf));
	snprintf(err, errsz, "%s %s: %s", what, file ? file : "", e ? buf : "failed");
	ERR_clear_error();
	return SC_EINVAL;
}

static SSL_CTX *new_ctx(const SSL_METHOD *m)
{
	SSL_CTX *c = SSL_CTX_new(m);
	if (!c)
		return NULL;
	SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
	/* The HTTP layer hands over whatever it has; OpenSSL may write a
	 * record in parts into the memory BIO. */
	SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	return c;
}

int sc_tls_server_ctx(const char *cert, const char *key, const char *client_ca, int require_client,
                      sc_tls_ctx_t **out, char *err, size_t errsz)
{
	SSL_CTX *c = new_ctx(TLS_server_method());
	int rc = SC_EINVAL;
	if (!c)
		return fail(err, errsz, "TLS context", NULL);
	if (SSL_CTX_use_certificate_chain_file(c, cert) != 1) {
		rc = fail(err, errsz, "--tls-cert", cert);
		goto error;
	}
	if (SSL_CTX_use_PrivateKey_file(c, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(c) != 1) {
		rc = fail(err, errsz, "--tls-key", key);
		goto error;
	}
	if (client_ca) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(client_ca);
		if (!names || SSL_CTX_load_verify_locations(c, client_ca, NULL) != 1) {
			rc = fail(err, errsz, "--tls-client-ca", client_ca);
			goto error;
		}
		SSL_CTX_set_client_CA_list(c, names);
		SSL_CTX_set_verify(
		    c, SSL_VERIFY_PEER | (require_client ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
		    NULL);
	}
	*out = sc_xcalloc(1, sizeof(**out));
	(*out)->ssl = c;
	return 0;
error:
	SSL_CTX_free(c);
	return rc;
}

int sc_tls_client_ctx(const char *ca, const char *cert, const char *key, sc_tls_ctx_t **out,
                      char *err, size_t errsz)
{
	SSL_CTX *c = new_ctx(TLS_client_method());
	int rc = SC_EINVAL;
	if (!c)
		return fail(err, errsz, "TLS context", NULL);
	if ((ca && SSL_CTX_load_verify_locations(c, ca, NULL) != 1) ||
	    (!ca && SSL_CTX_set_default_verify_paths(c) != 1)) {
		rc = fail(err, errsz, "--ca", ca);
		goto error;
	}
	SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
	if (cert && key &&
	    (SSL_CTX_use_certificate_chain_file(c, cert) != 1 ||
	     SSL_CTX_use_PrivateKey_file(c, key, SSL_FILETYPE_PEM) != 1)) {
		rc = fail(err, errsz, "--tls-client-cert", cert);
		goto error;
	}
	*out = sc_xcalloc(1, sizeof(**out));
	(*out)->ssl = c;
	return 0;
error:
	SSL_CTX_free(c);
	return rc;
}

/* Adds every certificate of a PEM blob to the context's trust store;
 * 0 when at least one was read. */
static int trust_pem(SSL_CTX *c, const char *pem, size_t len)
{
	BIO *bio = BIO_new_mem_buf(pem, (int)len);
	X509_STORE *st = SSL_CTX_get_cert_store(c);
	X509 *x;
	int n = 0;
	while (bio && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
		if (X509_STORE_add_cert(st, x) == 1)
			n++;
		X509_free(x);
	}
	BIO_free(bio);
	ERR_clear_error(); /* the loop ends on "no start line" */
	return n ? 0 : SC_EINVAL;
}

/* The client certificate (a chain: the first is the leaf) and its key. */
static int identity_pem(SSL_CTX *c, const sc_tls_pem_t *p)
{
	BIO *cb = BIO_new_mem_buf(p->cert, (int)p->cert_len);
	BIO *kb = BIO_new_mem_buf(p->key, (int)p->key_len);
	X509 *leaf = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
	EVP_PKEY *key = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
	int rc = leaf && key && SSL_CTX_use_certificate(c, leaf) == 1 &&
	                 SSL_CTX_use_PrivateKey(c, key) == 1 && SSL_CTX_check_private_key(c) == 1
	             ? 0
	             : SC_EINVAL;
	X509 *x;
	while (rc == 0 && (x = PEM_read_bio_X509(cb, NULL, NULL, NULL)))
		if (SSL_CTX_add0_chain_cert(c, x) != 1) { /* takes x on success */
			X509_free(x);
			rc = SC_EINVAL;
		}
	X509_free(leaf);
	EVP_PKEY_free(key);
	BIO_free(cb);
	BIO_free(kb);
	return rc;
}

int sc_tls_client_ctx_pem(const sc_tls_pem_t *p, sc_tls_ctx_t **out, char *err, size_t errsz)
{
	SSL_CTX *c = new_ctx(TLS_client_method());
	int rc = SC_EINVAL;
	if (!c)
		return fail(err, errsz, "TLS context", NULL);
	if (p->insecure) {
		SSL_CTX_set_verify(c, SSL_VERIFY_NONE, NULL);
	} else {
		if ((p->ca && trust_pem(c, p->ca, p->ca_len) < 0) ||
		    (!p->ca && SSL_CTX_set_default_verify_paths(c) != 1)) {
			rc =
			    fail(err, errsz, "certificate authority", "(no PEM certificate in it)");
			goto error;
		}
		SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
	}
	if (p->cert && p->key && identity_pem(c, p) < 0) {
		rc = fail(err, errsz, "client certificate/key", "(not a PEM pair)");
		goto error;
	}
	*out = sc_xcalloc(1, sizeof(**out));
	(*out)->ssl = c;
	return 0;
error:
	SSL_CTX_free(c);
	return rc;
}

void sc_tls_ctx_free(sc_tls_ctx_t *ctx)
{
	if (!ctx)
		return;
	SSL_CTX_free(ctx->ssl);
	free(ctx);
}

/* A client checks the server's certificate against the host it dialled:
 * an IP address against the certificate's IP SANs, a name against its
 * DNS names. */
static int expect_host(SSL *ssl, const char *host)
{
	X509_VERIFY_PARAM *p = SSL_get0_param(ssl);
	if (X509_VERIFY_PARAM_set1_ip_asc(p, host) == 1)
		return 0;
	SSL_set_tlsext_host_name(ssl, host);
	return X509_VERIFY_PARAM_set1_host(p, host, 0) == 1 ? 0 : SC_EINVAL;
}

sc_tls_t *sc_tls_new(sc_tls_ctx_t *ctx, int server, const char *host)
{
	sc_tls_t *t = sc_xcalloc(1, sizeof(*t));
	t->ssl = SSL_new(ctx->ssl);
	t->rbio = BIO_new(BIO_s_mem());
	t->wbio = BIO_new(BIO_s_mem());
	if (!t->ssl || !t->rbio || !t->wbio) {
		SSL_free(t->ssl);
		BIO_free(t->rbio);
		BIO_free(t->wbio);
		free(t);
		return NULL;
	}
	SSL_set_bio(t->ssl, t->rbio, t->wbio);
	sc_buf_init(&t->early, 0);
	if (server) {
		SSL_set_accept_state(t->ssl);
	} else {
		SSL_set_connect_state(t->ssl);
		if (host && expect_host(t->ssl, host) < 0)
			t->failed = 1;
		SSL_do_handshake(t->ssl); /* the ClientHello, for sc_tls_take */
	}
	return t;
}

void sc_tls_free(sc_tls_t *t)
{
	if (!t)
		return;
	SSL_free(t->ssl); /* frees the BIOs */
	sc_buf_free(&t->early);
	free(t);
}

static int session_failed(sc_tls_t *t)
{
	unsigned long e = ERR_peek_last_error();
	if (e && !t->error[0])
		ERR_error_string_n(e, t->error, sizeof(t->error));
	ERR_clear_error();
	t->failed = 1;
	return SC_EIO;
}

/* Sends what was written before the handshake finished. */
static int flush_early(sc_tls_t *t)
{
	size_t off = 0;
	while (off < t->early.len) {
		int n = SSL_write(t->ssl, t->early.data + off, (int)(t->early.len - off));
		if (n <= 0)
			return session_failed(t);
		off += (size_t)n;
	}
	sc_buf_reset(&t->early);
	return 0;
}

/* Moves the handshake on; 0 (done or waiting for input) or SC_EIO. */
static int handshake(sc_tls_t *t)
{
	if (SSL_is_init_finished(t->ssl))
		return 0;
	int rc = SSL_do_handshake(t->ssl);
	if (rc == 1)
		return t->early.len ? flush_early(t) : 0;
	int e = SSL_get_error(t->ssl, rc);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return 0;
	return session_failed(t);
}

int sc_tls_feed(sc_tls_t *t, const void *data, size_t len)
{
	if (t->failed)
		return SC_EIO;
	if (len && BIO_write(t->rbio, data, (int)len) != (int)len)
		return session_failed(t);
	return handshake(t);
}

ssize_t sc_tls_read(sc_tls_t *t, void *buf, size_t cap)
{
	if (t->failed)
		return SC_EIO;
	if (!SSL_is_init_finished(t->ssl))
		return 0;
	int n = SSL_read(t->ssl, buf, (int)(cap > 1 << 30 ? 1 << 30 : cap));
	if (n > 0)
		return n;
	int e = SSL_get_error(t->ssl, n);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return 0;
	if (e == SSL_ERROR_ZERO_RETURN) {
		t->failed = 1; /* close_notify: the peer is done */
		return SC_EIO;
	}
	return session_failed(t);
}

int sc_tls_write(sc_tls_t *t, const void *data, size_t len)
{
	if (t->failed)
		return SC_EIO;
	if (!SSL_is_init_finished(t->ssl)) {
		if (sc_buf_append(&t->early, data, len) < 0)
			sc_oom();
		return handshake(t);
	}
	size_t off = 0;
	while (off < len) {
		int n = SSL_write(t->ssl, (const char *)data + off, (int)(len - off));
		if (n <= 0)
			return session_failed(t);
		off += (size_t)n;
	}
	return 0;
}

size_t sc_tls_take(sc_tls_t *t, char *buf, size_t cap)
{
	int n = BIO_read(t->wbio, buf, (int)(cap > 1 << 30 ? 1 << 30 : cap));
	return n > 0 ? (size_t)n : 0;
}

void sc_tls_peer_name(const sc_tls_t *t, char *out, size_t outsz)
{
	out[0] = '\0';
	X509 *peer = SSL_get1_peer_certificate(t->ssl);
	if (!peer)
		return;
	if (SSL_get_verify_result(t->ssl) == X509_V_OK)
		X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, out,
		                          (int)outsz);
	X509_free(peer);
}

const char *sc_tls_error(const sc_tls_t *t)
{
	return t->error;
}
