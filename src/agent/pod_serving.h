/* What a serving pod (a Deployment's) runs: its version's template and the
 * port the server gave it (docs/SERVING.md). */
#ifndef SC_AGENT_POD_SERVING_H
#define SC_AGENT_POD_SERVING_H

#include <jansson.h>

/* The task pod `entry` (a status.pods entry of obj) runs, given task, what
 * the spec says (borrowed; may be NULL). For a Deployment: the template
 * recorded for the pod's task in status.templates (so a replacement pod of
 * the stable version runs the stable template during a rollout), with
 * STARCLOUD_PORT in env, "$(STARCLOUD_PORT)" replaced in command and args,
 * and probes on the template's port moved to the pod's port. Returns a new
 * reference, or NULL when there is no task. */
json_t *sc__pod_serving_task(const char *kind, json_t *obj, json_t *entry, json_t *task);

#endif
