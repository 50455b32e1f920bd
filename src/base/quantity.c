#include "base/quantity.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "starcloud/error.h"

/* Quantities are computed exactly in 128-bit integers: a decimal mantissa of
 * at most 20 significant digits (< 2^67) times a binary suffix of at most 2^60
 * fits in 127 bits, so "1.5Gi" is exactly 1610612736 and no double rounding can
 * turn "0.1" cores into 101 millicores. */
typedef unsigned __int128 u128;

#define MAX_SIG_DIGITS 20
#define MAX_EXP10 60

typedef struct decimal {
	bool negative;
	u128 mant; /* the digits without the point */
	int exp10; /* value = mant * 10^exp10 */
} decimal_t;

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Reads [-+]?digits[.digits] or [-+]?.digits at *p and advances *p.
 * Returns SC_EPARSE without a digit, SC_ERANGE for too many digits. */
static int parse_decimal(const char **p, bool allow_sign, decimal_t *d)
{
	const char *s = *p;
	int ndigits = 0, sig = 0;

	memset(d, 0, sizeof(*d));
	if (allow_sign && (*s == '-' || *s == '+'))
		d->negative = *s++ == '-';
	for (bool frac = false;; s++) {
		if (*s == '.' && !frac) {
			frac = true;
			continue;
		}
		if (!is_digit(*s))
			break;
		ndigits++;
		if (d->mant == 0 && *s == '0') {
			if (frac)
				d->exp10--;
			continue;
		}
		if (++sig > MAX_SIG_DIGITS)
			return SC_ERANGE;
		d->mant = d->mant * 10 + (u128)(*s - '0');
		if (frac)
			d->exp10--;
	}
	if (ndigits == 0)
		return SC_EPARSE;
	*p = s;
	return 0;
}

/* Reads an "e<int>" exponent when one follows; "E" alone is left for the
 * exa suffix, as Kubernetes does. */
static int parse_exponent(const char **p, int *exp10)
{
	const char *s = *p;
	if (*s != 'e' && *s != 'E')
		return 0;
	s++;
	bool neg = false;
	if (*s == '-' || *s == '+')
		neg = *s++ == '-';
	if (!is_digit(*s))
		return 0; /* not an exponent: maybe a suffix */
	int v = 0;
	for (; is_digit(*s); s++) {
		if (v > MAX_EXP10)
			return SC_ERANGE;
		v = v * 10 + (*s - '0');
	}
	*exp10 += neg ? -v : v;
	*p = s;
	return 0;
}

/* Turns mant * 2^shift * 10^exp10 into an int64, rounding up any fraction.
 * Returns SC_ERANGE when it does not fit. */
static int scale(u128 mant, int shift, int exp10, int64_t *out)
{
	const u128 max = (u128)INT64_MAX;

	if (mant == 0) {
		*out = 0;
		return 0;
	}
	mant <<= shift; /* safe: mant < 10^20 < 2^67 and shift <= 60 */
	if (exp10 > MAX_EXP10)
		return SC_ERANGE;
	for (; exp10 > 0; exp10--) {
		if (mant > max)
			return SC_ERANGE;
		mant *= 10;
	}
	if (exp10 < 0) {
		if (exp10 < -38) {
			*out = 1; /* a positive value below one unit rounds up */
			return 0;
		}
		u128 den = 1;
		for (; exp10 < 0; exp10++)
			den *= 10;
		mant = mant / den + (mant % den != 0);
	}
	if (mant > max)
		return SC_ERANGE;
	*out = (int64_t)mant;
	return 0;
}

/* Memory suffixes: binary ones first so that "Mi" is not read as "M". */
static const struct {
	const char *name;
	int shift, exp10;
} mem_suffixes[] = {
    {"Ki", 10, 0}, {"Mi", 20, 0}, {"Gi", 30, 0}, {"Ti", 40, 0}, {"Pi", 50, 0},
    {"Ei", 60, 0}, {"k", 0, 3},   {"M", 0, 6},   {"G", 0, 9},   {"T", 0, 12},
    {"P", 0, 15},  {"E", 0, 18},  {"m", 0, -3},
};

