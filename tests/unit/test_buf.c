/* The bounded buffer: growth, the hard limit, consuming input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "starcloud/buf.h"
#include "starcloud/error.h"

static void test_grow_and_limit(void **state)
{
	sc_buf_t b;
	sc_buf_init(&b, 1000);
	for (int i = 0; i < 99; i++)
		assert_int_equal(sc_buf_append(&b, "0123456789", 10), 0);
	assert_int_equal(b.len, 990);
	assert_int_equal(sc_buf_append(&b, "0123456789", 10), 0);
	/* One byte over the limit fails and leaves the content alone. */
	assert_int_equal(sc_buf_append(&b, "x", 1), SC_ETOOBIG);
	assert_int_equal(b.len, 1000);
	assert_int_equal(sc_buf_printf(&b, "%d", 5), SC_ETOOBIG);
	sc_buf_free(&b);
}

static void test_printf_consume_steal(void **state)
{
	sc_buf_t b;
	sc_buf_init(&b, 0);
	assert_int_equal(sc_buf_printf(&b, "a=%d b=%s", 42, "x"), 0);
	assert_string_equal(b.data, "a=42 b=x");
	sc_buf_consume(&b, 5);
	assert_string_equal(b.data, "b=x");
	sc_buf_consume(&b, 100);
	assert_int_equal(b.len, 0);
	assert_int_equal(sc_buf_puts(&b, "hello"), 0);
	size_t n;
	char *p = sc_buf_steal(&b, &n);
	assert_int_equal(n, 5);
	assert_string_equal(p, "hello");
	assert_null(b.data);
	free(p);
	sc_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_grow_and_limit),
	    cmocka_unit_test(test_printf_consume_steal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
