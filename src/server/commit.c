/* Group commit, and what the server does when the storage fails
 * (docs/CONTROL_PLANE.md, "Group commit" and "Storage failures").
 *
 * Each loop iteration ends here (a uv_check handle): the tenants' requests
 * of the iteration run (flow.c), then the store commits every write of the
 * iteration (SQLite: one COMMIT into the WAL, on this thread) and a worker
 * thread makes them durable (one fdatasync of the WAL, covering every
 * iteration committed since the last one began). An answer waits until
 * the revision it may show is durable (sc_http_release), and so do the
 * watch streams' events, so nothing is acknowledged or shown to a watcher
 * before it is on disk; but the loop does not wait for the disk: while the
 * fsync runs it takes the next requests, and an answer that shows only
 * durable data (a read of an object written earlier) leaves at once. With
 * etcd every write is durable when it returns: no holding at all.
 *
 * When the storage fails (a full disk, an I/O error) the server does not
 * exit: it never acknowledges those writes, and keeps serving.
 *   - Every held answer that may show them becomes 507 (no space) or 503
 *     (I/O error) with a message that says whether the writes were undone.
 *   - When the store undid them (a COMMIT that failed: SQLite rolls the
 *     batch back), everything that had taken them in is put back: watchers
 *     holding their events are cut off (they resume from what they were
 *     sent), the cache is read from the store again, and store_epoch moves
 *     so that code acting on edges (node leases) does its writes again.
 *   - From then on writes are refused at once (sc_store_refuse_writes:
 *     507 or 503 without touching the disk) and reads, watches, leases and
 *     the scheduling loop's reading go on. Once a second a probe tries a
 *     small durable write of the store's own; when it succeeds, writes are
 *     taken again, by themselves. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "server/cache.h"
#include "server/flow.h"
#include "server/server.h"
#include "server/watch.h"
#include "starcloud/error.h"

#define PROBE_MS 1000

typedef struct flush_job {
	uv_work_t req;
	sc_server_t *s;
	int fd;
	int rc;
	int64_t target; /* durable once the fsync succeeds */
} flush_job_t;

static void flush_start(sc_server_t *s);

/* The status and message for requests a storage failure turned away. */
static int failure_answer(int rc, int undone, char *body, size_t bodysz)
{
	int status = rc == SC_ENOSPACE ? 507 : 503;
	const char *reason = rc == SC_ENOSPACE ? "InsufficientStorage" : "StorageError";
	const char *what =
	    rc == SC_ENOSPACE ? "the server's disk is full" : "the server's disk failed";
	snprintf(body, bodysz,
	         "{\"error\":{\"code\":%d,\"reason\":\"%s\",\"message\":\"%s: %s; reads go on, "
	         "writes are refused until the disk takes them again\",\"field\":\"\"}}\n",
	         status, reason, what,
	         undone ? "the changes of this request were undone, nothing was changed"
	                : "the changes of this request may not be durable: read them back");
	return status;
}

/* Revisions of undone writes never become durable, and nothing shows
 * them any more (the cache was read again): once everything before them is
 * durable, so are they, as far as answers are concerned. */
static void skip_void(sc_server_t *s)
{
	if (s->void_to > s->durable_rev && s->durable_rev >= s->void_from)
		s->durable_rev = s->void_to;
	if (s->void_to > s->committed_rev && s->committed_rev >= s->void_from)
		s->committed_rev = s->void_to;
}

/* What readers may see: the durable revision, or everything for a store
 * whose writes are durable when they return (etcd). */
static int64_t readable_rev(sc_server_t *s)
{
	return s->pipelined ? s->durable_rev : INT64_MAX;
}

static void release(sc_server_t *s)
{
	/* While a failed fsync leaves committed writes not known durable, an
	 * answer that may show them cannot be given: say so (503) rather than
	 * leave the client waiting for a disk that may not come back. */
	if (s->http && s->storage_error && !s->flushing && s->durable_rev < s->committed_rev) {
		char body[512];
		int status = failure_answer(s->storage_error, 0, body, sizeof(body));
		sc_http_fail_held(s->http, s->durable_rev, status, body, strlen(body));
	}
	if (s->http)
		sc_http_release(s->http, readable_rev(s));
	sc__watch_flush(s->watch, readable_rev(s));
}

static void on_probe(uv_timer_t *t)
{
	sc_server_t *s = t->data;
	if (s->flushing)
		return; /* the fsync in flight answers first */
	int rc = sc_store_probe(s->store);
	if (rc < 0)
		return;
	/* The probe's commit and fsync made everything committed durable. */
	uv_timer_stop(t);
	sc_store_refuse_writes(s->store, 0);
	s->storage_error = 0;
	s->committed_rev = s->durable_rev = sc_store_revision(s->store);
	release(s);
	sc_log_info("store: the disk takes writes again: writes resume");
}

/* after: the newest revision that is not in question (committed before
 * the failed commit, or durable before the failed fsync). */
