/* Asynchronous HTTP client: libcurl multi driven by libuv (see httpc.h).
 *
 * libcurl tells us which sockets to watch (socket callback) and when to wake
 * it up (timer callback); we translate those into uv_poll and uv_timer
 * handles and call curl_multi_socket_action() when they fire. Finished
 * transfers are collected with curl_multi_info_read() after each action,
 * outside libcurl's callbacks, so done() may start or cancel requests. */
#include "net/httpc.h"
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "starcloud/buf.h"
#include "starcloud/error.h"

#define DEFAULT_MAX_BODY (4u << 20)

typedef struct sock_ctx {
	uv_poll_t poll;
	curl_socket_t fd;
	sc_httpc_t *c;
	struct sock_ctx *next, *prev;
} sock_ctx_t;

struct sc_httpc_req {
	sc_httpc_t *c;
	CURL *h;
	struct curl_slist *hdrs;
	char *body;
	sc_buf_t out;
	sc_httpc_data_fn on_data;
	sc_httpc_done_fn done;
	void *ud;
	int cancelled;
	int too_big;
	struct sc_httpc_req *next, *prev;
};

struct sc_httpc {
	uv_loop_t *loop;
	CURLM *m;
	uv_timer_t timer;
	sc_httpc_req_t *reqs;
	sock_ctx_t *socks;
	int in_action;               /* inside curl_multi_socket_action */
	const char *user_agent;      /* borrowed (a literal); NULL: none */
	const char *ca, *cert, *key; /* borrowed TLS settings, or NULL */
};

/* ---- requests ---------------------------------------------------------- */

static void req_unlink(sc_httpc_req_t *r)
{
	sc_httpc_t *c = r->c;
	if (r->prev)
		r->prev->next = r->next;
	else
		c->reqs = r->next;
	if (r->next)
		r->next->prev = r->prev;
}

static void req_free(sc_httpc_req_t *r)
{
	curl_multi_remove_handle(r->c->m, r->h);
	curl_easy_cleanup(r->h);
	curl_slist_free_all(r->hdrs);
	free(r->body);
	sc_buf_free(&r->out);
	req_unlink(r);
	free(r);
}

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
	sc_httpc_req_t *r = ud;
	size_t len = size * n;
	if (r->cancelled)
		return 0;
	if (r->on_data) {
		int rc = r->on_data(p, len, r->ud);
		return (rc < 0 || r->cancelled) ? 0 : len;
	}
	if (sc_buf_append(&r->out, p, len) < 0) {
		r->too_big = 1;
		return 0;
	}
	return len;
}

/* Collects finished transfers and reports them. */
static void check_done(sc_httpc_t *c)
{
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(c->m, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		sc_httpc_req_t *r = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
		long code = 0;
		curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &code);
		int status = msg->data.result == CURLE_OK ? (int)code
		             : r->too_big                 ? SC_ETOOBIG
		                                          : SC_EIO;
		sc_httpc_done_fn done = r->cancelled ? NULL : r->done;
		void *ud = r->ud;
		/* Detach the body before freeing so done() may cancel or start
		 * requests freely. */
		size_t len = 0;
		char *body = sc_buf_steal(&r->out, &len);
		req_free(r);
		if (done)
			done(status, body ? body : "", len, ud);
		free(body);
	}
}

/* ---- libcurl <-> libuv glue -------------------------------------------- */

static void socket_action(sc_httpc_t *c, curl_socket_t fd, int flags)
{
	int running;
	c->in_action++;
	curl_multi_socket_action(c->m, fd, flags, &running);
	c->in_action--;
	check_done(c);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
	sock_ctx_t *s = p->data;
	int flags = 0;
	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	socket_action(s->c, s->fd, flags);
}

static void on_sock_closed(uv_handle_t *h)
{
	free(h->data);
}

static void sock_close(sc_httpc_t *c, sock_ctx_t *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		c->socks = s->next;
	if (s->next)
		s->next->prev = s->prev;
	uv_poll_stop(&s->poll);
	uv_close((uv_handle_t *)&s->poll, on_sock_closed);
}

static int on_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
	sc_httpc_t *c = userp;
	sock_ctx_t *s = socketp;
	if (what == CURL_POLL_REMOVE) {
		if (s) {
			curl_multi_assign(c->m, fd, NULL);
			sock_close(c, s);
		}
		return 0;
	}
	if (!s) {
		s = sc_xcalloc(1, sizeof(*s));
		s->fd = fd;
		s->c = c;
		s->poll.data = s;
		if (uv_poll_init_socket(c->loop, &s->poll, fd) < 0) {
			free(s);
			return -1;
		}
		s->next = c->socks;
		if (c->socks)
			c->socks->prev = s;
		c->socks = s;
		curl_multi_assign(c->m, fd, s);
	}
	int ev =
	    ((what & CURL_POLL_IN) ? UV_READABLE : 0) | ((what & CURL_POLL_OUT) ? UV_WRITABLE : 0);
	uv_poll_start(&s->poll, ev, on_poll);
	return 0;
}

static void on_timeout(uv_timer_t *t)
{
	socket_action(t->data, CURL_SOCKET_TIMEOUT, 0);
}

static int on_timer(CURLM *m, long timeout_ms, void *userp)
{
	sc_httpc_t *c = userp;
	if (timeout_ms < 0)
		uv_timer_stop(&c->timer);
	else
		uv_timer_start(&c->timer, on_timeout, (uint64_t)timeout_ms, 0);
	return 0;
}

/* ---- public ------------------------------------------------------------ */

