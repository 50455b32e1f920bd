/* Node pools in a scheduling cycle: the input read on the loop thread and
 * the core's plans made on the worker (pool.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/quantity.h"
#include "server/jobstatus.h"
#include "server/pool.h"
#include "starcloud/error.h"

static int64_t time_of(json_t *o, const char *key)
{
	int64_t t = 0;
	const char *v = json_string_value(json_object_get(o, key));
	if (!v || sc_quantity_time(v, &t) < 0)
		return 0;
	return t;
}

/* ---- input (loop thread) ------------------------------------------------ */

typedef struct collect {
	sc_pool_cycle_t *pc;
	json_t *status; /* pool name -> its status (references) */
	json_t *ready;  /* pool nodes registered and ready: name -> true */
} collect_t;

static void add_pool(sc_server_t *s, const char *name, json_t *obj, void *ud)
{
	collect_t *c = ud;
	sc_manifest_error_t err;
	if (sc_manifest_add_json(c->pc->set, obj, &err) < 1)
		return; /* validated on write: only a hand-edited store gets here */
	json_t *st = json_object_get(obj, "status");
	json_object_set(c->status, name, st ? st : json_null());
}

/* Pool nodes that are ready: the snapshot has them as members. */
static void add_node(sc_server_t *s, const char *name, json_t *obj, void *ud)
{
	collect_t *c = ud;
	json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
	json_t *ready = json_object_get(json_object_get(obj, "status"), "ready");
	(void)s;
	if (json_object_get(labels, SC_POOL_LABEL) && !json_is_false(ready))
		json_object_set_new(c->ready, name, json_true());
}

/* Requested and Removing nodes of a pool's status, and the oldest request.
 * A requested node whose Node is already ready is a member in the
 * snapshot: counting it in flight too would make the plan wait for a node
 * that has come (and ask for one too few) until the controller notices the
 * join after the cycle. */
static void count_nodes(sc_pool_in_t *p, json_t *st, json_t *ready)
{
	json_t *n;
	size_t i;
	json_array_foreach(json_object_get(st, "nodes"), i, n)
	{
		const char *phase = sc__str_of(n, "phase");
		if (strcmp(phase, "Requested") == 0 &&
		    !json_object_get(ready, sc__str_of(n, "name"))) {
			int64_t at = time_of(n, "requestedAt");
			p->np.pool.in_flight++;
			if (at && (!p->oldest_request || at < p->oldest_request))
				p->oldest_request = at;
		} else if (strcmp(phase, "Removing") == 0) {
			p->np.pool.removing++;
		}
	}
}

sc_pool_cycle_t *sc__pool_input(sc_server_t *s, int64_t now)
{
	sc_pool_cycle_t *pc = sc_xcalloc(1, sizeof(*pc));
	collect_t c = {
	    .pc = pc, .status = sc_xcheck(json_object()), .ready = sc_xcheck(json_object())};
	const sc_nodepool_t *np;
	pc->now = now;
	pc->set = sc_xcheck(sc_manifest_set_new());
	const sc_kind_t *k = sc__kind_by_name("NodePool");
	size_t n = 0;
	if (k && sc__objects_each(s, k, add_pool, &c) == 0)
		n = sc_manifest_nodepools(pc->set, &np);
	if (n > 0)
		sc__objects_each(s, sc__kind_by_name("Node"), add_node, &c);
	if (n > SC_POOL_MAX)
		n = SC_POOL_MAX;
	pc->p = sc_xcalloc(n + 1, sizeof(*pc->p));
	for (size_t i = 0; i < n; i++) {
		sc_pool_in_t *p = &pc->p[i];
		p->np = np[i];
		p->np.pool.in_flight = p->np.pool.removing = 0;
		snprintf(p->name, sizeof(p->name), "%s", np[i].pool.name);
		count_nodes(p, json_object_get(c.status, p->name), c.ready);
	}
	pc->n = n;
	json_decref(c.status);
	json_decref(c.ready);
	if (n == 0) {
		sc__pool_cycle_free(pc);
		return NULL;
	}
	return pc;
}

