/* Private to the HTTP server (src/net/http.c, http_req.c): the server,
 * connection and request objects. Daemons see them only through
 * net/http.h. */
#ifndef SC_NET_HTTP_INT_H
#define SC_NET_HTTP_INT_H

#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>
#include <uv.h>

#include "net/http.h"
#include "starcloud/buf.h"

#define MAX_ROUTES 64
#define MAX_HEADERS 64
/* Unsent output a stream may pile up before it is cut off: a watcher that
 * does not read must not grow the server's memory without bound. */
#define MAX_PENDING_OUT (8u << 20)
/* A producer waiting in sc_http_stream_on_drain resumes below this. */
#define DRAIN_LOW (256u << 10)

typedef struct route {
	char *method;
	char *prefix;
	size_t plen;
	sc_http_handler_fn fn;
	void *ud;
} route_t;

struct sc_http_server {
	uv_loop_t *loop;
	uv_tcp_t listener;
	sc_http_limits_t lim;
	route_t routes[MAX_ROUTES];
	size_t nroutes;
	sc_http_observer_fn observer;
	void *observer_ud;
	struct conn *conns; /* doubly linked list of open connections */
	size_t nconns;
	int port;
	int closing;
	int listener_open;
	int batching;    /* hold output until sc_http_flush (group commit) */
	size_t nholding; /* connections with held output */
};

/* What the parser reported last, to join split header fields/values. */
enum { HDR_NONE, HDR_FIELD, HDR_VALUE };
/* Why parsing stopped with an error of our own. */
enum { ERR_NONE, ERR_HEADERS, ERR_BODY };

struct sc_http_req {
	struct conn *conn;
	char method[16];
	sc_buf_t url; /* path and query, NUL between them once parsed */
	char *query;
	sc_buf_t hdrs; /* "name\0value\0" pairs */
	size_t hdr_off[MAX_HEADERS][2];
	size_t nhdrs;
	int hdr_state;
	sc_buf_t body;
	const char *route;
	uint64_t start_ns;
	int streaming;
	int status;
	sc_http_close_fn on_close;
	void *close_ud;
	sc_http_drain_fn on_drain; /* one-shot: output fell below DRAIN_LOW */
	void *drain_ud;
	char xhdrs[512]; /* extra response headers, "Name: value\r\n" each */
	size_t xlen;
};

typedef struct conn {
	uv_tcp_t tcp;
	uv_timer_t idle;
	sc_http_server_t *srv;
	struct conn *prev, *next;
	http_parser parser;
	sc_buf_t in;
	sc_http_req_t req;
	int busy;       /* a request is with its handler */
	int processing; /* inside process(): no re-entry */
	int keep_alive;
	int closing;
	int close_after; /* close once pending output is written */
	int err;         /* ERR_* */
	int reading;     /* uv_read_start is in effect */
	int lingering;   /* answered an error; discarding input until EOF */
	int broken;      /* a write failed: closes on the next loop turn */
	int mid_message; /* http_parser holds part of a request */
	uv_shutdown_t shutdown;
	size_t pending_out;
	int handles_open;
	uint64_t last_active; /* loop time of the last input (idle limit) */
	sc_buf_t held;        /* output held until the next sc_http_flush */
	int holding;
	int shutdown_after_flush;
} conn_t;

typedef struct write_req {
	uv_write_t w;
	conn_t *c;
	size_t len;
	char data[];
} write_req_t;

#endif
