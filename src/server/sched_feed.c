/* The scheduling loop's feed: which objects changed since the last cycle
 * took its input (sched_int.h).
 *
 * The cache calls in for every change it takes in (on the loop thread,
 * inside the store write that made it); the feed notes the key once,
 * however often it changes before the next cycle. A cycle then takes the
 * changes: for each noted key, the cache's current revision (its text,
 * copied, and the decoding the API's validation left with it) or its
 * deletion. So the loop thread's share of a cycle is proportional to what
 * changed, not to the cluster. The first take, and the first after the
 * cache was read whole again, hands over every object (`full`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/rtext.h"
#include "base/strmap.h"
#include "server/cache.h"
#include "server/sched_int.h"

struct sc_feed {
	sc_server_t *s;
	char **keys;  /* noted, owned */
	bool *wanted; /* keys[i] changed by someone else than the loop itself */
	size_t n, cap;
	size_t nwanted;
	bool quiet; /* the loop is committing its own writes */
	/* Keys with a write in flight (the loop's or an API write): -> false
	 * until its change came, then true. The change calls for no cycle;
	 * a take leaves the key for the next one (an API write hands over
	 * its decoding when it answers, and kicks a cycle then). */
	json_t *own;
	sc_strmap_t seen; /* keys -> index (borrowed from keys) */
	bool full;        /* the next take hands over everything */
	uint64_t generation;
};

static const char *const plurals[SC_RANKS] = {
    "nodes", "queues", "priorityclasses", "jobs", "deployments", "schedulerconfigs", "topologies"};

static int rank_of(const sc_kind_t *k)
{
	for (int r = 0; r < SC_RANKS; r++)
		if (strcmp(k->plural, plurals[r]) == 0)
			return r;
	return -1;
}

/* Notes key (once); its index. */
static long note(sc_feed_t *f, const char *key)
{
	long i = sc_strmap_get(&f->seen, key);
	if (i < 0) {
		if (f->n == f->cap) {
			f->cap = f->cap ? f->cap * 2 : 256;
			f->keys = sc_xreallocarray(f->keys, f->cap, sizeof(*f->keys));
			f->wanted = sc_xreallocarray(f->wanted, f->cap, sizeof(*f->wanted));
		}
		f->keys[f->n] = sc_xstrdup(key);
		f->wanted[f->n] = false;
		if (sc_strmap_put(&f->seen, f->keys[f->n], (uint32_t)f->n) < 0)
			sc_oom();
		i = (long)f->n++;
	}
	return i;
}

static void on_change(void *ud, const sc_kind_t *k, const char *key, int deleted)
{
	sc_feed_t *f = ud;
	(void)deleted;
	if (rank_of(k) < 0 || f->full)
		return;
	long i = note(f, key);
	/* The loop's own writes only bring the world up to date with what
	 * it decided: the next cycle takes them in, but they need none. Any
	 * other change is a reason to schedule: the cycle runs soon
	 * (debounced), whoever made it (the API, an agent's report, another
	 * server's write seen through etcd's change feed). */
	if (f->quiet || f->wanted[i])
		return;
	json_t *own = json_object_get(f->own, key);
	if (json_is_false(own)) {
		json_object_set_new(f->own, key, json_true());
		return;
	}
	f->wanted[i] = true;
	f->nwanted++;
	sc__sched_kick(f->s);
}

void sc__feed_quiet(sc_feed_t *f, bool on)
{
	f->quiet = on;
}

void sc__feed_own(sc_feed_t *f, const char *key)
{
	json_object_set_new(f->own, key, json_false());
}

void sc__feed_own_end(sc_feed_t *f, const char *key)
{
	json_object_del(f->own, key);
}

void sc__feed_writer_done(sc_feed_t *f, const char *key)
{
	sc__feed_own_end(f, key);
	/* A key noted while an API write of it was in flight calls for no
	 * cycle (the writer kicks one when it answers) and a take leaves it
	 * for the next one. A write the store refused (a create that found
	 * the object, a conflict) kicks nothing: the change noted meanwhile
	 * (the first create of `POST; POST -> 409`, taken while the second was
	 * in flight) would then wait for the safety cycle, 10 s or more. It
	 * calls for a cycle now. */
	long i = f->full ? -1 : sc_strmap_get(&f->seen, key);
	if (i < 0 || f->wanted[i])
		return;
	f->wanted[i] = true;
	f->nwanted++;
	sc__sched_kick(f->s);
}

