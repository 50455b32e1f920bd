/* Where a client verb connects: the server's address and the token.
 *
 * The address comes from --server, then $STARCLOUD_SERVER (both through the
 * verb's flag table, SC_CLI_CONN_FLAGS), then a "server: URL" line of
 * ~/.config/starcloud/config, else http://127.0.0.1:7070; the token likewise
 * from --token, $STARCLOUD_TOKEN or the file's token (or token-file). The
 * file may name several contexts (cli/cli_config.h). */
#ifndef SC_CLI_CLI_CONN_H
#define SC_CLI_CLI_CONN_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "base/flags.h"

/* How long a client waits (docs/CONTROL_PLANE.md, "Client timeouts"): a
 * connection must be made within SC_CLI_CONNECT_MS, a request that moves no
 * byte either way for SC_CLI_STALL_S seconds has stalled (a frozen server
 * accepts connections but answers nothing), and the next URL of --server
 * is tried at once in both cases; a whole request ends after
 * --request-timeout. */
#define SC_CLI_CONNECT_MS 2000L
#define SC_CLI_STALL_S 3L

/* The connection flags, for a verb's table; T has const char *server_flag
 * and token_flag, and uint64_t request_timeout (ms). */
#define SC_CLI_CONN_FLAGS(T)                                                                       \
	{.name = "--server",                                                                       \
	 SC_FLAG_AT(STR, T, server_flag),                                                          \
	 .meta = "URL[,URL...]",                                                                   \
	 .env = "STARCLOUD_SERVER",                                                                \
	 .help = "the control plane (else \"server:\" in ~/.config/starcloud/config,\n"            \
	         "else http://127.0.0.1:7070); the next URL when one is down"},                    \
	    {.name = "--token",                                                                    \
	     SC_FLAG_AT(STR, T, token_flag),                                                       \
	     .meta = "T",                                                                          \
	     .env = "STARCLOUD_TOKEN",                                                             \
	     .help = "API token (else \"token:\" in ~/.config/starcloud/config)"},                 \
	{                                                                                          \
		.name = "--request-timeout", SC_FLAG_AT(DURATION, T, request_timeout), .min = 100, \
		.max = 86400e3, .def = "60s", .env = "STARCLOUD_REQUEST_TIMEOUT",                  \
		.help = "a whole request at most (a connection 2 s, a stall 3 s:\n"                \
		        "then the next --server URL)"                                              \
	}

/* --context for a verb's table; T has const char *context_flag, which the
 * verb hands to sc__cli_conn_context before sc__cli_conn. */
#define SC_CLI_CONTEXT_FLAG(T)                                                                     \
	{                                                                                          \
		.name = "--context", SC_FLAG_AT(STR, T, context_flag), .meta = "NAME",             \
		.env = "STARCLOUD_CONTEXT",                                                        \
		.help = "a context of ~/.config/starcloud/config (starcloud login,\n"              \
		        "starcloud context) instead of its current one"                            \
	}

/* Which context of the configuration file the next sc__cli_conn reads
 * (cli/cli_config.h); NULL for its current one. Borrowed. */
void sc__cli_conn_context(const char *name);
/* Fills server (no trailing '/') and token from the flags (NULL when not
 * given) and the configuration file. -1 after a message when the file or
 * its chosen context cannot be used. */
int sc__cli_conn(const char *server_flag, const char *token_flag, char *server, size_t serversz,
                 char *token, size_t tokensz);
/* Sets h's connect and stall limits and the whole request's deadline
 * (timeout_ms; 0: none, for a stream that follows on and on). */
void sc__cli_curl_limits(CURL *h, uint64_t timeout_ms);

#endif
