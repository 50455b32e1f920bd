/* Client requests: validation, routing to a version and a replica, upstream
 * attempts, retries, buffering and streaming, mid-stream continuation.
 *
 * Retry rules (Envoy's, with the buffering that makes them safe):
 *   - connection errors, timeouts and 502/503/504 are retried on another
 *     replica while nothing has reached the client, at most --max-retries
 *     times, and only while the retries in flight stay under the budget
 *     (20 % of active requests, at least 3) so a failing fleet is not
 *     hammered by its own retries;
 *   - a 200 with an empty or shapeless body is a failure too (never an
 *     empty 200 to a client);
 *   - other answers, 500 included, go to the client as they are. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/parse.h"
#include "base/alloc.h"
#include "gateway/proxy.h"
#include "net/otel.h"
#include "starcloud/error.h"
#include "base/jscan.h"

static void req_release(gw_req_t *q);
static void on_deadlines(uv_timer_t *h);

/* ---------------------------------------------------------------------
 * Answers
 * ------------------------------------------------------------------- */

static void set_headers(gw_req_t *q, gw_backend_t *b)
{
	if (!q->hr || !b)
		return;
	sc_http_set_header(q->hr, "x-starcloud-replica", b->id);
	sc_http_set_header(q->hr, "x-starcloud-version", b->version);
	if (q->up_ihcl[0])
		sc_http_set_header(q->hr, "Inference-Header-Content-Length", q->up_ihcl);
	if (q->prefill_be)
		sc_http_set_header(q->hr, "x-starcloud-prefill-replica", q->prefill_be->id);
	char tp[56];
	sc__gw_traceparent(&q->root, tp);
	sc_http_set_header(q->hr, "traceparent", tp);
}

static double since(uint64_t t0)
{
	return (double)(uv_hrtime() - t0) / 1e9;
}

/* Records the end of the request in the metrics and the root span. */
static void req_account(gw_req_t *q, int status)
{
	const char *ver = q->be ? q->be->version : q->version;
	/* The replica's figures are its model/version's: no lookup by name. */
	gw_stats_t *s = q->be ? q->be->stats : sc__gw_stats(q->gw, q->model, ver);
	double total = since(q->t0_ns);
	double ttft = q->ttft_ns ? (double)(q->ttft_ns - q->t0_ns) / 1e9 : total;
	sc__gw_stats_done(s, status, total, ttft);
	if (sc__gw_span_wanted(q->gw, &q->root))
		sc__gw_root_span(q, ver, status);
}

/* The replicas a request tried, for an answer no replica gave. */
static void set_tried(gw_req_t *q)
{
	char list[512];
	size_t at = 0;
	for (size_t i = 0; i < q->ntried && at + GW_MAX_URL + 2 < sizeof(list); i++)
		at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s", i ? "," : "",
		                       q->tried[i]->id);
	if (at)
		sc_http_set_header(q->hr, "x-starcloud-tried", list);
	char tp[56];
	sc__gw_traceparent(&q->root, tp);
	sc_http_set_header(q->hr, "traceparent", tp);
}

static int kserve_kind(const gw_req_t *q)
{
	return q->kind == GW_K_INFER || q->kind == GW_K_PASS;
}

void sc__gw_fail(gw_req_t *q, int status, const char *code, const char *param, const char *msg)
{
	if (q->hr && q->started && q->passthru) {
		/* Half a body went out: cut the connection so the client sees
		 * a truncated answer, never a complete-looking one. */
		sc_http_abort(q->hr);
		q->hr = NULL;
	} else if (q->hr && q->started) {
		/* An open event stream ends with an error event (OpenAI's shape,
		 * or KServe's for generate_stream). */
		json_t *e = kserve_kind(q)
		                ? json_pack("{s:s}", "error", msg)
		                : json_pack("{s:{s:s,s:s,s:s?,s:s?}}", "error", "message", msg,
		                            "type", "server_error", "param", param, "code", code);
		char *js = sc_xcheck(json_dumps(sc_xcheck(e), JSON_COMPACT));
		json_decref(e);
		sc_buf_t ev;
		sc_buf_init(&ev, 0);
		sc_buf_printf(&ev, "data: %s\n\n", js);
		free(js);
		sc_http_stream_write(q->hr, ev.data, ev.len);
		sc_buf_free(&ev);
		sc_http_stream_end(q->hr);
		q->hr = NULL;
	} else if (q->hr) {
		/* No replica gave this answer: it names none, only those tried. */
		set_tried(q);
		if (status == 429 || (code && strcmp(code, "overloaded") == 0))
			sc_http_set_header(q->hr, "Retry-After", "1");
		if (kserve_kind(q))
			sc__gw_kserve_error(q->hr, status, msg);
		else
			sc__gw_error(q->hr, status, code, param, msg);
		q->hr = NULL;
	}
	req_account(q, status);
	req_release(q);
}