static void forget(sc_feed_t *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->keys[i]);
	f->n = f->nwanted = 0;
	sc_strmap_free(&f->seen);
}

sc_feed_t *sc__feed_new(sc_server_t *s)
{
	sc_feed_t *f = sc_xcalloc(1, sizeof(*f));
	f->s = s;
	f->full = true;
	f->own = sc_xcheck(json_object());
	f->generation = sc__cache_generation(s->cache);
	sc__cache_hook(s->cache, on_change, f);
	return f;
}

void sc__feed_free(sc_feed_t *f)
{
	if (!f)
		return;
	if (f->s->cache)
		sc__cache_hook(f->s->cache, NULL, f);
	forget(f);
	json_decref(f->own);
	free(f->keys);
	free(f->wanted);
	free(f);
}

size_t sc__feed_pending(const sc_feed_t *f)
{
	return f->full ? 1 : f->nwanted;
}

static sc_change_t *add(sc_changes_t *c)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 256;
		c->v = sc_xreallocarray(c->v, c->cap, sizeof(*c->v));
	}
	sc_change_t *ch = &c->v[c->n++];
	memset(ch, 0, sizeof(*ch));
	return ch;
}

/* The change of one cached object: its text at its revision, and the
 * API's decoding when the writer left one. */
static void take_obj(sc_changes_t *c, int rank, sc_cobj_t *o)
{
	/* The cache's own text, shared: the world keeps it without a copy. */
	char *text = sc__cache_text_ref(o);
	if (!text)
		return; /* not JSON: never written by this server */
	sc_change_t *ch = add(c);
	ch->rank = rank;
	ch->key = sc_xstrdup(o->key);
	ch->mod_rev = o->mod_rev;
	ch->text = text;
	ch->pre = sc__cache_take_decoded(o, ch->pre_vh);
}

/* Every cached object of the scheduler's kinds, in rank then key order. */
static void take_all(sc_feed_t *f, sc_changes_t *c)
{
	for (int r = 0; r < SC_RANKS; r++) {
		const sc_kind_t *k = sc__kind_by_plural(plurals[r], strlen(plurals[r]));
		size_t n;
		sc_cobj_t *const *v = sc__cache_items(f->s->cache, k, &n);
		for (size_t i = 0; i < n; i++)
			take_obj(c, r, v[i]);
	}
	c->full = true;
}

void sc__feed_take(sc_feed_t *f, sc_changes_t *c)
{
	sc__changes_free(c);
	uint64_t gen = sc__cache_generation(f->s->cache);
	if (gen != f->generation) {
		f->generation = gen;
		f->full = true;
	}
	if (f->full) {
		take_all(f, c);
		f->full = false;
		forget(f);
		return;
	}
	char **later = NULL; /* keys whose write is still in flight */
	size_t nlater = 0;
	for (size_t i = 0; i < f->n; i++) {
		const char *key = f->keys[i];
		if (json_object_get(f->own, key)) {
			later = sc_xreallocarray(later, nlater + 1, sizeof(*later));
			later[nlater++] = sc_xstrdup(key);
			continue;
		}
		const char *p = key + strlen(SC_KEY_PREFIX), *slash = strchr(p, '/');
		const sc_kind_t *k = slash ? sc__kind_by_plural(p, (size_t)(slash - p)) : NULL;
		int rank = k ? rank_of(k) : -1;
		if (rank < 0)
			continue;
		sc_cobj_t *o = (sc_cobj_t *)sc__cache_get(f->s->cache, k, slash + 1);
		if (o) {
			take_obj(c, rank, o);
			continue;
		}
		sc_change_t *ch = add(c);
		ch->rank = rank;
		ch->key = f->keys[i];
		f->keys[i] = NULL; /* taken */
	}
	forget(f);
	for (size_t i = 0; i < nlater; i++) {
		note(f, later[i]); /* for the next take; the writer kicks it */
		free(later[i]);
	}
	free(later);
}

void sc__changes_free(sc_changes_t *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].key);
		sc_rtext_unref(c->v[i].text);
		free(c->v[i].why);
		free(c->v[i].address);
		free(c->v[i].plain_reason);
		sc_manifest_obj_free(c->v[i].pre);
	}
	free(c->v);
	memset(c, 0, sizeof(*c));
}
