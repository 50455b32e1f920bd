/* The embedded SQLite backend of the store (store_sqlite.c explains the
 * schema, group commit and the change log). */
#ifndef SC_STORE_STORE_SQLITE_H
#define SC_STORE_STORE_SQLITE_H

#include <stdint.h>

#include "store/store.h"

/* Opens (creating and migrating as needed) the SQLite store in dir. */
int sc_store_sqlite_open(const char *dir, sc_store_t **out);
/* readonly: for a reader such as a backup: the store must exist
 * (SC_ENOTFOUND) at this binary's schema (SC_ERANGE otherwise: it is not
 * migrated under a running server), and nothing can be written. */
int sc_store_sqlite_open_mode(const char *dir, int readonly, sc_store_t **out);

/* Tests: the change log keeps the newest `keep` revisions and is trimmed
 * every `every` revisions (defaults 100,000 and 1,000), so a test reaches
 * compaction in a few hundred writes. */
void sc__sqlite_log_window(sc_store_t *s, int64_t keep, int64_t every);
/* Tests: a fixed bound on the change log's bytes (0: a quarter of the
 * live data, at least 1 MiB). */
void sc__sqlite_log_bytes(sc_store_t *s, int64_t max);
/* Tests: rows in the change log (-1 on error). */
int64_t sc__sqlite_changes(sc_store_t *s);

#endif
