/* kubectl-style JSONPath templates (see jsonpath.h).
 *
 * A template is parsed once into a list of nodes (text, expression, range
 * with its body); an expression is a list of steps applied to a set of
 * values, each step mapping every value to zero or more values. Values are
 * borrowed from the document throughout, so evaluation allocates only the
 * sets. */
#include "cli/jsonpath.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/parse.h"
#include "starcloud/error.h"

#define MAX_DEPTH 16       /* range nesting, and filters within filters */
#define MAX_RESULTS 200000 /* values one step may produce */
#define MAX_WALK 64        /* depth of a recursive descent */

enum { ST_FIELD, ST_INDEX, ST_SLICE, ST_ALL, ST_FILTER, ST_RECURSE };
enum { OP_EXISTS, OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE };

typedef struct path path_t;

typedef struct step {
	int kind;
	char *name;       /* FIELD, RECURSE */
	long a, b;        /* INDEX a; SLICE [a:b] */
	int has_a, has_b; /* SLICE bounds given */
	path_t *filter;   /* FILTER: the path after @ */
	int op;           /* FILTER */
	json_t *lit;      /* FILTER: what it compares with */
} step_t;

struct path {
	step_t *steps;
	size_t n;
	int from_root; /* $: the document, not the range's element */
};

enum { N_TEXT, N_EXPR, N_RANGE };

typedef struct node {
	int kind;
	char *text;        /* N_TEXT */
	path_t *path;      /* N_EXPR, N_RANGE */
	struct node *body; /* N_RANGE */
	size_t nbody;
} node_t;

struct sc_jsonpath {
	node_t *nodes;
	size_t n;
};

/* ---------------------------------------------------------------------
 * Freeing
 * ------------------------------------------------------------------- */

static void path_free(path_t *p);

static void step_free(step_t *s)
{
	free(s->name);
	path_free(s->filter);
	json_decref(s->lit);
}

static void path_free(path_t *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		step_free(&p->steps[i]);
	free(p->steps);
	free(p);
}

static void nodes_free(node_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].text);
		path_free(v[i].path);
		nodes_free(v[i].body, v[i].nbody);
	}
	free(v);
}

void sc_jsonpath_free(sc_jsonpath_t *p)
{
	if (!p)
		return;
	nodes_free(p->nodes, p->n);
	free(p);
}

/* ---------------------------------------------------------------------
 * Parsing
 * ------------------------------------------------------------------- */

typedef struct parser {
	const char *s; /* the whole template */
	size_t pos;
	size_t end; /* of the current expression */
	char *err;
	size_t errsz;
	int failed;
} parser_t;

static int fail(parser_t *p, const char *what)
{
	if (!p->failed)
		snprintf(p->err, p->errsz, "jsonpath: position %zu: %s", p->pos + 1, what);
	p->failed = 1;
	return SC_EINVAL;
}

static int at_end(const parser_t *p)
{
	return p->pos >= p->end;
}

static char peek(const parser_t *p)
{
	return at_end(p) ? '\0' : p->s[p->pos];
}

