/* The HTTP client's insides (net/hclient.c), shared with its response
 * parser (net/hclient_parse.c) and nothing else. */
#ifndef SC_NET_HCLIENT_INT_H
#define SC_NET_HCLIENT_INT_H

#include <http_parser.h>

#include "base/httphead.h"
#include "net/hclient.h"
#include "net/hurl.h"
#include "net/tls.h"
#include "starcloud/buf.h"

#define MAX_RESP_HEADERS 64
#define READ_SLAB (64 * 1024)
#define REQ_POOL 512
#define REQ_KEEP_BYTES (64u << 10)
#define HC_MAX_ADDRS 8 /* a name's addresses kept and tried */

typedef struct hc_conn hc_conn_t;

typedef struct hc_pool {
	char host[SC_HURL_MAX_HOST];
	char authority[SC_HURL_MAX_HOST + 10]; /* the Host header */
	int port;
	int tls;     /* https:// */
	int literal; /* host is an address (addr); else a name to resolve */
	struct sockaddr_storage addr;
	/* A name's answer (not literal): kept until addrs_until (loop time);
	 * good is the one last connected to, dialled first. */
	struct sockaddr_storage addrs[HC_MAX_ADDRS];
	size_t naddrs, good;
	uint64_t addrs_until;
	hc_conn_t *idle; /* singly linked through next_idle */
	size_t nidle;
	struct hc_pool *next;
} hc_pool_t;

struct sc_hcli {
	uv_loop_t *loop;
	sc_hcli_opts_t opts;
	hc_pool_t *pools;
	hc_conn_t *conns; /* every open connection, for sc_hcli_close */
	size_t nconns;
	sc_hcli_req_t *pool; /* finished requests kept for reuse */
	size_t npool;
	unsigned long resolves; /* names sent to the resolver (tests) */
	int closing;
	sc_tls_ctx_t *tls; /* borrowed: for https:// URLs, or NULL */
};

enum { HDR_NONE, HDR_FIELD, HDR_VALUE };

struct sc_hcli_req {
	sc_hcli_t *c;
	hc_conn_t *conn;
	hc_pool_t *pool;
	sc_buf_t out; /* the serialized request, kept for one resend */
	sc_hcli_cbs_t cbs;
	void *ud;
	uint64_t timeout_ms, idle_timeout_ms;
	int status;
	sc_buf_t hdrs; /* "name\0value\0" */
	size_t hdr_off[MAX_RESP_HEADERS][2];
	size_t nhdrs;
	int hdr_state;
	int got_bytes; /* any byte of the answer arrived */
	int reached;   /* written on an open connection */
	int resent;    /* already resent after a stale connection */
	int cancelled;
	int done; /* on_done has run (or is running) */
	int complete;
	int in_parse;             /* inside the parser: free later */
	int no_body;              /* a HEAD request: the answer's length has no body */
	uint64_t last_io;         /* loop time of the last write or read (inactivity) */
	sc_hcli_req_t *next_free; /* in sc_hcli_t.pool */
};

struct hc_conn {
	uv_tcp_t tcp;
	uv_timer_t timer;
	uv_connect_t connect;
	uv_getaddrinfo_t gai; /* a name's resolution, while `resolving` */
	sc_hcli_t *c;
	hc_pool_t *pool;
	sc_hcli_req_t *req;
	hc_conn_t *next_idle;
	hc_conn_t *prev, *next; /* all connections */
	http_parser parser;
	int connected;
	int reading;   /* uv_read_start is in effect (it stays so) */
	int resolving; /* gai is out: counts as a handle until it returns */
	int reused;
	int in_pool;
	int closing;
	int handles;
	int deferred_err;       /* error to deliver from the timer (sync failures) */
	uint64_t due;           /* loop time the timer is armed for; 0 = not armed */
	uint64_t connect_until; /* connect phase: give up then */
	uint64_t idle_until;    /* idle in its pool: close then */
	sc_tls_t *tls;          /* https: the session (net/tls.h) */
	int dialled;            /* a connect was started (to pool->addrs[addr] for a name) */
	size_t addr, tries;     /* that address; how many of the name's came before */
};

typedef struct hc_write {
	uv_write_t w;
	hc_conn_t *conn;
	char data[];
} hc_write_t;

/* As if the name in url had just resolved to addrs (n of them, at most
 * HC_MAX_ADDRS): the seam the tests use to give a name a dead and a live
 * address, which the machine's resolver cannot be asked for. */
void sc__hcli_resolved(sc_hcli_t *c, const char *url, const struct sockaddr_storage *addrs,
                       size_t n);

/* http_parser's callbacks for an answer (hclient_parse.c): they fill the
 * request attached to parser->data (an hc_conn_t) and call its on_head and
 * on_data; a non-zero return marks it cancelled and stops the parser. */
extern const http_parser_settings sc__hc_rp_settings;
/* Stores a field the way the parser callbacks do ("name\0value\0"). */
void sc__hc_keep_field(sc_hcli_req_t *r, const sc_hfield_t *f);

#endif
