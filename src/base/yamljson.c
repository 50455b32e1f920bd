#include "base/yamljson.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "starcloud/arena.h"
#include "base/alloc.h"
#include "starcloud/error.h"

/* Paths longer than this are not recorded: an error deep inside such a
 * value is reported at the position of its nearest recorded ancestor. This
 * keeps the table linear in the input even for long keys nested deeply. */
#define MAX_PATH 1024
#define MAX_ANCHORS 4096

/* ==== position table ==================================================== */

typedef struct pos_entry {
	const char *path; /* in the docs' arena; NULL = empty slot */
	int line, col;
} pos_entry_t;

/* Open addressing with linear probing; capacity is a power of two. */
typedef struct pos_table {
	pos_entry_t *slots;
	size_t cap, used;
} pos_table_t;

struct sc_yj_docs {
	json_t **docs;
	pos_table_t *tables;
	size_t n, cap;
	sc_arena_t *arena;
};

static size_t hash_str(const char *s)
{
	size_t h = 1469598103934665603ULL; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static int table_grow(pos_table_t *t)
{
	size_t ncap = t->cap ? t->cap * 2 : 64;
	pos_entry_t *ns = sc_calloc(ncap, sizeof(*ns));
	if (!ns)
		return SC_ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		if (!t->slots[i].path)
			continue;
		size_t j = hash_str(t->slots[i].path) & (ncap - 1);
		while (ns[j].path)
			j = (j + 1) & (ncap - 1);
		ns[j] = t->slots[i];
	}
	free(t->slots);
	t->slots = ns;
	t->cap = ncap;
	return 0;
}

/* Records path -> (line, col); the first record of a path wins. */
static int table_put(pos_table_t *t, sc_arena_t *a, const char *path, int line, int col)
{
	if (strlen(path) >= MAX_PATH)
		return 0;
	if ((t->used + 1) * 2 > t->cap && table_grow(t))
		return SC_ENOMEM;
	size_t j = hash_str(path) & (t->cap - 1);
	for (; t->slots[j].path; j = (j + 1) & (t->cap - 1))
		if (strcmp(t->slots[j].path, path) == 0)
			return 0;
	char *copy = sc_arena_strdup(a, path);
	if (!copy)
		return SC_ENOMEM;
	t->slots[j] = (pos_entry_t){copy, line, col};
	t->used++;
	return 0;
}

static const pos_entry_t *table_get(const pos_table_t *t, const char *path)
{
	if (!t->cap)
		return NULL;
	for (size_t j = hash_str(path) & (t->cap - 1); t->slots[j].path; j = (j + 1) & (t->cap - 1))
		if (strcmp(t->slots[j].path, path) == 0)
			return &t->slots[j];
	return NULL;
}

void sc_yj_limits_default(sc_yj_limits_t *l)
{
	l->max_bytes = 64u << 20;
	l->max_depth = 64;
	l->max_string = 1u << 20;
	l->max_nodes = 4u << 20;
}

void sc_yj_free(sc_yj_docs_t *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++) {
		json_decref(d->docs[i]);
		free(d->tables[i].slots);
	}
	free(d->docs);
	free(d->tables);
	sc_arena_free(d->arena);
	free(d);
}

size_t sc_yj_count(const sc_yj_docs_t *d)
{
	return d ? d->n : 0;
}

json_t *sc_yj_doc(const sc_yj_docs_t *d, size_t i)
{
	return d && i < d->n ? d->docs[i] : NULL;
}

int sc_yj_pos(const sc_yj_docs_t *d, size_t i, const char *path, int *line, int *col)
{
	char buf[MAX_PATH];
	*line = *col = 0;
	if (!d || i >= d->n || strlen(path) >= sizeof(buf))
		return 0;
	snprintf(buf, sizeof(buf), "%s", path);
	/* Strip the last component until a recorded ancestor is found. */
	for (int exact = 1;; exact = 0) {
		const pos_entry_t *e = table_get(&d->tables[i], buf);
		if (e) {
			*line = e->line;
			*col = e->col;
			return exact;
		}
		if (!buf[0])
			return 0;
		char *dot = strrchr(buf, '.'), *br = strrchr(buf, '[');
		char *cut = dot > br ? dot : br;
		if (cut)
			*cut = '\0';
		else
			buf[0] = '\0';
	}
}

