/* Committing a cycle's plan (sched_plan.c) on the loop thread, and event
 * retention.
 *
 * A plan can hold 100,000 status writes (the first cycle after 100,000
 * jobs were applied). It is committed in parts: each part is one store
 * transaction of as many puts as fit in a budget of loop time, so a GET
 * waits for at most one part, never for the whole plan; the loop goes on
 * with the next part in the next iteration.
 *
 * Every put is conditional on the revision the cycle read. With the
 * embedded store the cache is exact on the loop thread, so a put whose
 * object changed since (an API write, an agent's report) is dropped before
 * the transaction instead of failing it: that object's change is already
 * in the feed and the next cycle decides again for it. Dropping a binding
 * is always safe (its resources stay free); dropping an eviction is not
 * for the bindings that were placed onto what it releases, so once an
 * eviction is dropped every later pipelined binding of the plan is
 * dropped too (the plan orders evictions first, pipelined bindings last).
 * A store whose cache trails it (etcd) may still fail a part with a
 * conflict: the put it names is dropped and the part tried again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "server/cache.h"
#include "server/sched_int.h"
#include "starcloud/error.h"

#define PART_MAX 2000 /* puts in one transaction at most */

static double now_ms(void)
{
	return (double)uv_hrtime() / 1e6;
}

static const char *str_of(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));
	return v ? v : "";
}

/* Event names: "<object>.<revision>.<n>", unique because the revision is
 * the one the first part's transaction will get; so they are named when
 * the commit starts, on the loop thread, and go last. */
static void name_events(sc_server_t *s, sc_cycle_plan_t *p)
{
	int64_t rev = sc_store_revision(s->store) + 1;
	json_t *ev;
	size_t i;
	json_array_foreach(p->events, i, ev)
	{
		char name[SC_MAX_NAME + 1], key[SC_MAX_NAME + 64];
		snprintf(name, sizeof(name), "%.200s.%lld.%zu",
		         str_of(json_object_get(ev, "involvedObject"), "name"), (long long)rev, i);
		json_object_set_new(json_object_get(ev, "metadata"), "name", json_string(name));
		sc__object_key(sc__kind_by_name("Event"), name, key, sizeof(key));
		if (p->n == p->cap) {
			p->cap = p->cap ? p->cap * 2 : 64;
			p->v = sc_xreallocarray(p->v, p->cap, sizeof(*p->v));
		}
		p->v[p->n++] = (sc_put_t){.key = sc_xstrdup(key),
		                          .value = sc_xcheck(json_dumps(ev, JSON_COMPACT)),
		                          .expect = SC_REV_ABSENT,
		                          .event = true};
	}
	p->named = true;
}

/* 1 when put x may still be written: its object is at the revision the
 * cycle read (as far as the cache knows: with etcd it may trail, and the
 * store then refuses the part). */
static int still_valid(sc_server_t *s, sc_cycle_plan_t *p, const sc_put_t *x)
{
	if (x->pipelined && p->dropped_evict)
		return 0;
	if (x->event)
		return 1;
	const char *rest = x->key + strlen(SC_KEY_PREFIX), *slash = strchr(rest, '/');
	const sc_kind_t *k = slash ? sc__kind_by_plural(rest, (size_t)(slash - rest)) : NULL;
	const sc_cobj_t *o = k ? sc__cache_get(s->cache, k, slash + 1) : NULL;
	return o && o->mod_rev == x->expect;
}

static void drop(sc_cycle_plan_t *p, sc_put_t *x)
{
	if (x->evicts)
		p->dropped_evict = true;
	p->dropped = true;
	free(x->value);
	x->value = NULL; /* a hole: skipped */
}

