/* The watch caches (see kcache.h). */
#include "k8s/kcache.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "starcloud/error.h"

typedef void *(*decode_fn)(json_t *);
typedef void (*free_fn)(void *);

static const struct {
	decode_fn decode;
	free_fn free;
} kinds[SC_KK_COUNT] = {
    [SC_KK_POD] = {(decode_fn)sc_kpod_decode, (free_fn)sc_kpod_free},
    [SC_KK_NODE] = {(decode_fn)sc_knode_decode, (free_fn)sc_knode_free},
    [SC_KK_QUEUE] = {(decode_fn)sc_kqueue_decode, (free_fn)sc_kqueue_free},
    [SC_KK_GROUP] = {(decode_fn)sc_kgroup_decode, (free_fn)sc_kgroup_free},
    [SC_KK_CLASS] = {(decode_fn)sc_kclass_decode, (free_fn)sc_kclass_free},
};

/* Every cached struct starts with its key. */
static const char *key_of(void *obj)
{
	return *(const char **)obj;
}

void sc_kcache_init(sc_kcache_t *c)
{
	memset(c, 0, sizeof(*c));
}

static sc_kmap_t *kind_map(sc_kcache_t *c, int kind)
{
	switch (kind) {
	case SC_KK_POD:
		return &c->pods;
	case SC_KK_NODE:
		return &c->nodes;
	case SC_KK_QUEUE:
		return &c->queues;
	case SC_KK_GROUP:
		return &c->groups;
	default:
		return &c->classes;
	}
}

void sc_kcache_free(sc_kcache_t *c)
{
	if (!c)
		return;
	for (int k = 0; k < SC_KK_COUNT; k++) {
		sc_kmap_t *m = kind_map(c, k);
		for (sc_kmap_iter_t it = {0}; sc_kmap_next(m, &it);)
			kinds[k].free(it.val);
		sc_kmap_free(m);
		sc_kmap_free(&c->seen[k]);
	}
}

int sc_kcache_apply(sc_kcache_t *c, int kind, bool deleted, json_t *obj)
{
	sc_kmap_t *m = kind_map(c, kind);
	void *o = kinds[kind].decode(obj);
	if (!o)
		return SC_EPARSE;
	if (deleted) {
		void *old = sc_kmap_del(m, key_of(o));
		if (c->listing[kind])
			sc_kmap_del(&c->seen[kind], key_of(o));
		kinds[kind].free(o);
		if (!old)
			return 0;
		kinds[kind].free(old);
		c->changes++;
		return 1;
	}
	void *old = sc_kmap_put(m, key_of(o), o);
	/* A status written back (ours, or another controller's) changes
	 * nothing the scheduler decides from: stored, not counted. */
	int rc = 1;
	if (old && kind == SC_KK_GROUP &&
	    sc_kmeta_same_spec(&((sc_kgroup_t *)old)->meta, &((sc_kgroup_t *)o)->meta))
		rc = 2;
	else if (old && kind == SC_KK_QUEUE &&
	         sc_kmeta_same_spec(&((sc_kqueue_t *)old)->meta, &((sc_kqueue_t *)o)->meta))
		rc = 2;
	/* The seen set borrows keys from the cached objects: point it at the
	 * new one before the old one is freed. */
	if (c->listing[kind])
		sc_kmap_put(&c->seen[kind], key_of(o), o);
	kinds[kind].free(old);
	if (rc == 1)
		c->changes++;
	return rc;
}

void sc_kcache_begin_list(sc_kcache_t *c, int kind)
{
	sc_kmap_free(&c->seen[kind]);
	c->listing[kind] = true;
}

size_t sc_kcache_end_list(sc_kcache_t *c, int kind)
{
	sc_kmap_t *m = kind_map(c, kind);
	size_t n = 0;
	if (!c->listing[kind])
		return 0;
	/* Collect first: the map must not change while it is walked. */
	void **gone = sc_xcalloc(m->len + 1, sizeof(*gone));
	for (sc_kmap_iter_t it = {0}; sc_kmap_next(m, &it);)
		if (!sc_kmap_get(&c->seen[kind], it.key))
			gone[n++] = it.val;
	for (size_t i = 0; i < n; i++) {
		sc_kmap_del(m, key_of(gone[i]));
		kinds[kind].free(gone[i]);
	}
	free(gone);
	sc_kmap_free(&c->seen[kind]);
	c->listing[kind] = false;
	if (n)
		c->changes++;
	return n;
}

void sc_klocal_free(sc_klocal_t *l)
{
	if (!l)
		return;
	free(l->key);
	free(l->uid);
	free(l->node);
	free(l);
}
