/* Reading objects: one for a request, or every object of a kind for the
 * controllers (server.h, "load.c"). */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "server/cache.h"
#include "server/server.h"
#include "starcloud/error.h"

json_t *sc__api_load(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who,
                     const sc_kind_t *k, const char *name, int64_t *mod_rev)
{
	const sc_cobj_t *o = sc__cache_get(s->cache, k, name);
	json_t *cur = o ? sc__cache_obj((sc_cobj_t *)o) : NULL;
	/* A copy: the caller changes it (a patch, a replace) and the cache's
	 * is shared with every reader. */
	json_t *obj = cur ? json_deep_copy(cur) : NULL;
	*mod_rev = o ? o->mod_rev : 0;
	if (!obj || !sc__auth_can_see(who, k, obj)) {
		json_decref(obj);
		sc__api_error(r, 404, "NotFound", NULL, "%s \"%s\" not found", k->kind, name);
		return NULL;
	}
	return obj;
}

int sc__objects_each(sc_server_t *s, const sc_kind_t *k, sc_object_fn fn, void *ud)
{
	size_t n;
	sc_cobj_t *const *items = sc__cache_items(s->cache, k, &n);
	for (size_t i = 0; i < n; i++) {
		json_t *obj = sc__cache_obj(items[i]);
		if (obj)
			fn(s, items[i]->name, obj, ud);
	}
	return 0;
}
