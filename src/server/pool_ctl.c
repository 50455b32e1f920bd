/* The node pool controller: acts on a cycle's plans (pool.h).
 *
 * Each NodePool's status.nodes is the pool's memory of the nodes it made,
 * written before anything is started (persist, then act): a server that
 * restarts finds every request and removal where it left them. A node goes
 * through
 *   Requested  the provider was asked to make it; it joins when a Node of
 *              that name is ready, or is given up after joinTimeout (the
 *              provider deletes what it made; counted as a join failure);
 *   Joined     a member; the scale-down plan's candidates start (or keep)
 *              a timer (idleSince), the others clear it; after
 *              scaleDownAfter on the list it is
 *   Removing   cordoned and marked (SC_SCALEDOWN_ANNOTATION: the loop
 *              moves its pods off one by one); once no pod is left the
 *              provider deletes it, then its Node object goes.
 * A Joined node whose Node stays not ready (or is deleted) for joinTimeout
 * is lost: deleted as well. A provider failure makes its pool wait before
 * it asks again (10 s, doubling to 10 min), so a broken cloud is not hit
 * every second. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/quantity.h"
#include "server/cache.h"
#include "server/pool.h"
#include "starcloud/error.h"

#define BACKOFF_MIN 10
#define BACKOFF_MAX 600

/* What the controller remembers of a pool between cycles (counters for
 * /metrics, the provider back-off). Lost on restart, like any counter. */
typedef struct pool_mem {
	char name[SC_MAX_NAME + 1];
	unsigned long long requested, removed, join_timeouts, lost, create_failures,
	    delete_failures;
	int64_t backoff_until, backoff;
	int joined, in_flight, removing, gpus, waiting;
	bool saving; /* a status write is in flight: no pass until it is answered */
} pool_mem_t;

typedef struct save save_t;

typedef struct sc_pools {
	sc_pool_exec_t *exec;
	pool_mem_t *mem;
	size_t nmem;
	json_t *results;  /* node -> {create, ok, output}: provider actions ended */
	json_t *deleting; /* node -> true: a delete was started */
	json_t *unready;  /* node -> time it was first seen not ready */
	save_t *saves;    /* status writes in flight */
} sc_pools_t;

static sc_pools_t *pools_of(sc_server_t *s)
{
	return s->pools;
}

static int64_t time_of(json_t *o, const char *key)
{
	int64_t t = 0;
	const char *v = json_string_value(json_object_get(o, key));
	return v && sc_quantity_time(v, &t) == 0 ? t : 0;
}

static void set_time(json_t *o, const char *key, int64_t t)
{
	char ts[40];
	sc_quantity_format_time(t, ts, sizeof(ts));
	json_object_set_new(o, key, json_string(ts));
}

static pool_mem_t *mem_of(sc_pools_t *ps, const char *name)
{
	for (size_t i = 0; i < ps->nmem; i++)
		if (strcmp(ps->mem[i].name, name) == 0)
			return &ps->mem[i];
	ps->mem = sc_xreallocarray(ps->mem, ps->nmem + 1, sizeof(*ps->mem));
	pool_mem_t *m = &ps->mem[ps->nmem++];
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", name);
	return m;
}

/* ---- provider results ----------------------------------------------------- */

static void on_done(sc_server_t *s, const char *pool, const char *node, bool create, bool ok,
                    const char *output)
{
	sc_pools_t *ps = pools_of(s);
	if (!ps)
		return;
	if (!create)
		json_object_del(ps->deleting, node);
	json_object_set_new(ps->results, node,
	                    json_pack("{s:s,s:b,s:b,s:s}", "pool", pool, "create", create, "ok", ok,
	                              "output", output ? output : ""));
	if (!ok)
		sc_log_warn("pool %s: %s of node %s failed: %s", pool, create ? "create" : "delete",
		            node, output ? output : "");
	sc__sched_kick(s);
}

/* ---- one pool's pass -------------------------------------------------------- */

