/* Timestamps as the API writes them: RFC 3339, UTC, whole seconds. */
#include <time.h>

#include "server/server.h"

void sc__now_rfc3339(char *out, size_t outsz)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, outsz, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void sc__rfc3339(int64_t t, char *out, size_t outsz)
{
	time_t tt = (time_t)t;
	struct tm tm;
	gmtime_r(&tt, &tm);
	strftime(out, outsz, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
