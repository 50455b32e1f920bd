/* The manifest reader: typed field getters that keep the field path, so
 * that every error names the field, says what was expected and points at
 * the line and column where the value starts. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/quantity.h"
#include "base/alloc.h"
#include "base/parse.h"
#include "manifest/manifest_int.h"

int sc__vec_push(sc__vec_t *v, const void *item)
{
	if (v->n == v->cap) {
		size_t ncap = v->cap ? v->cap * 2 : 16;
		void *ni = sc_realloc(v->items, ncap * v->size);
		if (!ni)
			return SC_ENOMEM;
		v->items = ni;
		v->cap = ncap;
	}
	memcpy((char *)v->items + v->n * v->size, item, v->size);
	v->n++;
	return 0;
}

/* Appends s (len bytes) to the path, truncating like snprintf. This runs
 * for every field of every object the server decodes, so no printf. */
static void path_append(sc__rd_t *rd, const char *s, size_t len)
{
	size_t room = sizeof(rd->path) - 1 - rd->plen;
	size_t n = len < room ? len : room;
	memcpy(rd->path + rd->plen, s, n);
	rd->plen += n; /* truncated: only the message suffers */
	rd->path[rd->plen] = '\0';
}

sc__mark_t sc__rd_push(sc__rd_t *rd, const char *key)
{
	sc__mark_t m = rd->plen;
	if (rd->plen)
		path_append(rd, ".", 1);
	path_append(rd, key, strlen(key));
	return m;
}

sc__mark_t sc__rd_push_index(sc__rd_t *rd, size_t i)
{
	sc__mark_t m = rd->plen;
	int n = snprintf(rd->path + rd->plen, sizeof(rd->path) - rd->plen, "[%zu]", i);
	if (n > 0)
		rd->plen += (size_t)n;
	if (rd->plen >= sizeof(rd->path))
		rd->plen = sizeof(rd->path) - 1;
	return m;
}

void sc__rd_pop(sc__rd_t *rd, sc__mark_t m)
{
	rd->plen = m;
	rd->path[m] = '\0';
}

sc__pos_t sc__rd_pos(const sc__rd_t *rd, const char *sub)
{
	char full[SC__PATH_MAX + 64];
	sc__pos_t p = {0, 0};
	if (!rd->docs)
		return p;
	const char *sep = rd->prefix[0] && rd->plen ? "." : "";
	if (sub)
		snprintf(full, sizeof(full), "%s%s%s%s%s", rd->prefix, sep, rd->path,
		         rd->plen || rd->prefix[0] ? "." : "", sub);
	else
		snprintf(full, sizeof(full), "%s%s%s", rd->prefix, sep, rd->path);
	sc_yj_pos(rd->docs, rd->doc, full, &p.line, &p.col);
	return p;
}

int sc__rd_fail(sc__rd_t *rd, int code, const char *fmt, ...)
{
	sc_manifest_error_t *e = rd->err;
	va_list ap;
	sc__pos_t p = sc__rd_pos(rd, NULL);
	e->code = code;
	e->line = p.line;
	e->col = p.col;
	snprintf(e->file, sizeof(e->file), "%s", rd->file ? rd->file : "");
	snprintf(e->object, sizeof(e->object), "%s", rd->object);
	snprintf(e->path, sizeof(e->path), "%s", rd->path);
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return code;
}

static int oom(sc__rd_t *rd)
{
	return sc__rd_fail(rd, SC_ENOMEM, "out of memory");
}

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "a list";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

int sc__rd_fields(sc__rd_t *rd, json_t *obj, const char *const *allowed)
{
	const char *k;
	json_t *v;
	json_object_foreach(obj, k, v)
	{
		const char *const *a = allowed;
		while (*a && strcmp(*a, k) != 0)
			a++;
		if (*a)
			continue;
		sc__mark_t m = sc__rd_push(rd, k);
		char list[256] = "";
		for (a = allowed; *a; a++) {
			size_t l = strlen(list);
			snprintf(list + l, sizeof(list) - l, "%s%s", l ? ", " : "", *a);
		}
		int rc = sc__rd_fail(rd, SC_EINVAL, "unknown field (expected one of: %s)", list);
		sc__rd_pop(rd, m);
		return rc;
	}
	return 0;
}

/* Looks up key and pushes it on the path. A JSON null counts as absent,
 * as in Kubernetes. Returns 1 when present, 0 when absent (path popped),
 * or an error for an absent required field. */