typedef struct pass {
	sc_server_t *s;
	sc_pools_t *ps;
	sc_pool_cycle_t *pc;
	sc_pool_in_t *p;
	pool_mem_t *m;
	int64_t now;
	json_t *nodes;        /* the new status.nodes */
	json_t *events;       /* new Event objects */
	json_t *creates;      /* names to create after the write */
	json_t *deletes;      /* names to delete after the write */
	json_t *node_writes;  /* Node objects to keep cordoned: name -> true */
	json_t *node_deletes; /* Node objects to delete: name -> true */
	int join_failures;    /* given up this pass */
	bool removed;         /* a node went this pass */
} pass_t;

static void event(pass_t *x, const char *reason, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void event(pass_t *x, const char *reason, const char *type, const char *fmt, ...)
{
	char msg[1024], ts[40];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sc_quantity_format_time(x->now, ts, sizeof(ts));
	json_array_append_new(x->events,
	                      json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s},s:s,s:s,s:s,s:s}",
	                                "apiVersion", "starcloud.dev/v1", "kind", "Event",
	                                "metadata", "creationTimestamp", ts, "involvedObject",
	                                "kind", "NodePool", "name", x->p->name, "reason", reason,
	                                "type", type, "message", msg, "lastTimestamp", ts));
}

/* The Node object of that name from the cache, or NULL. */
static json_t *node_obj(sc_server_t *s, const char *name)
{
	sc_cobj_t *o = (sc_cobj_t *)sc__cache_get(s->cache, sc__kind_by_name("Node"), name);
	return o ? json_incref(sc__cache_obj(o)) : NULL;
}

static bool node_ready(json_t *node)
{
	json_t *r = json_object_get(json_object_get(node, "status"), "ready");
	return node && !json_is_false(r);
}

static void backoff(pass_t *x)
{
	pool_mem_t *m = x->m;
	m->backoff = m->backoff ? m->backoff * 2 : BACKOFF_MIN;
	if (m->backoff > BACKOFF_MAX)
		m->backoff = BACKOFF_MAX;
	m->backoff_until = x->now + m->backoff;
}

/* Gives a node up: the provider deletes what it made, its Node goes. */
static void give_up(pass_t *x, const char *name)
{
	json_object_set_new(x->deletes, name, json_true());
	json_object_set_new(x->node_deletes, name, json_true());
}

static bool is_candidate(const pass_t *x, const char *name)
{
	for (size_t i = 0; i < x->pc->ndown; i++)
		if (strcmp(x->pc->down[i], name) == 0)
			return true;
	return false;
}

/* A provider result for node e; returns false when the entry goes. */
static bool fold_result(pass_t *x, json_t *e, json_t *res)
{
	const char *name = sc__str_of(e, "name");
	bool create = json_is_true(json_object_get(res, "create"));
	bool ok = json_is_true(json_object_get(res, "ok"));
	const char *out = sc__str_of(res, "output");
	if (create && !ok) {
		x->m->create_failures++;
		backoff(x);
		event(x, "ProvisionFailed", "Warning", "creating node %s failed: %.700s", name,
		      out);
		give_up(x, name);
		return false;
	}
	if (!create && !ok) {
		x->m->delete_failures++;
		backoff(x);
		event(x, "DeleteFailed", "Warning", "deleting node %s failed (tried again): %.700s",
		      name, out);
		return true;
	}
	if (!create && strcmp(sc__str_of(e, "phase"), "Removing") == 0) {
		x->m->removed++;
		x->removed = true;
		event(x, "ScaledDown", "Normal", "node %s deleted (removal began %lld s ago)", name,
		      (long long)(x->now - time_of(e, "removingSince")));
		json_object_set_new(x->node_deletes, name, json_true());
		return false;
	}
	return true;
}

