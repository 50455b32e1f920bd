/* OpenB trace readers. Both readers share one table-driven row parser:
 * each column is described once (name, type, bounds, where it goes in the
 * row struct), which keeps the validation rules in one readable place. */
#include "sim/trace.h"
#include "base/parse.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "starcloud/error.h"

#define MAX_COLS 32

enum col_kind { COL_STR, COL_INT, COL_TIME };

typedef struct col_spec {
	const char *name;
	bool required;
	int kind;
	size_t offset; /* into the row struct */
	int64_t min, max;
	int width; /* sizeof the integer field: 4 or 8 */
} col_spec_t;

#define INT64_COL(st, f, req, lo, hi)                                                              \
	{                                                                                          \
#f, req, COL_INT, offsetof(st, f), lo, hi, 8                                       \
	}
#define INT_COL(st, f, req, lo, hi)                                                                \
	{                                                                                          \
#f, req, COL_INT, offsetof(st, f), lo, hi, 4                                       \
	}
#define STR_COL(st, f, req)                                                                        \
	{                                                                                          \
#f, req, COL_STR, offsetof(st, f), 0, 0, 0                                         \
	}
#define TIME_COL(st, f)                                                                            \
	{                                                                                          \
#f, false, COL_TIME, offsetof(st, f), 0, INT64_MAX / 2, 8                          \
	}

/* The node list names its name column "sn". */
static const col_spec_t node_cols[] = {
    {"sn", true, COL_STR, offsetof(sc_trace_node_t, name), 0, 0, 0},
    INT64_COL(sc_trace_node_t, cpu_milli, true, 0, INT64_MAX / 4),
    INT64_COL(sc_trace_node_t, memory_mib, true, 0, INT64_MAX / (1 << 22)),
    INT_COL(sc_trace_node_t, gpu, true, 0, 16),
    STR_COL(sc_trace_node_t, model, true),
};

static const col_spec_t pod_cols[] = {
    STR_COL(sc_trace_pod_t, name, true),
    INT64_COL(sc_trace_pod_t, cpu_milli, true, 0, INT64_MAX / 4),
    INT64_COL(sc_trace_pod_t, memory_mib, true, 0, INT64_MAX / (1 << 22)),
    INT_COL(sc_trace_pod_t, num_gpu, true, 0, 16),
    INT_COL(sc_trace_pod_t, gpu_milli, true, 0, 1000),
    STR_COL(sc_trace_pod_t, gpu_spec, false),
    STR_COL(sc_trace_pod_t, qos, false),
    {"pod_phase", false, COL_STR, offsetof(sc_trace_pod_t, phase), 0, 0, 0},
    TIME_COL(sc_trace_pod_t, creation_time),
    TIME_COL(sc_trace_pod_t, deletion_time),
    TIME_COL(sc_trace_pod_t, scheduled_time),
};

struct reader;
typedef struct reader {
	FILE *f;
	const char *fname;
	char *msg;
	size_t msgsize;
	long line;
	char buf[SC_TRACE_MAX_LINE + 2];
	/* Column of the file -> spec index, or -1 for an ignored column. */
	int map[MAX_COLS];
	int ncols;
	const col_spec_t *specs;
	size_t nspecs;
	size_t rowsize;
	/* Checks across the fields of one row; column-level errors. */
	int (*check)(struct reader *r, const void *row);
} reader_t;

static int fail(reader_t *r, int col, int rc, const char *fmt, ...)
{
	char tail[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tail, sizeof(tail), fmt, ap);
	va_end(ap);
	if (col > 0)
		snprintf(r->msg, r->msgsize, "%s:%ld:%d: %s", r->fname, r->line, col, tail);
	else
		snprintf(r->msg, r->msgsize, "%s:%ld: %s", r->fname, r->line, tail);
	return rc;
}

/* Reads one line into r->buf without its line ending. Returns 1 for a line,
 * 0 at end of input, or a negative code for a line over the limit. */
