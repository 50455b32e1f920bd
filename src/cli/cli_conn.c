#include "cli/cli_conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads "key: value" from ~/.config/starcloud/config. */
static void config_value(const char *key, char *out, size_t outsz)
{
	const char *home = getenv("HOME");
	char path[1024], line[1024];
	if (!home)
		return;
	snprintf(path, sizeof(path), "%s/.config/starcloud/config", home);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	size_t klen = strlen(key);
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) != 0 || line[klen] != ':')
			continue;
		char *v = line + klen + 1;
		v += strspn(v, " \t");
		v[strcspn(v, "\r\n")] = '\0';
		snprintf(out, outsz, "%s", v);
	}
	fclose(f);
}

/* The flag (or its environment variable), else the configuration file,
 * else the default. */
static void pick(char *out, size_t outsz, const char *flag, const char *key, const char *dflt)
{
	out[0] = '\0';
	if (flag)
		snprintf(out, outsz, "%s", flag);
	else
		config_value(key, out, outsz);
	if (!out[0] && dflt)
		snprintf(out, outsz, "%s", dflt);
}

void sc__cli_curl_limits(CURL *h, uint64_t timeout_ms)
{
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, SC_CLI_CONNECT_MS);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, SC_CLI_STALL_S);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
}

void sc__cli_conn(const char *server_flag, const char *token_flag, char *server, size_t serversz,
                  char *token, size_t tokensz)
{
	pick(server, serversz, server_flag, "server", "http://127.0.0.1:7070");
	pick(token, tokensz, token_flag, "token", NULL);
	size_t n = strlen(server);
	if (n && server[n - 1] == '/')
		server[n - 1] = '\0';
}
