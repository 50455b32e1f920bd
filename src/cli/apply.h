/* `apply -f` and `delete -f` of many objects: one keep-alive connection,
 * requests pipelined ahead of their answers (hpipe.h), answers printed in
 * order, a progress line on a terminal.
 *
 * Apply is "create, or replace when it exists": a POST, and on 409
 * AlreadyExists a PUT of the same body (conditional on the version the
 * server reads, as every PUT without resourceVersion). A 429 (the
 * server's flow control) or 503 is sent again after Retry-After (or a
 * short pause), a few times. Objects are read from a file one at a time
 * when it is a stream of JSON values, so a file of 100,000 objects is
 * never held as 100,000 trees. */
#ifndef SC_CLI_APPLY_H
#define SC_CLI_APPLY_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

typedef struct sc_apply {
	/* Set by the caller. */
	const char *servers; /* URL[,URL...]: the first that answers is used */
	const char *token;   /* "" for none */
	const char *ca;      /* CA of an https:// server; "" for the system's */
	bool del;            /* delete -f instead of apply -f */
	/* Per object, "jobs/x created" goes to stdout, unless stdout is a
	 * terminal (tty) and more than SC_APPLY_LINES objects come: then a
	 * progress line is redrawn on stderr (when it is a terminal,
	 * progress) and a summary printed at the end. */
	bool tty;
	bool progress;
	bool quiet; /* neither lines nor a summary (benchmarks) */
	/* Results, added up over calls. */
	size_t created, configured, deleted, failed;
	int worst; /* exit status: 0, 1 (failed) or 2 (refused as invalid) */
} sc_apply_t;

/* Applies (or deletes) the objects of one file: YAML documents separated
 * by `---`, a JSON or YAML list, or a stream of JSON values. Returns the
 * file's exit status (2 when it cannot be read or parsed). */
int sc__apply_file(sc_apply_t *a, const char *path);

#define SC_APPLY_LINES 100

/* Largest file read by apply -f. */
#define SC_APPLY_MAX_FILE (1024u << 20)

#endif