/* Appends a finished document; takes the reference to doc and the table. */
static int docs_push(sc_yj_docs_t *d, json_t *doc, pos_table_t *t)
{
	if (d->n == d->cap) {
		size_t ncap = d->cap ? d->cap * 2 : 8;
		json_t **nd = sc_realloc(d->docs, ncap * sizeof(*nd));
		if (!nd)
			return SC_ENOMEM;
		d->docs = nd;
		pos_table_t *nt = sc_realloc(d->tables, ncap * sizeof(*nt));
		if (!nt)
			return SC_ENOMEM;
		d->tables = nt;
		d->cap = ncap;
	}
	d->docs[d->n] = doc;
	d->tables[d->n] = *t;
	d->n++;
	memset(t, 0, sizeof(*t));
	return 0;
}

static void set_err(sc_yj_error_t *err, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void set_err(sc_yj_error_t *err, int line, int col, const char *fmt, ...)
{
	va_list ap;
	err->line = line;
	err->col = col;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

/* Path buffer shared by both readers: grows and shrinks as the walk enters
 * and leaves collections. */
typedef struct path_buf {
	char *s;
	size_t len, cap;
} path_buf_t;

static int path_append(path_buf_t *p, const char *key, long index)
{
	char idx[32];
	const char *piece = key;
	size_t klen;
	if (!key) {
		snprintf(idx, sizeof(idx), "[%ld]", index);
		piece = idx;
	}
	klen = strlen(piece);
	if (p->len + klen + 2 > p->cap) {
		size_t ncap = (p->len + klen + 2) * 2;
		char *ns = sc_realloc(p->s, ncap);
		if (!ns)
			return SC_ENOMEM;
		p->s = ns;
		p->cap = ncap;
	}
	if (key && p->len)
		p->s[p->len++] = '.';
	memcpy(p->s + p->len, piece, klen + 1);
	p->len += klen;
	return 0;
}

static void path_trunc(path_buf_t *p, size_t len)
{
	p->len = len;
	if (p->s)
		p->s[len] = '\0';
}

/* Counts values in a tree (for the node budget of alias copies and JSON). */
static size_t count_nodes(json_t *v, size_t depth, size_t *max_depth)
{
	size_t n = 1;
	const char *k;
	json_t *c;
	size_t i;
	if (depth > *max_depth)
		*max_depth = depth;
	if (json_is_object(v)) {
		json_object_foreach(v, k, c) n += count_nodes(c, depth + 1, max_depth);
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, c) n += count_nodes(c, depth + 1, max_depth);
	}
	return n;
}

/* ==== YAML ============================================================== */

typedef struct frame {
	json_t *node; /* borrowed: owned by its parent or by the builder */
	bool is_map;
	char *key; /* a mapping's key waiting for its value */
	int key_line, key_col;
	size_t path_len; /* the path of this collection */
	size_t index;    /* next sequence index */
} frame_t;

typedef struct anchor {
	char *name;
	json_t *node; /* a reference of our own */
} anchor_t;

typedef struct ybuild {
	const sc_yj_limits_t *lim;
	sc_yj_docs_t *docs;
	sc_yj_error_t *err;
	json_t *root;
	pos_table_t table;
	path_buf_t path;
	frame_t *stack;
	size_t depth;
	anchor_t anchors[MAX_ANCHORS];
	size_t nanchors;
	size_t nodes;
} ybuild_t;

static bool scalar_is(const char *s, const char *const *words)
{
	for (; *words; words++)
		if (strcmp(s, *words) == 0)
			return true;
	return false;
}

/* Matches [-+]?[0-9]+ (returns 10), 0x[0-9a-fA-F]+ (16), 0o[0-7]+ (8), or 0. */
static int int_base(const char *s)
{
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
		const char *digits = s[1] == 'x' ? "0123456789abcdefABCDEF" : "01234567";
		if (!s[2] || strspn(s + 2, digits) != strlen(s + 2))
			return 0;
		return s[1] == 'x' ? 16 : 8;
	}
	if (*s == '-' || *s == '+')
		s++;
	return *s && strspn(s, "0123456789") == strlen(s) ? 10 : 0;
}

