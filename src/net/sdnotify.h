/* Readiness and liveness for systemd (Type=notify units, deploy/systemd/).
 *
 * systemd starts a Type=notify daemon with $NOTIFY_SOCKET naming a unix
 * datagram socket, and waits for "READY=1" on it before it counts the unit
 * as started (so `systemctl start` returns once the daemon serves, and
 * units ordered after it start only then). With WatchdogSec= it also sets
 * $WATCHDOG_USEC and restarts the daemon when "WATCHDOG=1" stops coming.
 *
 * Why not libsystemd's sd_notify(): the protocol is one sendto() of a few
 * text lines to an address from the environment, documented as a stable
 * interface (sd_notify(3)) that daemons may speak without the library.
 * Linking libsystemd would add a library (and its own dependencies) to
 * every daemon and to the package, for those few lines.
 *
 * Without $NOTIFY_SOCKET (not under systemd, or another Type) every call
 * does nothing and returns 0. The first call reads the variables and
 * removes them from the environment, so children (pods, workers) cannot
 * speak for the daemon. One event loop per daemon: not thread-safe. */
#ifndef SC_NET_SDNOTIFY_H
#define SC_NET_SDNOTIFY_H

#include <uv.h>

/* Sends state ("READY=1", "STATUS=serving on ...", "STOPPING=1", several
 * separated by newlines). 0 when sent or nothing to do; SC_EINVAL for an
 * address of a kind we do not speak; SC_EIO when the send failed. */
int sc_sd_notify(const char *state);
/* printf-style sc_sd_notify, for STATUS= lines; the text is cut at 1 KiB. */
int sc_sd_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* When systemd asks for a watchdog ($WATCHDOG_USEC, and $WATCHDOG_PID, if
 * set, is this process), pings it from timer (initialised on loop here)
 * every half period: a daemon whose loop is stuck stops pinging and gets
 * restarted. Returns 1 when the watchdog runs, 0 when none is asked for.
 * The timer does not keep the loop alive; close it like any handle. */
int sc_sd_watchdog_start(uv_loop_t *loop, uv_timer_t *timer);

#endif
