/* ~/.config/starcloud/config: where the client verbs connect, with named
 * contexts as kubectl's kubeconfig has them:
 *
 *   current-context: prod
 *   contexts:
 *     prod: {server: "https://sc.example.com:7070", token-file: /home/me/.sc-prod}
 *     dev:  {server: "http://127.0.0.1:7070", token: sc_...}
 *
 * A context has server, and token or token-file (a file holding the token,
 * read at each use), and may have ca. A file without contexts (what earlier
 * releases of `starcloud dev` wrote: top-level `server:` and `token:`)
 * still works: its top-level keys are one unnamed context.
 *
 * The context used is --context, else $STARCLOUD_CONTEXT, else
 * current-context; `starcloud login` adds or replaces one and makes it
 * current, `starcloud context [NAME]` lists them or switches. The file is
 * written whole, to a temporary file renamed over it, mode 0600 (it may
 * hold tokens). */
#ifndef SC_CLI_CLI_CONFIG_H
#define SC_CLI_CLI_CONFIG_H

#include <stddef.h>
#include <stdio.h>

/* The configuration file's path ($HOME/.config/starcloud/config) into
 * out; -1 without $HOME. */
int sc__cli_config_path(char *out, size_t outsz);

/* The value of key ("server", "token", "ca") in context (NULL: the current
 * one) into out, "" when unset. A token-file is read for "token". Returns
 * 0, or -1 with a message in err when the named context does not exist or
 * its token file cannot be read. */
int sc__cli_config_value(const char *context, const char *key, char *out, size_t outsz, char *err,
                         size_t errsz);

/* Adds or replaces context name with server and one of token/token_file
 * (the other NULL; ca may be NULL), and makes it current. 0, or -1 with a
 * message. */
int sc__cli_config_login(const char *name, const char *server, const char *token,
                         const char *token_file, const char *ca, char *err, size_t errsz);

/* Makes context name current; -1 with a message when there is none. */
int sc__cli_config_use(const char *name, char *err, size_t errsz);

/* Prints the contexts as a table (CURRENT, NAME, SERVER, AUTH). */
void sc__cli_config_list(FILE *out);

#endif
