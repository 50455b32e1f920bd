/* Validation of API objects with the manifest decoder (src/manifest/manifest*.c).
 *
 * The API and offline manifests (`starcloud schedule -f`) accept exactly the
 * same objects because both go through sc_manifest_add_json(): the decoder
 * checks unknown fields, types, ranges, units and required fields and names
 * the dotted field path of the first problem. What the decoder cannot know
 * is checked here: the kind must match the URL, and the status fields the
 * server writes for people (phase, reason, conditions, ...) are not part of
 * the manifest format, so they are set aside before decoding (see
 * sc__decoder_view). References between objects (a job's queue) are not
 * checked on write: as in Kubernetes, a job may name a queue that is created
 * later, and until then it stays Pending with the reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/deploy.h"
#include "base/alloc.h"
#include "server/server.h"
#include "starcloud/error.h"
#include "starcloud/sha256.h"
#include "starcloud/manifest.h"

int sc__name_valid(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > SC_MAX_NAME)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && !((c == '-' || c == '.') && i > 0 && i + 1 < n))
			return 0;
	}
	return 1;
}

/* Status fields of jobs and deployments that the decoder reads back (the
 * scheduler's own input); everything else in status is for people. */
static const char *const job_status_input[] = {"pods", "staleSince", NULL};

static int is_input_field(const char *key)
{
	for (size_t i = 0; job_status_input[i]; i++)
		if (strcmp(job_status_input[i], key) == 0)
			return 1;
	return 0;
}

json_t *sc__decoder_view(const sc_kind_t *k, json_t *obj)
{
	json_t *status = json_object_get(obj, "status");
	if (!k->queue_scoped || !json_is_object(status))
		return json_incref(obj);
	/* A Deployment's status is the server's (pods of versioned tasks, see
	 * deploy_view.c): only the spec is checked against the manifest format. */
	int deployment = strcmp(k->kind, "Deployment") == 0;
	json_t *view = sc_xcheck(json_copy(obj)); /* shallow: only status is replaced or dropped */
	json_t *st = sc_xcheck(json_object());
	const char *key;
	json_t *v;
	json_object_foreach(status, key, v)
	{
		/* No pods and an empty list of pods are the same to the
		 * decoder; leaving the empty one out makes the view of a job the
		 * loop has only given a pending reason equal to the view of the
		 * job as applied, so it is not decoded again (sched_world.c). */
		if (deployment || !is_input_field(key) ||
		    (strcmp(key, "pods") == 0 && json_is_array(v) && json_array_size(v) == 0))
			continue;
		json_object_set(st, key, v);
	}
	if (json_object_size(st) > 0) {
		json_object_set_new(view, "status", st);
	} else {
		json_object_del(view, "status");
		json_decref(st);
	}
	return view;
}

/* The kind and apiVersion must be those of the URL: the decoder accepts any
 * kind, the API stores each under its own collection. */
static int check_kind(const sc_kind_t *k, json_t *obj, char *field, size_t fieldsz, char *msg,
                      size_t msgsz)
{
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	if (kind && strcmp(kind, k->kind) != 0) {
		snprintf(field, fieldsz, "kind");
		snprintf(msg, msgsz, "kind \"%.64s\" does not match this path (expected %s)", kind,
		         k->kind);
		return SC_EINVAL;
	}
	if (!kind) {
		snprintf(field, fieldsz, "kind");
		snprintf(msg, msgsz, "kind: required field is missing (expected %s)", k->kind);
		return SC_EINVAL;
	}
	return 0;
}

void sc__view_digest(json_t *view, uint64_t out[2])
{
	uint8_t d[SC_SHA256_LEN];
	sc_sha256_t c;
	char *text = sc_xcheck(json_dumps(view, JSON_COMPACT | JSON_SORT_KEYS));
	sc_sha256_init(&c);
	sc_sha256_update(&c, text, strlen(text));
	sc_sha256_final(&c, d);
	free(text);
	memcpy(out, d, 2 * sizeof(uint64_t));
}

int sc__validate_decode(const sc_kind_t *k, json_t *obj, char *field, size_t fieldsz, char *msg,
                        size_t msgsz, sc_manifest_obj_t **one, uint64_t vh[2])
{
	if (one)
		*one = NULL;
	if (k->readonly) {
		snprintf(field, fieldsz, "kind");
		snprintf(msg, msgsz, "objects of kind %s cannot be written", k->kind);
		return SC_EINVAL;
	}
	if (!json_is_object(obj)) {
		snprintf(field, fieldsz, "%s", "");
		snprintf(msg, msgsz, "expected a JSON object with apiVersion and kind");
		return SC_EINVAL;
	}
	int rc = check_kind(k, obj, field, fieldsz, msg, msgsz);
	if (rc < 0)
		return rc;
	/* Names become store keys and URL segments, so the API keeps to
	 * Kubernetes' DNS-subdomain rule, stricter than the file format. */
	const char *name =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
	if (name && !sc__name_valid(name)) {
		snprintf(field, fieldsz, "metadata.name");
		snprintf(msg, msgsz,
		         "%s: metadata.name: \"%.64s\" is not a valid name (lower-case letters, "
		         "digits, '-' and '.', at most %d characters)",
		         k->kind, name, SC_MAX_NAME);
		return SC_EINVAL;
	}
	/* One cluster-wide configuration of each: the decoder takes a single
	 * SchedulerConfig and Topology per snapshot, so the API keeps one
	 * object of each kind, named "default" as in interface.md. */
	int single = strcmp(k->kind, "SchedulerConfig") == 0 || strcmp(k->kind, "Topology") == 0;
	if (single && (!name || strcmp(name, "default") != 0)) {
		snprintf(field, fieldsz, "metadata.name");
		snprintf(msg, msgsz,
		         "%s: metadata.name: \"%.64s\": the cluster has one %s, named "
		         "\"default\"",
		         k->kind, name ? name : "", k->kind);
		return SC_EINVAL;
	}
	json_t *ver = json_object_get(json_object_get(obj, "spec"), "version");
	if (strcmp(k->kind, "Deployment") == 0 && json_is_string(ver) &&
	    json_string_length(ver) > SC_DEPLOY_VERSION_MAX) {
		snprintf(field, fieldsz, "spec.version");
		snprintf(msg, msgsz, "Deployment %.64s: spec.version: at most %d characters",
		         name ? name : "", SC_DEPLOY_VERSION_MAX);
		return SC_EINVAL;
	}
	sc_manifest_obj_t *dec = NULL;
	sc_manifest_error_t err;
	json_t *view = sc__decoder_view(k, obj);
	rc = sc_manifest_decode(view, &dec, &err);
	/* The scheduling loop decodes a Deployment from another view (its
	 * live tasks, deploy_view.c), so only other kinds are handed on. */
	if (rc >= 0 && one && strcmp(k->kind, "Deployment") != 0) {
		*one = dec;
		if (vh)
			sc__view_digest(view, vh);
		json_decref(view);
		return 0;
	}
	json_decref(view);
	sc_manifest_obj_free(dec);
	if (rc >= 0)
		return 0;
	if (rc == SC_ENOMEM)
		sc_oom();
	/* "Job x: spec.tasks[0].resources.gpu: expected ..." names the object and
	 * the field; the field also goes into its own member of the answer. */
	err.file[0] = '\0';
	snprintf(field, fieldsz, "%s", err.path);
	sc_manifest_error_format(&err, msg, msgsz);
	return SC_EINVAL;
}
