/* URLs of the HTTP client (net/hclient.h): http(s)://HOST[:PORT][/path].
 *
 * HOST is an IPv4 literal, an IPv6 literal in brackets ([::1]), or a name
 * (resolved by the client on the loop, through libuv's thread pool).
 * "localhost" is taken as 127.0.0.1 without asking the resolver: the
 * platform's daemons talk over loopback all the time. */
#ifndef SC_NET_HURL_H
#define SC_NET_HURL_H

#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>

#define SC_HURL_MAX_HOST 254 /* a DNS name is at most 253 characters */

typedef struct sc_hurl {
	char host[SC_HURL_MAX_HOST]; /* without brackets */
	int port;                    /* 80/443 when the URL names none */
	int tls;                     /* https:// */
	int literal;                 /* host is an IP address: addr holds it */
	struct sockaddr_storage addr;
	const char *path; /* into the URL: "/..." or "?..."; "/" when none */
} sc_hurl_t;

/* Parses url into u (u->path borrows url). SC_EINVAL for anything that is
 * not such a URL (another scheme, an empty or over-long host, a bad port,
 * junk after the port, an unclosed or invalid bracketed address). */
int sc_hurl_parse(const char *url, sc_hurl_t *u);

/* The Host header's value: "host:port", "[v6]:port" for IPv6. */
void sc_hurl_authority(const sc_hurl_t *u, char *out, size_t outsz);

#endif
