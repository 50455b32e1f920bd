/* In-memory cache of API objects, kept current by a store watch (cache.h).
 *
 * Each kind is one array of entries sorted by name: lookups are binary
 * searches, lists walk it in key order (the store's order), and a new name
 * costs one memmove of pointers, which at 10,000 objects is a few
 * microseconds, less than the parse the change needs anyway. */
#include "server/cache.h"
#include "base/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jscan.h"
#include "base/rtext.h"
#include "starcloud/error.h"

static const char *const cached_plurals[] = {"nodes",     "queues",           "priorityclasses",
                                             "jobs",      "deployments",      "events",
                                             "nodepools", "schedulerconfigs", "topologies"};
#define NCACHED (sizeof(cached_plurals) / sizeof(cached_plurals[0]))

/* Tokens remembered (direct-mapped by digest); a principal is ~8 KiB. */
#define TOKEN_SLOTS 64

typedef struct token_slot {
	char digest[65]; /* "" = empty */
	sc_principal_t who;
} token_slot_t;

/* A token's stored record (its digest, role, queues), by id: there are few
 * enough to keep them all, so authentication never reads the store. */
typedef struct trec {
	char *id;   /* owned: the key after TOKENS */
	char *text; /* owned: the stored JSON */
} trec_t;

#define TOKENS SC_KEY_PREFIX "tokens/"

/* Jobs and deployments per queue (the per-queue object limits). */
typedef struct qcount {
	char *name;
	size_t n[2]; /* jobs, deployments */
} qcount_t;

typedef struct kindset {
	const sc_kind_t *kind;
	sc_cobj_t **v; /* sorted by name */
	size_t n, cap;
} kindset_t;

struct sc_cache {
	sc_store_t *st;
	sc_store_watch_t *watch;
	kindset_t sets[NCACHED];
	int64_t rev;
	token_slot_t tokens[TOKEN_SLOTS];
	trec_t *trecs; /* sorted by id */
	size_t ntrec, captrec;
	sc_cache_listener_fn listener;
	void *listener_ud;
	qcount_t *qc;
	size_t nqc, capqc;
	struct {
		sc_cache_hook_fn fn;
		void *ud;
	} hooks[SC_CACHE_HOOKS];
	uint64_t generation;
};

/* 0 for jobs, 1 for deployments, -1 for kinds not counted per queue. */
static int counted(const sc_kind_t *k)
{
	if (!k->queue_scoped)
		return -1;
	return strcmp(k->plural, "jobs") == 0 ? 0 : 1;
}

/* spec.queue of a stored value, found without parsing the whole object
 * (a job may be a megabyte of text); NULL when there is none. */
static char *queue_of_text(const char *text)
{
	static const char *const spec_key[] = {"spec"}, *const queue_key[] = {"queue"};
	sc_jval_t spec, q;
	char name[SC_MAX_NAME + 1];
	if (sc_jscan_object(text, strlen(text), spec_key, 1, &spec) < 0 ||
	    spec.type != SC_JT_OBJECT ||
	    sc_jscan_object(spec.text, spec.len, queue_key, 1, &q) < 0 ||
	    sc_jscan_string(&q, name, sizeof(name)) < 0)
		return NULL;
	return sc_xstrdup(name);
}

static qcount_t *qcount_of(sc_cache_t *c, const char *queue, int create)
{
	for (size_t i = 0; i < c->nqc; i++)
		if (strcmp(c->qc[i].name, queue) == 0)
			return &c->qc[i];
	if (!create)
		return NULL;
	if (c->nqc == c->capqc) {
		c->capqc = c->capqc ? c->capqc * 2 : 16;
		c->qc = sc_xreallocarray(c->qc, c->capqc, sizeof(*c->qc));
	}
	c->qc[c->nqc] = (qcount_t){.name = sc_xstrdup(queue)};
	return &c->qc[c->nqc++];
}

static void count(sc_cache_t *c, const sc_cobj_t *o, int delta)
{
	int k = counted(o->kind);
	if (k < 0 || !o->queue)
		return;
	qcount_t *q = qcount_of(c, o->queue, delta > 0);
	if (q)
		q->n[k] += (size_t)delta; /* wraps back for -1: counts never go below 0 */
}

static void qcounts_free(sc_cache_t *c)
{
	for (size_t i = 0; i < c->nqc; i++)
		free(c->qc[i].name);
	free(c->qc);
	c->qc = NULL;
	c->nqc = c->capqc = 0;
}

