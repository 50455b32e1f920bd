/* Strict parsers for values that people type: flags, environment
 * variables, annotations, configuration files.
 *
 * One rule for all of them: the whole string is the value. Nothing may
 * stand around it (no spaces, no trailing junk), a whole number has no
 * fraction ("2.7" is not 2), a number is finite ("nan" and "inf" are
 * refused, so a NaN threshold can never disable a comparison), and the
 * value lies within the bounds the caller gives. These are the only
 * places in the daemons that call strtod(); everything else goes through
 * them (`make check-src` enforces it).
 *
 * Each returns 0 and writes *out, or a negative code and leaves *out
 * alone: SC_EPARSE when the text is not of the kind asked for, SC_ERANGE
 * when it is but lies outside [min, max]. sc_parse_expect() words what a
 * kind expects, for error messages ("a duration such as 30s or 500ms"). */
#ifndef SC_BASE_PARSE_H
#define SC_BASE_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* A whole decimal number ([+-]digits) in [min, max]. */
int sc_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
int sc_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int sc_parse_int(const char *s, int min, int max, int *out);

/* The decimal digits at *s (at least one; no sign, no spaces) as a whole
 * number of at most max; *s moves past them. For numbers inside larger
 * text: "8xA100-80GB", "3g.40gb", "host:80/path". */
int sc_parse_digits(const char **s, uint64_t max, uint64_t *out);

/* A finite decimal number ([+-]digits[.digits][e[+-]digits]) in [min, max]. */
int sc_parse_num(const char *s, double min, double max, double *out);

/* A duration in milliseconds: "250ms", "30s", "1.5m", "2h", "1d", "1h30m",
 * or a plain number of seconds ("30"), as in base/quantity.h; a fraction
 * of a millisecond rounds up, so a positive duration is never 0. */
int sc_parse_duration_ms(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* A size in bytes: "1048576", "4Mi", "10Gi", "80G"; it must come to a
 * whole number of bytes ("1.5" and "0.3Ki" are refused). */
int sc_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* HOST:PORT, split at the last ':'. HOST is not empty and shorter than
 * SC_HOST_MAX; PORT is a whole number in 0..65535 (0: any free port). */
#define SC_HOST_MAX 64
typedef struct sc_hostport {
	char host[SC_HOST_MAX];
	int port;
} sc_hostport_t;
int sc_parse_hostport(const char *s, sc_hostport_t *out);

/* What each kind expects, in words. */
typedef enum sc_parse_kind {
	SC_PARSE_WHOLE,
	SC_PARSE_NUM,
	SC_PARSE_DURATION,
	SC_PARSE_SIZE,
	SC_PARSE_HOSTPORT,
} sc_parse_kind_t;
const char *sc_parse_expect(sc_parse_kind_t kind);

#endif
