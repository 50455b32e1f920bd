/* The SQLite store's packed values (schema 3): a value of 128 bytes or
 * more is stored deflated when that is smaller, anything else as text;
 * every read (get, list, the change log's replay, a delete's event, the
 * live-byte count after a reopen) gives back exactly what was written,
 * and a damaged packed value is an error, never a wrong value or a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "starcloud/error.h"
#include "store/store_sqlite.h"

#define NVALS 5

typedef struct fixture {
	char dir[64];
	char *vals[NVALS];
	const char *keys[NVALS];
} fixture_t;

/* A short value, a long compressible one, one a byte short of being
 * packed (as compressible), one of 100 KB, and one deflate cannot shrink
 * (random bytes). */
static void make_values(fixture_t *f)
{
	static const char *keys[NVALS] = {"p/short", "p/json", "p/edge", "p/big", "p/random"};
	f->vals[0] = strdup("{\"a\":1}");
	f->vals[1] = calloc(1, 4096);
	for (int i = 0; i < 40; i++)
		snprintf(f->vals[1] + strlen(f->vals[1]), 4096 - strlen(f->vals[1]),
		         "%s\"field%d\":\"value %d\"", i ? "," : "{", i, i % 3);
	snprintf(f->vals[1] + strlen(f->vals[1]), 4096 - strlen(f->vals[1]), "}");
	f->vals[2] = calloc(1, 128);
	memset(f->vals[2], 'x', 127);
	f->vals[3] = calloc(1, 100001);
	for (int i = 0; i < 100000; i++)
		f->vals[3][i] = (char)('a' + (i * 7 + i / 13) % 26);
	f->vals[4] = calloc(1, 201);
	srand(7);
	for (int i = 0; i < 200; i++)
		f->vals[4][i] = (char)(1 + rand() % 255);
	for (int i = 0; i < NVALS; i++)
		f->keys[i] = keys[i];
}

static int setup(void **state)
{
	fixture_t *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/sc-pack-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	make_values(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture_t *f = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	for (int i = 0; i < NVALS; i++)
		free(f->vals[i]);
	free(f);
	return 0;
}

/* The SQLite type of the value that key's current change holds. */
static char *stored_type(const char *dir, const char *key)
{
	char path[128], *out = NULL;
	sqlite3 *db;
	sqlite3_stmt *st;
	snprintf(path, sizeof(path), "%s/store.db", dir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db,
	                                    "SELECT typeof(c.value) FROM kv k JOIN changes c"
	                                    " ON c.id = k.change WHERE k.key = ?1",
	                                    -1, &st, NULL),
	                 SQLITE_OK);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		out = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
	return out;
}

typedef struct replayed {
	fixture_t *f;
	int matched, events;
} replayed_t;

static void check_event(const sc_store_event_t *ev, void *ud)
{
	replayed_t *r = ud;
	r->events++;
	for (int i = 0; i < NVALS; i++)
		if (strcmp(ev->key, r->f->keys[i]) == 0 && strcmp(ev->value, r->f->vals[i]) == 0)
			r->matched++;
}

static void check_reads(sc_store_t *s, fixture_t *f)
{
	sc_kv_list_t l = {0};
	for (int i = 0; i < NVALS; i++) {
		sc_kv_t kv = {0};
		assert_int_equal(sc_store_get(s, f->keys[i], &kv), 0);
		assert_string_equal(kv.value, f->vals[i]);
		sc_kv_free(&kv);
	}
	assert_int_equal(sc_store_list(s, "p/", &l), 0);
	assert_int_equal(l.n, NVALS);
	for (size_t i = 0; i < l.n; i++)
		for (int j = 0; j < NVALS; j++)
			if (strcmp(l.items[i].key, f->keys[j]) == 0)
				assert_string_equal(l.items[i].value, f->vals[j]);
	sc_kv_list_free(&l);
	replayed_t r = {.f = f};
	assert_int_equal(sc_store_replay(s, "p/", 0, check_event, &r), 0);
	assert_int_equal(r.events, NVALS);
	assert_int_equal(r.matched, NVALS);
}