size_t sc__cache_queue_count(const sc_cache_t *c, const sc_kind_t *k, const char *queue)
{
	int i = counted(k);
	const qcount_t *q = i >= 0 && queue ? qcount_of((sc_cache_t *)c, queue, 0) : NULL;
	return q ? q->n[i] : 0;
}

static kindset_t *set_of(const sc_cache_t *c, const sc_kind_t *k)
{
	for (size_t i = 0; i < NCACHED; i++)
		if (c->sets[i].kind == k)
			return (kindset_t *)&c->sets[i];
	return NULL;
}

/* The kind set a key belongs to (/registry/<plural>/<name>), or NULL. */
static kindset_t *set_of_key(sc_cache_t *c, const char *key, const char **name)
{
	size_t plen = strlen(SC_KEY_PREFIX);
	if (strncmp(key, SC_KEY_PREFIX, plen) != 0)
		return NULL;
	const char *p = key + plen, *slash = strchr(p, '/');
	if (!slash || !slash[1])
		return NULL;
	const sc_kind_t *k = sc__kind_by_plural(p, (size_t)(slash - p));
	*name = slash + 1;
	return k ? set_of(c, k) : NULL;
}

/* Index of name among the n names name_at(ctx, i) gives (sorted by
 * strcmp), or of where it would go (*found says which). One binary search
 * for both sorted arrays, objects by name and token records by id. */
static size_t name_search(const void *ctx, size_t n, const char *(*name_at)(const void *, size_t),
                          const char *name, int *found)
{
	size_t lo = 0, hi = n;
	*found = 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int cmp = strcmp(name_at(ctx, mid), name);
		if (cmp == 0) {
			*found = 1;
			return mid;
		}
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const char *obj_name_at(const void *ctx, size_t i)
{
	return ((const kindset_t *)ctx)->v[i]->name;
}

/* Index of name in ks, or of where it would go (*found says which). */
static size_t search(const kindset_t *ks, const char *name, int *found)
{
	return name_search(ks, ks->n, obj_name_at, name, found);
}

static void entry_free(sc_cobj_t *o)
{
	if (!o)
		return;
	free(o->key);
	sc_rtext_unref(o->text);
	json_decref(o->obj);
	sc__wire_unref(o->wire);
	sc_manifest_obj_free(o->decoded);
	free(o->queue);
	free(o);
}

static void remove_at(kindset_t *ks, size_t i)
{
	entry_free(ks->v[i]);
	memmove(&ks->v[i], &ks->v[i + 1], (ks->n - i - 1) * sizeof(*ks->v));
	ks->n--;
}

static void insert_at(kindset_t *ks, size_t i, sc_cobj_t *o)
{
	if (ks->n == ks->cap) {
		ks->cap = ks->cap ? ks->cap * 2 : 64;
		ks->v = sc_xreallocarray(ks->v, ks->cap, sizeof(*ks->v));
	}
	memmove(&ks->v[i + 1], &ks->v[i], (ks->n - i) * sizeof(*ks->v));
	ks->v[i] = o;
	ks->n++;
}

/* Puts a new revision of key, kept as text until someone needs it parsed
 * (or the writer hands over its parsed copy). Returns the new entry, or
 * NULL when it was not taken. */
static sc_cobj_t *cache_put(sc_cache_t *c, const char *key, const char *value, int64_t mod_rev,
                            int64_t create_rev)
{
	const char *name;
	kindset_t *ks = set_of_key(c, key, &name);
	if (!ks)
		return NULL;
	int found;
	size_t i = search(ks, name, &found);
	if (found && ks->v[i]->mod_rev >= mod_rev)
		return NULL; /* a replayed change we already hold */
	sc_cobj_t *o = sc_xcalloc(1, sizeof(*o));
	o->key = sc_xstrdup(key);
	o->text = sc_rtext_new(value);
	o->kind = ks->kind;
	o->name = o->key + (name - key);
	o->mod_rev = mod_rev;
	o->create_rev = create_rev;
	if (counted(ks->kind) >= 0)
		o->queue = queue_of_text(value);
	count(c, o, 1);
	if (found) {
		o->create_rev = ks->v[i]->create_rev;
		count(c, ks->v[i], -1);
		entry_free(ks->v[i]);
		ks->v[i] = o;
	} else {
		insert_at(ks, i, o);
	}
	return o;
}

static void cache_delete(sc_cache_t *c, const char *key, int64_t rev)
{
	const char *name;
	kindset_t *ks = set_of_key(c, key, &name);
	int found;
	if (!ks)
		return;
	size_t i = search(ks, name, &found);
	if (!found)
		return;
	if (c->listener)
		c->listener(c->listener_ud, SC_EV_DELETED, ks->v[i], rev);
	count(c, ks->v[i], -1);
	remove_at(ks, i);
}

void sc__cache_listen(sc_cache_t *c, sc_cache_listener_fn fn, void *ud)
{
	c->listener = fn;
	c->listener_ud = ud;
}

/* ---- token records ---- */

static const char *trec_id_at(const void *ctx, size_t i)
{
	return ((const sc_cache_t *)ctx)->trecs[i].id;
}

static size_t trec_search(const sc_cache_t *c, const char *id, int *found)
{
	return name_search(c, c->ntrec, trec_id_at, id, found);
}

/* text NULL: the token is gone. */
static void trec_set(sc_cache_t *c, const char *id, const char *text)
{
	int found;
	size_t i = trec_search(c, id, &found);
	if (found) {
		free(c->trecs[i].text);
		if (text) {
			c->trecs[i].text = sc_xstrdup(text);
			return;
		}
		free(c->trecs[i].id);
		memmove(&c->trecs[i], &c->trecs[i + 1], (c->ntrec - i - 1) * sizeof(*c->trecs));
		c->ntrec--;
		return;
	}
	if (!text)
		return;
	if (c->ntrec == c->captrec) {
		c->captrec = c->captrec ? 2 * c->captrec : 16;
		c->trecs = sc_xreallocarray(c->trecs, c->captrec, sizeof(*c->trecs));
	}
	memmove(&c->trecs[i + 1], &c->trecs[i], (c->ntrec - i) * sizeof(*c->trecs));
	c->trecs[i] = (trec_t){sc_xstrdup(id), sc_xstrdup(text)};
	c->ntrec++;
}

static void trecs_free(sc_cache_t *c)
{
	for (size_t i = 0; i < c->ntrec; i++) {
		free(c->trecs[i].id);
		free(c->trecs[i].text);
	}
	c->ntrec = 0;
}

static int load_tokens(sc_cache_t *c)
{
	sc_kv_list_t l;
	int rc = sc_store_list(c->st, TOKENS, &l);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < l.n; i++)
		trec_set(c, l.items[i].key + strlen(TOKENS), l.items[i].value);
	sc_kv_list_free(&l);
	return 0;
}

