/* JSON merge patch (RFC 7386), used by the API's PATCH. */
#ifndef STARCLOUD_JSON_MERGE_H
#define STARCLOUD_JSON_MERGE_H

#include <jansson.h>

/* Returns a new reference: target (borrowed) with patch (borrowed) applied.
 * A null member in patch removes that member; objects merge recursively;
 * anything else replaces. Returns NULL when out of memory. */
json_t *sc_json_merge_patch(json_t *target, json_t *patch);

#endif
