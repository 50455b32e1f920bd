/* The scheduler's own figures and their short history (see schedstat.h).
 *
 * The last cycle's queue reports are copied whole (names owned). History
 * is a ring of SC_HISTORY_SAMPLES samples; each holds, per queue, three
 * floats and an index into a table of queue names that only grows (queues
 * are few and long-lived; past MAX_NAMES new names are not recorded), so a
 * sample of 100 queues costs 1.6 KiB and the full hour about 0.6 MiB. */
#include "server/schedstat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/parse.h"
#include "base/quantity.h"
#include "base/strmap.h"
#include "server/cache.h"

#define MAX_NAMES 4096
#define MAX_SAMPLE_QUEUES 2048

typedef struct qfig {
	uint32_t name; /* index into names */
	float allocated, requested;
	uint32_t pending;
} qfig_t;

typedef struct sample {
	int64_t time; /* 0: unused slot */
	double gpus, allocated;
	qfig_t *q;
	size_t nq;
} sample_t;

struct sc_schedstat {
	/* the last cycle */
	int64_t at;
	double seconds;
	sc_schedstat_cycle_t last;
	/* history */
	char *names[MAX_NAMES];
	size_t nnames;
	sc_strmap_t index; /* name -> names[] */
	sample_t ring[SC_HISTORY_SAMPLES];
	size_t head; /* next slot to write */
	sc_server_t *s;
};

sc_schedstat_t *sc__schedstat_new(void)
{
	sc_schedstat_t *st = sc_xcalloc(1, sizeof(*st));
	if (sc_strmap_init(&st->index, 64) < 0)
		sc_oom();
	return st;
}

void sc__schedstat_cycle_free(sc_schedstat_cycle_t *c)
{
	for (size_t i = 0; i < c->nqueues; i++) {
		free((char *)c->queues[i].name);
		free((char *)c->queues[i].parent);
	}
	free(c->queues);
	free(c->pending);
	memset(c, 0, sizeof(*c));
}

void sc__schedstat_free(sc_schedstat_t *st)
{
	if (!st)
		return;
	sc__schedstat_cycle_free(&st->last);
	for (size_t i = 0; i < SC_HISTORY_SAMPLES; i++)
		free(st->ring[i].q);
	for (size_t i = 0; i < st->nnames; i++)
		free(st->names[i]);
	sc_strmap_free(&st->index);
	free(st);
}

/* ---- recording -------------------------------------------------------- */

static long name_index(sc_schedstat_t *st, const char *name)
{
	long i = sc_strmap_get(&st->index, name);
	if (i >= 0 || st->nnames == MAX_NAMES)
		return i;
	st->names[st->nnames] = sc_xstrdup(name);
	if (sc_strmap_put(&st->index, st->names[st->nnames], (uint32_t)st->nnames) < 0)
		sc_oom();
	return (long)st->nnames++;
}

/* A sample every SC_HISTORY_INTERVAL_S of cycles: the first cycle (or idle
 * tick) in each interval writes one, the rest of the interval's are not
 * kept. */
static void record_sample(sc_schedstat_t *st, int64_t now)
{
	const sc_schedstat_cycle_t *c = &st->last;
	size_t last = (st->head + SC_HISTORY_SAMPLES - 1) % SC_HISTORY_SAMPLES;
	if (st->ring[last].time &&
	    now / SC_HISTORY_INTERVAL_S == st->ring[last].time / SC_HISTORY_INTERVAL_S)
		return;
	sample_t *s = &st->ring[st->head];
	st->head = (st->head + 1) % SC_HISTORY_SAMPLES;
	free(s->q);
	memset(s, 0, sizeof(*s));
	s->time = now;
	s->gpus = c->gpus;
	s->allocated = c->allocated;
	size_t n = c->nqueues < MAX_SAMPLE_QUEUES ? c->nqueues : MAX_SAMPLE_QUEUES;
	s->q = sc_xcalloc(n + 1, sizeof(*s->q));
	for (size_t i = 0; i < n; i++) {
		long k = name_index(st, c->queues[i].name);
		if (k < 0)
			continue;
		qfig_t *f = &s->q[s->nq++];
		f->name = (uint32_t)k;
		f->allocated = (float)c->queues[i].allocated[SC_RES_GPU];
		f->requested = (float)c->queues[i].requested[SC_RES_GPU];
		f->pending = (uint32_t)c->pending[i];
	}
}

