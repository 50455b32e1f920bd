/* Reading one object for a request (server.h, "load.c"). */
#include <stdio.h>

#include <jansson.h>

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
