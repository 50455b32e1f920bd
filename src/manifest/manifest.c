/* The manifest set: adds objects all-or-nothing, keeps them in input order,
 * and builds snapshots, checking the references between objects that may
 * come from different files. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "manifest/manifest_int.h"
#include "base/alloc.h"

/* Object names already taken, as "Kind/name" strings, in an open-addressing
 * hash set so that adding n objects stays linear. */
typedef struct name_set {
	char **slots;
	size_t cap, used;
} name_set_t;

struct sc_manifest_set {
	sc__batch_t all; /* committed objects (the batch type is reused) */
	name_set_t names;
	sc_arena_t **arenas; /* one per successful add */
	size_t narenas, arenacap;
	/* Arrays handed out by the last snapshot. */
	sc_node_spec_t *snap_nodes;
	sc_queue_spec_t *snap_queues;
	sc_prio_class_t *snap_classes;
	sc_job_spec_t *snap_jobs;
	sc_nodepool_t *snap_pools; /* handed out by sc_manifest_nodepools */
};

/* ---- name set ---------------------------------------------------------- */

static size_t hash_str(const char *s)
{
	size_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static bool names_has(const name_set_t *s, const char *key)
{
	if (!s->cap)
		return false;
	for (size_t j = hash_str(key) & (s->cap - 1); s->slots[j]; j = (j + 1) & (s->cap - 1))
		if (strcmp(s->slots[j], key) == 0)
			return true;
	return false;
}

/* Takes key (malloc'd) on success. */
static int names_add(name_set_t *s, char *key)
{
	if ((s->used + 1) * 2 > s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 64;
		char **ns = sc_calloc(ncap, sizeof(*ns));
		if (!ns)
			return SC_ENOMEM;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->slots[i])
				continue;
			size_t j = hash_str(s->slots[i]) & (ncap - 1);
			while (ns[j])
				j = (j + 1) & (ncap - 1);
			ns[j] = s->slots[i];
		}
		free(s->slots);
		s->slots = ns;
		s->cap = ncap;
	}
	size_t j = hash_str(key) & (s->cap - 1);
	while (s->slots[j])
		j = (j + 1) & (s->cap - 1);
	s->slots[j] = key;
	s->used++;
	return 0;
}

static void names_free(name_set_t *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slots[i]);
	free(s->slots);
	memset(s, 0, sizeof(*s));
}

static char *name_key(const char *kind, const char *name)
{
	size_t n = strlen(kind) + strlen(name) + 2;
	char *k = sc_malloc(n);
	if (k)
		snprintf(k, n, "%s/%s", kind, name);
	return k;
}

/* ---- set lifecycle ----------------------------------------------------- */

void sc__batch_init(sc__batch_t *b)
{
	memset(b, 0, sizeof(*b));
	b->nodes.size = sizeof(sc__node_t);
	b->queues.size = sizeof(sc__queue_t);
	b->classes.size = sizeof(sc__class_t);
	b->jobs.size = sizeof(sc__job_t);
	b->pools.size = sizeof(sc__pool_t);
}

void sc__batch_free(sc__batch_t *b)
{
	free(b->nodes.items);
	free(b->queues.items);
	free(b->classes.items);
	free(b->jobs.items);
	free(b->pools.items);
}

sc_manifest_set_t *sc_manifest_set_new(void)
{
	sc_manifest_set_t *s = sc_calloc(1, sizeof(*s));
	if (s)
		sc__batch_init(&s->all);
	return s;
}

static void free_snapshot_arrays(sc_manifest_set_t *s)
{
	free(s->snap_nodes);
	free(s->snap_queues);
	free(s->snap_classes);
	free(s->snap_jobs);
	free(s->snap_pools);
	s->snap_pools = NULL;
	s->snap_nodes = NULL;
	s->snap_queues = NULL;
	s->snap_classes = NULL;
	s->snap_jobs = NULL;
}

void sc_manifest_set_free(sc_manifest_set_t *s)
{
	if (!s)
		return;
	sc__batch_free(&s->all);
	names_free(&s->names);
	for (size_t i = 0; i < s->narenas; i++)
		sc_arena_free(s->arenas[i]);
	free(s->arenas);
	free_snapshot_arrays(s);
	free(s);
}

