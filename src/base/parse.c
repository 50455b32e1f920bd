#include "base/parse.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/quantity.h"
#include "starcloud/error.h"

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Reads [+-]digits exactly: the magnitude in *mag (saturated at
 * UINT64_MAX + overflow flag), the sign in *neg. */
static int whole(const char *s, bool *neg, uint64_t *mag)
{
	if (!s)
		return SC_EPARSE;
	*neg = *s == '-';
	if (*s == '-' || *s == '+')
		s++;
	if (!is_digit(*s))
		return SC_EPARSE;
	uint64_t v = 0;
	bool over = false;
	for (; is_digit(*s); s++) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			over = true;
		else
			v = v * 10 + d;
	}
	if (*s)
		return SC_EPARSE;
	*mag = over ? UINT64_MAX : v;
	return over ? SC_ERANGE : 0;
}

int sc_parse_digits(const char **s, uint64_t max, uint64_t *out)
{
	const char *p = *s;
	if (!p || !is_digit(*p))
		return SC_EPARSE;
	uint64_t v = 0;
	bool over = false;
	for (; is_digit(*p); p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			over = true;
		else
			v = v * 10 + d;
	}
	if (over || v > max)
		return SC_ERANGE;
	*s = p;
	*out = v;
	return 0;
}

int sc_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	bool neg;
	uint64_t mag;
	int rc = whole(s, &neg, &mag);
	if (rc < 0)
		return rc;
	int64_t v;
	if (neg) {
		if (mag > (uint64_t)INT64_MAX + 1)
			return SC_ERANGE;
		v = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
	} else {
		if (mag > (uint64_t)INT64_MAX)
			return SC_ERANGE;
		v = (int64_t)mag;
	}
	if (v < min || v > max)
		return SC_ERANGE;
	*out = v;
	return 0;
}

int sc_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	bool neg;
	uint64_t mag;
	int rc = whole(s, &neg, &mag);
	if (rc < 0)
		return rc;
	if ((neg && mag) || mag < min || mag > max)
		return SC_ERANGE;
	*out = mag;
	return 0;
}

int sc_parse_int(const char *s, int min, int max, int *out)
{
	int64_t v;
	int rc = sc_parse_i64(s, min, max, &v);
	if (rc == 0)
		*out = (int)v;
	return rc;
}

/* [+-]digits[.digits][e[+-]digits] or [+-].digits[...]: what strtod
 * reads, minus everything it also accepts that a person does not mean
 * (leading spaces, "nan", "inf", hexadecimal). */
static bool decimal_text(const char *s)
{
	size_t nd = 0;
	if (*s == '+' || *s == '-')
		s++;
	for (; is_digit(*s); s++)
		nd++;
	if (*s == '.')
		for (s++; is_digit(*s); s++)
			nd++;
	if (!nd)
		return false;
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!is_digit(*s))
			return false;
		while (is_digit(*s))
			s++;
	}
	return *s == '\0';
}

int sc_parse_num(const char *s, double min, double max, double *out)
{
	if (!s || !decimal_text(s))
		return SC_EPARSE;
	double v = strtod(s, NULL);
	if (!isfinite(v))
		return SC_ERANGE;
	if (!(v >= min && v <= max))
		return SC_ERANGE;
	*out = v;
	return 0;
}

int sc_parse_duration_ms(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	int64_t ms;
	int rc = sc_quantity_duration_ms(s, &ms);
	if (rc < 0)
		return rc;
	if ((uint64_t)ms < min || (uint64_t)ms > max)
		return SC_ERANGE;
	*out = (uint64_t)ms;
	return 0;
}

int sc_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	int64_t b;
	/* "m" (a thousandth) is a Kubernetes suffix, never a size. */
	size_t n = s ? strlen(s) : 0;
	if (n && s[n - 1] == 'm')
		return SC_EPARSE;
	int rc = sc_quantity_memory(s, SC_QTY_WHOLE, &b);
	if (rc < 0)
		return rc;
	if ((uint64_t)b < min || (uint64_t)b > max)
		return SC_ERANGE;
	*out = (uint64_t)b;
	return 0;
}

int sc_parse_hostport(const char *s, sc_hostport_t *out)
{
	const char *colon = s ? strrchr(s, ':') : NULL;
	if (!colon || colon == s)
		return SC_EPARSE;
	if ((size_t)(colon - s) >= sizeof(out->host))
		return SC_ERANGE;
	bool neg;
	uint64_t port;
	int rc = whole(colon + 1, &neg, &port);
	if (rc == 0 && (colon[1] == '+' || colon[1] == '-'))
		rc = SC_EPARSE;
	if (rc < 0)
		return rc;
	if (port > 65535)
		return SC_ERANGE;
	snprintf(out->host, sizeof(out->host), "%.*s", (int)(colon - s), s);
	out->port = (int)port;
	return 0;
}

const char *sc_parse_expect(sc_parse_kind_t kind)
{
	switch (kind) {
	case SC_PARSE_WHOLE:
		return "a whole number";
	case SC_PARSE_NUM:
		return "a number";
	case SC_PARSE_DURATION:
		return "a duration such as 30s or 500ms";
	case SC_PARSE_SIZE:
		return "a size in bytes such as 1048576 or 4Mi";
	case SC_PARSE_HOSTPORT:
		return "HOST:PORT";
	}
	return "a value";
}
