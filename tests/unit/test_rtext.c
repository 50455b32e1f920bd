/* Shared strings: one copy, freed by the last of its holders, on any
 * thread (ASan reports a leak or a use after free). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "base/rtext.h"

static void test_shared_not_copied(void **state)
{
	char *t = sc_rtext_new("{\"kind\":\"Job\"}");
	char *u = sc_rtext_ref(t);
	assert_ptr_equal(t, u);
	assert_string_equal(u, "{\"kind\":\"Job\"}");
	sc_rtext_unref(t);
	assert_string_equal(u, "{\"kind\":\"Job\"}"); /* still held */
	sc_rtext_unref(u);
	assert_null(sc_rtext_new(NULL));
	assert_null(sc_rtext_ref(NULL));
	sc_rtext_unref(NULL);
	char *e = sc_rtext_new("");
	assert_string_equal(e, "");
	sc_rtext_unref(e);
}

#define HOLDS 100000

static void *drop_all(void *ud)
{
	char *t = ud;
	for (int i = 0; i < HOLDS; i++)
		sc_rtext_unref(t);
	return NULL;
}

static void test_threads_drop_their_references(void **state)
{
	char *t = sc_rtext_new("shared");
	for (int i = 0; i < 2 * HOLDS; i++)
		sc_rtext_ref(t);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, drop_all, t), 0);
	drop_all(t);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_string_equal(t, "shared"); /* the first reference remains */
	sc_rtext_unref(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shared_not_copied),
	    cmocka_unit_test(test_threads_drop_their_references),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
