/* The fast HTTP head scanner (src/base/httphead.h): what it reads from the
 * simple heads it takes, and the heads it must decline (left to
 * http_parser). fuzz/fuzz_httphead.c checks what it takes against
 * http_parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/httphead.h"

static sc_hhead_t h;

static int req(const char *s)
{
	return sc_hhead_request(s, strlen(s), 16384, &h);
}

static int resp(const char *s)
{
	return sc_hhead_response(s, strlen(s), 16384, &h);
}

static void test_request(void **state)
{
	const char *m = "POST /v1/completions?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
	                "content-length:  49\r\nX-Empty:\r\nX-Tab:\tv\r\n\r\n{\"model\"";
	assert_int_equal(req(m), 1);
	assert_int_equal(h.mlen, 4);
	assert_memory_equal(h.method, "POST", 4);
	assert_int_equal(h.tlen, 19);
	assert_memory_equal(h.target, "/v1/completions?x=1", 19);
	assert_int_equal(h.head_len, strstr(m, "{") - m); /* the body may be partial */
	assert_int_equal(h.body_len, 49);
	assert_int_equal(h.nfields, 4);
	assert_int_equal(h.fields[1].nlen, 14);
	assert_int_equal(h.fields[1].vlen, 2); /* leading spaces skipped */
	assert_memory_equal(h.fields[1].value, "49", 2);
	assert_int_equal(h.fields[2].vlen, 0);
	assert_int_equal(h.fields[3].vlen, 1);
	/* No Content-Length: no body. */
	assert_int_equal(req("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"), 1);
	assert_int_equal(h.body_len, 0);
	assert_int_equal(h.nfields, 1);
}

static void test_response(void **state)
{
	const char *m = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	                "Content-Length: 115\r\nConnection: Keep-Alive\r\n\r\n";
	assert_int_equal(resp(m), 1);
	assert_int_equal(h.status, 200);
	assert_int_equal(h.head_len, strlen(m));
	assert_int_equal(h.body_len, 115);
	assert_int_equal(resp("HTTP/1.1 503 \r\nContent-Length: 0\r\n\r\n"), 1);
	assert_int_equal(h.status, 503);
	assert_int_equal(h.body_len, 0);
}

/* Every one of these is left to the full parser. */
static void test_declined(void **state)
{
	/* Incomplete, or longer than the bound. */
	assert_int_equal(req("GET / HTTP/1.1\r\nHost: a\r\n"), 0);
	assert_int_equal(sc_hhead_request("GET / HTTP/1.1\r\n\r\n", 18, 17, &h), 0);
	/* Framing the scanner does not read. */
	assert_int_equal(req("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), 0);
	assert_int_equal(req("POST / HTTP/1.1\r\nTransfer-EncodingX: y\r\n\r\n"), 0);
	assert_int_equal(req("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"),
	                 0);
	assert_int_equal(req("POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n"), 0);
	assert_int_equal(req("POST / HTTP/1.1\r\nContent-Length: 1 \r\n\r\n"), 0);
	assert_int_equal(req("POST / HTTP/1.1\r\nContent-Length: 1234567890123456\r\n\r\n"), 0);
	assert_int_equal(req("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"), 0);
	assert_int_equal(req("GET / HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\n\r\n"), 0);
	assert_int_equal(req("GET / HTTP/1.1\r\nUpgrade: h2c\r\n\r\n"), 0);
	assert_int_equal(req("POST / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n"), 0);
	/* Start lines: versions, methods, targets. */
	assert_int_equal(req("GET / HTTP/1.0\r\n\r\n"), 0);
	assert_int_equal(req("get / HTTP/1.1\r\n\r\n"), 0);
	assert_int_equal(req("BREW / HTTP/1.1\r\n\r\n"), 0);
	assert_int_equal(req("GET http://a/ HTTP/1.1\r\n\r\n"), 0);
	assert_int_equal(req("GET /a b HTTP/1.1\r\n\r\n"), 0);
	assert_int_equal(resp("HTTP/1.1 100 Continue\r\n\r\n"), 0);
	assert_int_equal(resp("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"), 0);
	assert_int_equal(resp("HTTP/1.1 200 OK\r\n\r\n"), 0); /* no Content-Length */
	assert_int_equal(resp("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"), 0);
	/* Field syntax: obs-fold, bare LF, space before ':', control bytes,
	 * bytes over 0x7e, trailing spaces. */
	assert_int_equal(req("GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n"), 0);
	assert_int_equal(req("GET / HTTP/1.1\nA: b\r\n\r\n"), 0);
	assert_int_equal(req("GET / HTTP/1.1\r\nA: b\nC: d\r\n\r\n"), 0);
	assert_int_equal(req("GET / HTTP/1.1\r\nA : b\r\n\r\n"), 0);
	assert_int_equal(req("GET / HTTP/1.1\r\nA: \x01\r\n\r\n"), 0);
	assert_int_equal(req("GET / HTTP/1.1\r\nA: \xc3\xa9\r\n\r\n"), 0);
	assert_int_equal(req("GET / HTTP/1.1\r\nA: b \r\n\r\n"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_request),
	    cmocka_unit_test(test_response),
	    cmocka_unit_test(test_declined),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