static void skip_space(parser_t *p)
{
	while (!at_end(p) && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t'))
		p->pos++;
}

static step_t *add_step(path_t *path)
{
	path->steps = sc_xreallocarray(path->steps, path->n + 1, sizeof(*path->steps));
	step_t *s = &path->steps[path->n++];
	memset(s, 0, sizeof(*s));
	return s;
}

/* A quoted string ('...' or "..."), with \n \t \\ \' \" escapes; the
 * position ends after the closing quote. */
static char *quoted(parser_t *p)
{
	char q = peek(p);
	sc_buf_t b;
	sc_buf_init(&b, SC_JSONPATH_MAX);
	p->pos++;
	while (!at_end(p) && p->s[p->pos] != q) {
		char c = p->s[p->pos++];
		if (c == '\\' && !at_end(p)) {
			char e = p->s[p->pos++];
			c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
		}
		sc_buf_append(&b, &c, 1);
	}
	if (at_end(p)) {
		sc_buf_free(&b);
		fail(p, "unclosed quote");
		return NULL;
	}
	p->pos++;
	sc_buf_append(&b, "", 0);
	return sc_buf_steal(&b, NULL);
}

/* A field name after '.' or "..": up to '.', '[', an operator or the end. */
static char *bare_name(parser_t *p)
{
	size_t start = p->pos;
	while (!at_end(p) && !strchr(".[]()=!<> \t", p->s[p->pos]))
		p->pos++;
	if (p->pos == start)
		return NULL;
	char *n = sc_xmalloc(p->pos - start + 1);
	memcpy(n, p->s + start, p->pos - start);
	n[p->pos - start] = '\0';
	return n;
}

static int parse_long(parser_t *p, long *out)
{
	size_t start = p->pos;
	int neg = peek(p) == '-';
	p->pos += neg;
	uint64_t v = 0;
	const char *q = p->s + p->pos;
	if (!isdigit((unsigned char)peek(p)) || sc_parse_digits(&q, 1000000000, &v) < 0) {
		p->pos = start;
		return fail(p, "expected a number");
	}
	p->pos = (size_t)(q - p->s);
	*out = neg ? -(long)v : (long)v;
	return 0;
}

static path_t *parse_path(parser_t *p, int depth, int in_filter);

/* The literal a filter compares with: a quoted string or a number. */
static json_t *filter_literal(parser_t *p)
{
	skip_space(p);
	if (peek(p) == '\'' || peek(p) == '"') {
		char *s = quoted(p);
		json_t *v = s ? json_string_nocheck(s) : NULL; /* bytes as typed */
		free(s);
		return v;
	}
	size_t start = p->pos;
	while (!at_end(p) && (isdigit((unsigned char)peek(p)) || strchr("+-.eE", peek(p))))
		p->pos++;
	char num[64];
	double d;
	snprintf(num, sizeof(num), "%.*s", (int)(p->pos - start), p->s + start);
	if (p->pos == start || sc_parse_num(num, -1e300, 1e300, &d) < 0) {
		p->pos = start;
		fail(p, "expected a quoted string or a number to compare with");
		return NULL;
	}
	return json_real(d);
}

/* [?(@.path op literal)] or [?(@.path)], after "[?". */
static int parse_filter(parser_t *p, step_t *s, int depth)
{
	static const struct {
		const char *text;
		int op;
	} ops[] = {{"==", OP_EQ}, {"!=", OP_NE}, {"<=", OP_LE},
	           {">=", OP_GE}, {"<", OP_LT},  {">", OP_GT}};
	s->kind = ST_FILTER;
	if (peek(p) != '(')
		return fail(p, "expected ( after ?");
	p->pos++;
	skip_space(p);
	if (peek(p) != '@')
		return fail(p, "a filter starts with @");
	s->filter = parse_path(p, depth + 1, 1);
	if (!s->filter)
		return SC_EINVAL;
	skip_space(p);
	s->op = OP_EXISTS;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		size_t n = strlen(ops[i].text);
		if (p->end - p->pos >= n && strncmp(p->s + p->pos, ops[i].text, n) == 0) {
			s->op = ops[i].op;
			p->pos += n;
			break;
		}
	}
	if (s->op != OP_EXISTS && !(s->lit = filter_literal(p)))
		return SC_EINVAL;
	skip_space(p);
	if (peek(p) != ')')
		return fail(p, "expected ) to close the filter");
	p->pos++;
	return 0;
}

/* The inside of [...], after '['. */
static int parse_bracket(parser_t *p, path_t *path, int depth)
{
	step_t *s = add_step(path);
	skip_space(p);
	char c = peek(p);
	int rc = 0;
	if (c == '*') {
		s->kind = ST_ALL;
		p->pos++;
	} else if (c == '\'' || c == '"') {
		s->kind = ST_FIELD;
		if (!(s->name = quoted(p)))
			return SC_EINVAL;
	} else if (c == '?') {
		p->pos++;
		rc = parse_filter(p, s, depth);
	} else {
		int have_a = 0;
		if (peek(p) != ':') {
			if ((rc = parse_long(p, &s->a)) < 0)
				return rc;
			have_a = 1;
		}
		skip_space(p);
		if (peek(p) == ':') {
			s->kind = ST_SLICE;
			s->has_a = have_a;
			p->pos++;
			skip_space(p);
			if (peek(p) != ']') {
				if ((rc = parse_long(p, &s->b)) < 0)
					return rc;
				s->has_b = 1;
			}
		} else {
			s->kind = ST_INDEX;
		}
	}
	skip_space(p);
	if (rc == 0 && peek(p) != ']')
		return fail(p, "expected ]");
	p->pos++;
	return rc;
}

