/* The audit log: DATA/audit.log, one JSON line per write and per denied
 * request:
 *
 *   {"time":"2026-12-01T15:04:05.123Z","principal":"3f2a9c0d1e2b4a5c",
 *    "role":"tenant","verb":"POST","object":"/api/v1/jobs","result":201}
 *
 * principal is the token's id (never the secret), "" when no valid token
 * came; object is the request's path (no query: it may carry nothing
 * secret, but keeping it out keeps lines short). Reads are recorded only
 * when refused (401, 403), so an operator sees probing without a line
 * per watch event. When the file passes --audit-max it is renamed to
 * audit.log.1 (replacing the previous one) and a new file is started, so
 * the log takes at most twice that. Lines are written with one write(2)
 * on an O_APPEND descriptor: a crash leaves whole lines. `starcloud audit`
 * reads it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "server/server.h"
#include "starcloud/error.h"

struct sc_audit {
	int fd;
	size_t size, max;
	char path[1024];
};

int sc__audit_open(sc_server_t *s, const char *dir, size_t max_bytes)
{
	sc_audit_t *a = sc_xcalloc(1, sizeof(*a));
	struct stat st;
	if (snprintf(a->path, sizeof(a->path), "%s/audit.log", dir) >= (int)sizeof(a->path)) {
		free(a);
		return SC_ETOOBIG;
	}
	a->fd = open(a->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (a->fd < 0) {
		sc_log_error("cannot open the audit log %s: %s", a->path, strerror(errno));
		free(a);
		return SC_EIO;
	}
	a->size = fstat(a->fd, &st) == 0 ? (size_t)st.st_size : 0;
	a->max = max_bytes;
	s->audit = a;
	return 0;
}

void sc__audit_close(sc_server_t *s)
{
	if (!s->audit)
		return;
	close(s->audit->fd);
	free(s->audit);
	s->audit = NULL;
}

static void rotate(sc_audit_t *a)
{
	char old[1100];
	snprintf(old, sizeof(old), "%s.1", a->path);
	if (rename(a->path, old) < 0)
		sc_log_warn("cannot rotate the audit log: %s", strerror(errno));
	int fd = open(a->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		sc_log_error("cannot reopen the audit log: %s", strerror(errno));
		return; /* keep writing to the renamed file rather than lose lines */
	}
	close(a->fd);
	a->fd = fd;
	a->size = 0;
}

static int recorded(const char *method, int status)
{
	int write = strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
	return write || status == 401 || status == 403;
}

void sc__audit_request(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who, int status)
{
	sc_audit_t *a = s->audit;
	const char *method = sc_http_method(r);
	if (!a || !recorded(method, status))
		return;
	struct timeval tv;
	struct tm tm;
	char ts[48];
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - n, ".%03ldZ", (long)(tv.tv_usec / 1000));
	int valid = who && who->role != SC_ROLE_NONE;
	json_t *line =
	    json_pack("{s:s,s:s,s:s,s:s,s:s,s:i}", "time", ts, "principal", valid ? who->id : "",
	              "role", valid ? sc__role_name(who->role) : "", "verb", method, "object",
	              sc_http_path(r), "result", status);
	if (!line)
		return; /* a path that is not UTF-8: jansson refuses it */
	if (valid && who->node[0])
		json_object_set_new(line, "node", json_string(who->node));
	char *text = sc_xcheck(json_dumps(line, JSON_COMPACT));
	json_decref(line);
	size_t len = strlen(text);
	text[len] = '\n';
	ssize_t w = write(a->fd, text, len + 1);
	free(text);
	if (w < 0) {
		sc_log_warn("audit log write failed: %s", strerror(errno));
		return;
	}
	a->size += (size_t)w;
	if (a->max && a->size >= a->max)
		rotate(a);
}