/* Matches the YAML 1.2 core schema float form (without .inf and .nan, which
 * JSON cannot hold; those stay strings). */
static bool is_float(const char *s)
{
	size_t n;
	if (*s == '-' || *s == '+')
		s++;
	n = strspn(s, "0123456789");
	if (s[n] == '.') {
		size_t f = strspn(s + n + 1, "0123456789");
		if (n == 0 && f == 0)
			return false;
		n += 1 + f;
	} else if (n == 0) {
		return false;
	}
	s += n;
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '-' || *s == '+')
			s++;
		if (!*s || strspn(s, "0123456789") != strlen(s))
			return false;
		return true;
	}
	return *s == '\0';
}

/* Resolves a plain scalar to a JSON value, or NULL with err set (an
 * integer out of range) or on out of memory. */
static json_t *resolve_plain(const char *s, size_t len, const yaml_mark_t *m, sc_yj_error_t *err)
{
	static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
	static const char *const trues[] = {"true", "True", "TRUE", NULL};
	static const char *const falses[] = {"false", "False", "FALSE", NULL};
	if (strlen(s) != len)
		return json_stringn(s, len); /* an embedded NUL: not a number */
	if (scalar_is(s, nulls))
		return json_null();
	if (scalar_is(s, trues))
		return json_true();
	if (scalar_is(s, falses))
		return json_false();
	int base = int_base(s);
	if (base) {
		errno = 0;
		long long v = strtoll(base == 10 ? s : s + 2, NULL, base);
		if (errno == ERANGE) {
			set_err(err, (int)m->line + 1, (int)m->column + 1,
			        "integer %s is out of range", s);
			return NULL;
		}
		return json_integer(v);
	}
	if (is_float(s)) {
		double v = strtod(s, NULL);
		if (!isfinite(v)) {
			set_err(err, (int)m->line + 1, (int)m->column + 1,
			        "number %s is out of range", s);
			return NULL;
		}
		return json_real(v);
	}
	return json_stringn(s, len);
}

static json_t *scalar_value(ybuild_t *b, const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	const char *tag = (const char *)ev->data.scalar.tag;
	json_t *v;
	if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	    !(tag && strcmp(tag, YAML_STR_TAG) == 0))
		v = resolve_plain(s, len, &ev->start_mark, b->err);
	else
		v = json_stringn(s, len);
	if (!v && !b->err->msg[0])
		set_err(b->err, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1,
		        "invalid UTF-8 or out of memory in a scalar");
	return v;
}

/* Places v (a new reference, consumed) at the current position: as the
 * document root, the value of the pending key, or the next array element.
 * Records its path; a collection keeps its path in the buffer for its
 * children (the caller pushes a frame). */
static int place(ybuild_t *b, json_t *v, const yaml_mark_t *m, bool is_collection)
{
	int line = (int)m->line + 1, col = (int)m->column + 1, rc = 0;
	size_t before = b->path.len;

	if (++b->nodes > b->lim->max_nodes) {
		json_decref(v);
		set_err(b->err, line, col, "more than %zu values", b->lim->max_nodes);
		return SC_ETOOBIG;
	}
	if (b->depth == 0) {
		json_decref(b->root);
		b->root = v;
	} else {
		frame_t *f = &b->stack[b->depth - 1];
		/* v is consumed on every path: jansson frees it when the
		 * insertion fails, and so do we when the path cannot grow. */
		if (f->is_map) {
			rc = path_append(&b->path, f->key, 0);
			if (rc)
				json_decref(v);
			else if (json_object_set_new_nocheck(f->node, f->key, v))
				rc = SC_ENOMEM;
			free(f->key);
			f->key = NULL;
		} else {
			rc = path_append(&b->path, NULL, (long)f->index++);
			if (rc)
				json_decref(v);
			else if (json_array_append_new(f->node, v))
				rc = SC_ENOMEM;
		}
		if (rc) {
			set_err(b->err, line, col, "out of memory");
			return rc;
		}
	}
	if (table_put(&b->table, b->docs->arena, b->path.s ? b->path.s : "", line, col)) {
		set_err(b->err, line, col, "out of memory");
		return SC_ENOMEM;
	}
	if (!is_collection)
		path_trunc(&b->path, before);
	return 0;
}

