/* kubeconfig, in-cluster and flag configuration of the API connection (see
 * kconfig.h). */
#include "k8s/kconfig.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/yamljson.h"
#include "starcloud/error.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

static int kc_fail(char *err, size_t errsz, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int kc_fail(char *err, size_t errsz, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return code;
}

int sc_kconfig_read_file(const char *path, char **out, size_t *len, char *err, size_t errsz)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return kc_fail(err, errsz, SC_EIO, "%s: %s", path, strerror(errno));
	/* Read one byte past the limit so an oversized file is noticed even
	 * where stat has no size (a pipe). */
	char *buf = sc_xmalloc(SC_KCONFIG_MAX_FILE + 2);
	if (!buf) {
		fclose(f);
		return kc_fail(err, errsz, SC_ENOMEM, "%s: out of memory", path);
	}
	size_t n = fread(buf, 1, SC_KCONFIG_MAX_FILE + 1, f);
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		free(buf);
		return kc_fail(err, errsz, SC_EIO, "%s: read error", path);
	}
	if (n > SC_KCONFIG_MAX_FILE) {
		free(buf);
		return kc_fail(err, errsz, SC_ETOOBIG, "%s: larger than %u bytes", path,
		               SC_KCONFIG_MAX_FILE);
	}
	buf[n] = '\0';
	*out = buf;
	if (len)
		*len = n;
	return 0;
}

/* ---- small helpers ------------------------------------------------------ */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Standard base64 (line breaks and spaces ignored, as in PEM-ish data a
 * user may paste) into a malloc'd NUL-terminated buffer; -1 on a bad
 * character. */
static int b64_decode(const char *s, char **out, size_t *n)
{
	size_t len = strlen(s), k = 0;
	char *o = sc_xmalloc(len / 4 * 3 + 4);
	uint32_t acc = 0;
	int bits = 0;
	if (!o)
		return -1;
	for (size_t i = 0; i < len && s[i] != '='; i++) {
		if (s[i] == '\n' || s[i] == '\r' || s[i] == ' ' || s[i] == '\t')
			continue;
		const char *p = strchr(B64, s[i]);
		if (!p || !s[i]) {
			free(o);
			return -1;
		}
		acc = (acc << 6) | (uint32_t)(p - B64);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			o[k++] = (char)((acc >> bits) & 0xff);
		}
	}
	o[k] = '\0';
	*out = o;
	*n = k;
	return 0;
}

/* A path from the kubeconfig: absolute, or relative to its folder. */
static char *resolve(const char *dir, const char *p)
{
	char *out = NULL;
	if (p[0] == '/' || !dir || !*dir)
		return sc_xstrdup(p);
	if (asprintf(&out, "%s/%s", dir, p) < 0)
		return NULL;
	return out;
}

/* Drops trailing whitespace (a token file usually ends in a newline). */
static void chomp(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = '\0';
}

/* entries[i].name == name -> entries[i][field]; NULL when absent. */
static json_t *named(json_t *list, const char *name, const char *field)
{
	size_t i;
	json_t *e;
	json_array_foreach(list, i, e)
	{
		json_t *n = json_object_get(e, "name");
		if (json_is_string(n) && strcmp(json_string_value(n), name) == 0)
			return json_object_get(e, field);
	}
	return NULL;
}

/* A string field that may be absent (*out NULL); present but not a
 * string is an error. */
static int opt_str(json_t *o, const char *key, const char **out, const char *where, char *err,
                   size_t errsz)
{
	json_t *v = json_object_get(o, key);
	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return kc_fail(err, errsz, SC_EINVAL, "%s.%s: expected a string", where, key);
	*out = json_string_value(v);
	return 0;
}