void sc__schedstat_prepare(sc_schedstat_cycle_t *c, const sc_snapshot_t *snap,
                           const sc_decisions_t *d)
{
	sc__schedstat_cycle_free(c);
	c->nodes = snap->nnodes;
	for (size_t i = 0; i < snap->nnodes; i++)
		c->gpus += snap->nodes[i].gpu_count;
	c->queues = sc_xcalloc(d->nqueues + 1, sizeof(*c->queues));
	c->pending = sc_xcalloc(d->nqueues + 1, sizeof(*c->pending));
	c->nqueues = d->nqueues;
	sc_strmap_t qi = {0};
	if (sc_strmap_init(&qi, d->nqueues + 1) < 0)
		sc_oom();
	for (size_t i = 0; i < d->nqueues; i++) {
		c->queues[i] = d->queues[i];
		c->queues[i].name = sc_xstrdup(d->queues[i].name);
		c->queues[i].parent = d->queues[i].parent ? sc_xstrdup(d->queues[i].parent) : NULL;
		sc_strmap_put(&qi, c->queues[i].name, (uint32_t)i);
		if (!d->queues[i].parent) /* roots sum their children */
			c->allocated += d->queues[i].allocated[SC_RES_GPU];
	}
	/* Pending jobs per leaf queue, then added up the tree so a parent
	 * shows its children's. */
	for (size_t p = 0; p < d->npending; p++) {
		const char *q =
		    d->pending[p].job < snap->njobs ? snap->jobs[d->pending[p].job].queue : NULL;
		for (size_t guard = 0; q && guard < 32; guard++) {
			long i = sc_strmap_get(&qi, q);
			if (i < 0)
				break;
			c->pending[i]++;
			q = c->queues[i].parent;
		}
	}
	sc_strmap_free(&qi);
}

void sc__schedstat_record(sc_schedstat_t *st, int64_t now, double seconds, sc_schedstat_cycle_t *c)
{
	sc__schedstat_cycle_free(&st->last);
	st->last = *c;
	memset(c, 0, sizeof(*c));
	st->at = now;
	st->seconds = seconds;
	record_sample(st, now);
}

void sc__schedstat_idle(sc_schedstat_t *st, int64_t now)
{
	if (st->at)
		record_sample(st, now);
}

/* ---- answers ---------------------------------------------------------- */

static json_t *num(double v, double scale)
{
	return v < 0 ? json_null() : json_real(v / scale); /* < 0: unlimited */
}

static json_t *res_json(const double *v)
{
	return json_pack("{s:o,s:o,s:o}", "gpu", num(v[SC_RES_GPU], 1), "cpu",
	                 num(v[SC_RES_CPU], 1000.0), "memory", num(v[SC_RES_MEM], 1));
}

/* Admins and viewers see every queue; a tenant its own. */
static int visible(const sc_principal_t *who, const char *queue)
{
	return who->role != SC_ROLE_TENANT || sc__auth_has_queue(who, queue);
}

static void rfc3339(int64_t t, char *out, size_t outsz)
{
	sc__rfc3339(t, out, outsz);
}