/* A scalar in key position of a mapping becomes the pending key. */
static int take_key(ybuild_t *b, frame_t *f, const yaml_event_t *ev)
{
	const char *k = (const char *)ev->data.scalar.value;
	int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
	if (strlen(k) != ev->data.scalar.length) {
		set_err(b->err, line, col, "a mapping key contains a NUL character");
		return SC_EPARSE;
	}
	if (json_object_get(f->node, k)) {
		set_err(b->err, line, col, "duplicate key \"%s\"", k);
		return SC_EPARSE;
	}
	if (!(f->key = sc_strdup(k))) {
		set_err(b->err, line, col, "out of memory");
		return SC_ENOMEM;
	}
	f->key_line = line;
	f->key_col = col;
	return 0;
}

static bool expecting_key(const ybuild_t *b)
{
	return b->depth > 0 && b->stack[b->depth - 1].is_map && !b->stack[b->depth - 1].key;
}

static int remember_anchor(ybuild_t *b, const yaml_char_t *name, json_t *v, const yaml_mark_t *m)
{
	if (!name)
		return 0;
	if (b->nanchors == MAX_ANCHORS) {
		set_err(b->err, (int)m->line + 1, (int)m->column + 1, "more than %d anchors",
		        MAX_ANCHORS);
		return SC_ETOOBIG;
	}
	char *n = sc_strdup((const char *)name);
	if (!n) {
		set_err(b->err, 0, 0, "out of memory");
		return SC_ENOMEM;
	}
	/* A later anchor of the same name shadows an earlier one. */
	b->anchors[b->nanchors++] = (anchor_t){n, json_incref(v)};
	return 0;
}

static int on_scalar(ybuild_t *b, const yaml_event_t *ev)
{
	const yaml_mark_t *m = &ev->start_mark;
	if (ev->data.scalar.length > b->lim->max_string) {
		set_err(b->err, (int)m->line + 1, (int)m->column + 1,
		        "a scalar of %zu bytes is longer than the limit of %zu",
		        ev->data.scalar.length, b->lim->max_string);
		return SC_ETOOBIG;
	}
	if (expecting_key(b))
		return take_key(b, &b->stack[b->depth - 1], ev);
	json_t *v = scalar_value(b, ev);
	if (!v)
		return SC_EPARSE;
	int rc = remember_anchor(b, ev->data.scalar.anchor, v, m);
	if (rc) {
		json_decref(v);
		return rc;
	}
	return place(b, v, m, false);
}

static int on_start(ybuild_t *b, const yaml_event_t *ev, bool is_map)
{
	const yaml_mark_t *m = &ev->start_mark;
	const yaml_char_t *anchor =
	    is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
	int line = (int)m->line + 1, col = (int)m->column + 1;
	if (expecting_key(b)) {
		set_err(b->err, line, col, "a mapping key must be a scalar");
		return SC_EPARSE;
	}
	if (b->depth >= b->lim->max_depth) {
		set_err(b->err, line, col, "nesting deeper than %zu levels", b->lim->max_depth);
		return SC_ETOOBIG;
	}
	json_t *v = is_map ? json_object() : json_array();
	if (!v) {
		set_err(b->err, line, col, "out of memory");
		return SC_ENOMEM;
	}
	int rc = remember_anchor(b, anchor, v, m);
	if (rc) {
		json_decref(v);
		return rc;
	}
	size_t before = b->path.len;
	if ((rc = place(b, v, m, true)))
		return rc;
	b->stack[b->depth++] = (frame_t){.node = v, .is_map = is_map, .path_len = before};
	return 0;
}

static void on_end(ybuild_t *b)
{
	frame_t *f = &b->stack[--b->depth];
	free(f->key);
	f->key = NULL;
	path_trunc(&b->path, f->path_len);
}

