#include "net/tlsreload.h"

#include <signal.h>
#include <string.h>
#include <sys/stat.h>

#include "base/log.h"
#include "net/promtext.h"

/* What a file looks like to stat(): any difference means "changed". A
 * file that cannot be stat()ed has err set. */
typedef struct file_sig {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	int err;
} file_sig_t;

typedef struct watched {
	const char *name;
	sc_tls_ctx_t *ctx;
	sc_tls_remake_fn remake; /* NULL: sc_tls_ctx_reload */
	void *ud;
	const char *paths[SC_TLS_RELOAD_FILES];
	size_t npaths;
	file_sig_t loaded[SC_TLS_RELOAD_FILES];  /* what the last reload (or start) read */
	file_sig_t pending[SC_TLS_RELOAD_FILES]; /* a change seen once, reloaded if it holds */
	int has_pending;
	unsigned long long ok, errors;
} watched_t;

static struct {
	int started;
	uint64_t poll_ms;
	int poll_set;
	uv_timer_t timer;
	uv_signal_t hup;
	watched_t w[SC_TLS_RELOAD_MAX];
	size_t n;
} R;

static void sig_of(const char *path, file_sig_t *s)
{
	struct stat st;
	memset(s, 0, sizeof(*s));
	if (stat(path, &st) < 0) {
		s->err = 1;
		return;
	}
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->size = st.st_size;
	s->mtime = st.st_mtim;
	s->ctime = st.st_ctim;
}

static int sigs_equal(const file_sig_t *a, const file_sig_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].err != b[i].err || a[i].dev != b[i].dev || a[i].ino != b[i].ino ||
		    a[i].size != b[i].size || a[i].mtime.tv_sec != b[i].mtime.tv_sec ||
		    a[i].mtime.tv_nsec != b[i].mtime.tv_nsec ||
		    a[i].ctime.tv_sec != b[i].ctime.tv_sec ||
		    a[i].ctime.tv_nsec != b[i].ctime.tv_nsec)
			return 0;
	return 1;
}

static int reload_one(watched_t *w, const char *why)
{
	char err[512], desc[160];
	for (size_t i = 0; i < w->npaths; i++)
		sig_of(w->paths[i], &w->loaded[i]);
	w->has_pending = 0;
	int rc = w->remake ? w->remake(w->ud, w->ctx, err, sizeof(err))
	                   : sc_tls_ctx_reload(w->ctx, err, sizeof(err));
	if (rc < 0) {
		w->errors++;
		sc_log_error("TLS %s: reload (%s) failed, still using the certificate loaded "
		             "before: %s",
		             w->name, why, err);
		return -1;
	}
	w->ok++;
	sc_tls_ctx_describe(w->ctx, desc, sizeof(desc));
	sc_log_info("TLS %s: reloaded (%s)%s%s", w->name, why, desc[0] ? ", " : "", desc);
	return 0;
}

/* SIGHUP: every watched context, changed or not (nginx -s reload). */
static void on_hup(uv_signal_t *h, int signum)
{
	if (!R.n)
		sc_log_info("SIGHUP: no TLS files to reload");
	for (size_t i = 0; i < R.n; i++)
		reload_one(&R.w[i], "SIGHUP");
}

static void on_poll(uv_timer_t *t)
{
	for (size_t i = 0; i < R.n; i++) {
		watched_t *w = &R.w[i];
		file_sig_t now[SC_TLS_RELOAD_FILES];
		for (size_t k = 0; k < w->npaths; k++)
			sig_of(w->paths[k], &now[k]);
		if (sigs_equal(now, w->loaded, w->npaths)) {
			w->has_pending = 0;
		} else if (w->has_pending && sigs_equal(now, w->pending, w->npaths)) {
			reload_one(w, "a file changed");
		} else { /* new, or still changing: look again next time */
			memcpy(w->pending, now, w->npaths * sizeof(now[0]));
			w->has_pending = 1;
		}
	}
}

static void start(uv_loop_t *loop)
{
	if (R.started)
		return;
	R.started = 1;
	uv_timer_init(loop, &R.timer);
	uv_signal_init(loop, &R.hup);
	if (!R.poll_ms && !R.poll_set)
		R.poll_ms = SC_TLS_RELOAD_POLL_MS;
	if (R.poll_ms)
		uv_timer_start(&R.timer, on_poll, R.poll_ms, R.poll_ms);
	uv_signal_start(&R.hup, on_hup, SIGHUP);
	uv_unref((uv_handle_t *)&R.timer);
	uv_unref((uv_handle_t *)&R.hup);
}

void sc_tls_reload_watch_with(uv_loop_t *loop, const char *name, sc_tls_ctx_t *ctx,
                              const char *const *paths, size_t npaths, sc_tls_remake_fn remake,
                              void *ud)
{
	if (!ctx || R.n == SC_TLS_RELOAD_MAX)
		return;
	watched_t *w = &R.w[R.n++];
	memset(w, 0, sizeof(*w));
	w->name = name;
	w->ctx = ctx;
	w->remake = remake;
	w->ud = ud;
	for (size_t i = 0; i < npaths && w->npaths < SC_TLS_RELOAD_FILES; i++)
		if (paths[i])
			w->paths[w->npaths++] = paths[i];
	for (size_t i = 0; i < w->npaths; i++)
		sig_of(w->paths[i], &w->loaded[i]);
	start(loop);
}

void sc_tls_reload_watch(uv_loop_t *loop, const char *name, sc_tls_ctx_t *ctx)
{
	const char *paths[3];
	size_t n = ctx ? sc_tls_ctx_files(ctx, paths) : 0;
	if (n)
		sc_tls_reload_watch_with(loop, name, ctx, paths, n, NULL, NULL);
	start(loop);
}

void sc_tls_reload_metrics(sc_buf_t *b)
{
	/* The families are declared even with no context (no TLS): the
	 * alert rules name them, and a page always says what it may carry. */
	sc_prom_family(b, "starcloud_tls_reload_total", "counter",
	               "Reloads of a TLS context from its files (SIGHUP or a changed file), by "
	               "result; an error keeps the certificate in use.");
	for (size_t i = 0; i < R.n; i++)
		sc_buf_printf(b,
		              "starcloud_tls_reload_total{context=\"%s\",result=\"ok\"} %llu\n"
		              "starcloud_tls_reload_total{context=\"%s\",result=\"error\"} %llu\n",
		              R.w[i].name, R.w[i].ok, R.w[i].name, R.w[i].errors);
	sc_prom_family(b, "starcloud_tls_certificate_expiry_timestamp_seconds", "gauge",
	               "notAfter of the certificate in use (Unix seconds).");
	for (size_t i = 0; i < R.n; i++) {
		time_t t = sc_tls_ctx_not_after(R.w[i].ctx);
		if (t)
			sc_buf_printf(
			    b,
			    "starcloud_tls_certificate_expiry_timestamp_seconds{context=\"%s\"} "
			    "%lld\n",
			    R.w[i].name, (long long)t);
	}
}

void sc_tls_reload_interval(uint64_t ms)
{
	R.poll_ms = ms;
	R.poll_set = 1;
	if (!R.started)
		return;
	uv_timer_stop(&R.timer);
	if (ms)
		uv_timer_start(&R.timer, on_poll, ms, ms);
}

void sc_tls_reload_stop(void)
{
	if (R.started) {
		uv_close((uv_handle_t *)&R.timer, NULL);
		uv_close((uv_handle_t *)&R.hup, NULL);
	}
	R.started = 0;
	R.n = 0;
}