static void values_read_back_as_written(void **state)
{
	fixture_t *f = *state;
	sc_store_t *s = NULL;
	int64_t live = 0;
	assert_int_equal(sc_store_sqlite_open(f->dir, &s), 0);
	assert_int_equal(s->schema, 3);
	for (int i = 0; i < NVALS; i++) {
		assert_int_equal(sc_store_put(s, f->keys[i], f->vals[i], SC_REV_ANY, NULL), 0);
		live += (int64_t)strlen(f->vals[i]);
	}
	assert_int_equal(sc_store_sync(s), 0);
	check_reads(s, f);
	sc_store_close(s);

	/* Values under 128 bytes, or not smaller packed, stay text. */
	const char *want[NVALS] = {"text", "blob", "text", "blob", "text"};
	for (int i = 0; i < NVALS; i++) {
		char *t = stored_type(f->dir, f->keys[i]);
		assert_non_null(t);
		assert_string_equal(t, want[i]);
		free(t);
	}

	/* After a reopen: the same values, and the live bytes are the bytes
	 * written, not the bytes stored. */
	assert_int_equal(sc_store_sqlite_open(f->dir, &s), 0);
	check_reads(s, f);
	sc_store_stats_t st;
	assert_int_equal(sc_store_stats(s, &st), 0);
	assert_int_equal(st.live_bytes, live);
	/* A deleted packed value: its event carries the value as written. */
	replayed_t r = {.f = f};
	int64_t rev = 0;
	assert_int_equal(sc_store_delete(s, "p/json", SC_REV_ANY, &rev), 0);
	assert_int_equal(sc_store_replay(s, "p/", rev - 1, check_event, &r), 0);
	assert_int_equal(r.events, 1);
	assert_int_equal(r.matched, 1);
	assert_int_equal(sc_store_stats(s, &st), 0);
	assert_int_equal(st.live_bytes, live - (int64_t)strlen(f->vals[1]));
	sc_store_close(s);
}

static void damaged_value_is_an_error(void **state)
{
	fixture_t *f = *state;
	sc_store_t *s = NULL;
	char path[128];
	sqlite3 *db;
	assert_int_equal(sc_store_sqlite_open(f->dir, &s), 0);
	assert_int_equal(sc_store_put(s, "p/json", f->vals[1], SC_REV_ANY, NULL), 0);
	assert_int_equal(sc_store_put(s, "p/short", f->vals[0], SC_REV_ANY, NULL), 0);
	assert_int_equal(sc_store_sync(s), 0);
	sc_store_close(s);

	/* The packed value's stream is cut short: it names 1,000 bytes and
	 * inflates to fewer; then a header shorter than a length. */
	static const char *damage[] = {
	    "UPDATE changes SET value = X'E80300004B04' WHERE key = 'p/json'",
	    "UPDATE changes SET value = X'E803' WHERE key = 'p/json'",
	};
	for (size_t d = 0; d < sizeof(damage) / sizeof(damage[0]); d++) {
		snprintf(path, sizeof(path), "%s/store.db", f->dir);
		assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
		assert_int_equal(sqlite3_exec(db, damage[d], NULL, NULL, NULL), SQLITE_OK);
		sqlite3_close(db);

		assert_int_equal(sc_store_sqlite_open(f->dir, &s), 0);
		sc_kv_t kv = {0};
		sc_kv_list_t l = {0};
		assert_int_equal(sc_store_get(s, "p/json", &kv), SC_EIO);
		assert_int_equal(sc_store_list(s, "p/", &l), SC_EIO);
		replayed_t r = {.f = f};
		assert_int_equal(sc_store_replay(s, "p/", 0, check_event, &r), SC_EIO);
		/* The other value is still read. */
		assert_int_equal(sc_store_get(s, "p/short", &kv), 0);
		assert_string_equal(kv.value, f->vals[0]);
		sc_kv_free(&kv);
		sc_store_close(s);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(values_read_back_as_written, setup, teardown),
	    cmocka_unit_test_setup_teardown(damaged_value_is_an_error, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
