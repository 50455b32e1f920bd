#include "base/alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Calls still to go before the failing one (0: never fail), and calls made
 * since it was armed. Relaxed atomics: the only ordering that matters is a
 * test's own, and the fast path is one load. */
static _Atomic long fail_countdown;
static _Atomic long calls;

void sc_alloc_fail_after(long n)
{
	atomic_store_explicit(&calls, 0, memory_order_relaxed);
	atomic_store_explicit(&fail_countdown, n > 0 ? n : 0, memory_order_relaxed);
}

long sc_alloc_calls(void)
{
	return atomic_load_explicit(&calls, memory_order_relaxed);
}

/* True when this call is the one a test asked to fail. */
static int injected_failure(void)
{
	long c = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
	while (c > 0) {
		if (atomic_compare_exchange_weak_explicit(
		        &fail_countdown, &c, c - 1, memory_order_relaxed, memory_order_relaxed)) {
			atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
			return c == 1;
		}
	}
	return 0;
}

void *sc_malloc(size_t n)
{
	return injected_failure() ? NULL : malloc(n ? n : 1);
}

void *sc_calloc(size_t n, size_t size)
{
	return injected_failure() ? NULL : calloc(n ? n : 1, size ? size : 1);
}

void *sc_realloc(void *p, size_t n)
{
	return injected_failure() ? NULL : realloc(p, n ? n : 1);
}

void *sc_reallocarray(void *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return sc_realloc(p, n * size);
}

char *sc_strdup(const char *s)
{
	return s ? sc_strndup(s, strlen(s)) : NULL;
}

char *sc_strndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = sc_malloc(len + 1);
	if (p) {
		memcpy(p, s, len);
		p[len] = '\0';
	}
	return p;
}

_Noreturn void sc_oom(void)
{
	/* No stdio: it may want memory itself. */
	static const char msg[] = "starcloud: out of memory\n";
	ssize_t w = write(2, msg, sizeof(msg) - 1);
	(void)w;
	abort();
}

void *sc_xcheck(void *p)
{
	if (!p)
		sc_oom();
	return p;
}

void *sc_xmalloc(size_t n)
{
	return sc_xcheck(malloc(n ? n : 1));
}

void *sc_xcalloc(size_t n, size_t size)
{
	return sc_xcheck(calloc(n ? n : 1, size ? size : 1));
}

void *sc_xrealloc(void *p, size_t n)
{
	return sc_xcheck(realloc(p, n ? n : 1));
}

void *sc_xreallocarray(void *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		sc_oom();
	return sc_xrealloc(p, n * size);
}

char *sc_xstrdup(const char *s)
{
	return s ? sc_xstrndup(s, strlen(s)) : NULL;
}

char *sc_xstrndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = sc_xmalloc(len + 1);
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}
