/* Stop sequences of the model worker: what is held back, what is released
 * and where the text is cut. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "worker/stop.h"

static sc_stops_t stops(const char *a, const char *b)
{
	sc_stops_t st = {0};
	const char *v[2] = {a, b};
	for (int i = 0; i < 2; i++)
		if (v[i]) {
			snprintf(st.s[st.n], sizeof(st.s[st.n]), "%s", v[i]);
			st.len[st.n++] = strlen(v[i]);
		}
	return st;
}

/* Feeds text and returns what was released since (consumed from hold). */
static int feed(const sc_stops_t *st, sc_buf_t *h, const char *text, char *out)
{
	size_t rel;
	int rc = sc_stop_feed(st, h, text, strlen(text), &rel);
	memcpy(out, h->data ? h->data : "", rel);
	out[rel] = 0;
	if (rc == 0)
		sc_buf_consume(h, rel);
	return rc;
}

static void test_no_stops_release_everything(void **state)
{
	sc_stops_t st = stops(NULL, NULL);
	sc_buf_t h;
	sc_buf_init(&h, 0);
	char out[64];
	assert_int_equal(feed(&st, &h, "abc", out), 0);
	assert_string_equal(out, "abc");
	assert_int_equal(h.len, 0);
	sc_buf_free(&h);
}

static void test_held_until_decided(void **state)
{
	sc_stops_t st = stops("END", NULL);
	sc_buf_t h;
	sc_buf_init(&h, 0);
	char out[64];
	assert_int_equal(feed(&st, &h, "abcE", out), 0);
	assert_string_equal(out, "abc"); /* "E" may start END */
	assert_int_equal(feed(&st, &h, "Nx", out), 0);
	assert_string_equal(out, "ENx"); /* it did not */
	assert_int_equal(feed(&st, &h, "yEN", out), 0);
	assert_string_equal(out, "y");
	assert_int_equal(feed(&st, &h, "D and more", out), 1);
	assert_string_equal(out, ""); /* cut before END; the rest is dropped */
	sc_buf_free(&h);
}

static void test_earliest_sequence_wins(void **state)
{
	sc_stops_t st = stops("cd", "b");
	sc_buf_t h;
	sc_buf_init(&h, 0);
	char out[64];
	assert_int_equal(feed(&st, &h, "abcd", out), 1);
	assert_string_equal(out, "a");
	sc_buf_free(&h);
}

static void test_self_overlapping_prefix(void **state)
{
	sc_stops_t st = stops("aab", NULL);
	sc_buf_t h;
	sc_buf_init(&h, 0);
	char out[64];
	assert_int_equal(feed(&st, &h, "aa", out), 0);
	assert_string_equal(out, "");
	assert_int_equal(feed(&st, &h, "a", out), 0);
	assert_string_equal(out, "a"); /* "aa" may still start aab */
	assert_int_equal(feed(&st, &h, "ab!", out), 1);
	assert_string_equal(out, "a"); /* "a" + "aab" */
	sc_buf_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_no_stops_release_everything),
	    cmocka_unit_test(test_held_until_decided),
	    cmocka_unit_test(test_earliest_sequence_wins),
	    cmocka_unit_test(test_self_overlapping_prefix),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
