/* Where a client verb connects: the server's address and the token.
 *
 * The address comes from --server, then $STARCLOUD_SERVER (both through the
 * verb's flag table, SC_CLI_CONN_FLAGS), then a "server: URL" line of
 * ~/.config/starcloud/config, else http://127.0.0.1:7070; the token likewise
 * from --token, $STARCLOUD_TOKEN or a "token: X" line. */
#ifndef SC_CLI_CLI_CONN_H
#define SC_CLI_CLI_CONN_H

#include <stddef.h>

#include "base/flags.h"

/* The two flags, for a verb's table; T has const char *server_flag and
 * token_flag. */
#define SC_CLI_CONN_FLAGS(T)                                                                       \
	{.name = "--server",                                                                       \
	 SC_FLAG_AT(STR, T, server_flag),                                                          \
	 .meta = "URL[,URL...]",                                                                   \
	 .env = "STARCLOUD_SERVER",                                                                \
	 .help = "the control plane (else \"server:\" in ~/.config/starcloud/config,\n"            \
	         "else http://127.0.0.1:7070); the next URL when one is down"},                    \
	{                                                                                          \
		.name = "--token", SC_FLAG_AT(STR, T, token_flag), .meta = "T",                    \
		.env = "STARCLOUD_TOKEN",                                                          \
		.help = "API token (else \"token:\" in ~/.config/starcloud/config)"                \
	}

/* Fills server (no trailing '/') and token from the flags (NULL when not
 * given) and the configuration file. */
void sc__cli_conn(const char *server_flag, const char *token_flag, char *server, size_t serversz,
                  char *token, size_t tokensz);

#endif
