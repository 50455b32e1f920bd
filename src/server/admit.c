/* Admission checks that need more than the object itself (validate.c
 * checks the object alone): done on every create, replace and patch of a
 * job or deployment, after validation and before the write.
 *
 *   - pod names: a job's pods are "<job>-<task>-<index>" and a deployment's
 *     "<name>-<role>-<version slug>-<index>"; a name that would make one
 *     longer than 253 characters (the DNS-name limit every pod name, log
 *     folder and cgroup keeps to) is refused here, instead of a pod that
 *     silently never starts while the job says Running;
 *   - runAsUser: a job may pick the uid its pods run as only when its
 *     queue says spec.podSecurity.allowRunAsUser, and uid 0 (root) only
 *     when it also says allowRoot. Queues are written by admins only, so a
 *     tenant cannot grant itself either (docs/SECURITY.md). */
#include <stdio.h>
#include <string.h>

#include "server/cache.h"
#include "server/deploy.h"
#include "server/server.h"
#include "starcloud/error.h"

/* Deployment task names are at most SC_DEPLOY_TASK_MAX; indices below
 * 100000 (the replica limit) take at most 5 digits. */
#define INDEX_DIGITS 5

static int digits(long long n)
{
	int d = 1;
	while (n >= 10)
		n /= 10, d++;
	return d;
}

static int check_pod_names(sc_http_req_t *r, const sc_kind_t *k, json_t *obj)
{
	const char *name =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
	json_t *spec = json_object_get(obj, "spec"), *t;
	size_t i, nlen = name ? strlen(name) : 0, longest = 0;
	if (strcmp(k->kind, "Deployment") == 0) {
		longest = nlen + 1 + SC_DEPLOY_TASK_MAX + 1 + INDEX_DIGITS;
	} else {
		json_array_foreach(json_object_get(spec, "tasks"), i, t)
		{
			const char *tn = json_string_value(json_object_get(t, "name"));
			json_t *rep = json_object_get(t, "replicas");
			long long n = json_is_integer(rep) ? json_integer_value(rep) : 1;
			size_t len =
			    nlen + 1 + strlen(tn ? tn : "main") + 1 + digits(n > 0 ? n - 1 : 0);
			if (len > longest)
				longest = len;
		}
	}
	if (longest <= SC_MAX_NAME)
		return 0;
	sc__api_error(r, 400, "Invalid", "metadata.name",
	              "%s %.64s...: metadata.name: its pod names would be %zu characters, more "
	              "than %d: use a shorter name (or task name)",
	              k->kind, name ? name : "", longest, SC_MAX_NAME);
	return SC_EINVAL;
}

/* The queue's spec.podSecurity, or NULL (no queue, or none set); a new
 * reference. From the cache, as every reader (a store read would wait
 * for etcd on the loop thread). */
static json_t *queue_security(sc_server_t *s, const char *queue)
{
	if (!queue)
		return NULL;
	int64_t rev;
	json_t *q = sc__object_copy(s, sc__kind_by_name("Queue"), queue, &rev);
	json_t *ps = json_incref(json_object_get(json_object_get(q, "spec"), "podSecurity"));
	json_decref(q);
	return ps;
}

static int check_run_as(sc_server_t *s, sc_http_req_t *r, const sc_kind_t *k, json_t *obj)
{
	json_t *spec = json_object_get(obj, "spec");
	json_t *uid = json_object_get(spec, "runAsUser");
	const char *queue = json_string_value(json_object_get(spec, "queue"));
	if (!uid)
		return 0;
	json_t *ps = queue_security(s, queue);
	int allow = json_is_true(json_object_get(ps, "allowRunAsUser"));
	int root = json_is_true(json_object_get(ps, "allowRoot"));
	json_decref(ps);
	if (!allow) {
		sc__api_error(
		    r, 400, "Invalid", "spec.runAsUser",
		    "%s: spec.runAsUser: queue \"%s\" does not allow jobs to choose their "
		    "user (an admin sets spec.podSecurity.allowRunAsUser on the queue)",
		    k->kind, queue ? queue : "");
		return SC_EINVAL;
	}
	if (json_integer_value(uid) == 0 && !root) {
		sc__api_error(
		    r, 400, "Invalid", "spec.runAsUser",
		    "%s: spec.runAsUser: 0 (root) is refused: queue \"%s\" does not allow "
		    "root (spec.podSecurity.allowRoot)",
		    k->kind, queue ? queue : "");
		return SC_EINVAL;
	}
	return 0;
}

int sc__admit(sc_server_t *s, sc_http_req_t *r, const sc_kind_t *k, json_t *obj)
{
	if (!k->queue_scoped)
		return 0;
	int rc = check_pod_names(r, k, obj);
	if (rc == 0)
		rc = check_run_as(s, r, k, obj);
	return rc;
}
