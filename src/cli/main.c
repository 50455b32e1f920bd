/* Entry point: dispatches the first argument to a subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli/client.h"
#include "server/server.h"

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "server") == 0)
		return sc_server_main(argc - 1, argv + 1);
	if (argc >= 2) {
		int rc = sc_cli_client_main(argc - 1, argv + 1);
		if (rc != SC_CLI_UNKNOWN_VERB)
			return rc;
	}
	fprintf(stderr, "usage: starcloud <command> [options]\n"
			"commands: server, apply, get, describe, delete, top, token\n");
	return 2;
}
