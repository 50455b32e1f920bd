/* Entry point of `starcloud`: finds the verb in a table and runs it. Verbs
 * that other components provide appear in the table with a NULL function
 * until they land, so `starcloud --help` already shows the whole tool. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_simulate.h"
#include "cli/client.h"
#include "cli/cli_complete.h"
#include "cli/cli_login.h"
#include "agent/agent.h"
#include "agent/guard.h"
#include "cli/cli_agent.h"
#include "cli/cli_audit.h"
#include "gateway/gateway.h"
#include "k8s/k8s.h"
#include "cli/cli_store.h"
#include "server/server.h"
#include "worker/worker.h"

static int sc_cli_version(int argc, char **argv);
static int sc_cli_completion(int argc, char **argv);

typedef struct verb {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
	int daemon; /* serves connections: a peer that goes away must not kill it */
} verb_t;

static const verb_t verbs[] = {
    {"schedule", sc_cli_schedule, "offline scheduling of manifests (one or more cycles)", 0},
    {"version", sc_cli_version, "print the version", 0},
    {"simulate", sc_cli_simulate, "packing and trace simulation", 0},
    {"bench", sc_cli_bench, "benchmarks (core, preempt, server, soak)", 0},
    {"server", sc_server_main, "run the control plane", 1},
    {"agent", sc_agent_main, "run a node agent", 1},
    {"gateway", sc_gateway_main, "run the serving gateway", 1},
    {"worker", sc_worker_main, "run the reference model worker", 1},
    {"dev", sc_cli_dev, "run a local cluster (server, agents, gateway)", 1},
    {"guard", sc_guard_main, "fence a node's pods when its lease lapses (the agent starts it)", 0},
    {"apply", sc_cli_apply, "create or update objects on a server", 0},
    {"get", sc_cli_get, "list or show objects", 0},
    {"describe", sc_cli_describe, "show an object in detail", 0},
    {"delete", sc_cli_delete, "delete objects", 0},
    {"token", sc_cli_token, "create, list and delete API tokens", 0},
    {"explain", sc_cli_explain, "why is a job pending", 0},
    {"logs", sc_cli_logs, "show a pod's logs", 0},
    {"audit", sc_cli_audit, "read the server's audit log", 0},
    {"top", sc_cli_top, "resource usage", 0},
    {"drain", sc_cli_drain, "drain a node", 0},
    {"rollout", sc_cli_rollout, "deployment rollout status, promote, abort", 0},
    {"store", sc_cli_store, "copy a store (sqlite to etcd)", 0},
    {"k8s", sc_k8s_main, "schedule a Kubernetes cluster (KAI Queues and PodGroups)", 1},
    {"login", sc_cli_login, "check a token against a server and keep it as a context", 0},
    {"context", sc_cli_context, "list the configuration's contexts, or switch", 0},
    {"completion", sc_cli_completion, "shell completion: completion bash|zsh", 0},
};

#define NVERBS (sizeof(verbs) / sizeof(verbs[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: starcloud <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < NVERBS; i++)
		fprintf(f, "  %-10s %s%s\n", verbs[i].name, verbs[i].summary,
		        verbs[i].run ? "" : " (not in this build)");
	fprintf(f, "\n`starcloud <command> --help` describes a command.\n");
}

static int sc_cli_version(int argc, char **argv)
{
	if (sc__cli_wants_help(argc, argv)) {
		printf("usage: starcloud version\n\nPrints the version of starcloud.\n");
		return SC_EXIT_OK;
	}
	if (argc > 1) {
		fprintf(stderr, "starcloud version: unexpected argument \"%s\"\n", argv[1]);
		return SC_EXIT_USAGE;
	}
	printf("starcloud %s\n", SC_VERSION);
	return SC_EXIT_OK;
}

/* `starcloud completion bash|zsh` (cli_complete.c), over this table. */
static int sc_cli_completion(int argc, char **argv)
{
	sc_cli_verb_info_t info[NVERBS];
	for (size_t i = 0; i < NVERBS; i++)
		info[i] = (sc_cli_verb_info_t){verbs[i].name, verbs[i].summary, verbs[i].run};
	return sc__cli_completion(argc, argv, info, NVERBS);
}

/* Hidden: `starcloud help --verbs` lists the verbs with their summaries
 * (tab-separated) and `starcloud help --man` prints starcloud(1), for
 * scripts/gen-docs.sh, which builds the other pages from each verb's
 * --help-man. */
static int help_for_docs(const char *what)
{
	if (strcmp(what, "--verbs") == 0) {
		for (size_t i = 0; i < NVERBS; i++)
			if (verbs[i].run)
				printf("%s\t%s\n", verbs[i].name, verbs[i].summary);
		return SC_EXIT_OK;
	}
	if (strcmp(what, "--man") != 0) {
		fprintf(stderr, "starcloud help: expected --man or --verbs\n");
		return SC_EXIT_USAGE;
	}
	printf(".TH STARCLOUD 1 \"\" \"starcloud %s\" \"Starcloud\"\n"
	       ".SH NAME\nstarcloud \\- GPU cluster scheduler, control plane and serving "
	       "gateway\n.SH SYNOPSIS\n.B starcloud\n.I command\n[\\fIoptions\\fR]\n"
	       ".SH DESCRIPTION\nOne binary with a command per task; \\fBstarcloud "
	       "\\fIcommand\\fB \\-\\-help\\fR describes each.\n.SH COMMANDS\n",
	       SC_VERSION);
	for (size_t i = 0; i < NVERBS; i++)
		if (verbs[i].run)
			printf(".TP\n.B %s\n%s\n", verbs[i].name, verbs[i].summary);
	return SC_EXIT_OK;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return SC_EXIT_USAGE;
	}
	if (strcmp(argv[1], "help") == 0 && argc == 3)
		return help_for_docs(argv[2]);
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return SC_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0)
		return sc_cli_version(1, argv + 1);
	for (size_t i = 0; i < NVERBS; i++) {
		if (strcmp(argv[1], verbs[i].name) != 0)
			continue;
		if (!verbs[i].run) {
			fprintf(stderr, "starcloud: \"%s\" (%s) is not available in this build\n",
			        verbs[i].name, verbs[i].summary);
			return SC_EXIT_FAIL;
		}
		/* A write to a socket whose peer has gone raises SIGPIPE, which
		 * kills the process by default: an abandoned stream would take a
		 * whole daemon down. Ignored here, the write fails with EPIPE and
		 * closes that connection only. Children started with uv_spawn get
		 * the default back (libuv resets every signal in the child). */
		if (verbs[i].daemon)
			signal(SIGPIPE, SIG_IGN);
		return verbs[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "starcloud: unknown command \"%s\"\n\n", argv[1]);
	usage(stderr);
	return SC_EXIT_USAGE;
}
