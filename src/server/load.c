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
	char key[SC_MAX_NAME + 64];
	sc_kv_t kv = {0};
	sc__object_key(k, name, key, sizeof(key));
	int rc = sc_store_get(s->store, key, &kv);
	json_t *obj = rc == 0 ? json_loads(kv.value, 0, NULL) : NULL;
	*mod_rev = kv.mod_rev;
	sc_kv_free(&kv);
	if (rc < 0 && rc != SC_ENOTFOUND) {
		sc__api_store_error(r, rc, "store");
		return NULL;
	}
	if (!obj || !sc__auth_can_see(who, k, obj)) {
		json_decref(obj);
		sc__api_error(r, 404, "NotFound", NULL, "%s \"%s\" not found", k->kind, name);
		return NULL;
	}
	return obj;
}

int sc__objects_each(sc_server_t *s, const sc_kind_t *k, sc_object_fn fn, void *ud)
{
	if (s->cache && sc__cache_serves_reads(s->cache)) {
		size_t n;
		sc_cobj_t *const *items = sc__cache_items(s->cache, k, &n);
		for (size_t i = 0; i < n; i++) {
			json_t *obj = sc__cache_obj(items[i]);
			if (obj)
				fn(s, items[i]->name, obj, ud);
		}
		return 0;
	}
	char prefix[64];
	sc_kv_list_t l;
	snprintf(prefix, sizeof(prefix), SC_KEY_PREFIX "%s/", k->plural);
	int rc = sc_store_list(s->store, prefix, &l);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < l.n; i++) {
		json_t *obj = json_loads(l.items[i].value, 0, NULL);
		if (obj)
			fn(s, l.items[i].key + strlen(prefix), obj, ud);
		json_decref(obj);
	}
	sc_kv_list_free(&l);
	return 0;
}