/* Data that comes inline (base64, "-data") or from a file. */
static int load_blob(json_t *o, const char *key, const char *dir, const char *where, char **out,
                     size_t *len, char **path, char *err, size_t errsz)
{
	char dkey[96], msg[512];
	const char *data, *file;
	int rc;
	snprintf(dkey, sizeof(dkey), "%s-data", key);
	if ((rc = opt_str(o, dkey, &data, where, err, errsz)) < 0 ||
	    (rc = opt_str(o, key, &file, where, err, errsz)) < 0)
		return rc;
	if (data) {
		if (b64_decode(data, out, len) < 0)
			return kc_fail(err, errsz, SC_EINVAL, "%s.%s: expected base64", where,
			               dkey);
		return 1;
	}
	if (file) {
		char *p = resolve(dir, file);
		if (!p)
			return kc_fail(err, errsz, SC_ENOMEM, "out of memory");
		rc = sc_kconfig_read_file(p, out, len, msg, sizeof(msg));
		if (rc < 0) {
			free(p);
			return kc_fail(err, errsz, rc, "%s.%s: %s", where, key, msg);
		}
		free(*path);
		*path = p;
		return 1;
	}
	return 0;
}

/* ---- kubeconfig --------------------------------------------------------- */

static int pick_context(json_t *doc, const char *context, json_t **ctx, const char **cname,
                        char *err, size_t errsz)
{
	const char *cur = context;
	int rc;
	if (!cur && (rc = opt_str(doc, "current-context", &cur, "kubeconfig", err, errsz)) < 0)
		return rc;
	if (!cur || !*cur)
		return kc_fail(err, errsz, SC_EINVAL,
		               "current-context: not set (pass --context NAME)");
	*ctx = named(json_object_get(doc, "contexts"), cur, "context");
	if (!json_is_object(*ctx))
		return kc_fail(err, errsz, SC_EINVAL, "contexts: no context named \"%s\"", cur);
	*cname = cur;
	return 0;
}

static int parse_cluster(json_t *cl, const char *dir, const char *where, sc_kconfig_t *c, char *err,
                         size_t errsz)
{
	const char *server;
	int rc;
	if ((rc = opt_str(cl, "server", &server, where, err, errsz)) < 0)
		return rc;
	if (!server || !*server)
		return kc_fail(err, errsz, SC_EINVAL, "%s.server: missing", where);
	if (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0)
		return kc_fail(err, errsz, SC_EINVAL,
		               "%s.server: expected an https:// URL, got \"%s\"", where, server);
	c->server = sc_xstrdup(server);
	if (!c->server)
		return kc_fail(err, errsz, SC_ENOMEM, "out of memory");
	size_t n = strlen(c->server);
	while (n > 8 && c->server[n - 1] == '/')
		c->server[--n] = '\0';
	json_t *ins = json_object_get(cl, "insecure-skip-tls-verify");
	if (ins && !json_is_boolean(ins))
		return kc_fail(err, errsz, SC_EINVAL,
		               "%s.insecure-skip-tls-verify: expected true or false", where);
	c->insecure = json_is_true(ins);
	if (json_object_get(cl, "proxy-url"))
		return kc_fail(err, errsz, SC_EINVAL, "%s.proxy-url: proxies are not supported",
		               where);
	rc = load_blob(cl, "certificate-authority", dir, where, &c->ca_pem, &c->ca_len, &c->ca_file,
	               err, errsz);
	return rc < 0 ? rc : 0;
}

