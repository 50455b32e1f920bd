/* The kinds the API serves and how their objects are keyed and read back
 * from the store (server.h, "kinds.c"). */
#include <stdio.h>
#include <string.h>

#include "server/server.h"

static const sc_kind_t kinds[] = {
    {"nodes", "Node", 0, 0},
    {"queues", "Queue", 0, 0},
    {"priorityclasses", "PriorityClass", 0, 0},
    {"jobs", "Job", 1, 0},
    {"deployments", "Deployment", 1, 0},
    {"nodepools", "NodePool", 0, 0},
    {"events", "Event", 0, 1},
    /* Cluster-wide settings (one "default" each; admins write them). */
    {"schedulerconfigs", "SchedulerConfig", 0, 0},
    {"topologies", "Topology", 0, 0},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

const sc_kind_t *sc__kind_by_plural(const char *plural, size_t len)
{
	for (size_t i = 0; i < NKINDS; i++)
		if (strlen(kinds[i].plural) == len && strncmp(kinds[i].plural, plural, len) == 0)
			return &kinds[i];
	return NULL;
}

const sc_kind_t *sc__kind_by_name(const char *kind)
{
	for (size_t i = 0; i < NKINDS; i++)
		if (strcmp(kinds[i].kind, kind) == 0)
			return &kinds[i];
	return NULL;
}

/* ---------------------------------------------------------------------
 * Objects in the store
 * ------------------------------------------------------------------- */

void sc__object_key(const sc_kind_t *k, const char *name, char *out, size_t outsz)
{
	snprintf(out, outsz, SC_KEY_PREFIX "%s/%s", k->plural, name);
}

/* Sets metadata.resourceVersion to the store's revision, as text (no-op
 * for NULL or an object without metadata). */
void sc__object_set_rv(json_t *obj, int64_t mod_rev)
{
	json_t *md = json_object_get(obj, "metadata");
	if (json_is_object(md)) {
		char rv[32];
		snprintf(rv, sizeof(rv), "%lld", (long long)mod_rev);
		json_object_set_new(md, "resourceVersion", json_string(rv));
	}
}

const char *sc__str_of(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));
	return v ? v : "";
}

/* Role names, here at the bottom so that auth.c and audit.c (which auth.c
 * calls) both use them without an import circle. */
const char *sc__role_name(int role)
{
	static const char *const names[] = {"none", "admin", "tenant", "viewer", "agent"};
	return role > 0 && role <= SC_ROLE_AGENT ? names[role] : "none";
}
