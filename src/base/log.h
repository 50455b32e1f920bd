/* The daemons' log: one line per event on standard error.
 *
 *   2026-05-01T10:00:00.123Z gateway: backend 127.0.0.1:9000 ejected for 30s
 *   2026-05-01T10:00:01.004Z agent n1: warning: heartbeat failed (503)
 *
 * A line is the UTC time to the millisecond, who is speaking (set once per
 * process by sc_log_open: "server", "agent n1"), the level when it is not
 * info, and the message. Each line is formatted aside and written with one
 * write(2), so lines from the server's scheduling thread and its loop
 * thread never interleave. Lines longer than SC_LOG_LINE_MAX are cut.
 *
 * The level is taken from $STARCLOUD_LOG (debug, info, warn, error;
 * default info) when the log is opened; lines below it cost one compare. */
#ifndef SC_BASE_LOG_H
#define SC_BASE_LOG_H

#include <stdbool.h>

typedef enum sc_log_level {
	SC_LOG_DEBUG,
	SC_LOG_INFO,
	SC_LOG_WARN,
	SC_LOG_ERROR,
} sc_log_level_t;

#define SC_LOG_LINE_MAX 2048

/* Names this process in every line (copied; at most 63 bytes) and reads
 * $STARCLOUD_LOG. May be called again (the agent learns its name late). */
void sc_log_open(const char *who);
void sc_log_set_level(sc_log_level_t level);
/* "debug", "info", "warn"/"warning", "error" -> *out; SC_EPARSE else. */
int sc_log_level_parse(const char *s, sc_log_level_t *out);
bool sc_log_enabled(sc_log_level_t level);

void sc_log(sc_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define sc_log_debug(...) sc_log(SC_LOG_DEBUG, __VA_ARGS__)
#define sc_log_info(...) sc_log(SC_LOG_INFO, __VA_ARGS__)
#define sc_log_warn(...) sc_log(SC_LOG_WARN, __VA_ARGS__)
#define sc_log_error(...) sc_log(SC_LOG_ERROR, __VA_ARGS__)

#endif