/* True when mant * 2^shift * 10^exp10 is a whole number. */
static bool is_whole(u128 mant, int shift, int exp10)
{
	if (exp10 >= 0 || mant == 0)
		return true;
	if (exp10 < -38)
		return false;
	u128 den = 1;
	for (; exp10 < 0; exp10++)
		den *= 10;
	return (mant << shift) % den == 0;
}

static int finish(const decimal_t *d, int shift, int exp10, unsigned flags, int64_t *out)
{
	int64_t v;
	if (d->negative && d->mant != 0 && !(flags & SC_QTY_NEGATIVE))
		return SC_ERANGE;
	if ((flags & SC_QTY_WHOLE) && !is_whole(d->mant, shift, d->exp10 + exp10))
		return SC_EPARSE;
	int rc = scale(d->mant, shift, d->exp10 + exp10, &v);
	if (rc)
		return rc;
	*out = d->negative ? -v : v;
	return 0;
}

/* The number a memory or CPU quantity starts with: signed decimal, then an
 * optional exponent (1e3); *s is left at the suffix. */
static int quantity_number(const char **s, decimal_t *d)
{
	if (!*s)
		return SC_EPARSE;
	int rc = parse_decimal(s, true, d);
	return rc ? rc : parse_exponent(s, &d->exp10);
}

int sc_quantity_memory(const char *s, unsigned flags, int64_t *bytes)
{
	decimal_t d;
	int rc = quantity_number(&s, &d);
	if (rc)
		return rc;
	if (*s == '\0')
		return finish(&d, 0, 0, flags, bytes);
	for (size_t i = 0; i < sizeof(mem_suffixes) / sizeof(mem_suffixes[0]); i++) {
		if (strcmp(s, mem_suffixes[i].name) == 0)
			return finish(&d, mem_suffixes[i].shift, mem_suffixes[i].exp10, flags,
			              bytes);
	}
	return SC_EPARSE;
}

int sc_quantity_cpu(const char *s, unsigned flags, int64_t *milli)
{
	decimal_t d;
	int rc = quantity_number(&s, &d);
	if (rc)
		return rc;
	if (*s == '\0')
		return finish(&d, 0, 3, flags, milli);
	if (strcmp(s, "m") == 0)
		return finish(&d, 0, 0, flags, milli);
	return SC_EPARSE;
}

/* Duration units in milliseconds; "ms" must be tried before "m". */
static const struct {
	const char *name;
	int64_t ms;
} dur_units[] = {
    {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000},
};

static int duration_unit(const char **p, int64_t *ms)
{
	for (size_t i = 0; i < sizeof(dur_units) / sizeof(dur_units[0]); i++) {
		size_t n = strlen(dur_units[i].name);
		if (strncmp(*p, dur_units[i].name, n) == 0) {
			*ms = dur_units[i].ms;
			*p += n;
			return 0;
		}
	}
	return SC_EPARSE;
}

/* Sums a sequence of <number><unit> in milliseconds, each part rounded up
 * to a whole millisecond. */
static int duration_parts_ms(const char *p, int64_t *ms)
{
	u128 total = 0;
	while (*p) {
		decimal_t d;
		int64_t unit, part;
		int rc;
		if ((rc = parse_decimal(&p, false, &d)) || (rc = duration_unit(&p, &unit)))
			return rc;
		if ((rc = scale(d.mant * (u128)unit, 0, d.exp10, &part)))
			return rc;
		total += (u128)part;
		if (total > (u128)INT64_MAX)
			return SC_ERANGE;
	}
	*ms = (int64_t)total;
	return 0;
}

/* What both duration parsers do first: NULL, "" and a negative duration are
 * refused; returns 1 with d set when s is a plain number (which each scales
 * to its own unit), 0 when s has units (duration_parts_ms reads it). */
static int duration_plain(const char *s, decimal_t *d)
{
	if (!s || !*s)
		return SC_EPARSE;
	if (*s == '-')
		return SC_ERANGE;
	const char *p = s;
	int rc = parse_decimal(&p, false, d);
	if (rc)
		return rc;
	return *p == '\0';
}