void sc__gw_relay(gw_req_t *q)
{
	set_headers(q, q->be);
	/* A replica's heartbeat (blanks before a late JSON answer) is not part
	 * of the answer. */
	size_t skip = 0;
	while (skip < q->resp.len && strchr(" \t\r\n", q->resp.data[skip]))
		skip++;
	sc_http_respond(q->hr, q->up_status, q->up_ctype[0] ? q->up_ctype : "application/json",
	                q->resp.data + skip, q->resp.len - skip);
	if (q->pd && q->be && q->up_status == 200)
		sc__gw_stats_answer_tokens(q->be->stats, q->resp.data + skip, q->resp.len - skip);
	q->hr = NULL;
	req_account(q, q->up_status);
	req_release(q);
}

/* ---------------------------------------------------------------------
 * Lifetime
 * ------------------------------------------------------------------- */

/* Finished requests are kept (with their buffers) for the next ones, up
 * to GW_REQ_POOL: no allocation per request once the gateway is warm. A
 * buffer that grew past GW_REQ_KEEP_BYTES is given back instead. */
#define GW_REQ_POOL 512
#define GW_REQ_KEEP_BYTES (64u << 10)

static void buf_trim(sc_buf_t *b)
{
	if (b->cap > GW_REQ_KEEP_BYTES)
		sc_buf_free(b);
	sc_buf_reset(b);
}

/* Puts a finished request back into the pool (or frees it past the cap). */
static void req_recycle(sc_gw_t *gw, gw_req_t *q)
{
	json_decref(q->body);
	json_decref(q->kv);
	json_decref(q->ids);
	if (gw->npool >= GW_REQ_POOL) {
		sc_buf_free(&q->resp);
		sc_buf_free(&q->sse);
		free(q);
		return;
	}
	buf_trim(&q->resp);
	buf_trim(&q->sse);
	q->next = gw->pool;
	gw->pool = q;
	gw->npool++;
}

/* A released request may still be on the stack of the callback that
 * released it (a parser callback checks q->closed after pumping events),
 * so it is recycled only once the loop iteration's callbacks are over:
 * by a check handle that runs after the I/O phase and then stops. */
static void on_reap(uv_check_t *h)
{
	sc_gw_t *gw = h->data;
	while (gw->dead) {
		gw_req_t *q = gw->dead;
		gw->dead = q->next;
		req_recycle(gw, q);
	}
	uv_check_stop(h);
}

/* A zeroed request, from the pool when one is there. */
static gw_req_t *req_alloc(sc_gw_t *gw)
{
	gw_req_t *q = gw->pool;
	if (!q) {
		q = sc_xcalloc(1, sizeof(*q));
		return q;
	}
	gw->pool = q->next;
	gw->npool--;
	sc_buf_t keep[2] = {q->resp, q->sse};
	memset(q, 0, offsetof(gw_req_t, last_err));
	q->last_err[0] = '\0';
	memset(&q->pd, 0, sizeof(*q) - offsetof(gw_req_t, pd));
	q->resp = keep[0];
	q->sse = keep[1];
	return q;
}

void sc__gw_proxy_free_pool(sc_gw_t *gw)
{
	while (gw->dead) {
		gw_req_t *q = gw->dead;
		gw->dead = q->next;
		req_recycle(gw, q);
	}
	while (gw->pool) {
		gw_req_t *q = gw->pool;
		gw->pool = q->next;
		sc_buf_free(&q->resp);
		sc_buf_free(&q->sse);
		free(q);
	}
	gw->npool = 0;
}

static void req_release(gw_req_t *q)
{
	if (q->closed)
		return;
	q->closed = 1;
	if (q->pd_ops)
		q->pd_ops->release(q);
	if (q->up) {
		/* up_done runs inside (SC_ECANCELED) and sees q closed. */
		sc_hcli_req_t *up = q->up;
		q->up = NULL;
		sc_hcli_cancel(up);
	}
	if (q->be)
		sc__gw_backend_wait_del(q->be, &q->wait);
	if (q->be && q->held) {
		q->held = 0;
		q->be->inflight--;
		sc__gw_stats_inflight(q->be->stats, -1);
	}
	if (q->in_retry)
		q->gw->active_retries--;
	if (q->waiting) {
		q->waiting = 0;
		q->gw->waiting--;
	}
	q->gw->active--;
	sc_gw_t *gw = q->gw;
	if (q->prev)
		q->prev->next = q->next;
	else
		gw->reqs = q->next;
	if (q->next)
		q->next->prev = q->prev;
	else
		gw->reqs_tail = q->prev;
	q->prev = NULL;
	q->next = gw->dead;
	gw->dead = q;
	if (!uv_is_active((uv_handle_t *)&gw->reaper))
		uv_check_start(&gw->reaper, on_reap);
}

