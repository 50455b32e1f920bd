/* Schema of an etcd store: the version of the layout of its keys and
 * values, kept in the key <prefix>schema as
 *   {"version": V, "minReader": R, "writer": "starcloud X.Y.Z"}.
 *
 * Version 1 is the layout of the releases before the key existed (0.1): a
 * store with data and no key is version 1. Each binary knows one version,
 * ETCD_SCHEMA, and brings an older store forward at start, one migration
 * at a time. Each migration ends with a write of the key that is
 * conditional on the key's revision (or on its absence), so when two
 * servers start at once only one bumps each version; the other reads the
 * key again and finds the work done. A migration's own writes must
 * therefore be safe to repeat.
 *
 * minReader is the oldest version a server may know and still work on
 * this data. A migration that older servers can live with (a new optional
 * field, a new kind) keeps it, so a rolling upgrade can run old and new
 * servers side by side on one etcd; one they cannot raises it, and a
 * server that knows less than minReader refuses to start, changing
 * nothing, instead of writing data it misreads. A store whose version is
 * newer than this binary but whose minReader is not is used as it is (the
 * key is never moved backwards). The 0.1 servers read no key at all: a
 * release that raises minReader must say that every 0.1 server has to be
 * stopped first (docs/DEPLOY.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/version.h"
#include "base/log.h"
#include "starcloud/error.h"
#include "store/etcd_int.h"

/* One step forward: what version N+1 needs (NULL: only the key moves) and
 * the minReader from then on. Never edit a step that has shipped. */
typedef struct step {
	int (*run)(sc_etcd_conn_t *c, const char *prefix);
	int min_reader;
	const char *what;
} step_t;

static const step_t steps[] = {
    /* 1 -> 2: the layout of 0.1 unchanged; the store now says its
     * version. 0.1 servers still work on it. */
    {NULL, 1, "the store records its schema version"},
};

#define ETCD_SCHEMA ((int)(sizeof(steps) / sizeof(steps[0])) + 1)
#define MAX_ATTEMPTS 8

typedef struct schema_rec {
	int exists;
	int version, min_reader;
	int64_t mod_rev;
	char writer[64];
} schema_rec_t;

/* Reads the key. SC_EPARSE (with a message) when it holds something that
 * is not a schema record: that store was not written by us, or was
 * damaged, and is better left alone. */
static int read_rec(sc_etcd_conn_t *c, const char *key, schema_rec_t *r)
{
	json_t *req = json_object(), *resp = NULL;
	memset(r, 0, sizeof(*r));
	sc__etcd_set_b64(req, "key", key);
	int rc = sc__etcd_call(c, "/v3/kv/range", req, &resp);
	json_decref(req);
	if (rc < 0)
		return rc;
	json_t *kv = json_array_get(json_object_get(resp, "kvs"), 0);
	char *text = NULL;
	if (kv) {
		const char *v64 = json_string_value(json_object_get(kv, "value"));
		json_t *doc = NULL;
		rc = SC_EPARSE;
		if (v64 && sc__b64_dec(v64, &text, NULL) == 0)
			doc = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
		json_t *v = json_object_get(doc, "version"), *m = json_object_get(doc, "minReader");
		const char *w = json_string_value(json_object_get(doc, "writer"));
		if (json_is_integer(v) && json_is_integer(m) && json_integer_value(v) >= 1 &&
		    json_integer_value(v) <= 1000000 && json_integer_value(m) >= 1 &&
		    json_integer_value(m) <= json_integer_value(v)) {
			r->exists = 1;
			r->version = (int)json_integer_value(v);
			r->min_reader = (int)json_integer_value(m);
			r->mod_rev = sc__etcd_int(kv, "mod_revision");
			snprintf(r->writer, sizeof(r->writer), "%s", w ? w : "an unknown release");
			rc = 0;
		} else {
			sc_log_error("store: etcd key %s: expected {\"version\": N, \"minReader\": "
			             "M} with 1 <= M <= N, got %.200s; nothing was changed",
			             key, text ? text : "(undecodable)");
		}
		json_decref(doc);
	}
	free(text);
	json_decref(resp);
	return rc;
}

/* 1 when the store holds data (any key under <prefix>registry/). */
static int has_data(sc_etcd_conn_t *c, const char *prefix)
{
	char k[300], end[300];
	snprintf(k, sizeof(k), "%sregistry/", prefix);
	snprintf(end, sizeof(end), "%sregistry0", prefix); /* '/' + 1 */
	json_t *req = json_object(), *resp = NULL;
	sc__etcd_set_b64(req, "key", k);
	sc__etcd_set_b64(req, "range_end", end);
	json_object_set_new(req, "count_only", json_true());
	int rc = sc__etcd_call(c, "/v3/kv/range", req, &resp);
	json_decref(req);
	if (rc == 0)
		rc = sc__etcd_int(resp, "count") > 0;
	json_decref(resp);
	return rc;
}

/* Writes the record for version, conditional on the key being as read.
 * 1 when written, 0 when someone else changed the key first. */
