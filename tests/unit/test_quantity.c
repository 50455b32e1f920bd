/* Unit tests for src/base/quantity.c: every accepted form and every kind of
 * rejected input (garbage, negatives, overflow). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/quantity.h"
#include "starcloud/error.h"

static int64_t cpu(const char *s)
{
	int64_t v = -12345;
	assert_int_equal(sc_quantity_cpu(s, 0, &v), 0);
	return v;
}

static int64_t mem(const char *s)
{
	int64_t v = -12345;
	assert_int_equal(sc_quantity_memory(s, 0, &v), 0);
	return v;
}

static int64_t dur(const char *s)
{
	int64_t v = -12345;
	assert_int_equal(sc_quantity_duration(s, &v), 0);
	return v;
}

static int64_t tm(const char *s)
{
	int64_t v = -12345;
	assert_int_equal(sc_quantity_time(s, &v), 0);
	return v;
}

static void test_cpu_ok(void **state)
{
	assert_int_equal(cpu("8"), 8000);
	assert_int_equal(cpu("0.5"), 500);
	assert_int_equal(cpu(".25"), 250);
	assert_int_equal(cpu("500m"), 500);
	assert_int_equal(cpu("0.1"), 100);
	assert_int_equal(cpu("1e3"), 1000000);
	assert_int_equal(cpu("2.5e-1"), 250);
	assert_int_equal(cpu("0.0001"), 1); /* rounds up, like Kubernetes */
	assert_int_equal(cpu("0"), 0);
	assert_int_equal(cpu("+3"), 3000);
	int64_t v;
	assert_int_equal(sc_quantity_cpu("-1", SC_QTY_NEGATIVE, &v), 0);
	assert_int_equal(v, -1000);
}

static void test_cpu_bad(void **state)
{
	int64_t v = 7;
	assert_int_equal(sc_quantity_cpu("", 0, &v), SC_EPARSE);
	assert_int_equal(sc_quantity_cpu(NULL, 0, &v), SC_EPARSE);
	assert_int_equal(sc_quantity_cpu("abc", 0, &v), SC_EPARSE);
	assert_int_equal(sc_quantity_cpu("8 ", 0, &v), SC_EPARSE);
	assert_int_equal(sc_quantity_cpu(" 8", 0, &v), SC_EPARSE);
	assert_int_equal(sc_quantity_cpu("8Gi", 0, &v), SC_EPARSE);
	assert_int_equal(sc_quantity_cpu("1.2.3", 0, &v), SC_EPARSE);
	assert_int_equal(sc_quantity_cpu(".", 0, &v), SC_EPARSE);
	assert_int_equal(sc_quantity_cpu("-1", 0, &v), SC_ERANGE);
	assert_int_equal(sc_quantity_cpu("99999999999999999", 0, &v), SC_ERANGE);
	assert_int_equal(sc_quantity_cpu("1e99", 0, &v), SC_ERANGE);
	assert_int_equal(sc_quantity_cpu("123456789012345678901234", 0, &v), SC_ERANGE);
	assert_int_equal(v, 7); /* untouched on failure */
}

static void test_memory_ok(void **state)
{
	assert_int_equal(mem("16Gi"), 16LL << 30);
	assert_int_equal(mem("512Mi"), 512LL << 20);
	assert_int_equal(mem("80G"), 80000000000LL);
	assert_int_equal(mem("1Ti"), 1LL << 40);
	assert_int_equal(mem("1.5Gi"), 1610612736LL);
	assert_int_equal(mem("123"), 123);
	assert_int_equal(mem("1e3"), 1000);
	assert_int_equal(mem("1E3"), 1000);
	assert_int_equal(mem("2E"), 2000000000000000000LL);
	assert_int_equal(mem("1Ei"), 1LL << 60);
	assert_int_equal(mem("7Ei"), 7LL << 60);
	assert_int_equal(mem("1k"), 1000);
	assert_int_equal(mem("1Ki"), 1024);
	assert_int_equal(mem("1500m"), 2); /* 1.5 bytes rounds up */
	assert_int_equal(mem("1P"), 1000000000000000LL);
	assert_int_equal(mem("1Pi"), 1LL << 50);
	assert_int_equal(mem("1T"), 1000000000000LL);
	assert_int_equal(mem("0"), 0);
}

