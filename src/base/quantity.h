/* Quantities as users write them in manifests and on the command line.
 *
 * CPU:      "8", "0.5", "500m", "1e3"           -> millicores
 * Memory:   "16Gi", "512Mi", "80G", "1e3", "123" -> bytes; suffixes are the
 *           Kubernetes ones: Ki Mi Gi Ti Pi Ei (powers of 1024), k M G T P E
 *           (powers of 1000) and m (1/1000). Fractions round up to a whole
 *           byte, as Kubernetes does.
 * Duration: "30s", "10m", "1h30m", "1.5h", "2d", "250ms", or a plain number
 *           of seconds -> whole seconds, rounded up.
 * Time:     RFC 3339 ("2026-11-29T10:00:00Z", "...T10:00:00.5+02:00")
 *           -> seconds since the Unix epoch (fractions are dropped).
 *
 * Every parser takes a NUL-terminated string, accepts nothing around the
 * value (no spaces), and returns 0, SC_EPARSE for malformed text, or
 * SC_ERANGE for a value that is negative where that is not allowed or does
 * not fit in int64. *out is written only on success. */
#ifndef STARCLOUD_QUANTITY_H
#define STARCLOUD_QUANTITY_H

#include <stddef.h>
#include <stdint.h>

/* Flags for the cpu and memory parsers. */
enum {
	SC_QTY_NEGATIVE = 1, /* accept a leading '-' (queue quota -1 etc.) */
	SC_QTY_WHOLE = 2,    /* refuse a value that is not a whole unit ("1.5" bytes) */
};

int sc_quantity_cpu(const char *s, unsigned flags, int64_t *milli);
int sc_quantity_memory(const char *s, unsigned flags, int64_t *bytes);
int sc_quantity_duration(const char *s, int64_t *seconds);
/* The same grammar in milliseconds (a plain number is still seconds). */
int sc_quantity_duration_ms(const char *s, int64_t *ms);
int sc_quantity_time(const char *s, int64_t *epoch);

/* Formats an epoch as RFC 3339 UTC ("2026-11-29T10:00:00Z") into buf, which
 * should hold at least 32 bytes. Returns buf. */
char *sc_quantity_format_time(int64_t epoch, char *buf, size_t size);

#endif