const char *sc__cache_token_record(const sc_cache_t *c, const char *id)
{
	int found;
	size_t i = trec_search(c, id, &found);
	return found ? c->trecs[i].text : NULL;
}

void sc__cache_token_records(const sc_cache_t *c, void (*fn)(const char *text, void *ud), void *ud)
{
	for (size_t i = 0; i < c->ntrec; i++)
		fn(c->trecs[i].text, ud);
}

static void on_change(const sc_store_event_t *ev, void *ud)
{
	sc_cache_t *c = ud;
	if (strncmp(ev->key, TOKENS, strlen(TOKENS)) == 0) {
		for (size_t i = 0; i < TOKEN_SLOTS; i++)
			c->tokens[i].digest[0] = '\0';
		trec_set(c, ev->key + strlen(TOKENS), ev->type == SC_EV_DELETED ? NULL : ev->value);
	}
	const char *name;
	if (ev->rev > c->rev)
		c->rev = ev->rev;
	kindset_t *ks = set_of_key(c, ev->key, &name);
	if (!ks)
		return;
	if (ev->type == SC_EV_DELETED) {
		cache_delete(c, ev->key, ev->rev);
	} else {
		sc_cobj_t *o = cache_put(c, ev->key, ev->value, ev->rev, ev->rev);
		if (o && c->listener)
			c->listener(c->listener_ud, ev->type, o, ev->rev);
	}
	for (size_t i = 0; i < SC_CACHE_HOOKS; i++)
		if (c->hooks[i].fn)
			c->hooks[i].fn(c->hooks[i].ud, ks->kind, ev->key,
			               ev->type == SC_EV_DELETED);
}