static int read_line(reader_t *r)
{
	if (!fgets(r->buf, sizeof(r->buf), r->f))
		return ferror(r->f) ? fail(r, 0, SC_EIO, "read error") : 0;
	r->line++;
	size_t len = strlen(r->buf);
	if (len > 0 && r->buf[len - 1] == '\n')
		r->buf[--len] = '\0';
	else if (!feof(r->f))
		return fail(r, 0, SC_ETOOBIG, "line longer than %d bytes", SC_TRACE_MAX_LINE);
	if (len > 0 && r->buf[len - 1] == '\r')
		r->buf[--len] = '\0';
	if (memchr(r->buf, '\0', len) != NULL || strlen(r->buf) != len)
		return fail(r, 0, SC_EPARSE, "NUL byte in line");
	return 1;
}

/* Splits r->buf in place at commas. Quoting is not part of the format. */
static int split(char *s, char **fields, int max)
{
	int n = 0;
	for (;;) {
		if (n == max)
			return -1;
		fields[n++] = s;
		char *c = strchr(s, ',');
		if (!c)
			return n;
		*c = '\0';
		s = c + 1;
	}
}

static int parse_header(reader_t *r)
{
	char *fields[MAX_COLS];
	int rc = read_line(r);
	if (rc <= 0)
		return rc < 0 ? rc : fail(r, 0, SC_EPARSE, "empty file: expected a header line");
	int n = split(r->buf, fields, MAX_COLS);
	if (n < 0)
		return fail(r, 0, SC_EPARSE, "more than %d columns in header", MAX_COLS);
	bool seen[MAX_COLS] = {false};
	for (int i = 0; i < n; i++) {
		r->map[i] = -1;
		for (size_t k = 0; k < r->nspecs; k++)
			if (strcmp(fields[i], r->specs[k].name) == 0) {
				if (seen[k])
					return fail(r, i + 1, SC_EPARSE, "column %s repeated",
					            fields[i]);
				seen[k] = true;
				r->map[i] = (int)k;
			}
	}
	for (size_t k = 0; k < r->nspecs; k++)
		if (r->specs[k].required && !seen[k])
			return fail(r, 0, SC_EPARSE, "header lacks required column %s",
			            r->specs[k].name);
	r->ncols = n;
	return 0;
}

static int parse_int(reader_t *r, int col, const col_spec_t *s, const char *v, int64_t *out)
{
	if (*v == '\0') {
		if (s->kind == COL_TIME) {
			*out = SC_TRACE_NOTIME;
			return 0;
		}
		return fail(r, col, SC_EPARSE, "%s: empty, expected an integer", s->name);
	}
	/* Some exports write times as floats ("12.0"): keep the seconds. */
	char whole[32];
	const char *num = v, *dot = s->kind == COL_TIME ? strchr(v, '.') : NULL;
	if (dot && (size_t)(dot - v) < sizeof(whole) &&
	    dot[1 + strspn(dot + 1, "0123456789")] == '\0') {
		memcpy(whole, v, (size_t)(dot - v));
		whole[dot - v] = '\0';
		num = whole;
	}
	int64_t x = 0;
	int rc = sc_parse_i64(num, INT64_MIN, INT64_MAX, &x);
	if (rc == SC_EPARSE)
		return fail(r, col, SC_EPARSE, "%s: \"%.40s\" is not an integer", s->name, v);
	if (rc < 0 || x < s->min || x > s->max)
		return fail(r, col, SC_EPARSE, "%s: %lld out of range [%lld, %lld]", s->name, x,
		            (long long)s->min, (long long)s->max);
	*out = x;
	return 0;
}

static int store_field(reader_t *r, int col, const col_spec_t *s, const char *v, char *row)
{
	if (s->kind == COL_STR) {
		char *copy = strdup(v);
		if (!copy)
			return SC_ENOMEM;
		memcpy(row + s->offset, &copy, sizeof(copy));
		return 0;
	}
	int64_t x = 0;
	int rc = parse_int(r, col, s, v, &x);
	if (rc < 0)
		return rc;
	if (s->width == 4) {
		int y = (int)x;
		memcpy(row + s->offset, &y, sizeof(y));
	} else {
		memcpy(row + s->offset, &x, sizeof(x));
	}
	return 0;
}