static int lookup(sc__rd_t *rd, json_t *obj, const char *key, bool req, json_t **v, sc__mark_t *m)
{
	*v = json_object_get(obj, key);
	*m = sc__rd_push(rd, key);
	if (*v && !json_is_null(*v))
		return 1;
	int rc = req ? sc__rd_fail(rd, SC_EINVAL, "required field is missing") : 0;
	sc__rd_pop(rd, *m);
	return rc;
}

/* Ends a getter: on failure the path stays at the field for the error. */
static int done(sc__rd_t *rd, sc__mark_t m, int rc)
{
	if (rc >= 0)
		sc__rd_pop(rd, m);
	return rc;
}

static int wrong_type(sc__rd_t *rd, json_t *v, const char *what)
{
	return sc__rd_fail(rd, SC_EINVAL, "expected %s, got %s", what, type_name(v));
}

/* JSON types as a set, for lookup_as: a quantity may be a string or a
 * number, a bool is either of two types in jansson. */
#define KIND(t) (1u << (t))
#define KIND_NUMBER (KIND(JSON_INTEGER) | KIND(JSON_REAL))
#define KIND_BOOL (KIND(JSON_TRUE) | KIND(JSON_FALSE))

/* lookup, then the type check every getter starts with: one place says
 * "expected <what>, got <type>". On 1 the path is still at the field so
 * that the getter's own checks name it; the getter ends with done(). */
static int lookup_as(sc__rd_t *rd, json_t *obj, const char *key, bool req, unsigned kinds,
                     const char *what, json_t **v, sc__mark_t *m)
{
	int rc = lookup(rd, obj, key, req, v, m);
	if (rc > 0 && !(kinds & KIND(json_typeof(*v))))
		return wrong_type(rd, *v, what);
	return rc;
}

/* A getter that only checks the type and hands the JSON value back. */
static int get_kind(sc__rd_t *rd, json_t *obj, const char *key, bool req, unsigned kinds,
                    const char *what, json_t **out)
{
	sc__mark_t m;
	int rc = lookup_as(rd, obj, key, req, kinds, what, out, &m);
	return rc <= 0 ? rc : done(rd, m, 1);
}

int sc__get_object(sc__rd_t *rd, json_t *obj, const char *key, bool req, json_t **out)
{
	return get_kind(rd, obj, key, req, KIND(JSON_OBJECT), "an object", out);
}

int sc__get_array(sc__rd_t *rd, json_t *obj, const char *key, bool req, json_t **out)
{
	return get_kind(rd, obj, key, req, KIND(JSON_ARRAY), "a list", out);
}

int sc__get_str(sc__rd_t *rd, json_t *obj, const char *key, bool req, const char **out)
{
	json_t *v;
	sc__mark_t m;
	int rc = lookup_as(rd, obj, key, req, KIND(JSON_STRING), "a string", &v, &m);
	if (rc <= 0)
		return rc;
	if (json_string_length(v) == 0)
		return sc__rd_fail(rd, SC_EINVAL, "expected a non-empty string");
	if (strlen(json_string_value(v)) != json_string_length(v))
		return sc__rd_fail(rd, SC_EINVAL, "a string must not contain NUL");
	if (!(*out = sc_arena_strdup(rd->arena, json_string_value(v))))
		return oom(rd);
	return done(rd, m, 1);
}

/* Object names as Kubernetes allows them (RFC 1123 subdomains), with upper
 * case tolerated: they end up in pod names, URLs and log lines. */
static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum =
		    (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (!alnum && !((c == '-' || c == '.' || c == '_') && i > 0 && i < n - 1))
			return false;
	}
	return true;
}

int sc__get_name(sc__rd_t *rd, json_t *obj, const char *key, bool req, const char **out)
{
	const char *s = NULL;
	int rc = sc__get_str(rd, obj, key, req, &s);
	if (rc <= 0)
		return rc;
	if (!name_ok(s)) {
		sc__mark_t m = sc__rd_push(rd, key);
		(void)m;
		return sc__rd_fail(rd, SC_EINVAL,
		                   "\"%s\" is not a valid name (letters, digits, '-', '.', "
		                   "'_', at most 253, starting and ending with a letter or "
		                   "digit)",
		                   s);
	}
	*out = s;
	return 1;
}

