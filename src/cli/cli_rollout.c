/* `starcloud rollout status|promote|abort ...`: one verb, two back ends.
 *
 * By default it talks to the server, the source of truth for rollouts of
 * Deployments (sc_cli_rollout_server in client.c, docs/SERVING.md). With
 * --gateway URL, or STARCLOUD_GATEWAY set, it is a thin client of a
 * gateway's /admin/rollouts (libcurl, blocking), for rollouts a gateway
 * runs from its own --rollout flags. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "base/cmdline.h"
#include "cli/cli.h"
#include "cli/cli_conn.h"
#include "cli/client.h"
#include "gateway/gateway.h"
#include "starcloud/buf.h"

#define MAX_ANSWER (4u << 20)

/* Performs one request; returns the HTTP status, or -1 when the gateway
 * could not be reached (the message is printed). */
static long call(const char *method, const char *url, const char *body, sc_buf_t *out)
{
	CURL *h = curl_easy_init();
	if (!h)
		return -1;
	struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
	sc__cli_curl_limits(h, 10000);
	char err[256];
	long status = sc__cli_curl_do(h, method, url, hd, body, out, err, sizeof(err));
	if (status < 0)
		fprintf(stderr, "starcloud rollout: %s: %s\n", url, err);
	return status;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: starcloud rollout status [DEPLOYMENT] [--server URL] [-o table|json]\n"
	           "       starcloud rollout promote|abort|pause|resume DEPLOYMENT [--server URL]\n"
	           "       starcloud rollout status [MODEL] --gateway URL [-o table|json]\n"
	           "       starcloud rollout promote|abort MODEL --gateway URL\n\n"
	           "Shows or steers canary rollouts. Without --gateway (and without\n"
	           "$STARCLOUD_GATEWAY) it asks the server (the source of truth for\n"
	           "Deployments: /api/v1/deployments/NAME/rollout); with them, a\n"
	           "gateway's own rollouts (/admin/rollouts).\n");
}

static void print_row(json_t *ro)
{
	json_t *lw = json_object_get(json_object_get(ro, "lastWindow"), "canary");
	printf("%-24s %-8s %-8s %-12s %6lld%%  %5.1f%%  %s\n",
	       json_string_value(json_object_get(ro, "model")),
	       json_string_value(json_object_get(ro, "stable")),
	       json_string_value(json_object_get(ro, "canary")),
	       json_string_value(json_object_get(ro, "state")),
	       (long long)json_integer_value(json_object_get(ro, "weight")),
	       100 * json_number_value(json_object_get(lw, "errorRate")),
	       json_string_value(json_object_get(ro, "reason")));
}

static int show(const char *text, int as_json)
{
	if (as_json) {
		printf("%s\n", text);
		return SC_EXIT_OK;
	}
	json_t *j = json_loads(text, 0, NULL);
	if (!j) {
		fprintf(stderr, "starcloud rollout: the gateway sent something that is not JSON\n");
		return SC_EXIT_FAIL;
	}
	printf("%-24s %-8s %-8s %-12s %7s %6s  %s\n", "MODEL", "STABLE", "CANARY", "STATE",
	       "WEIGHT", "ERR", "REASON");
	json_t *list = json_object_get(j, "rollouts");
	if (list) {
		for (size_t i = 0; i < json_array_size(list); i++)
			print_row(json_array_get(list, i));
	} else {
		print_row(j);
	}
	json_decref(j);
	return SC_EXIT_OK;
}

/* The gateway back end's flags (`--help` is the verb's, usage() above). */
typedef struct gw_args {
	const char *gateway;
	int output; /* table, json */
} gw_args_t;

static const sc_flag_t gw_flags[] = {
    {.name = "--gateway",
     SC_FLAG_AT(STR, gw_args_t, gateway),
     .meta = "URL",
     .env = "STARCLOUD_GATEWAY",
     .def = "http://127.0.0.1:8080",
     .help = "the gateway whose own rollouts to show or steer"},
    {.name = "--output",
     .alias = "-o",
     SC_FLAG_AT(CHOICE, gw_args_t, output),
     .choices = "table|json",
     .def = "table",
     .help = "output format"},
};

static const sc_command_t gw_cmd = {
    .name = "rollout",
    .flags = gw_flags,
    .nflags = sizeof(gw_flags) / sizeof(gw_flags[0]),
    .max_args = 2,
};

static int wants_gateway(int argc, char **argv)
{
	const char *env = getenv("STARCLOUD_GATEWAY");
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--gateway") == 0)
			return 1;
	return env && *env;
}

int sc_cli_rollout(int argc, char **argv)
{
	if (sc__cli_wants_help(argc, argv)) {
		usage(stdout);
		return SC_EXIT_OK;
	}
	if (!wants_gateway(argc, argv))
		return sc_cli_rollout_server(argc, argv);
	gw_args_t g = {0};
	int nargs = 0;
	if (sc_flags_parse(&gw_cmd, &g, argc, argv, &nargs) != 0)
		return SC_EXIT_USAGE;
	const char *gw = g.gateway;
	int as_json = g.output == 1;
	const char *pos[2] = {nargs > 0 ? argv[1] : NULL, nargs > 1 ? argv[2] : NULL};
	const char *verb = pos[0];
	int status = verb && strcmp(verb, "status") == 0;
	if (!verb || (!status && strcmp(verb, "promote") != 0 && strcmp(verb, "abort") != 0) ||
	    (!status && !pos[1])) {
		usage(stderr);
		return SC_EXIT_USAGE;
	}
	char url[1024], body[64];
	snprintf(url, sizeof(url), "%s/admin/rollouts%s%s", gw, pos[1] ? "/" : "",
	         pos[1] ? pos[1] : "");
	snprintf(body, sizeof(body), "{\"action\":\"%s\"}", verb);
	sc_buf_t out;
	sc_buf_init(&out, MAX_ANSWER);
	long st = call(status ? "GET" : "POST", url, status ? NULL : body, &out);
	int rc;
	if (st < 0) {
		rc = SC_EXIT_FAIL;
	} else if (st != 200) {
		fprintf(stderr, "starcloud rollout: HTTP %ld: %s\n", st, out.data ? out.data : "");
		rc = st == 400 ? SC_EXIT_USAGE : SC_EXIT_FAIL;
	} else {
		rc = show(out.data ? out.data : "{}", as_json);
	}
	sc_buf_free(&out);
	return rc;
}
