/* The service manager's notify protocol (see sdnotify.h and sd_notify(3)). */
#include "net/sdnotify.h"
#include "base/log.h"
#include "base/parse.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "starcloud/error.h"

/* The address, read once from the environment (which is then cleared). */
static struct {
	int read;
	int bad; /* NOTIFY_SOCKET was set to something we cannot use */
	int fd;
	struct sockaddr_un addr;
	socklen_t len;
	unsigned long long watchdog_usec;
} sd = {.fd = -1};

static void read_env(void)
{
	if (sd.read)
		return;
	sd.read = 1;
	const char *path = getenv("NOTIFY_SOCKET");
	const char *usec = getenv("WATCHDOG_USEC");
	const char *pid = getenv("WATCHDOG_PID");
	if (usec) {
		uint64_t v;
		int64_t p = 0;
		int mine =
		    !pid || (sc_parse_i64(pid, 0, INT64_MAX, &p) == 0 && p == (int64_t)getpid());
		if (sc_parse_u64(usec, 1, UINT64_MAX, &v) == 0 && mine)
			sd.watchdog_usec = v;
	}
	size_t n = path ? strlen(path) : 0;
	/* A path, or '@' for Linux's abstract namespace (the '@' becomes a NUL
	 * and the length counts exactly the name). Nothing else (vsock: in
	 * later systemd) is spoken here. */
	if (n >= 2 && n < sizeof(sd.addr.sun_path) && (path[0] == '/' || path[0] == '@')) {
		sd.addr.sun_family = AF_UNIX;
		memcpy(sd.addr.sun_path, path, n);
		if (path[0] == '@')
			sd.addr.sun_path[0] = '\0';
		sd.len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
		                     (path[0] == '/' ? 1 : 0));
	} else if (path) {
		sd.bad = 1;
		sc_log_warn("sd_notify: NOTIFY_SOCKET \"%.100s\" is not a unix socket path; "
		            "not notifying",
		            path);
	}
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}

int sc_sd_notify(const char *state)
{
	read_env();
	if (sd.len == 0)
		return sd.bad ? SC_EINVAL : 0;
	if (sd.fd < 0 && (sd.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return SC_EIO;
	size_t n = strlen(state);
	ssize_t w;
	do
		w = sendto(sd.fd, state, n, MSG_NOSIGNAL, (struct sockaddr *)&sd.addr, sd.len);
	while (w < 0 && errno == EINTR);
	return w == (ssize_t)n ? 0 : SC_EIO;
}

int sc_sd_notifyf(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return sc_sd_notify(buf);
}

static void on_watchdog(uv_timer_t *t)
{
	sc_sd_notify("WATCHDOG=1");
}

int sc_sd_watchdog_start(uv_loop_t *loop, uv_timer_t *timer)
{
	read_env();
	uv_timer_init(loop, timer);
	if (sd.len == 0 || sd.watchdog_usec == 0)
		return 0;
	uint64_t ms = sd.watchdog_usec / 2000;
	if (ms == 0)
		ms = 1;
	uv_timer_start(timer, on_watchdog, 0, ms);
	uv_unref((uv_handle_t *)timer);
	return 1;
}