size_t sc_manifest_count(const sc_manifest_set_t *s, const char *kind)
{
	if (strcmp(kind, "Node") == 0)
		return s->all.nodes.n;
	if (strcmp(kind, "Queue") == 0)
		return s->all.queues.n;
	if (strcmp(kind, "PriorityClass") == 0)
		return s->all.classes.n;
	if (strcmp(kind, "Job") == 0)
		return s->all.jobs.n;
	if (strcmp(kind, "SchedulerConfig") == 0)
		return s->all.has_config;
	if (strcmp(kind, "Topology") == 0)
		return s->all.has_topology;
	if (strcmp(kind, "NodePool") == 0)
		return s->all.pools.n;
	return 0;
}

char *sc_manifest_error_format(const sc_manifest_error_t *e, char *buf, size_t size)
{
	size_t n = 0;
	buf[0] = '\0';
#define APPEND(...)                                                                                \
	do {                                                                                       \
		if (n < size) {                                                                    \
			int w = snprintf(buf + n, size - n, __VA_ARGS__);                          \
			n += w > 0 ? (size_t)w : 0;                                                \
		}                                                                                  \
	} while (0)
	if (e->file[0])
		APPEND("%s:", e->file);
	if (e->file[0] && e->line)
		APPEND("%d:%d:", e->line, e->col);
	if (n)
		APPEND(" ");
	if (e->object[0])
		APPEND("%s: ", e->object);
	if (e->path[0])
		APPEND("%s: ", e->path);
	APPEND("%s", e->msg[0] ? e->msg : sc_strerror(e->code));
#undef APPEND
	return buf;
}

/* ---- decoding one object ----------------------------------------------- */

typedef int (*decode_fn)(sc__rd_t *, json_t *, sc__batch_t *);

static int decode_queue_v1(sc__rd_t *rd, json_t *o, sc__batch_t *b)
{
	return sc__decode_queue(rd, o, b, false);
}

static int decode_queue_kai(sc__rd_t *rd, json_t *o, sc__batch_t *b)
{
	return sc__decode_queue(rd, o, b, true);
}

#define SC_API "starcloud.dev/v1"
#define KAI_API "scheduling.run.ai/v2"

static const struct {
	const char *kind, *api;
	decode_fn decode;
} kinds[] = {
    {"Node", SC_API, sc__decode_node},
    {"Queue", SC_API, decode_queue_v1},
    {"Queue", KAI_API, decode_queue_kai},
    {"PriorityClass", SC_API, sc__decode_class},
    {"Job", SC_API, sc__decode_job},
    {"Deployment", SC_API, sc__decode_deployment},
    {"SchedulerConfig", SC_API, sc__decode_config},
    {"Topology", SC_API, sc__decode_topology},
    {"NodePool", SC_API, sc__decode_nodepool},
};

int sc__decode_object(sc__rd_t *rd, json_t *obj, sc__batch_t *b)
{
	const char *api, *kind;
	int rc;
	if (!json_is_object(obj))
		return sc__rd_fail(rd, SC_EINVAL, "expected an object with apiVersion and kind");
	if ((rc = sc__get_str(rd, obj, "kind", true, &kind)) < 0 ||
	    (rc = sc__get_str(rd, obj, "apiVersion", true, &api)) < 0)
		return rc;
	snprintf(rd->object, sizeof(rd->object), "%s", kind);
	/* What the server writes about objects: `get events -o yaml` loads
	 * with the rest and adds nothing. */
	if (strcmp(kind, "Event") == 0 && strcmp(api, SC_API) == 0)
		return 0;
	bool known = false;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (strcmp(kinds[i].kind, kind) != 0)
			continue;
		known = true;
		if (strcmp(kinds[i].api, api) == 0)
			return kinds[i].decode(rd, obj, b);
	}
	sc__rd_push(rd, known ? "apiVersion" : "kind");
	if (known)
		return sc__rd_fail(rd, SC_EINVAL,
		                   "unsupported apiVersion \"%s\" for %s (expected "
		                   "%s%s)",
		                   api, kind, SC_API,
		                   strcmp(kind, "Queue") == 0 ? " or " KAI_API : "");
	return sc__rd_fail(rd, SC_EINVAL,
	                   "unknown kind \"%s\" (expected Node, Queue, PriorityClass, Job, "
	                   "Deployment, SchedulerConfig, Topology or NodePool)",
	                   kind);
}