/* Fills absent optional columns: "" for strings, NOTIME for times. */
static int fill_defaults(reader_t *r, const bool *given, char *row)
{
	for (size_t k = 0; k < r->nspecs; k++) {
		const col_spec_t *s = &r->specs[k];
		if (given[k])
			continue;
		if (s->kind == COL_STR) {
			char *copy = strdup("");
			if (!copy)
				return SC_ENOMEM;
			memcpy(row + s->offset, &copy, sizeof(copy));
		} else if (s->kind == COL_TIME) {
			int64_t x = SC_TRACE_NOTIME;
			memcpy(row + s->offset, &x, sizeof(x));
		}
	}
	return 0;
}

static int parse_row(reader_t *r, char *row)
{
	char *fields[MAX_COLS];
	int n = split(r->buf, fields, MAX_COLS);
	if (n != r->ncols)
		return fail(r, n < 0 || n > r->ncols ? r->ncols + 1 : n, SC_EPARSE,
		            "expected %d columns, found %s%d", r->ncols, n < 0 ? "over " : "",
		            n < 0 ? MAX_COLS : n);
	bool given[MAX_COLS] = {false};
	for (int i = 0; i < n; i++) {
		if (r->map[i] < 0)
			continue;
		const col_spec_t *s = &r->specs[r->map[i]];
		int rc = store_field(r, i + 1, s, fields[i], row);
		if (rc < 0)
			return rc;
		given[r->map[i]] = true;
	}
	return fill_defaults(r, given, row);
}

/* Frees the strings of one row (fields not yet set are NULL). */
static void free_row(const col_spec_t *specs, size_t nspecs, char *row)
{
	for (size_t k = 0; k < nspecs; k++)
		if (specs[k].kind == COL_STR) {
			char *p;
			memcpy(&p, row + specs[k].offset, sizeof(p));
			free(p);
		}
}

static void free_rows(const col_spec_t *specs, size_t nspecs, void *rows, size_t n, size_t rowsize)
{
	for (size_t i = 0; rows && i < n; i++)
		free_row(specs, nspecs, (char *)rows + i * rowsize);
	free(rows);
}

/* Reads every data row into a growing array of rowsize-byte structs. */
static int read_rows(reader_t *r, void **out, size_t *nout)
{
	size_t n = 0, cap = 0;
	char *rows = NULL;
	int rc = parse_header(r);
	while (rc == 0) {
		rc = read_line(r);
		if (rc <= 0)
			break;
		rc = 0;
		if (r->buf[0] == '\0')
			continue; /* a trailing blank line is harmless */
		if (n == SC_TRACE_MAX_ROWS) {
			rc = fail(r, 0, SC_ETOOBIG, "more than %d rows", SC_TRACE_MAX_ROWS);
			break;
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 1024;
			char *nr = realloc(rows, ncap * r->rowsize);
			if (!nr) {
				rc = SC_ENOMEM;
				break;
			}
			rows = nr;
			cap = ncap;
		}
		char *row = rows + n * r->rowsize;
		memset(row, 0, r->rowsize);
		rc = parse_row(r, row);
		if (rc == 0 && r->check)
			rc = r->check(r, row);
		if (rc < 0) {
			free_row(r->specs, r->nspecs, row);
			break;
		}
		n++;
	}
	if (rc < 0) {
		if (rc == SC_ENOMEM && r->msg[0] == '\0')
			fail(r, 0, rc, "out of memory");
		free_rows(r->specs, r->nspecs, rows, n, r->rowsize);
		return rc;
	}
	*out = rows;
	*nout = n;
	return 0;
}

static void reader_init(reader_t *r, FILE *f, const char *fname, char *msg, size_t msgsize)
{
	memset(r, 0, sizeof(*r));
	r->f = f;
	r->fname = fname;
	r->msg = msg;
	r->msgsize = msgsize;
	if (msgsize)
		msg[0] = '\0';
}

/* A pod's GPU columns must describe one of: no GPU, a share of one GPU, or
 * whole GPUs; anything else would be silently misread later. */