void sc_httpc_set_user_agent(sc_httpc_t *c, const char *ua)
{
	c->user_agent = ua;
}

sc_httpc_t *sc_httpc_new(uv_loop_t *loop)
{
	static int inited;
	if (!inited++)
		curl_global_init(CURL_GLOBAL_DEFAULT);
	sc_httpc_t *c = sc_xcalloc(1, sizeof(*c));
	c->loop = loop;
	c->m = curl_multi_init();
	if (!c->m) {
		free(c);
		return NULL;
	}
	uv_timer_init(loop, &c->timer);
	c->timer.data = c;
	curl_multi_setopt(c->m, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(c->m, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->m, CURLMOPT_TIMERFUNCTION, on_timer);
	curl_multi_setopt(c->m, CURLMOPT_TIMERDATA, c);
	return c;
}

static void on_timer_closed(uv_handle_t *h)
{
	free(h->data);
}

void sc_httpc_set_tls(sc_httpc_t *c, const char *ca, const char *cert, const char *key)
{
	c->ca = ca;
	c->cert = cert;
	c->key = key;
}

void sc_httpc_free(sc_httpc_t *c)
{
	if (!c)
		return;
	while (c->reqs)
		req_free(c->reqs);
	while (c->socks)
		sock_close(c, c->socks);
	curl_multi_cleanup(c->m);
	uv_close((uv_handle_t *)&c->timer, on_timer_closed);
}

/* Returns -1 when a header does not fit (a token longer than any real one:
 * service-account JWTs are 1-2 KiB). */
static int set_headers(sc_httpc_req_t *r, const sc_httpc_opts_t *o)
{
	char auth[8192];
	if (o->token && o->token[0]) {
		if ((size_t)snprintf(auth, sizeof(auth), "Authorization: Bearer %s", o->token) >=
		    sizeof(auth))
			return -1;
		r->hdrs = curl_slist_append(r->hdrs, auth);
	}
	if (o->body) {
		snprintf(auth, sizeof(auth), "Content-Type: %s",
		         o->content_type ? o->content_type : "application/json");
		r->hdrs = curl_slist_append(r->hdrs, auth);
	}
	if (o->accept) {
		snprintf(auth, sizeof(auth), "Accept: %s", o->accept);
		r->hdrs = curl_slist_append(r->hdrs, auth);
	}
	r->hdrs = curl_slist_append(r->hdrs, "Expect:");
	curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, r->hdrs);
	return 0;
}

static void set_tls(CURL *h, const sc_httpc_tls_t *t)
{
	if (t->ca_pem) {
		struct curl_blob b = {(void *)t->ca_pem, t->ca_len, CURL_BLOB_COPY};
		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
	} else if (t->ca_file) {
		curl_easy_setopt(h, CURLOPT_CAINFO, t->ca_file);
	}
	if (t->cert_pem && t->key_pem) {
		struct curl_blob c = {(void *)t->cert_pem, t->cert_len, CURL_BLOB_COPY};
		struct curl_blob k = {(void *)t->key_pem, t->key_len, CURL_BLOB_COPY};
		curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &c);
		curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &k);
		curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
	}
	if (t->insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
}

void sc_httpc_set_max_host_connections(sc_httpc_t *c, long n)
{
	curl_multi_setopt(c->m, CURLMOPT_MAX_HOST_CONNECTIONS, n);
}

sc_httpc_req_t *sc_httpc_start(sc_httpc_t *c, const sc_httpc_opts_t *o)
{
	sc_httpc_req_t *r = sc_xcalloc(1, sizeof(*r));
	r->c = c;
	r->h = curl_easy_init();
	if (!r->h) {
		free(r);
		return NULL;
	}
	r->on_data = o->on_data;
	r->done = o->done;
	r->ud = o->ud;
	sc_buf_init(&r->out, o->max_body ? o->max_body : DEFAULT_MAX_BODY);
	CURL *h = r->h;
	curl_easy_setopt(h, CURLOPT_URL, o->url);
	curl_easy_setopt(h, CURLOPT_PRIVATE, (char *)r);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (c->user_agent)
		curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
	if (c->ca)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->ca);
	if (c->cert && c->key) {
		curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert);
		curl_easy_setopt(h, CURLOPT_SSLKEY, c->key);
	}
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 5L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 2L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
	                 o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 2000L);
	if (o->timeout_ms > 0)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, o->timeout_ms);
	if (o->stall_s > 0) {
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, o->stall_s);
	}
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, o->method ? o->method : "GET");
	if (o->body) {
		r->body = sc_xmalloc(o->body_len + 1);
		memcpy(r->body, o->body, o->body_len);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)o->body_len);
	}
	if (o->tls)
		set_tls(h, o->tls);
	if (o->multiplex)
		curl_easy_setopt(h, CURLOPT_PIPEWAIT, 1L);
	r->next = c->reqs;
	if (c->reqs)
		c->reqs->prev = r;
	c->reqs = r;
	if (set_headers(r, o) < 0) {
		req_free(r);
		return NULL;
	}
	if (curl_multi_add_handle(c->m, h) != CURLM_OK) {
		req_free(r);
		return NULL;
	}
	return r;
}

void sc_httpc_cancel(sc_httpc_req_t *r)
{
	if (!r)
		return;
	r->cancelled = 1;
	/* Inside libcurl's callbacks the handle may not be removed; the write
	 * callback then fails the transfer and check_done() frees it quietly. */
	if (!r->c->in_action)
		req_free(r);
}
