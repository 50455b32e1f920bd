/* Where a client verb connects: the server's address, the token and the CA.
 *
 * The address comes from --server, then $STARCLOUD_SERVER (both through the
 * verb's flag table, SC_CLI_CONN_FLAGS), then a "server: URL" line of
 * ~/.config/starcloud/config, else http://127.0.0.1:7070. The token from
 * --token-file (mode 0600), $STARCLOUD_TOKEN, --token (warns: argv is
 * public on a shared machine) or the file's token (or token-file); the CA
 * that signs an https:// server's certificate from --ca, $STARCLOUD_CA or
 * the file's ca (else the system's CAs). The file may name several
 * contexts (cli/cli_config.h). */
#ifndef SC_CLI_CLI_CONN_H
#define SC_CLI_CLI_CONN_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "base/flags.h"
#include "starcloud/buf.h"

/* How long a client waits (docs/CONTROL_PLANE.md, "Client timeouts"): a
 * connection must be made within SC_CLI_CONNECT_MS, a request that moves no
 * byte either way for SC_CLI_STALL_S seconds has stalled (a frozen server
 * accepts connections but answers nothing), and the next URL of --server
 * is tried at once in both cases; a whole request ends after
 * --request-timeout. */
#define SC_CLI_CONNECT_MS 2000L
#define SC_CLI_STALL_S 3L

/* The connection flags as given (NULL when absent). */
typedef struct sc_cli_conn_flags {
	const char *server, *token, *token_file, *ca;
	uint64_t request_timeout; /* --request-timeout, ms */
} sc_cli_conn_flags_t;

/* Resolved. */
typedef struct sc_cli_conn {
	char server[512]; /* URL[,URL...], no trailing '/' */
	char token[512];
	char ca[1024];       /* "" for the system's CAs */
	uint64_t timeout_ms; /* a whole request at most */
} sc_cli_conn_t;

/* The flags, for a verb's table whose options struct T has an
 * sc_cli_conn_flags_t member m. */
#define SC_CLI_CONN_FLAGS(T, m)                                                                    \
	{.name = "--server",                                                                       \
	 SC_FLAG_AT(STR, T, m.server),                                                             \
	 .meta = "URL[,URL...]",                                                                   \
	 .env = "STARCLOUD_SERVER",                                                                \
	 .help = "the control plane (else \"server:\" in ~/.config/starcloud/config,\n"            \
	         "else http://127.0.0.1:7070); the next URL when one is down"},                    \
	    {.name = "--token-file",                                                               \
	     SC_FLAG_AT(STR, T, m.token_file),                                                     \
	     .meta = "FILE",                                                                       \
	     .help = "API token from a file of mode 0600"},                                        \
	    {.name = "--token",                                                                    \
	     SC_FLAG_AT(STR, T, m.token),                                                          \
	     .meta = "T",                                                                          \
	     .env = "STARCLOUD_TOKEN",                                                             \
	     .help = "API token (else \"token:\" in ~/.config/starcloud/config);\n"                \
	             "on the command line it warns: prefer --token-file"},                         \
	    {.name = "--ca",                                                                       \
	     SC_FLAG_AT(STR, T, m.ca),                                                             \
	     .meta = "FILE",                                                                       \
	     .env = "STARCLOUD_CA",                                                                \
	     .help = "CA certificate of an https:// server (else \"ca:\" in the\n"                 \
	             "configuration file, else the system's CAs)"},                                \
	{                                                                                          \
		.name = "--request-timeout", SC_FLAG_AT(DURATION, T, m.request_timeout),           \
		.min = 100, .max = 86400e3, .def = "60s", .env = "STARCLOUD_REQUEST_TIMEOUT",      \
		.help = "a whole request at most (a connection 2 s, a stall 3 s:\n"                \
		        "then the next --server URL)"                                              \
	}

/* --context for a verb's table; T has const char *context_flag, which the
 * verb hands to sc__cli_conn_context before sc__cli_connect. */
#define SC_CLI_CONTEXT_FLAG(T)                                                                     \
	{                                                                                          \
		.name = "--context", SC_FLAG_AT(STR, T, context_flag), .meta = "NAME",             \
		.env = "STARCLOUD_CONTEXT",                                                        \
		.help = "a context of ~/.config/starcloud/config (starcloud login,\n"              \
		        "starcloud context) instead of its current one"                            \
	}

/* Which context of the configuration file the next sc__cli_connect reads
 * (cli/cli_config.h); NULL for its current one. Borrowed. */
void sc__cli_conn_context(const char *name);
/* Resolves f into c for verb cmd; argv's --token is blanked after use.
 * 0, or < 0 after a message (a bad --token-file, a configuration file or
 * context that cannot be used). */
int sc__cli_connect(const char *cmd, const sc_cli_conn_flags_t *f, int argc, char **argv,
                    sc_cli_conn_t *c);
/* Gives a libcurl handle the CA (when one is set). */
void sc__cli_conn_tls(const sc_cli_conn_t *c, CURL *h);
/* Sets h's connect and stall limits and the whole request's deadline
 * (timeout_ms; 0: none, for a stream that follows on and on). */
void sc__cli_curl_limits(CURL *h, uint64_t timeout_ms);
/* One blocking request of the CLI on h, whose TLS and limits the caller
 * has set: method (NULL for GET, or POST with a body), url, hdrs, body
 * (NULL: none), the answer appended to out; h and hdrs are freed. Returns
 * the HTTP status, or -1 when nothing was answered, with libcurl's reason
 * in err (the caller's message names what it asked). */
long sc__cli_curl_do(CURL *h, const char *method, const char *url, struct curl_slist *hdrs,
                     const char *body, sc_buf_t *out, char *err, size_t errsz);

#endif