/* A List as the API answers one ("kind": "JobList", "items": [...]), which
 * `get -o yaml` prints. */
static json_t *list_items(json_t *doc)
{
	const char *kind = json_string_value(json_object_get(doc, "kind"));
	size_t kl = kind ? strlen(kind) : 0;
	json_t *items = json_object_get(doc, "items");
	if (kl >= 4 && strcmp(kind + kl - 4, "List") == 0 && json_is_array(items))
		return items;
	return NULL;
}

/* A document is one object, or a list of objects (a JSON array, or a
 * List object). */
static int decode_doc(sc__rd_t *rd, json_t *doc, sc__batch_t *b)
{
	json_t *items = json_is_object(doc) ? list_items(doc) : NULL;
	if (!json_is_array(doc) && !items)
		return sc__decode_object(rd, doc, b);
	json_t *o;
	size_t i;
	json_array_foreach(items ? items : doc, i, o)
	{
		snprintf(rd->prefix, sizeof(rd->prefix), items ? "items[%zu]" : "[%zu]", i);
		rd->object[0] = '\0';
		int rc = sc__decode_object(rd, o, b);
		if (rc < 0)
			return rc;
	}
	rd->prefix[0] = '\0';
	return 0;
}

/* ---- committing a batch ------------------------------------------------ */

/* Deployments become jobs, so they share the Job name space. */
static int check_name(sc_manifest_set_t *s, name_set_t *fresh, const char *kind, const char *name,
                      const sc__origin_t *o, sc_manifest_error_t *err, char **key_out)
{
	char *key = name_key(kind, name);
	if (!key)
		return SC_ENOMEM;
	if (names_has(&s->names, key) || names_has(fresh, key)) {
		free(key);
		err->code = SC_EEXISTS;
		err->line = o->at.line;
		err->col = o->at.col;
		snprintf(err->file, sizeof(err->file), "%s", o->file ? o->file : "");
		snprintf(err->object, sizeof(err->object), "%s %s", kind, name);
		snprintf(err->path, sizeof(err->path), "metadata.name");
		snprintf(err->msg, sizeof(err->msg), "a %s named \"%s\" already exists", kind,
		         name);
		return SC_EEXISTS;
	}
	*key_out = key;
	return 0;
}

#define EACH(vec, type, var)                                                                       \
	for (type *var = (vec).items; var && var < (type *)(vec).items + (vec).n; var++)

static int check_names(sc_manifest_set_t *s, sc__batch_t *b, name_set_t *fresh,
                       sc_manifest_error_t *err)
{
	char *key = NULL;
	int rc = 0;
#define CHECK(vec, type, kind)                                                                     \
	EACH(vec, type, x)                                                                         \
	{                                                                                          \
		if ((rc = check_name(s, fresh, kind, x->spec.name, &x->o, err, &key)) < 0)         \
			return rc;                                                                 \
		if ((rc = names_add(fresh, key)) < 0) {                                            \
			free(key); /* not taken */                                                 \
			return rc;                                                                 \
		}                                                                                  \
	}
	CHECK(b->nodes, sc__node_t, "Node")
	CHECK(b->queues, sc__queue_t, "Queue")
	CHECK(b->classes, sc__class_t, "PriorityClass")
	CHECK(b->jobs, sc__job_t, "Job")
	EACH(b->pools, sc__pool_t, x)
	{
		if ((rc = check_name(s, fresh, "NodePool", x->spec.pool.name, &x->o, err, &key)) <
		    0)
			return rc;
		if ((rc = names_add(fresh, key)) < 0) {
			free(key);
			return rc;
		}
	}
#undef CHECK
	if ((b->has_config && s->all.has_config) || (b->has_topology && s->all.has_topology)) {
		const char *kind =
		    b->has_config && s->all.has_config ? "SchedulerConfig" : "Topology";
		const sc__origin_t *o =
		    b->has_config && s->all.has_config ? &b->config_o : &b->topology_o;
		err->code = SC_EEXISTS;
		err->line = o->at.line;
		err->col = o->at.col;
		snprintf(err->file, sizeof(err->file), "%s", o->file ? o->file : "");
		snprintf(err->object, sizeof(err->object), "%s", kind);
		snprintf(err->msg, sizeof(err->msg), "only one %s may be given", kind);
		return SC_EEXISTS;
	}
	return 0;
}

