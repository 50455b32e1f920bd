#include "cli/cli_conn.h"
#include "cli/cli_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/secret.h"

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