static void test_memory_bad(void **state)
{
	int64_t v = 7;
	assert_int_equal(sc_quantity_memory("16GB", 0, &v), SC_EPARSE);
	assert_int_equal(sc_quantity_memory("16gi", 0, &v), SC_EPARSE);
	assert_int_equal(sc_quantity_memory("Gi", 0, &v), SC_EPARSE);
	assert_int_equal(sc_quantity_memory("1e", 0, &v), SC_EPARSE);
	assert_int_equal(sc_quantity_memory("-1Gi", 0, &v), SC_ERANGE);
	assert_int_equal(sc_quantity_memory("8Ei", 0, &v), SC_ERANGE);
	assert_int_equal(sc_quantity_memory("10E", 0, &v), SC_ERANGE);
	assert_int_equal(sc_quantity_memory("9223372036854775808", 0, &v), SC_ERANGE);
	assert_int_equal(v, 7);
	assert_int_equal(sc_quantity_memory("-1", SC_QTY_NEGATIVE, &v), 0);
	assert_int_equal(v, -1);
	assert_int_equal(sc_quantity_memory("9223372036854775807", 0, &v), 0);
	assert_int_equal(v, INT64_MAX);
}

static void test_duration(void **state)
{
	assert_int_equal(dur("30s"), 30);
	assert_int_equal(dur("10m"), 600);
	assert_int_equal(dur("1h"), 3600);
	assert_int_equal(dur("1h30m"), 5400);
	assert_int_equal(dur("1.5h"), 5400);
	assert_int_equal(dur("2d"), 172800);
	assert_int_equal(dur("250ms"), 1);
	assert_int_equal(dur("1m1ms"), 61);
	assert_int_equal(dur("45"), 45);
	assert_int_equal(dur("0"), 0);
	assert_int_equal(dur("0.5"), 1);

	int64_t v = 7;
	assert_int_equal(sc_quantity_duration("", &v), SC_EPARSE);
	assert_int_equal(sc_quantity_duration("h", &v), SC_EPARSE);
	assert_int_equal(sc_quantity_duration("10x", &v), SC_EPARSE);
	assert_int_equal(sc_quantity_duration("10m5", &v), SC_EPARSE);
	assert_int_equal(sc_quantity_duration("1 h", &v), SC_EPARSE);
	assert_int_equal(sc_quantity_duration("-5s", &v), SC_ERANGE);
	assert_int_equal(sc_quantity_duration("999999999999999999d", &v), SC_ERANGE);
	assert_int_equal(v, 7);
}

/* The same start as sc_quantity_duration (duration_plain), but a plain
 * number is seconds scaled to milliseconds, and units are not rounded to
 * whole seconds. */
static void test_duration_ms(void **state)
{
	int64_t v = 7;
	assert_int_equal(sc_quantity_duration_ms("1.5", &v), 0);
	assert_int_equal(v, 1500);
	assert_int_equal(sc_quantity_duration_ms("0.0001", &v), 0);
	assert_int_equal(v, 1); /* below a millisecond rounds up */
	assert_int_equal(sc_quantity_duration_ms("250ms", &v), 0);
	assert_int_equal(v, 250);
	assert_int_equal(sc_quantity_duration_ms("1m1ms", &v), 0);
	assert_int_equal(v, 60001);
	v = 7;
	assert_int_equal(sc_quantity_duration_ms(NULL, &v), SC_EPARSE);
	assert_int_equal(sc_quantity_duration_ms("", &v), SC_EPARSE);
	assert_int_equal(sc_quantity_duration_ms("10x", &v), SC_EPARSE);
	assert_int_equal(sc_quantity_duration_ms("-1", &v), SC_ERANGE);
	assert_int_equal(sc_quantity_duration_ms("-5s", &v), SC_ERANGE);
	assert_int_equal(sc_quantity_duration_ms("99999999999999999", &v), SC_ERANGE);
	assert_int_equal(v, 7);
}

