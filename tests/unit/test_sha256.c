/* SHA-256 against the FIPS 180-4 / NIST example vectors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "starcloud/sha256.h"

static void test_vectors(void **state)
{
	char out[65];
	sc_sha256_hex("", 0, out);
	assert_string_equal(out,
	                    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	sc_sha256_hex("abc", 3, out);
	assert_string_equal(out,
	                    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	sc_sha256_hex(m, strlen(m), out);
	assert_string_equal(out,
	                    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

/* A million 'a's fed in uneven pieces exercises the block buffering. */
static void test_million_a(void **state)
{
	char piece[997];
	memset(piece, 'a', sizeof(piece));
	sc_sha256_t c;
	uint8_t d[32];
	size_t left = 1000000;
	sc_sha256_init(&c);
	while (left > 0) {
		size_t n = left < sizeof(piece) ? left : sizeof(piece);
		sc_sha256_update(&c, piece, n);
		left -= n;
	}
	sc_sha256_final(&c, d);
	assert_int_equal(d[0], 0xcd);
	assert_int_equal(d[1], 0xc7);
	assert_int_equal(d[31], 0xd0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vectors),
	    cmocka_unit_test(test_million_a),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
