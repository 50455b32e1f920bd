/* Tables and trees for the CLI's output (see table.h). */
#include "cli/table.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

#define MAX_COLS 32
#define GAP 3 /* spaces between columns, as kubectl */

typedef struct row {
	char **cells;
	size_t indent;
} row_t;

struct sc_table {
	size_t ncols;
	char *headers[MAX_COLS];
	row_t *rows;
	size_t nrows, cap;
	size_t width[MAX_COLS]; /* chosen by sc_table_print */
	size_t margin;
};

sc_table_t *sc_table_new(size_t ncols, const char *const *headers)
{
	sc_table_t *t = sc_xcalloc(1, sizeof(*t));
	t->ncols = ncols < 1 ? 1 : ncols > MAX_COLS ? MAX_COLS : ncols;
	for (size_t c = 0; c < t->ncols; c++)
		t->headers[c] = sc_xstrdup(headers && headers[c] ? headers[c] : "");
	return t;
}

void sc_table_free(sc_table_t *t)
{
	if (!t)
		return;
	for (size_t r = 0; r < t->nrows; r++) {
		for (size_t c = 0; c < t->ncols; c++)
			free(t->rows[r].cells[c]);
		free(t->rows[r].cells);
	}
	for (size_t c = 0; c < t->ncols; c++)
		free(t->headers[c]);
	free(t->rows);
	free(t);
}

void sc_table_add(sc_table_t *t, size_t indent, const char *const *cells)
{
	if (t->nrows == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 16;
		t->rows = sc_xreallocarray(t->rows, t->cap, sizeof(*t->rows));
	}
	row_t *r = &t->rows[t->nrows++];
	r->indent = indent;
	r->cells = sc_xcalloc(t->ncols, sizeof(*r->cells));
	for (size_t c = 0; c < t->ncols; c++)
		r->cells[c] = sc_xstrdup(cells[c] ? cells[c] : "<none>");
}

void sc_table_addf(sc_table_t *t, size_t indent, const char *fmt, ...)
{
	char line[4096];
	const char *cells[MAX_COLS];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	char *p = line;
	for (size_t c = 0; c < t->ncols; c++) {
		cells[c] = p;
		char *tab = strchr(p, '\t');
		if (tab) {
			*tab = '\0';
			p = tab + 1;
		} else {
			p += strlen(p); /* missing cells are empty */
		}
	}
	sc_table_add(t, indent, cells);
}

size_t sc_table_rows(const sc_table_t *t)
{
	return t->nrows;
}

void sc_table_margin(sc_table_t *t, size_t spaces)
{
	t->margin = spaces < 64 ? spaces : 64;
}

/* Display width of a UTF-8 string: code points, not bytes (names are
 * ASCII, but messages and the tree's own marks need not be). */
