/* CLI verbs of the node agent's side: logs (read from the agent) and dev
 * (a local server + agents). */
#ifndef SC_CLI_CLI_AGENT_H
#define SC_CLI_CLI_AGENT_H

int sc_cli_logs(int argc, char **argv);
int sc_cli_dev(int argc, char **argv);

#endif