/* A path: [$|@] then .name, .*, ..name, [...] steps. in_filter stops at an
 * operator or ')'. */
static path_t *parse_path(parser_t *p, int depth, int in_filter)
{
	if (depth > MAX_DEPTH) {
		fail(p, "nested too deeply");
		return NULL;
	}
	path_t *path = sc_xcalloc(1, sizeof(*path));
	skip_space(p);
	if (peek(p) == '$') {
		path->from_root = !in_filter;
		p->pos++;
	} else if (peek(p) == '@') {
		p->pos++;
	} else if (peek(p) != '.' && peek(p) != '[') {
		/* kubectl wants a leading '.', but {metadata.name} is clear. */
		step_t *s = add_step(path);
		s->kind = ST_FIELD;
		if (!(s->name = bare_name(p))) {
			fail(p, "expected a path (.field, [n], [*]) or a quoted string");
			goto bad;
		}
	}
	while (!at_end(p) && !p->failed) {
		char c = peek(p);
		if (in_filter && strchr("=!<>) \t", c))
			break;
		if (c == '.' && p->pos + 1 < p->end && p->s[p->pos + 1] == '.') {
			p->pos += 2;
			step_t *s = add_step(path);
			s->kind = ST_RECURSE;
			if (!(s->name = bare_name(p))) {
				fail(p, "expected a field name after ..");
				goto bad;
			}
		} else if (c == '.') {
			p->pos++;
			if (at_end(p) || (in_filter && strchr("=!<>) \t", peek(p))))
				break; /* "{.}" and "@." mean the value itself */
			step_t *s = add_step(path);
			if (peek(p) == '*') {
				s->kind = ST_ALL;
				p->pos++;
			} else if (peek(p) == '[') {
				path->n--; /* ".[0]" is "[0]" */
			} else {
				s->kind = ST_FIELD;
				if (!(s->name = bare_name(p))) {
					fail(p, "expected a field name after .");
					goto bad;
				}
			}
		} else if (c == '[') {
			p->pos++;
			if (parse_bracket(p, path, depth) < 0)
				goto bad;
		} else {
			fail(p, "unexpected character in a path");
			goto bad;
		}
	}
	if (!p->failed)
		return path;
bad:
	path_free(path);
	return NULL;
}

/* The end of the expression that starts at pos (after '{'): the matching
 * '}' outside quotes. */
static int find_close(parser_t *p, size_t *close)
{
	char q = 0;
	for (size_t i = p->pos; p->s[i]; i++) {
		char c = p->s[i];
		if (q) {
			if (c == '\\' && p->s[i + 1])
				i++;
			else if (c == q)
				q = 0;
		} else if (c == '\'' || c == '"') {
			q = c;
		} else if (c == '}') {
			*close = i;
			return 0;
		}
	}
	p->pos--; /* point at the '{' */
	return fail(p, "unclosed {");
}

static node_t *add_node(node_t **v, size_t *n)
{
	*v = sc_xreallocarray(*v, *n + 1, sizeof(**v));
	node_t *x = &(*v)[(*n)++];
	memset(x, 0, sizeof(*x));
	return x;
}

/* Text up to the next '{', with \n \t \\ escapes (so a shell's single
 * quotes can carry a newline). */
static void parse_text(parser_t *p, node_t **v, size_t *n)
{
	sc_buf_t b;
	sc_buf_init(&b, 0);
	while (p->s[p->pos] && p->s[p->pos] != '{') {
		char c = p->s[p->pos++];
		if (c == '\\' && p->s[p->pos]) {
			char e = p->s[p->pos++];
			c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
		}
		sc_buf_append(&b, &c, 1);
	}
	if (b.len) {
		node_t *x = add_node(v, n);
		x->kind = N_TEXT;
		sc_buf_append(&b, "", 0);
		x->text = sc_buf_steal(&b, NULL);
	}
	sc_buf_free(&b);
}

