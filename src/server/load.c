/* Reading objects: one for a request, or every object of a kind for the
 * controllers (server.h, "load.c"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "server/cache.h"
#include "server/server.h"
#include "starcloud/error.h"

json_t *sc__object_copy(sc_server_t *s, const sc_kind_t *k, const char *name, int64_t *mod_rev)
{
	sc_cobj_t *o = (sc_cobj_t *)sc__cache_get(s->cache, k, name);
	json_t *cur = o ? sc__cache_parse(o) : NULL;
	*mod_rev = cur ? o->mod_rev : 0;
	/* A copy: the caller changes it, and a tree the cache keeps is shared
	 * with every reader (a job's is parsed for this call alone). */
	if (cur && o->obj == cur) {
		json_t *copy = json_deep_copy(cur);
		json_decref(cur);
		return copy;
	}
	return cur;
}

json_t *sc__api_load(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who,
                     const sc_kind_t *k, const char *name, int64_t *mod_rev)
{
	json_t *obj = sc__object_copy(s, k, name, mod_rev);
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
		/* A job's tree is parsed for the call only (sc__cache_parse). */
		json_t *obj = sc__cache_parse(items[i]);
		if (obj)
			fn(s, items[i]->name, obj, ud);
		json_decref(obj);
	}
	return 0;
}

typedef struct save {
	sc_server_t *s;
	sc_store_done_fn fn;
	void *ud;
} save_t;

static void saved(const sc_store_res_t *res, void *ud)
{
	save_t *w = ud;
	if (res->rc == 0)
		sc__sched_kick(w->s);
	if (w->fn)
		w->fn(res, w->ud);
	free(w);
}

void sc__object_save(sc_server_t *s, const sc_kind_t *k, json_t *obj, int64_t expect,
                     sc_store_done_fn fn, void *ud)
{
	char key[SC_MAX_NAME + 64];
	const char *name =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
	sc__object_key(k, name ? name : "", key, sizeof(key));
	char *text = sc_xcheck(json_dumps(obj, JSON_COMPACT));
	save_t *w = sc_xcalloc(1, sizeof(*w));
	w->s = s;
	w->fn = fn;
	w->ud = ud;
	sc_store_op_t op = {SC_STORE_PUT, key, text, expect};
	sc_store_txn_async(s->store, &op, 1, saved, w);
	free(text);
}