void sc__gw_proxy_shutdown(sc_gw_t *gw)
{
	while (gw->reqs) {
		gw_req_t *q = gw->reqs;
		if (q->hr && q->started && q->passthru)
			sc_http_abort(q->hr);
		else if (q->hr && q->started)
			sc_http_stream_end(q->hr);
		else if (q->hr)
			sc__gw_error(q->hr, 503, "shutting_down", NULL,
			             "the gateway is shutting down");
		q->hr = NULL;
		req_release(q);
	}
	uv_close((uv_handle_t *)&gw->deadlines, NULL);
	uv_close((uv_handle_t *)&gw->reaper, NULL);
}

static void on_client_gone(sc_http_req_t *r, void *ud)
{
	gw_req_t *q = ud;
	q->hr = NULL;
	req_account(q, 499);
	req_release(q);
}

/* Whole-request deadlines. Every request gets the same --timeout and the
 * list of requests in flight is in arrival order (new ones at the head), so
 * the oldest request, at the tail, is always the first to expire: one timer
 * armed for the tail's deadline replaces a timer per request (a start and a
 * stop in libuv's timer heap for every request). When the tail finishes
 * first the timer fires early, finds nothing due and re-arms for the new
 * tail; under steady traffic that is one timer operation per --timeout. */
static void arm_deadlines(sc_gw_t *gw)
{
	gw_req_t *t = gw->reqs_tail;
	if (!t)
		return;
	uint64_t now = uv_now(gw->loop);
	uint64_t wait = t->deadline_ms > now ? t->deadline_ms - now : 0;
	uv_timer_start(&gw->deadlines, on_deadlines, wait, 0);
}

static void on_deadlines(uv_timer_t *h)
{
	sc_gw_t *gw = h->data;
	uint64_t now = uv_now(gw->loop);
	/* sc__gw_fail unlinks the tail; an answer may start a pipelined
	 * request, which joins at the head with a later deadline. */
	while (gw->reqs_tail && gw->reqs_tail->deadline_ms <= now)
		sc__gw_fail(gw->reqs_tail, 504, "timeout", NULL, "the request timed out");
	arm_deadlines(gw);
}

int sc__gw_proxy_init(sc_gw_t *gw)
{
	uv_timer_init(gw->loop, &gw->deadlines);
	uv_check_init(gw->loop, &gw->reaper);
	gw->deadlines.data = gw->reaper.data = gw;
	/* Neither keeps the loop alive: requests in flight hold connections. */
	uv_unref((uv_handle_t *)&gw->deadlines);
	uv_unref((uv_handle_t *)&gw->reaper);
	return 0;
}

gw_req_t *sc__gw_req_new(sc_gw_t *gw, sc_http_req_t *hr, int kind)
{
	gw_req_t *q = req_alloc(gw);
	q->gw = gw;
	q->hr = hr;
	q->kind = kind;
	q->method = sc_http_method(hr);
	q->raw = sc_http_body(hr, &q->rawlen);
	q->t0_ns = uv_hrtime();
	q->resp.max = q->sse.max = gw->o.max_response;
	q->deadline_ms = uv_now(gw->loop) + gw->o.timeout_ms;
	/* The answer comes later: hear about a client that leaves first. */
	sc_http_on_close(hr, on_client_gone, q);
	gw->active++;
	q->next = gw->reqs;
	if (gw->reqs)
		gw->reqs->prev = q;
	else
		gw->reqs_tail = q;
	gw->reqs = q;
	if (!uv_is_active((uv_handle_t *)&gw->deadlines))
		arm_deadlines(gw);
	sc__gw_span_root(gw, &q->root, sc_http_header(hr, "traceparent"));
	q->ua[0] = '\0';
	if (sc__gw_span_wanted(gw, &q->root)) {
		const char *ua = sc_http_header(hr, "User-Agent");
		snprintf(q->ua, sizeof(q->ua), "%s", ua ? ua : "");
	}
	return q;
}

