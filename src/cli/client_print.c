/* How the CLI client prints what the server returns: YAML, tables of
 * each resource (`get`, `-o wide`), and the JSON/YAML/table choice. */
#include "cli/client_print.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------
 * Output
 * ------------------------------------------------------------------- */

static void yaml_scalar(json_t *v)
{
	if (json_is_string(v)) {
		char *s = json_dumps(v, JSON_ENCODE_ANY); /* quoted: always valid YAML */
		fputs(s, stdout);
		free(s);
	} else {
		char *s = json_dumps(v, JSON_ENCODE_ANY);
		fputs(s ? s : "null", stdout);
		free(s);
	}
}

/* A small JSON -> YAML printer (block style, strings double-quoted). */
void sc_cli_yaml_print(json_t *v, int indent, int in_list)
{
	const char *key;
	json_t *val;
	size_t i;
	int first = 1;
	if (json_is_object(v) && json_object_size(v)) {
		json_object_foreach(v, key, val)
		{
			if (!(in_list && first))
				printf("%*s", indent, "");
			first = 0;
			printf("%s:", key);
			if ((json_is_object(val) && json_object_size(val)) ||
			    (json_is_array(val) && json_array_size(val))) {
				printf("\n");
				sc_cli_yaml_print(val, indent + 2, 0);
			} else {
				printf(" ");
				json_is_object(val)  ? printf("{}")
				: json_is_array(val) ? printf("[]")
				                     : (yaml_scalar(val), 0);
				printf("\n");
			}
		}
	} else if (json_is_array(v) && json_array_size(v)) {
		json_array_foreach(v, i, val)
		{
			printf("%*s- ", indent, "");
			if (json_is_object(val) && json_object_size(val))
				sc_cli_yaml_print(val, indent + 2, 1);
			else {
				yaml_scalar(val);
				printf("\n");
			}
		}
	} else {
		printf("%*s", indent, "");
		yaml_scalar(v);
		printf("\n");
	}
}

const char *sc_cli_str_at(json_t *obj, const char *a, const char *b)
{
	json_t *v = json_object_get(obj, a);
	if (b)
		v = json_object_get(v, b);
	return json_is_string(v) ? json_string_value(v) : "";
}

static void age(json_t *obj, char *out, size_t outsz)
{
	struct tm tm = {0};
	const char *ts = sc_cli_str_at(obj, "metadata", "creationTimestamp");
	if (!strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm)) {
		snprintf(out, outsz, "-");
		return;
	}
	long d = (long)(time(NULL) - timegm(&tm));
	if (d < 120)
		snprintf(out, outsz, "%lds", d);
	else if (d < 7200)
		snprintf(out, outsz, "%ldm", d / 60);
	else if (d < 172800)
		snprintf(out, outsz, "%ldh", d / 3600);
	else
		snprintf(out, outsz, "%ldd", d / 86400);
}

static int running_pods(json_t *job, int *gpus)
{
	json_t *pods = json_object_get(json_object_get(job, "status"), "pods"), *p;
	size_t i;
	int n = 0;
	json_array_foreach(pods, i, p)
	{
		if (strcmp(sc_cli_str_at(p, "phase", NULL), "Running") == 0) {
			n++;
			if (gpus)
				*gpus += (int)json_array_size(json_object_get(p, "gpus"));
		}
	}
	return n;
}

/* Pods the job asks for: a task without `replicas` has one (MANIFESTS.md). */
static int total_replicas(json_t *job)
{
	json_t *tasks = json_object_get(json_object_get(job, "spec"), "tasks"), *t;
	size_t i;
	int n = 0;
	json_array_foreach(tasks, i, t)
	{
		json_t *r = json_object_get(t, "replicas");
		n += r ? (int)json_integer_value(r) : 1;
	}
	return n;
}