int sc_quantity_duration(const char *s, int64_t *seconds)
{
	/* A plain number is seconds, as in Kubernetes' *Seconds fields. */
	decimal_t d;
	int64_t ms;
	int rc = duration_plain(s, &d);
	if (rc)
		return rc < 0 ? rc : scale(d.mant, 0, d.exp10, seconds);
	if ((rc = duration_parts_ms(s, &ms)))
		return rc;
	*seconds = ms / 1000 + (ms % 1000 != 0);
	return 0;
}

int sc_quantity_duration_ms(const char *s, int64_t *ms)
{
	decimal_t d;
	int rc = duration_plain(s, &d);
	if (rc)
		return rc < 0 ? rc : scale(d.mant, 0, d.exp10 + 3, ms);
	return duration_parts_ms(s, ms);
}

/* Days since 1970-01-01 of a proleptic Gregorian date (the well-known
 * era-based formula: 400-year eras have a fixed number of days). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static bool leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int y, int m)
{
	static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	return m == 2 && leap(y) ? 29 : dm[m - 1];
}

/* Reads exactly n digits. */
static bool fixed_digits(const char **p, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (!is_digit((*p)[i]))
			return false;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*out = v;
	return true;
}

static bool expect(const char **p, char c)
{
	if (**p != c)
		return false;
	(*p)++;
	return true;
}

/* Reads "Z" or "+HH:MM" / "-HH:MM" into an offset in seconds east of UTC. */
static bool parse_offset(const char **p, int *offset)
{
	if (**p == 'Z' || **p == 'z') {
		(*p)++;
		*offset = 0;
		return true;
	}
	if (**p != '+' && **p != '-')
		return false;
	int sign = *(*p)++ == '-' ? -1 : 1, hh, mm;
	if (!fixed_digits(p, 2, &hh) || !expect(p, ':') || !fixed_digits(p, 2, &mm) || hh > 23 ||
	    mm > 59)
		return false;
	*offset = sign * (hh * 3600 + mm * 60);
	return true;
}

int sc_quantity_time(const char *s, int64_t *epoch)
{
	int y, mo, d, h, mi, sec, off;
	const char *p = s;
	if (!s)
		return SC_EPARSE;
	if (!fixed_digits(&p, 4, &y) || !expect(&p, '-') || !fixed_digits(&p, 2, &mo) ||
	    !expect(&p, '-') || !fixed_digits(&p, 2, &d))
		return SC_EPARSE;
	/* RFC 3339 allows a space instead of 'T' (section 5.6, NOTE). */
	if (*p != 'T' && *p != 't' && *p != ' ')
		return SC_EPARSE;
	p++;
	if (!fixed_digits(&p, 2, &h) || !expect(&p, ':') || !fixed_digits(&p, 2, &mi) ||
	    !expect(&p, ':') || !fixed_digits(&p, 2, &sec))
		return SC_EPARSE;
	if (*p == '.') {
		if (!is_digit(*++p))
			return SC_EPARSE;
		while (is_digit(*p))
			p++;
	}
	if (!parse_offset(&p, &off) || *p != '\0')
		return SC_EPARSE;
	/* Second 60 is a leap second; epoch time has no room for it. */
	if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60)
		return SC_ERANGE;
	if (sec == 60)
		sec = 59;
	*epoch = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off;
	return 0;
}

char *sc_quantity_format_time(int64_t epoch, char *buf, size_t size)
{
	/* Inverse of days_from_civil. */
	int64_t days = epoch / 86400, secs = epoch % 86400;
	if (secs < 0) {
		secs += 86400;
		days--;
	}
	int64_t z = days + 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	int d = (int)(doy - (153 * mp + 2) / 5 + 1);
	int m = (int)(mp < 10 ? mp + 3 : mp - 9);
	int64_t y = yoe + era * 400 + (m <= 2);
	snprintf(buf, size, "%04lld-%02d-%02dT%02d:%02d:%02dZ", (long long)y, m, d,
	         (int)(secs / 3600), (int)(secs / 60 % 60), (int)(secs % 60));
	return buf;
}