static bool step_requested(pass_t *x, json_t *e, json_t *node)
{
	const char *name = sc__str_of(e, "name");
	int64_t at = time_of(e, "requestedAt");
	if (node && node_ready(node)) {
		json_object_set_new(e, "phase", json_string("Joined"));
		set_time(e, "joinedAt", x->now);
		x->m->backoff = 0; /* the provider works again: the next failure waits 10 s */
		event(x, "NodeJoined", "Normal", "node %s joined %lld s after its request", name,
		      (long long)(x->now - at));
		return true;
	}
	if (x->now - at >= x->p->np.join_timeout) {
		x->m->join_timeouts++;
		x->join_failures++;
		backoff(x);
		event(x, "NodeJoinTimeout", "Warning",
		      "node %s did not join within %llds: given up (the provider deletes it)", name,
		      (long long)x->p->np.join_timeout);
		give_up(x, name);
		return false;
	}
	return true;
}

static bool step_joined(pass_t *x, json_t *e, json_t *node)
{
	const char *name = sc__str_of(e, "name");
	if (!node_ready(node)) {
		json_t *since = json_object_get(x->ps->unready, name);
		if (!since) {
			json_object_set_new(x->ps->unready, name, json_integer(x->now));
			since = json_object_get(x->ps->unready, name);
		}
		int64_t t = json_integer_value(since);
		if (x->now - t >= x->p->np.join_timeout) {
			x->m->lost++;
			event(x, "NodeLost", "Warning",
			      "node %s has not been ready for %llds: deleted", name,
			      (long long)(x->now - t));
			give_up(x, name);
			json_object_del(x->ps->unready, name);
			return false;
		}
		return true;
	}
	json_object_del(x->ps->unready, name);
	if (!is_candidate(x, name)) {
		json_object_del(e, "idleSince");
		return true;
	}
	int64_t idle = time_of(e, "idleSince");
	if (!idle) {
		set_time(e, "idleSince", x->now);
		idle = x->now;
	}
	if (x->now - idle < x->p->np.scale_down_after) {
		return true;
	}
	json_object_set_new(e, "phase", json_string("Removing"));
	set_time(e, "removingSince", x->now);
	json_object_set_new(x->node_writes, name, json_true());
	event(x, "ScaleDown", "Normal", "node %s was idle for %llds: cordoned, its pods move off",
	      name, (long long)(x->now - idle));
	return true;
}

static bool step_removing(pass_t *x, json_t *e, json_t *node)
{
	const char *name = sc__str_of(e, "name");
	json_t *pods = json_object_get(x->pc->pods_on, name);
	json_object_set_new(x->node_writes, name, json_true()); /* keep it cordoned */
	if (node && (!pods || json_integer_value(pods) > 0))
		return true;
	if (!json_object_get(x->ps->deleting, name) && x->now >= x->m->backoff_until)
		json_object_set_new(x->deletes, name, json_true());
	return true;
}

/* One entry of status.nodes; false when it leaves the list. */
static bool step(pass_t *x, json_t *e)
{
	const char *name = sc__str_of(e, "name"), *phase = sc__str_of(e, "phase");
	json_t *res = json_object_get(x->ps->results, name);
	if (res) {
		bool keep = fold_result(x, e, res);
		json_object_del(x->ps->results, name);
		if (!keep)
			return false;
	}
	json_t *node = node_obj(x->s, name);
	bool keep = true;
	if (strcmp(phase, "Requested") == 0)
		keep = step_requested(x, e, node);
	else if (strcmp(phase, "Joined") == 0)
		keep = step_joined(x, e, node);
	else if (strcmp(phase, "Removing") == 0)
		keep = step_removing(x, e, node);
	json_decref(node);
	return keep;
}

static void node_name(const char *pool, char *out, size_t outsz)
{
	unsigned char r[3] = {0};
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r[0] ^= (unsigned char)rand();
	snprintf(out, outsz, "%.200s-%02x%02x%02x", pool, r[0], r[1], r[2]);
}