/* ---------------------------------------------------------------------
 * Streaming: forward whole server-sent events, remember emitted text
 * ------------------------------------------------------------------- */

/* Notes what a chunk of a one-sequence stream carried: the token ids the
 * client now has (a resume sends them back as generated_ids), whether a
 * chunk came without them (then the stream cannot be resumed exactly), and
 * the finish. */
static void note_chunk(gw_req_t *q, const char *data, size_t len)
{
	if (!q->single)
		return;
	json_t *j = json_loadb(data, len, 0, NULL);
	json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
	if (!c0) {
		json_decref(j); /* the usage chunk, or not a chunk at all */
		return;
	}
	const char *t = json_string_value(json_object_get(c0, "text"));
	if (!t)
		t = json_string_value(json_object_get(json_object_get(c0, "delta"), "content"));
	if (t && *t)
		q->ntok++;
	json_t *ids = json_object_get(c0, "token_ids");
	if (q->be)
		sc__gw_stats_tokens_add(q->be->stats,
		                        json_is_array(ids) ? json_array_size(ids) : t && *t);
	if (json_is_array(ids) && json_array_size(q->ids) < 65536) {
		if (!q->ids)
			q->ids = sc_xcheck(json_array());
		json_array_extend(q->ids, ids);
	} else if (t && *t) {
		q->no_ids = 1; /* an OpenAI backend's chunk: text without ids */
	}
	if (json_is_string(json_object_get(c0, "finish_reason")))
		q->saw_finish = 1;
	json_decref(j);
}

static int start_client_stream(gw_req_t *q)
{
	set_headers(q, q->be);
	sc_http_stream_start(q->hr, 200, "text/event-stream", on_client_gone, q);
	q->started = 1;
	q->ttft_ns = uv_hrtime();
	return 0;
}

/* Sends one complete event (with its blank line) to the client. */
static int forward_event(gw_req_t *q, const char *ev, size_t len)
{
	const char *d;
	size_t dl;
	if (sc_sse_data(ev, len, &d, &dl)) {
		if (sc_sse_is_done(d, dl))
			q->saw_done = 1;
		else
			note_chunk(q, d, dl);
	}
	if (!q->hr)
		return 1;
	if (!q->started)
		start_client_stream(q);
	if (sc_http_stream_write(q->hr, ev, len) < 0)
		return 1;
	return 0;
}

static int pump_events(gw_req_t *q)
{
	for (;;) {
		size_t n = sc_sse_next(q->sse.data, q->sse.len);
		if (!n)
			return 0;
		if (forward_event(q, q->sse.data, n))
			return 1;
		sc_buf_consume(&q->sse, n);
	}
}

/* ---------------------------------------------------------------------
 * Upstream callbacks
 * ------------------------------------------------------------------- */

static int is_event_stream(sc_hcli_req_t *up)
{
	const char *ct = sc_hcli_header(up, "content-type");
	return ct && strstr(ct, "text/event-stream");
}

static int retryable_status(int s)
{
	return s == 502 || s == 503 || s == 504 || s < 0;
}

/* An answer whose status and headers are final and that would not be
 * retried whatever its body (KServe and pass-through answers, errors other
 * than 502/503/504) is forwarded as it arrives once it is big: holding it
 * buys nothing. Small ones are held and sent with one write; OpenAI 200s
 * are always held, to be checked for choices before anything goes out. */
#define GW_PASSTHRU_MIN (64u << 10)

static int passthru_wanted(const gw_req_t *q, sc_hcli_req_t *up, int status)
{
	if (q->stream || q->pd || !q->hr || retryable_status(status))
		return 0;
	if (status == 200 && (q->kind == GW_K_COMPL || q->kind == GW_K_CHAT))
		return 0;
	const char *cl = sc_hcli_header(up, "content-length");
	uint64_t len = 0; /* unreadable: 0, small enough to buffer */
	if (!cl)
		return 1;
	sc_parse_u64(cl, 0, UINT64_MAX, &len);
	return len > GW_PASSTHRU_MIN;
}

static int up_head(sc_hcli_req_t *up, int status, void *ud)
{
	gw_req_t *q = ud;
	q->up_status = status;
	const char *ct = sc_hcli_header(up, "content-type");
	size_t cl = ct ? strnlen(ct, sizeof(q->up_ctype) - 1) : 0;
	memcpy(q->up_ctype, ct ? ct : "", cl);
	q->up_ctype[cl] = '\0';
	const char *ih = sc_hcli_header(up, "inference-header-content-length");
	snprintf(q->up_ihcl, sizeof(q->up_ihcl), "%s", ih && strlen(ih) < 20 ? ih : "");
	q->passthru = passthru_wanted(q, up, status);
	return 0;
}