/* Nodes until the end of the template, or until {end} when in a range. */
static int parse_nodes(parser_t *p, node_t **v, size_t *n, int depth)
{
	while (p->s[p->pos]) {
		parse_text(p, v, n);
		if (!p->s[p->pos])
			break;
		size_t open = p->pos++, close;
		if (find_close(p, &close) < 0)
			return SC_EINVAL;
		p->end = close;
		skip_space(p);
		const char *e = p->s + p->pos;
		size_t len = close - p->pos;
		while (len && (e[len - 1] == ' ' || e[len - 1] == '\t'))
			len--;
		if (len == 3 && strncmp(e, "end", 3) == 0) {
			if (!depth) {
				p->pos = open;
				return fail(p, "{end} without {range}");
			}
			p->pos = close + 1;
			return 0;
		}
		node_t *x = add_node(v, n);
		if (len > 6 && strncmp(e, "range", 5) == 0 && (e[5] == ' ' || e[5] == '\t')) {
			if (depth >= MAX_DEPTH)
				return fail(p, "ranges nested too deeply");
			x->kind = N_RANGE;
			p->pos += 6;
			if (!(x->path = parse_path(p, depth, 0)))
				return SC_EINVAL;
			p->pos = close + 1;
			if (parse_nodes(p, &x->body, &x->nbody, depth + 1) < 0)
				return SC_EINVAL;
			continue;
		}
		if (len && (*e == '"' || *e == '\'')) {
			x->kind = N_TEXT;
			if (!(x->text = quoted(p)))
				return SC_EINVAL;
		} else {
			x->kind = N_EXPR;
			if (len == 0)
				return fail(p, "empty {}");
			if (!(x->path = parse_path(p, depth, 0)))
				return SC_EINVAL;
		}
		skip_space(p);
		if (!at_end(p))
			return fail(p, "unexpected text in {}");
		p->pos = close + 1;
	}
	if (depth)
		return fail(p, "{range} without {end}");
	return 0;
}

sc_jsonpath_t *sc_jsonpath_parse(const char *tmpl, char *err, size_t errsz)
{
	parser_t p = {.s = tmpl, .err = err, .errsz = errsz};
	if (errsz)
		err[0] = '\0';
	if (strlen(tmpl) > SC_JSONPATH_MAX) {
		snprintf(err, errsz, "jsonpath: longer than %d characters", SC_JSONPATH_MAX);
		return NULL;
	}
	sc_jsonpath_t *jp = sc_xcalloc(1, sizeof(*jp));
	if (parse_nodes(&p, &jp->nodes, &jp->n, 0) < 0) {
		sc_jsonpath_free(jp);
		return NULL;
	}
	return jp;
}

/* ---------------------------------------------------------------------
 * Evaluation
 * ------------------------------------------------------------------- */

typedef struct vals {
	json_t **v;
	size_t n, cap;
	int full; /* MAX_RESULTS reached: the rest are dropped */
} vals_t;

static void push(vals_t *s, json_t *v)
{
	if (!v || s->full)
		return;
	if (s->n == MAX_RESULTS) {
		s->full = 1;
		return;
	}
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 8;
		s->v = sc_xreallocarray(s->v, s->cap, sizeof(*s->v));
	}
	s->v[s->n++] = v;
}

static void walk(json_t *v, const char *name, vals_t *out, int depth)
{
	const char *k;
	json_t *x;
	size_t i;
	if (depth > MAX_WALK)
		return;
	if (json_is_object(v)) {
		push(out, json_object_get(v, name));
		json_object_foreach(v, k, x) walk(x, name, out, depth + 1);
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x) walk(x, name, out, depth + 1);
	}
}

static void eval_path(const path_t *path, json_t *root, json_t *cur, vals_t *out);

/* Orders a and b as numbers or as strings; 2 when they cannot be. */
static int compare(json_t *a, json_t *b)
{
	if (json_is_number(a) && json_is_number(b)) {
		double x = json_number_value(a), y = json_number_value(b);
		return x < y ? -1 : x > y;
	}
	if (json_is_string(a) && json_is_string(b)) {
		int c = strcmp(json_string_value(a), json_string_value(b));
		return c < 0 ? -1 : c > 0;
	}
	if (json_is_string(a) && json_is_number(b)) { /* "3" == 3, as kubectl */
		double x;
		if (sc_parse_num(json_string_value(a), -1e300, 1e300, &x) < 0)
			return 2;
		double y = json_number_value(b);
		return x < y ? -1 : x > y;
	}
	return 2;
}

