/* `starcloud store copy --from URL --to URL`: migrates a store (SQLite to
 * etcd, or back). */
#ifndef SC_CLI_CLI_STORE_H
#define SC_CLI_CLI_STORE_H

int sc_cli_store(int argc, char **argv);

#endif
