/* The server's in-memory cache of API objects (nodes, queues, priority
 * classes, jobs, deployments, events).
 *
 * Filled once from the store at start-up, then kept current by a store
 * watch: every committed change (put or delete) reaches the cache before
 * the write that made it returns (SQLite: inside it; etcd: the store
 * answers a call only once its watch has delivered the revision, store.h),
 * so a read after a write always sees it, and every read (GET, list,
 * watch, the scheduling loop) is served from here with either store. A
 * write by another server (etcd) arrives through the watch, a moment
 * later. Each
 * object is parsed at most once per revision, on first use, or not at all
 * when the writer hands over its own parsed copy (sc__cache_adopt: the API
 * and the scheduling loop do); its answer bytes (the object with
 * metadata.resourceVersion) are serialised at most once per revision, on
 * first use, and shared by every get and list that sends them; a job's or
 * deployment's are spliced from its stored text for each call instead,
 * and not kept (the text is kept once, shared with the scheduling loop).
 *
 * Threading: the cache belongs to the event-loop thread. A cached json_t is
 * never modified after it is cached (a change replaces it), so a cycle on a
 * worker thread may read the objects it took references to (jansson's
 * reference counts and read-only calls are thread-safe).
 *
 * Memory: one entry per stored object; the store bounds how many there are
 * (events are trimmed to SC_EVENT_LIMIT). */
#ifndef SC_SERVER_CACHE_H
#define SC_SERVER_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "server/server.h"
#include "starcloud/manifest.h"

typedef struct sc_cache sc_cache_t;

/* Serialised answer bytes of one object revision, shared by reference:
 * data[len] is '\n' (so a single GET sends len + 1 bytes). */
typedef struct sc_wire {
	size_t refs;
	size_t len;
	char data[];
} sc_wire_t;

typedef struct sc_cobj {
	const sc_kind_t *kind;
	char *key;        /* owned: /registry/<plural>/<name> */
	const char *name; /* points into key */
	json_t *obj;      /* owned reference; immutable (stored form, no resourceVersion);
	                   * NULL until parsed: use sc__cache_obj() */
	char *text;       /* one reference (base/rtext.h): the stored value until
	                   * it is parsed; the scheduling loop shares it */
	int64_t mod_rev, create_rev;
	sc_wire_t *wire; /* owned reference; NULL until first needed */
	/* Owned, or NULL: this revision as the manifest decoder made it when
	 * the API validated it, kept for the scheduling loop to take
	 * (sc__cache_take_decoded) so a new job is decoded only once. */
	sc_manifest_obj_t *decoded;
	uint64_t decoded_vh[2]; /* its decoder view's digest (sc__view_digest) */
	char *queue;            /* owned: spec.queue of a job or deployment, or NULL */
} sc_cobj_t;

/* Loads every object of the API kinds and starts following the store. */
int sc__cache_open(sc_store_t *st, sc_cache_t **out);
/* Stops following and frees everything; accepts NULL. Wire bytes still
 * referenced elsewhere stay valid until their last sc__wire_unref. */
void sc__cache_close(sc_cache_t *c);
/* Reads every object from the store again (the store undid writes the
 * cache had taken in: a failed commit). Entries are replaced: pointers to
 * them from before are invalid, references to their json and wire bytes
 * stay valid. The listener is not called. */
int sc__cache_reload(sc_cache_t *c);

/* The object, or NULL. Valid until the next store write. */
const sc_cobj_t *sc__cache_get(const sc_cache_t *c, const sc_kind_t *k, const char *name);
/* Objects of kind k sorted by name; *n receives the count. Valid until the
 * next store write. */
sc_cobj_t *const *sc__cache_items(const sc_cache_t *c, const sc_kind_t *k, size_t *n);
/* Index of the first object of kind k whose name sorts after `after`. */
size_t sc__cache_after(const sc_cache_t *c, const sc_kind_t *k, const char *after);
/* How many objects of kind k (jobs or deployments) name queue in
 * spec.queue: the per-queue limits (api.c) read this, not a scan. */
size_t sc__cache_queue_count(const sc_cache_t *c, const sc_kind_t *k, const char *queue);
/* The store revision the cache reflects. */
int64_t sc__cache_rev(const sc_cache_t *c);
/* Tokens: the principal a token digest (64 hex) resolved to, so a request
 * does not read and parse its token record. Any change under
 * /registry/tokens/ empties this (revocation takes effect with the write
 * that deletes the token). 1 = found. */
int sc__cache_token_get(const sc_cache_t *c, const char *digest, sc_principal_t *who);
/* The stored record of token id (the key after /registry/tokens/), or
 * NULL: every token's is kept (there are few), so authentication never
 * waits for the store. Borrowed until the next change. */