int sc__get_int(sc__rd_t *rd, json_t *obj, const char *key, bool req, int64_t min, int64_t max,
                int64_t *out)
{
	json_t *v;
	sc__mark_t m;
	int rc = lookup(rd, obj, key, req, &v, &m);
	if (rc <= 0)
		return rc;
	int64_t x;
	if (json_is_integer(v)) {
		x = (int64_t)json_integer_value(v);
	} else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
	           fabs(json_real_value(v)) < 9e15) {
		x = (int64_t)json_real_value(v); /* 2.0 is a whole number */
	} else {
		return sc__rd_fail(rd, SC_EINVAL, "expected a whole number, got %s%s",
		                   json_is_number(v) ? "" : type_name(v),
		                   json_is_number(v) ? "a fraction" : "");
	}
	if (x < min || x > max) {
		if (max == INT64_MAX)
			return sc__rd_fail(rd, SC_EINVAL,
			                   "expected a whole number >= %lld, got %lld",
			                   (long long)min, (long long)x);
		return sc__rd_fail(rd, SC_EINVAL, "expected a whole number in %lld..%lld, got %lld",
		                   (long long)min, (long long)max, (long long)x);
	}
	*out = x;
	return done(rd, m, 1);
}

int sc__get_num(sc__rd_t *rd, json_t *obj, const char *key, bool req, double min, double max,
                double *out)
{
	json_t *v;
	sc__mark_t m;
	int rc = lookup_as(rd, obj, key, req, KIND_NUMBER, "a number", &v, &m);
	if (rc <= 0)
		return rc;
	double x = json_number_value(v);
	if (!(x >= min && x <= max))
		return sc__rd_fail(rd, SC_EINVAL, "expected a number in [%g, %g], got %g", min, max,
		                   x);
	*out = x;
	return done(rd, m, 1);
}

int sc__get_bool(sc__rd_t *rd, json_t *obj, const char *key, bool req, bool *out)
{
	json_t *v;
	int rc = get_kind(rd, obj, key, req, KIND_BOOL, "true or false", &v);
	if (rc > 0)
		*out = json_is_true(v);
	return rc;
}

/* Numbers are formatted back to text so that one parser decides, with the
 * same rounding, whatever way the user wrote a quantity. %.15g keeps 0.1 as
 * "0.1" rather than 0.1000000000000000055. */
static const char *quantity_text(json_t *v, char *buf, size_t size)
{
	if (json_is_string(v))
		return json_string_value(v);
	if (json_is_integer(v))
		snprintf(buf, size, "%lld", (long long)json_integer_value(v));
	else
		snprintf(buf, size, "%.15g", json_real_value(v));
	return buf;
}

typedef int (*qty_fn)(const char *, unsigned, int64_t *);

static int get_quantity(sc__rd_t *rd, json_t *obj, const char *key, bool req, unsigned flags,
                        int64_t *out, qty_fn parse, const char *what)
{
	json_t *v;
	sc__mark_t m;
	char buf[64];
	int rc = lookup_as(rd, obj, key, req, KIND(JSON_STRING) | KIND_NUMBER, what, &v, &m);
	if (rc <= 0)
		return rc;
	const char *s = quantity_text(v, buf, sizeof(buf));
	rc = parse(s, flags, out);
	if (rc == SC_ERANGE)
		return sc__rd_fail(rd, SC_EINVAL, "\"%s\" is out of range (expected %s%s)", s, what,
		                   flags & SC_QTY_NEGATIVE ? ", or -1" : ", not negative");
	if (rc)
		return sc__rd_fail(rd, SC_EINVAL, "\"%s\" is not %s", s, what);
	return done(rd, m, 1);
}

int sc__get_cpu(sc__rd_t *rd, json_t *obj, const char *key, bool req, unsigned flags, int64_t *out)
{
	return get_quantity(rd, obj, key, req, flags, out, sc_quantity_cpu,
	                    "a CPU quantity such as 8, 0.5 or 500m");
}

int sc__get_mem(sc__rd_t *rd, json_t *obj, const char *key, bool req, unsigned flags, int64_t *out)
{
	return get_quantity(rd, obj, key, req, flags, out, sc_quantity_memory,
	                    "a memory quantity such as 16Gi, 512Mi or 80G");
}

static int dur_adapter(const char *s, unsigned flags, int64_t *out)
{
	(void)flags;
	return sc_quantity_duration(s, out);
}

int sc__get_dur(sc__rd_t *rd, json_t *obj, const char *key, bool req, int64_t *out)
{
	return get_quantity(rd, obj, key, req, 0, out, dur_adapter,
	                    "a duration such as 30s, 10m or 1h30m");
}

int sc__get_time(sc__rd_t *rd, json_t *obj, const char *key, bool req, int64_t *out)
{
	json_t *v;
	sc__mark_t m;
	int rc = lookup_as(rd, obj, key, req, KIND(JSON_STRING), "an RFC 3339 time string", &v, &m);
	if (rc <= 0)
		return rc;
	if (sc_quantity_time(json_string_value(v), out))
		return sc__rd_fail(rd, SC_EINVAL,
		                   "\"%s\" is not an RFC 3339 time such as 2026-11-29T10:00:00Z",
		                   json_string_value(v));
	return done(rd, m, 1);
}

