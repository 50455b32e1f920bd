#include "base/strmap.h"

#include <stdlib.h>
#include <string.h>

#include "starcloud/error.h"
#include "base/alloc.h"

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h;
}

int sc_strmap_init(sc_strmap_t *m, size_t n)
{
	size_t cap = 16;
	while (cap < n * 2)
		cap <<= 1;
	m->keys = sc_calloc(cap, sizeof(*m->keys));
	m->vals = sc_calloc(cap, sizeof(*m->vals));
	m->cap = cap;
	m->len = 0;
	if (!m->keys || !m->vals) {
		sc_strmap_free(m);
		return SC_ENOMEM;
	}
	return 0;
}

void sc_strmap_free(sc_strmap_t *m)
{
	if (!m)
		return;
	free(m->keys);
	free(m->vals);
	m->keys = NULL;
	m->vals = NULL;
	m->cap = m->len = 0;
}

static int grow(sc_strmap_t *m)
{
	sc_strmap_t n;
	int rc = sc_strmap_init(&n, m->cap);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i])
			sc_strmap_put(&n, m->keys[i], m->vals[i]);
	sc_strmap_free(m);
	*m = n;
	return 0;
}

int sc_strmap_put(sc_strmap_t *m, const char *key, uint32_t val)
{
	if (m->cap == 0 || (m->len + 1) * 2 > m->cap) {
		int rc = m->cap ? grow(m) : sc_strmap_init(m, 8);
		if (rc < 0)
			return rc;
	}
	size_t mask = m->cap - 1;
	for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
		if (!m->keys[i]) {
			m->keys[i] = key;
			m->vals[i] = val;
			m->len++;
			return 0;
		}
		if (strcmp(m->keys[i], key) == 0)
			return SC_EEXISTS;
	}
}

long sc_strmap_get(const sc_strmap_t *m, const char *key)
{
	if (!m->cap || !key)
		return -1;
	size_t mask = m->cap - 1;
	for (size_t i = hash(key) & mask; m->keys[i]; i = (i + 1) & mask)
		if (strcmp(m->keys[i], key) == 0)
			return m->vals[i];
	return -1;
}