int sc__cycle_commit(sc_server_t *s, sc_feed_t *f, sc_cycle_plan_t *p, double budget_ms,
                     sc_store_done_fn fn, void *ud)
{
	double t0 = now_ms();
	if (!p->named)
		name_events(s, p);
	/* A part: the next puts still valid, as many as the budget lets
	 * through (a put costs a few microseconds; checked every 64). */
	sc_store_op_t *ops = sc_xcalloc(PART_MAX, sizeof(*ops));
	size_t n = 0, i = p->done;
	free(p->part_idx);
	p->part_idx = sc_xcalloc(PART_MAX, sizeof(*p->part_idx));
	while (i < p->n && n < PART_MAX) {
		sc_put_t *x = &p->v[i++];
		if (!x->value)
			continue;
		if (!still_valid(s, p, x)) {
			drop(p, x);
			continue;
		}
		ops[n] = (sc_store_op_t){SC_STORE_PUT, x->key, x->value, x->expect};
		p->part_idx[n++] = i - 1;
		if (n % 64 == 0 && now_ms() - t0 > budget_ms)
			break;
	}
	p->part_n = n;
	p->part_end = i;
	if (n == 0) {
		p->done = i;
		free(ops);
		return p->done < p->n ? 2 : 0;
	}
	/* The changes these puts make are the loop's own: noted for the
	 * next cycle, calling for none (SQLite delivers them inside the call,
	 * etcd before the answer). */
	for (size_t k = 0; k < n; k++)
		sc__feed_own(f, ops[k].key);
	sc__feed_quiet(f, true);
	sc_store_txn_async(s->store, ops, n, fn, ud);
	sc__feed_quiet(f, false);
	free(ops);
	return 1;
}

int sc__cycle_part_done(sc_feed_t *f, sc_cycle_plan_t *p, const sc_store_res_t *res)
{
	for (size_t k = 0; k < p->part_n; k++)
		sc__feed_own_end(f, p->v[p->part_idx[k]].key);
	int rc = res->rc;
	if (rc == SC_ECONFLICT || rc == SC_ENOTFOUND || rc == SC_EEXISTS) {
		/* The store knew better than the cache: drop the put it names
		 * and send the part again. */
		size_t failed = res->failed < p->part_n ? res->failed : 0;
		if (p->part_n)
			drop(p, &p->v[p->part_idx[failed]]);
		p->part_n = 0;
		return p->done < p->n;
	}
	p->part_n = 0;
	if (rc < 0)
		return rc;
	p->done = p->part_end;
	return p->done < p->n;
}

/* ---------------------------------------------------------------------
 * Event retention
 * ------------------------------------------------------------------- */

static int cmp_rev(const void *a, const void *b)
{
	const sc_cobj_t *x = *(sc_cobj_t *const *)a, *y = *(sc_cobj_t *const *)b;
	return x->create_rev < y->create_rev ? -1 : x->create_rev > y->create_rev;
}

static void trimmed(const sc_store_res_t *res, void *ud)
{
	(void)ud;
	if (res->rc < 0)
		sc_log_warn("events: cannot delete the oldest: %s", sc_strerror(res->rc));
}

/* Reads the events from the cache (no store scan), oldest first. */
long sc__events_trim(sc_server_t *s)
{
	size_t n;
	sc_cobj_t *const *v = sc__cache_items(s->cache, sc__kind_by_name("Event"), &n);
	if (n <= SC_EVENT_LIMIT)
		return (long)n;
	sc_cobj_t **byrev = sc_xmalloc(n * sizeof(*byrev));
	size_t ndel = n - SC_EVENT_LIMIT;
	sc_store_op_t *ops = sc_xcalloc(ndel, sizeof(*ops));
	memcpy(byrev, v, n * sizeof(*byrev));
	qsort(byrev, n, sizeof(*byrev), cmp_rev);
	/* Keys are copied: the deletes remove the cache entries they name
	 * while the transaction is still reading them. */
	for (size_t i = 0; i < ndel; i++) {
		char *key = sc_xstrdup(byrev[i]->key);
		ops[i] = (sc_store_op_t){SC_STORE_DELETE, key, NULL, byrev[i]->mod_rev};
	}
	free(byrev);
	/* Not waited for: a delete that loses a race (the event changed) is
	 * retried when the count is next over the limit. */
	sc_store_txn_async(s->store, ops, ndel, trimmed, NULL);
	for (size_t i = 0; i < ndel; i++)
		free((char *)ops[i].key);
	free(ops);
	return SC_EVENT_LIMIT;
}
