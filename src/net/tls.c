#include "net/tls.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/alloc.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"

/* A context is an OpenSSL context behind one more pointer: a reload
 * (sc_tls_ctx_reload) makes a new SSL_CTX and swaps it in, so every
 * server and client holding the sc_tls_ctx_t uses the new certificate for
 * its next connection, while established ones keep the SSL_CTX they were
 * made with (SSL_new takes a reference on it). */
struct sc_tls_ctx {
	SSL_CTX *ssl;
	/* What it is made from, to make it again; paths owned, NULL when
	 * absent (a context from memory has none and never reloads). */
	int server, require_client;
	char *ca, *cert, *key;
	time_t not_after;
};

struct sc_tls {
	SSL *ssl;
	BIO *rbio;      /* ciphertext in (owned by ssl) */
	BIO *wbio;      /* ciphertext out (owned by ssl) */
	sc_buf_t early; /* plaintext written before the handshake ended */
	int failed;
	int closed; /* the peer's close_notify came (failed is set too) */
	char error[160];
};

/* One PEM input: its bytes and how to name it in an error ("--tls-cert
 * /etc/sc/tls.crt"). data NULL: not given. */
typedef struct pem_in {
	const char *data;
	size_t len;
	char what[200];
} pem_in_t;

/* Everything a context is made from, server or client, files or memory:
 * the one builder (build_ctx) reads it. */
typedef struct ctx_spec {
	int server, require_client, insecure, fresh;
	pem_in_t ca, cert, key;
} ctx_spec_t;

/* The newest OpenSSL error as text into err, after what. */
static int fail(char *err, size_t errsz, const char *what, const char *why)
{
	unsigned long e = ERR_get_error();
	char buf[160];
	ERR_error_string_n(e, buf, sizeof(buf));
	snprintf(err, errsz, "%s: %s", what, why ? why : e ? buf : "failed");
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

/* Adds every certificate of a PEM blob to the context's trust store (and,
 * on a server, to the CA names it sends when asking for a client
 * certificate); 0 when at least one was read. */
static int trust_pem(SSL_CTX *c, const pem_in_t *in, int server)
{
	BIO *bio = BIO_new_mem_buf(in->data, (int)in->len);
	X509_STORE *st = SSL_CTX_get_cert_store(c);
	X509 *x;
	int n = 0;
	while (bio && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
		if (X509_STORE_add_cert(st, x) == 1 &&
		    (!server || SSL_CTX_add_client_CA(c, x) == 1))
			n++;
		X509_free(x);
	}
	BIO_free(bio);
	ERR_clear_error(); /* the loop ends on "no start line" */
	return n ? 0 : SC_EINVAL;
}

static time_t asn1_time(const ASN1_TIME *t)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	return t && ASN1_TIME_to_tm(t, &tm) == 1 ? timegm(&tm) : 0;
}

/* The certificate (a chain: the first is the leaf) and its key. fresh:
 * refuse a leaf already expired (a reload keeps the old one instead). */
static int identity_pem(SSL_CTX *c, const ctx_spec_t *s, char *err, size_t errsz)
{
	BIO *cb = BIO_new_mem_buf(s->cert.data, (int)s->cert.len);
	BIO *kb = BIO_new_mem_buf(s->key.data, (int)s->key.len);
	X509 *leaf = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
	EVP_PKEY *key = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
	int rc = 0;
	char why[300];
	if (!leaf)
		rc = fail(err, errsz, s->cert.what, "no PEM certificate in it");
	else if (!key)
		rc = fail(err, errsz, s->key.what, "no PEM private key in it");
	else if (s->fresh && X509_cmp_current_time(X509_get0_notAfter(leaf)) <= 0)
		rc = fail(err, errsz, s->cert.what, "the certificate has expired");
	else if (SSL_CTX_use_certificate(c, leaf) != 1)
		rc = fail(err, errsz, s->cert.what, NULL);
	else if (SSL_CTX_use_PrivateKey(c, key) != 1 || SSL_CTX_check_private_key(c) != 1) {
		snprintf(why, sizeof(why), "does not match %s", s->cert.what);
		rc = fail(err, errsz, s->key.what, why);
	}
	X509 *x;
	while (rc == 0 && (x = PEM_read_bio_X509(cb, NULL, NULL, NULL)))
		if (SSL_CTX_add0_chain_cert(c, x) != 1) { /* takes x on success */
			X509_free(x);
			rc = fail(err, errsz, s->cert.what, NULL);
		}
	ERR_clear_error(); /* the chain loop ends on "no start line" */
	X509_free(leaf);
	EVP_PKEY_free(key);
	BIO_free(cb);
	BIO_free(kb);
	return rc;
}

/* The one context builder: a server with a certificate (and client_ca to
 * verify clients' certificates), or a client trusting ca (or the
 * system's) and presenting a certificate when given. */
