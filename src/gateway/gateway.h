/* `starcloud gateway`: the serving gateway (OpenAI-compatible and KServe v2
 * in front of model workers). See docs/GATEWAY.md. */
#ifndef SC_GATEWAY_GATEWAY_H
#define SC_GATEWAY_GATEWAY_H

/* The verb: parses argv (argv[0] is "gateway"), serves until SIGINT or
 * SIGTERM, returns an exit status. */
int sc_gateway_main(int argc, char **argv);

/* `starcloud rollout status|promote|abort [MODEL]` against a gateway's
 * /admin/rollouts (src/cli/cli_rollout.c). */
int sc_cli_rollout(int argc, char **argv);

#endif
