/* Arena: a bump allocator for scratch memory that dies all at once.
 *
 * The scheduler takes every per-cycle allocation from an arena and resets it
 * at the end of the cycle, so a cycle never frees piecemeal and never leaks.
 * Allocation failure returns NULL (the core turns that into SC_ENOMEM). */
#ifndef STARCLOUD_ARENA_H
#define STARCLOUD_ARENA_H

#include <stddef.h>

typedef struct sc_arena sc_arena_t;

/* Creates an empty arena; chunk_size is the size of each block it asks
 * malloc for (0 picks 64 KiB). Returns NULL when out of memory. */
sc_arena_t *sc_arena_new(size_t chunk_size);
/* Frees the arena and everything allocated from it. Accepts NULL. */
void sc_arena_free(sc_arena_t *a);
/* Forgets every allocation but keeps every block for reuse. */
void sc_arena_reset(sc_arena_t *a);
/* Returns n bytes aligned for any type, or NULL when out of memory. */
void *sc_arena_alloc(sc_arena_t *a, size_t n);
/* Like sc_arena_alloc but zero-filled; nmemb*size is checked for overflow. */
void *sc_arena_calloc(sc_arena_t *a, size_t nmemb, size_t size);
/* Copies a NUL-terminated string (NULL gives NULL). */
char *sc_arena_strdup(sc_arena_t *a, const char *s);
/* printf into the arena. */
char *sc_arena_printf(sc_arena_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Bytes handed out since the last reset (for benchmarks). */
size_t sc_arena_used(const sc_arena_t *a);

/* Test hook: when non-zero, the n-th block request from now fails (1 = the
 * next one). Lets a unit test fail allocations one by one. */
void sc_arena_fail_after(sc_arena_t *a, long n);

#endif
