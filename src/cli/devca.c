#include "cli/devca.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "base/alloc.h"
#include "starcloud/error.h"

#define DAYS 30

struct sc_devca {
	char dir[1024];
	EVP_PKEY *key;
	X509 *cert;
};

static int fail(char *err, size_t errsz, const char *what)
{
	char buf[160];
	unsigned long e = ERR_get_error();
	ERR_error_string_n(e, buf, sizeof(buf));
	snprintf(err, errsz, "dev CA: %s: %s", what, e ? buf : "failed");
	ERR_clear_error();
	return SC_EIO;
}

/* Writes a PEM file: keys 0600, certificates 0644. */
static int write_pem(const char *dir, const char *name, EVP_PKEY *key, X509 *cert)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd =
	    open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, key ? 0600 : 0644);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return SC_EIO;
	}
	int ok =
	    key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) : PEM_write_X509(f, cert);
	return fclose(f) == 0 && ok == 1 ? 0 : SC_EIO;
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!ext)
		return SC_EINVAL;
	int ok = X509_add_ext(cert, ext, -1);
	X509_EXTENSION_free(ext);
	return ok == 1 ? 0 : SC_EINVAL;
}

/* A certificate for key with common name cn, signed by (ikey, issuer), or
 * self-signed when issuer is NULL. */
static X509 *make_cert(EVP_PKEY *key, const char *cn, EVP_PKEY *ikey, X509 *issuer)
{
	X509 *c = X509_new();
	unsigned char serial[16];
	BIGNUM *bn = NULL;
	if (!c || RAND_bytes(serial, sizeof(serial)) != 1)
		goto error;
	serial[0] &= 0x7f; /* positive */
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c)) ||
	    X509_set_version(c, 2) != 1 || !X509_gmtime_adj(X509_getm_notBefore(c), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(c), (long)DAYS * 86400) ||
	    X509_set_pubkey(c, key) != 1)
		goto error;
	X509_NAME *name = X509_get_subject_name(c);
	if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
	                               0) != 1 ||
	    X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : name) != 1)
		goto error;
	BN_free(bn);
	(void)ikey;
	return c;
error:
	BN_free(bn);
	X509_free(c);
	return NULL;
}

sc_devca_t *sc__devca_new(const char *dir, char *err, size_t errsz)
{
	sc_devca_t *ca = sc_xcalloc(1, sizeof(*ca));
	snprintf(ca->dir, sizeof(ca->dir), "%s", dir);
	ca->key = EVP_EC_gen("P-256");
	if (!ca->key || !(ca->cert = make_cert(ca->key, "starcloud dev CA", NULL, NULL)) ||
	    add_ext(ca->cert, ca->cert, NID_basic_constraints, "critical,CA:TRUE") < 0 ||
	    add_ext(ca->cert, ca->cert, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
	    add_ext(ca->cert, ca->cert, NID_subject_key_identifier, "hash") < 0 ||
	    X509_sign(ca->cert, ca->key, EVP_sha256()) <= 0) {
		fail(err, errsz, "making the CA");
		sc__devca_free(ca);
		return NULL;
	}
	if (write_pem(dir, "ca.pem", NULL, ca->cert) < 0 ||
	    write_pem(dir, "ca-key.pem", ca->key, NULL) < 0) {
		snprintf(err, errsz, "dev CA: cannot write %s/ca.pem", dir);
		sc__devca_free(ca);
		return NULL;
	}
	return ca;
}

int sc__devca_issue(sc_devca_t *ca, const char *name, const char *cn, int client, char *err,
                    size_t errsz)
{
	char file[300];
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *c = key ? make_cert(key, cn, ca->key, ca->cert) : NULL;
	int rc = SC_EIO;
	if (!c || add_ext(c, ca->cert, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
	    add_ext(c, ca->cert, NID_key_usage, "critical,digitalSignature") < 0 ||
	    add_ext(c, ca->cert, NID_ext_key_usage, client ? "clientAuth" : "serverAuth") < 0 ||
	    (!client &&
	     add_ext(c, ca->cert, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost") < 0) ||
	    add_ext(c, ca->cert, NID_authority_key_identifier, "keyid") < 0 ||
	    X509_sign(c, ca->key, EVP_sha256()) <= 0) {
		rc = fail(err, errsz, cn);
		goto out;
	}
	snprintf(file, sizeof(file), "%s.pem", name);
	if (write_pem(ca->dir, file, NULL, c) < 0)
		goto write_error;
	snprintf(file, sizeof(file), "%s-key.pem", name);
	if (write_pem(ca->dir, file, key, NULL) < 0)
		goto write_error;
	rc = 0;
	goto out;
write_error:
	snprintf(err, errsz, "dev CA: cannot write %s/%s", ca->dir, file);
out:
	X509_free(c);
	EVP_PKEY_free(key);
	return rc;
}

void sc__devca_free(sc_devca_t *ca)
{
	if (!ca)
		return;
	EVP_PKEY_free(ca->key);
	X509_free(ca->cert);
	free(ca);
}
