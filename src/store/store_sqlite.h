/* The embedded SQLite backend of the store (store_sqlite.c explains the
 * schema, group commit and the change log). */
#ifndef SC_STORE_STORE_SQLITE_H
#define SC_STORE_STORE_SQLITE_H

#include <stdint.h>

#include "store/store.h"

/* Opens (creating and migrating as needed) the SQLite store in dir. */
int sc_store_sqlite_open(const char *dir, sc_store_t **out);

/* Tests: the change log keeps the newest `keep` revisions and is trimmed
 * every `every` revisions (defaults 100,000 and 1,000), so a test reaches
 * compaction in a few hundred writes. */
void sc__sqlite_log_window(sc_store_t *s, int64_t keep, int64_t every);
/* Tests: rows in the change log (-1 on error). */
int64_t sc__sqlite_changes(sc_store_t *s);

#endif
