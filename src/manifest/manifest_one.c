/* One object decoded on its own (manifest.h: sc_manifest_decode).
 *
 * The server keeps one of these per object its scheduling loop reads, so
 * its size is what matters: the struct is copied into the object's own
 * arena, which starts at 512 bytes (a pending job of `bench server`'s
 * world takes 480-512 of them, 97 % of its 50,000 jobs; a running gang's
 * pod list gets a block of its own), and nothing else of the decoding
 * (the batch's arrays, the reader) is kept. A first block of 1 KiB left
 * half of each one empty: 25 MB at 50,000 jobs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "manifest/manifest_int.h"
#include "starcloud/error.h"

#define CHUNK 512

enum { OBJ_NONE = 0, OBJ_NODE, OBJ_QUEUE, OBJ_CLASS, OBJ_JOB };

struct sc_manifest_obj {
	sc_arena_t *arena;
	int kind;
	const void *spec; /* in arena */
};

/* Copies the one struct of b (size bytes, at the front of its wrapper)
 * into the arena. */
static const void *keep(sc_arena_t *a, const sc__vec_t *v, size_t size)
{
	void *p = sc_arena_alloc(a, size);
	if (p)
		memcpy(p, v->items, size);
	return p;
}

int sc_manifest_decode(json_t *obj, sc_manifest_obj_t **out, sc_manifest_error_t *err)
{
	sc_manifest_error_t local;
	sc__batch_t b;
	sc__rd_t *rd = sc_calloc(1, sizeof(*rd));
	sc_manifest_obj_t *o = sc_calloc(1, sizeof(*o));
	int rc = SC_ENOMEM;
	if (!err)
		err = &local;
	memset(err, 0, sizeof(*err));
	*out = NULL;
	sc__batch_init(&b);
	if (!rd || !o || !(o->arena = sc_arena_new(CHUNK)))
		goto error;
	if (!json_is_object(obj)) {
		rc = SC_EINVAL;
		snprintf(err->msg, sizeof(err->msg), "expected an object with apiVersion and kind");
		goto error;
	}
	rd->arena = o->arena;
	rd->err = err;
	if ((rc = sc__decode_object(rd, obj, &b)) < 0)
		goto error;
	rc = SC_ENOMEM;
	if (b.nodes.n == 1) {
		o->kind = OBJ_NODE;
		o->spec = keep(o->arena, &b.nodes, sizeof(sc_node_spec_t));
	} else if (b.queues.n == 1) {
		o->kind = OBJ_QUEUE;
		o->spec = keep(o->arena, &b.queues, sizeof(sc_queue_spec_t));
	} else if (b.classes.n == 1) {
		o->kind = OBJ_CLASS;
		o->spec = keep(o->arena, &b.classes, sizeof(sc_prio_class_t));
	} else if (b.jobs.n == 1) {
		o->kind = OBJ_JOB;
		o->spec = keep(o->arena, &b.jobs, sizeof(sc_job_spec_t));
	} else {
		o->spec = o; /* a kind without a struct: nothing to copy */
	}
	if (!o->spec)
		goto error;
	sc__batch_free(&b);
	free(rd);
	*out = o;
	return 0;
error:
	if (rc == SC_ENOMEM && !err->msg[0])
		snprintf(err->msg, sizeof(err->msg), "out of memory");
	err->code = rc;
	sc__batch_free(&b);
	free(rd);
	sc_manifest_obj_free(o);
	return rc;
}

const sc_node_spec_t *sc_manifest_obj_node(const sc_manifest_obj_t *o)
{
	return o && o->kind == OBJ_NODE ? o->spec : NULL;
}

const sc_queue_spec_t *sc_manifest_obj_queue(const sc_manifest_obj_t *o)
{
	return o && o->kind == OBJ_QUEUE ? o->spec : NULL;
}

const sc_prio_class_t *sc_manifest_obj_class(const sc_manifest_obj_t *o)
{
	return o && o->kind == OBJ_CLASS ? o->spec : NULL;
}

const sc_job_spec_t *sc_manifest_obj_job(const sc_manifest_obj_t *o)
{
	return o && o->kind == OBJ_JOB ? o->spec : NULL;
}

void sc_manifest_obj_free(sc_manifest_obj_t *o)
{
	if (!o)
		return;
	sc_arena_free(o->arena);
	free(o);
}