static void scale_up(pass_t *x)
{
	sc_pool_in_t *p = x->p;
	if (p->add <= 0)
		return;
	if (x->now < x->m->backoff_until)
		return;
	for (int k = 0; k < p->add; k++) {
		char name[SC_MAX_NAME + 1];
		node_name(p->name, name, sizeof(name));
		json_t *e = json_pack("{s:s,s:s}", "name", name, "phase", "Requested");
		set_time(e, "requestedAt", x->now);
		json_array_append_new(x->nodes, e);
		json_object_set_new(x->creates, name, json_true());
	}
	x->m->requested += (unsigned long long)p->add;
	event(x, "ScaleUp", "Normal", "requested %d node%s for %d waiting job%s%s", p->add,
	      p->add == 1 ? "" : "s", p->waiting_jobs, p->waiting_jobs == 1 ? "" : "s",
	      p->below_min ? " and the pool's minimum" : "");
}

static json_t *new_status(pass_t *x, json_t *old)
{
	json_t *st = json_object();
	int req = 0, rem = 0, joined = 0;
	json_t *e;
	size_t i;
	json_array_foreach(x->nodes, i, e)
	{
		const char *ph = sc__str_of(e, "phase");
		req += strcmp(ph, "Requested") == 0;
		rem += strcmp(ph, "Removing") == 0;
	}
	const char *k;
	json_t *v;
	json_object_foreach(x->pc->pods_on, k, v) joined++;
	json_object_set(st, "nodes", x->nodes);
	json_object_set_new(st, "members", json_integer(joined));
	json_object_set_new(st, "requested", json_integer(req));
	json_object_set_new(st, "removing", json_integer(rem));
	json_object_set_new(st, "gpus",
	                    json_integer((json_int_t)joined * x->p->np.pool.tmpl.gpu_count));
	json_object_set_new(st, "waitingJobs", json_integer(x->p->waiting_jobs));
	json_int_t fails = json_integer_value(json_object_get(old, "joinFailures"));
	int64_t last_up = time_of(old, "lastScaleUp"), last_down = time_of(old, "lastScaleDown");
	json_object_set_new(st, "joinFailures", json_integer(fails + x->join_failures));
	if (json_object_size(x->creates))
		last_up = x->now;
	if (x->removed)
		last_down = x->now;
	if (last_up)
		set_time(st, "lastScaleUp", last_up);
	if (last_down)
		set_time(st, "lastScaleDown", last_down);
	x->m->joined = joined;
	x->m->in_flight = req;
	x->m->removing = rem;
	x->m->gpus = joined * x->p->np.pool.tmpl.gpu_count;
	x->m->waiting = x->p->waiting_jobs;
	return st;
}

/* ---- writes ---------------------------------------------------------------- */

/* A pass waiting for its status write: what it starts (provider commands,
 * cordons, Node deletes) is carried out once the store has answered. It
 * holds the cycle (the pool's spec lives there) and its own copy of the
 * pass; the pools' state is looked up again by name, and a save still out
 * when the pools stop (sc__pool_stop) is orphaned (ps NULL) and only
 * freed. */
struct save {
	save_t *next;
	sc_pools_t *ps;
	pass_t x;
	char pool[SC_MAX_NAME + 1];
};

static void pass_free(pass_t *x);

static void cycle_unref(sc_pool_cycle_t *pc)
{
	if (--pc->refs == 0)
		sc__pool_cycle_free(pc);
}

static void carry_out(pass_t *x);

static void pool_saved(const sc_store_res_t *res, void *ud)
{
	save_t *sv = ud;
	sc_pools_t *ps = sv->ps;
	if (ps) {
		for (save_t **pp = &ps->saves; *pp; pp = &(*pp)->next)
			if (*pp == sv) {
				*pp = sv->next;
				break;
			}
		pool_mem_t *m = mem_of(ps, sv->pool);
		m->saving = false;
		sv->x.ps = ps;
		sv->x.m = m;
		if (res->rc == 0) {
			carry_out(&sv->x);
			sc__sched_kick(sv->x.s);
		} else if (res->rc != SC_ECONFLICT) {
			sc_log_warn("pool %s: cannot store its status: %s (next cycle tries again)",
			            sv->pool, sc_strerror(res->rc));
		}
	}
	cycle_unref(sv->x.pc);
	pass_free(&sv->x);
	free(sv);
}

