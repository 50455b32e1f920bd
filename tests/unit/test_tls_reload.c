/* TLS contexts made again in place (net/tls.h: sc_tls_ctx_reload and
 * sc_tls_ctx_reload_pem), with certificates from the dev CA (cli/devca.h)
 * and handshakes pumped in memory between two sc_tls_t: a connection made
 * after a reload is shown the new certificate while one made before goes
 * on with the old; every kind of bad file leaves the context as it was and
 * says which flag and file. Run under ASan too (make SAN=1 test-unit): a
 * context freed while a connection still holds it shows there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/devca.h"
#include "net/tls.h"

static char dir[64];
static char ca[128], live_cert[128], live_key[128];

static void path_of(char *out, size_t outsz, const char *name)
{
	snprintf(out, outsz, "%s/%s", dir, name);
}

/* Puts text at dst by rename, as cert-manager does. */
static void put(const char *dst, const char *text, size_t len)
{
	char tmp[160];
	snprintf(tmp, sizeof(tmp), "%s.tmp", dst);
	FILE *f = fopen(tmp, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(rename(tmp, dst), 0);
}

static void install(const char *name, const char *dst)
{
	char src[160], buf[16384];
	path_of(src, sizeof(src), name);
	FILE *f = fopen(src, "rb");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	put(dst, buf, n);
}

static int setup(void **state)
{
	char err[512];
	snprintf(dir, sizeof(dir), "/tmp/sc-tls-reload-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	sc_devca_t *dca = sc__devca_new(dir, err, sizeof(err));
	if (!dca || sc__devca_issue(dca, "a", "server-a", 0, err, sizeof(err)) < 0 ||
	    sc__devca_issue(dca, "b", "server-b", 0, err, sizeof(err)) < 0) {
		fprintf(stderr, "devca: %s\n", err);
		sc__devca_free(dca);
		return -1;
	}
	sc__devca_free(dca);
	path_of(ca, sizeof(ca), "ca.pem");
	path_of(live_cert, sizeof(live_cert), "live.pem");
	path_of(live_key, sizeof(live_key), "live-key.pem");
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Moves ciphertext both ways until neither side has any to send. */
static void pump(sc_tls_t *c, sc_tls_t *s)
{
	char buf[16384];
	size_t n;
	for (int moved = 1, rounds = 0; moved && rounds < 50; rounds++) {
		moved = 0;
		while ((n = sc_tls_take(c, buf, sizeof(buf))) > 0) {
			assert_int_equal(sc_tls_feed(s, buf, n), 0);
			moved = 1;
		}
		while ((n = sc_tls_take(s, buf, sizeof(buf))) > 0) {
			assert_int_equal(sc_tls_feed(c, buf, n), 0);
			moved = 1;
		}
	}
}

/* A client trusting the dev CA connects to sctx: the handshake ends and
 * the client has verified the server's certificate (its CN into cn). */
static void connect_to(sc_tls_ctx_t *cctx, sc_tls_ctx_t *sctx, sc_tls_t **c, sc_tls_t **s, char *cn,
                       size_t cnsz)
{
	*s = sc_tls_new(sctx, 1, NULL);
	*c = sc_tls_new(cctx, 0, "127.0.0.1");
	assert_non_null(*s);
	assert_non_null(*c);
	pump(*c, *s);
	sc_tls_peer_name(*c, cn, cnsz);
}

/* Plaintext from c reaches s. */
static void say(sc_tls_t *c, sc_tls_t *s, const char *msg)
{
	char got[64];
	assert_int_equal(sc_tls_write(c, msg, strlen(msg)), 0);
	pump(c, s);
	ssize_t n = sc_tls_read(s, got, sizeof(got));
	assert_int_equal(n, (ssize_t)strlen(msg));
	assert_memory_equal(got, msg, strlen(msg));
}

static void test_new_connections_get_the_new_certificate(void **state)
{
	char err[512], cn[64], desc_a[160], desc_b[160];
	install("a.pem", live_cert);
	install("a-key.pem", live_key);
	sc_tls_ctx_t *sctx, *cctx;
	assert_int_equal(sc_tls_server_ctx(live_cert, live_key, NULL, 0, &sctx, err, sizeof(err)),
	                 0);
	assert_int_equal(sc_tls_client_ctx(ca, NULL, NULL, &cctx, err, sizeof(err)), 0);
	const char *files[3];
	assert_int_equal(sc_tls_ctx_files(sctx, files), 2);
	assert_string_equal(files[0], live_cert);
	assert_int_equal(sc_tls_ctx_files(cctx, files), 1);
	assert_string_equal(files[0], ca);
	sc_tls_ctx_describe(sctx, desc_a, sizeof(desc_a));
	assert_non_null(strstr(desc_a, "serial "));
	assert_true(sc_tls_ctx_not_after(sctx) > 0);

	sc_tls_t *c_old, *s_old;
	connect_to(cctx, sctx, &c_old, &s_old, cn, sizeof(cn));
	assert_string_equal(cn, "server-a");

	install("b.pem", live_cert);
	install("b-key.pem", live_key);
	assert_int_equal(sc_tls_ctx_reload(sctx, err, sizeof(err)), 0);
	sc_tls_ctx_describe(sctx, desc_b, sizeof(desc_b));
	assert_string_not_equal(desc_a, desc_b);

	sc_tls_t *c_new, *s_new;
	connect_to(cctx, sctx, &c_new, &s_new, cn, sizeof(cn));
	assert_string_equal(cn, "server-b");
	say(c_new, s_new, "new");
	/* The old connection still works on the context it began with. */
	say(c_old, s_old, "old");
	sc_tls_peer_name(c_old, cn, sizeof(cn));
	assert_string_equal(cn, "server-a");
	/* The client context reloads too (the same CA again). */
	assert_int_equal(sc_tls_ctx_reload(cctx, err, sizeof(err)), 0);
	sc_tls_free(c_old);
	sc_tls_free(s_old);
	sc_tls_ctx_free(sctx); /* before the connections made from it */
	say(c_new, s_new, "still");
	sc_tls_free(c_new);
	sc_tls_free(s_new);
	sc_tls_ctx_free(cctx);
}

/* Every bad replacement: reload fails naming flag and file, the context
 * keeps serving A. */
static void test_bad_files_keep_the_context(void **state)
{
	char err[512], cn[64], want[300], before[160], after[160];
	install("a.pem", live_cert);
	install("a-key.pem", live_key);
	sc_tls_ctx_t *sctx, *cctx;
	assert_int_equal(sc_tls_server_ctx(live_cert, live_key, NULL, 0, &sctx, err, sizeof(err)),
	                 0);
	assert_int_equal(sc_tls_client_ctx(ca, NULL, NULL, &cctx, err, sizeof(err)), 0);
	sc_tls_ctx_describe(sctx, before, sizeof(before));
	time_t na = sc_tls_ctx_not_after(sctx);
	static const char garbage[] =
	    "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n";
	struct {
		const char *cert, *key; /* files from the CA's folder; NULL: garbage; "": none */
		const char *flag, *file, *why;
	} cases[] = {
	    {NULL, "a-key.pem", "--tls-cert", live_cert, "no PEM certificate in it"},
	    {"a.pem", NULL, "--tls-key", live_key, "no PEM private key in it"},
	    {"a.pem", "b-key.pem", "--tls-key", live_key, "does not match --tls-cert"},
	    {"a.pem", "", "--tls-key", live_key, "cannot read"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].cert)
			install(cases[i].cert, live_cert);
		else
			put(live_cert, garbage, sizeof(garbage) - 1);
		if (!cases[i].key)
			put(live_key, "", 0);
		else if (!cases[i].key[0])
			unlink(live_key);
		else
			install(cases[i].key, live_key);
		err[0] = '\0';
		assert_true(sc_tls_ctx_reload(sctx, err, sizeof(err)) < 0);
		snprintf(want, sizeof(want), "%s %s: ", cases[i].flag, cases[i].file);
		if (!strstr(err, want) || !strstr(err, cases[i].why))
			fail_msg("case %zu: %s", i, err);
		sc_tls_ctx_describe(sctx, after, sizeof(after));
		assert_string_equal(before, after);
		assert_true(sc_tls_ctx_not_after(sctx) == na);
		sc_tls_t *c, *s;
		connect_to(cctx, sctx, &c, &s, cn, sizeof(cn));
		assert_string_equal(cn, "server-a");
		say(c, s, "ok");
		sc_tls_free(c);
		sc_tls_free(s);
	}
	/* A CA bundle without a certificate is refused the same way. */
	char bad_ca[160];
	path_of(bad_ca, sizeof(bad_ca), "bad-ca.pem");
	install("ca.pem", bad_ca);
	sc_tls_ctx_t *c2;
	assert_int_equal(sc_tls_client_ctx(bad_ca, NULL, NULL, &c2, err, sizeof(err)), 0);
	put(bad_ca, "not a certificate\n", 18);
	assert_true(sc_tls_ctx_reload(c2, err, sizeof(err)) < 0);
	snprintf(want, sizeof(want), "--ca %s: no PEM certificate in it", bad_ca);
	assert_string_equal(err, want);
	sc_tls_ctx_free(c2);
	sc_tls_ctx_free(sctx);
	sc_tls_ctx_free(cctx);
}

/* A context from memory has no files: reload is a no-op; reload_pem takes
 * new PEM or refuses it. */
static void test_pem_contexts(void **state)
{
	char err[512];
	sc_tls_pem_t insecure = {.insecure = 1};
	sc_tls_ctx_t *ctx;
	assert_int_equal(sc_tls_client_ctx_pem(&insecure, &ctx, err, sizeof(err)), 0);
	assert_int_equal(sc_tls_ctx_files(ctx, NULL), 0);
	assert_int_equal(sc_tls_ctx_reload(ctx, err, sizeof(err)), 0);
	assert_true(sc_tls_ctx_not_after(ctx) == 0);
	sc_tls_pem_t bad = {.ca = "junk", .ca_len = 4};
	assert_true(sc_tls_ctx_reload_pem(ctx, &bad, err, sizeof(err)) < 0);
	assert_string_equal(err, "certificate authority: no PEM certificate in it");
	sc_tls_pem_t half = {
	    .insecure = 1, .cert = "junk", .cert_len = 4, .key = "x", .key_len = 1};
	assert_true(sc_tls_ctx_reload_pem(ctx, &half, err, sizeof(err)) < 0);
	assert_string_equal(err, "client certificate: no PEM certificate in it");
	sc_tls_ctx_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_new_connections_get_the_new_certificate),
	    cmocka_unit_test(test_bad_files_keep_the_context),
	    cmocka_unit_test(test_pem_contexts),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