static void print_row(const char *res, json_t *o, int wide)
{
	char ag[32], buf[64];
	json_t *spec = json_object_get(o, "spec");
	age(o, ag, sizeof(ag));
	printf("%-28s ", sc_cli_str_at(o, "metadata", "name"));
	if (strcmp(res, "jobs") == 0) {
		snprintf(buf, sizeof(buf), "%d/%d", running_pods(o, NULL), total_replicas(o));
		const char *reason = sc_cli_str_at(o, "status", "reason");
		printf("%-16s %-8s %-6s %s", sc_cli_str_at(spec, "queue", NULL), buf, ag,
		       wide ? reason : "");
	} else if (strcmp(res, "nodes") == 0) {
		json_t *g = json_object_get(spec, "gpus");
		printf("%-5lld %-14s %-8s %s",
		       (long long)json_integer_value(json_object_get(g, "count")),
		       sc_cli_str_at(g, "model", NULL), ag, "");
	} else if (strcmp(res, "queues") == 0) {
		json_t *gq = json_object_get(
		    json_object_get(json_object_get(spec, "resources"), "gpu"), "quota");
		printf("%-16s %-9g %-6s", sc_cli_str_at(spec, "parentQueue", NULL),
		       json_number_value(gq), ag);
	} else if (strcmp(res, "priorityclasses") == 0) {
		printf("%-8lld %-6s", (long long)json_integer_value(json_object_get(spec, "value")),
		       ag);
	} else if (strcmp(res, "deployments") == 0) {
		printf("%-16s %-16s %-8lld %-6s", sc_cli_str_at(spec, "queue", NULL),
		       sc_cli_str_at(spec, "model", NULL),
		       (long long)json_integer_value(json_object_get(spec, "replicas")), ag);
	} else if (strcmp(res, "nodepools") == 0) {
		json_t *st = json_object_get(o, "status");
		printf("%-8lld %-9lld %-9lld %-6lld %-7lld %-6s",
		       (long long)json_integer_value(json_object_get(st, "members")),
		       (long long)json_integer_value(json_object_get(st, "requested")),
		       (long long)json_integer_value(json_object_get(st, "removing")),
		       (long long)json_integer_value(json_object_get(st, "gpus")),
		       (long long)json_integer_value(json_object_get(st, "waitingJobs")), ag);
	} else if (strcmp(res, "events") == 0) {
		printf("%-16s %-24s %s", sc_cli_str_at(o, "reason", NULL),
		       sc_cli_str_at(o, "involvedObject", "name"),
		       sc_cli_str_at(o, "message", NULL));
	}
	if (wide) {
		json_t *labels = json_object_get(json_object_get(o, "metadata"), "labels");
		char *l = labels ? json_dumps(labels, JSON_COMPACT) : NULL;
		printf(" %s", l ? l : "");
		free(l);
	}
	printf("\n");
}

static void print_header(const char *res, int wide)
{
	printf("%-28s ", "NAME");
	if (strcmp(res, "jobs") == 0)
		printf("%-16s %-8s %-6s %s", "QUEUE", "RUNNING", "AGE", wide ? "REASON" : "");
	else if (strcmp(res, "nodes") == 0)
		printf("%-5s %-14s %-8s", "GPUS", "MODEL", "AGE");
	else if (strcmp(res, "queues") == 0)
		printf("%-16s %-9s %-6s", "PARENT", "GPU-QUOTA", "AGE");
	else if (strcmp(res, "priorityclasses") == 0)
		printf("%-8s %-6s", "VALUE", "AGE");
	else if (strcmp(res, "deployments") == 0)
		printf("%-16s %-16s %-8s %-6s", "QUEUE", "MODEL", "REPLICAS", "AGE");
	else if (strcmp(res, "nodepools") == 0)
		printf("%-8s %-9s %-9s %-6s %-7s %-6s", "MEMBERS", "REQUESTED", "REMOVING", "GPUS",
		       "WAITING", "AGE");
	else if (strcmp(res, "events") == 0)
		printf("%-16s %-24s %s", "REASON", "OBJECT", "MESSAGE");
	printf("%s\n", wide ? " LABELS" : "");
}

void sc_cli_print_doc(const char *output, const char *res, json_t *doc)
{
	if (strcmp(output, "json") == 0) {
		char *s = json_dumps(doc, JSON_INDENT(2));
		printf("%s\n", s);
		free(s);
		return;
	}
	if (strcmp(output, "yaml") == 0) {
		sc_cli_yaml_print(doc, 0, 0);
		return;
	}
	int wide = strcmp(output, "wide") == 0;
	json_t *items = json_object_get(doc, "items"), *o;
	size_t i;
	print_header(res, wide);
	if (!items)
		print_row(res, doc, wide);
	json_array_foreach(items, i, o) print_row(res, o, wide);
}