/* The NodePool with its new status and the pass's events, in one
 * transaction conditional on the revision read, through the store's
 * asynchronous calls (with etcd, answered later from the loop); the pass
 * (x, taken) is carried out in pool_saved. A conflict (the NodePool moved
 * meanwhile) carries nothing out: the next cycle decides again. */
static void save_pool(pass_t *x, json_t *obj, int64_t rev)
{
	size_t n = 1 + json_array_size(x->events), i;
	sc_store_op_t *ops = sc_xcalloc(n, sizeof(*ops));
	char **owned = sc_xcalloc(2 * n + 1, sizeof(*owned));
	char key[SC_MAX_NAME + 64];
	int64_t next = sc_store_revision(x->s->store) + 1;
	json_t *ev;
	sc__object_key(sc__kind_by_name("NodePool"), x->p->name, key, sizeof(key));
	owned[0] = json_dumps(obj, JSON_COMPACT);
	ops[0] = (sc_store_op_t){SC_STORE_PUT, key, owned[0], rev};
	json_array_foreach(x->events, i, ev)
	{
		char name[SC_MAX_NAME + 1], ekey[SC_MAX_NAME + 64];
		snprintf(name, sizeof(name), "%.200s.%lld.p%zu", x->p->name, (long long)next, i);
		json_object_set_new(json_object_get(ev, "metadata"), "name", json_string(name));
		sc__object_key(sc__kind_by_name("Event"), name, ekey, sizeof(ekey));
		owned[2 * i + 1] = json_dumps(ev, JSON_COMPACT);
		owned[2 * i + 2] = sc_xstrdup(ekey);
		ops[i + 1] = (sc_store_op_t){SC_STORE_PUT, owned[2 * i + 2], owned[2 * i + 1],
		                             SC_REV_ABSENT};
	}
	save_t *sv = sc_xcalloc(1, sizeof(*sv));
	sv->ps = x->ps;
	sv->x = *x;
	sv->x.m = NULL; /* mem may move (mem_of reallocates): looked up again */
	snprintf(sv->pool, sizeof(sv->pool), "%s", x->p->name);
	x->m->saving = true;
	x->pc->refs++;
	sv->next = x->ps->saves;
	x->ps->saves = sv;
	/* SQLite answers before this returns: sv may be gone after it. */
	sc_store_txn_async(x->s->store, ops, n, pool_saved, sv);
	for (i = 0; i < 2 * n + 1; i++)
		free(owned[i]);
	free(owned);
	free(ops);
}

/* Keeps a node cordoned and marked for its pods to move off (without
 * waiting for the store: a heartbeat that came first fails this write,
 * and the next pass tries again). */
static void cordon(sc_server_t *s, const char *name)
{
	int64_t rev;
	const sc_kind_t *k = sc__kind_by_name("Node");
	json_t *obj = sc__object_copy(s, k, name, &rev);
	json_t *spec = json_object_get(obj, "spec"), *md = json_object_get(obj, "metadata");
	json_t *ann = json_object_get(md, "annotations");
	if (json_is_object(spec) && json_is_object(md) &&
	    (!json_is_true(json_object_get(spec, "unschedulable")) ||
	     strcmp(sc__str_of(ann, SC_SCALEDOWN_ANNOTATION), "true") != 0)) {
		json_object_set_new(spec, "unschedulable", json_true());
		if (!json_is_object(ann)) {
			ann = json_object();
			json_object_set_new(md, "annotations", ann);
		}
		json_object_set_new(ann, SC_SCALEDOWN_ANNOTATION, json_string("true"));
		sc__object_save(s, k, obj, rev, NULL, NULL);
	}
	json_decref(obj);
}

static void node_deleted(const sc_store_res_t *res, void *ud)
{
	if (res->rc == 0)
		sc__sched_kick(ud);
}