static size_t text_width(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

static size_t cell_width(const row_t *r, size_t c, const char *text)
{
	return text_width(text) + (c == 0 ? 2 * r->indent : 0);
}

/* One line: every column but the last padded to its width. */
static void print_line(const sc_table_t *t, FILE *f, const row_t *r, char *const *cells)
{
	size_t owed = 0;            /* a wide cell's overflow, taken from the next gaps */
	size_t last = t->ncols - 1; /* no padding after the last non-empty cell */
	while (last > 0 && !cells[last][0])
		last--;
	fprintf(f, "%*s", (int)t->margin, "");
	for (size_t c = 0; c <= last; c++) {
		size_t w = r ? cell_width(r, c, cells[c]) : text_width(cells[c]);
		if (c == 0 && r)
			fprintf(f, "%*s", (int)(2 * r->indent), "");
		fputs(cells[c], f);
		if (c == last)
			break;
		size_t want = t->width[c] + GAP;
		size_t used = w + owed;
		size_t pad = used < want ? want - used : 1;
		owed = used + pad > want ? used + pad - want : 0;
		fprintf(f, "%*s", (int)pad, "");
	}
	fputc('\n', f);
}

void sc_table_print(sc_table_t *t, FILE *f, int no_header)
{
	for (size_t c = 0; c < t->ncols; c++)
		t->width[c] = no_header ? 0 : text_width(t->headers[c]);
	for (size_t r = 0; r < t->nrows; r++)
		for (size_t c = 0; c < t->ncols; c++) {
			size_t w = cell_width(&t->rows[r], c, t->rows[r].cells[c]);
			if (w > t->width[c])
				t->width[c] = w;
		}
	if (!no_header)
		print_line(t, f, NULL, t->headers);
	for (size_t r = 0; r < t->nrows; r++)
		print_line(t, f, &t->rows[r], t->rows[r].cells);
}

void sc_table_print_row(sc_table_t *t, FILE *f)
{
	if (t->nrows)
		print_line(t, f, &t->rows[t->nrows - 1], t->rows[t->nrows - 1].cells);
}

/* ---- trees ------------------------------------------------------------ */

/* The index of name among names, or n. Linear: queue trees are small, and
 * this runs once per printout. */
static size_t find(size_t n, const char *const *names, const char *name)
{
	for (size_t i = 0; name && i < n; i++)
		if (names[i] && strcmp(names[i], name) == 0)
			return i;
	return n;
}

/* Appends i and its subtree (children in input order) to order. */
static void visit(size_t n, const char *const *names, const size_t *parent, size_t i, size_t d,
                  size_t *order, size_t *depth, size_t *k, char *done)
{
	done[i] = 1;
	order[*k] = i;
	depth[*k] = d;
	(*k)++;
	for (size_t c = 0; c < n; c++)
		if (!done[c] && parent[c] == i)
			visit(n, names, parent, c, d + 1, order, depth, k, done);
}

void sc_tree_order(size_t n, const char *const *names, const char *const *parents, size_t *order,
                   size_t *depth)
{
	if (!n)
		return;
	size_t *parent = sc_xcalloc(n, sizeof(*parent));
	char *done = sc_xcalloc(n, 1);
	for (size_t i = 0; i < n; i++) {
		parent[i] = parents ? find(n, names, parents[i]) : n;
		if (parent[i] == i)
			parent[i] = n; /* its own parent: a root */
	}
	/* A node on a cycle has no root above it: walking up from it comes
	 * back to it. Such nodes become roots so every one is printed. */
	for (size_t i = 0; i < n; i++) {
		size_t p = parent[i], steps = 0;
		while (p < n && p != i && steps++ < n)
			p = parent[p];
		if (p == i)
			parent[i] = n;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (parent[i] == n && !done[i])
			visit(n, names, parent, i, 0, order, depth, &k, done);
	for (size_t i = 0; i < n; i++) /* unreachable, for safety: never dropped */
		if (!done[i])
			visit(n, names, parent, i, 0, order, depth, &k, done);
	free(parent);
	free(done);
}

void sc_tree_init(sc_tree_t *t, size_t n)
{
	t->n = n;
	t->names = sc_xcalloc(n + 1, sizeof(*t->names));
	t->parents = sc_xcalloc(n + 1, sizeof(*t->parents));
	t->order = sc_xcalloc(n + 1, sizeof(*t->order));
	t->depth = sc_xcalloc(n + 1, sizeof(*t->depth));
}

void sc_tree_sort(sc_tree_t *t)
{
	/* "" is what sc_obj_str gives for an absent parent: a root, even if
	 * some node had no name either. */
	for (size_t i = 0; i < t->n; i++)
		if (t->parents[i] && !*t->parents[i])
			t->parents[i] = NULL;
	sc_tree_order(t->n, t->names, t->parents, t->order, t->depth);
}

void sc_tree_free(sc_tree_t *t)
{
	free(t->names);
	free(t->parents);
	free(t->order);
	free(t->depth);
}

/* ---- numbers and durations -------------------------------------------- */

void sc_fmt_num(char *out, size_t outsz, double v, int neg_dash)
{
	if (neg_dash && v < 0) {
		snprintf(out, outsz, "-");
		return;
	}
	if (!isfinite(v)) {
		snprintf(out, outsz, "?");
		return;
	}
	double r = round(v * 100) / 100;
	if (r == 0)
		r = 0; /* no "-0" */
	snprintf(out, outsz, "%.2f", r);
	char *dot = strchr(out, '.');
	if (dot) {
		char *e = out + strlen(out) - 1;
		while (e > dot && *e == '0')
			*e-- = '\0';
		if (e == dot)
			*e = '\0';
	}
}

void sc_fmt_age(char *out, size_t outsz, double seconds)
{
	if (!(seconds >= 0) || !isfinite(seconds)) {
		snprintf(out, outsz, "<unknown>");
		return;
	}
	long long s = (long long)seconds, m = s / 60, h = s / 3600, d = h / 24, y = d / 365;
	if (s < 120)
		snprintf(out, outsz, "%llds", s);
	else if (m < 10)
		s % 60 ? snprintf(out, outsz, "%lldm%llds", m, s % 60)
		       : snprintf(out, outsz, "%lldm", m);
	else if (m < 180)
		snprintf(out, outsz, "%lldm", m);
	else if (h < 8)
		m % 60 ? snprintf(out, outsz, "%lldh%lldm", h, m % 60)
		       : snprintf(out, outsz, "%lldh", h);
	else if (h < 48)
		snprintf(out, outsz, "%lldh", h);
	else if (h < 24 * 8)
		h % 24 ? snprintf(out, outsz, "%lldd%lldh", d, h % 24)
		       : snprintf(out, outsz, "%lldd", d);
	else if (d < 365 * 2)
		snprintf(out, outsz, "%lldd", d);
	else if (y < 8)
		d % 365 ? snprintf(out, outsz, "%lldy%lldd", y, d % 365)
		        : snprintf(out, outsz, "%lldy", y);
	else
		snprintf(out, outsz, "%lldy", y);
}

void sc_fmt_hms(char *out, size_t outsz, double seconds)
{
	if (!isfinite(seconds) || seconds < 0) {
		snprintf(out, outsz, "?");
		return;
	}
	if (seconds < 10) {
		snprintf(out, outsz, "%.2fs", seconds);
		return;
	}
	if (seconds < 60) {
		snprintf(out, outsz, "%.1fs", seconds);
		return;
	}
	long long s = llround(seconds);
	if (s < 3600)
		snprintf(out, outsz, "%lldm %02llds", s / 60, s % 60);
	else
		snprintf(out, outsz, "%lldh %02lldm %02llds", s / 3600, s / 60 % 60, s % 60);
}