static int write_rec(sc_etcd_conn_t *c, const char *key, const schema_rec_t *was, int version,
                     int min_reader)
{
	char value[160];
	snprintf(value, sizeof(value),
	         "{\"version\":%d,\"minReader\":%d,\"writer\":\"starcloud %s\"}", version,
	         min_reader, SC_VERSION);
	json_t *cmp = json_object(), *put = json_object(), *resp = NULL;
	sc__etcd_set_b64(cmp, "key", key);
	if (was->exists) {
		json_object_set_new(cmp, "target", json_string("MOD"));
		sc__etcd_set_int(cmp, "mod_revision", was->mod_rev);
	} else {
		json_object_set_new(cmp, "target", json_string("CREATE"));
		sc__etcd_set_int(cmp, "create_revision", 0);
	}
	json_object_set_new(cmp, "result", json_string("EQUAL"));
	sc__etcd_set_b64(put, "key", key);
	sc__etcd_set_b64(put, "value", value);
	json_t *req = json_pack("{s:[o],s:[{s:o}]}", "compare", cmp, "success", "request_put", put);
	int rc = sc__etcd_call(c, "/v3/kv/txn", req, &resp);
	json_decref(req);
	if (rc == 0)
		rc = json_is_true(json_object_get(resp, "succeeded"));
	json_decref(resp);
	return rc;
}

static int refuse(const char *key, const schema_rec_t *r)
{
	sc_log_error(
	    "store: etcd key %s: schema %d, written by %s, needs a server that knows schema "
	    "%d or newer; this binary (starcloud %s) knows schema %d. Upgrade this server to "
	    "the release that wrote it, or restore a backup taken before that upgrade "
	    "(docs/DEPLOY.md). Nothing was changed.",
	    key, r->version, r->writer, r->min_reader, SC_VERSION, ETCD_SCHEMA);
	return SC_ERANGE;
}

/* A reader that may not migrate (store copy's source) can still read an
 * older store when no step from its version on changed the data. */
static int readable_as_is(const char *key, const schema_rec_t *r)
{
	for (int v = r->version; v < ETCD_SCHEMA; v++)
		if (steps[v - 1].run) {
			sc_log_error(
			    "store: etcd key %s: schema %d must be brought to %d before "
			    "this binary (starcloud %s) can read it: start a server of this "
			    "release on it first, or use the release that wrote it",
			    key, r->version, ETCD_SCHEMA, SC_VERSION);
			return SC_ERANGE;
		}
	return 1;
}

/* One pass: reads the key and takes at most one step. 1 when done (the
 * store is at ETCD_SCHEMA or newer), 0 to read again, < 0 on error. */
static int advance(sc_etcd_conn_t *c, const char *prefix, const char *key, int readonly,
                   int *schema)
{
	schema_rec_t r;
	int rc = read_rec(c, key, &r);
	if (rc < 0)
		return rc;
	if (!r.exists) {
		if ((rc = has_data(c, prefix)) < 0)
			return rc;
		if (rc == 0 && readonly) {
			*schema = ETCD_SCHEMA; /* empty: nothing to misread */
			return 1;
		}
		if (rc == 0) /* a new store starts at the newest layout */
			return write_rec(c, key, &r, ETCD_SCHEMA,
			                 steps[ETCD_SCHEMA - 2].min_reader) < 0
			           ? SC_EIO
			           : 0;
		r.version = r.min_reader = 1;
		snprintf(r.writer, sizeof(r.writer), "starcloud 0.1");
	}
	if (r.min_reader > ETCD_SCHEMA)
		return refuse(key, &r);
	if (r.version >= ETCD_SCHEMA) {
		if (r.version > ETCD_SCHEMA)
			sc_log_warn("store: etcd schema %d (written by %s) is newer than this "
			            "binary's %d but readable by it; upgrade this server soon",
			            r.version, r.writer, ETCD_SCHEMA);
		*schema = r.version;
		return 1;
	}
	if (readonly) {
		*schema = r.version;
		return readable_as_is(key, &r);
	}
	const step_t *st = &steps[r.version - 1];
	sc_log_info("store: etcd schema %d -> %d: %s", r.version, r.version + 1, st->what);
	if (st->run && (rc = st->run(c, prefix)) < 0)
		return rc;
	return write_rec(c, key, &r, r.version + 1, st->min_reader) < 0 ? SC_EIO : 0;
}

int sc__etcd_schema_open(sc_etcd_conn_t *c, const char *prefix, int readonly, int *schema)
{
	char key[300];
	snprintf(key, sizeof(key), "%sschema", prefix);
	for (int i = 0; i < MAX_ATTEMPTS + ETCD_SCHEMA; i++) {
		int rc = advance(c, prefix, key, readonly, schema);
		if (rc != 0)
			return rc < 0 ? rc : 0;
	}
	sc_log_error("store: etcd key %s kept changing while this server tried to bring the "
	             "schema forward; is another server migrating it?",
	             key);
	return SC_ECONFLICT;
}