static int parse_user(json_t *u, const char *dir, const char *where, sc_kconfig_t *c, char *err,
                      size_t errsz)
{
	static const char *const refused[] = {"exec", "auth-provider", "password", "username",
	                                      NULL};
	const char *token, *tfile;
	int rc;
	for (size_t i = 0; refused[i]; i++)
		if (json_object_get(u, refused[i]))
			return kc_fail(
			    err, errsz, SC_EINVAL,
			    "%s.%s: not supported (use a token, a token file or a client "
			    "certificate)",
			    where, refused[i]);
	if ((rc = opt_str(u, "token", &token, where, err, errsz)) < 0 ||
	    (rc = opt_str(u, "tokenFile", &tfile, where, err, errsz)) < 0)
		return rc;
	if (token && *token) {
		if (!(c->token = sc_xstrdup(token)))
			return kc_fail(err, errsz, SC_ENOMEM, "out of memory");
	} else if (tfile && *tfile) {
		if (!(c->token_file = resolve(dir, tfile)))
			return kc_fail(err, errsz, SC_ENOMEM, "out of memory");
		char msg[512];
		if ((rc = sc_kconfig_read_file(c->token_file, &c->token, NULL, msg, sizeof(msg))) <
		    0)
			return kc_fail(err, errsz, rc, "%s.tokenFile: %s", where, msg);
		chomp(c->token);
	}
	int hc = load_blob(u, "client-certificate", dir, where, &c->cert_pem, &c->cert_len,
	                   &c->cert_file, err, errsz);
	if (hc < 0)
		return hc;
	int hk = load_blob(u, "client-key", dir, where, &c->key_pem, &c->key_len, &c->key_file, err,
	                   errsz);
	if (hk < 0)
		return hk;
	if (hc != hk)
		return kc_fail(err, errsz, SC_EINVAL,
		               "%s.%s: missing (a client certificate needs its key)", where,
		               hc ? "client-key" : "client-certificate");
	return 0;
}

int sc_kconfig_parse(const char *text, size_t len, const char *name, const char *dir,
                     const char *context, sc_kconfig_t *out, char *err, size_t errsz)
{
	sc_yj_docs_t *docs = NULL;
	sc_yj_error_t ye;
	sc_kconfig_t c = {0};
	char where[320], msg[1024];
	const char *cname = "", *cluster = NULL, *user = NULL, *ns = NULL;
	json_t *ctx = NULL;
	int rc = sc_yj_load(text, len, NULL, &docs, &ye);
	if (rc < 0) {
		kc_fail(err, errsz, rc, "%s:%d:%d: %s", name, ye.line, ye.col, ye.msg);
		goto done;
	}
	json_t *doc = sc_yj_count(docs) == 1 ? sc_yj_doc(docs, 0) : NULL;
	if (!json_is_object(doc)) {
		rc = kc_fail(err, errsz, SC_EINVAL, "%s: expected one kubeconfig document", name);
		goto done;
	}
	if ((rc = pick_context(doc, context, &ctx, &cname, msg, sizeof(msg))) < 0 ||
	    (rc = opt_str(ctx, "cluster", &cluster, "context", msg, sizeof(msg))) < 0 ||
	    (rc = opt_str(ctx, "user", &user, "context", msg, sizeof(msg))) < 0 ||
	    (rc = opt_str(ctx, "namespace", &ns, "context", msg, sizeof(msg))) < 0)
		goto failed;
	json_t *cl = cluster ? named(json_object_get(doc, "clusters"), cluster, "cluster") : NULL;
	if (!json_is_object(cl)) {
		rc = kc_fail(msg, sizeof(msg), SC_EINVAL,
		             "contexts[%s].context.cluster: no cluster named \"%s\"", cname,
		             cluster ? cluster : "");
		goto failed;
	}
	snprintf(where, sizeof(where), "clusters[%s].cluster", cluster);
	if ((rc = parse_cluster(cl, dir, where, &c, msg, sizeof(msg))) < 0)
		goto failed;
	if (user) {
		json_t *u = named(json_object_get(doc, "users"), user, "user");
		if (!json_is_object(u)) {
			rc =
			    kc_fail(msg, sizeof(msg), SC_EINVAL,
			            "contexts[%s].context.user: no user named \"%s\"", cname, user);
			goto failed;
		}
		snprintf(where, sizeof(where), "users[%s].user", user);
		if ((rc = parse_user(u, dir, where, &c, msg, sizeof(msg))) < 0)
			goto failed;
	}
	if (!(c.namespace = sc_xstrdup(ns && *ns ? ns : "default"))) {
		rc = kc_fail(msg, sizeof(msg), SC_ENOMEM, "out of memory");
		goto failed;
	}
	*out = c;
	rc = 0;
	goto done;
failed:
	kc_fail(err, errsz, rc, "%s: %s", name, msg);
	sc_kconfig_free(&c);
done:
	sc_yj_free(docs);
	return rc;
}

