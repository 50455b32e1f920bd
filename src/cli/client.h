/* CLI verbs that talk to a running server: apply, get, describe, delete,
 * top, token. Each has the signature of a verb-table entry.
 *
 * The server address comes from --server, then STARCLOUD_SERVER, then
 * ~/.config/starcloud/config ("server: URL" line), else
 * http://127.0.0.1:7070; the token likewise from --token, STARCLOUD_TOKEN or
 * a "token: X" line. Exit status: 0 success, 1 failed operation, 2 bad
 * usage or bad input (the server said 400). */
#ifndef SC_CLI_CLIENT_H
#define SC_CLI_CLIENT_H

int sc_cli_apply(int argc, char **argv);
int sc_cli_get(int argc, char **argv);
int sc_cli_describe(int argc, char **argv);
int sc_cli_delete(int argc, char **argv);
int sc_cli_top(int argc, char **argv);
int sc_cli_token(int argc, char **argv);
int sc_cli_explain(int argc, char **argv);
int sc_cli_drain(int argc, char **argv);
/* `starcloud rollout ...` against the server (cli_rollout.c dispatches). */
int sc_cli_rollout_server(int argc, char **argv);

#endif