static void failed(sc_server_t *s, int rc, int64_t after)
{
	char body[512];
	int undone = s->store->rollbacks != s->rollbacks_seen;
	s->rollbacks_seen = s->store->rollbacks;
	s->commit_failures++;
	int status = failure_answer(rc, undone, body, sizeof(body));
	if (s->http)
		sc_http_fail_held(s->http, after, status, body, strlen(body));
	if (undone) {
		sc__watch_rollback(s->watch, after);
		if (sc__cache_reload(s->cache) < 0)
			sc_log_error("store: cannot read the store back after a failed commit");
		s->store_epoch++;
		s->void_from = after;
		s->void_to = sc_store_revision(s->store);
		skip_void(s);
	}
	if (!s->storage_error)
		sc_log_error("store: cannot write (%s): writes are refused with %d until the disk "
		             "takes them again; reads go on",
		             sc_strerror(rc), status);
	s->storage_error = rc;
	sc_store_refuse_writes(s->store, rc);
	if (!uv_is_active((uv_handle_t *)&s->probe))
		uv_timer_start(&s->probe, on_probe, PROBE_MS, PROBE_MS);
	release(s);
}

/* ---- the fsync, on a worker thread --------------------------------------- */

static void flush_work(uv_work_t *w)
{
	flush_job_t *j = w->data;
	j->rc = fdatasync(j->fd) == 0                ? 0
	        : errno == ENOSPC || errno == EDQUOT ? SC_ENOSPACE
	                                             : SC_EIO;
	close(j->fd);
}

static void flush_done(uv_work_t *w, int status)
{
	flush_job_t *j = w->data;
	sc_server_t *s = j->s;
	int rc = status < 0 ? SC_EIO : j->rc;
	int64_t target = j->target;
	free(j);
	s->flushing = 0;
	if (s->stopping)
		return;
	if (rc < 0) {
		/* Committed to the file but maybe not to the disk: not
		 * acknowledged; the probe's fsync covers them later. */
		sc_log_error("store: cannot sync the WAL: %s", sc_strerror(rc));
		failed(s, rc, s->durable_rev);
		return;
	}
	if (target > s->durable_rev)
		s->durable_rev = target;
	skip_void(s);
	release(s);
	flush_start(s); /* what was committed meanwhile */
}

static void flush_start(sc_server_t *s)
{
	if (s->flushing || s->storage_error || s->committed_rev <= s->durable_rev)
		return;
	int fd = sc_store_flush_fd(s->store);
	if (fd == -1) {
		s->durable_rev = s->committed_rev; /* nothing waited for the disk */
		return;
	}
	flush_job_t *j = sc_xcalloc(1, sizeof(*j));
	j->s = s;
	j->fd = fd;
	j->target = s->committed_rev;
	j->req.data = j;
	if (fd < 0 || uv_queue_work(s->loop, &j->req, flush_work, flush_done) < 0) {
		if (fd >= 0)
			close(fd);
		free(j);
		failed(s, SC_EIO, s->durable_rev);
		return;
	}
	s->flushing = 1;
}

/* ---- each iteration ------------------------------------------------------ */

static void on_commit(uv_check_t *h)
{
	sc_server_t *s = h->data;
	/* Tenants' requests of this iteration run now, fairly (flow.c), so
	 * their writes join this commit. */
	sc__flow_run(s->flow);
	if (!s->store)
		return;
	if (!s->pipelined) {
		/* etcd: durable when written; a sync has nothing to do. */
		release(s);
		return;
	}
	if (!s->flow) {
		/* --no-flow-control, the benchmark's "before": commit and fsync
		 * on this thread, then answer everything, as before issue 16. */
		int rc = sc_store_sync(s->store);
		if (rc < 0) {
			failed(s, rc, s->durable_rev);
			return;
		}
		s->committed_rev = s->durable_rev = sc_store_revision(s->store);
		if (s->http)
			sc_http_flush(s->http);
		sc__watch_flush(s->watch, s->durable_rev);
		return;
	}
	int64_t before = s->committed_rev;
	int rc = sc_store_commit(s->store);
	if (rc < 0) {
		failed(s, rc, before);
		return;
	}
	s->committed_rev = sc_store_revision(s->store);
	skip_void(s);
	flush_start(s);
	release(s);
}

/* The revision an answer written now may show: the newest write taken. */
static int64_t current_rev(void *ud)
{
	sc_server_t *s = ud;
	return sc_store_revision(s->store);
}

void sc__commit_start(sc_server_t *s)
{
	s->pipelined = s->store->ops->flush_fd != NULL;
	s->committed_rev = s->durable_rev = sc_store_revision(s->store);
	s->rollbacks_seen = s->store->rollbacks;
	/* Without flow control (a benchmark's "before") every answer waits
	 * for the end of its iteration's fsync, as before issue 16. */
	sc_http_set_batching(s->http, s->pipelined);
	if (s->flow)
		sc_http_set_hold_check(s->http, current_rev, s);
	uv_check_init(s->loop, &s->commit);
	uv_timer_init(s->loop, &s->probe);
	s->commit.data = s->probe.data = s;
	uv_check_start(&s->commit, on_commit);
	uv_unref((uv_handle_t *)&s->commit);
	uv_unref((uv_handle_t *)&s->probe);
}

void sc__commit_stop(sc_server_t *s)
{
	s->stopping = 1;
	uv_close((uv_handle_t *)&s->commit, NULL);
	uv_close((uv_handle_t *)&s->probe, NULL);
}
