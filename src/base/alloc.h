/* Memory: one out-of-memory policy for the whole program.
 *
 * Two families, chosen by what a failure should do:
 *
 * sc_malloc, sc_calloc, sc_realloc, sc_strdup return NULL when memory runs
 * out. The library (core, manifest, simulator) uses them and reports
 * SC_ENOMEM upward; so do daemon paths whose size comes from input (a
 * model checkpoint), where failing is an answer, not an accident. Tests
 * make the n-th call fail (sc_alloc_fail_after) to prove each such path
 * cleans up and reports.
 *
 * sc_xmalloc, sc_xcalloc, sc_xrealloc, sc_xstrdup never return NULL: out
 * of memory prints one line and aborts. The daemons use them for their
 * own bookkeeping (style.md rule 7): a daemon that cannot allocate a
 * connection record cannot keep the promises it has made either, and a
 * crash that a supervisor restarts is safer than a half-updated state.
 * sc_xcheck() applies the same policy to what another library allocated
 * (jansson's json_object(), json_dumps(), ...).
 *
 * Everything is released with free(); free(NULL) is fine. */
#ifndef SC_BASE_ALLOC_H
#define SC_BASE_ALLOC_H

#include <stddef.h>

void *sc_malloc(size_t n);
void *sc_calloc(size_t n, size_t size);
void *sc_realloc(void *p, size_t n);
/* n * size, refused (NULL) when the product overflows. */
void *sc_reallocarray(void *p, size_t n, size_t size);
char *sc_strdup(const char *s);
char *sc_strndup(const char *s, size_t n);

void *sc_xmalloc(size_t n);
void *sc_xcalloc(size_t n, size_t size);
void *sc_xrealloc(void *p, size_t n);
void *sc_xreallocarray(void *p, size_t n, size_t size);
/* sc_xstrdup(NULL) is NULL. */
char *sc_xstrdup(const char *s);
char *sc_xstrndup(const char *s, size_t n);
/* Returns p; out of memory when p is NULL. */
void *sc_xcheck(void *p);
/* Prints "out of memory" and aborts. */
_Noreturn void sc_oom(void);

/* Tests: the n-th call of the sc_malloc family from now on fails, and every
 * call after it succeeds again; 0 turns failing off. Counted across
 * threads. sc_alloc_calls() is how many calls were made since the last
 * sc_alloc_fail_after(), so a test can walk every failure point. The x
 * family is never failed: it would only abort. */
void sc_alloc_fail_after(long n);
long sc_alloc_calls(void);

#endif