int sc__get_enum(sc__rd_t *rd, json_t *obj, const char *key, bool req, const char *const *names,
                 int *out)
{
	json_t *v;
	sc__mark_t m;
	int rc = lookup(rd, obj, key, req, &v, &m);
	if (rc <= 0)
		return rc;
	char list[200] = "";
	for (int i = 0; names[i]; i++) {
		if (json_is_string(v) && strcmp(json_string_value(v), names[i]) == 0) {
			*out = i;
			return done(rd, m, 1);
		}
		size_t l = strlen(list);
		snprintf(list + l, sizeof(list) - l, "%s%s", i ? ", " : "", names[i]);
	}
	if (!json_is_string(v))
		return sc__rd_fail(rd, SC_EINVAL, "expected one of %s, got %s", list, type_name(v));
	return sc__rd_fail(rd, SC_EINVAL, "expected one of %s, got \"%s\"", list,
	                   json_string_value(v));
}

/* Label values are strings; a YAML user writes `rack: 12` and means "12",
 * so scalars are turned into their text. */
static const char *scalar_text(sc__rd_t *rd, json_t *v)
{
	char buf[64];
	if (json_is_string(v))
		return sc_arena_strdup(rd->arena, json_string_value(v));
	if (json_is_boolean(v))
		return json_is_true(v) ? "true" : "false";
	if (json_is_number(v))
		return sc_arena_strdup(rd->arena, quantity_text(v, buf, sizeof(buf)));
	return NULL;
}

int sc__get_labels(sc__rd_t *rd, json_t *obj, const char *key, sc_label_t **out, size_t *n)
{
	json_t *map, *v;
	const char *k;
	int rc = sc__get_object(rd, obj, key, false, &map);
	if (rc <= 0)
		return rc;
	sc_label_t *l = sc_arena_calloc(rd->arena, json_object_size(map) + 1, sizeof(*l));
	if (!l)
		return oom(rd);
	size_t i = 0;
	sc__mark_t m = sc__rd_push(rd, key);
	json_object_foreach(map, k, v)
	{
		sc__mark_t mk = sc__rd_push(rd, k);
		if (!*k)
			return sc__rd_fail(rd, SC_EINVAL, "empty key");
		l[i].key = sc_arena_strdup(rd->arena, k);
		l[i].value = scalar_text(rd, v);
		if (!json_is_string(v) && !json_is_number(v) && !json_is_boolean(v))
			return wrong_type(rd, v, "a string");
		if (!l[i].key || !l[i].value)
			return oom(rd);
		sc__rd_pop(rd, mk);
		i++;
	}
	sc__rd_pop(rd, m);
	*out = l;
	*n = i;
	return 1;
}

int sc__get_strs(sc__rd_t *rd, json_t *obj, const char *key, bool req, const char ***out, size_t *n)
{
	json_t *arr, *v;
	size_t i;
	int rc = sc__get_array(rd, obj, key, req, &arr);
	if (rc <= 0)
		return rc;
	const char **s = sc_arena_calloc(rd->arena, json_array_size(arr) + 1, sizeof(*s));
	if (!s)
		return oom(rd);
	sc__mark_t m = sc__rd_push(rd, key);
	json_array_foreach(arr, i, v)
	{
		sc__mark_t mi = sc__rd_push_index(rd, i);
		if (!json_is_string(v) || json_string_length(v) == 0)
			return sc__rd_fail(rd, SC_EINVAL, "expected a non-empty string, got %s",
			                   type_name(v));
		if (!(s[i] = sc_arena_strdup(rd->arena, json_string_value(v))))
			return oom(rd);
		sc__rd_pop(rd, mi);
	}
	sc__rd_pop(rd, m);
	*out = s;
	*n = json_array_size(arr);
	return 1;
}

bool sc__mig_profile_ok(const char *s)
{
	/* <n>g.<m>gb with n, m positive: 1g.5gb, 3g.40gb, 7g.80gb. */
	uint64_t g, gb;
	if (s[0] < '1' || s[0] > '9' || sc_parse_digits(&s, 1u << 20, &g) < 0 ||
	    strncmp(s, "g.", 2) != 0)
		return false;
	s += 2;
	return s[0] >= '1' && s[0] <= '9' && sc_parse_digits(&s, 1u << 20, &gb) == 0 &&
	       strcmp(s, "gb") == 0;
}
