/* Serving pods: the version's template and the pod's port.
 *
 * Two replicas of a model may land on one node (two versions during a
 * canary, or more replicas than nodes), so the server gives each serving
 * pod its own port at binding (status.pods[].port: the template's port, or
 * the next free one on that node). The process learns it from
 * STARCLOUD_PORT or from "$(STARCLOUD_PORT)" in its arguments
 * (`--listen 0.0.0.0:$(STARCLOUD_PORT)`), and probes written against the
 * template's port follow it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pod_serving.h"
#include "base/alloc.h"

#define DEFAULT_PORT 9000
#define PORT_VAR "$(STARCLOUD_PORT)"

static const char *str_of(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));
	return v ? v : "";
}

/* "<job>-<task>-<index>" -> the recorded template of task, or NULL. */
static json_t *recorded(json_t *obj, const char *pod)
{
	const char *job = str_of(json_object_get(obj, "metadata"), "name");
	size_t jl = strlen(job);
	const char *dash = strrchr(pod, '-');
	char task[128];
	if (strncmp(pod, job, jl) != 0 || pod[jl] != '-' || !dash || dash <= pod + jl + 1 ||
	    (size_t)(dash - pod - (long)jl - 1) >= sizeof(task))
		return NULL;
	snprintf(task, sizeof(task), "%.*s", (int)(dash - pod - (long)jl - 1), pod + jl + 1);
	json_t *tpls = json_object_get(json_object_get(obj, "status"), "templates");
	return json_object_get(json_object_get(tpls, task), "template");
}

/* Replaces PORT_VAR in every string of arr. */
static void expand(json_t *arr, const char *port)
{
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
	{
		const char *s = json_string_value(v), *at = s ? strstr(s, PORT_VAR) : NULL;
		if (!at)
			continue;
		char buf[4096];
		snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - s), s, port,
		         at + strlen(PORT_VAR));
		json_array_set_new(arr, i, json_string(buf));
	}
}

static void move_probes(json_t *probes, json_int_t from, json_int_t to)
{
	static const char *const kinds[] = {"startup", "liveness", "readiness"};
	static const char *const ways[] = {"http", "tcp"};
	for (int k = 0; k < 3; k++)
		for (int w = 0; w < 2; w++) {
			json_t *pr = json_object_get(json_object_get(probes, kinds[k]), ways[w]);
			json_t *p = json_object_get(pr, "port");
			if (json_is_integer(p) && json_integer_value(p) == from)
				json_object_set_new(pr, "port", json_integer(to));
		}
}

json_t *sc__pod_serving_task(const char *kind, json_t *obj, json_t *entry, json_t *task)
{
	if (strcmp(kind, "Deployment") != 0)
		return json_incref(task);
	json_t *tpl = recorded(obj, str_of(entry, "name"));
	if (!tpl)
		tpl = task;
	if (!tpl)
		return NULL;
	json_t *t = sc_xcheck(json_deep_copy(tpl)), *port = json_object_get(entry, "port");
	if (!json_is_integer(port))
		return t;
	json_t *want = json_object_get(t, "port");
	json_int_t from = json_is_integer(want) ? json_integer_value(want) : DEFAULT_PORT;
	char p[16];
	snprintf(p, sizeof(p), "%lld", (long long)json_integer_value(port));
	json_t *env = json_object_get(t, "env");
	if (!json_is_object(env))
		json_object_set_new(t, "env", env = json_object());
	json_object_set_new(env, "STARCLOUD_PORT", json_string(p));
	expand(json_object_get(t, "command"), p);
	expand(json_object_get(t, "args"), p);
	move_probes(json_object_get(t, "probes"), from, json_integer_value(port));
	return t;
}