void sc__pool_cycle_free(sc_pool_cycle_t *pc)
{
	if (!pc)
		return;
	for (size_t i = 0; i < pc->ndown; i++)
		free(pc->down[i]);
	free(pc->down);
	for (size_t i = 0; i < pc->nreasons; i++)
		free(pc->reasons[i]);
	free(pc->reasons);
	json_decref(pc->pods_on);
	json_decref(pc->busy);
	json_decref(pc->waits);
	free(pc->p);
	sc_manifest_set_free(pc->set);
	free(pc);
}

/* ---- plans (worker) ----------------------------------------------------- */

/* The reason text a job's wait gets: the age is rounded (10 s steps under
 * a minute, then minutes) so a status is not rewritten every second. */
static void wait_reason(char *buf, size_t n, const char *pool, int nodes, int64_t age)
{
	if (age < 0)
		age = 0;
	if (age < 60)
		age -= age % 10;
	else
		age -= age % 60;
	sc_pool_wait_text(buf, n, pool, nodes, age);
}

static char *own_reason(sc_pool_cycle_t *pc, const char *text)
{
	pc->reasons = sc_xreallocarray(pc->reasons, pc->nreasons + 1, sizeof(char *));
	return pc->reasons[pc->nreasons++] = sc_xstrdup(text);
}

static sc_pending_t *pending_of(sc_decisions_t *d, size_t job)
{
	for (size_t i = 0; i < d->npending; i++)
		if (d->pending[i].job == job)
			return &d->pending[i];
	return NULL;
}

/* The waits of one job (consecutive in the plan) become its reason and
 * its status.waitingFor. */
static void job_waits(sc_pool_cycle_t *pc, const sc_snapshot_t *snap, sc_decisions_t *d,
                      const sc_scaleup_t *up, size_t from, size_t to)
{
	char text[1024] = "", part[256], ts[40];
	size_t job = up->waits[from].job;
	sc_pending_t *pe = pending_of(d, job);
	if (!pe)
		return; /* running, with more replicas waiting: its reason is "" */
	json_t *arr = sc_xcheck(json_array());
	for (size_t i = from; i < to; i++) {
		const sc_pool_wait_t *w = &up->waits[i];
		sc_pool_in_t *p = &pc->p[w->pool];
		int64_t at = w->new_nodes > 0 || !p->oldest_request ? pc->now : p->oldest_request;
		wait_reason(part, sizeof(part), p->name, w->nodes, pc->now - at);
		size_t l = strlen(text);
		snprintf(text + l, sizeof(text) - l, "%s%s", l ? "; " : "", part);
		sc_quantity_format_time(at, ts, sizeof(ts));
		json_array_append_new(arr, json_pack("{s:s,s:i,s:s}", "pool", p->name, "nodes",
		                                     w->nodes, "requestedAt", ts));
		p->waiting_jobs++;
	}
	pe->reason = own_reason(pc, text);
	json_object_set_new(pc->waits, snap->jobs[job].name, arr);
}

static void read_up(sc_pool_cycle_t *pc, const sc_snapshot_t *snap, sc_decisions_t *d,
                    const sc_scaleup_t *up)
{
	for (size_t p = 0; p < pc->n; p++) {
		pc->p[p].add = up->add[p];
		pc->p[p].below_min = up->below_min[p];
	}
	for (size_t i = 0; i < up->nwaits;) {
		size_t k = i + 1;
		while (k < up->nwaits && up->waits[k].job == up->waits[i].job)
			k++;
		job_waits(pc, snap, d, up, i, k);
		i = k;
	}
}

static bool in_pool(const sc_node_spec_t *n, const char *pool)
{
	for (size_t i = 0; i < n->nlabels; i++)
		if (strcmp(n->labels[i].key, SC_POOL_LABEL) == 0)
			return strcmp(n->labels[i].value, pool) == 0;
	return false;
}

/* Pods held on each pool node after the cycle: the snapshot's, and those
 * bound now (so a node is empty only when neither holds one). */
