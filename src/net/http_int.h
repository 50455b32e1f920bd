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
#include "net/tls.h"
#include "starcloud/buf.h"

#define MAX_ROUTES 64
#define MAX_HEADERS 64
/* Unsent output a stream may pile up before it is cut off: a watcher that
 * does not read must not grow the server's memory without bound. */
#define MAX_PENDING_OUT (8u << 20)
/* A producer waiting in sc_http_stream_on_drain resumes below this. */
#define DRAIN_LOW (256u << 10)
/* Per-client connection counts: buckets of the address hash. */
#define CLIENT_BUCKETS 256

/* One source address and how many of the server's connections it holds
 * (those still doing work: lingering ones are not counted). */
typedef struct client {
	struct client *next;
	unsigned char addr[16]; /* IPv6, or IPv4-mapped */
	size_t nconns;
} client_t;

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
	int listen_err;  /* libuv's code when sc_http_listen failed */
	int batching;    /* hold output until sc_http_flush (group commit) */
	size_t nholding; /* connections with held output */
	/* With batching: the revision an answer written now may show (the
	 * newest write taken); NULL: every answer waits for sc_http_flush. */
	int64_t (*current_rev)(void *ud);
	void *rev_ud;
	int64_t durable;         /* answers showing revisions up to this leave at once */
	sc_http_handler_fn gate; /* flow control: complete requests go here */
	void *gate_ud;
	size_t nactive; /* connections counted against the caps */
	client_t *clients[CLIENT_BUCKETS];
	uint64_t tick_ms; /* the connection timers' longest sleep */
	/* http.c's, for the output side (http_out.c), which would otherwise
	 * import the file that imports it: close at once; stop counting and
	 * close after ms, discarding input; parse the next buffered request. */
	void (*conn_close)(struct conn *c);
	void (*conn_linger)(struct conn *c, uint64_t ms);
	void (*conn_process)(struct conn *c);
	sc_http_stats_t st;
	sc_tls_ctx_t *tls; /* borrowed; NULL: plain HTTP */
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
	int64_t
	    dep_rev; /* the revision this answer shows at most (sc_http_answer_rev); 0: current */
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
	uint64_t last_active; /* loop time the last request ended (idle limit) */
	uint64_t req_begin;   /* loop time the current request's first byte came; 0: none */
	uint64_t head_at;     /* loop time its head was complete; 0: not yet */
	int got_bytes;        /* any input since accept */
	client_t *client;     /* its source address; NULL once not counted */
	unsigned char addr[16];
	char peer[48]; /* addr as text */
	sc_buf_t held; /* output held until the next sc_http_flush */
	int holding;
	int64_t held_rev;    /* the newest revision the held output may show */
	size_t held_writes;  /* writes in held */
	size_t held_answers; /* of them, whole answers (sc_http_respond) */
	sc_tls_t *tls;       /* the session, when the server speaks TLS */
	int shutdown_after_flush;
} conn_t;

typedef struct write_req {
	uv_write_t w;
	conn_t *c;
	size_t len;
	/* A shared write (sc_http_stream_write_shared): rel(ref) once the
	 * bytes it points to are no longer needed; data[] then holds only the
	 * small copied parts around them. */
	sc_http_release_fn rel;
	void *ref;
	char data[];
} write_req_t;

/* ---- http_limits.c: caps on connections ---- */
/* Counts c (just accepted) against the caps: over the per-client cap the
 * client's oldest idle connection must close to make room (victims[0]),
 * over the total cap the oldest idle one of any client (victims[1]): the
 * caller closes them. Returns 0, or 429 / 503 (msg filled) when nothing
 * can make room and c must be refused. */
int sc__http_admit(sc_http_server_t *s, conn_t *c, conn_t *victims[2], char *msg, size_t msgsz);
/* ---- http_out.c ---- */
/* Queues parts (copied) for c: at once, or held for sc_http_flush. */
int sc__http_write(conn_t *c, const uv_buf_t *parts, size_t nparts);
/* Puts the ciphertext c's TLS session has ready (records, handshake
 * messages) on the socket. 0, or SC_EIO when the peer is gone. */
int sc__http_tls_flush(conn_t *c);
/* Stops counting c (closing, or lingering after an error answer). */
void sc__http_uncount(conn_t *c);
/* Frees the per-client table (server close). */
void sc__http_clients_free(sc_http_server_t *s);
/* Answers an error on c (not parsed into a request) and closes it after
 * the answer, discarding input meanwhile, or after linger_ms. */
void sc__http_refuse(conn_t *c, int status, const char *reason, const char *msg,
                     uint64_t linger_ms);

#endif
