/* The scheduling loop's cache of decoded objects: each stored object is run
 * through the manifest decoder once per revision (into a manifest set of its
 * own), and every cycle assembles its snapshot from those sets with
 * sc_manifest_add_set, which copies decoded structs and parses nothing.
 *
 * The cache is keyed by (kind, key) and mod_rev, and kept in the cycle's
 * input order (kind order, then key order), so bringing it up to date is
 * one merge walk: unchanged objects are kept, changed ones decoded again
 * unless what the decoder reads of them is unchanged, deleted ones
 * dropped. A new object the API validated comes decoded already (its
 * `pre`), so the decoder runs once per job, not once on write and again
 * here. Memory is one entry per object the loop reads.
 *
 * Threading: used by the cycle's worker thread only, one cycle at a time
 * (libuv's work queue orders one cycle's end before the next one's start). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/deploy.h"
#include "base/alloc.h"
#include "server/sched_int.h"
#include "starcloud/error.h"

struct sc_decode_cache {
	sc_decoded_t *v; /* sorted like a cycle's objects */
	size_t n;
};

sc_decode_cache_t *sc__decode_cache_new(void)
{
	return sc_xcalloc(1, sizeof(sc_decode_cache_t));
}

static void decoded_free(sc_decoded_t *d)
{
	free(d->key);
	free(d->why);
	free(d->settled_why);
	free(d->settled_reason);
	sc_manifest_set_free(d->one);
	json_decref(d->view);
	memset(d, 0, sizeof(*d));
}

void sc__decode_cache_free(sc_decode_cache_t *dc)
{
	if (!dc)
		return;
	for (size_t i = 0; i < dc->n; i++)
		decoded_free(&dc->v[i]);
	free(dc->v);
	free(dc);
}

/* Order of a cycle's objects: kind (by its rank) then key. */
static int cmp(int rank_a, const char *key_a, int rank_b, const char *key_b)
{
	if (rank_a != rank_b)
		return rank_a < rank_b ? -1 : 1;
	return strcmp(key_a, key_b);
}

/* What the decoder reads of o (a new reference). A Deployment's view (its
 * live tasks) follows from its spec and status alone, so it too is fixed
 * by the revision. */
static json_t *view_of(const sc_sobj_t *o)
{
	return strcmp(o->kind->kind, "Deployment") == 0 ? sc__deploy_view(o->obj)
	                                                : sc__decoder_view(o->kind, o->obj);
}

/* Looked up once per revision: every cycle checks every job's queue. */
static const char *view_queue(json_t *view)
{
	return json_string_value(json_object_get(json_object_get(view, "spec"), "queue"));
}

/* Decodes one object from its view (taken), or takes the decoding the
 * API's validation already made of this revision (o->pre); a refusal is
 * kept as the message the job shows. *decoded counts real decodings. */
static int decode(sc_sobj_t *o, int rank, json_t *view, sc_decoded_t *d, size_t *decoded)
{
	sc_manifest_error_t err;
	char msg[1400];
	memset(d, 0, sizeof(*d));
	d->rank = rank;
	d->mod_rev = o->mod_rev;
	d->view = view;
	d->queue = view_queue(view);
	d->key = sc_strdup(o->key);
	if (!d->key)
		return SC_ENOMEM;
	if (o->pre) {
		d->one = o->pre;
		o->pre = NULL;
		return 0;
	}
	(*decoded)++;
	d->one = sc_manifest_set_new();
	if (!d->one)
		return SC_ENOMEM;
	int rc = sc_manifest_add_json(d->one, view, &err);
	if (rc == SC_ENOMEM)
		return rc;
	if (rc < 0) {
		err.file[0] = '\0';
		d->why = sc_strdup(sc_manifest_error_format(&err, msg, sizeof(msg)));
		sc_manifest_set_free(d->one);
		d->one = NULL;
		if (!d->why)
			return SC_ENOMEM;
	}
	return 0;
}

/* Keeps entry d for a new revision of its object whose view is equal: the
 * decoded form stays, but "status up to date" was about the old revision. */
static void carry(sc_decoded_t *d, const sc_sobj_t *o, json_t *view)
{
	json_decref(d->view);
	d->view = view;
	d->queue = view_queue(view);
	d->mod_rev = o->mod_rev;
	d->settled = false;
	free(d->settled_why);
	free(d->settled_reason);
	d->settled_why = d->settled_reason = NULL;
}

int sc__decode_refresh(sc_decode_cache_t *dc, sc_cycle_in_t *in, const int *ranks, size_t *decoded)
{
	sc_decoded_t *nv = sc_calloc(in->nobjs + 1, sizeof(*nv));
	size_t k = 0;
	int rc = 0;
	if (!nv)
		return SC_ENOMEM;
	*decoded = 0;
	for (size_t i = 0; i < in->nobjs && rc == 0; i++) {
		sc_sobj_t *o = &in->objs[i];
		int c = -1;
		/* Entries before this object belong to deleted objects. */
		while (k < dc->n && (c = cmp(dc->v[k].rank, dc->v[k].key, ranks[i], o->key)) < 0)
			decoded_free(&dc->v[k++]);
		if (k < dc->n && c == 0 && dc->v[k].mod_rev == o->mod_rev) {
			nv[i] = dc->v[k];
			memset(&dc->v[k++], 0, sizeof(dc->v[0]));
			continue;
		}
		/* Comparing views costs far less than decoding, and most new
		 * revisions of a job are the loop's own status writes, which
		 * change nothing the decoder reads. */
		json_t *view = view_of(o);
		if (k < dc->n && c == 0 && view && json_equal(view, dc->v[k].view)) {
			nv[i] = dc->v[k];
			memset(&dc->v[k++], 0, sizeof(dc->v[0]));
			carry(&nv[i], o, view);
			continue;
		}
		if (k < dc->n && c == 0)
			decoded_free(&dc->v[k++]);
		rc = decode(o, ranks[i], view, &nv[i], decoded);
	}
	for (; k < dc->n; k++)
		decoded_free(&dc->v[k]);
	free(dc->v);
	dc->v = nv;
	dc->n = in->nobjs;
	return rc;
}

sc_decoded_t *sc__decoded(const sc_decode_cache_t *dc, size_t i)
{
	return i < dc->n ? &dc->v[i] : NULL;
}
