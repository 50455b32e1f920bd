/* The agent's cgroup folder name (see cgname.h). */
#include "agent/cgname.h"
#include "base/log.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/podstore.h"

#define PREFIX "starcloud-"

/* FNV-1a, 32 bits, over s and its terminating NUL, from h. */
static uint32_t fnv1a(uint32_t h, const char *s)
{
	do
		h = (h ^ (unsigned char)*s) * 16777619u;
	while (*s++);
	return h;
}

void sc__cgname_init(sc_agent_t *a)
{
	char real[PATH_MAX], legacy[sizeof(a->cgroup_name)];
	const char *dir = realpath(a->o.data_dir, real) ? real : a->o.data_dir;
	uint32_t h = fnv1a(fnv1a(2166136261u, a->o.name), dir);
	int keep = (int)sizeof(a->cgroup_name) - 1 - (int)strlen(PREFIX "-00000000");
	snprintf(a->cgroup_name, sizeof(a->cgroup_name), PREFIX "%.*s-%08x", keep, a->o.name,
	         (unsigned)h);
	if (snprintf(legacy, sizeof(legacy), PREFIX "%s", a->o.name) < (int)sizeof(legacy) &&
	    sc__podstore_in_cgroup(a, legacy)) {
		sc_log_warn("pods of an earlier agent run in cgroup folders %s: kept until they "
		            "are gone (then %s)",
		            legacy, a->cgroup_name);
		memcpy(a->cgroup_name, legacy, sizeof(legacy));
	}
}
