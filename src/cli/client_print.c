/* How the CLI client prints what the server returns (see client_print.h).
 *
 * Each resource has a row function that fills the cells of its columns
 * (the wide ones after the others); lists go through one table, sized to
 * content when printed. The columns follow kubectl where it has the same
 * thing (NAME, STATUS, READY, AGE; events' LAST SEEN, TYPE, REASON,
 * OBJECT, MESSAGE) and squeue's plainness where it does not. */
#include "cli/client_print.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "cli/objinfo.h"
#include "cli/table.h"
#include "starcloud/error.h"

#define MAX_COLS 12
#define CELL 512

/* ---------------------------------------------------------------------
 * YAML
 * ------------------------------------------------------------------- */

static void yaml_scalar(json_t *v)
{
	char *s = json_dumps(v, JSON_ENCODE_ANY); /* strings quoted: always valid YAML */
	fputs(s ? s : "null", stdout);
	free(s);
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

/* ---------------------------------------------------------------------
 * Formats
 * ------------------------------------------------------------------- */

int sc_cli_out_parse(const char *spec, sc_cli_out_t *o, char *err, size_t errsz)
{
	static const char *const plain[] = {"table", "wide", "json", "yaml", "name", NULL};
	memset(o, 0, sizeof(*o));
	if (!spec || !spec[0])
		spec = "table";
	for (size_t i = 0; plain[i]; i++)
		if (strcmp(spec, plain[i]) == 0) {
			snprintf(o->format, sizeof(o->format), "%s", spec);
			return 0;
		}
	if (strncmp(spec, "jsonpath=", 9) == 0) {
		char tmpl[SC_JSONPATH_MAX + 1];
		const char *t = spec + 9;
		size_t n = strlen(t);
		/* jsonpath='...' as typed inside double quotes in a script */
		if (n >= 2 && (t[0] == '\'' || t[0] == '"') && t[n - 1] == t[0])
			t++, n -= 2;
		snprintf(tmpl, sizeof(tmpl), "%.*s", (int)n, t);
		if (!(o->jsonpath = sc_jsonpath_parse(tmpl, err, errsz)))
			return SC_EINVAL;
		snprintf(o->format, sizeof(o->format), "jsonpath");
		return 0;
	}
	snprintf(err, errsz,
	         "--output: expected table, wide, json, yaml, name or jsonpath=TEMPLATE, got "
	         "\"%.60s\"",
	         spec);
	return SC_EINVAL;
}

void sc_cli_out_free(sc_cli_out_t *o)
{
	sc_jsonpath_free(o->jsonpath);
	o->jsonpath = NULL;
}

static const char *singular(const char *res)
{
	static const char *const map[][2] = {
	    {"nodes", "node"},
	    {"queues", "queue"},
	    {"priorityclasses", "priorityclass"},
	    {"jobs", "job"},
	    {"deployments", "deployment"},
	    {"nodepools", "nodepool"},
	    {"events", "event"},
	    {"schedulerconfigs", "schedulerconfig"},
	    {"topologies", "topology"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(res, map[i][0]) == 0)
			return map[i][1];
	return res;
}

static void print_names(const char *res, json_t *doc)
{
	json_t *items = json_object_get(doc, "items"), *o;
	size_t i;
	if (!items) {
		printf("%s/%s\n", singular(res), sc_obj_str(doc, "metadata", "name", NULL));
		return;
	}
	json_array_foreach(items, i, o)
	{
		printf("%s/%s\n", singular(res), sc_obj_str(o, "metadata", "name", NULL));
	}
}

int sc_cli_print_generic(const sc_cli_out_t *o, const char *res, json_t *doc)
{
	if (strcmp(o->format, "json") == 0) {
		char *s = json_dumps(doc, JSON_INDENT(2));
		printf("%s\n", s ? s : "null");
		free(s);
	} else if (strcmp(o->format, "yaml") == 0) {
		sc_cli_yaml_print(doc, 0, 0);
	} else if (strcmp(o->format, "name") == 0) {
		print_names(res, doc);
	} else if (strcmp(o->format, "jsonpath") == 0) {
		sc_buf_t b;
		sc_buf_init(&b, 256u << 20);
		if (sc_jsonpath_eval(o->jsonpath, doc, &b) < 0)
			fprintf(stderr, "starcloud: jsonpath: output over 256 MiB, cut\n");
		fwrite(b.data ? b.data : "", 1, b.len, stdout);
		sc_buf_free(&b);
	} else {
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------------
 * Rows
 * ------------------------------------------------------------------- */

typedef char cells_t[MAX_COLS][CELL];

typedef struct cols {
	const char *res;
	const char *const *head; /* NULL-terminated, the narrow columns */
	const char *const *wide; /* more columns for -o wide */
	void (*row)(json_t *o, int wide, int64_t now, cells_t c);
} cols_t;

static void age(json_t *o, const char *at, int64_t now, char *out)
{
	sc_fmt_age(out, CELL, sc_obj_age(o, at, now));
}

static void job_nodes(json_t *job, char *out)
{
	json_t *p;
	size_t i, n = 0;
	out[0] = '\0';
	json_array_foreach(json_object_get(json_object_get(job, "status"), "pods"), i, p)
	{
		const char *node = sc_obj_str(p, "node", NULL, NULL);
		if (!node[0] || strstr(out, node))
			continue;
		if (n + strlen(node) + 8 > CELL) {
			snprintf(out + n, CELL - n, ",...");
			break;
		}
		n += (size_t)snprintf(out + n, CELL - n, "%s%s", n ? "," : "", node);
	}
	if (!out[0])
		snprintf(out, CELL, "<none>");
}

static void row_job(json_t *o, int wide, int64_t now, cells_t c)
{
	json_t *spec = json_object_get(o, "spec");
	snprintf(c[0], CELL, "%s", sc_obj_str(o, "metadata", "name", NULL));
	snprintf(c[1], CELL, "%s", sc_obj_str(spec, "queue", NULL, NULL));
	snprintf(c[2], CELL, "%s", sc_job_status(o));
	snprintf(c[3], CELL, "%ld/%ld", sc_job_pods(o, NULL), sc_job_replicas(o));
	sc_fmt_num(c[4], CELL, sc_job_gpus(o, 0), 0);
	age(o, NULL, now, c[5]);
	if (!wide)
		return;
	const char *pc = sc_obj_str(spec, "priorityClass", NULL, NULL);
	json_t *min = json_object_get(spec, "minMember");
	snprintf(c[6], CELL, "%s", pc[0] ? pc : "normal");
	if (min)
		snprintf(c[7], CELL, "%lld", (long long)json_integer_value(min));
	else
		snprintf(c[7], CELL, "%ld", sc_job_replicas(o));
	job_nodes(o, c[8]);
	snprintf(c[9], CELL, "%s", sc_obj_str(o, "status", "reason", NULL));
	sc_obj_labels(o, c[10], CELL);
}

static long ready_pods(json_t *o)
{
	json_t *p;
	size_t i;
	long n = 0;
	json_array_foreach(json_object_get(json_object_get(o, "status"), "pods"), i, p)
	{
		n += strcmp(sc_obj_str(p, "phase", NULL, NULL), "Running") == 0 &&
		     !json_is_false(json_object_get(p, "ready"));
	}
	return n;
}

/* "Progressing v3 10%": the phase, the canary and its weight (status.rollout
 * as the deployment controller writes it: weights {version: percent}). */
static void rollout_text(json_t *o, char *out)
{
	json_t *ro = json_object_get(json_object_get(o, "status"), "rollout");
	const char *phase = sc_obj_str(ro, "phase", NULL, NULL);
	const char *canary = sc_obj_str(ro, "canary", NULL, NULL);
	json_t *w = json_object_get(json_object_get(ro, "weights"), canary);
	if (!phase[0])
		snprintf(out, CELL, "-");
	else if (canary[0] && json_is_number(w))
		snprintf(out, CELL, "%s v%s %g%%", phase, canary, json_number_value(w));
	else if (canary[0])
		snprintf(out, CELL, "%s v%s", phase, canary);
	else
		snprintf(out, CELL, "%s", phase);
}

static void row_deployment(json_t *o, int wide, int64_t now, cells_t c)
{
	json_t *spec = json_object_get(o, "spec"), *ver = json_object_get(spec, "version");
	snprintf(c[0], CELL, "%s", sc_obj_str(o, "metadata", "name", NULL));
	snprintf(c[1], CELL, "%s", sc_obj_str(spec, "queue", NULL, NULL));
	snprintf(c[2], CELL, "%s", sc_obj_str(spec, "model", NULL, NULL));
	if (json_is_string(ver))
		snprintf(c[3], CELL, "%s", json_string_value(ver));
	else if (json_is_integer(ver))
		snprintf(c[3], CELL, "%lld", (long long)json_integer_value(ver));
	else
		snprintf(c[3], CELL, "1");
	snprintf(c[4], CELL, "%ld/%ld", ready_pods(o), sc_job_replicas(o));
	snprintf(c[5], CELL, "%s", sc_job_status(o));
	rollout_text(o, c[6]);
	age(o, NULL, now, c[7]);
	if (!wide)
		return;
	sc_fmt_num(c[8], CELL, sc_job_gpus(o, 0), 0);
	job_nodes(o, c[9]);
	sc_obj_labels(o, c[10], CELL);
}

static void row_node(json_t *o, int wide, int64_t now, cells_t c)
{
	json_t *spec = json_object_get(o, "spec"), *g = json_object_get(spec, "gpus");
	json_t *mig = json_object_get(g, "mig");
	snprintf(c[0], CELL, "%s", sc_obj_str(o, "metadata", "name", NULL));
	sc_node_status(o, c[1], CELL);
	snprintf(c[2], CELL, "%lld", (long long)json_integer_value(json_object_get(g, "count")));
	snprintf(c[3], CELL, "%s",
	         json_is_string(json_object_get(g, "model"))
	             ? json_string_value(json_object_get(g, "model"))
	             : "-");
	snprintf(c[4], CELL, "%s",
	         json_is_string(mig)   ? json_string_value(mig)
	         : json_is_object(mig) ? "layout"
	         : json_is_true(mig)   ? "enabled"
	                               : "-");
	age(o, NULL, now, c[5]);
	if (!wide)
		return;
	sc_fmt_num(c[6], CELL, sc_qty_cpu(json_object_get(spec, "cpu"), 0), 1);
	sc_fmt_bytes(c[7], CELL, sc_qty_mem(json_object_get(spec, "memory"), 0));
	const char *addr = sc_obj_str(o, "status", "address", NULL);
	const char *ver = sc_obj_str(o, "status", "agent", "version");
	snprintf(c[8], CELL, "%s", addr[0] ? addr : "<none>");
	snprintf(c[9], CELL, "%s", ver[0] ? ver : "<none>");
	sc_obj_labels(o, c[10], CELL);
}

/* quota and limit of one resource of a queue spec, as written. */
static void queue_res(json_t *o, const char *res, const char *what, char *out, int kai)
{
	json_t *v = json_object_get(
	    json_object_get(json_object_get(json_object_get(o, "spec"), "resources"), res), what);
	if (!v) {
		/* interface.md's defaults: quota 0; limit -1 (v1), 0 = quota (KAI) */
		snprintf(out, CELL, "%s", strcmp(what, "limit") == 0 && !kai ? "-" : "0");
		return;
	}
	double d = strcmp(res, "gpu") == 0   ? json_number_value(v)
	           : strcmp(res, "cpu") == 0 ? sc_qty_cpu(v, kai)
	                                     : sc_qty_mem(v, kai);
	if (json_is_number(v) && json_number_value(v) < 0)
		d = -1;
	if (strcmp(res, "memory") == 0 && d >= 0)
		sc_fmt_bytes(out, CELL, d);
	else
		sc_fmt_num(out, CELL, d, 1);
}

static void row_queue(json_t *o, int wide, int64_t now, cells_t c)
{
	json_t *spec = json_object_get(o, "spec"), *pr = json_object_get(spec, "priority");
	json_t *w = json_object_get(json_object_get(json_object_get(spec, "resources"), "gpu"),
	                            "overQuotaWeight");
	int kai = strncmp(sc_obj_str(o, "apiVersion", NULL, NULL), "scheduling.run.ai/", 18) == 0;
	char a[CELL / 2], b[CELL / 2];
	snprintf(c[0], CELL, "%s", sc_obj_str(o, "metadata", "name", NULL));
	snprintf(c[1], CELL, "%lld", pr ? (long long)json_integer_value(pr) : 0LL);
	queue_res(o, "gpu", "quota", c[2], kai);
	queue_res(o, "gpu", "limit", c[3], kai);
	sc_fmt_num(c[4], CELL, w ? json_number_value(w) : 1, 0);
	age(o, NULL, now, c[5]);
	if (!wide)
		return;
	queue_res(o, "cpu", "quota", a, kai);
	queue_res(o, "cpu", "limit", b, kai);
	snprintf(c[6], CELL, "%s/%s", a, b);
	queue_res(o, "memory", "quota", a, kai);
	queue_res(o, "memory", "limit", b, kai);
	snprintf(c[7], CELL, "%s/%s", a, b);
	sc_obj_labels(o, c[8], CELL);
}

static void row_pclass(json_t *o, int wide, int64_t now, cells_t c)
{
	json_t *spec = json_object_get(o, "spec");
	snprintf(c[0], CELL, "%s", sc_obj_str(o, "metadata", "name", NULL));
	snprintf(c[1], CELL, "%lld", (long long)json_integer_value(json_object_get(spec, "value")));
	snprintf(c[2], CELL, "%s",
	         json_is_false(json_object_get(spec, "preemptible")) ? "false" : "true");
	age(o, NULL, now, c[3]);
}

static void row_event(json_t *o, int wide, int64_t now, cells_t c)
{
	const char *kind = sc_obj_str(o, "involvedObject", "kind", NULL);
	age(o, sc_obj_str(o, "lastTimestamp", NULL, NULL), now, c[0]);
	snprintf(c[1], CELL, "%s", sc_obj_str(o, "type", NULL, NULL));
	snprintf(c[2], CELL, "%s", sc_obj_str(o, "reason", NULL, NULL));
	snprintf(c[3], CELL, "%s%s%s", kind[0] ? singular(kind) : "", kind[0] ? "/" : "",
	         sc_obj_str(o, "involvedObject", "name", NULL));
	for (char *p = c[3]; *p && *p != '/'; p++) /* "Job" -> "job" */
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	snprintf(c[4], CELL, "%s", sc_obj_str(o, "message", NULL, NULL));
	if (wide)
		snprintf(c[5], CELL, "%s", sc_obj_str(o, "queue", NULL, NULL));
}

static void row_config(json_t *o, int wide, int64_t now, cells_t c)
{
	json_t *spec = json_object_get(o, "spec"), *v;
	json_t *list = json_object_get(spec, "actions");
	size_t i, n = 0;
	if (!list)
		list = json_object_get(spec, "levels");
	snprintf(c[0], CELL, "%s", sc_obj_str(o, "metadata", "name", NULL));
	c[1][0] = '\0';
	json_array_foreach(list, i, v)
	{
		if (n < CELL)
			n += (size_t)snprintf(c[1] + n, CELL - n, "%s%s", i ? "," : "",
			                      json_string_value(v) ? json_string_value(v) : "?");
	}
	if (!c[1][0])
		snprintf(c[1], CELL, "(defaults)");
	age(o, NULL, now, c[2]);
}

static void row_nodepool(json_t *o, int wide, int64_t now, cells_t c)
{
	json_t *st = json_object_get(o, "status");
	static const char *const keys[] = {"members", "requested", "removing", "gpus",
	                                   "waitingJobs"};
	snprintf(c[0], CELL, "%s", sc_obj_str(o, "metadata", "name", NULL));
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		snprintf(c[1 + i], CELL, "%lld",
		         (long long)json_integer_value(json_object_get(st, keys[i])));
	age(o, NULL, now, c[6]);
	if (wide)
		sc_obj_labels(o, c[7], CELL);
}

static void row_other(json_t *o, int wide, int64_t now, cells_t c)
{
	snprintf(c[0], CELL, "%s", sc_obj_str(o, "metadata", "name", NULL));
	age(o, NULL, now, c[1]);
}

static const char *const job_h[] = {"NAME", "QUEUE", "STATUS", "PODS", "GPUS", "AGE", NULL};
static const char *const job_w[] = {"PRIORITY", "MIN", "NODES", "REASON", "LABELS", NULL};
static const char *const dep_h[] = {"NAME",   "QUEUE",   "MODEL", "VERSION", "READY",
                                    "STATUS", "ROLLOUT", "AGE",   NULL};
static const char *const dep_w[] = {"GPUS", "NODES", "LABELS", NULL};
static const char *const node_h[] = {"NAME", "STATUS", "GPUS", "MODEL", "MIG", "AGE", NULL};
static const char *const node_w[] = {"CPU", "MEMORY", "ADDRESS", "AGENT", "LABELS", NULL};
static const char *const queue_h[] = {"NAME",      "PRIORITY", "GPU QUOTA", "GPU LIMIT",
                                      "OQ WEIGHT", "AGE",      NULL};
static const char *const queue_w[] = {"CPU QUOTA/LIMIT", "MEMORY QUOTA/LIMIT", "LABELS", NULL};
static const char *const pc_h[] = {"NAME", "VALUE", "PREEMPTIBLE", "AGE", NULL};
static const char *const ev_h[] = {"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE", NULL};
static const char *const ev_w[] = {"QUEUE", NULL};
static const char *const cfg_h[] = {"NAME", "ACTIONS", "AGE", NULL};
static const char *const topo_h[] = {"NAME", "LEVELS", "AGE", NULL};
static const char *const pool_h[] = {"NAME", "MEMBERS", "REQUESTED", "REMOVING",
                                     "GPUS", "WAITING", "AGE",       NULL};
static const char *const pool_w[] = {"LABELS", NULL};
static const char *const other_h[] = {"NAME", "AGE", NULL};
static const char *const none[] = {NULL};

static const cols_t tables[] = {
    {"jobs", job_h, job_w, row_job},
    {"deployments", dep_h, dep_w, row_deployment},
    {"nodes", node_h, node_w, row_node},
    {"queues", queue_h, queue_w, row_queue},
    {"priorityclasses", pc_h, none, row_pclass},
    {"nodepools", pool_h, pool_w, row_nodepool},
    {"events", ev_h, ev_w, row_event},
    {"schedulerconfigs", cfg_h, none, row_config},
    {"topologies", topo_h, none, row_config},
};

static const cols_t *cols_for(const char *res)
{
	static const cols_t other = {"", other_h, none, row_other};
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		if (strcmp(tables[i].res, res) == 0)
			return &tables[i];
	return &other;
}

/* ---------------------------------------------------------------------
 * The printer
 * ------------------------------------------------------------------- */

struct sc_cli_printer {
	const sc_cli_out_t *o;
	const char *res;
	const cols_t *cols;
	int wide;
	size_t ncols;
	sc_table_t *t; /* the table printed, kept for -w rows */
	int printed;   /* the header is out: -w rows follow its widths */
	int64_t now;
};

sc_cli_printer_t *sc_cli_printer_new(const sc_cli_out_t *o, const char *res)
{
	sc_cli_printer_t *p = sc_xcalloc(1, sizeof(*p));
	const char *h[MAX_COLS];
	p->o = o;
	p->res = res;
	p->cols = cols_for(res);
	p->wide = strcmp(o->format, "wide") == 0;
	for (size_t i = 0; p->cols->head[i]; i++)
		h[p->ncols++] = p->cols->head[i];
	for (size_t i = 0; p->wide && p->cols->wide[i]; i++)
		h[p->ncols++] = p->cols->wide[i];
	p->t = sc_table_new(p->ncols, h);
	p->now = (int64_t)time(NULL);
	return p;
}

void sc_cli_printer_free(sc_cli_printer_t *p)
{
	if (!p)
		return;
	sc_table_free(p->t);
	free(p);
}

static void add_row(sc_cli_printer_t *p, json_t *obj, size_t indent)
{
	static cells_t c;
	const char *v[MAX_COLS];
	memset(c, 0, sizeof(c));
	p->cols->row(obj, p->wide, p->now, c);
	for (size_t i = 0; i < p->ncols; i++)
		v[i] = c[i][0] ? c[i] : "<none>";
	sc_table_add(p->t, indent, v);
}

static int64_t rv_of(json_t *o)
{
	const char *rv = sc_obj_str(o, "metadata", "resourceVersion", NULL);
	int64_t v = 0;
	for (; *rv >= '0' && *rv <= '9' && v < INT64_MAX / 10; rv++)
		v = v * 10 + (*rv - '0');
	return v;
}

/* Events oldest first, as kubectl sorts them: by time, then by the order
 * the server wrote them (their revision). */
static int event_cmp(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	int c = strcmp(sc_obj_str(x, "lastTimestamp", NULL, NULL),
	               sc_obj_str(y, "lastTimestamp", NULL, NULL));
	if (c)
		return c;
	int64_t rx = rv_of(x), ry = rv_of(y);
	return rx < ry ? -1 : rx > ry;
}

static void add_queue_tree(sc_cli_printer_t *p, json_t *items)
{
	sc_tree_t tr;
	sc_tree_init(&tr, json_array_size(items));
	for (size_t i = 0; i < tr.n; i++) {
		json_t *q = json_array_get(items, i);
		tr.names[i] = sc_obj_str(q, "metadata", "name", NULL);
		tr.parents[i] = sc_obj_str(q, "spec", "parentQueue", NULL);
	}
	sc_tree_sort(&tr);
	for (size_t k = 0; k < tr.n; k++)
		add_row(p, json_array_get(items, tr.order[k]), tr.depth[k]);
	sc_tree_free(&tr);
}

void sc_cli_printer_doc(sc_cli_printer_t *p, json_t *doc)
{
	json_t *items = json_object_get(doc, "items");
	if (sc_cli_print_generic(p->o, p->res, doc) == 0)
		return;
	if (!items) {
		add_row(p, doc, 0);
	} else if (strcmp(p->res, "queues") == 0) {
		add_queue_tree(p, items);
	} else {
		size_t n = json_array_size(items);
		json_t **v = sc_xcalloc(n + 1, sizeof(*v));
		for (size_t i = 0; i < n; i++)
			v[i] = json_array_get(items, i);
		if (strcmp(p->res, "events") == 0)
			qsort(v, n, sizeof(*v), event_cmp);
		for (size_t i = 0; i < n; i++)
			add_row(p, v[i], 0);
		free(v);
	}
	if (sc_table_rows(p->t) == 0) {
		fprintf(stderr, "No %s found.\n", p->res);
		return;
	}
	sc_table_print(p->t, stdout, p->o->no_headers);
	p->printed = 1;
}

/* kubectl prints the object's row whatever happened to it (type). */
void sc_cli_printer_event(sc_cli_printer_t *p, const char *type, json_t *obj)
{
	if (sc_cli_print_generic(p->o, p->res, obj) == 0) {
		fflush(stdout);
		return;
	}
	p->now = (int64_t)time(NULL);
	add_row(p, obj, 0);
	if (p->printed) {
		sc_table_print_row(p->t, stdout);
	} else { /* the list was empty: this row sizes the table */
		sc_table_print(p->t, stdout, p->o->no_headers);
		p->printed = 1;
	}
	fflush(stdout);
}
