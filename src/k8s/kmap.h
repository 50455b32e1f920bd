/* kmap: a string -> object hash table that also deletes, for the watch
 * caches (strmap in base/ only grows, which suits a per-cycle index).
 *
 * Chained buckets; the table doubles when it holds more than 3/4 of its
 * bucket count. Keys are borrowed from the values (each cached object
 * carries its "namespace/name"), so a value must outlive its entry.
 * Daemon code: out of memory aborts (xmalloc rule). */
#ifndef SC_K8S_KMAP_H
#define SC_K8S_KMAP_H

#include <stddef.h>

typedef struct sc_kmap_ent {
	const char *key;
	void *val;
	struct sc_kmap_ent *next;
	unsigned hash;
} sc_kmap_ent_t;

typedef struct sc_kmap {
	sc_kmap_ent_t **b;
	size_t nb; /* buckets: a power of two, or 0 */
	size_t len;
} sc_kmap_t;

void sc_kmap_init(sc_kmap_t *m);
/* Frees the table (not the values); the map is empty and usable after. */
void sc_kmap_free(sc_kmap_t *m);
void *sc_kmap_get(const sc_kmap_t *m, const char *key);
/* Sets key -> val and returns the value it replaced (NULL when new). key is
 * borrowed and must stay valid while the entry exists. */
void *sc_kmap_put(sc_kmap_t *m, const char *key, void *val);
/* Removes key and returns its value, or NULL. */
void *sc_kmap_del(sc_kmap_t *m, const char *key);

/* Iteration: for (sc_kmap_iter_t it = {0}; sc_kmap_next(m, &it);) uses
 * it.key / it.val. The map must not change during the walk. */
typedef struct sc_kmap_iter {
	size_t i;
	sc_kmap_ent_t *e;
	const char *key;
	void *val;
} sc_kmap_iter_t;
int sc_kmap_next(const sc_kmap_t *m, sc_kmap_iter_t *it);

#endif
