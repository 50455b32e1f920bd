/* `starcloud top queues|nodes` (see describe.h): what the scheduler has
 * allocated, from its own figures. Queues come from the last cycle's report
 * (GET /api/v1/scheduler/status), so shares, MIG slices, deployments and
 * parent queues count exactly as the scheduler counted them; nodes sum the
 * pods the scheduler placed (jobs and deployments), each pod's GPUs as a
 * fraction of a device where it holds a share or a MIG instance, and its
 * task's CPU and memory. Measured GPU utilisation is the agents' /metrics
 * (docs/DASHBOARD.md), not this. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/version.h"
#include "cli/describe.h"
#include "cli/objinfo.h"
#include "cli/table.h"

static json_t *fetch(sc_cli_get_fn get, void *ud, const char *path, long *st)
{
	json_t *doc = NULL;
	*st = get(ud, path, &doc);
	if (*st == 200)
		return doc;
	json_t *e = json_object_get(doc, "error");
	if (*st > 0)
		fprintf(stderr, "starcloud top: %s: %ld %s\n", path, *st,
		        sc_str_or(sc_obj_str(e, "message", NULL, NULL), "request failed"));
	json_decref(doc);
	return NULL;
}

static void pct(char *out, size_t outsz, double used, double cap)
{
	if (cap > 0)
		snprintf(out, outsz, "%.0f%%", 100.0 * used / cap);
	else
		snprintf(out, outsz, "-");
}

static int top_queues(sc_cli_get_fn get, void *ud)
{
	long st;
	json_t *doc = fetch(get, ud, "/api/v1/scheduler/status", &st);
	if (!doc)
		return st == 400 ? SC_EXIT_USAGE : SC_EXIT_FAIL;
	json_t *qs = json_object_get(doc, "queues");
	size_t n = json_array_size(qs);
	if (json_is_null(json_object_get(doc, "cycle"))) {
		fprintf(stderr,
		        "starcloud top: no scheduling cycle has run on this server yet (an HA "
		        "follower does not schedule: ask the leader)\n");
		json_decref(doc);
		return SC_EXIT_FAIL;
	}
	sc_tree_t tr;
	sc_tree_init(&tr, n);
	for (size_t i = 0; i < n; i++) {
		json_t *q = json_array_get(qs, i);
		tr.names[i] = sc_obj_str(q, "name", NULL, NULL);
		tr.parents[i] = sc_obj_str(q, "parent", NULL, NULL);
	}
	sc_tree_sort(&tr);
	sc_table_t *t = sc_table_new(
	    10, (const char *const[]){"QUEUE", "GPUS", "FAIR SHARE", "REQUESTED", "QUOTA", "LIMIT",
	                              "GPU/FAIR", "CPU", "MEMORY", "PENDING"});
	for (size_t k = 0; k < n; k++) {
		json_t *q = json_array_get(qs, tr.order[k]);
		json_t *al = json_object_get(q, "allocated"), *fs = json_object_get(q, "fairShare");
		char a[32], f[32], r[32], qu[32], l[32], share[32], c[32], m[32];
		sc_fmt_res(a, sizeof(a), al, "gpu", 0);
		sc_fmt_res(f, sizeof(f), fs, "gpu", 0);
		sc_fmt_res(r, sizeof(r), json_object_get(q, "requested"), "gpu", 0);
		sc_fmt_res(qu, sizeof(qu), json_object_get(q, "quota"), "gpu", 0);
		sc_fmt_res(l, sizeof(l), json_object_get(q, "limit"), "gpu", 0);
		sc_fmt_res(c, sizeof(c), al, "cpu", 0);
		sc_fmt_res(m, sizeof(m), al, "memory", 1);
		double fv = json_number_value(json_object_get(fs, "gpu"));
		double av = json_number_value(json_object_get(al, "gpu"));
		pct(share, sizeof(share), av, fv);
		sc_table_addf(t, tr.depth[k], "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%lld",
		              tr.names[tr.order[k]], a, f, r, qu, l, share, c, m,
		              (long long)json_integer_value(json_object_get(q, "pendingJobs")));
	}
	if (!n)
		fprintf(stderr, "No queues found.\n");
	else
		sc_table_print(t, stdout, 0);
	sc_table_free(t);
	sc_tree_free(&tr);
	json_decref(doc);
	return SC_EXIT_OK;
}

typedef struct node_use {
	double gpus;
	int64_t cpu, mem;
	long pods;
} node_use_t;

static long node_index(json_t *nodes, const char *name)
{
	json_t *n;
	size_t i;
	json_array_foreach(nodes, i, n)
	{
		if (strcmp(sc_obj_str(n, "metadata", "name", NULL), name) == 0)
			return (long)i;
	}
	return -1;
}

static int top_nodes(sc_cli_get_fn get, void *ud)
{
	long st;
	json_t *nd = fetch(get, ud, "/api/v1/nodes", &st);
	if (!nd)
		return st == 400 ? SC_EXIT_USAGE : SC_EXIT_FAIL;
	json_t *nodes = json_object_get(nd, "items");
	size_t nn = json_array_size(nodes);
	node_use_t *use = sc_xcalloc(nn + 1, sizeof(*use));
	static const char *const owners[] = {"/api/v1/jobs", "/api/v1/deployments"};
	for (size_t k = 0; k < 2; k++) {
		json_t *doc = fetch(get, ud, owners[k], &st), *o, *p;
		size_t i, j;
		json_array_foreach(json_object_get(doc, "items"), i, o)
		{
			json_array_foreach(json_object_get(json_object_get(o, "status"), "pods"), j,
			                   p)
			{
				long ni = node_index(nodes, sc_obj_str(p, "node", NULL, NULL));
				if (ni < 0 || !sc_pod_holds(p))
					continue;
				int64_t c, m;
				json_t *node = json_array_get(nodes, (size_t)ni);
				sc_task_cpu_mem(sc_pod_task(o, sc_obj_str(p, "name", NULL, NULL)),
				                &c, &m);
				use[ni].gpus += sc_pod_gpus(p, sc_node_gpu_mem(node));
				use[ni].cpu += c;
				use[ni].mem += m;
				use[ni].pods++;
			}
		}
		json_decref(doc);
	}
	sc_table_t *t =
	    sc_table_new(9, (const char *const[]){"NODE", "STATUS", "GPUS", "GPU%", "CPU", "CPU%",
	                                          "MEMORY", "MEMORY%", "PODS"});
	for (size_t i = 0; i < nn; i++) {
		json_t *n = json_array_get(nodes, i), *spec = json_object_get(n, "spec");
		double gc = (double)json_integer_value(
		    json_object_get(json_object_get(spec, "gpus"), "count"));
		double cc = sc_qty_cpu(json_object_get(spec, "cpu"), 0);
		double mc = sc_qty_mem(json_object_get(spec, "memory"), 0);
		char s[64], g[64], gp[16], c[64], cp[16], m[64], mp[16], a[32], b[32];
		sc_node_status(n, s, sizeof(s));
		sc_fmt_num(a, sizeof(a), use[i].gpus, 0);
		sc_fmt_num(b, sizeof(b), gc, 0);
		snprintf(g, sizeof(g), "%s/%s", a, b);
		pct(gp, sizeof(gp), use[i].gpus, gc);
		sc_fmt_num(a, sizeof(a), (double)use[i].cpu / 1000.0, 0);
		sc_fmt_num(b, sizeof(b), cc, 1);
		snprintf(c, sizeof(c), "%s/%s", a, b);
		pct(cp, sizeof(cp), (double)use[i].cpu / 1000.0, cc);
		sc_fmt_bytes(a, sizeof(a), (double)use[i].mem);
		sc_fmt_bytes(b, sizeof(b), mc);
		snprintf(m, sizeof(m), "%s/%s", a, b);
		pct(mp, sizeof(mp), (double)use[i].mem, mc);
		sc_table_addf(t, 0, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%ld",
		              sc_obj_str(n, "metadata", "name", NULL), s, g, gp, c, cp, m, mp,
		              use[i].pods);
	}
	if (!nn)
		fprintf(stderr, "No nodes found.\n");
	else
		sc_table_print(t, stdout, 0);
	sc_table_free(t);
	free(use);
	json_decref(nd);
	return SC_EXIT_OK;
}

int sc_cli_top_run(const char *what, sc_cli_get_fn get, void *ud)
{
	if (strcmp(what, "queues") == 0 || strcmp(what, "queue") == 0)
		return top_queues(get, ud);
	if (strcmp(what, "nodes") == 0 || strcmp(what, "node") == 0)
		return top_nodes(get, ud);
	fprintf(stderr, "starcloud top: expected queues or nodes, got \"%s\"\n", what);
	return SC_EXIT_USAGE;
}