/* Forwards a piece of a pass-through answer; non-zero when the client is
 * gone or cannot keep up. */
static int passthru_write(gw_req_t *q, const char *d, size_t n)
{
	if (!q->hr)
		return 1;
	if (!q->started) {
		/* A replica's heartbeat (blanks before a late JSON answer) is not
		 * forwarded: until real bytes come the attempt stays retryable. */
		while (n && strchr(" \t\r\n", *d))
			d++, n--;
		if (!n)
			return 0;
		set_headers(q, q->be);
		sc_http_stream_start(q->hr, q->up_status,
		                     q->up_ctype[0] ? q->up_ctype : "application/json",
		                     on_client_gone, q);
		q->started = 1;
		q->ttft_ns = uv_hrtime();
	}
	return sc_http_stream_write(q->hr, d, n) < 0;
}

/* The end of a pass-through answer that has started: a clean end ends the
 * client's answer, a broken one cuts the client connection. */
static void passthru_done(gw_req_t *q, int err)
{
	int broken = err < 0;
	sc__gw_attempt_end(q, broken || q->up_status >= 500);
	int status = broken ? 502 : q->up_status;
	if (q->hr && broken)
		sc_http_abort(q->hr);
	else if (q->hr)
		sc_http_stream_end(q->hr);
	else
		status = 499;
	q->hr = NULL;
	req_account(q, status);
	req_release(q);
}

static int up_data(sc_hcli_req_t *up, const char *d, size_t n, void *ud)
{
	gw_req_t *q = ud;
	if (q->stream && q->up_status == 200 && is_event_stream(up)) {
		if (sc_buf_append(&q->sse, d, n) < 0)
			return 1;
		return 0;
	}
	if (sc_buf_append(&q->resp, d, n) < 0)
		q->up_status = -1; /* over the limit: a failed attempt */
	return 0;
}

/* Has a streamed attempt sent whole events? Then pump them (in on_data
 * the request must not end, so pumping is done here and in up_done). */
static int up_data_stream(sc_hcli_req_t *up, const char *d, size_t n, void *ud)
{
	gw_req_t *q = ud;
	int gone = q->passthru ? passthru_write(q, d, n) : up_data(up, d, n, ud);
	if (gone && !q->passthru)
		return 1;
	if (gone || (q->stream && q->sse.len && pump_events(q))) {
		/* The client is gone or cannot keep up: end it all.
		 * req_release cancels the upstream request (its on_done
		 * runs there and finds q closed). */
		if (!q->closed) {
			sc__gw_attempt_end(q, 0);
			if (q->hr && q->passthru)
				sc_http_abort(q->hr);
			else if (q->hr)
				sc_http_stream_end(q->hr);
			q->hr = NULL;
			req_account(q, 499);
			req_release(q);
		}
		return 1;
	}
	return 0;
}

static int valid_answer(gw_req_t *q)
{
	if (q->resp.len == 0)
		return 0;
	if (q->kind != GW_K_COMPL && q->kind != GW_K_CHAT)
		return 1;
	/* Only "choices" matters: a validating scan, no tree. */
	static const char *const keys[] = {"choices"};
	sc_jval_t v;
	size_t nc = 0;
	int same;
	if (sc_jscan_object(q->resp.data, q->resp.len, keys, 1, &v) < 0 ||
	    sc_jscan_array(&v, &nc, &same) < 0)
		return 0;
	return nc > 0;
}

/* Finishes the attempt's bookkeeping: replica load, ejection, canary. */
void sc__gw_attempt_end(gw_req_t *q, int failed)
{
	gw_backend_t *b = q->be;
	if (!q->held)
		return;
	q->held = 0;
	sc__gw_backend_wait_del(b, &q->wait);
	double secs = since(q->att_ns);
	sc__gw_backend_result(q->gw, b, !failed);
	/* A request counts once for the version that served it, at its
	 * decode; a failed prefill counts too: the request failed there. */
	if (b->role != GW_ROLE_PREFILL || failed)
		sc__gw_rollout_observe(q->gw, q->model, b->version, failed, secs);
	if (sc__gw_span_wanted(q->gw, &q->att))
		sc__gw_attempt_span(q, b, failed);
	b->inflight--;
	sc__gw_stats_inflight(b->stats, -1);
	if (q->in_retry) {
		q->in_retry = 0;
		q->gw->active_retries--;
	}
}