static void delete_node(sc_server_t *s, const char *name)
{
	char key[SC_MAX_NAME + 64];
	const sc_kind_t *k = sc__kind_by_name("Node");
	const sc_cobj_t *o = sc__cache_get(s->cache, k, name);
	if (!o)
		return;
	sc__object_key(k, name, key, sizeof(key));
	sc_store_op_t op = {SC_STORE_DELETE, key, NULL, o->mod_rev};
	sc_store_txn_async(s->store, &op, 1, node_deleted, s);
}

/* After the status is stored: what it says is started. */
static void carry_out(pass_t *x)
{
	const char *name;
	json_t *v;
	json_object_foreach(x->node_writes, name, v)
	{
		if (!json_object_get(x->node_deletes, name))
			cordon(x->s, name);
	}
	json_object_foreach(x->creates, name, v)
	{
		sc__pool_exec_start(x->ps->exec, &x->p->np, name, true);
	}
	json_object_foreach(x->deletes, name, v)
	{
		if (json_object_get(x->ps->deleting, name))
			continue;
		json_object_set_new(x->ps->deleting, name, json_true());
		sc__pool_exec_start(x->ps->exec, &x->p->np, name, false);
	}
	json_object_foreach(x->node_deletes, name, v)
	{
		delete_node(x->s, name);
	}
}

static void pass_free(pass_t *x)
{
	json_decref(x->nodes);
	json_decref(x->events);
	json_decref(x->creates);
	json_decref(x->deletes);
	json_decref(x->node_writes);
	json_decref(x->node_deletes);
}

static void one_pool(sc_server_t *s, sc_pools_t *ps, sc_pool_cycle_t *pc, sc_pool_in_t *p)
{
	int64_t mod_rev;
	if (mem_of(ps, p->name)->saving)
		return; /* the last pass's write is not answered yet: decide on it next cycle */
	json_t *obj = sc__object_copy(s, sc__kind_by_name("NodePool"), p->name, &mod_rev);
	if (!obj)
		return;
	json_t *old = json_object_get(obj, "status"), *e;
	pass_t x = {.s = s,
	            .ps = ps,
	            .pc = pc,
	            .p = p,
	            .m = mem_of(ps, p->name),
	            .now = pc->now,
	            .nodes = json_array(),
	            .events = json_array(),
	            .creates = json_object(),
	            .deletes = json_object(),
	            .node_writes = json_object(),
	            .node_deletes = json_object()};
	size_t i;
	json_array_foreach(json_object_get(old, "nodes"), i, e)
	{
		json_t *c = json_deep_copy(e);
		if (step(&x, c))
			json_array_append(x.nodes, c);
		json_decref(c);
	}
	scale_up(&x);
	json_t *st = new_status(&x, old);
	bool same = old && json_equal(st, old);
	if (!json_is_object(obj) || (same && json_array_size(x.events) == 0)) {
		json_decref(st);
		carry_out(&x); /* nothing new to store: the cordons still hold */
	} else {
		json_object_set_new(obj, "status", st);
		save_pool(&x, obj, mod_rev); /* takes x */
		json_decref(obj);
		return;
	}
	pass_free(&x);
	json_decref(obj);
}

void sc__pool_act(sc_server_t *s, sc_pool_cycle_t *pc)
{
	sc_pools_t *ps = pools_of(s);
	if (!pc)
		return;
	pc->refs = 1; /* ours, until the passes have started their writes */
	if (ps && pc->error[0])
		sc_log_warn("node pools: %s", pc->error);
	else if (ps)
		for (size_t i = 0; i < pc->n; i++)
			one_pool(s, ps, pc, &pc->p[i]);
	cycle_unref(pc);
}

/* ---- metrics ------------------------------------------------------------------ */