static int append_all(sc__vec_t *dst, const sc__vec_t *src)
{
	for (size_t i = 0; i < src->n; i++)
		if (sc__vec_push(dst, (const char *)src->items + i * src->size))
			return SC_ENOMEM;
	return 0;
}

/* Moves the batch into the set. Reserves everything first so that a failed
 * allocation leaves the set as it was. */
static int commit(sc_manifest_set_t *s, sc__batch_t *b, name_set_t *fresh, sc_arena_t *a)
{
	sc__vec_t *dst[] = {&s->all.nodes, &s->all.queues, &s->all.classes, &s->all.jobs,
	                    &s->all.pools};
	sc__vec_t *src[] = {&b->nodes, &b->queues, &b->classes, &b->jobs, &b->pools};
	for (int i = 0; i < 5; i++) {
		/* Geometric growth: the server adds objects one at a time, and
		 * growing by exactly what is needed made n adds cost O(n^2). */
		size_t need = dst[i]->n + src[i]->n;
		if (need > dst[i]->cap) {
			size_t ncap = dst[i]->cap * 2 > need ? dst[i]->cap * 2 : need;
			void *ni = sc_realloc(dst[i]->items, ncap * dst[i]->size);
			if (!ni)
				return SC_ENOMEM;
			dst[i]->items = ni;
			dst[i]->cap = ncap;
		}
	}
	if (s->narenas == s->arenacap) {
		size_t ncap = s->arenacap ? s->arenacap * 2 : 16;
		sc_arena_t **na = sc_realloc(s->arenas, ncap * sizeof(*na));
		if (!na)
			return SC_ENOMEM;
		s->arenas = na;
		s->arenacap = ncap;
	}
	for (size_t i = 0; i < fresh->cap; i++) {
		if (fresh->slots[i] && names_add(&s->names, fresh->slots[i]))
			return SC_ENOMEM; /* cannot be undone cheaply; the set stays usable */
		if (fresh->slots[i])
			fresh->slots[i] = NULL;
	}
	for (int i = 0; i < 5; i++)
		append_all(dst[i], src[i]); /* cannot fail: reserved above */
	if (b->has_config) {
		s->all.config = b->config;
		s->all.config_o = b->config_o;
		s->all.has_config = true;
	}
	if (b->has_topology) {
		s->all.levels = b->levels;
		s->all.nlevels = b->nlevels;
		s->all.topology_o = b->topology_o;
		s->all.has_topology = true;
	}
	if (a)
		s->arenas[s->narenas++] = a;
	return 0;
}

static void set_origin_file(sc__batch_t *b, const char *file)
{
	EACH(b->nodes, sc__node_t, x) x->o.file = file;
	EACH(b->queues, sc__queue_t, x) x->o.file = file;
	EACH(b->classes, sc__class_t, x) x->o.file = file;
	EACH(b->jobs, sc__job_t, x) x->o.file = file;
	EACH(b->pools, sc__pool_t, x) x->o.file = file;
	b->config_o.file = b->topology_o.file = file;
}