/* A streamed attempt broke after events went out. Once every choice has
 * finished only [DONE] was missing: end the stream. Otherwise a stream of
 * one sequence whose chunks carried their token ids continues on another
 * replica from those ids (the worker feeds them after the prompt without
 * sending them again, so the client's stream is the one an unbroken answer
 * gives); anything else ends with an error event. */
static void resume_or_fail(gw_req_t *q)
{
	if (q->saw_finish && q->single) {
		sc_http_stream_write(q->hr, "data: [DONE]\n\n", 14);
		sc_http_stream_end(q->hr);
		q->hr = NULL;
		req_account(q, 200);
		req_release(q);
		return;
	}
	int resumable =
	    sc__gw_req_json(q) != NULL && q->single && !q->no_ids && q->be->kind == GW_BK_STARCLOUD;
	if (resumable && q->resumes < q->gw->o.max_retries + 1 && sc__gw_may_retry(q)) {
		q->resumes++;
		sc_log_warn("stream from %s broke after %zu tokens; continuing elsewhere",
		            q->be->id, json_array_size(q->ids));
		sc__gw_attempt(q);
		return;
	}
	sc__gw_fail(q, 502, "upstream_error", NULL, "the stream broke and could not be continued");
}

/* A streamed attempt that already sent events ended: flush what is
 * whole; a clean end finishes the request, a broken one resumes. */
static void stream_done(gw_req_t *q, int err)
{
	int broken = err < 0 || q->up_status != 200;
	if (!broken)
		pump_events(q);
	if (!q->hr) {
		sc__gw_attempt_end(q, broken);
		req_account(q, 499);
		req_release(q);
		return;
	}
	if (!broken && (q->saw_done || q->sse.len == 0)) {
		sc__gw_attempt_end(q, 0);
		sc_http_stream_end(q->hr);
		q->hr = NULL;
		req_account(q, 200);
		req_release(q);
		return;
	}
	sc__gw_attempt_end(q, 1);
	sc_buf_reset(&q->sse);
	resume_or_fail(q);
}

/* A replica's 404 that says the model (version) is not served there. */
static int model_gone(const gw_req_t *q)
{
	if (!q->resp.len || q->resp.len > 4096)
		return 0;
	json_t *j = json_loadb(q->resp.data, q->resp.len, 0, NULL);
	const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
	int gone = code && strcmp(code, "model_not_found") == 0;
	json_decref(j);
	return gone;
}

static void up_done(sc_hcli_req_t *up, int err, void *ud)
{
	gw_req_t *q = ud;
	if (q->closed)
		return; /* req_release cancelled the attempt: nothing is left to do */
	q->up = NULL;
	/* SC_ECANCELED here: up_data_stream stopped a buffered answer over
	 * the limit, a failed attempt like any other. */
	q->free_retry = err < 0 && up && !sc_hcli_reached(up);
	if (q->passthru && q->started) {
		passthru_done(q, err);
		return;
	}
	if (err < 0)
		q->up_status = err == SC_ELIMIT ? 504 : -1;
	if (q->started) {
		stream_done(q, err);
		return;
	}
	int failed = err < 0 || q->up_status >= 500 || q->up_status < 0;
	int retry = retryable_status(q->up_status);
	if (!failed && q->up_status == 200 && !q->stream && !valid_answer(q)) {
		failed = retry = 1;
		q->up_status = 502;
		snprintf(q->last_err, sizeof(q->last_err), "replica %s sent an empty answer",
		         q->be->id);
	}
	if (q->up_status == 404 && !q->pd && model_gone(q) && q->hr) {
		/* The replica no longer serves the model: a repository unload the
		 * gateway has not polled yet. Another replica may; this one is
		 * not at fault. Its own 404 is the answer when none does. */
		sc__gw_attempt_end(q, 0);
		if (sc__gw_may_retry(q))
			sc__gw_attempt(q);
		else
			sc__gw_relay(q);
		return;
	}
	if (q->pd_ops && q->pd_ops->kv_gone(q)) {
		/* Not the decode replica's fault: the KV it was sent is gone. */
		sc__gw_attempt_end(q, 0);
		q->pd_ops->kv_lost(q);
		return;
	}
	if (q->stream && q->up_status == 200 && !q->started &&
	    strstr(q->up_ctype, "text/event-stream")) {
		/* A stream that ended before its first event is a failure. */
		failed = retry = 1;
		snprintf(q->last_err, sizeof(q->last_err), "replica %s ended the stream early",
		         q->be->id);
	}
	sc__gw_attempt_end(q, failed);
	if (failed) {
		q->last_status = q->up_status > 0 ? q->up_status : 502;
		if (!q->last_err[0] || err < 0)
			snprintf(q->last_err, sizeof(q->last_err), "replica %s: %s", q->be->id,
			         err < 0 ? sc_strerror(err) : "upstream error");
	}
	if (failed && q->hr && sc__gw_canary_fallback(q))
		return;
	if (!failed || !retry) {
		if (!q->hr)
			return;
		sc__gw_relay(q);
		return;
	}
	if (sc__gw_may_retry(q)) {
		sc__gw_attempt(q);
		return;
	}
	sc__gw_fail(q, q->last_status == 504 ? 504 : 502,
	            q->last_status == 504 ? "upstream_timeout" : "upstream_error", NULL,
	            q->last_err);
}