static int build_ctx(const ctx_spec_t *s, SSL_CTX **out, char *err, size_t errsz)
{
	SSL_CTX *c = new_ctx(s->server ? TLS_server_method() : TLS_client_method());
	int rc = 0;
	if (!c)
		return fail(err, errsz, "TLS context", NULL);
	if (s->cert.data && s->key.data && (rc = identity_pem(c, s, err, errsz)) < 0)
		goto error;
	if (s->server && s->ca.data) {
		if ((rc = trust_pem(c, &s->ca, 1)) < 0) {
			rc = fail(err, errsz, s->ca.what, "no PEM certificate in it");
			goto error;
		}
		SSL_CTX_set_verify(
		    c, SSL_VERIFY_PEER | (s->require_client ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
		    NULL);
	} else if (!s->server && s->insecure) {
		SSL_CTX_set_verify(c, SSL_VERIFY_NONE, NULL);
	} else if (!s->server) {
		if (s->ca.data ? trust_pem(c, &s->ca, 0) < 0
		               : SSL_CTX_set_default_verify_paths(c) != 1) {
			rc = fail(err, errsz, s->ca.what,
			          s->ca.data ? "no PEM certificate in it" : NULL);
			goto error;
		}
		SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
	}
	*out = c;
	return 0;
error:
	SSL_CTX_free(c);
	return rc;
}

/* A PEM file's bytes into *buf (owned by the caller), for in. Certificate
 * files are small: more than 1 MiB is refused. */
static int read_pem(const char *flag, const char *path, sc_buf_t *buf, pem_in_t *in, char *err,
                    size_t errsz)
{
	snprintf(in->what, sizeof(in->what), "%s %s", flag, path);
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errsz, "%s: cannot read: %s", in->what, strerror(errno));
		return SC_EIO;
	}
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && buf->len <= (1u << 20))
		if (sc_buf_append(buf, chunk, n) < 0)
			sc_oom();
	int bad = ferror(f);
	fclose(f);
	if (bad || buf->len > (1u << 20)) {
		snprintf(err, errsz, "%s: %s", in->what, bad ? "read error" : "larger than 1 MiB");
		return SC_EIO;
	}
	in->data = buf->data ? buf->data : "";
	in->len = buf->len;
	return 0;
}

/* Makes ctx's SSL_CTX again from its files; on success swaps it in. */
static int load_files(sc_tls_ctx_t *ctx, int fresh, char *err, size_t errsz)
{
	ctx_spec_t s = {
	    .server = ctx->server, .require_client = ctx->require_client, .fresh = fresh};
	sc_buf_t b[3];
	const char *flags[3] = {ctx->server ? "--tls-client-ca" : "--ca",
	                        ctx->server ? "--tls-cert" : "--tls-client-cert",
	                        ctx->server ? "--tls-key" : "--tls-client-key"};
	const char *paths[3] = {ctx->ca, ctx->cert, ctx->key};
	pem_in_t *ins[3] = {&s.ca, &s.cert, &s.key};
	int rc = 0;
	snprintf(s.ca.what, sizeof(s.ca.what), "%s", "the system's CAs");
	for (int i = 0; i < 3; i++) {
		sc_buf_init(&b[i], 0);
		if (rc == 0 && paths[i])
			rc = read_pem(flags[i], paths[i], &b[i], ins[i], err, errsz);
	}
	SSL_CTX *c = NULL;
	if (rc == 0 && (rc = build_ctx(&s, &c, err, errsz)) == 0) {
		SSL_CTX_free(ctx->ssl);
		ctx->ssl = c;
		X509 *leaf = SSL_CTX_get0_certificate(c);
		ctx->not_after = leaf ? asn1_time(X509_get0_notAfter(leaf)) : 0;
	}
	for (int i = 0; i < 3; i++) {
		if (b[i].data)
			OPENSSL_cleanse(b[i].data, b[i].len); /* a key */
		sc_buf_free(&b[i]);
	}
	return rc;
}

static int ctx_from_files(int server, const char *ca, const char *cert, const char *key,
                          int require_client, sc_tls_ctx_t **out, char *err, size_t errsz)
{
	sc_tls_ctx_t *ctx = sc_xcalloc(1, sizeof(*ctx));
	ctx->server = server;
	ctx->require_client = require_client;
	ctx->ca = ca ? sc_xstrdup(ca) : NULL;
	/* A client presents a certificate only with both halves. */
	ctx->cert = cert && (server || key) ? sc_xstrdup(cert) : NULL;
	ctx->key = key && (server || cert) ? sc_xstrdup(key) : NULL;
	int rc = load_files(ctx, 0, err, errsz);
	if (rc < 0) {
		sc_tls_ctx_free(ctx);
		return rc;
	}
	*out = ctx;
	return 0;
}

