/* The SQLite store's change-log compaction, with the log shortened so a
 * test reaches it in a few hundred writes (production keeps 100,000
 * revisions and compacts every 1,000): values whose change is older than
 * the log survive, a watcher from before the log gets SC_ERANGE, one
 * from inside it gets every later change in order, and all of it holds
 * after the store is reopened. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "starcloud/error.h"
#include "store/store_sqlite.h"

#define LOG_KEEP 50
#define COMPACT_EVERY 10

typedef struct seen {
	int64_t revs[400];
	int types[400];
	size_t n;
} seen_t;

static void record_event(const sc_store_event_t *ev, void *ud)
{
	seen_t *s = ud;
	if (s->n < sizeof(s->revs) / sizeof(s->revs[0])) {
		s->revs[s->n] = ev->rev;
		s->types[s->n++] = ev->type;
	}
}

static int64_t put(sc_store_t *s, const char *key, const char *value)
{
	int64_t rev = 0;
	assert_int_equal(sc_store_put(s, key, value, SC_REV_ANY, &rev), 0);
	return rev;
}

static int64_t count_changes(sc_store_t *s)
{
	return sc__sqlite_changes(s);
}

/* The history: a/keep at 1, a/del at 2, a/hot at 3..99, a/del deleted
 * at 100, a/hot at 101..202; each value is {"r":<its revision>}. */
static void write_history(sc_store_t *s)
{
	char v[32];
	for (int64_t rev = 1; rev <= 202; rev++) {
		snprintf(v, sizeof(v), "{\"r\":%lld}", (long long)rev);
		if (rev == 100) {
			int64_t got = 0;
			assert_int_equal(sc_store_delete(s, "a/del", SC_REV_ANY, &got), 0);
			assert_int_equal(got, 100);
			continue;
		}
		assert_int_equal(put(s,
		                     rev == 1   ? "a/keep"
		                     : rev == 2 ? "a/del"
		                                : "a/hot",
		                     v),
		                 rev);
	}
}

/* What must hold before and after a reopen. */
static void check_compacted(sc_store_t *s)
{
	assert_int_equal(sc_store_revision(s), 202);
	sc_kv_t kv = {0};
	/* Written at revision 1, long compacted: still there, same revisions. */
	assert_int_equal(sc_store_get(s, "a/keep", &kv), 0);
	assert_string_equal(kv.value, "{\"r\":1}");
	assert_int_equal(kv.create_rev, 1);
	assert_int_equal(kv.mod_rev, 1);
	sc_kv_free(&kv);
	assert_int_equal(sc_store_get(s, "a/hot", &kv), 0);
	assert_string_equal(kv.value, "{\"r\":202}");
	assert_int_equal(kv.create_rev, 3);
	assert_int_equal(kv.mod_rev, 202);
	sc_kv_free(&kv);
	assert_int_equal(sc_store_get(s, "a/del", &kv), SC_ENOTFOUND);
	sc_kv_list_t l = {0};
	assert_int_equal(sc_store_list(s, "a/", &l), 0);
	assert_int_equal(l.n, 2);
	sc_kv_list_free(&l);
	/* Compacted up to 150 at revision 200: older watchers must list again. */
	seen_t old = {0};
	sc_store_watch_t *w = NULL;
	assert_int_equal(sc_store_watch(s, "a/", 10, record_event, &old, &w), SC_ERANGE);
	assert_int_equal(sc_store_watch(s, "a/", 149, record_event, &old, &w), SC_ERANGE);
	assert_int_equal(old.n, 0);
	/* From 150 on, every change, in order. */
	seen_t tail = {0};
	assert_int_equal(sc_store_watch(s, "a/", 150, record_event, &tail, &w), 0);
	assert_int_equal(tail.n, 52);
	for (size_t i = 0; i < tail.n; i++)
		assert_int_equal(tail.revs[i], 151 + (int64_t)i);
	sc_store_unwatch(s, w);
	/* The log holds the kept window (151..202) and the change a current
	 * value points to (a/keep's), not the 202 changes written. */
	assert_int_equal(count_changes(s), 53);
}

static void compaction_keeps_values_and_window(void **state)
{
	char dir[] = "/tmp/sc-store-compact-XXXXXX";
	assert_non_null(mkdtemp(dir));
	sc_store_t *s = NULL;
	assert_int_equal(sc_store_sqlite_open(dir, &s), 0);
	sc__sqlite_log_window(s, LOG_KEEP, COMPACT_EVERY);
	/* A live watcher sees every change as it happens, compaction or not. */
	seen_t live = {0};
	sc_store_watch_t *w = NULL;
	assert_int_equal(sc_store_watch(s, "a/", 0, record_event, &live, &w), 0);
	write_history(s);
	assert_int_equal(live.n, 202);
	assert_int_equal(live.revs[99], 100);
	assert_int_equal(live.types[99], SC_EV_DELETED);
	sc_store_unwatch(s, w);
	assert_int_equal(sc_store_sync(s), 0);
	check_compacted(s);
	sc_store_close(s);
	/* The compaction point and the kept values survive a restart. */
	assert_int_equal(sc_store_sqlite_open(dir, &s), 0);
	sc__sqlite_log_window(s, LOG_KEEP, COMPACT_EVERY);
	check_compacted(s);
	sc_store_close(s);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* The byte bound: one revision may hold many changes, so the log is kept
 * under a number of bytes too. 400 puts of ~100 bytes each to 20 keys
 * against a 4,000-byte bound: the log stays near the bound, every current
 * value survives, a watcher from the start must list again and one from
 * the last few revisions gets every later change. */
static void byte_bound_keeps_the_log_small(void **state)
{
	char dir[] = "/tmp/sc-store-bytes-XXXXXX", v[128], key[16];
	assert_non_null(mkdtemp(dir));
	sc_store_t *s = NULL;
	assert_int_equal(sc_store_sqlite_open(dir, &s), 0);
	sc__sqlite_log_bytes(s, 4000);
	for (int i = 1; i <= 400; i++) {
		snprintf(key, sizeof(key), "b/%02d", i % 20);
		snprintf(v, sizeof(v), "{\"r\":%d,\"pad\":\"%080d\"}", i, 0);
		assert_int_equal(put(s, key, v), i);
	}
	sc_store_stats_t st;
	assert_int_equal(sc_store_stats(s, &st), 0);
	assert_true(st.compactions > 0);
	assert_true(st.log_bytes <= 4000);
	assert_true(st.compacted > 300 && st.compacted < 400);
	assert_true(st.live_bytes > 20 * 90 && st.live_bytes < 20 * 110);
	/* 20 current values plus at most the bound's worth of older changes. */
	assert_true(count_changes(s) <= 20 + 4000 / 90);
	sc_kv_list_t l = {0};
	assert_int_equal(sc_store_list(s, "b/", &l), 0);
	assert_int_equal(l.n, 20);
	sc_kv_list_free(&l);
	seen_t old = {0}, tail = {0};
	sc_store_watch_t *w = NULL;
	assert_int_equal(sc_store_watch(s, "b/", 1, record_event, &old, &w), SC_ERANGE);
	assert_int_equal(sc_store_watch(s, "b/", 395, record_event, &tail, &w), 0);
	assert_int_equal(tail.n, 5);
	sc_store_unwatch(s, w);
	sc_store_close(s);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(compaction_keeps_values_and_window),
	    cmocka_unit_test(byte_bound_keeps_the_log_small),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