const char *sc__cache_token_record(const sc_cache_t *c, const char *id);
/* fn with each token record, in id order. */
void sc__cache_token_records(const sc_cache_t *c, void (*fn)(const char *text, void *ud), void *ud);
void sc__cache_token_put(sc_cache_t *c, const char *digest, const sc_principal_t *who);

/* The object's parsed form (parsed on first use; borrowed from o), or NULL
 * for a value that is not a JSON object (never written by this server). */
json_t *sc__cache_obj(sc_cobj_t *o);
/* The object parsed (a new reference), or NULL as sc__cache_obj. A job's
 * or deployment's tree is not kept in the cache (its text is: several
 * times smaller), so a reader that looks at a few fields of many of them
 * (lists and watches with a filter, scans) does not grow a tree per job;
 * other kinds' trees are kept as by sc__cache_obj. */
json_t *sc__cache_parse(sc_cobj_t *o);
/* Hands the cache obj, the parsed form of the value just written under key
 * at mod_rev, so the write's own parse is reused; the cache takes a
 * reference (jobs and deployments keep their stored text instead, which is
 * smaller) and obj must never change again. answer = 1 when the writer is
 * about to answer with the object: its answer bytes are then made from the
 * stored text (no second serialisation; for the kinds whose tree is kept,
 * before the text goes). Returns the entry, or NULL when
 * the cache holds another revision. */
sc_cobj_t *sc__cache_adopt(sc_cache_t *c, const char *key, int64_t mod_rev, json_t *obj,
                           int answer);

/* Gives entry o (returned by sc__cache_adopt) the decoded form of its
 * revision, one: what sc__validate_decode made of the object the writer
 * stored. Takes one; accepts NULL. */
void sc__cache_give_decoded(sc_cobj_t *o, sc_manifest_obj_t *one, const uint64_t vh[2]);
/* Takes o's decoded form away (the caller owns it), or NULL; vh gets its
 * view's digest. */
sc_manifest_obj_t *sc__cache_take_decoded(sc_cobj_t *o, uint64_t vh[2]);
/* The stored text of o at its revision, exactly as stored (a follower
 * compares it byte for byte), as a shared string (base/rtext.h): a new
 * reference to o's own text, or a new one made from its parsed form; NULL
 * for a value that is not a JSON object. The caller drops it with
 * sc_rtext_unref, on any thread. */
char *sc__cache_text_ref(sc_cobj_t *o);

/* A follower of the cache's changes (the scheduling loop's feed): called on
 * the loop thread for each object of kind k the cache took in (put or
 * deleted), after the cache holds the change. */
typedef void (*sc_cache_hook_fn)(void *ud, const sc_kind_t *k, const char *key, int deleted);
/* At most SC_CACHE_HOOKS followers; fn NULL removes ud's. */
#define SC_CACHE_HOOKS 4
void sc__cache_hook(sc_cache_t *c, sc_cache_hook_fn fn, void *ud);
/* Grows each time the cache is read whole again: a follower then starts
 * over from every object. */
uint64_t sc__cache_generation(const sc_cache_t *c);

/* The object's answer bytes, a new reference (sc__wire_unref), or NULL
 * for a value that is not a JSON object (never written by this server).
 * Kept in o and shared by every caller for the kinds few of which exist;
 * made for the call from the stored text for jobs and deployments, whose
 * text is what the cache keeps. */
sc_wire_t *sc__cache_wire_ref(sc_cobj_t *o);
/* o's answer bytes with metadata.resourceVersion rev instead of its own
 * (a deletion's event carries the deletion's revision). New reference. */
sc_wire_t *sc__cache_wire_at(sc_cobj_t *o, int64_t rev);
/* Answer bytes made from a stored value (compact JSON text) at rev, or
 * NULL when text is not a JSON object. New reference. */
sc_wire_t *sc__wire_from_text(const char *text, int64_t rev);

/* A change the cache took in: type is SC_EV_ADDED/MODIFIED (o is the new
 * entry) or SC_EV_DELETED (o is the entry about to go; rev the deletion's
 * revision). o is borrowed for the call. Called on the loop thread inside
 * the store write that made the change, after the cache holds it. */
typedef void (*sc_cache_listener_fn)(void *ud, int type, sc_cobj_t *o, int64_t rev);
/* One listener (the watch fan-out, watch.c); fn NULL removes it. */
void sc__cache_listen(sc_cache_t *c, sc_cache_listener_fn fn, void *ud);
sc_wire_t *sc__wire_ref(sc_wire_t *w);
void sc__wire_unref(sc_wire_t *w);

#endif