/* ---------------------------------------------------------------------
 * Attempts
 * ------------------------------------------------------------------- */

/* Envoy's retry with the previous-hosts predicate, across a rollout: a
 * canary that fails a request (connection error, attempt timeout, any 5xx)
 * before a byte reached the client has it tried once on the stable version,
 * so a bad canary costs its clients latency, not errors. The failure has
 * been counted against the canary already (sc__gw_attempt_end): the
 * analysis still sees it. A pinned version is the client's choice and is
 * never changed; the request's deadline still ends it (--timeout). */
int sc__gw_canary_fallback(gw_req_t *q)
{
	if (q->fell_back || q->pinned || q->started || !q->hr || !q->be)
		return 0;
	const char *v =
	    sc__gw_rollout_fallback(q->gw, q->model, q->be->version, q->pd ? -1 : q->role);
	if (!v || !sc__gw_may_retry(q))
		return 0;
	sc_log_info("request for %s failed on canary %s (%s); trying stable %s", q->model,
	            q->be->version, q->last_err[0] ? q->last_err : "upstream error", v);
	q->fell_back = 1;
	snprintf(q->version, sizeof(q->version), "%s", v);
	q->rollout_chosen = 0;
	q->ntried = 0;
	if (!q->pd) {
		sc__gw_attempt(q);
		return 1;
	}
	/* The canary's KV cache means nothing to the stable decoders. */
	q->pd_ops->restart(q);
	return 1;
}

static gw_backend_t *pick_for(gw_req_t *q, int *why)
{
	gw_pick_t p = {
	    .model = q->model,
	    .version = q->version[0] ? q->version : NULL,
	    .role = q->role,
	    .kserve = q->kind == GW_K_INFER || q->kind == GW_K_PASS,
	    .tried = q->tried,
	    .ntried = q->ntried,
	};
	gw_backend_t *b = sc__gw_pick(q->gw, &p, why);
	if (!b && q->rollout_chosen && *why != 404) {
		/* The rollout's version has no usable replica left: any other
		 * version of the model is better than failing the request. */
		p.version = NULL;
		b = sc__gw_pick(q->gw, &p, why);
	}
	if (!b && q->ntried > 0 && *why == 503) {
		/* Every replica was tried: allow a second go on the least bad. */
		p.ntried = 0;
		b = sc__gw_pick(q->gw, &p, why);
	}
	return b;
}

static void attempt_send(gw_req_t *q, gw_backend_t *b)
{
	/* Both strings are bounded by their parts' sizes; built without
	 * printf, as this runs for every attempt. */
	char url[GW_MAX_URL + sizeof(q->path)], hdrs[192];
	size_t ul = strlen(b->url), pl = strlen(q->path);
	memcpy(url, b->url, ul);
	memcpy(url + ul, q->path, pl + 1);
	sc__gw_span_child(q->gw, &q->root, &q->att);
	static const char tph[] = "traceparent: ", acc[] = "Accept: text/event-stream\r\n";
	memcpy(hdrs, tph, sizeof(tph) - 1);
	sc__gw_traceparent(&q->att, hdrs + sizeof(tph) - 1);
	memcpy(hdrs + sizeof(tph) - 1 + 55, "\r\n", 3);
	if (q->stream)
		memcpy(hdrs + sizeof(tph) - 1 + 57, acc, sizeof(acc));
	if (q->ihcl[0]) {
		size_t at = strlen(hdrs);
		snprintf(hdrs + at, sizeof(hdrs) - at, "Inference-Header-Content-Length: %s\r\n",
		         q->ihcl);
	}
	size_t blen = 0;
	char *body = NULL;
	const char *send = NULL;
	if (strcmp(q->method, "POST") == 0 && sc__gw_body_verbatim(q)) {
		send = q->raw; /* the common case: no copy, no re-serializing */
		blen = q->rawlen;
	} else if (strcmp(q->method, "POST") == 0) {
		send = body = sc__gw_body_for_attempt(q, &blen);
	}
	sc_hcli_call_t call = {
	    .method = q->method,
	    .url = url,
	    .headers = hdrs,
	    .body = send,
	    .body_len = blen,
	    .ctype = q->ihcl[0] ? "application/octet-stream" : NULL,
	    .timeout_ms = q->gw->o.attempt_timeout_ms,
	    .idle_timeout_ms = q->gw->o.idle_timeout_ms,
	    .cbs = {.on_head = up_head, .on_data = up_data_stream, .on_done = up_done},
	    .ud = q,
	};
	/* A first attempt starts in the callback that took the request in:
	 * its clock reading serves (one clock read less per request). */
	q->att_ns = q->attempts == 1 && q->prefill_attempts == 0 ? q->t0_ns : uv_hrtime();
	q->up_status = 0;
	q->passthru = 0;
	sc_buf_reset(&q->resp);
	sc_buf_reset(&q->sse);
	q->saw_done = 0;
	int rc = sc_hcli_start(q->gw->hc, &call, &q->up);
	free(body);
	if (rc < 0) {
		q->up = NULL;
		up_done(NULL, SC_EIO, q);
	}
}