static int on_alias(ybuild_t *b, const yaml_event_t *ev)
{
	const yaml_mark_t *m = &ev->start_mark;
	int line = (int)m->line + 1, col = (int)m->column + 1;
	const char *name = (const char *)ev->data.alias.anchor;
	json_t *src = NULL;
	for (size_t i = b->nanchors; i > 0 && !src; i--)
		if (strcmp(b->anchors[i - 1].name, name) == 0)
			src = b->anchors[i - 1].node;
	if (!src) {
		set_err(b->err, line, col, "unknown anchor \"%s\"", name);
		return SC_EPARSE;
	}
	if (expecting_key(b)) {
		set_err(b->err, line, col, "an alias cannot be a mapping key");
		return SC_EPARSE;
	}
	size_t depth = 0, n = count_nodes(src, 0, &depth);
	if (n > b->lim->max_nodes - b->nodes || b->depth + depth >= b->lim->max_depth) {
		set_err(b->err, line, col, "alias *%s expands beyond the input limits", name);
		return SC_ETOOBIG;
	}
	json_t *copy = json_deep_copy(src);
	if (!copy) {
		set_err(b->err, line, col, "out of memory");
		return SC_ENOMEM;
	}
	b->nodes += n - 1; /* place() counts the copy's root */
	return place(b, copy, m, false);
}

/* Ends a document: keeps it unless it is null (an empty section). */
static int on_document_end(ybuild_t *b)
{
	int rc = 0;
	if (b->root && !json_is_null(b->root)) {
		rc = docs_push(b->docs, b->root, &b->table);
		if (rc) {
			json_decref(b->root);
			set_err(b->err, 0, 0, "out of memory");
		}
	} else
		json_decref(b->root);
	b->root = NULL;
	free(b->table.slots);
	memset(&b->table, 0, sizeof(b->table));
	for (size_t i = 0; i < b->nanchors; i++) {
		free(b->anchors[i].name);
		json_decref(b->anchors[i].node);
	}
	b->nanchors = 0; /* anchors do not cross documents */
	return rc;
}

static int on_event(ybuild_t *b, const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		return on_scalar(b, ev);
	case YAML_SEQUENCE_START_EVENT:
		return on_start(b, ev, false);
	case YAML_MAPPING_START_EVENT:
		return on_start(b, ev, true);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		on_end(b);
		return 0;
	case YAML_ALIAS_EVENT:
		return on_alias(b, ev);
	case YAML_DOCUMENT_END_EVENT:
		return on_document_end(b);
	default:
		return 0;
	}
}

static void ybuild_cleanup(ybuild_t *b)
{
	while (b->depth)
		on_end(b);
	on_document_end(b); /* frees anchors; the docs are dropped by the caller */
	free(b->stack);
	free(b->path.s);
}

