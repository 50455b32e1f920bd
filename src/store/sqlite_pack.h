/* Packed values of the SQLite store (schema 3): a value of SC_PACK_MIN
 * bytes or more is stored as a BLOB, its length (SC_PACK_HDR bytes,
 * little-endian) and then a raw deflate stream, when that is smaller;
 * anything else stays TEXT. Objects deflate to about 0.55-0.6 of their
 * JSON (their field names repeat). */
#ifndef SC_STORE_SQLITE_PACK_H
#define SC_STORE_SQLITE_PACK_H

#include <stddef.h>

#include <sqlite3.h>
#include <zlib.h>

/* Shorter values gain little and would cost a call each. */
#define SC_PACK_MIN 128
#define SC_PACK_HDR 4

/* Deflate and inflate state, reset for every value (a new stream per
 * value would allocate and zero ~270 KB each time), and the buffers:
 * out holds the last value packed until its statement has run; the
 * caller owns the structure, sc_pack_free releases what it holds. */
typedef struct sc_pack {
	z_stream zd, zi;
	int zd_ok, zi_ok;
	unsigned char *out;
	size_t out_cap;
} sc_pack_t;

/* Sets up the streams and registers the SQL functions sc_rawlen(value)
 * (a stored value's length as written) and sc_pack(value) (a TEXT value
 * as schema 3 stores it) on db for p's lifetime. */
int sc_pack_init(sc_pack_t *p, sqlite3 *db);
void sc_pack_free(sc_pack_t *p);
/* Binds value to parameter col of st as TEXT or, packed, as a BLOB
 * (valid until the next pack: the statement runs before it). */
void sc_pack_bind(sc_pack_t *p, sqlite3_stmt *st, int col, const char *value);
/* Column col of st as written, into *buf (grown as needed, NUL-terminated;
 * the caller frees it). NULL when a BLOB does not inflate to the length
 * it names (a damaged file). */
char *sc_pack_column(sc_pack_t *p, sqlite3_stmt *st, int col, char **buf, size_t *cap);
/* The same as a new string (owned by the caller); NULL when damaged. */
char *sc_pack_column_dup(sc_pack_t *p, sqlite3_stmt *st, int col);

#endif