/* Decodes every document into a fresh batch and arena, then commits. */
static int add_docs(sc_manifest_set_t *s, const char *filename, const sc_yj_docs_t *docs,
                    json_t *single, sc_manifest_error_t *err)
{
	sc__batch_t b;
	name_set_t fresh = {0};
	sc__rd_t *rd = sc_calloc(1, sizeof(*rd));
	/* One object (an API object) needs a few hundred bytes: a small
	 * chunk keeps a set of 10,000 of them from holding 64 KiB each. */
	sc_arena_t *a = sc_arena_new(docs ? 0 : 4096);
	size_t ndocs = docs ? sc_yj_count(docs) : 1;
	int rc = 0;

	sc__batch_init(&b);
	if (!rd || !a) {
		rc = SC_ENOMEM;
		goto error;
	}
	rd->arena = a;
	rd->err = err;
	rd->docs = docs;
	rd->file = filename ? sc_arena_strdup(a, filename) : NULL;
	for (size_t i = 0; i < ndocs && rc == 0; i++) {
		rd->doc = i;
		rd->plen = 0;
		rd->path[0] = rd->prefix[0] = rd->object[0] = '\0';
		rc = decode_doc(rd, docs ? sc_yj_doc(docs, i) : single, &b);
	}
	if (rc)
		goto error;
	set_origin_file(&b, rd->file);
	if ((rc = check_names(s, &b, &fresh, err)) < 0 || (rc = commit(s, &b, &fresh, a)) < 0)
		goto error;
	rc = (int)(b.nodes.n + b.queues.n + b.classes.n + b.jobs.n + b.pools.n + b.has_config +
	           b.has_topology);
	a = NULL; /* now owned by the set */
error:
	if (rc == SC_ENOMEM && !err->msg[0])
		snprintf(err->msg, sizeof(err->msg), "out of memory");
	if (rc < 0)
		err->code = rc;
	names_free(&fresh);
	sc__batch_free(&b);
	sc_arena_free(a);
	free(rd);
	return rc;
}

int sc_manifest_add_text(sc_manifest_set_t *s, const char *filename, const char *text, size_t len,
                         sc_manifest_error_t *err)
{
	sc_manifest_error_t local;
	sc_yj_docs_t *docs = NULL;
	sc_yj_error_t yerr;
	if (!err)
		err = &local;
	memset(err, 0, sizeof(*err));
	int rc = sc_yj_load(text, len, NULL, &docs, &yerr);
	if (rc < 0) {
		err->code = rc;
		err->line = yerr.line;
		err->col = yerr.col;
		snprintf(err->file, sizeof(err->file), "%s", filename ? filename : "");
		snprintf(err->msg, sizeof(err->msg), "%s", yerr.msg);
		return rc;
	}
	rc = add_docs(s, filename, docs, NULL, err);
	sc_yj_free(docs);
	return rc;
}

int sc_manifest_add_json(sc_manifest_set_t *s, json_t *obj, sc_manifest_error_t *err)
{
	sc_manifest_error_t local;
	if (!err)
		err = &local;
	memset(err, 0, sizeof(*err));
	if (!json_is_object(obj)) {
		err->code = SC_EINVAL;
		snprintf(err->msg, sizeof(err->msg), "expected an object with apiVersion and kind");
		return SC_EINVAL;
	}
	return add_docs(s, NULL, NULL, obj, err);
}

int sc_manifest_add_set(sc_manifest_set_t *s, const sc_manifest_set_t *src,
                        sc_manifest_error_t *err)
{
	sc_manifest_error_t local;
	name_set_t fresh = {0};
	if (!err)
		err = &local;
	memset(err, 0, sizeof(*err));
	/* The decoded structs are copied; the strings and arrays they point to
	 * stay in src's arenas (src must outlive s). b only reads src. */
	sc__batch_t b = src->all;
	int rc = check_names(s, &b, &fresh, err);
	if (rc == 0)
		rc = commit(s, &b, &fresh, NULL);
	if (rc == SC_ENOMEM && !err->msg[0])
		snprintf(err->msg, sizeof(err->msg), "out of memory");
	if (rc < 0)
		err->code = rc;
	names_free(&fresh);
	return rc < 0 ? rc
	              : (int)(b.nodes.n + b.queues.n + b.classes.n + b.jobs.n + b.pools.n +
	                      b.has_config + b.has_topology);
}

size_t sc_manifest_nodepools(sc_manifest_set_t *s, const sc_nodepool_t **out)
{
	free(s->snap_pools);
	s->snap_pools = sc_calloc(s->all.pools.n + 1, sizeof(*s->snap_pools));
	*out = s->snap_pools;
	if (!s->snap_pools)
		return 0;
	size_t n = 0;
	EACH(s->all.pools, sc__pool_t, x) s->snap_pools[n++] = x->spec;
	return n;
}

/* ---- snapshot ---------------------------------------------------------- */

/* Classes the core knows without a PriorityClass object (src/core/snapshot.c
 * keeps their values): the default "normal", KAI's and two generic ones. */
static const char *const builtin_classes[] = {
    "best-effort", "normal", "train", "build-preemptible", "build", "inference", "critical", NULL};