int sc_kconfig_load(const char *path, const char *context, sc_kconfig_t *out, char *err,
                    size_t errsz)
{
	char *text = NULL, *dir;
	size_t len;
	const char *slash = strrchr(path, '/');
	dir = !slash          ? sc_xstrdup(".")
	      : slash == path ? sc_xstrdup("/")
	                      : sc_xstrndup(path, (size_t)(slash - path));
	int rc = sc_kconfig_read_file(path, &text, &len, err, errsz);
	if (rc == 0)
		rc = sc_kconfig_parse(text, len, path, dir, context, out, err, errsz);
	free(text);
	free(dir);
	return rc;
}

int sc_kconfig_in_cluster(const char *sa_dir, sc_kconfig_t *out, char *err, size_t errsz)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	sc_kconfig_t c = {0};
	char path[512], msg[600] = "out of memory";
	int rc = SC_ENOMEM;
	if (!sa_dir)
		sa_dir = SA_DIR;
	if (!host || !*host || !port || !*port)
		return kc_fail(err, errsz, SC_EINVAL,
		               "not in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set (pass "
		               "--kubeconfig FILE)");
	/* An IPv6 service address needs brackets in a URL. */
	if (asprintf(&c.server, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
	             port) < 0) {
		c.server = NULL;
		return kc_fail(err, errsz, SC_ENOMEM, "out of memory");
	}
	snprintf(path, sizeof(path), "%s/token", sa_dir);
	if (!(c.token_file = sc_xstrdup(path)) ||
	    (rc = sc_kconfig_read_file(path, &c.token, NULL, msg, sizeof(msg))) < 0)
		goto failed;
	chomp(c.token);
	snprintf(path, sizeof(path), "%s/ca.crt", sa_dir);
	if ((rc = sc_kconfig_read_file(path, &c.ca_pem, &c.ca_len, msg, sizeof(msg))) < 0)
		goto failed;
	c.ca_file = sc_xstrdup(path);
	snprintf(path, sizeof(path), "%s/namespace", sa_dir);
	if (sc_kconfig_read_file(path, &c.namespace, NULL, msg, sizeof(msg)) == 0)
		chomp(c.namespace);
	else if (!(c.namespace = sc_xstrdup("default"))) {
		rc = SC_ENOMEM;
		snprintf(msg, sizeof(msg), "out of memory");
		goto failed;
	}
	*out = c;
	return 0;
failed:
	sc_kconfig_free(&c);
	return kc_fail(err, errsz, rc, "in-cluster configuration: %s", msg);
}

int sc_kconfig_refresh_token(sc_kconfig_t *c)
{
	char *t = NULL, msg[600];
	if (!c->token_file)
		return 0;
	int rc = sc_kconfig_read_file(c->token_file, &t, NULL, msg, sizeof(msg));
	if (rc < 0)
		return rc;
	chomp(t);
	if (!*t) {
		free(t);
		return SC_EINVAL; /* a half-written file: keep the old token */
	}
	if (c->token && strcmp(c->token, t) == 0) {
		free(t);
		return 0;
	}
	free(c->token);
	c->token = t;
	return 1;
}

void sc_kconfig_tls(const sc_kconfig_t *c, sc_tls_pem_t *t)
{
	memset(t, 0, sizeof(*t));
	t->ca = c->ca_pem;
	t->ca_len = c->ca_len;
	t->cert = c->cert_pem;
	t->cert_len = c->cert_len;
	t->key = c->key_pem;
	t->key_len = c->key_len;
	t->insecure = c->insecure;
}

void sc_kconfig_free(sc_kconfig_t *c)
{
	if (!c)
		return;
	free(c->server);
	free(c->token);
	free(c->token_file);
	free(c->ca_pem);
	free(c->cert_pem);
	free(c->key_pem);
	free(c->ca_file);
	free(c->cert_file);
	free(c->key_file);
	free(c->namespace);
	memset(c, 0, sizeof(*c));
}