void sc__cache_hook(sc_cache_t *c, sc_cache_hook_fn fn, void *ud)
{
	for (size_t i = 0; i < SC_CACHE_HOOKS; i++)
		if (c->hooks[i].ud == ud && c->hooks[i].fn) {
			c->hooks[i].fn = fn;
			return;
		}
	for (size_t i = 0; fn && i < SC_CACHE_HOOKS; i++)
		if (!c->hooks[i].fn) {
			c->hooks[i].fn = fn;
			c->hooks[i].ud = ud;
			return;
		}
}

uint64_t sc__cache_generation(const sc_cache_t *c)
{
	return c->generation;
}

static int load_kind(sc_cache_t *c, kindset_t *ks, int64_t *rev)
{
	char prefix[64];
	sc_kv_list_t l;
	snprintf(prefix, sizeof(prefix), SC_KEY_PREFIX "%s/", ks->kind->plural);
	int rc = sc_store_list(c->st, prefix, &l);
	if (rc < 0)
		return rc;
	/* The store lists in key order, so every insert is an append. */
	for (size_t i = 0; i < l.n; i++)
		cache_put(c, l.items[i].key, l.items[i].value, l.items[i].mod_rev,
		          l.items[i].create_rev);
	*rev = l.rev;
	sc_kv_list_free(&l);
	return 0;
}