int sc_tls_server_ctx(const char *cert, const char *key, const char *client_ca, int require_client,
                      sc_tls_ctx_t **out, char *err, size_t errsz)
{
	return ctx_from_files(1, client_ca, cert, key, require_client, out, err, errsz);
}

int sc_tls_client_ctx(const char *ca, const char *cert, const char *key, sc_tls_ctx_t **out,
                      char *err, size_t errsz)
{
	return ctx_from_files(0, ca, cert, key, 0, out, err, errsz);
}

/* A client context from PEM in memory into ctx (its SSL_CTX replaced). */
static int load_pem(sc_tls_ctx_t *ctx, const sc_tls_pem_t *p, int fresh, char *err, size_t errsz)
{
	ctx_spec_t s = {.insecure = p->insecure,
	                .fresh = fresh,
	                .ca = {.data = p->ca, .len = p->ca_len, .what = "certificate authority"},
	                .cert = {.data = p->cert, .len = p->cert_len, .what = "client certificate"},
	                .key = {.data = p->key, .len = p->key_len, .what = "client key"}};
	SSL_CTX *c;
	int rc = build_ctx(&s, &c, err, errsz);
	if (rc < 0)
		return rc;
	SSL_CTX_free(ctx->ssl);
	ctx->ssl = c;
	X509 *leaf = SSL_CTX_get0_certificate(c);
	ctx->not_after = leaf ? asn1_time(X509_get0_notAfter(leaf)) : 0;
	return 0;
}

int sc_tls_client_ctx_pem(const sc_tls_pem_t *p, sc_tls_ctx_t **out, char *err, size_t errsz)
{
	sc_tls_ctx_t *ctx = sc_xcalloc(1, sizeof(*ctx));
	int rc = load_pem(ctx, p, 0, err, errsz);
	if (rc < 0) {
		free(ctx);
		return rc;
	}
	*out = ctx;
	return 0;
}

int sc_tls_ctx_reload_pem(sc_tls_ctx_t *ctx, const sc_tls_pem_t *p, char *err, size_t errsz)
{
	return load_pem(ctx, p, 1, err, errsz);
}

int sc_tls_ctx_reload(sc_tls_ctx_t *ctx, char *err, size_t errsz)
{
	if (!sc_tls_ctx_files(ctx, NULL))
		return 0;
	return load_files(ctx, 1, err, errsz);
}

size_t sc_tls_ctx_files(const sc_tls_ctx_t *ctx, const char **paths)
{
	size_t n = 0;
	const char *all[3] = {ctx->ca, ctx->cert, ctx->key};
	for (int i = 0; i < 3; i++)
		if (all[i]) {
			if (paths)
				paths[n] = all[i];
			n++;
		}
	return n;
}

time_t sc_tls_ctx_not_after(const sc_tls_ctx_t *ctx)
{
	return ctx->not_after;
}

void sc_tls_ctx_describe(const sc_tls_ctx_t *ctx, char *out, size_t outsz)
{
	X509 *leaf = SSL_CTX_get0_certificate(ctx->ssl);
	out[0] = '\0';
	if (!leaf)
		return;
	BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf), NULL);
	char *hex = bn ? BN_bn2hex(bn) : NULL;
	struct tm tm;
	char when[32] = "?";
	time_t t = ctx->not_after;
	if (t && gmtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(out, outsz, "serial %s, valid until %s", hex ? hex : "?", when);
	OPENSSL_free(hex);
	BN_free(bn);
}

void sc_tls_ctx_free(sc_tls_ctx_t *ctx)
{
	if (!ctx)
		return;
	SSL_CTX_free(ctx->ssl);
	free(ctx->ca);
	free(ctx->cert);
	free(ctx->key);
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
		t->failed = t->closed = 1; /* close_notify: the peer is done */
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

int sc_tls_established(const sc_tls_t *t)
{
	return !t->failed && SSL_is_init_finished(t->ssl);
}

int sc_tls_closed(const sc_tls_t *t)
{
	return t->closed;
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

int sc_tls_peer_cert(const sc_tls_t *t, char *serial, size_t serialsz, int64_t *not_after)
{
	struct tm tm;
	int ok = 0;
	serial[0] = '\0';
	*not_after = 0;
	X509 *peer = SSL_get1_peer_certificate(t->ssl);
	if (!peer)
		return 0;
	BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(peer), NULL);
	char *hex = bn ? BN_bn2hex(bn) : NULL;
	if (SSL_get_verify_result(t->ssl) == X509_V_OK && hex && strlen(hex) < serialsz &&
	    ASN1_TIME_to_tm(X509_get0_notAfter(peer), &tm) == 1) {
		snprintf(serial, serialsz, "%s", hex);
		*not_after = (int64_t)timegm(&tm);
		ok = 1;
	}
	OPENSSL_free(hex);
	BN_free(bn);
	X509_free(peer);
	return ok;
}

const char *sc_tls_error(const sc_tls_t *t)
{
	return t->error;
}
