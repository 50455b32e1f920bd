/* strmap: a string -> index hash table (open addressing, FNV-1a).
 *
 * Keys are borrowed, never copied: the table is built over names that live
 * in a snapshot or an arena for at least as long as the table. */
#ifndef SC_BASE_STRMAP_H
#define SC_BASE_STRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct sc_strmap {
	const char **keys;
	uint32_t *vals;
	size_t cap; /* power of two, or 0 */
	size_t len;
} sc_strmap_t;

/* Prepares an empty map with room for n keys; SC_ENOMEM on failure. */
int sc_strmap_init(sc_strmap_t *m, size_t n);
void sc_strmap_free(sc_strmap_t *m);
/* Inserts key -> val. Returns 0, SC_EEXISTS (value unchanged) or SC_ENOMEM. */
int sc_strmap_put(sc_strmap_t *m, const char *key, uint32_t val);
/* Returns the value for key, or -1. */
long sc_strmap_get(const sc_strmap_t *m, const char *key);

#endif
