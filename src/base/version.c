/* Version strings and the skew rule (see version.h). Pure: no I/O. */
#include "base/version.h"

#include <stdio.h>
#include <string.h>

#include "starcloud/error.h"

/* One decimal field of at most 4 digits; *p moves past it. */
static int field(const char **p, int *out)
{
	int n = 0, digits = 0;
	while (**p >= '0' && **p <= '9') {
		if (++digits > 4)
			return SC_EINVAL;
		n = n * 10 + (**p - '0');
		(*p)++;
	}
	if (digits == 0)
		return SC_EINVAL;
	*out = n;
	return 0;
}

/* Parses a version that ends at stop (a NUL, or a space for a User-Agent). */
static int parse_until(const char *s, char stop, sc_version_t *out)
{
	sc_version_t v;
	if (field(&s, &v.major) < 0 || *s++ != '.' || field(&s, &v.minor) < 0 || *s++ != '.' ||
	    field(&s, &v.patch) < 0)
		return SC_EINVAL;
	if (*s != '\0' && *s != stop)
		return SC_EINVAL;
	*out = v;
	return 0;
}

int sc_version_parse(const char *s, sc_version_t *out)
{
	return s ? parse_until(s, '\0', out) : SC_EINVAL;
}

int sc_version_cmp(const sc_version_t *a, const sc_version_t *b)
{
	if (a->major != b->major)
		return a->major < b->major ? -1 : 1;
	if (a->minor != b->minor)
		return a->minor < b->minor ? -1 : 1;
	if (a->patch != b->patch)
		return a->patch < b->patch ? -1 : 1;
	return 0;
}

int sc_version_from_user_agent(const char *ua, char *component, size_t compsz, sc_version_t *v)
{
	static const char pre[] = "starcloud-";
	if (!ua || strncmp(ua, pre, sizeof(pre) - 1) != 0)
		return 0;
	const char *name = ua + sizeof(pre) - 1;
	size_t n = strcspn(name, "/ ");
	if (n == 0 || name[n] != '/')
		return SC_EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
		      name[i] == '-'))
			return SC_EINVAL;
	snprintf(component, compsz, "%.*s", (int)(n < 64 ? n : 64), name);
	return parse_until(name + n + 1, ' ', v) < 0 ? SC_EINVAL : 1;
}

int sc_version_check(const char *ua, char *msg, size_t msgsz)
{
	char comp[65] = "client";
	sc_version_t v, min;
	int rc = sc_version_from_user_agent(ua, comp, sizeof(comp), &v);
	if (rc == 0)
		return 0;
	sc_version_parse(SC_MIN_PEER_VERSION, &min);
	if (rc > 0 && sc_version_cmp(&v, &min) >= 0)
		return 0;
	if (rc > 0)
		snprintf(msg, msgsz,
		         "starcloud-%s %d.%d.%d is too old for this server (starcloud %s serves "
		         "agents, gateways and CLIs from %s on): upgrade it to %s",
		         comp, v.major, v.minor, v.patch, SC_VERSION, SC_MIN_PEER_VERSION,
		         SC_VERSION);
	else
		snprintf(msg, msgsz,
		         "User-Agent \"%.80s\" names a Starcloud client without a readable version "
		         "(expected starcloud-NAME/X.Y.Z); this server (starcloud %s) serves "
		         "clients from %s on",
		         ua, SC_VERSION, SC_MIN_PEER_VERSION);
	return SC_ERANGE;
}