static int load_yaml(sc_yj_docs_t *d, const char *text, size_t len, const sc_yj_limits_t *lim,
                     sc_yj_error_t *err)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	ybuild_t *b = sc_calloc(1, sizeof(*b));
	int rc = 0;

	if (!b || !(b->stack = sc_calloc(lim->max_depth + 1, sizeof(frame_t)))) {
		free(b);
		set_err(err, 0, 0, "out of memory");
		return SC_ENOMEM;
	}
	b->lim = lim;
	b->docs = d;
	b->err = err;
	if (!yaml_parser_initialize(&parser)) {
		rc = SC_ENOMEM;
		set_err(err, 0, 0, "out of memory");
		goto done;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	for (bool end = false; !end && !rc;) {
		if (!yaml_parser_parse(&parser, &ev)) {
			set_err(err, (int)parser.problem_mark.line + 1,
			        (int)parser.problem_mark.column + 1, "%s%s%s",
			        parser.problem ? parser.problem : "malformed YAML",
			        parser.context ? " " : "", parser.context ? parser.context : "");
			rc = parser.error == YAML_MEMORY_ERROR ? SC_ENOMEM : SC_EPARSE;
			break;
		}
		end = ev.type == YAML_STREAM_END_EVENT;
		rc = on_event(b, &ev);
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
done:
	if (rc && b->root) {
		json_decref(b->root);
		b->root = NULL;
	}
	ybuild_cleanup(b);
	free(b);
	return rc;
}

/* ==== JSON ============================================================== */

/* jansson reports no positions for values, so after it has accepted the
 * text a small scanner walks the same text (known to be valid JSON) and
 * records where each value starts. */
typedef struct jscan {
	const char *s;
	size_t n, i;
	int line, col;
	path_buf_t path;
	pos_table_t *table;
	sc_arena_t *arena;
} jscan_t;

static void js_adv(jscan_t *j)
{
	unsigned char c = (unsigned char)j->s[j->i++];
	if (c == '\n') {
		j->line++;
		j->col = 1;
	} else if ((c & 0xC0) != 0x80) {
		j->col++; /* count characters, not UTF-8 continuation bytes */
	}
}

static void js_ws(jscan_t *j)
{
	while (j->i < j->n && strchr(" \t\r\n", j->s[j->i]) && j->s[j->i])
		js_adv(j);
}

static unsigned js_hex4(const char *p)
{
	unsigned v = 0;
	for (int k = 0; k < 4; k++) {
		char c = p[k];
		v = v * 16 + (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
	}
	return v;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xC0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xE0 | cp >> 12);
		o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | cp >> 18);
	o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
	o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
	o[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* Reads a string at the cursor; decodes it into *out (malloc'd) when out is
 * not NULL, as keys are needed for paths. A decoded string is never longer
 * than its escaped form. */
static int js_string(jscan_t *j, char **out)
{
	size_t start = j->i + 1, end = start;
	while (j->s[end] != '"')
		end += j->s[end] == '\\' ? 2 : 1;
	if (out) {
		char *o = sc_malloc(end - start + 1);
		size_t k = 0;
		if (!o)
			return SC_ENOMEM;
		for (size_t p = start; p < end; p++) {
			if (j->s[p] != '\\') {
				o[k++] = j->s[p];
				continue;
			}
			char e = j->s[++p];
			const char *map = strchr("b\bf\fn\nr\rt\t", e);
			if (e == 'u') {
				unsigned cp = js_hex4(j->s + p + 1);
				p += 4;
				if (cp >= 0xD800 && cp < 0xDC00 && j->s[p + 1] == '\\') {
					unsigned lo = js_hex4(j->s + p + 3);
					cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
					p += 6;
				}
				k += put_utf8(o + k, cp);
			} else {
				o[k++] = map ? map[1] : e; /* \" \\ \/ */
			}
		}
		o[k] = '\0';
		*out = o;
	}
	while (j->i <= end)
		js_adv(j);
	return 0;
}

static int js_value(jscan_t *j);

static int js_record_and_descend(jscan_t *j, const char *key, long index)
{
	size_t before = j->path.len;
	int rc = path_append(&j->path, key, index);
	if (!rc)
		rc = js_value(j);
	path_trunc(&j->path, before);
	return rc;
}

static int js_object(jscan_t *j)
{
	js_adv(j); /* '{' */
	for (;;) {
		js_ws(j);
		if (j->s[j->i] == '}')
			break;
		char *key = NULL;
		int rc = js_string(j, &key);
		if (rc)
			return rc;
		js_ws(j);
		js_adv(j); /* ':' */
		rc = js_record_and_descend(j, key, 0);
		free(key);
		if (rc)
			return rc;
		js_ws(j);
		if (j->s[j->i] == ',')
			js_adv(j);
	}
	js_adv(j);
	return 0;
}

static int js_array(jscan_t *j)
{
	js_adv(j); /* '[' */
	for (long idx = 0;; idx++) {
		js_ws(j);
		if (j->s[j->i] == ']')
			break;
		int rc = js_record_and_descend(j, NULL, idx);
		if (rc)
			return rc;
		js_ws(j);
		if (j->s[j->i] == ',')
			js_adv(j);
	}
	js_adv(j);
	return 0;
}

/* Depth is bounded by the check on the decoded tree before the scan. */
static int js_value(jscan_t *j)
{
	js_ws(j);
	if (table_put(j->table, j->arena, j->path.s ? j->path.s : "", j->line, j->col))
		return SC_ENOMEM;
	switch (j->s[j->i]) {
	case '{':
		return js_object(j);
	case '[':
		return js_array(j);
	case '"':
		return js_string(j, NULL);
	default:
		while (j->i < j->n && !strchr(",]} \t\r\n", j->s[j->i]))
			js_adv(j);
		return 0;
	}
}

/* Checks string lengths (keys and values) against the limit. */
static bool strings_fit(json_t *v, size_t max)
{
	const char *k;
	json_t *c;
	size_t i;
	if (json_is_string(v))
		return json_string_length(v) <= max;
	if (json_is_object(v)) {
		json_object_foreach(v, k,
		                    c) if (strlen(k) > max || !strings_fit(c, max)) return false;
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, c) if (!strings_fit(c, max)) return false;
	}
	return true;
}

static int load_json(sc_yj_docs_t *d, const char *text, size_t len, const sc_yj_limits_t *lim,
                     sc_yj_error_t *err)
{
	json_error_t jerr;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		set_err(err, jerr.line, jerr.column, "%s", jerr.text);
		return SC_EPARSE;
	}
	size_t depth = 0, n = count_nodes(root, 0, &depth);
	int rc = 0;
	/* count_nodes counts the root at depth 0; collections nest one less. */
	if (depth > lim->max_depth) {
		set_err(err, 1, 1, "nesting deeper than %zu levels", lim->max_depth);
		rc = SC_ETOOBIG;
	} else if (n > lim->max_nodes) {
		set_err(err, 1, 1, "more than %zu values", lim->max_nodes);
		rc = SC_ETOOBIG;
	} else if (!strings_fit(root, lim->max_string)) {
		set_err(err, 1, 1, "a string is longer than the limit of %zu bytes",
		        lim->max_string);
		rc = SC_ETOOBIG;
	}
	if (rc) {
		json_decref(root);
		return rc;
	}
	/* NUL terminates the scan safely: jansson accepted exactly len bytes. */
	char *copy = sc_malloc(len + 1);
	jscan_t j = {.s = copy, .n = len, .line = 1, .col = 1, .arena = d->arena};
	pos_table_t table = {0};
	j.table = &table;
	if (!copy) {
		rc = SC_ENOMEM;
	} else {
		memcpy(copy, text, len);
		copy[len] = '\0';
		rc = js_value(&j);
	}
	if (!rc)
		rc = docs_push(d, root, &table);
	if (rc) {
		json_decref(root);
		free(table.slots);
		set_err(err, 0, 0, "out of memory");
	}
	free(j.path.s);
	free(copy);
	return rc;
}

int sc_yj_load(const char *text, size_t len, const sc_yj_limits_t *limits, sc_yj_docs_t **out,
               sc_yj_error_t *err)
{
	sc_yj_limits_t lim;
	sc_yj_docs_t *d = NULL;
	int rc;

	*out = NULL;
	memset(err, 0, sizeof(*err));
	if (limits)
		lim = *limits;
	else
		sc_yj_limits_default(&lim);
	if (len > lim.max_bytes) {
		set_err(err, 0, 0, "input is %zu bytes, more than the limit of %zu", len,
		        lim.max_bytes);
		return SC_ETOOBIG;
	}
	d = sc_calloc(1, sizeof(*d));
	if (!d || !(d->arena = sc_arena_new(0))) {
		rc = SC_ENOMEM;
		set_err(err, 0, 0, "out of memory");
		goto error;
	}
	size_t skip = 0;
	if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
		skip = 3; /* a UTF-8 byte order mark */
	while (skip < len && strchr(" \t\r\n", text[skip]))
		skip++;
	if (skip < len && (text[skip] == '{' || text[skip] == '[')) {
		rc = load_json(d, text, len, &lim, err);
		if (rc == SC_EPARSE) {
			/* Maybe a YAML flow collection: keep JSON's message if
			 * YAML fails too, since JSON was the likely intent. */
			sc_yj_error_t jerr = *err;
			sc_yj_free(d);
			d = sc_calloc(1, sizeof(*d));
			if (!d || !(d->arena = sc_arena_new(0))) {
				rc = SC_ENOMEM;
				goto error;
			}
			rc = load_yaml(d, text, len, &lim, err);
			if (rc == SC_EPARSE)
				*err = jerr;
		}
	} else {
		rc = load_yaml(d, text, len, &lim, err);
	}
	if (rc)
		goto error;
	*out = d;
	return 0;
error:
	sc_yj_free(d);
	return rc;
}