/* A first attempt that finds no replica of an autoscaled model waits for
 * one (scale from zero, a replica on its way) instead of failing: it stays
 * in the request list with its deadline (--timeout: the activation
 * timeout too), and sc__gw_proxy_wake tries it again when the replicas
 * change. Saturation (429) is not waited out: shedding is the answer. */
static int hold(gw_req_t *q, int why)
{
	sc_gw_t *gw = q->gw;
	if (q->attempts || q->prefill_attempts || q->pd || (why != 404 && why != 503) ||
	    !gw->may_hold || !gw->may_hold(gw, q->model))
		return 0;
	q->waiting = 1;
	gw->waiting++;
	if (gw->held)
		gw->held(gw, q->model);
	return 1;
}

size_t sc__gw_proxy_held(sc_gw_t *gw, const char *model)
{
	size_t n = 0;
	if (!gw->waiting)
		return 0;
	for (gw_req_t *q = gw->reqs; q; q = q->next)
		n += q->waiting && (!model || strcmp(q->model, model) == 0);
	return n;
}

void sc__gw_proxy_wake(sc_gw_t *gw)
{
	if (!gw->waiting)
		return;
	/* Oldest first; a request answered now leaves the list, one held
	 * again stays, and a pipelined request started by an answer joins at
	 * the head, which this walk has passed. */
	for (gw_req_t *q = gw->reqs_tail, *prev; q; q = prev) {
		prev = q->prev;
		if (!q->waiting)
			continue;
		q->waiting = 0;
		gw->waiting--;
		sc__gw_attempt(q);
	}
}

void sc__gw_attempt(gw_req_t *q)
{
	int why = 503;
	gw_backend_t *b = pick_for(q, &why);
	if (!b && hold(q, why))
		return;
	if (!b) {
		if (q->attempts == 0 && why == 429) {
			sc__gw_stats_shed(sc__gw_stats(q->gw, q->model, q->version));
			q->gw->shed++;
			sc__gw_fail(q, 429, "overloaded", NULL,
			            "every replica is saturated; retry later");
		} else if (q->attempts == 0 && why == 404) {
			sc__gw_fail(q, 404, "model_not_found", "model", "no such model or version");
		} else if (q->attempts == 0) {
			sc__gw_fail(q, 503, "no_replica", NULL, "no ready replica for this model");
		} else {
			sc__gw_fail(q, q->last_status == 504 ? 504 : 502,
			            q->last_status == 504 ? "upstream_timeout" : "upstream_error",
			            NULL,
			            q->last_err[0] ? q->last_err : "no replica left to retry on");
		}
		return;
	}
	sc__gw_attempt_take(q, b);
	q->attempts++;
	attempt_send(q, b);
}

void sc__gw_attempt_take(gw_req_t *q, gw_backend_t *b)
{
	if (q->attempts + q->prefill_attempts > 0) {
		q->in_retry = 1;
		q->gw->active_retries++;
		sc__gw_stats_retry(b->stats);
	}
	if (q->ntried < GW_MAX_TRIED)
		q->tried[q->ntried++] = b;
	q->be = b;
	q->held = 1;
	b->inflight++;
	sc__gw_stats_inflight(b->stats, 1);
}