static void count_pods(sc_pool_cycle_t *pc, const sc_snapshot_t *snap, const sc_decisions_t *d)
{
	pc->pods_on = sc_xcheck(json_object());
	for (size_t i = 0; i < snap->nnodes; i++)
		for (size_t p = 0; p < pc->n; p++)
			if (in_pool(&snap->nodes[i], pc->p[p].name))
				json_object_set_new(pc->pods_on, snap->nodes[i].name,
				                    json_integer(0));
	for (size_t j = 0; j < snap->njobs; j++)
		for (size_t k = 0; k < snap->jobs[j].npods; k++) {
			const sc_pod_status_t *ps = &snap->jobs[j].pods[k];
			json_t *v = ps->node ? json_object_get(pc->pods_on, ps->node) : NULL;
			if (v && ps->phase != SC_POD_SUCCEEDED && ps->phase != SC_POD_FAILED)
				json_integer_set(v, json_integer_value(v) + 1);
		}
	for (size_t b = 0; b < d->nbindings; b++) {
		json_t *v = json_object_get(pc->pods_on, d->bindings[b].node);
		if (v)
			json_integer_set(v, json_integer_value(v) + 1);
	}
}

static void count_left_out_one(sc_pool_cycle_t *pc, const char *text)
{
	json_t *obj = json_loads(text, 0, NULL), *p;
	size_t k;
	sc_jobst_pod_t pod;
	json_array_foreach(sc__jobst_pods(obj), k, p)
	{
		sc__jobst_pod(p, &pod);
		json_t *v = json_object_get(pc->pods_on, pod.node);
		if (v && pod.phase != SC_PP_SUCCEEDED && pod.phase != SC_PP_FAILED) {
			json_integer_set(v, json_integer_value(v) + 1);
			json_object_set_new(pc->busy, pod.node, json_true());
		}
	}
	json_decref(obj);
}

/* Pods of jobs left out of the snapshot (refused by the decoder or by a
 * reference check) still hold their nodes; their stored text is read
 * (there are few of them). */
static void count_left_out(sc_pool_cycle_t *pc, const sc_world_t *world)
{
	for (int r = SC_RANK_JOB; r <= SC_RANK_DEPLOY; r++) {
		size_t n;
		sc_wobj_t *const *v = sc__world_objs(world, r, &n);
		for (size_t i = 0; i < n; i++)
			if (v[i]->slot < 0 && v[i]->text)
				count_left_out_one(pc, v[i]->text);
	}
}

/* Candidates that hold a pod the core did not see are not candidates. */
static void drop_busy(sc_pool_cycle_t *pc)
{
	size_t n = 0;
	for (size_t i = 0; i < pc->ndown; i++) {
		if (json_object_get(pc->busy, pc->down[i]))
			free(pc->down[i]);
		else
			pc->down[n++] = pc->down[i];
	}
	pc->ndown = n;
}

int sc__pool_plan(sc_pool_cycle_t *pc, const sc_snapshot_t *snap, const sc_world_t *world,
                  sc_decisions_t *d)
{
	sc_pool_t pools[SC_POOL_MAX];
	sc_scaleup_t *up = NULL;
	sc_scaledown_t *down = NULL;
	for (size_t p = 0; p < pc->n; p++)
		pools[p] = pc->p[p].np.pool;
	pc->waits = sc_xcheck(json_object());
	int rc = sc_scaleup_plan(snap, d, pools, pc->n, &up, pc->error, sizeof(pc->error));
	if (rc == 0)
		rc = sc_scaledown_plan(snap, d, pools, pc->n, NULL, &down, pc->error,
		                       sizeof(pc->error));
	if (rc == 0) {
		read_up(pc, snap, d, up);
		pc->down = sc_xcalloc(down->n + 1, sizeof(char *));
		for (size_t i = 0; i < down->n; i++)
			pc->down[pc->ndown++] = sc_xstrdup(down->nodes[i].node);
		count_pods(pc, snap, d);
		pc->busy = sc_xcheck(json_object());
		count_left_out(pc, world);
		drop_busy(pc);
	}
	sc_scaleup_free(up);
	sc_scaledown_free(down);
	return rc;
}