void sc__pool_metrics(sc_server_t *s, sc_buf_t *b)
{
	sc_pools_t *ps = pools_of(s);
	if (!ps)
		return; /* the families are declared even before a pool exists */
	static const struct {
		const char *name, *type, *help;
	} fam[] = {
	    {"starcloud_nodepool_nodes", "gauge",
	     "Nodes of a pool: members (Nodes with its label), requested (not joined yet), "
	     "removing."},
	    {"starcloud_nodepool_gpus", "gauge", "GPUs of a pool's member nodes."},
	    {"starcloud_nodepool_waiting_jobs", "gauge",
	     "Pending jobs waiting for new nodes of a pool."},
	    {"starcloud_nodepool_scale_up_nodes_total", "counter", "Nodes requested by a pool."},
	    {"starcloud_nodepool_scale_down_nodes_total", "counter",
	     "Nodes a pool deleted after they idled."},
	    {"starcloud_nodepool_join_timeouts_total", "counter",
	     "Requested nodes given up because they did not join within joinTimeout."},
	    {"starcloud_nodepool_lost_nodes_total", "counter",
	     "Member nodes deleted after staying not ready for joinTimeout."},
	    {"starcloud_nodepool_provider_failures_total", "counter",
	     "Provider commands (or dev agents) that failed, by action."},
	};
	for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		sc_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", fam[f].name, fam[f].help,
		              fam[f].name, fam[f].type);
		for (size_t i = 0; i < ps->nmem; i++) {
			const pool_mem_t *m = &ps->mem[i];
			const char *n = fam[f].name, *pl = m->name;
			switch (f) {
			case 0:
				sc_buf_printf(b, "%s{pool=\"%s\",state=\"member\"} %d\n", n, pl,
				              m->joined);
				sc_buf_printf(b, "%s{pool=\"%s\",state=\"requested\"} %d\n", n, pl,
				              m->in_flight);
				sc_buf_printf(b, "%s{pool=\"%s\",state=\"removing\"} %d\n", n, pl,
				              m->removing);
				break;
			case 1:
				sc_buf_printf(b, "%s{pool=\"%s\"} %d\n", n, pl, m->gpus);
				break;
			case 2:
				sc_buf_printf(b, "%s{pool=\"%s\"} %d\n", n, pl, m->waiting);
				break;
			case 3:
				sc_buf_printf(b, "%s{pool=\"%s\"} %llu\n", n, pl, m->requested);
				break;
			case 4:
				sc_buf_printf(b, "%s{pool=\"%s\"} %llu\n", n, pl, m->removed);
				break;
			case 5:
				sc_buf_printf(b, "%s{pool=\"%s\"} %llu\n", n, pl, m->join_timeouts);
				break;
			case 6:
				sc_buf_printf(b, "%s{pool=\"%s\"} %llu\n", n, pl, m->lost);
				break;
			default:
				sc_buf_printf(b, "%s{pool=\"%s\",action=\"create\"} %llu\n", n, pl,
				              m->create_failures);
				sc_buf_printf(b, "%s{pool=\"%s\",action=\"delete\"} %llu\n", n, pl,
				              m->delete_failures);
			}
		}
	}
}

/* ---- life ------------------------------------------------------------------------ */

int sc__pool_start(sc_server_t *s)
{
	sc_pools_t *ps = sc_xcalloc(1, sizeof(*ps));
	ps->exec = sc__pool_exec_new(s, on_done);
	ps->results = sc_xcheck(json_object());
	ps->deleting = sc_xcheck(json_object());
	ps->unready = sc_xcheck(json_object());
	s->pools = ps;
	return 0;
}

void sc__pool_stop(sc_server_t *s)
{
	sc_pools_t *ps = pools_of(s);
	if (!ps)
		return;
	s->pools = NULL;
	for (save_t *sv = ps->saves; sv; sv = sv->next)
		sv->ps = NULL; /* answered at the store's close: freed, nothing carried out */
	sc__pool_exec_free(ps->exec);
	json_decref(ps->results);
	json_decref(ps->deleting);
	json_decref(ps->unready);
	free(ps->mem);
	free(ps);
}