static void test_time(void **state)
{
	assert_int_equal(tm("1970-01-01T00:00:00Z"), 0);
	assert_int_equal(tm("2026-11-29T10:00:00Z"), 1795946400LL);
	assert_int_equal(tm("2026-11-29T10:00:00.75Z"), 1795946400LL);
	assert_int_equal(tm("2026-11-29T12:00:00+02:00"), 1795946400LL);
	assert_int_equal(tm("2026-11-29t09:30:00-00:30"), 1795946400LL);
	assert_int_equal(tm("2026-11-29 10:00:00z"), 1795946400LL);
	assert_int_equal(tm("2024-02-29T00:00:00Z"), 1709164800LL);
	assert_int_equal(tm("1969-12-31T23:59:59Z"), -1);
	assert_int_equal(tm("2016-12-31T23:59:60Z"), 1483228799LL);

	int64_t v = 7;
	assert_int_equal(sc_quantity_time("2026-11-29", &v), SC_EPARSE);
	assert_int_equal(sc_quantity_time("2026-11-29T10:00:00", &v), SC_EPARSE);
	assert_int_equal(sc_quantity_time("2026-11-29T10:00Z", &v), SC_EPARSE);
	assert_int_equal(sc_quantity_time("2026-11-29T10:00:00.Z", &v), SC_EPARSE);
	assert_int_equal(sc_quantity_time("2026-11-29T10:00:00Zjunk", &v), SC_EPARSE);
	assert_int_equal(sc_quantity_time("2026-11-29T10:00:00+2:00", &v), SC_EPARSE);
	assert_int_equal(sc_quantity_time("yesterday", &v), SC_EPARSE);
	assert_int_equal(sc_quantity_time(NULL, &v), SC_EPARSE);
	assert_int_equal(sc_quantity_time("2023-02-29T00:00:00Z", &v), SC_ERANGE);
	assert_int_equal(sc_quantity_time("2026-13-01T00:00:00Z", &v), SC_ERANGE);
	assert_int_equal(sc_quantity_time("2026-00-01T00:00:00Z", &v), SC_ERANGE);
	assert_int_equal(sc_quantity_time("2026-01-01T24:00:00Z", &v), SC_ERANGE);
	assert_int_equal(sc_quantity_time("2026-01-01T00:60:00Z", &v), SC_ERANGE);
	assert_int_equal(v, 7);
}

static void test_format_time(void **state)
{
	char buf[32];
	assert_string_equal(sc_quantity_format_time(1795946400LL, buf, sizeof(buf)),
	                    "2026-11-29T10:00:00Z");
	assert_string_equal(sc_quantity_format_time(-1, buf, sizeof(buf)), "1969-12-31T23:59:59Z");
	assert_string_equal(sc_quantity_format_time(1709164800LL, buf, sizeof(buf)),
	                    "2024-02-29T00:00:00Z");
	/* Round trip over a range of days, leap years included. */
	for (int64_t t = -86400LL * 800; t < 86400LL * 365 * 60; t += 86400 * 7 + 3601) {
		int64_t back;
		sc_quantity_format_time(t, buf, sizeof(buf));
		assert_int_equal(sc_quantity_time(buf, &back), 0);
		assert_int_equal(back, t);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cpu_ok),    cmocka_unit_test(test_cpu_bad),
	    cmocka_unit_test(test_memory_ok), cmocka_unit_test(test_memory_bad),
	    cmocka_unit_test(test_duration),  cmocka_unit_test(test_duration_ms),
	    cmocka_unit_test(test_time),      cmocka_unit_test(test_format_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
