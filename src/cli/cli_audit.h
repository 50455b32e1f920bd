/* `starcloud audit`: reads the server's audit log (src/server/audit.c). */
#ifndef SC_CLI_CLI_AUDIT_H
#define SC_CLI_CLI_AUDIT_H

int sc_cli_audit(int argc, char **argv);

#endif
