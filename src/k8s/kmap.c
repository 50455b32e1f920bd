/* String -> object hash table with deletion (see kmap.h). */
#include "k8s/kmap.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

static unsigned hash(const char *s)
{
	unsigned h = 2166136261u; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

void sc_kmap_init(sc_kmap_t *m)
{
	memset(m, 0, sizeof(*m));
}

void sc_kmap_free(sc_kmap_t *m)
{
	for (size_t i = 0; i < m->nb; i++) {
		sc_kmap_ent_t *e = m->b[i];
		while (e) {
			sc_kmap_ent_t *n = e->next;
			free(e);
			e = n;
		}
	}
	free(m->b);
	sc_kmap_init(m);
}

static sc_kmap_ent_t **slot(const sc_kmap_t *m, const char *key, unsigned h)
{
	sc_kmap_ent_t **p = &m->b[h & (m->nb - 1)];
	while (*p && ((*p)->hash != h || strcmp((*p)->key, key) != 0))
		p = &(*p)->next;
	return p;
}

void *sc_kmap_get(const sc_kmap_t *m, const char *key)
{
	if (!m->nb)
		return NULL;
	sc_kmap_ent_t *e = *slot(m, key, hash(key));
	return e ? e->val : NULL;
}

static void grow(sc_kmap_t *m)
{
	size_t nb = m->nb ? m->nb * 2 : 64;
	sc_kmap_ent_t **b = sc_xcalloc(nb, sizeof(*b));
	for (size_t i = 0; i < m->nb; i++) {
		sc_kmap_ent_t *e = m->b[i];
		while (e) {
			sc_kmap_ent_t *n = e->next;
			e->next = b[e->hash & (nb - 1)];
			b[e->hash & (nb - 1)] = e;
			e = n;
		}
	}
	free(m->b);
	m->b = b;
	m->nb = nb;
}

void *sc_kmap_put(sc_kmap_t *m, const char *key, void *val)
{
	if (m->len + 1 > m->nb / 4 * 3)
		grow(m);
	unsigned h = hash(key);
	sc_kmap_ent_t **p = slot(m, key, h);
	if (*p) {
		void *old = (*p)->val;
		(*p)->val = val;
		(*p)->key = key;
		return old;
	}
	sc_kmap_ent_t *e = sc_xmalloc(sizeof(*e));
	*e = (sc_kmap_ent_t){.key = key, .val = val, .hash = h};
	*p = e;
	m->len++;
	return NULL;
}

void *sc_kmap_del(sc_kmap_t *m, const char *key)
{
	if (!m->nb)
		return NULL;
	sc_kmap_ent_t **p = slot(m, key, hash(key));
	sc_kmap_ent_t *e = *p;
	if (!e)
		return NULL;
	void *val = e->val;
	*p = e->next;
	free(e);
	m->len--;
	return val;
}

int sc_kmap_next(const sc_kmap_t *m, sc_kmap_iter_t *it)
{
	if (it->e)
		it->e = it->e->next;
	while (!it->e && it->i < m->nb)
		it->e = m->b[it->i++];
	if (!it->e)
		return 0;
	it->key = it->e->key;
	it->val = it->e->val;
	return 1;
}
