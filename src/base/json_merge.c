#include "starcloud/json_merge.h"

json_t *sc_json_merge_patch(json_t *target, json_t *patch)
{
	if (!json_is_object(patch))
		return json_deep_copy(patch);
	/* A non-object target is replaced by an empty object first (7386 §2). */
	json_t *out = json_is_object(target) ? json_deep_copy(target) : json_object();
	if (!out)
		return NULL;
	const char *key;
	json_t *val;
	json_object_foreach(patch, key, val)
	{
		if (json_is_null(val)) {
			json_object_del(out, key);
			continue;
		}
		json_t *merged = sc_json_merge_patch(json_object_get(out, key), val);
		if (!merged || json_object_set_new(out, key, merged) < 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}
