/* `starcloud login` and `starcloud context` (cli_login.c). */
#ifndef SC_CLI_CLI_LOGIN_H
#define SC_CLI_CLI_LOGIN_H

int sc_cli_login(int argc, char **argv);
int sc_cli_context(int argc, char **argv);

#endif
