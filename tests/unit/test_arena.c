/* The arena: blocks kept across resets for the next cycle, a big request
 * served by a big spare block even when small requests come first, and
 * every allocation usable after any number of resets (ASan checks the
 * blocks freed at reset are never touched again). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "starcloud/arena.h"

#define BIG (3u << 20)

static void test_big_block_goes_to_the_big_request(void **state)
{
	sc_arena_t *a = sc_arena_new(1 << 20);
	assert_non_null(a);
	char *small = sc_arena_alloc(a, 64);
	char *big = sc_arena_alloc(a, BIG);
	assert_non_null(small);
	assert_non_null(big);
	memset(big, 1, BIG);
	for (int cycle = 0; cycle < 5; cycle++) {
		sc_arena_reset(a);
		/* Small requests first: they take the chunk-sized block, so the
		 * big array finds its own block again instead of a new one. */
		for (int i = 0; i < 100; i++)
			assert_non_null(sc_arena_alloc(a, 100));
		char *again = sc_arena_alloc(a, BIG);
		assert_ptr_equal(again, big);
		memset(again, 2, BIG);
	}
	sc_arena_free(a);
}

static void test_blocks_a_cycle_did_not_use_go(void **state)
{
	sc_arena_t *a = sc_arena_new(4096);
	assert_non_null(a);
	/* Cycles of varying sizes: each one's allocations hold their
	 * contents until the next reset, whatever the last cycle left. */
	for (int cycle = 0; cycle < 50; cycle++) {
		size_t n = (size_t)(cycle % 7) * 1000 + 1, big = (size_t)(cycle % 5 + 1) * 10000;
		unsigned char **p = sc_arena_calloc(a, n, sizeof(*p));
		unsigned char *b = sc_arena_alloc(a, big);
		assert_non_null(p);
		assert_non_null(b);
		memset(b, cycle, big);
		for (size_t i = 0; i < n; i++) {
			p[i] = sc_arena_alloc(a, 24);
			assert_non_null(p[i]);
			memset(p[i], (int)(i & 0xff), 24);
		}
		for (size_t i = 0; i < n; i++)
			assert_int_equal(p[i][23], (unsigned char)(i & 0xff));
		assert_int_equal(b[big - 1], (unsigned char)cycle);
		sc_arena_reset(a);
		assert_int_equal(sc_arena_used(a), 0);
	}
	sc_arena_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_big_block_goes_to_the_big_request),
	    cmocka_unit_test(test_blocks_a_cycle_did_not_use_go),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