int sc__cache_open(sc_store_t *st, sc_cache_t **out)
{
	sc_cache_t *c = sc_calloc(1, sizeof(*c));
	int rc = 0;
	if (!c)
		return SC_ENOMEM;
	c->st = st;
	for (size_t i = 0; i < NCACHED && rc == 0; i++) {
		c->sets[i].kind = sc__kind_by_plural(cached_plurals[i], strlen(cached_plurals[i]));
		rc = load_kind(c, &c->sets[i], &c->rev);
	}
	if (rc == 0)
		rc = load_tokens(c);
	/* Lists and watch run on the one thread that writes, so no change
	 * falls between them; the watch replays nothing and then follows. */
	if (rc == 0)
		rc = sc_store_watch(st, SC_KEY_PREFIX, c->rev, on_change, c, &c->watch);
	if (rc < 0) {
		sc__cache_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

int sc__cache_reload(sc_cache_t *c)
{
	int rc = 0;
	int64_t rev = 0;
	qcounts_free(c);
	for (size_t i = 0; i < NCACHED; i++) {
		kindset_t *ks = &c->sets[i];
		for (size_t j = 0; j < ks->n; j++)
			entry_free(ks->v[j]);
		ks->n = 0;
		if (rc == 0)
			rc = load_kind(c, ks, &rev);
	}
	for (size_t i = 0; i < TOKEN_SLOTS; i++)
		c->tokens[i].digest[0] = '\0';
	trecs_free(c);
	if (rc == 0)
		rc = load_tokens(c);
	if (rc == 0)
		c->rev = rev;
	c->generation++; /* followers start over from every object */
	return rc;
}

void sc__cache_close(sc_cache_t *c)
{
	if (!c)
		return;
	if (c->watch)
		sc_store_unwatch(c->st, c->watch);
	for (size_t i = 0; i < NCACHED; i++) {
		for (size_t j = 0; j < c->sets[i].n; j++)
			entry_free(c->sets[i].v[j]);
		free(c->sets[i].v);
	}
	qcounts_free(c);
	trecs_free(c);
	free(c->trecs);
	free(c);
}

const sc_cobj_t *sc__cache_get(const sc_cache_t *c, const sc_kind_t *k, const char *name)
{
	const kindset_t *ks = set_of(c, k);
	int found;
	if (!ks)
		return NULL;
	size_t i = search(ks, name, &found);
	return found ? ks->v[i] : NULL;
}

sc_cobj_t *const *sc__cache_items(const sc_cache_t *c, const sc_kind_t *k, size_t *n)
{
	const kindset_t *ks = set_of(c, k);
	*n = ks ? ks->n : 0;
	return ks ? ks->v : NULL;
}

size_t sc__cache_after(const sc_cache_t *c, const sc_kind_t *k, const char *after)
{
	const kindset_t *ks = set_of(c, k);
	int found;
	if (!ks)
		return 0;
	size_t i = search(ks, after, &found);
	return found ? i + 1 : i;
}

int64_t sc__cache_rev(const sc_cache_t *c)
{
	return c->rev;
}

static size_t token_slot(const char *digest)
{
	/* The first two hex digits of a SHA-256 digest. */
	size_t v = 0;
	for (int i = 0; i < 2 && digest[i]; i++) {
		char c = digest[i];
		v = v * 16 + (size_t)(c >= 'a' ? c - 'a' + 10 : c >= 'A' ? c - 'A' + 10 : c - '0');
	}
	return v % TOKEN_SLOTS;
}

int sc__cache_token_get(const sc_cache_t *c, const char *digest, sc_principal_t *who)
{
	const token_slot_t *t = &c->tokens[token_slot(digest)];
	unsigned char d = 0;
	if (strlen(digest) != 64 || !t->digest[0])
		return 0;
	for (size_t i = 0; i < 64; i++) /* constant time, like the store path */
		d |= (unsigned char)(t->digest[i] ^ digest[i]);
	if (d)
		return 0;
	*who = t->who;
	return 1;
}

void sc__cache_token_put(sc_cache_t *c, const char *digest, const sc_principal_t *who)
{
	if (strlen(digest) != 64)
		return;
	token_slot_t *t = &c->tokens[token_slot(digest)];
	memcpy(t->digest, digest, 65);
	t->who = *who;
}

json_t *sc__cache_obj(sc_cobj_t *o)
{
	if (!o->obj && o->text) {
		o->obj = json_loads(o->text, 0, NULL);
		if (!json_is_object(o->obj)) {
			json_decref(o->obj);
			o->obj = NULL;
		}
		sc_rtext_unref(o->text);
		o->text = NULL;
	}
	return o->obj;
}

static sc_wire_t *wire_new(size_t len)
{
	sc_wire_t *w = sc_xmalloc(sizeof(*w) + len + 1);
	w->refs = 1;
	w->len = len;
	w->data[len] = '\n';
	return w;
}

/* The answer bytes made from the stored text (compact JSON from
 * json_dumps, with metadata, which has no resourceVersion) by inserting
 * resourceVersion as metadata's last member: what make_wire would print,
 * without printing the tree again. NULL when the text is not of that
 * shape; make_wire then does it the long way. */
static sc_wire_t *splice_wire(const char *text, int64_t mod_rev)
{
	static const char *const keys[] = {"metadata"};
	sc_jval_t md;
	size_t len = strlen(text);
	if (sc_jscan_object(text, len, keys, 1, &md) < 0 || md.type != SC_JT_OBJECT)
		return NULL;
	char rv[64];
	int n = snprintf(rv, sizeof(rv), "%s\"resourceVersion\":\"%lld\"", md.len > 2 ? "," : "",
	                 (long long)mod_rev);
	size_t at = (size_t)(md.text + md.len - 1 - text); /* metadata's closing brace */
	sc_wire_t *w = wire_new(len + (size_t)n);
	memcpy(w->data, text, at);
	memcpy(w->data + at, rv, (size_t)n);
	memcpy(w->data + at + n, text + at, len - at);
	return w;
}

sc_cobj_t *sc__cache_adopt(sc_cache_t *c, const char *key, int64_t mod_rev, json_t *obj, int answer)
{
	const char *name;
	kindset_t *ks = set_of_key(c, key, &name);
	int found;
	if (!ks || !obj)
		return NULL;
	size_t i = search(ks, name, &found);
	sc_cobj_t *o = found ? ks->v[i] : NULL;
	if (!o || o->mod_rev != mod_rev)
		return NULL;
	/* Jobs and deployments keep their text (several times smaller than
	 * its tree, and the scheduling loop's feed takes it as it is): the
	 * answer bytes are made from it when asked for (sc__cache_wire_ref);
	 * the tree is kept only for the kinds few of which exist. */
	if (answer && !o->wire && o->text && !o->kind->queue_scoped)
		o->wire = splice_wire(o->text, o->mod_rev);
	if (!o->obj && (!o->text || !o->kind->queue_scoped)) {
		o->obj = json_incref(obj);
		sc_rtext_unref(o->text);
		o->text = NULL;
	}
	return o;
}

json_t *sc__cache_parse(sc_cobj_t *o)
{
	if (o->obj || !o->kind->queue_scoped)
		return json_incref(sc__cache_obj(o));
	json_t *obj = o->text ? json_loads(o->text, 0, NULL) : NULL;
	if (!json_is_object(obj)) {
		json_decref(obj);
		return NULL;
	}
	return obj;
}

void sc__cache_give_decoded(sc_cobj_t *o, sc_manifest_obj_t *one, const uint64_t vh[2])
{
	sc_manifest_obj_free(o->decoded);
	o->decoded = one;
	memcpy(o->decoded_vh, vh, sizeof(o->decoded_vh));
}

sc_manifest_obj_t *sc__cache_take_decoded(sc_cobj_t *o, uint64_t vh[2])
{
	sc_manifest_obj_t *one = o->decoded;
	memcpy(vh, o->decoded_vh, sizeof(o->decoded_vh));
	o->decoded = NULL;
	return one;
}

/* The stored text (borrowed from o, or made from its parsed form into
 * tmp, which the caller frees). */
static const char *cache_text(sc_cobj_t *o, char **tmp)
{
	*tmp = NULL;
	if (o->text)
		return o->text;
	/* Parsed and handed over by its writer, which stored it with the
	 * same compact dump. */
	*tmp = o->obj ? json_dumps(o->obj, JSON_COMPACT) : NULL;
	return *tmp;
}

char *sc__cache_text_ref(sc_cobj_t *o)
{
	char *tmp;
	const char *text = cache_text(o, &tmp);
	if (!tmp)
		return sc_rtext_ref(o->text);
	char *t = sc_rtext_new(text);
	free(tmp);
	return t;
}

/* The object as answered: metadata gains resourceVersion (last, as the
 * API always put it); the cached object itself is not touched. */
static sc_wire_t *make_wire(sc_cobj_t *o, int64_t rev)
{
	json_t *obj = sc__cache_parse(o);
	if (!obj)
		return NULL; /* not a JSON object: never written by this server */
	json_t *top = sc_xcheck(json_copy(obj)); /* shallow */
	json_t *md = json_copy(json_object_get(obj, "metadata"));
	json_decref(obj);
	char rv[32];
	snprintf(rv, sizeof(rv), "%lld", (long long)rev);
	if (json_is_object(md)) {
		json_object_set_new(md, "resourceVersion", json_string(rv));
		json_object_set_new(top, "metadata", md);
	} else {
		json_decref(md);
	}
	char *text = sc_xcheck(json_dumps(top, JSON_COMPACT));
	json_decref(top);
	size_t len = strlen(text);
	sc_wire_t *w = wire_new(len);
	memcpy(w->data, text, len);
	free(text);
	return w;
}

static sc_wire_t *cache_wire(sc_cobj_t *o)
{
	/* From the stored text when it has not been parsed: no tree to print
	 * (a watch event of a new revision usually comes here first). */
	if (!o->wire && o->text)
		o->wire = splice_wire(o->text, o->mod_rev);
	if (!o->wire)
		o->wire = make_wire(o, o->mod_rev);
	return o->wire;
}

sc_wire_t *sc__cache_wire_ref(sc_cobj_t *o)
{
	/* A job's or deployment's answer bytes are made for the caller and
	 * not kept: its text is, and splicing resourceVersion into it is a
	 * copy. Kept, they were a second copy of every job that was ever
	 * listed, watched or read (60 MB at 100,000 jobs, for good, after one
	 * client paged through them). */
	if (o->kind->queue_scoped && !o->wire && o->text) {
		sc_wire_t *w = splice_wire(o->text, o->mod_rev);
		return w ? w : make_wire(o, o->mod_rev);
	}
	sc_wire_t *w = cache_wire(o);
	return w ? sc__wire_ref(w) : NULL;
}

sc_wire_t *sc__cache_wire_at(sc_cobj_t *o, int64_t rev)
{
	sc_wire_t *w = o->text ? splice_wire(o->text, rev) : NULL;
	return w ? w : make_wire(o, rev);
}

sc_wire_t *sc__wire_from_text(const char *text, int64_t rev)
{
	sc_wire_t *w = splice_wire(text, rev);
	if (w)
		return w;
	sc_cobj_t tmp = {.text = sc_rtext_new(text), .mod_rev = rev};
	if (sc__cache_obj(&tmp))
		w = make_wire(&tmp, rev);
	json_decref(tmp.obj);
	sc_rtext_unref(tmp.text);
	return w;
}

sc_wire_t *sc__wire_ref(sc_wire_t *w)
{
	w->refs++;
	return w;
}

void sc__wire_unref(sc_wire_t *w)
{
	if (w && --w->refs == 0)
		free(w);
}