static void handle_status(sc_schedstat_t *st, sc_http_req_t *r, const sc_principal_t *who)
{
	char ts[40];
	json_t *queues = json_array();
	for (size_t i = 0; i < st->last.nqueues; i++) {
		const sc_queue_report_t *q = &st->last.queues[i];
		if (!visible(who, q->name))
			continue;
		json_array_append_new(
		    queues, json_pack("{s:s,s:s?,s:b,s:I,s:o,s:o,s:o,s:o,s:o}", "name", q->name,
		                      "parent", q->parent, "leaf", q->leaf, "pendingJobs",
		                      (json_int_t)st->last.pending[i], "fairShare",
		                      res_json(q->fair_share), "allocated", res_json(q->allocated),
		                      "requested", res_json(q->requested), "quota",
		                      res_json(q->quota), "limit", res_json(q->limit)));
	}
	json_t *cycle = json_null();
	if (st->at) {
		rfc3339(st->at, ts, sizeof(ts));
		cycle = json_pack("{s:s,s:f}", "time", ts, "durationSeconds", st->seconds);
	}
	sc__api_json(r, 200,
	             json_pack("{s:s,s:s,s:o,s:{s:I,s:f,s:f},s:o}", "apiVersion",
	                       "starcloud.dev/v1", "kind", "SchedulerStatus", "cycle", cycle,
	                       "cluster", "nodes", (json_int_t)st->last.nodes, "gpus",
	                       st->last.gpus, "allocatedGpus", st->last.allocated, "queues",
	                       queues));
}

static void handle_history(sc_schedstat_t *st, sc_http_req_t *r, const sc_principal_t *who)
{
	char since_s[32], ts[40];
	int64_t since = 0;
	if (sc_http_query_param(r, "since", since_s, sizeof(since_s)) > 0 &&
	    sc_parse_i64(since_s, 0, INT64_MAX, &since) < 0) {
		sc__api_error(r, 400, "BadRequest", "since",
		              "since: expected Unix seconds (a whole number), got \"%s\"", since_s);
		return;
	}
	json_t *samples = json_array();
	for (size_t k = 0; k < SC_HISTORY_SAMPLES; k++) {
		const sample_t *s = &st->ring[(st->head + k) % SC_HISTORY_SAMPLES];
		if (!s->time || s->time <= since)
			continue;
		json_t *qs = json_object();
		for (size_t i = 0; i < s->nq; i++) {
			const char *name = st->names[s->q[i].name];
			if (visible(who, name))
				json_object_set_new(qs, name,
				                    json_pack("{s:f,s:f,s:I}", "allocated",
				                              (double)s->q[i].allocated,
				                              "requested",
				                              (double)s->q[i].requested, "pending",
				                              (json_int_t)s->q[i].pending));
		}
		rfc3339(s->time, ts, sizeof(ts));
		json_array_append_new(samples,
		                      json_pack("{s:s,s:I,s:f,s:f,s:o}", "time", ts, "unix",
		                                (json_int_t)s->time, "gpus", s->gpus,
		                                "allocatedGpus", s->allocated, "queues", qs));
	}
	sc__api_json(r, 200,
	             json_pack("{s:s,s:s,s:i,s:o}", "apiVersion", "starcloud.dev/v1", "kind",
	                       "SchedulerHistory", "intervalSeconds", SC_HISTORY_INTERVAL_S,
	                       "samples", samples));
}

/* GPUs held per node and device, in milli of a device (whole 1000, a share
 * its milli or its memory over the device's, a MIG instance its slices of
 * 7), from every job's and deployment's pods, without saying whose: a
 * tenant's dashboard draws other queues' use as "in use" from this. */
static void add_milli(json_t *devs, long d, long add)
{
	if (d < 0 || d >= 64)
		return;
	while (json_array_size(devs) <= (size_t)d)
		json_array_append_new(devs, json_integer(0));
	long v = (long)json_integer_value(json_array_get(devs, (size_t)d)) + add;
	json_array_set_new(devs, (size_t)d, json_integer(v > 1000 ? 1000 : v));
}

/* The device memory of node name's GPUs in bytes, 0 when unknown. */
static double device_memory(sc_schedstat_t *st, const char *name)
{
	const sc_cobj_t *o = sc__cache_get(st->s->cache, sc__kind_by_name("Node"), name);
	json_t *m = json_object_get(
	    json_object_get(json_object_get(o ? sc__cache_obj((sc_cobj_t *)o) : NULL, "spec"),
	                    "gpus"),
	    "memory");
	int64_t b = 0;
	if (json_is_integer(m))
		return (double)json_integer_value(m);
	if (json_is_string(m) && sc_quantity_memory(json_string_value(m), 0, &b) == 0)
		return (double)b;
	return 0;
}

