/* Placeholder entry point; the CLI proper lands with the manifest layer. */
#include <stdio.h>

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "usage: starcloud <command> [options]\n");
	return 2;
}
