#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "starcloud/error.h"

static char who[64] = "starcloud";
static sc_log_level_t min_level = SC_LOG_INFO;

void sc_log_open(const char *name)
{
	snprintf(who, sizeof(who), "%s", name && *name ? name : "starcloud");
	sc_log_level_t l;
	const char *env = getenv("STARCLOUD_LOG");
	if (env && sc_log_level_parse(env, &l) == 0)
		min_level = l;
}

void sc_log_set_level(sc_log_level_t level)
{
	min_level = level;
}

int sc_log_level_parse(const char *s, sc_log_level_t *out)
{
	static const struct {
		const char *name;
		sc_log_level_t level;
	} names[] = {
	    {"debug", SC_LOG_DEBUG},  {"info", SC_LOG_INFO},   {"warn", SC_LOG_WARN},
	    {"warning", SC_LOG_WARN}, {"error", SC_LOG_ERROR},
	};
	for (size_t i = 0; s && i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].name) == 0) {
			*out = names[i].level;
			return 0;
		}
	return SC_EPARSE;
}

bool sc_log_enabled(sc_log_level_t level)
{
	return level >= min_level;
}

void sc_log(sc_log_level_t level, const char *fmt, ...)
{
	static const char *const tags[] = {"debug: ", "", "warning: ", "error: "};
	if (level < min_level)
		return;
	char line[SC_LOG_LINE_MAX];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ %s: %s", ts.tv_nsec / 1000000,
	                      who, tags[level]);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	n = m < 0 ? n : n + (size_t)m > sizeof(line) - 2 ? sizeof(line) - 2 : n + (size_t)m;
	line[n++] = '\n';
	ssize_t w = write(2, line, n);
	(void)w;
}