static int check_pod(reader_t *r, const void *row)
{
	const sc_trace_pod_t *p = row;
	if (p->name[0] == '\0')
		return fail(r, 1, SC_EPARSE, "name: empty, expected a pod name");
	if (p->num_gpu == 0 && p->gpu_milli != 0)
		return fail(r, 5, SC_EPARSE, "gpu_milli: %d with num_gpu 0, expected 0",
		            p->gpu_milli);
	if (p->num_gpu > 0 && p->gpu_milli == 0)
		return fail(r, 5, SC_EPARSE, "gpu_milli: 0 with num_gpu %d, expected 1..1000",
		            p->num_gpu);
	if (p->num_gpu > 1 && p->gpu_milli != 1000)
		return fail(r, 5, SC_EPARSE,
		            "gpu_milli: %d with num_gpu %d, shares are for one GPU only",
		            p->gpu_milli, p->num_gpu);
	return 0;
}

static int check_node(reader_t *r, const void *row)
{
	const sc_trace_node_t *nd = row;
	if (nd->name[0] == '\0')
		return fail(r, 1, SC_EPARSE, "sn: empty, expected a node name");
	if (nd->gpu > 0 && nd->model[0] == '\0')
		return fail(r, 5, SC_EPARSE, "model: empty for a node with %d GPUs", nd->gpu);
	return 0;
}

/* Reads every row of one table kind into a new array (*rows, *n). */
static int parse_table(FILE *f, const char *fname, const col_spec_t *specs, size_t nspecs,
                       size_t rowsize, int (*check)(reader_t *, const void *), void **rows,
                       size_t *n, char *msg, size_t msgsize)
{
	reader_t r;
	reader_init(&r, f, fname, msg, msgsize);
	r.specs = specs;
	r.nspecs = nspecs;
	r.rowsize = rowsize;
	r.check = check;
	*rows = NULL;
	*n = 0;
	return read_rows(&r, rows, n);
}

int sc_trace_parse_nodes(FILE *f, const char *fname, sc_trace_nodes_t *out, char *msg,
                         size_t msgsize)
{
	void *rows;
	size_t n;
	int rc = parse_table(f, fname, node_cols, sizeof(node_cols) / sizeof(node_cols[0]),
	                     sizeof(sc_trace_node_t), check_node, &rows, &n, msg, msgsize);
	if (rc < 0)
		return rc;
	out->v = rows;
	out->n = n;
	return 0;
}

int sc_trace_parse_pods(FILE *f, const char *fname, sc_trace_pods_t *out, char *msg, size_t msgsize)
{
	void *rows;
	size_t n;
	int rc = parse_table(f, fname, pod_cols, sizeof(pod_cols) / sizeof(pod_cols[0]),
	                     sizeof(sc_trace_pod_t), check_pod, &rows, &n, msg, msgsize);
	if (rc < 0)
		return rc;
	out->v = rows;
	out->n = n;
	return 0;
}

static int read_path(const char *path, bool pods, void *out, char *msg, size_t msgsize)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(msg, msgsize, "%s: cannot open: %s", path, strerror(errno));
		return SC_EIO;
	}
	int rc = pods ? sc_trace_parse_pods(f, path, out, msg, msgsize)
	              : sc_trace_parse_nodes(f, path, out, msg, msgsize);
	fclose(f);
	return rc;
}

int sc_trace_read_nodes(const char *path, sc_trace_nodes_t *out, char *msg, size_t msgsize)
{
	return read_path(path, false, out, msg, msgsize);
}

int sc_trace_read_pods(const char *path, sc_trace_pods_t *out, char *msg, size_t msgsize)
{
	return read_path(path, true, out, msg, msgsize);
}

void sc_trace_nodes_free(sc_trace_nodes_t *t)
{
	if (!t)
		return;
	free_rows(node_cols, sizeof(node_cols) / sizeof(node_cols[0]), t->v, t->n,
	          sizeof(sc_trace_node_t));
	t->v = NULL;
	t->n = 0;
}

void sc_trace_pods_free(sc_trace_pods_t *t)
{
	if (!t)
		return;
	free_rows(pod_cols, sizeof(pod_cols) / sizeof(pod_cols[0]), t->v, t->n,
	          sizeof(sc_trace_pod_t));
	t->v = NULL;
	t->n = 0;
}
