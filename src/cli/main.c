/* Placeholder entry point; the CLI proper (a verb table) lands with the
 * manifest layer, where `simulate` becomes one entry. */
#include <stdio.h>
#include <string.h>

#include "cli/cli_simulate.h"

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "simulate") == 0)
		return sc_cli_simulate(argc - 1, argv + 1);
	fprintf(stderr, "usage: starcloud <command> [options]\n");
	return 2;
}