static int keep(const step_t *s, json_t *root, json_t *e)
{
	vals_t r = {0};
	eval_path(s->filter, root, e, &r);
	json_t *v = r.n ? r.v[0] : NULL;
	free(r.v);
	if (s->op == OP_EXISTS)
		return v != NULL && !json_is_null(v) && !json_is_false(v);
	if (!v)
		return 0;
	int c = compare(v, s->lit);
	switch (s->op) {
	case OP_EQ:
		return c == 0;
	case OP_NE:
		return c != 0;
	case OP_LT:
		return c == -1;
	case OP_LE:
		return c == -1 || c == 0;
	case OP_GT:
		return c == 1;
	default:
		return c == 1 || c == 0;
	}
}

static void apply(const step_t *s, json_t *root, json_t *v, vals_t *out)
{
	size_t i, n = json_array_size(v);
	json_t *x;
	const char *k;
	switch (s->kind) {
	case ST_FIELD:
		push(out, json_object_get(v, s->name));
		break;
	case ST_INDEX: {
		long j = s->a < 0 ? (long)n + s->a : s->a;
		if (j >= 0 && (size_t)j < n)
			push(out, json_array_get(v, (size_t)j));
		break;
	}
	case ST_SLICE: {
		long a = s->has_a ? s->a : 0, b = s->has_b ? s->b : (long)n;
		a = a < 0 ? (long)n + a : a;
		b = b < 0 ? (long)n + b : b;
		for (long j = a < 0 ? 0 : a; j < b && (size_t)j < n; j++)
			push(out, json_array_get(v, (size_t)j));
		break;
	}
	case ST_ALL:
		if (json_is_array(v))
			json_array_foreach(v, i, x) push(out, x);
		else if (json_is_object(v))
			json_object_foreach(v, k, x) push(out, x);
		break;
	case ST_FILTER:
		json_array_foreach(v, i, x) if (keep(s, root, x)) push(out, x);
		break;
	default:
		walk(v, s->name, out, 0);
		break;
	}
}

static void eval_path(const path_t *path, json_t *root, json_t *cur, vals_t *out)
{
	vals_t a = {0}, b = {0};
	push(&a, path->from_root ? root : cur);
	for (size_t i = 0; i < path->n && a.n; i++) {
		b.n = 0;
		b.full = 0;
		for (size_t j = 0; j < a.n; j++)
			apply(&path->steps[i], root, a.v[j], &b);
		vals_t t = a;
		a = b;
		b = t;
	}
	for (size_t j = 0; j < a.n; j++)
		push(out, a.v[j]);
	free(a.v);
	free(b.v);
}

static int print_value(json_t *v, sc_buf_t *out)
{
	if (json_is_string(v))
		return sc_buf_append(out, json_string_value(v), json_string_length(v));
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	int rc = sc_buf_puts(out, s ? s : "");
	free(s);
	return rc;
}

static int eval_nodes(const node_t *v, size_t n, json_t *root, json_t *cur, sc_buf_t *out)
{
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const node_t *x = &v[i];
		if (x->kind == N_TEXT) {
			rc = sc_buf_puts(out, x->text);
			continue;
		}
		vals_t r = {0};
		eval_path(x->path, root, cur, &r);
		for (size_t j = 0; j < r.n && rc == 0; j++) {
			if (x->kind == N_RANGE) {
				rc = eval_nodes(x->body, x->nbody, root, r.v[j], out);
			} else {
				if (j)
					rc = sc_buf_puts(out, " ");
				if (rc == 0)
					rc = print_value(r.v[j], out);
			}
		}
		free(r.v);
	}
	return rc;
}

int sc_jsonpath_eval(const sc_jsonpath_t *p, json_t *doc, sc_buf_t *out)
{
	return eval_nodes(p->nodes, p->n, doc, doc, out) < 0 ? SC_ETOOBIG : 0;
}
