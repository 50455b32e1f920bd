#include "net/hurl.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "base/parse.h"
#include "starcloud/error.h"

/* A name: letters, digits, '-', '.', '_' (as resolvers take them). */
static int valid_name(const char *h)
{
	for (; *h; h++)
		if (!((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') ||
		      (*h >= '0' && *h <= '9') || *h == '-' || *h == '.' || *h == '_'))
			return 0;
	return 1;
}

/* The host part at h into u->host; *end past it. */
static int parse_host(const char *h, sc_hurl_t *u, const char **end)
{
	size_t hl;
	int bracket = *h == '[';
	if (bracket) {
		const char *close = strchr(h, ']');
		if (!close)
			return SC_EINVAL;
		h++;
		hl = (size_t)(close - h);
		*end = close + 1;
	} else {
		hl = strcspn(h, ":/?#");
		*end = h + hl;
	}
	if (hl == 0 || hl >= sizeof(u->host))
		return SC_EINVAL;
	memcpy(u->host, h, hl);
	u->host[hl] = '\0';
	if (bracket) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&u->addr;
		if (uv_ip6_addr(u->host, 0, s6) < 0)
			return SC_EINVAL;
		u->literal = 1;
		return 0;
	}
	if (strcmp(u->host, "localhost") == 0)
		snprintf(u->host, sizeof(u->host), "127.0.0.1");
	struct sockaddr_in *s4 = (struct sockaddr_in *)&u->addr;
	if (uv_ip4_addr(u->host, 0, s4) == 0) {
		u->literal = 1;
		return 0;
	}
	/* Neither an IPv4 literal nor bracketed: a name (an IPv6 address
	 * without brackets is refused, its colons are ambiguous). */
	return valid_name(u->host) ? 0 : SC_EINVAL;
}

int sc_hurl_parse(const char *url, sc_hurl_t *u)
{
	memset(u, 0, sizeof(*u));
	u->tls = strncmp(url, "https://", 8) == 0;
	if (!u->tls && strncmp(url, "http://", 7) != 0)
		return SC_EINVAL;
	const char *p;
	if (parse_host(url + (u->tls ? 8 : 7), u, &p) < 0)
		return SC_EINVAL;
	u->port = u->tls ? 443 : 80;
	if (*p == ':') {
		uint64_t v;
		const char *e = p + 1;
		if (sc_parse_digits(&e, 65535, &v) < 0 || v < 1)
			return SC_EINVAL;
		u->port = (int)v;
		p = e;
	}
	if (*p && *p != '/' && *p != '?')
		return SC_EINVAL;
	u->path = *p ? p : "/";
	if (u->literal) {
		if (u->addr.ss_family == AF_INET6)
			((struct sockaddr_in6 *)&u->addr)->sin6_port = htons((uint16_t)u->port);
		else
			((struct sockaddr_in *)&u->addr)->sin_port = htons((uint16_t)u->port);
	}
	return 0;
}

void sc_hurl_authority(const sc_hurl_t *u, char *out, size_t outsz)
{
	int v6 = strchr(u->host, ':') != NULL;
	snprintf(out, outsz, "%s%s%s:%d", v6 ? "[" : "", u->host, v6 ? "]" : "", u->port);
}
