#include "cli/cli_conn.h"
#include "cli/cli_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/secret.h"
#include "base/version.h"

/* --context (or $STARCLOUD_CONTEXT, through the flag table): which of the
 * configuration file's contexts to use; NULL: its current one. */
static const char *chosen_context;

void sc__cli_conn_context(const char *name)
{
	chosen_context = name;
}

/* The key of the chosen context (cli_config.h); "" when unset. */
static int config_value(const char *key, char *out, size_t outsz)
{
	char err[600];
	if (sc__cli_config_value(chosen_context, key, out, outsz, err, sizeof(err)) < 0) {
		fprintf(stderr, "starcloud: %s\n", err);
		return -1;
	}
	return 0;
}

/* The flag (or its environment variable), else the configuration file,
 * else the default. */
static int pick(char *out, size_t outsz, const char *flag, const char *key, const char *dflt)
{
	out[0] = '\0';
	if (flag)
		snprintf(out, outsz, "%s", flag);
	else if (config_value(key, out, outsz) < 0)
		return -1;
	if (!out[0] && dflt)
		snprintf(out, outsz, "%s", dflt);
	return 0;
}

void sc__cli_curl_limits(CURL *h, uint64_t timeout_ms)
{
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, SC_CLI_CONNECT_MS);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, SC_CLI_STALL_S);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
}

static size_t to_buf(char *p, size_t size, size_t n, void *ud)
{
	return sc_buf_append(ud, p, size * n) < 0 ? 0 : size * n;
}

long sc__cli_curl_do(CURL *h, const char *method, const char *url, struct curl_slist *hdrs,
                     const char *body, sc_buf_t *out, char *err, size_t errsz)
{
	long status = -1;
	if (!h) {
		snprintf(err, errsz, "out of memory");
		curl_slist_free_all(hdrs);
		return -1;
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	if (method)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, to_buf);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(h, CURLOPT_USERAGENT, SC_USER_AGENT("cli"));
	if (body)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	CURLcode rc = curl_easy_perform(h);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	else
		snprintf(err, errsz, "%s", curl_easy_strerror(rc));
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	return status;
}

int sc__cli_connect(const char *cmd, const sc_cli_conn_flags_t *f, int argc, char **argv,
                    sc_cli_conn_t *c)
{
	memset(c, 0, sizeof(*c));
	if (pick(c->server, sizeof(c->server), f->server, "server", "http://127.0.0.1:7070") < 0 ||
	    pick(c->ca, sizeof(c->ca), f->ca, "ca", NULL) < 0)
		return -1;
	if (f->token || f->token_file) {
		if (sc_secret_token(cmd, f->token, f->token_file, "STARCLOUD_TOKEN", argc, argv,
		                    c->token, sizeof(c->token)) < 0)
			return -1;
	} else if (config_value("token", c->token, sizeof(c->token)) < 0) {
		/* The configuration file is the user's own (starcloud dev and
		 * starcloud login write it 0600); its token-file is read there. */
		return -1;
	}
	c->timeout_ms = f->request_timeout;
	size_t n = strlen(c->server);
	if (n && c->server[n - 1] == '/')
		c->server[n - 1] = '\0';
	return 0;
}

void sc__cli_conn_tls(const sc_cli_conn_t *c, CURL *h)
{
	if (c->ca[0])
		curl_easy_setopt(h, CURLOPT_CAINFO, c->ca);
}
