/* Caps on the HTTP server's connections (http.h): per source address and
 * in total.
 *
 * A cap that simply refuses new connections hands the server to whoever
 * opens connections first: 1,100 half-open connections trickling a header
 * line every 20 s locked every other client out. Here a new connection is
 * always looked at, and when a cap is reached the connection that has gone
 * longest without doing anything useful makes room: a keep-alive
 * connection idle since its last answer, or one still sending the head or
 * body of a request, measured from when that request began. Connections
 * with a request at their handler or a stream open (a watch) are never
 * closed for room; when only those remain, the newcomer gets a clear 429
 * (its address holds too many) or 503 (the server is full) instead of a
 * silent reset. */
#include "base/alloc.h"
#include "net/http_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t bucket_of(const unsigned char *addr)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (int i = 0; i < 16; i++)
		h = (h ^ addr[i]) * 16777619u;
	return h % CLIENT_BUCKETS;
}

static client_t *client_get(sc_http_server_t *s, const unsigned char *addr)
{
	client_t **head = &s->clients[bucket_of(addr)];
	for (client_t *cl = *head; cl; cl = cl->next)
		if (memcmp(cl->addr, addr, 16) == 0)
			return cl;
	client_t *cl = sc_xcalloc(1, sizeof(*cl));
	memcpy(cl->addr, addr, 16);
	cl->next = *head;
	*head = cl;
	return cl;
}

/* Frees cl when no connection counts against it any more. */
static void client_release(sc_http_server_t *s, client_t *cl)
{
	if (cl->nconns > 0)
		return;
	for (client_t **p = &s->clients[bucket_of(cl->addr)]; *p; p = &(*p)->next)
		if (*p == cl) {
			*p = cl->next;
			free(cl);
			return;
		}
}

void sc__http_uncount(conn_t *c)
{
	if (!c->client)
		return;
	c->client->nconns--;
	client_release(c->srv, c->client);
	c->client = NULL;
	c->srv->nactive--;
}

void sc_http_get_stats(const sc_http_server_t *s, sc_http_stats_t *out)
{
	*out = s->st;
	out->conns = s->nactive;
}

void sc__http_clients_free(sc_http_server_t *s)
{
	for (size_t i = 0; i < CLIENT_BUCKETS; i++)
		while (s->clients[i]) {
			client_t *cl = s->clients[i];
			s->clients[i] = cl->next;
			free(cl);
		}
}

/* The peer's address as 16 bytes (IPv4 mapped into IPv6) and as text. */
static void peer_of(conn_t *c)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	memset(c->addr, 0, sizeof(c->addr));
	c->peer[0] = '\0';
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) < 0)
		return;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
		c->addr[10] = c->addr[11] = 0xff;
		memcpy(c->addr + 12, &in->sin_addr, 4);
		uv_ip4_name(in, c->peer, sizeof(c->peer));
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
		memcpy(c->addr, &in6->sin6_addr, 16);
		uv_ip6_name(in6, c->peer, sizeof(c->peer));
	}
}

/* When c last did something useful: the end of its last request if it is
 * idle between requests, the start of the request it is still sending.
 * 0 for connections that may not be closed for room (a request with its
 * handler, a stream, or already on the way out). */
static uint64_t useful_since(const conn_t *c)
{
	if (!c->client || c->busy || c->closing || c->close_after || c->lingering)
		return 0;
	uint64_t t = c->req_begin ? c->req_begin : c->last_active;
	return t ? t : 1;
}

/* The counted connection of cl (NULL: of any client) idle the longest,
 * other than but. */
static conn_t *oldest_idle(sc_http_server_t *s, const client_t *cl, const conn_t *but)
{
	conn_t *best = NULL;
	uint64_t best_t = 0;
	for (conn_t *c = s->conns; c; c = c->next) {
		uint64_t t = useful_since(c);
		if (!t || c == but || (cl && c->client != cl))
			continue;
		if (!best || t < best_t) {
			best = c;
			best_t = t;
		}
	}
	return best;
}

int sc__http_admit(sc_http_server_t *s, conn_t *c, conn_t *victims[2], char *msg, size_t msgsz)
{
	victims[0] = victims[1] = NULL;
	peer_of(c);
	client_t *cl = client_get(s, c->addr);
	int over_client = cl->nconns >= s->lim.max_conns_per_client;
	if (over_client && !(victims[0] = oldest_idle(s, cl, NULL))) {
		client_release(s, cl);
		snprintf(msg, msgsz, "too many connections from %s (at most %zu); close idle ones",
		         c->peer, s->lim.max_conns_per_client);
		s->st.refused_client++;
		return 429;
	}
	/* The victim for the address's cap also makes room in the total. */
	if (s->nactive - (victims[0] != NULL) >= s->lim.max_conns &&
	    !(victims[1] = oldest_idle(s, NULL, victims[0]))) {
		client_release(s, cl);
		snprintf(msg, msgsz, "the server is at its limit of %zu connections",
		         s->lim.max_conns);
		s->st.refused_full++;
		victims[0] = NULL;
		return 503;
	}
	s->st.evicted += (victims[0] != NULL) + (victims[1] != NULL);
	cl->nconns++;
	c->client = cl;
	s->nactive++;
	return 0;
}