static void add_use(sc_schedstat_t *st, json_t *nodes, json_t *pod)
{
	const char *ph = json_string_value(json_object_get(pod, "phase"));
	const char *node = json_string_value(json_object_get(pod, "node"));
	if (!ph || !node ||
	    !(strcmp(ph, "Running") == 0 || strcmp(ph, "Releasing") == 0 ||
	      strcmp(ph, "Pipelined") == 0))
		return;
	json_t *devs = json_object_get(nodes, node), *g;
	if (!devs) {
		devs = json_array();
		json_object_set_new(nodes, node, devs);
	}
	json_t *mig = json_object_get(pod, "mig"), *share = json_object_get(pod, "gpuShare");
	json_t *gmem = json_object_get(pod, "gpuMemory");
	size_t i;
	if (json_is_object(mig)) {
		const char *prof = json_string_value(json_object_get(mig, "profile"));
		uint64_t slices = 1;
		if (prof)
			sc_parse_digits(&prof, 7, &slices);
		add_milli(devs, (long)json_integer_value(json_object_get(mig, "gpu")),
		          (long)(slices * 1000 / 7));
		return;
	}
	long add = 1000;
	if (json_is_number(share)) {
		add = (long)json_number_value(share);
	} else if (gmem && !json_is_null(gmem)) {
		int64_t b = 0;
		double dev = device_memory(st, node);
		if (json_is_integer(gmem))
			b = json_integer_value(gmem);
		else if (json_is_string(gmem))
			sc_quantity_memory(json_string_value(gmem), 0, &b);
		add = dev > 0 ? (long)(1000.0 * (double)b / dev) : 1000;
	}
	json_array_foreach(json_object_get(pod, "gpus"), i, g)
	{
		add_milli(devs, (long)json_integer_value(g), add);
	}
}

static void handle_devices(sc_schedstat_t *st, sc_http_req_t *r)
{
	json_t *nodes = json_object();
	static const char *const kinds[] = {"Job", "Deployment"};
	for (size_t k = 0; k < 2 && st->s->cache; k++) {
		size_t n, i, j;
		sc_cobj_t *const *v = sc__cache_items(st->s->cache, sc__kind_by_name(kinds[k]), &n);
		for (i = 0; i < n; i++) {
			json_t *obj = sc__cache_parse(v[i]), *p;
			json_array_foreach(json_object_get(json_object_get(obj, "status"), "pods"),
			                   j, p)
			{
				add_use(st, nodes, p);
			}
			json_decref(obj);
		}
	}
	sc__api_json(r, 200,
	             json_pack("{s:s,s:s,s:o}", "apiVersion", "starcloud.dev/v1", "kind",
	                       "DeviceUse", "nodes", nodes));
}

static void handle(sc_http_req_t *r, void *ud)
{
	sc_schedstat_t *st = ud;
	sc_principal_t who;
	if (sc__auth_request(st->s, r, &who) < 0)
		return;
	if (strcmp(sc_http_method(r), "GET") != 0) {
		sc__api_error(r, 405, "MethodNotAllowed", NULL,
		              "the scheduler's figures are read "
		              "with GET");
		return;
	}
	if (who.role == SC_ROLE_AGENT) {
		sc__api_error(r, 403, "Forbidden", NULL, "role agent may not read the scheduler");
		return;
	}
	const char *path = sc_http_path(r);
	if (strcmp(path, SC_API_PREFIX "scheduler/status") == 0)
		handle_status(st, r, &who);
	else if (strcmp(path, SC_API_PREFIX "scheduler/history") == 0)
		handle_history(st, r, &who);
	else if (strcmp(path, SC_API_PREFIX "scheduler/devices") == 0)
		handle_devices(st, r);
	else
		sc__api_error(r, 404, "NotFound", NULL,
		              "%s: expected /api/v1/scheduler/status, /history or /devices", path);
}

int sc__schedstat_register(sc_server_t *s, sc_schedstat_t *st)
{
	st->s = s;
	return sc_http_route(s->http, NULL, SC_API_PREFIX "scheduler/", handle, st);
}
