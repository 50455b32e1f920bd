/* Run-time settings of a Job or Deployment (starcloud/manifest.h). */
#include <string.h>

#include <jansson.h>

#include "starcloud/manifest.h"

/* An integer field within [lo, hi], or dflt. */
static int int_in(json_t *spec, const char *key, int lo, int hi, int dflt)
{
	json_t *v = json_object_get(spec, key);
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return dflt;
	return (int)json_integer_value(v);
}

void sc_job_runtime(const char *kind, json_t *spec, sc_job_runtime_t *out)
{
	static const char *const policies[] = {"Always", "OnFailure", "Never"};
	const char *pol = json_string_value(json_object_get(spec, "restartPolicy"));
	const char *gang = json_string_value(json_object_get(spec, "gangPolicy"));
	out->restart_policy =
	    kind && strcmp(kind, "Deployment") == 0 ? SC_RESTART_ALWAYS : SC_RESTART_ONFAILURE;
	for (int i = 0; pol && i < 3; i++)
		if (strcmp(pol, policies[i]) == 0)
			out->restart_policy = i;
	out->gang_restart = gang && strcmp(gang, "RestartGang") == 0;
	out->backoff_limit =
	    int_in(spec, "backoffLimit", 0, SC_BACKOFF_LIMIT_MAX, SC_BACKOFF_LIMIT_DEFAULT);
	out->grace_seconds =
	    int_in(spec, "terminationGracePeriodSeconds", 0, SC_GRACE_SECONDS_MAX, -1);
}