static int ref_fail(sc_manifest_error_t *err, const sc__origin_t *o, sc__pos_t at,
                    const char *object, const char *path, int code, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

static int ref_fail(sc_manifest_error_t *err, const sc__origin_t *o, sc__pos_t at,
                    const char *object, const char *path, int code, const char *fmt, ...)
{
	va_list ap;
	memset(err, 0, sizeof(*err));
	err->code = code;
	err->line = at.line;
	err->col = at.col;
	snprintf(err->file, sizeof(err->file), "%s", o->file ? o->file : "");
	snprintf(err->object, sizeof(err->object), "%s", object);
	snprintf(err->path, sizeof(err->path), "%s", path);
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

/* Name lookups over the snapshot arrays go through sorted index arrays. */
typedef struct by_name {
	const char *name;
	size_t index;
} by_name_t;

static int cmp_by_name(const void *a, const void *b)
{
	return strcmp(((const by_name_t *)a)->name, ((const by_name_t *)b)->name);
}

static long find_name(const by_name_t *idx, size_t n, const char *name)
{
	by_name_t key = {name, 0};
	const by_name_t *f = bsearch(&key, idx, n, sizeof(*idx), cmp_by_name);
	return f ? (long)f->index : -1;
}

static by_name_t *index_queues(const sc_queue_spec_t *q, size_t n)
{
	by_name_t *idx = sc_malloc((n + 1) * sizeof(*idx));
	if (!idx)
		return NULL;
	for (size_t i = 0; i < n; i++)
		idx[i] = (by_name_t){q[i].name, i};
	qsort(idx, n, sizeof(*idx), cmp_by_name);
	return idx;
}

/* Every parent exists and the parent links form no cycle. Marks queues
 * that have children in has_child. */
static int check_queue_tree(const sc_manifest_set_t *s, const by_name_t *idx, bool *has_child,
                            sc_manifest_error_t *err)
{
	const sc__queue_t *qs = s->all.queues.items;
	size_t n = s->all.queues.n;
	char object[200];
	for (size_t i = 0; i < n; i++) {
		const sc_queue_spec_t *q = &qs[i].spec;
		snprintf(object, sizeof(object), "Queue %s", q->name);
		if (!q->parent)
			continue;
		long p = find_name(idx, n, q->parent);
		if (p < 0)
			return ref_fail(err, &qs[i].o, qs[i].o.ref[0], object, "spec.parentQueue",
			                SC_ENOTFOUND, "parent queue \"%s\" does not exist",
			                q->parent);
		has_child[p] = true;
		/* Walking up more than n links means a cycle. */
		size_t steps = 0;
		for (long at = p; at >= 0 && qs[at].spec.parent; steps++) {
			if (steps > n || (size_t)at == i)
				return ref_fail(err, &qs[i].o, qs[i].o.ref[0], object,
				                "spec.parentQueue", SC_EINVAL,
				                "queue \"%s\" is its own ancestor", q->name);
			at = find_name(idx, n, qs[at].spec.parent);
		}
	}
	return 0;
}

int sc_manifest_builtin_class(const char *name)
{
	for (size_t i = 0; builtin_classes[i]; i++)
		if (strcmp(builtin_classes[i], name) == 0)
			return 1;
	return 0;
}

static bool class_exists(const sc_manifest_set_t *s, const char *name)
{
	const sc__class_t *c = s->all.classes.items;
	for (size_t i = 0; i < s->all.classes.n; i++)
		if (strcmp(c[i].spec.name, name) == 0)
			return true;
	return sc_manifest_builtin_class(name);
}

static int check_jobs(const sc_manifest_set_t *s, const by_name_t *idx, const bool *has_child,
                      sc_manifest_error_t *err)
{
	const sc__job_t *js = s->all.jobs.items;
	char object[200];
	for (size_t i = 0; i < s->all.jobs.n; i++) {
		const sc_job_spec_t *j = &js[i].spec;
		const char *kind = j->serving ? "Deployment" : "Job";
		snprintf(object, sizeof(object), "%s %s", kind, j->name);
		long q = find_name(idx, s->all.queues.n, j->queue);
		if (q < 0)
			return ref_fail(err, &js[i].o, js[i].o.ref[0], object, "spec.queue",
			                SC_ENOTFOUND, "queue \"%s\" does not exist", j->queue);
		if (has_child[q])
			return ref_fail(
			    err, &js[i].o, js[i].o.ref[0], object, "spec.queue", SC_EINVAL,
			    "queue \"%s\" has child queues; jobs go to leaf queues", j->queue);
		if (j->priority_class && !class_exists(s, j->priority_class))
			return ref_fail(err, &js[i].o, js[i].o.ref[1], object, "spec.priorityClass",
			                SC_ENOTFOUND, "priority class \"%s\" does not exist",
			                j->priority_class);
	}
	return 0;
}

static int check_refs(const sc_manifest_set_t *s, sc_manifest_error_t *err)
{
	size_t n = s->all.queues.n;
	by_name_t *idx = NULL;
	bool *has_child = sc_calloc(n + 1, sizeof(bool));
	int rc = SC_ENOMEM;
	if (!has_child)
		goto done;
	sc_queue_spec_t *specs = sc_malloc((n + 1) * sizeof(*specs));
	if (!specs)
		goto done;
	for (size_t i = 0; i < n; i++)
		specs[i] = ((const sc__queue_t *)s->all.queues.items)[i].spec;
	idx = index_queues(specs, n);
	free(specs);
	if (!idx)
		goto done;
	if ((rc = check_queue_tree(s, idx, has_child, err)) == 0)
		rc = check_jobs(s, idx, has_child, err);
done:
	if (rc == SC_ENOMEM) {
		memset(err, 0, sizeof(*err));
		err->code = rc;
		snprintf(err->msg, sizeof(err->msg), "out of memory");
	}
	free(idx);
	free(has_child);
	return rc;
}

/* Copies the spec member out of each wrapper into a fresh array. */
static void *copy_specs(const sc__vec_t *v, size_t spec_size)
{
	char *out = sc_malloc((v->n + 1) * spec_size);
	if (out)
		for (size_t i = 0; i < v->n; i++)
			memcpy(out + i * spec_size, (const char *)v->items + i * v->size,
			       spec_size);
	return out;
}

int sc_manifest_snapshot(sc_manifest_set_t *s, int64_t now, sc_snapshot_t *out,
                         sc_manifest_error_t *err)
{
	sc_manifest_error_t local;
	char msg[512];
	if (!err)
		err = &local;
	memset(err, 0, sizeof(*err));
	memset(out, 0, sizeof(*out));
	int rc = check_refs(s, err);
	if (rc < 0)
		return rc;
	free_snapshot_arrays(s);
	/* The spec is the first member of every wrapper, so a prefix copy
	 * yields the plain struct. */
	s->snap_nodes = copy_specs(&s->all.nodes, sizeof(sc_node_spec_t));
	s->snap_queues = copy_specs(&s->all.queues, sizeof(sc_queue_spec_t));
	s->snap_classes = copy_specs(&s->all.classes, sizeof(sc_prio_class_t));
	s->snap_jobs = copy_specs(&s->all.jobs, sizeof(sc_job_spec_t));
	if (!s->snap_nodes || !s->snap_queues || !s->snap_classes || !s->snap_jobs) {
		free_snapshot_arrays(s);
		err->code = SC_ENOMEM;
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return SC_ENOMEM;
	}
	*out = (sc_snapshot_t){
	    .nodes = s->snap_nodes,
	    .nnodes = s->all.nodes.n,
	    .queues = s->snap_queues,
	    .nqueues = s->all.queues.n,
	    .classes = s->snap_classes,
	    .nclasses = s->all.classes.n,
	    .jobs = s->snap_jobs,
	    .njobs = s->all.jobs.n,
	    .now = now,
	};
	if (s->all.has_config)
		out->config = s->all.config;
	else
		sc_config_default(&out->config);
	if (s->all.has_topology) {
		out->config.topology_levels = s->all.levels;
		out->config.ntopology_levels = s->all.nlevels;
	}
	/* What remains (node names in pod status, topology levels, ...) the
	 * core checks itself; its message names the object and field. */
	if ((rc = sc_snapshot_validate(out, msg, sizeof(msg))) < 0) {
		err->code = rc;
		snprintf(err->msg, sizeof(err->msg), "%s", msg);
		return rc;
	}
	return 0;
}
