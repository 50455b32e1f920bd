/* Tables as kubectl and squeue print them: a header row in capitals,
 * columns as wide as their widest cell, three spaces between columns, no
 * trailing blanks; and queue trees in depth-first order with two spaces of
 * indentation per level in the first column.
 *
 * A table collects its rows and sizes the columns when printed, so the
 * whole output must be known first (a `get -w` prints the first batch with
 * sc_table_print and later rows with sc_table_print_row, which pads to the
 * widths already chosen, as kubectl does). Pure apart from the FILE it
 * prints to; tests/unit/test_cli_table.c. */
#ifndef SC_CLI_TABLE_H
#define SC_CLI_TABLE_H

#include <stddef.h>
#include <stdio.h>

typedef struct sc_table sc_table_t;

/* A table with ncols columns (1..32) headed by headers (copied). Aborts
 * on out-of-memory, as the CLI does everywhere. */
sc_table_t *sc_table_new(size_t ncols, const char *const *headers);
void sc_table_free(sc_table_t *t);

/* Adds a row: ncols cells (copied; NULL prints as "<none>", as kubectl
 * does for an unset field). indent is the depth in a tree: the first cell
 * gets 2 * indent spaces before it. */
void sc_table_add(sc_table_t *t, size_t indent, const char *const *cells);
/* The same with printf-style cells: fmt holds one conversion per cell,
 * separated by '\t' ("%s\t%d\t%.1f"). */
void sc_table_addf(sc_table_t *t, size_t indent, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

size_t sc_table_rows(const sc_table_t *t);
/* Spaces printed before every line (0 by default; `schedule` indents its
 * tables under their titles). */
void sc_table_margin(sc_table_t *t, size_t spaces);

/* Prints the header (unless no_header) and every row, each column as wide
 * as its widest cell (header included). Rows added later can follow with
 * sc_table_print_row. */
void sc_table_print(sc_table_t *t, FILE *f, int no_header);
/* Prints the last row added, padded to the widths sc_table_print chose
 * (a wider cell pushes the rest of its line right). */
void sc_table_print_row(sc_table_t *t, FILE *f);

/* ---- trees ------------------------------------------------------------ */

/* Orders n named nodes depth-first: each root (no parent, or a parent that
 * is not among the names, or a cycle) is followed by its children, each
 * followed by theirs; siblings keep the order they were given in. Fills
 * order[n] with indexes and depth[n] with each one's depth (0 for a root).
 * Every index appears exactly once, whatever the input. */
void sc_tree_order(size_t n, const char *const *names, const char *const *parents, size_t *order,
                   size_t *depth);

/* The arrays of sc_tree_order for n nodes, owned (room for n + 1, so that
 * n == 0 needs no special case): the caller fills names[] and parents[]
 * (borrowed strings; NULL, "" or an unknown name for a root), calls
 * sc_tree_sort, reads order[] and depth[], and calls sc_tree_free. */
typedef struct sc_tree {
	size_t n;
	const char **names, **parents;
	size_t *order, *depth;
} sc_tree_t;

void sc_tree_init(sc_tree_t *t, size_t n);
void sc_tree_sort(sc_tree_t *t);
void sc_tree_free(sc_tree_t *t);

/* "1.5", "2", "0.33": at most two decimals, no trailing zeros; "-" for a
 * negative value (unlimited) when neg_dash is set. */
void sc_fmt_num(char *out, size_t outsz, double v, int neg_dash);

/* A duration in seconds as kubectl's AGE column prints it: 45s, 12m, 5h,
 * 3d, 2y (two units under a day when the second is not zero: 3m20s,
 * 5h12m). Negative or unknown: "<unknown>". */
void sc_fmt_age(char *out, size_t outsz, double seconds);

/* A duration as h/m/s for people: 1h 02m 03s, 4m 05s, 7.2s, 0.35s. */
void sc_fmt_hms(char *out, size_t outsz, double seconds);

#endif
